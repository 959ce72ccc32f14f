"""Transformer blocks built in PyTorch from a ModelShape (src/shapewise/layers.py)."""

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from shapewise.errors import ShapewiseError, ShapewiseWarning  # noqa: E402
from shapewise.layers import (  # noqa: E402
    build_layer,
    build_tp_layer,
    fwd_bwd_call,
    fwd_call,
    layer_inputs,
    reference_layer,
    run_fwd,
    run_fwd_bwd,
)
from shapewise.presets import PRESETS  # noqa: E402
from shapewise.shapes import MLP_KINDS, NORM_KINDS, ModelShape  # noqa: E402


def tiny(name, **fields):
    return ModelShape(name=name, num_layers=1, vocab=50, **fields)


# One tiny shape per style the brief names; each also varies something else (MLP kind, bias, norm).
VARIANTS = {
    "gpt2": tiny("gpt2", hidden=32, num_heads=4, mlp="gelu", norm="layernorm", bias=True, learned_positions=16),
    "neox": tiny("neox", hidden=32, num_heads=4, ffn=48, mlp="gelu", norm="layernorm", bias=True,
                 parallel_attn=True),
    "llama": tiny("llama", hidden=32, num_heads=4, num_kv_heads=2, ffn=40, mlp="swiglu", norm="rmsnorm",
                  bias=False),
    "mqa": tiny("mqa", hidden=32, num_heads=4, num_kv_heads=1, ffn=64, mlp="relu", norm="layernorm", bias=False),
    "geglu": tiny("geglu", hidden=24, num_heads=4, head_dim=10, ffn=36, mlp="geglu", norm="rmsnorm", bias=True),
    "moe": tiny("moe", hidden=32, num_heads=4, num_kv_heads=2, mlp="swiglu", norm="rmsnorm", bias=True,
                num_experts=4, top_k=2, expert_ffn=24, num_shared_experts=1),
    # Qwen2-MoE's shared experts, their sum scaled by a sigmoid gate of the input
    "moe-gated": tiny("moe-gated", hidden=32, num_heads=4, mlp="swiglu", norm="rmsnorm", bias=False,
                      num_experts=4, top_k=2, expert_ffn=24, num_shared_experts=2, shared_expert_gate=True),
    # GPT-J's biases on the MLP alone (its attention's are off), PhiMoE's on attention alone (its experts' off)
    "gptj": tiny("gptj", hidden=32, num_heads=4, mlp="gelu", norm="layernorm", bias=True, bias_scope="mlp",
                 parallel_attn=True, norms_per_layer=1),
    "phimoe": tiny("phimoe", hidden=32, num_heads=4, num_kv_heads=2, mlp="swiglu", norm="layernorm", bias=True,
                   bias_scope="attention", num_experts=4, top_k=2, expert_ffn=24),
}
BATCH, SEQ = 2, 9


def count(layer) -> int:
    return sum(p.numel() for p in layer.parameters())


def rel_err(out, ref) -> float:
    out = out.detach().to("cpu", torch.float64)
    return ((out - ref).norm() / ref.norm()).item()


# ---- parameter counts ----

@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_layer_has_layer_params_parameters(name):
    shape = PRESETS[name]
    layer = build_layer(shape, device="meta")
    assert count(layer) == shape.layer_params
    assert all(p.is_meta for p in layer.parameters())


@pytest.mark.parametrize("name", list(PRESETS))
def test_params_is_layers_plus_embeddings_and_final_norm(name):
    s = PRESETS[name]
    embed = s.vocab * s.hidden * (1 if s.tied_embeddings else 2) + s.learned_positions * s.hidden
    norms = 1 + s.embed_norm  # the final norm, and BLOOM's over the embeddings
    head_bias = s.vocab * s.lm_head_bias  # Phi's output head adds a bias
    assert s.params == s.num_layers * s.layer_params + embed + norms * NORM_KINDS[s.norm] * s.hidden + head_bias


@st.composite
def small_shapes(draw):
    heads = draw(st.integers(1, 8))
    kv = draw(st.sampled_from([k for k in range(1, heads + 1) if heads % k == 0]))
    head_dim = draw(st.none() | st.integers(1, 12))
    hidden = heads * draw(st.integers(1, 8)) if head_dim is None else draw(st.integers(1, 48))
    experts = draw(st.sampled_from([0, 0, 1, 2, 3, 5]))
    return ModelShape(
        name="drawn", hidden=hidden, num_layers=draw(st.integers(1, 3)), num_heads=heads, vocab=17,
        num_kv_heads=kv, head_dim=head_dim, ffn=draw(st.none() | st.integers(1, 40)),
        mlp=draw(st.sampled_from(sorted(MLP_KINDS))), norm=draw(st.sampled_from(sorted(NORM_KINDS))),
        parallel_attn=draw(st.booleans()), bias=draw(st.booleans()),
        bias_scope=draw(st.sampled_from(["all", "attention", "mlp"])), learned_positions=draw(st.sampled_from([0, 8])),
        num_experts=experts, top_k=draw(st.integers(1, experts)) if experts else 0,
        expert_ffn=draw(st.none() | st.integers(1, 24)) if experts else None,
        num_shared_experts=draw(st.integers(0, 2)) if experts else 0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_shapes())
def test_drawn_shape_layer_has_layer_params_parameters(shape):
    assert count(build_layer(shape, device="meta")) == shape.layer_params


def test_bias_scope_builds_biases_on_one_side_alone():
    gptj, phimoe = build_layer(VARIANTS["gptj"], device="meta"), build_layer(VARIANTS["phimoe"], device="meta")
    assert (gptj.attn.qkv.bias, gptj.attn.out.bias) == (None, None)
    assert gptj.mlp.up.bias is not None and gptj.mlp.down.bias is not None
    assert phimoe.attn.qkv.bias is not None and phimoe.attn.out.bias is not None
    assert all(e.up.bias is None and e.gate.bias is None and e.down.bias is None for e in phimoe.mlp.experts)


# ---- the fast path against the float64 reference ----

@pytest.mark.parametrize("attention", ["flash", "unfused"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_matches_float64_reference(variant, attention):
    shape = VARIANTS[variant]
    layer = build_layer(shape, dtype="fp32", attention=attention, seed=3)
    assert count(layer) == shape.layer_params
    x = layer_inputs(shape, batch=BATCH, seq=SEQ, dtype="fp32", seed=4)
    ref = reference_layer(layer, x)
    assert ref.dtype == torch.float64 and ref.shape == x.shape
    assert rel_err(layer(x), ref) < 1e-4
    assert rel_err(run_fwd(layer, x), ref) < 1e-4
    # The block does something: its output is not its input.
    assert (ref - x.double()).norm() > 0.1 * x.norm()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_shapes(), st.sampled_from(["flash", "unfused"]), st.integers(1, 6))
def test_drawn_shape_matches_float64_reference(shape, attention, seq):
    layer = build_layer(shape, dtype="fp32", attention=attention, seed=seq)
    x = layer_inputs(shape, batch=2, seq=seq, dtype="fp32", seed=seq + 1)
    ref = reference_layer(layer, x)
    assert rel_err(layer(x), ref) < 1e-4


@pytest.mark.parametrize("variant", ["llama", "mqa", "moe"])
def test_repeated_kv_heads_match_native_gqa(variant):
    shape = VARIANTS[variant]
    layer = build_layer(shape, dtype="fp32", seed=5)
    x = layer_inputs(shape, batch=BATCH, seq=SEQ, dtype="fp32", seed=6)
    ref = reference_layer(layer, x)
    for native in (False, True):
        layer.attn.native_gqa = native
        assert rel_err(layer(x), ref) < 1e-4


def test_rope_only_without_learned_positions():
    assert not build_layer(VARIANTS["gpt2"], device="meta").attn.rope
    assert all(build_layer(VARIANTS[v], device="meta").attn.rope for v in VARIANTS if v != "gpt2")


def test_rope_changes_the_output():
    """The same weights without RoPE give a different result, so the rotation is really applied."""
    shape = VARIANTS["llama"]
    layer = build_layer(shape, dtype="fp32")
    x = layer_inputs(shape, batch=1, seq=SEQ, dtype="fp32")
    with_rope = layer(x)
    layer.attn.rope = False
    without = layer(x)
    assert rel_err(without, reference_layer(layer, x)) < 1e-4
    assert (with_rope - without).norm() > 1e-3 * with_rope.norm()
    assert torch.allclose(with_rope[:, 0], without[:, 0], atol=1e-5)  # position 0 is not rotated


@pytest.mark.parametrize("attention", ["flash", "unfused"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_causal(variant, attention):
    shape = VARIANTS[variant]
    layer = build_layer(shape, dtype="fp32", attention=attention)
    x = layer_inputs(shape, batch=BATCH, seq=SEQ, dtype="fp32")
    cut = 5
    changed = x.clone()
    changed[:, cut:] = layer_inputs(shape, batch=BATCH, seq=SEQ - cut, dtype="fp32", seed=9)
    a, b = run_fwd(layer, x), run_fwd(layer, changed)
    assert torch.allclose(a[:, :cut], b[:, :cut], rtol=0, atol=1e-5)
    assert not torch.allclose(a[:, cut:], b[:, cut:], atol=1e-3)


# ---- backward ----

@pytest.mark.parametrize("variant", list(VARIANTS))
def test_backward_gives_finite_grads_everywhere(variant):
    shape = VARIANTS[variant]
    layer = build_layer(shape, dtype="fp32", attention="flash")
    x = layer_inputs(shape, batch=BATCH, seq=SEQ, dtype="fp32", requires_grad=True)
    dy = layer_inputs(shape, batch=BATCH, seq=SEQ, dtype="fp32", seed=1)
    run_fwd_bwd(layer, x, dy)
    grads = {name: p.grad for name, p in layer.named_parameters()}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values()), grads
    assert x.grad is not None and torch.isfinite(x.grad).all()
    first = {name: g.clone() for name, g in grads.items()}
    run_fwd_bwd(layer, x, dy)  # grads are reset, not accumulated
    for name, p in layer.named_parameters():
        assert torch.allclose(p.grad, first[name], atol=1e-6), name


def test_input_grad_matches_unfused_and_reference():
    """dx through SDPA equals dx through the explicit path, and the reference's own autograd in float64."""
    shape = VARIANTS["moe"]
    grads = []
    for attention in ("flash", "unfused"):
        layer = build_layer(shape, dtype="fp32", attention=attention, seed=2)
        x = layer_inputs(shape, batch=1, seq=6, dtype="fp32", requires_grad=True)
        dy = layer_inputs(shape, batch=1, seq=6, dtype="fp32", seed=1)
        run_fwd_bwd(layer, x, dy)
        grads.append(x.grad)
    x64 = x.detach().double().requires_grad_(True)
    (reference_layer(layer, x64) * dy.double()).sum().backward()
    for g in grads:
        assert rel_err(g, x64.grad) < 1e-4


def test_timing_callables():
    shape = VARIANTS["llama"]
    layer = build_layer(shape, dtype="fp32")
    x = layer_inputs(shape, batch=1, seq=4, dtype="fp32", requires_grad=True)
    assert fwd_call(layer, x)().shape == x.shape
    step = fwd_bwd_call(layer, x)
    assert step() is None and torch.isfinite(x.grad).all()
    g = layer.attn.qkv.weight.grad.clone()
    step()
    assert torch.equal(layer.attn.qkv.weight.grad, g)


# ---- dtypes, seeds, errors, import ----

def test_bf16_forward_on_cpu():
    shape = VARIANTS["llama"]
    layer = build_layer(shape, dtype="bf16")
    assert all(p.dtype == torch.bfloat16 for p in layer.parameters())
    x = layer_inputs(shape, batch=BATCH, seq=SEQ, dtype="bf16")
    for attention in ("flash", "unfused"):
        layer.attn.attention = attention
        out = run_fwd(layer, x)
        assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
        assert rel_err(out, reference_layer(layer, x)) < 3e-2


def test_seed_decides_weights():
    shape = VARIANTS["gpt2"]
    a, b, c = (build_layer(shape, dtype="fp32", seed=s) for s in (0, 0, 1))
    pa, pb, pc = (torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)
    half = build_layer(shape, dtype="bf16", seed=0)  # same draws, rounded
    assert torch.allclose(torch.cat([p.flatten() for p in half.parameters()]).float(), pa, rtol=1e-2, atol=1e-3)


def test_bad_arguments():
    with pytest.raises(ShapewiseError, match="attention"):
        build_layer(VARIANTS["gpt2"], device="meta", attention="sparse")
    with pytest.raises(ShapewiseError, match="dtype"):
        build_layer(VARIANTS["gpt2"], device="meta", dtype="fp8")


def test_a_tensor_parallel_rank_past_the_kv_heads_holds_the_kv_head_its_queries_read():
    # 8 query heads in 2 groups of 4 over t=4 ranks: ranks 2 and 3 hold query heads 4-7 and copies of kv head 1
    shape = tiny("gqa", hidden=64, num_heads=8, num_kv_heads=2, ffn=96, mlp="swiglu", norm="rmsnorm", qkv_bias=True)
    full = build_layer(shape, dtype="fp32", seed=1).attn.qkv
    d = shape.d_head
    k1, v1 = slice((8 + 1) * d, (8 + 2) * d), slice((8 + 2 + 1) * d, (8 + 2 + 2) * d)
    for rank in (2, 3):
        qkv = build_tp_layer(shape, tp=4, rank=rank, dtype="fp32", seed=1).part.attn.qkv
        assert qkv.weight.shape == ((2 + 1 + 1) * d, 64)
        for p, q in ((qkv.weight, full.weight), (qkv.bias, full.bias)):
            assert torch.equal(p[:2 * d], q[rank * 2 * d:(rank + 1) * 2 * d])
            assert torch.equal(p[2 * d:3 * d], q[k1]) and torch.equal(p[3 * d:], q[v1])


def test_tensor_parallel_degrees_that_split_no_heads_evenly_are_refused():
    gqa = tiny("gqa", hidden=96, num_heads=12, num_kv_heads=6, ffn=96)
    with pytest.raises(ShapewiseError, match=r"t=4 must divide .* kv heads \(6\) or be a multiple of them"):
        build_tp_layer(gqa, tp=4, rank=0)
    with pytest.raises(ShapewiseError, match=r"heads \(12\) and FFN width \(96\)"):
        build_tp_layer(gqa, tp=8, rank=0)
    with pytest.raises(ShapewiseError, match="FFN width"):
        build_tp_layer(tiny("w", hidden=64, num_heads=4, ffn=90), tp=4, rank=0)


def test_importing_shapewise_layers_does_not_import_torch():
    code = "import sys, shapewise, shapewise.layers; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- on a CUDA GPU (skipped without one) ----

@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["llama", "mqa", "moe", "neox"])
def test_cuda_bf16_flash_and_unfused_match_reference(variant):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    shape = VARIANTS[variant].replace(hidden=256, num_heads=4)  # d_head 64
    x = layer_inputs(shape, batch=1, seq=32, device="cuda", dtype="bf16", requires_grad=True)
    for attention in ("flash", "unfused"):
        layer = build_layer(shape, device="cuda", dtype="bf16", attention=attention)
        assert rel_err(run_fwd(layer, x), reference_layer(layer, x).detach()) < 3e-2
        fwd_bwd_call(layer, x)()
        assert all(torch.isfinite(p.grad).all() for p in layer.parameters())


def test_whole_model_step_trains_every_weight():
    """verify's whole-model step: embedding, every layer, norm and head all get finite gradients."""
    import torch

    from shapewise.shapes import ModelShape, Workload
    from shapewise.verify import _model_fn

    shape = ModelShape("tiny", 32, 2, 4, 64, ffn=64, mlp="swiglu", norm="rmsnorm", bias=False, tied_embeddings=False)
    step = _model_fn(shape, Workload(batch=1, seq=16, dtype="fp32"), "cpu", seed=0)
    step()
    assert sum(w.numel() for w in step.weights) == shape.params
    assert all(w.grad is not None and torch.isfinite(w.grad).all() and w.grad.abs().sum() > 0 for w in step.weights)


def test_whole_model_builds_its_nope_layers_without_rotary_embeddings():
    """EXAONE 4's global layers, every 4th among sliding ones, rotate nothing (Exaone4Attention: "global NoPE
    for hybrid attention model"), as the step verify predicts prices them."""
    from shapewise.hf import load_config
    from shapewise.shapes import Workload
    from shapewise.verify import _model_fn, model_block

    exaone = load_config(Path(__file__).parent / "data" / "hf-later" / "exaone-4.0-32b.json")
    assert (exaone.global_every, exaone.nope_every) == (4, 4)
    assert [build_layer(model_block(exaone, i), device="meta").attn.rope for i in range(8)] == [True] * 3 + [False] + \
        [True] * 3 + [False]
    tiny = ModelShape("tiny", 32, 8, 4, 64, ffn=64, mlp="swiglu", norm="rmsnorm", bias=False, window=16,
                      global_every=4, nope_every=4)
    step = _model_fn(tiny, Workload(batch=1, seq=16, dtype="fp32"), "cpu", seed=0)
    assert sum(layer.attn.rope for layer in step.layers) == tiny.num_rope_layers == 6
    step()


def test_whole_model_builds_its_sliding_window_layers_with_their_window():
    """Gemma-2's local layers (every other one) and Mistral's (every one) attend within the window in a whole
    model, as the step verify predicts prices them (attn/window); they were built as full causal attention."""
    from shapewise.hf import load_config
    from shapewise.shapes import Workload
    from shapewise.verify import _model_fn, model_block

    data = Path(__file__).parent / "data" / "hf"
    gemma, mistral = load_config(data / "gemma-2-9b-it.json"), load_config(data / "mistral-7b-v0.1.json")
    assert [build_layer(model_block(gemma, i), device="meta").attn.window for i in range(4)] == [4096, 0] * 2
    assert {build_layer(model_block(mistral, i), device="meta").attn.window for i in range(4)} == {4096}
    tiny = ModelShape("tiny", 32, 4, 4, 64, ffn=64, mlp="swiglu", norm="rmsnorm", bias=False, window=6,
                      global_every=2)
    w = Workload(batch=1, seq=16, dtype="fp32")
    step = _model_fn(tiny, w, "cpu", seed=0)
    assert [layer.attn.window for layer in step.layers] == [6, 0, 6, 0]
    x = torch.randn(1, 16, 32)
    local = step.layers[0]
    causal = build_layer(tiny.one_layer(), dtype="fp32", seed=0)
    causal.load_state_dict(local.state_dict())
    assert rel_err(local(x), causal(x).double()) > 1e-3  # past the window it attends to fewer keys
    step()
    assert all(w.grad is not None for w in step.weights)


def _narrowed(path: str) -> ModelShape:
    """A real config's shape, two layers of 32 wide: its tables (vocabulary, learned positions) and its kinds kept."""
    from shapewise.hf import load_config

    return load_config(Path(__file__).parent / "data" / "hf" / path).replace(hidden=32, num_layers=2, num_heads=4)


@pytest.mark.parametrize("shape", [
    ModelShape("tiny-ln", 32, 2, 4, 64, ffn=64, mlp="gelu", norm="layernorm", tied_embeddings=False),
    ModelShape("tiny-bloom", 32, 2, 4, 64, ffn=64, mlp="gelu", norm="layernorm", embed_norm=True, tied_embeddings=False),
    _narrowed("gpt2.json"),  # 1,024 learned positions, its head tied to the embeddings
    _narrowed("opt-1.3b.json"),  # 2,050: OPT's 2,048 and its offset of 2
], ids=lambda s: s.name)
def test_whole_model_holds_every_weight(shape):
    """The whole model holds shape.params weights, each trained: a LayerNorm model's final norm (and BLOOM's over
    the embeddings) with its bias, as its layers' norms have; GPT-2's and OPT's learned positions, added to the
    token embeddings (the step had none: learned_positions × hidden short)."""
    from shapewise.shapes import Workload
    from shapewise.verify import _model_fn

    step = _model_fn(shape, Workload(batch=1, seq=16, dtype="fp32"), "cpu", seed=0)
    step()
    assert sum(w.numel() for w in step.weights) == shape.params
    assert all(w.grad is not None and w.grad.abs().sum() > 0 for w in step.weights)
    if shape.learned_positions:  # the first 16 rows read, the rest untouched
        rows = next(w for w in step.weights if w.shape == (shape.learned_positions, shape.hidden)).grad.abs().sum(1)
        assert bool((rows[:16] > 0).all()) and not rows[16:].any()


def test_whole_model_step_has_phis_output_head_bias():
    from shapewise.shapes import Workload
    from shapewise.verify import _model_fn

    phi = ModelShape("tiny-phi", 32, 1, 4, 64, ffn=64, norm="rmsnorm", parallel_attn=True, norms_per_layer=1,
                     tied_embeddings=False, lm_head_bias=True)
    step = _model_fn(phi, Workload(batch=1, seq=16, dtype="fp32"), "cpu", seed=0)
    step()
    assert sum(w.numel() for w in step.weights) == phi.params and all(w.grad is not None for w in step.weights)


# ---- what the layer does not build: refused, or built without it and said so ----

CORPUS = Path(__file__).parent / "data" / "hf"


def _corpus_shapes():
    from shapewise.hf import NotATransformer, load_config

    shapes = []
    for path in sorted(CORPUS.glob("*.json")):
        try:
            shapes.append(load_config(path))
        except NotATransformer:
            continue
    return shapes


@pytest.mark.parametrize("shape", _corpus_shapes(), ids=lambda s: s.name)
def test_corpus_layers_are_built_as_the_model_or_refused(shape):
    from shapewise.layers import _warn_once

    _warn_once.cache_clear()
    block = shape.one_layer()
    if block.is_mla:
        with pytest.raises(ShapewiseError, match="multi-head latent attention is not built") as err:
            build_layer(block, device="meta")
        assert "\n" not in str(err.value)
        return
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        layer = build_layer(block, device="meta")
    warned = [w for w in record if w.category is ShapewiseWarning]
    left_out = (block.norms_per_layer == 4, block.qk_norm,
                block.rotary_fraction == 0 and not block.learned_positions)
    assert len(warned) == (1 if any(left_out) else 0), [str(w.message) for w in warned]
    # What is built is counted exactly; what is left out is norms' weights alone.
    norm_params = (2 if block.norm == "layernorm" else 1) * block.hidden
    missing = max(block.norms_per_layer - 2, 0) * norm_params + block.qk_norm_params
    assert count(layer) == block.layer_params - missing
    assert layer.attn.rot == block.rotary_width - block.rotary_width % 2  # partial rotary as the model's


def test_a_whole_model_warns_once():
    from shapewise.layers import _warn_once

    _warn_once.cache_clear()
    gemma = tiny("gemma-like", hidden=32, num_heads=4, mlp="geglu", norm="rmsnorm", norms_per_layer=4)
    with pytest.warns(ShapewiseWarning, match="post-norms") as record:  # every one recorded, however often raised
        for _ in range(3):
            build_layer(gemma, device="meta")
    assert len([w for w in record if w.category is ShapewiseWarning]) == 1


@pytest.mark.parametrize("attention", ["flash", "unfused"])
def test_sliding_window_attends_within_the_window(attention):
    windowed = VARIANTS["llama"].replace(window=SEQ - 3)
    layer = build_layer(windowed, dtype="fp32", attention=attention, seed=0)
    assert layer.attn.window == SEQ - 3
    short = layer_inputs(windowed, batch=BATCH, seq=SEQ - 3, dtype="fp32")
    full = build_layer(windowed.replace(window=0), dtype="fp32", attention=attention, seed=0)
    assert rel_err(run_fwd(layer, short), run_fwd(full, short).double()) < 1e-6  # within the window: causal
    x = layer_inputs(windowed, batch=BATCH, seq=SEQ, dtype="fp32")
    assert rel_err(run_fwd(layer, x), reference_layer(layer, x)) < 1e-4  # past it: the last SEQ - 3 keys
    assert rel_err(run_fwd(full, x), reference_layer(layer, x)) > 1e-3
    fwd_bwd_call(layer, layer_inputs(windowed, batch=BATCH, seq=SEQ, dtype="fp32", requires_grad=True))()
    # Where windows alternate with global layers, the block is a global one (ModelShape.one_layer).
    alternating = windowed.replace(num_layers=2, global_every=2)
    assert build_layer(alternating, dtype="fp32").attn.window == 0


def test_partial_rotary_rotates_its_width_only():
    neox = VARIANTS["neox"].replace(rotary_fraction=0.25)  # head dim 8: 2 dims rotated
    layer = build_layer(neox, dtype="fp32", seed=0)
    assert layer.attn.rot == 2
    x = layer_inputs(neox, batch=BATCH, seq=SEQ, dtype="fp32")
    assert rel_err(run_fwd(layer, x), reference_layer(layer, x)) < 1e-4
    full = build_layer(VARIANTS["neox"], dtype="fp32", seed=0)
    assert rel_err(run_fwd(full, x), reference_layer(layer, x)) > 1e-3  # the rotated width matters


def test_bench_layer_refuses_latent_attention_in_one_line(capsys, tmp_path):
    from shapewise.cli import main

    code = main(["bench", "layer", "--config", str(CORPUS / "deepseek-v3.json"), "--device", "cpu", "--batch", "1",
                 "--seq", "8", "--db", str(tmp_path / "r.db")])
    said = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("shapewise: warning:")]
    assert code == 2 and len(said) == 1 and "multi-head latent attention" in said[0]  # beside the reader's warnings


def test_parallel_layers_with_one_shared_norm():
    cohere = VARIANTS["neox"].replace(norms_per_layer=1)
    layer = build_layer(cohere, dtype="fp32", seed=0)
    assert count(layer) == cohere.layer_params and layer.norm2 is layer.norm1
    x = layer_inputs(cohere, batch=BATCH, seq=SEQ, dtype="fp32")
    assert rel_err(run_fwd(layer, x), reference_layer(layer, x)) < 1e-4
    with pytest.raises(ShapewiseError, match="1 norms a layer is not built"):
        build_layer(VARIANTS["llama"].replace(norms_per_layer=1), device="meta")


def test_two_layers_built_are_of_one_class():
    """The module classes are defined once (layers._classes, cached): every block built is an instance of
    the same Block, and a second build does not define them again."""
    from shapewise.layers import _classes, build_layer

    shape = ModelShape("tiny", 64, 1, 4, 100)
    first, second = build_layer(shape, dtype="fp32"), build_layer(shape, dtype="fp32")
    assert type(first) is type(second) is _classes().Block
    assert _classes() is _classes()
