"""The twenty-eighth round of real configs (tests/data/hf-twentyeighth/, sources in its SOURCES.md): mlc-llm's copies of
hub files, three Qwen1.5 chat models, CodeFuse's Qwen-7B fine-tune, MiniCPM-V 4.0 and Qwen2.5-VL-3B. Two of mlc-llm's
files leave out a key whose configuration class fills in something that changes the ops, and both were read as if the
key said none: DeepSeek-V2-Lite's copy without q_lora_rank was priced without a query latent, 42,508,800 parameters
short of the 1536-wide latent DeepseekV2Config builds (and said nothing), and Mistral 7B v0.1's copy without
sliding_window was priced with full attention where MistralConfig slides a 4096-token window. Both types now fill in
their classes' defaults where a file leaves the key out; an explicit null still means none, and so that the filled-in
latent widths cannot turn a plain-attention DeepSeek-V2 into a latent one, use_mla false (DeepSeek-VL2's
DeepseekV2Config) is now read as the plain attention it builds."""

import json
from pathlib import Path

from helpers import read_config
from shapewise.hf import load_config

ROUND = Path(__file__).parent / "data" / "hf-twentyeighth"
DATA = Path(__file__).parent / "data"


def _read(path):
    shape, said = read_config(path)
    return shape, " ".join(said)


def test_deepseek_v2_without_q_lora_rank_builds_its_configuration_classes_query_latent():
    shape, said = _read(ROUND / "deepseek-v2-lite-mlc.json")
    assert (shape.kv_lora_rank, shape.q_lora_rank, shape.rope_head_dim) == (512, 1536, 64)
    assert shape.params == 15_748_993_024  # the hub file's 15,706,484,224 and a query latent of 1536
    assert "leaves q_lora_rank out" in said and "1536-wide query latent" in said


def test_deepseek_v2_with_q_lora_rank_null_has_no_query_latent_and_says_nothing_of_it():
    shape, said = _read(DATA / "hf-fourth" / "deepseek-v2-lite.json")
    assert not shape.q_lora_rank and shape.params == 15_706_484_224
    assert "q_lora_rank" not in said


def test_deepseek_v2_latent_widths_left_out_are_the_classes(tmp_path):
    cfg = json.loads((ROUND / "deepseek-v2-lite-mlc.json").read_text())
    for key in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        cfg.pop(key)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    ours, whole = load_config(path), load_config(ROUND / "deepseek-v2-lite-mlc.json")
    assert ours.replace(name=whole.name, source=whole.source) == whole


def test_mistral_without_sliding_window_slides_mistral_configs_window():
    shape = load_config(ROUND / "mistral-7b-v0.1-mlc.json")
    assert (shape.window, shape.global_every) == (4096, 0)
    assert shape.params == load_config(DATA / "hf" / "mistral-7b-v0.1.json").params == 7_241_732_096


def test_a_mistral_or_ministral_window_written_null_is_none(tmp_path):
    for model_type in ("mistral", "ministral"):
        cfg = {**json.loads((ROUND / "mistral-7b-v0.1-mlc.json").read_text()), "model_type": model_type,
               "sliding_window": None}
        path = tmp_path / f"{model_type}.json"
        path.write_text(json.dumps(cfg))
        assert not load_config(path).window
        cfg.pop("sliding_window")
        path.write_text(json.dumps(cfg))
        assert load_config(path).window == 4096


def test_qwen1_5_chat_models_read_as_multi_head_qwen2_with_q_k_v_biases():
    for stem, layers, hidden, heads, ffn, tied in (("qwen1.5-0.5b-chat", 24, 1024, 16, 2816, True),
                                                   ("qwen1.5-4b-chat", 40, 2560, 20, 6912, False),
                                                   ("qwen1.5-7b-chat", 32, 4096, 32, 11008, False)):
        s, said = _read(ROUND / f"{stem}.json")
        assert (s.num_layers, s.hidden, s.num_heads, s.ffn_width, s.vocab) == (layers, hidden, heads, ffn, 151936)
        assert s.num_kv_heads in (None, heads) and s.qkv_bias and s.tied_embeddings is tied and not said


def test_mlc_llms_copies_in_older_keys_read_as_the_corpus_files_of_those_models():
    """Phi-1.5 in phi-msft keys, GPT-J with an unknown rope_type and CodeFuse's Qwen-7B: the same ops."""
    for ours, theirs in (("phi-1_5-msft", "hf/phi-1_5"), ("gpt-j-6b-mlc", "hf/gpt-j-6b"),
                         ("codefuse-devops-model-7b-chat", "hf-later/qwen-7b")):
        a, b = load_config(ROUND / f"{ours}.json"), load_config(DATA / f"{theirs}.json")
        fields = ("params", "num_layers", "hidden", "num_heads", "num_kv_heads", "ffn_width", "vocab", "mlp", "norm",
                  "rotary_fraction", "parallel_attn", "qkv_bias", "tied_embeddings")
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields], ours


def test_minicpm_v_4_reads_its_version_language_model_without_a_guess():
    shape, said = _read(ROUND / "minicpm-v-4.json")
    assert (shape.num_layers, shape.hidden, shape.num_heads, shape.num_kv_heads, shape.ffn_width) == (32, 2560, 32, 2,
                                                                                                      10240)
    assert not shape.qkv_bias and shape.params == 3_605_834_240
    assert "not one shapewise knows" not in said and "vision encoder" in said


def test_qwen2_5_vl_3b_reads_its_language_model_tied_with_biases():
    shape, said = _read(ROUND / "qwen2.5-vl-3b-instruct.json")
    assert (shape.num_layers, shape.hidden, shape.num_heads, shape.num_kv_heads) == (36, 2048, 16, 2)
    assert shape.qkv_bias and shape.tied_embeddings and shape.params == 3_085_938_688
    assert not shape.window and "vision encoder" in said


def test_deepseek_v2_with_use_mla_false_reads_plain_attention_whatever_the_defaults(tmp_path):
    """DeepSeek-VL2's DeepseekV2Config: use_mla false builds multi-head attention, the latent widths unused."""
    cfg = {**json.loads((ROUND / "deepseek-v2-lite-mlc.json").read_text()), "use_mla": False}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    shape, said = _read(path)
    assert not shape.kv_lora_rank and not shape.q_lora_rank and shape.head_dim in (None, 128)
    assert "q_lora_rank" not in said
