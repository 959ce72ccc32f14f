"""The twenty-seventh round of real configs (tests/data/hf-twentyseventh/, sources in its SOURCES.md): StarCoder's
multi-query layout under WizardCoder's name, two InternVL2 wrappers over Phi-3-mini and InternLM2-1.8B, ChatGLM3-6B-32K
and an NVFP4 DeepSeek-V4-Flash; all read, or refused, as the rules before them do (no fix was needed for these)."""

from pathlib import Path

import pytest

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
