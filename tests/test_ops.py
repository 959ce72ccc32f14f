"""Model → ops: per-rank shapes, counts, exact FLOPs, backward GEMMs with their own shapes."""

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from shapewise import ModelShape, ShapewiseError, Workload, model_ops
from shapewise.ops import BMM, FLASH, GEMM

LLAMA = ModelShape("llama-like", hidden=4096, num_layers=32, num_heads=32, num_kv_heads=8, vocab=128256,
                   ffn=14336, mlp="swiglu", tied_embeddings=False, norm="rmsnorm", bias=False)
GPT2 = ModelShape("gpt2-like", hidden=768, num_layers=12, num_heads=12, vocab=50257, learned_positions=1024)


def by_label(ops):
    return {op.label: op for op in ops}


def linear_weights(shape: ModelShape, t: int) -> int:
    """Weight elements one rank multiplies per token: projections, MLP and the output layer."""
    d, h = shape.d_head, shape.hidden
    attn = h * (shape.num_heads + 2 * -(-shape.kv_heads // t) * t) * d // t + shape.num_heads * d * h // t
    mlp = (3 if shape.gated else 2) * h * shape.ffn_width // t
    return shape.num_layers * (attn + mlp) + -(-shape.vocab // t) * h


def test_llama_forward_shapes_per_rank():
    ops = by_label(model_ops(LLAMA, Workload(batch=2, seq=4096, tp=2, mode="train")))
    tokens = 2 * 4096
    assert (ops["attn/qkv"].m, ops["attn/qkv"].n, ops["attn/qkv"].k) == (tokens, (16 + 2 * 4) * 128, 4096)
    assert (ops["attn/out"].m, ops["attn/out"].n, ops["attn/out"].k) == (tokens, 4096, 16 * 128)
    assert (ops["mlp/gate"].n, ops["mlp/down"].k) == (14336 // 2, 14336 // 2)
    assert (ops["logits"].m, ops["logits"].n) == (tokens, 128256 // 2)
    assert ops["attn/flash"].batch == 2 * 16 and ops["attn/flash"].causal
    assert ops["attn/qkv"].count == 32 and ops["logits"].count == 1


def test_backward_gemms_have_their_own_shapes_and_layouts():
    ops = by_label(model_ops(LLAMA, Workload(tp=1)))
    for name in ("attn/qkv", "attn/out", "mlp/up", "mlp/gate", "mlp/down", "logits"):
        f, dg, wg = ops[name], ops[f"{name}.dgrad"], ops[f"{name}.wgrad"]
        assert f.layout == "nt" and dg.layout == "nn" and wg.layout == "tn"
        assert (dg.m, dg.n, dg.k) == (f.m, f.k, f.n)  # dx = dy · W
        assert (wg.m, wg.n, wg.k) == (f.n, f.k, f.m)  # dW = dyᵀ · x
        assert f.flops == dg.flops == wg.flops


shapes = st.builds(
    lambda h_per_head, heads, ratio, layers, vocab, ffn, gated: ModelShape(
        "h", hidden=h_per_head * heads * ratio, num_layers=layers, num_heads=heads * ratio,
        num_kv_heads=heads, vocab=vocab, ffn=ffn, mlp="swiglu" if gated else "gelu"),
    st.sampled_from([16, 32, 64, 80, 128]), st.integers(1, 8), st.sampled_from([1, 2, 4]), st.integers(1, 4),
    st.integers(100, 70000), st.integers(64, 8192), st.booleans())


@settings(max_examples=150, deadline=None)
@given(shapes, st.integers(1, 4), st.integers(1, 2048), st.sampled_from([1, 2, 4]))
def test_forward_gemm_flops_are_exactly_two_per_weight_per_token(shape, batch, seq, tp):
    assume(shape.num_heads % tp == 0 and shape.ffn_width % tp == 0 and shape.kv_heads % tp == 0)
    ops = model_ops(shape, Workload(batch=batch, seq=seq, tp=tp, mode="train"))
    fwd = sum(op.total_flops for op in ops if op.kind == GEMM and op.pass_ == "fwd")
    assert fwd == 2 * batch * seq * linear_weights(shape, tp)
    # Training: each linear's two backward GEMMs do the forward's work twice over.
    bwd = sum(op.total_flops for op in ops if op.kind == GEMM and op.pass_ in ("dgrad", "wgrad"))
    assert bwd == 2 * fwd


def test_flash_flops_count_the_causal_half_and_backward_is_two_and_a_half_times():
    ops = by_label(model_ops(GPT2, Workload(batch=4, seq=2048)))
    fwd = ops["attn/flash"]
    assert fwd.flops == 4 * 4 * 12 * (2048 * 2049 // 2) * 64  # query i sees keys 0..i
    assert ops["attn/flash.bwd"].flops * 2 == fwd.flops * 5


def test_unfused_attention_has_score_softmax_and_over_v_with_backward():
    ops = by_label(model_ops(GPT2, Workload(batch=4, seq=1024, attention="unfused")))
    score, over_v = ops["attn/score"], ops["attn/over_v"]
    assert score.kind == over_v.kind == BMM
    assert (score.batch, score.m, score.n, score.k) == (48, 1024, 1024, 64)
    assert (over_v.m, over_v.n, over_v.k) == (1024, 64, 1024)
    assert {"attn/softmax", "attn/softmax.bwd", "attn/score.dq", "attn/score.dk", "attn/over_v.dp",
            "attn/over_v.dv"} <= set(ops)
    assert FLASH not in {op.kind for op in ops.values()}


def test_decode_multiplies_one_token_per_sequence_against_the_cache():
    ops = by_label(model_ops(LLAMA, Workload(batch=16, seq=8192, mode="decode")))
    assert ops["attn/qkv"].m == 16 and ops["logits"].m == 16
    flash = ops["attn/flash"]
    assert (flash.m, flash.n, flash.k) == (1, 8192, 128) and not flash.causal
    assert not any(op.pass_ != "fwd" for op in ops.values())


MLA = ModelShape("mla-like", hidden=2048, num_layers=4, num_heads=16, vocab=32000, head_dim=128, ffn=5632,
                 mlp="swiglu", norm="rmsnorm", bias=False, kv_lora_rank=512, q_lora_rank=1536, rope_head_dim=64)


def test_latent_decode_reads_the_latent_cache_not_per_head_keys_and_values():
    """Absorbed latent attention (DeepSeek's reference decode): per sequence, every local head scores
    the cached row (latent + rotary key, 576 values a token) and sums the latents (512); no per-head
    keys or values are made, and no fused kernel is assumed that torch cannot run."""
    w = Workload(batch=8, seq=4096, tp=2, mode="decode")
    ops = by_label(model_ops(MLA, w))
    score, over_v = ops["attn/score"], ops["attn/over_v"]
    heads = MLA.num_heads // w.tp
    assert (score.batch, score.m, score.n, score.k, score.layout) == (8, heads, 4096, 576, "nt")
    assert (over_v.batch, over_v.m, over_v.n, over_v.k, over_v.layout) == (8, heads, 512, 4096, "nn")
    assert ops["attn/softmax"].m == 8 * heads and ops["attn/softmax"].n == 4096
    # The cache each BMM reads is the one memory.py holds: kv_cache_values per layer and sequence.
    per_layer = MLA.kv_cache_values(seq=4096, tp=w.tp) // MLA.num_layers
    assert score.n * score.k == per_layer and over_v.k * over_v.n == per_layer * 512 // 576
    assert FLASH not in {op.kind for op in ops.values()} and "attn/kv_up" not in ops


def test_prefill_scores_only_the_last_token():
    ops = by_label(model_ops(LLAMA, Workload(batch=2, seq=1024, mode="prefill")))
    assert ops["attn/qkv"].m == 2048 and ops["logits"].m == 2
    assert "loss" not in ops


def test_moe_has_router_and_experts():
    moe = ModelShape("moe", hidden=4096, num_layers=32, num_heads=32, num_kv_heads=8, vocab=32000, ffn=14336,
                     mlp="swiglu", num_experts=8, top_k=2, bias=False)
    ops = by_label(model_ops(moe, Workload(batch=1, seq=4096)))
    assert (ops["moe/router"].n, ops["moe/router"].k) == (8, 4096)
    up = ops["moe/experts/up"]
    assert up.count == 32 * 8 and up.m == 4096 * 2 // 8 and up.n == 14336
    assert "mlp/up" not in ops


def test_tensor_parallel_must_divide_heads_and_ffn():
    falcon = ModelShape("falcon-like", hidden=4544, num_layers=32, num_heads=71, num_kv_heads=1, vocab=65024)
    with pytest.raises(ShapewiseError, match="does not divide .*71 heads"):
        model_ops(falcon, Workload(tp=2))
    with pytest.raises(ShapewiseError, match="FFN width"):
        model_ops(LLAMA.replace(ffn=14337), Workload(tp=2))


def test_a_small_ops_row_says_its_size_and_rate_not_zero():
    """A served step's head gathers one row a sequence at t=2: 4 × 4,096 bf16 is 32 KiB, which its row read as
    "0.0 MiB" at "0 GB/s"; sizes of a MiB and more read as before, and the key a stored case holds is kept."""
    from shapewise import predict_step
    from shapewise.ops import size_text
    from shapewise.presets import get_model
    from shapewise.report import op_table

    assert (size_text(32 * 2**10), size_text(64 * 2**20), size_text(100)) == ("32.0 KiB", "64.0 MiB", "100 B")
    step = predict_step(get_model("llama3-8b"), Workload(mode="prefill", tp=2), gpu="h200")
    row = next(r for r in op_table(step).rows if r[0] == "tp/logits")
    assert row[1] == "4×4096 over 2, 32.0 KiB"
    # the op's shape_text is part of a stored case's key (cases.op_case), so the committed measurements still match
    op = next(c.op for c in step.costs if c.op.name == "tp/logits")
    assert op.shape_text == "4×4096 over 2, 0.0 MiB"
    assert row[6].endswith(" GB/s") and float(row[6].split()[0]) > 0
