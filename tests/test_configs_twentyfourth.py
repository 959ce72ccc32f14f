"""The twenty-fourth round of real configs (tests/data/hf-twentyfourth/, sources in its SOURCES.md): what each file
read as, and the served length a file gives as max_length beside shorter positions (MiniCPM-2B-128k's)."""

import json
import warnings
from pathlib import Path

import pytest

from shapewise.errors import ShapewiseError, ShapewiseWarning
from shapewise.hf import _shape_from_config, load_config
from shapewise.ops import model_ops
from shapewise.rules import caveats
from shapewise.shapes import Workload

ROUND = Path(__file__).parent / "data" / "hf-twentyfourth"


def _unwarned(stem):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShapewiseWarning)
        return load_config(ROUND / f"{stem}.json")


def test_minicpm_128k_serves_the_max_length_its_file_gives():
    # MiniCPM-2B-128k writes 65,536 positions, stretched by dynamic NTK scaling (factor 4), beside max_length 131,072:
    # read as a 65,536-token context, a 128k sequence was said to be one the model was not trained for
    s = _unwarned("minicpm-2b-128k")
    assert (s.context, s.tied_embeddings, s.vocab, s.num_layers, s.hidden) == (131072, False, 122760, 40, 2304)
    assert not caveats(s, Workload(batch=1, seq=131072))
    assert caveats(s, Workload(batch=1, seq=262144))  # past the served length it is still said
    base = json.loads((ROUND / "minicpm-2b-128k.json").read_text())
    # transformers' PretrainedConfig writes its generation default, 20, as max_length: shorter, never the context
    assert _shape_from_config({**base, "max_length": 20}, "x", "x").context == 65536
    assert _shape_from_config({k: v for k, v in base.items() if k != "max_position_embeddings"}, "x", "x").context == 0
    # the structure is MiniCPM-2B's: 2.4B without its two embeddings (the model card's "2.4B excluding embeddings")
    assert s.params - 2 * s.vocab * s.hidden == 2_442_057_984


def test_phi4_mini_reads_its_partial_rotary_and_tied_vocabulary():
    # Phi-4-mini-instruct (phi3): 24 heads of 128 over 8 kv heads, three quarters of each head rotated, a tied
    # 200,064-row vocabulary; Phi3ForCausalLM's count, to the parameter
    s = _unwarned("phi-4-mini-instruct")
    assert (s.num_heads, s.kv_heads, s.d_head, s.rotary_width, s.tied_embeddings) == (24, 8, 128, 96, True)
    h, kv, f, L, V = 3072, 1024, 8192, 32, 200064
    assert s.params == L * (h * h + 2 * h * kv + h * h + 3 * h * f + 2 * h) + V * h + h == 3_836_021_760
    rope = next(op for op in model_ops(s, Workload(batch=1, seq=1024)) if op.name == "attn/rope")
    assert rope.n == (24 + 8) * 96  # the rotated share of every query and key head


def test_mistral_small_31_reads_its_head_dim_inside_the_wrapper():
    # Mistral3ForConditionalGeneration: the text_config's head_dim, 128, where 5,120 / 32 heads would be 160; no
    # tie_word_embeddings anywhere: MistralConfig's untied head. Its language model is Devstral Small 2507's
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        s = load_config(ROUND / "mistral-small-3.1-24b-instruct-2503.json")
    assert [str(w.message).split(": ", 1)[1] for w in record] == [
        "mistral3 is multimodal; shapewise prices its language model (text_config) only, not its vision encoder "
        "(vision_config)"]
    assert (s.d_head, s.num_heads, s.kv_heads, s.tied_embeddings, s.ffn_width) == (128, 32, 8, False, 32768)
    devstral = load_config(ROUND.parent / "hf-later" / "devstral-small-2507.json")
    assert s.params == devstral.params == 23_572_403_200


@pytest.mark.parametrize(("stem", "params", "context"), [
    ("ministral-8b-instruct-2410", 8_019_808_256, 32768),  # sliding_window 32,768 = the context: no layer windowed
    ("qwen-1.8b", 1_836_828_672, 8192),  # Qwen 1: intermediate_size 11,008 holds both halves, 5,504 each
    ("smollm-360m", 361_821_120, 2048),
    ("qwen2-0.5b", 494_032_768, 32768),
    ("qwen2.5-1.5b", 1_543_714_304, 131072),
    ("codellama-13b", 13_016_028_160, 16384),
    ("llama-3-70b", 70_553_706_496, 8192),
])
def test_the_rounds_other_files_read_as_their_code_builds_them(stem, params, context):
    s = _unwarned(stem)
    assert (s.params, s.context, s.window) == (params, context, 0)


@pytest.mark.parametrize(("stem", "said"), [
    ("zamba2-7b", "zamba2 \\(Zamba2ForCausalLM\\) is a Mamba/attention hybrid"),  # Zyphra's own keys, 81 layers
    ("qwen3.5-35b-a3b", "qwen3_5_moe_text is a linear-attention hybrid"),
])
def test_the_rounds_hybrids_are_refused_in_one_line(stem, said):
    with pytest.raises(ShapewiseError, match=said) as err:
        load_config(ROUND / f"{stem}.json")
    assert "\n" not in str(err.value)
