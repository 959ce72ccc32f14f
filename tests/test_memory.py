"""The memory estimate against hand-computed cases and the paper it follows."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shapewise.errors import ShapewiseError
from shapewise.hardware import get_gpu
from shapewise.memory import (
    ALLOCATOR_FRACTION,
    CONTEXT_BYTES,
    FRAMEWORKS,
    PRECISIONS,
    Memory,
    estimate,
    korthikanti_bytes,
    layer_activation_bytes,
)
from shapewise.parallel import Parallelism
from shapewise.presets import get_model
from shapewise.shapes import ModelShape, Workload

GPT = ModelShape(name="gpt", hidden=4096, num_layers=8, num_heads=32, vocab=51200, learned_positions=2048)
STATS = 2 * 8  # two LayerNorms' fp32 mean and rstd per row: the paper leaves them out


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_gpt_layer_reproduces_korthikanti(tp):
    """Unfused attention with dropout, as the paper's GPT runs: sbh(34 + 5as/h)/t exactly (plus the
    norms' statistics, which the paper leaves out)."""
    s, b = 2048, 2
    per_token = layer_activation_bytes(GPT, seq=s, dtype_bytes=2, attention="unfused", tp=tp, recompute=0,
                                       framework=FRAMEWORKS["megatron-gpt"])
    assert per_token * s * b == pytest.approx(korthikanti_bytes(GPT, seq=s, batch=b, tp=tp) + STATS * s * b / tp)


def test_flash_keeps_no_square_term_and_selective_drops_the_core():
    s, a, h = 2048, GPT.num_heads, GPT.hidden
    gpt = FRAMEWORKS["megatron-gpt"]
    flash = layer_activation_bytes(GPT, seq=s, dtype_bytes=2, attention="flash", tp=1, recompute=0, framework=gpt)
    assert flash == pytest.approx(34 * h + 4 * a + STATS)  # fp32 log-sum-exp per row and head
    selective = layer_activation_bytes(GPT, seq=s, dtype_bytes=2, attention="unfused", tp=1, recompute=1, framework=gpt)
    assert selective == pytest.approx(34 * h + STATS)  # Korthikanti's selective: the 5as term recomputed
    full = layer_activation_bytes(GPT, seq=s, dtype_bytes=2, attention="flash", tp=4, recompute=2, framework=gpt)
    assert full == pytest.approx(2 * h / 4)  # the layer's input, sequence-parallel


def test_swiglu_gqa_rope_layer_by_hand():
    """Eager PyTorch, Llama-style: every kept tensor counted by hand (bytes per token, bf16)."""
    shape = ModelShape(name="l", hidden=1024, num_layers=2, num_heads=16, num_kv_heads=4, ffn=2816, vocab=32000,
                       mlp="swiglu", norm="rmsnorm", bias=False, tied_embeddings=False)
    q, kv, h, f = 1024, 256, 1024, 2816
    expected = (2 * h + 4  # norm input, its rstd
                + 2 * h  # the QKV projection's input
                + 2 * (q + 2 * kv) + 2 * (q + kv)  # the QKV output (V's view keeps it) and rotated Q, K
                + 4 * 16  # flash's log-sum-exp
                + 2 * q  # O, the output projection's input
                + 2 * h + 4 + 2 * h  # MLP norm input, rstd, output
                + 4 * 2 * f)  # gate, up, silu(gate), product
    got = layer_activation_bytes(shape, seq=512, dtype_bytes=2, attention="flash", tp=1, recompute=0,
                                 framework=FRAMEWORKS["torch"])
    assert got == pytest.approx(expected)


def test_model_state_by_precision_and_zero_stage():
    shape, w = get_model("llama2-7b"), Workload(batch=1, seq=1024)
    P = shape.params
    for zero in range(4):
        m = estimate(shape, w, Parallelism(dp=8, zero=zero), precision="mixed")
        assert m.grads == pytest.approx(2 * P / (8 if zero >= 2 else 1))
        low = 12 * P / (8 if zero >= 1 else 1)
        assert low <= m.optimizer <= low + 4 * P  # plus the step's fp32 gradient copy when that is the peak
        layer_weights = 2 * shape.layer_params * 2  # FSDP's two gathered layers
        assert m.weights == pytest.approx(2 * P / 8 + layer_weights if zero == 3 else 2 * P)
    bf16 = estimate(shape, w, precision="bf16")
    assert bf16.weights + bf16.grads == pytest.approx(4 * P)


def test_optimizer_step_can_be_the_peak():
    """Tiny activations: the step's temporaries (fp32 copies of the grads) exceed the backward's."""
    shape = get_model("gpt2")
    m = estimate(shape, Workload(batch=1, seq=16), precision="mixed")
    assert m.activations == 0 and m.loss == 0
    assert m.optimizer == pytest.approx(16 * shape.params)


def test_pipeline_in_flight_micro_batches():
    shape, w = GPT.replace(num_layers=16), Workload(batch=1, seq=2048)
    kw = dict(framework="megatron-gpt", precision="mixed-fp32-grads")  # no step temporaries: the backward peaks
    one = estimate(shape, w, Parallelism(pp=1), **kw).activations
    plain = estimate(shape, w, Parallelism(pp=4, micro_batches=8), **kw).activations
    # The first stage holds 4 micro-batches of its 4 layers: the whole model's activations of one.
    assert plain == pytest.approx(one, rel=1e-9)
    few = estimate(shape, w, Parallelism(pp=4, micro_batches=2), **kw).activations
    assert few == pytest.approx(one / 2)
    interleaved = estimate(shape, w, Parallelism(pp=4, vp=2, micro_batches=8), **kw).activations
    assert interleaved == pytest.approx(one * (1 + 3 / 8))  # L(1 + (p-1)/(pv))


def test_logits_loss_buffers_and_kv_cache():
    shape = get_model("llama2-7b")
    m = estimate(shape, Workload(batch=2, seq=1024), framework="torch", precision="mixed-fp32-grads")
    assert m.loss == pytest.approx(2 * 1024 * (32000 * 12 + 2 * 2 * 4096))
    infer = estimate(shape, Workload(batch=8, seq=4096, mode="decode", tp=2))
    assert infer.kv_cache == pytest.approx(2 * 32 * (32 // 2) * 128 * 8 * 4096 * 2)
    assert infer.weights == pytest.approx(shape.params + 32 * 2 * 4096)  # bf16 over two ranks, the norms whole


@pytest.mark.parametrize("tp", [8, 16, 32])
def test_kv_heads_fewer_than_t_are_replicated_not_split(tp):
    """Llama-3-8B's 8 kv heads over t ranks: past t=8 each rank holds one whole kv head, so its k and v
    weights (their gradients and optimizer state), the k/v columns of its QKV GEMM and its kv cache stop
    shrinking at one head; the rest of a layer splits t ways."""
    from shapewise.ops import model_ops

    shape = get_model("llama3-8b")
    d, h, L, kv = shape.d_head, shape.hidden, shape.num_layers, shape.kv_heads
    rank_kv = max(1, kv // tp)
    qkv = next(op for op in model_ops(shape, Workload(tp=tp)) if op.label == "attn/qkv")
    assert qkv.n == (shape.num_heads // tp + 2 * rank_kv) * d
    kv_params = 2 * d * h  # one kv head's k and v projections (no biases)
    norms = L * 2 * h + h  # two RMSNorms a layer and the final one, whole on every rank
    # Split t ways but the norms, which every rank keeps whole, and the kv heads.
    rank = (shape.params - norms - L * kv * kv_params) / tp + norms + L * rank_kv * kv_params
    m = estimate(shape, Workload(batch=1, seq=1024, tp=tp), precision="mixed-fp32-grads")
    assert (m.weights, m.grads) == (pytest.approx(2 * rank), pytest.approx(4 * rank))
    assert m.optimizer == pytest.approx(12 * rank)
    served = estimate(shape, Workload(batch=8, seq=4096, mode="decode", tp=tp))
    assert served.weights == pytest.approx(2 * rank)  # serving holds what training does
    assert served.kv_cache == pytest.approx(2 * L * rank_kv * d * 8 * 4096 * 2)


@pytest.mark.parametrize("tp", [2, 8])
def test_latent_attention_down_projections_are_whole_on_every_rank(tp):
    """MiniCPM3-4B's latent attention over t ranks: q_a_proj and kv_a_proj_with_mqa, and their norms, are
    replicated (vLLM's and SGLang's ReplicatedLinear), as their GEMMs are priced unsplit; the up
    projections and o_proj split t ways. A rank's weights, gradients, optimizer state and its share of the
    data-parallel sync and optimizer step hold the down projections whole."""
    from shapewise.cost import SPEC
    from shapewise.hf import load_config
    from shapewise.parallel import LayerTimes, Network, step_arrays

    shape = load_config(Path(__file__).parent / "data" / "hf-later" / "minicpm3-4b.json")
    h, L, q, kv = shape.hidden, shape.num_layers, shape.q_lora_rank, shape.kv_lora_rank
    down = L * (h * (q + kv + shape.rope_head_dim) + q + kv)  # weights and their latent norms
    norms = L * 2 * h  # the layers' two RMSNorms
    # Split t ways but the norms and the down projections, which every rank keeps whole.
    rank = (shape.params - h - down - norms) / tp + h + down + norms
    m = estimate(shape, Workload(batch=1, seq=1024, tp=tp), precision="mixed-fp32-grads")
    assert (m.weights, m.grads) == (pytest.approx(2 * rank), pytest.approx(4 * rank))
    assert m.optimizer == pytest.approx(12 * rank)
    served = estimate(shape, Workload(batch=8, seq=4096, mode="decode", tp=tp))
    assert served.weights == pytest.approx(2 * rank)
    # The optimizer step reads and writes what one rank holds, its final norm whole as estimate's.
    times = LayerTimes(fwd_ms=1.0, bwd_ms=2.0, core_fwd_ms=0.25, tp_comm_ms=0.1, embed_ms=0.0, head_ms=0.0,
                       layer_flops=1e12, outside_flops=0.0, bytes_per_s=4.8e12)
    out = step_arrays(times, shape, Workload(batch=1, seq=1024, tp=tp), pp=1, vp=1, dp=1, ep=1, zero=0,
                      recompute=0, micro_batches=1, network=Network(intra_gbs=450, inter_gbs=50), params=SPEC,
                      precision=PRECISIONS["mixed"])
    touched = rank * (2 * 2 + 2 + 2 * 12)  # bf16 weights and grads, fp32 master weights and Adam's moments
    assert float(out["optimizer_ms"]) == pytest.approx(touched / (SPEC.gemm_bandwidth * times.bytes_per_s) * 1e3)


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_norms_and_row_parallel_biases_are_whole_on_every_rank(tp):
    """Pythia-1B's LayerNorms (weights and biases) and the output biases of its row-parallel linears
    (attention's out, the MLP's down) are whole on every rank, as in Megatron-LM and PyTorch's tensor
    parallelism: a rank's weights, gradients and optimizer state hold them whole; t=1 is the model."""
    from shapewise.hf import load_config

    shape = load_config(Path(__file__).parent / "data" / "hf" / "pythia-1b.json")
    assert shape.norm == "layernorm" and shape.attn_bias and shape.mlp_bias
    h, L = shape.hidden, shape.num_layers
    whole = L * (shape.norms_per_layer * 2 * h + 2 * h) + 2 * h  # and the final LayerNorm
    rank = (shape.params - whole) / tp + whole
    m = estimate(shape, Workload(batch=1, seq=1024, tp=tp), precision="mixed-fp32-grads")
    assert (m.weights, m.grads, m.optimizer) == (pytest.approx(2 * rank), pytest.approx(4 * rank),
                                                 pytest.approx(12 * rank))
    assert tp > 1 or m.weights == 2 * shape.params


def test_replicated_gradients_all_reduce_once_a_step_in_a_plan():
    """step_arrays all-reduces the norms' gradients (the final norm's too) over the t ranks once a step, after
    the last backward, at the gradients' precision: part of tp_comm_ms and of the step, the same for 1 and 8
    micro-batches."""
    from shapewise.cost import SPEC
    from shapewise.parallel import LayerTimes, Network, ring_ms, step_arrays

    shape, tp = get_model("llama3-8b"), 4
    times = LayerTimes(fwd_ms=1.0, bwd_ms=2.0, core_fwd_ms=0.25, tp_comm_ms=0.1, embed_ms=0.0, head_ms=0.0,
                       layer_flops=1e12, outside_flops=0.0, bytes_per_s=4.8e12)
    network = Network(intra_gbs=450, inter_gbs=50)
    norms = (shape.num_layers * 2 + 1) * shape.hidden  # two RMSNorms a layer and the final one
    once = ring_ms(norms * 4, tp, 450, SPEC, passes=2)  # fp32 gradients
    for m in (1, 8):
        out = step_arrays(times, shape, Workload(batch=1, seq=1024, tp=tp), pp=1, vp=1, dp=1, ep=1, zero=0,
                          recompute=0, micro_batches=m, network=network, params=SPEC,
                          precision=PRECISIONS["mixed-fp32-grads"])
        assert float(out["tp_comm_ms"]) == pytest.approx(m * shape.num_layers * 0.1 + once)
        parts = ("compute_ms", "bubble_ms", "pipeline_comm_ms", "dp_comm_ms", "ep_comm_ms", "optimizer_ms")
        assert float(out["total_ms"]) == pytest.approx(sum(float(out[k]) for k in parts) + once)


def test_parts_add_and_allowance():
    a, b = Memory(weights=1, activations=2), Memory(grads=3, activations=4)
    assert (a + b).as_dict() == Memory(weights=1, grads=3, activations=6).as_dict()
    m = estimate(get_model("gpt2"), Workload(batch=2, seq=512))
    assert m.allocator == pytest.approx(ALLOCATOR_FRACTION * m.allocated_bytes + CONTEXT_BYTES)
    assert m.total_bytes == pytest.approx(sum(m.values()))


def test_bad_layouts_refused():
    with pytest.raises(ShapewiseError, match="pipeline"):
        estimate(GPT, Workload(), Parallelism(pp=3, vp=2))  # interleaved chunks must split the layers evenly
    with pytest.raises(ShapewiseError, match="precision"):
        estimate(GPT, Workload(), precision="fp64")
    with pytest.raises(ShapewiseError):
        Parallelism(zero=4)
    with pytest.raises(ShapewiseError):
        Parallelism(dp=6, ep=4)


def test_check_reports_memory_and_a_finding_when_it_does_not_fit():
    from shapewise.report import check

    big = check(get_model("llama2-70b"), Workload(batch=1, seq=2048), gpu="l4")
    assert big.findings[0].rule == "memory" and not big.memory.fits(get_gpu("l4"))
    small = check(get_model("gpt2"), Workload(batch=1, seq=1024), gpu="h200")
    assert small.memory.fits(get_gpu("h200")) and all(f.rule != "memory" for f in small.findings)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]), st.integers(1, 8), st.sampled_from(list(PRECISIONS)))
def test_more_sharding_or_recompute_never_needs_more(tp, dp, batch, precision):
    shape, w = get_model("llama2-7b"), Workload(batch=batch, seq=1024, tp=tp)
    base = estimate(shape, w, Parallelism(dp=dp), precision=precision).total_bytes
    assert estimate(shape, w, Parallelism(dp=dp, zero=3), precision=precision).total_bytes <= base + 1
    assert estimate(shape, w, Parallelism(dp=dp, recompute="full"), precision=precision).total_bytes <= base + 1
    assert estimate(shape, w.replace(batch=batch + 1), Parallelism(dp=dp), precision=precision).total_bytes >= base - 1
    assert math.isfinite(base) and not np.isnan(base)


def test_uneven_stages_count_the_fullest_stage_as_plan_does():
    # 8 layers over 3 stages are 3, 3 and 2 (plan.stage_layers): the fullest, the first (3 layers, the
    # embedding, 3 micro-batches in flight), holds what a 9-layer model's first stage holds; an even split
    # is priced as before.
    nine = dataclasses.replace(GPT, num_layers=9)
    w = Workload(batch=1, seq=2048)
    uneven = estimate(GPT, w, Parallelism(pp=3, micro_batches=6))
    assert uneven.total_bytes == pytest.approx(estimate(nine, w, Parallelism(pp=3, micro_batches=6)).total_bytes)
    assert estimate(GPT, w, Parallelism(pp=4, micro_batches=8)).total_bytes < uneven.total_bytes


def test_an_fp8_steps_activations_and_pipeline_sends_are_bf16():
    from shapewise.memory import FRAMEWORKS, layer_activation_bytes

    kw = dict(seq=2048, attention="flash", tp=1, recompute=0, framework=FRAMEWORKS["torch"])
    assert layer_activation_bytes(GPT, dtype_bytes=1, **kw) == layer_activation_bytes(GPT, dtype_bytes=2, **kw)
    assert layer_activation_bytes(GPT, dtype_bytes=4, **kw) > layer_activation_bytes(GPT, dtype_bytes=2, **kw)
    from shapewise.memory import PRECISIONS
    from shapewise.parallel import layer_times, network_for, step_arrays
    from shapewise.profile import cost_model

    model = cost_model("h100", spec_only=True)
    times = layer_times(GPT, Workload(), gpu=model.gpu, params=model.params)
    sends = [float(step_arrays(times, GPT, Workload(dtype=d), pp=2, vp=1, dp=1, ep=1, zero=0, recompute=0,
                               micro_batches=4, network=network_for(model.gpu), params=model.params,
                               precision=PRECISIONS["mixed"])["pipeline_comm_ms"]) for d in ("fp8", "bf16")]
    assert sends[0] == sends[1] > 0


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["llama2-7b", "gpt2"]), st.sampled_from(["prefill", "decode"]), st.integers(1, 8),
       st.sampled_from([256, 1024, 4096]), st.sampled_from([1, 2, 4]))
def test_unfused_inference_holds_a_layers_scores_and_softmax(name, mode, batch, seq, tp):
    """Unfused attention's score matrix and its softmax (both of attn/softmax's bytes) are alive at once in
    serving too: a prefill of 8 × 4096 tokens on llama3-8b holds 16 GiB of them, once counted as none."""
    from shapewise.ops import model_ops

    shape, w = get_model(name), Workload(batch=batch, seq=seq, tp=tp, mode=mode, attention="unfused")
    softmax = max(op.bytes for op in model_ops(shape, w) if op.name == "attn/softmax")
    unfused = estimate(shape, w).activations
    assert unfused >= softmax * (1 - 1e-9)
    assert unfused >= estimate(shape, w.replace(attention="flash")).activations


@pytest.mark.parametrize("weights, whole", [("head", True), ("head_bias", True), ("per_head", False),
                                            ("projection", False)])
def test_a_qk_norm_shared_by_the_heads_is_whole_on_every_rank(weights, whole):
    """Qwen3's RMSNorm(head_dim) and Persimmon's LayerNorm(head_dim) serve every head: each rank holds them
    whole. StableLM 2's norm a head and OLMo-2's over the projection split with the heads."""
    from shapewise.parallel import whole_params

    shape = get_model("llama3-8b").replace(qk_norm=True, qk_norm_weights=weights)
    plain = get_model("llama3-8b")
    assert shape.qk_norm_params > 0
    assert whole_params(shape) - whole_params(plain) == (shape.qk_norm_params if whole else 0)
