"""The twenty-ninth round of real configs (tests/data/hf-twentyninth/, sources in its SOURCES.md): LLM-TPU's copies of
MiniCPM3-4B, Llama 2 13B Chat, Qwen2-72B-Instruct and an AWQ Qwen2-VL-2B, NVIDIA's NVFP4 MiniMax-M3, GLM-5.1 and
Qwen3.6-27B, SGLang's DeepSeek-V4-Flash in its reference keys and Qwen3-VL-235B-A22B-Instruct written whole.

LLM-TPU's MiniCPM3-4B file writes no model_type, naming its class (MiniCPM3ForCausalLM) in architectures alone, and was
refused with "no value head dim found; tried v_head_dim": read without a type, its latent attention took its value
width from a key MiniCPM3's code never reads. A file without a model_type whose first architecture is a known type's
causal-LM class (transformers names each class after its type) is now read as that type, and says so: this one as
MiniCPM3-4B, 4,073,875,968 parameters, as the corpus's file of it with model_type "minicpm3"."""

import json
from pathlib import Path

import pytest

from helpers import read_config, read_config_said
from shapewise.errors import ShapewiseError
from shapewise.hf import load_config, to_hf_config

DATA = Path(__file__).parent / "data"
ROUND = DATA / "hf-twentyninth"
FILES = {p.stem: p for p in DATA.glob("hf*/*.json")}


def test_a_file_without_model_type_is_read_as_the_type_its_architectures_class_names():
    shape, said = read_config_said(ROUND, "minicpm3-4b-no-model-type")
    whole = load_config(FILES["minicpm3-4b"])
    assert shape.replace(name=whole.name, source=whole.source) == whole
    assert shape.params == 4_073_875_968 and (shape.kv_lora_rank, shape.q_lora_rank) == (256, 768)
    assert shape.v_head_dim in (None, 2560 // 40)  # MiniCPM3's value heads are hidden / heads wide
    assert "no model_type: read as minicpm3" in said and "MiniCPM3ForCausalLM" in said and "guessed" not in said


def test_only_a_known_types_causal_lm_class_names_a_type(tmp_path):
    cfg = {**json.loads((ROUND / "minicpm3-4b-no-model-type.json").read_text()), "architectures": ["MiniCPM9Model"]}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ShapewiseError, match="v_head_dim"):
        load_config(path)
    for arch, model_type, stem in (("LlamaForCausalLM", "llama", "llama-2-7b"), ("QWenLMHeadModel", "qwen", "qwen-7b"),
                                   ("Qwen2MoeForCausalLM", "qwen2_moe", "qwen1.5-moe-a2.7b"),
                                   ("GPTNeoXForCausalLM", "gpt_neox", "pythia-1b")):
        base = json.loads(FILES[stem].read_text())
        path.write_text(json.dumps({k: v for k, v in base.items() if k != "model_type"} | {"architectures": [arch]}))
        shape, said = read_config(path)
        assert f"read as {model_type}," in " ".join(said) and not any("guessed" in s for s in said), arch
        assert shape.params == load_config(FILES[stem]).params


def test_a_suggestion_for_the_untyped_minicpm3_keeps_its_value_width_from_hidden_over_heads():
    shape = load_config(ROUND / "minicpm3-4b-no-model-type.json")
    base = json.loads((ROUND / "minicpm3-4b-no-model-type.json").read_text())
    written = to_hf_config(shape.replace(num_layers=40), base)
    assert "model_type" not in written and "v_head_dim" not in written and written["num_hidden_layers"] == 40


def test_llama_2_13b_and_qwen2_72b_count_to_their_published_sizes():
    llama, said = read_config_said(ROUND, "llama-2-13b-chat-hf")
    assert (llama.num_layers, llama.hidden, llama.num_heads, llama.ffn_width, llama.vocab) == (40, 5120, 40, 13824,
                                                                                            32000)
    assert llama.params == 40 * (4 * 5120**2 + 3 * 5120 * 13824 + 2 * 5120) + 2 * 32000 * 5120 + 5120 == 13_015_864_320
    assert not said
    qwen, said = read_config_said(ROUND, "qwen2-72b-instruct")
    assert (qwen.num_layers, qwen.hidden, qwen.num_heads, qwen.num_kv_heads, qwen.ffn_width) == (80, 8192, 64, 8, 29568)
    assert qwen.qkv_bias and not qwen.tied_embeddings and not said
    assert qwen.params == 72_706_203_648  # the Qwen2 announcement's 72.71B; 70.21B without the two tables
    assert round((qwen.params - 2 * qwen.vocab * qwen.hidden) / 1e9, 2) == 70.21


def test_minimax_m3_in_its_vl_wrapper_reads_as_the_corpus_minimax_m3():
    ours, said = read_config_said(ROUND, "minimax-m3-nvfp4")
    theirs = load_config(FILES["minimax-m3"])
    assert ours.replace(name=theirs.name, source=theirs.source) == theirs
    assert (ours.params, ours.active_params, ours.num_dense_layers) == (425_950_417_920, 25_738_318_848, 3)
    assert "vision encoder" in said and "1 multi-token prediction module" in said and "quantized" in said


def test_glm_5_1_with_indexer_and_mlp_layer_types_reads_as_the_corpus_glm_5_1():
    ours, said = read_config_said(ROUND, "glm-5.1-nvfp4")
    theirs = load_config(FILES["glm-5.1"])
    assert ours.replace(name=theirs.name, source=theirs.source) == theirs
    assert (ours.params, ours.num_dense_layers, ours.kv_lora_rank) == (743_180_190_720, 3, 512)
    assert "index_topk 2048" in said and "quantized" in said


def test_qwen2_vl_awq_and_qwen3_vl_235b_instruct_read_their_language_models():
    awq, said = read_config_said(ROUND, "qwen2-vl-2b-instruct-awq")
    assert awq == load_config(FILES["qwen2-vl-2b-instruct"]).replace(name=awq.name, source=awq.source)
    assert awq.params == 1_543_714_304 and "awq" in said and "vision encoder" in said
    instruct, said = read_config_said(ROUND, "qwen3-vl-235b-a22b-instruct")
    thinking = load_config(FILES["qwen3-vl-235b-a22b-thinking"])
    assert instruct.replace(name=thinking.name, source=thinking.source) == thinking
    assert (instruct.params, instruct.active_params) == (235_093_634_560, 22_190_763_520) and "vision encoder" in said


@pytest.mark.parametrize("stem, why", [
    ("qwen3.6-27b-nvfp4", "qwen3_5_text is a linear-attention hybrid"),
    ("deepseek-v4-flash-fp8-ref", "grouped low-rank output projection \\(o_lora_rank, o_groups\\)")])
def test_refused_in_one_line(stem, why):
    with pytest.raises(ShapewiseError, match=why) as err:
        load_config(ROUND / f"{stem}.json")
    assert "\n" not in str(err.value)
