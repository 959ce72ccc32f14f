"""The twenty-fifth round of real configs (tests/data/hf-twentyfifth/, sources in its SOURCES.md): what each file
read as, LLaVA's own config.json read by the language model its class names (LLaVA-OneVision's Qwen2), and an EAGLE
draft head refused."""

import json
from pathlib import Path

import pytest

from helpers import read_config
from shapewise.errors import ShapewiseError
from shapewise.hf import _shape_from_config, load_config

ROUND = Path(__file__).parent / "data" / "hf-twentyfifth"
CORPUS = Path(__file__).parent / "data" / "hf"


def test_llava_own_qwen2_class_reads_its_language_models_qkv_biases():
    # LLaVA-OneVision's own file: model_type "llava", Qwen2's keys at the top level, LlavaQwenForCausalLM, which
    # LLaVA-NeXT's code builds on Qwen2ForCausalLM (biases on q, k and v whatever the file says). Read by the first
    # LLaVA's Llama rule it was counted 129,024 short (28 × (3584 + 2 × 512)) and its layer built without them
    s, said = read_config(ROUND, "llava-onevision-qwen2-7b-ov")
    assert said == ["llava is multimodal; shapewise prices its language model only, not its vision encoder "
                    "(mm_vision_tower)"]
    assert (s.qkv_bias, s.bias, s.num_kv_heads, s.ffn, s.tied_embeddings, s.context) == (True, False, 4, 18944,
                                                                                         False, 32768)
    assert s.params == load_config(CORPUS / "qwen2-7b.json").params == 7_615_616_512
    base = json.loads((ROUND / "llava-onevision-qwen2-7b-ov.json").read_text())
    # the first LLaVA's class, or none named, is still Llama's rule: no biases
    assert not _shape_from_config({**base, "architectures": ["LlavaLlamaForCausalLM"]}, "x", "x").qkv_bias
    assert not _shape_from_config({k: v for k, v in base.items() if k != "architectures"}, "x", "x").qkv_bias
    # a class LLaVA builds on a type whose layout shapewise does not read here is refused in one line, not guessed
    with pytest.raises(ShapewiseError, match="LLaVA's own LlavaGemmaForCausalLM builds its language model") as err:
        _shape_from_config({**base, "architectures": ["LlavaGemmaForCausalLM"]}, "x", "x")
    assert "\n" not in str(err.value)


def test_llava_16_and_internvl_read_their_language_models():
    # LLaVA-1.6 Vicuna-13B's own file (LlavaLlamaForCausalLM): Vicuna-13B v1.5's layers, Llama 2 13B's count
    s, said = read_config(ROUND, "llava-v1.6-vicuna-13b")
    assert said == ["llava is multimodal; shapewise prices its language model only, not its vision encoder "
                    "(mm_vision_tower)"]
    assert (s.params, s.qkv_bias, s.context) == (13_015_864_320, False, 4096)
    # InternVL2.5-2B (internvl_chat): its llm_config, InternLM2.5-1.8B-chat, packed wqkv, no biases, untied
    s, said = read_config(ROUND, "internvl2.5-2b")
    assert said == ["internvl_chat is multimodal; shapewise prices its language model (llm_config) only, not its "
                    "vision encoder (vision_config)"]
    h, kv, f, L, V = 2048, 1024, 8192, 24, 92553
    assert s.params == L * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) + 2 * V * h + h == 1_889_146_880
    assert (s.num_kv_heads, s.context, s.bias) == (8, 32768, False)


@pytest.mark.parametrize(("stem", "method", "params", "context"), [
    ("llama-2-7b-awq", "awq", 6_738_415_616, 4096),
    ("llama-2-7b-gptq", "gptq", 6_738_415_616, 4096),  # no num_key_value_heads: as many as heads
    ("llama-3.1-405b-instruct-fp8", "compressed-tensors, 8-bit weights", 405_853_388_800, 131072),
    ("llama-3.1-8b-instruct-fp8-dynamic", "compressed-tensors, 8-bit weights", 8_030_261_248, 131072),
])
def test_the_quantized_checkpoints_read_as_their_models_and_say_so(stem, method, params, context):
    s, said = read_config(ROUND, stem)
    assert (s.params, s.context) == (params, context)
    assert len(said) == 1 and said[0].startswith(f"its checkpoint is quantized ({method}, quantization_config)")


@pytest.mark.parametrize(("stem", "said"), [
    ("codet5-small-ft", "t5 \\(T5ForConditionalGeneration\\) is an encoder-decoder model"),
    # an EAGLE-3 draft head (model_type llama, one layer, draft_vocab_size) was priced as a one-layer Llama of 1.44B
    # over the target's 151,936-row vocabulary, as if it ran alone
    ("qwen3-8b-eagle3", "its EAGLE draft head: one layer over its embedding and the target model's hidden states, "
                        "run beside that target model"),
])
def test_the_rounds_encoder_decoder_and_draft_head_are_refused_in_one_line(stem, said):
    with pytest.raises(ShapewiseError, match=said) as err:
        load_config(ROUND / f"{stem}.json")
    assert "\n" not in str(err.value)
    base = json.loads((ROUND / f"{stem}.json").read_text())
    if stem == "qwen3-8b-eagle3":  # vLLM's name for the same head, refused alike
        with pytest.raises(ShapewiseError, match="EAGLE draft head"):
            _shape_from_config({**base, "architectures": ["Eagle3LlamaForCausalLM"]}, "x", "x")
