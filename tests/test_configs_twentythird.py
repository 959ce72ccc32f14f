"""The twenty-third round of real configs (tests/data/hf-twentythird/, sources in its SOURCES.md): what each file
read as, and the biases on the output projections alone that TeleChat's and GPT-Neo's code build."""

import json
import warnings
from pathlib import Path

import pytest

from shapewise.document import _bias_words
from shapewise.errors import ShapewiseError, ShapewiseWarning
from shapewise.hf import _shape_from_config, load_config, to_hf_config
from shapewise.ops import model_ops
from shapewise.parallel import whole_params
from shapewise.shapes import STRUCTURAL_FIELDS, ModelShape, Workload, canonical

DATA = Path(__file__).parent / "data"
ROUND = DATA / "hf-twentythird"


def _structure(shape) -> dict:
    return {f: getattr(shape, f) for f in STRUCTURAL_FIELDS}


def _quiet(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShapewiseWarning)
        return load_config(path)


def test_telechat2_reads_by_its_own_rule_to_the_parameter():
    # TeleChat2-115B (telechat, remote code): read as a type of no rule, its norms were guessed LayerNorms and every
    # linear biased (113,293,344,768, each guess said); TelechatBlock builds RMSNorms, TelechatAttention's query and
    # key_value and TelechatMLP's gate_proj and up_proj are bias-free, its dense and down_proj biased
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShapewiseWarning)
        s = load_config(ROUND / "telechat2-115b.json")
    assert (s.hidden, s.num_layers, s.num_heads, s.kv_heads, s.d_head, s.ffn_width, s.vocab) == (
        8192, 96, 64, 8, 128, 40960, 131072)
    assert (s.norm, s.mlp, s.bias, s.qkv_bias, s.out_bias, s.tied_embeddings) == (
        "rmsnorm", "swiglu", False, False, True, False)
    h, kv, f, L, V = 8192, 1024, 40960, 96, 131072
    layer = h * h + 2 * h * kv + h * h + h + 3 * h * f + h + 2 * h  # q, key_value, dense + bias, MLP + down bias, norms
    # the checkpoint's model.safetensors.index.json: total_size 453,131,665,408 bytes, four a parameter
    assert s.params == L * layer + 2 * V * h + h == 453_131_665_408 // 4 == 113_282_916_352
    assert s.replace(out_bias=False).params == s.params - L * 2 * h


@pytest.mark.parametrize(("stem", "tied", "index_bytes", "bytes_per_param"), [
    ("telechat-7b", True, 14_400_036_864, 2),  # no tie_word_embeddings: tied, its checkpoint holds no lm_head
    ("telechat-12b", False, 24_772_864_000, 2),
])
def test_telechat_v1_reads_by_the_same_rule_to_its_checkpoints_parameter(stem, tied, index_bytes, bytes_per_param):
    # read as a type of no rule: LayerNorms and a bias on every linear guessed (7,201,374,208 and 12,388,343,808)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShapewiseWarning)
        s = load_config(ROUND / f"{stem}.json")
    assert (s.norm, s.bias, s.out_bias, s.tied_embeddings, s.kv_heads) == ("rmsnorm", False, True, tied, s.num_heads)
    assert s.params == index_bytes // bytes_per_param


def test_telechat_52b_reads_its_own_code_by_its_gpt2_keys():
    # TeleChat-52B's TELECHAT code (n_embd, n_inner, use_RMSNorm, add_bias_linear) under TeleChat's model_type: read
    # as a type of no rule its norms were guessed LayerNorms (52,833,566,720); TeleChat's rule alone would read no
    # n_inner and guess an MLP 4 × hidden wide and biases it has not
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShapewiseWarning)
        s = load_config(ROUND / "telechat-52b.json")
    assert (s.hidden, s.num_layers, s.num_heads, s.ffn_width, s.mlp, s.vocab) == (8192, 64, 64, 21824, "swiglu", 80896)
    assert (s.norm, s.bias, s.out_bias, s.tied_embeddings, s.rotary_fraction) == ("rmsnorm", False, False, False, 1.0)
    # the checkpoint's index: 105,665,020,032 bytes, two a parameter, 64 of them one-element masked_bias buffers
    assert s.params == 105_665_020_032 // 2 - 64 == 52_832_509_952
    base = json.loads((ROUND / "telechat-52b.json").read_text())
    # TELECHATConfig's defaults where the file leaves them out: LayerNorms, a bias on every linear
    plain = _shape_from_config({k: v for k, v in base.items() if k not in ("use_RMSNorm", "add_bias_linear")}, "x", "x")
    assert (plain.norm, plain.bias, plain.bias_scope) == ("layernorm", True, "all")
    for change, said in (({"activation_function": "gelu"}, 'activation_function the string "gelu"'),
                         ({"relative_encoding": None}, "relative_encoding null")):
        with pytest.raises(ShapewiseError, match=said) as err:  # a plain MLP; a learned position table
            _shape_from_config({**base, **change}, "x", "x")
        assert "\n" not in str(err.value)


def test_telechat_reads_its_embedding_norm_and_is_written_in_its_own_keys(tmp_path):
    base = json.loads((ROUND / "telechat2-115b.json").read_text())
    s = _shape_from_config(base, "x", "x")
    normed = _shape_from_config({**base, "embed_layernorm": True}, "x", "x")  # TelechatModel's word_embeddings_layernorm
    assert (s.embed_norm, normed.embed_norm, normed.params - s.params) == (False, True, 8192)
    smaller = canonical(s.replace(num_layers=48, hidden=6144))
    written = to_hf_config(smaller, base)
    assert (written["n_layer"], written["hidden_size"], written["ffn_hidden_size"]) == (48, 6144, 40960)
    assert "num_hidden_layers" not in written and "norm_type" not in written
    path = tmp_path / "config.json"
    path.write_text(json.dumps(written))
    assert _structure(load_config(path)) == _structure(smaller)
    with pytest.raises(ShapewiseError, match="cannot hold this shape's out bias True") as err:
        to_hf_config(s)  # a fresh config is Llama's, which has no such biases: refused, not mis-written
    assert "\n" not in str(err.value)


def test_gpt_neo_counts_biases_on_out_proj_and_the_mlp_alone():
    # GPTNeoSelfAttention: q_proj, k_proj and v_proj bias=False, out_proj biased; GPTNeoMLP's c_fc and c_proj biased.
    # shapewise had counted q, k and v biased too: 125,226,240 for GPTNeoForCausalLM's 125,198,592
    neo = _quiet(DATA / "hf-twentysecond" / "gpt-neo-125m.json")
    assert (neo.bias, neo.bias_scope, neo.out_bias, neo.attn_bias, neo.out_proj_bias, neo.down_bias) == (
        True, "mlp", True, False, True, True)
    assert neo.params == 125_198_592
    assert neo.replace(bias_scope="all").params - neo.params == 12 * 3 * 768  # the q, k and v biases it has not
    assert _bias_words(neo) == "on the MLP only, and on the output projections"


def test_out_bias_builds_biases_on_the_output_projections_alone():
    torch = pytest.importorskip("torch")
    from shapewise.layers import build_layer

    shape = ModelShape(name="out", hidden=64, num_layers=1, num_heads=4, vocab=100, num_kv_heads=2, ffn=128,
                       mlp="swiglu", norm="rmsnorm", bias=False, out_bias=True)
    layer = build_layer(shape, device="meta")
    assert layer.attn.qkv.bias is None and layer.attn.out.bias is not None
    assert layer.mlp.up.bias is None and layer.mlp.gate.bias is None and layer.mlp.down.bias is not None
    assert sum(p.numel() for p in layer.parameters()) == shape.layer_params
    assert isinstance(layer.attn.out.bias, torch.nn.Parameter)
    # row-parallel output biases are what every tensor-parallel rank holds whole
    assert whole_params(shape) - whole_params(shape.replace(out_bias=False)) == 2 * 64
    assert _bias_words(shape) == "on the output projections only"


def test_out_bias_is_said_once_and_changes_no_op():
    every = ModelShape(name="b", hidden=64, num_layers=2, num_heads=4, vocab=100, bias=True, out_bias=True)
    assert not canonical(every).out_bias and canonical(every).params == every.params  # every linear's biases hold it
    plain = every.replace(bias=False)
    ops = lambda s: [(op.name, op.m, op.n, op.k, op.count) for op in model_ops(s, Workload(batch=1, seq=128))]
    assert ops(plain) == ops(plain.replace(out_bias=False))


@pytest.mark.parametrize(("stem", "like"), [
    ("kimi-k2.7-code-nvfp4", "hf-fourteenth/kimi-k2.6-nvfp4"),  # rope_parameters where K2.6 writes rope_scaling
    ("minimax-m2.7-nvfp4", "hf-thirteenth/minimax-m2.7"),  # partial_rotary_factor 0.5 beside rotary_dim 64
    ("gemma-2-2b-jpn-it", "hf-tenth/gemma-2-2b"),
])
def test_the_rounds_newer_forms_read_as_the_models_they_keep(stem, like):
    assert _structure(_quiet(ROUND / f"{stem}.json")) == _structure(_quiet(DATA / f"{like}.json"))


def test_the_rounds_other_files_read_as_their_code_builds_them():
    glm = _quiet(ROUND / "glm-5.2.json")  # mlp_layer_types: three dense layers; indexer_types not priced (said)
    assert (glm.num_dense_layers, glm.num_experts, glm.top_k, glm.is_mla, glm.params) == (3, 256, 8, True,
                                                                                         743_180_190_720)
    code = _quiet(ROUND / "codellama-7b.json")  # Llama 2 7B's shape with 16 more vocabulary rows
    assert (code.vocab, code.params, code.context) == (32016, 6_738_546_688, 16384)
    tiny = _quiet(ROUND / "tinyllama-1.1b-chat-v0.4.json")  # its _name_or_path a local folder: named by the file
    assert (tiny.name, tiny.vocab, tiny.kv_heads, tiny.params) == ("tinyllama-1.1b-chat-v0.4", 32003, 4, 1_100_060_672)
    with pytest.raises(ShapewiseError, match="linear-attention hybrid") as err:
        load_config(ROUND / "qwen3.5-122b-a10b.json")
    assert "\n" not in str(err.value)
