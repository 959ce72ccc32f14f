"""The twenty-seventh round of real configs (tests/data/hf-twentyseventh/, sources in its SOURCES.md): StarCoder's
multi-query layout under WizardCoder's name, two InternVL2 wrappers over Phi-3-mini and InternLM2-1.8B, ChatGLM3-6B-32K
and an NVFP4 DeepSeek-V4-Flash, all read or refused as the rules before them do; and MiniCPM-V 2.6, whose type
(`minicpmv`, one class for every version) was read by a guess without its Qwen2's q, k and v biases, 129,024
parameters short and said only as a guess: its `version` names the language model MiniCPM-V's code builds."""

import json
from pathlib import Path

import pytest

from helpers import read_config
from shapewise.errors import ShapewiseError
from shapewise.hf import load_config

ROUND = Path(__file__).parent / "data" / "hf-twentyseventh"


def test_wizardcoder_reads_as_starcoder_with_one_key_value_head():
    s = load_config(ROUND / "wizardcoder-15b-v1.0.json")
    assert (s.num_layers, s.hidden, s.num_heads, s.num_kv_heads, s.ffn_width, s.vocab) == (40, 6144, 48, 1, 24576, 49153)


def test_internvl2_llm_config_is_read_as_its_language_model():
    s = load_config(ROUND / "internvl2-4b.json")
    assert (s.num_layers, s.hidden, s.num_heads, s.num_kv_heads, s.ffn_width, s.vocab) == (32, 3072, 32, None, 8192, 32020)  # None: each head its own key and value
    s = load_config(ROUND / "internvl2-2b.json")
    assert (s.num_layers, s.hidden, s.num_heads, s.num_kv_heads, s.ffn_width, s.vocab) == (24, 2048, 16, 8, 8192, 92553)


def test_deepseek_v4_nvfp4_is_refused_in_one_line():
    with pytest.raises(ShapewiseError, match="o_lora_rank, o_groups") as err:
        load_config(ROUND / "deepseek-v4-flash-nvfp4.json")
    assert "\n" not in str(err.value)


def _read(path):
    shape, said = read_config(path)
    return shape, " ".join(said)


def test_minicpm_v_2_6_is_read_by_its_versions_language_model():
    shape, said = _read(ROUND / "minicpm-v-2_6.json")
    assert shape.qkv_bias and shape.params == 7_612_763_648  # Qwen2-7B's, 398 rows fewer in each embedding
    assert "not one shapewise knows" not in said and "vision encoder" in said


@pytest.mark.parametrize("version, bias", [(None, False), (2.5, False), ("2.6", True), (4.0, False), (4.5, False)])
def test_each_minicpm_v_version_is_its_language_models(tmp_path, version, bias):
    """2.0 (no version, 2304 wide, 64 queries) MiniCPM, 2.5 and 4.0 Llama, 2.6 Qwen2, 4.5 Qwen3: none guessed."""
    cfg = json.loads((ROUND / "minicpm-v-2_6.json").read_text())
    cfg.pop("version")
    if version is None:
        cfg.update(hidden_size=2304, num_attention_heads=36, num_key_value_heads=36)
    else:
        cfg["version"] = version
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    shape, said = _read(path)
    assert shape.qkv_bias is bias and "not one shapewise knows" not in said


@pytest.mark.parametrize("version", [9.9, "next"])
def test_a_minicpm_v_version_its_code_never_had_is_still_a_named_guess(tmp_path, version):
    cfg = {**json.loads((ROUND / "minicpm-v-2_6.json").read_text()), "version": version}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert "model type 'minicpmv' is not one shapewise knows" in _read(path)[1]
