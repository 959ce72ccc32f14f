"""The twenty-sixth round of real configs (tests/data/hf-twentysixth/, sources in its SOURCES.md): GLM-4.1V read by
GLM-4's rule, not guessed; VILA's llm_cfg and Qwen2-Audio's few-key text_config read as nested language models; the
Qwen thinkers refused in one line; LocateAnything's non-causal attention said."""

from pathlib import Path

import pytest

from helpers import read_config
from shapewise.errors import ShapewiseError
from shapewise.hf import load_config

ROUND = Path(__file__).parent / "data" / "hf-twentysixth"


def test_glm4v_is_read_by_glm4s_rule_not_guessed():
    # read as an unknown type it was guessed biases on every linear and two norms a layer (9,401,374,720)
    s, said = read_config(ROUND, "glm4v")
    assert said == ["glm4v is multimodal; shapewise prices its language model only, not its vision encoder "
                    "(vision_config)"]
    h, kv, f, L, V = 4096, 256, 13696, 40, 151552
    assert (s.qkv_bias, s.bias) == (True, False)
    assert s.params == L * (2 * h * h + 2 * h * kv + (h + 2 * kv) + 3 * h * f + 4 * h) + 2 * V * h + h \
        == 9_400_279_040


def test_vila_llm_cfg_and_qwen2_audio_text_config_are_read_as_language_models():
    # both were refused ("no layer count found", "no hidden size found")
    s, said = read_config(ROUND, "vila1.5-3b")
    assert said == ["llava_llama is multimodal; shapewise prices its language model (llm_cfg) only, not its vision "
                    "encoder (vision_tower_cfg)"]
    assert (s.hidden, s.num_layers, s.vocab, s.params) == (2560, 32, 32000, 2_701_560_320)
    # Qwen2-Audio's text_config names its MLP width and vocabulary; Qwen2Config's defaults are the rest
    s, said = read_config(ROUND, "qwen2-audio")
    assert said == ["qwen2_audio is multimodal; shapewise prices its language model (text_config) only, not its "
                    "audio encoder (audio_config)"]
    h, f, L, V = 4096, 11008, 32, 156032
    assert (s.qkv_bias, s.tied_embeddings) == (True, False)
    assert s.params == L * (4 * h * h + 3 * h + 3 * h * f + 2 * h) + 2 * V * h + h == 7_754_878_976


@pytest.mark.parametrize(("stem", "said"), [
    ("qwen2.5-omni", "qwen2_5_omni \\(Qwen2_5OmniForConditionalGeneration\\) nests its language model in a thinker "
                     "\\(thinker_config's text_config, beside its encoders\\) and a talker \\(talker_config\\)"),
    ("qwen3-asr", "qwen3_asr \\(Qwen3ASRForConditionalGeneration\\) nests its language model in a thinker"),
])
def test_a_thinker_is_refused_in_one_line(stem, said):
    with pytest.raises(ShapewiseError, match=said) as err:
        load_config(ROUND / f"{stem}.json")
    assert "\n" not in str(err.value)


def test_attention_that_is_not_causal_is_said():
    s, said = read_config(ROUND, "locateanything")
    assert said[0] == ("its attention is not causal (causal_attn false, block_size 6): shapewise prices causal "
                       "attention, about half the attention work of one that is not")
    assert (s.num_layers, s.num_kv_heads, s.tied_embeddings, s.qkv_bias) == (36, 2, True, True)
