"""The cost model's invariants, on any GEMM hypothesis can think of."""

import dataclasses
import heapq
import math
import time

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import shapewise
from shapewise import ShapewiseError
from shapewise.cost import LOSS_NAMES, Losses, predict_ops
from shapewise.hardware import get_gpu
from shapewise.ops import attention_op
from shapewise.params import SPEC
from shapewise.profile import CostModel, cost_model

SPEC_H200 = cost_model("h200", spec_only=True)  # most tests here are of the analytic model itself


def predict_gemm(m, n, k, *, gpu=SPEC_H200, **options):
    return shapewise.predict_gemm(m, n, k, gpu=gpu, **options)


dims = st.integers(min_value=1, max_value=20000)
layouts = st.sampled_from(["nn", "nt", "tn"])
dtypes = st.sampled_from(["bf16", "fp16", "fp8", "tf32", "fp32"])


@settings(max_examples=300, deadline=None)
@given(dims, dims, dims, st.integers(1, 64), layouts, dtypes)
def test_time_is_positive_and_never_beats_peak(m, n, k, batch, layout, dtype):
    assume(dtype != "fp8" or (layout == "nt" and batch == 1))  # torch's one fp8 GEMM; predict_gemm refuses others
    for model in (SPEC_H200, cost_model("h200")):  # the analytic model, and with the shipped profile's corrections
        p = predict_gemm(m, n, k, batch=batch, layout=layout, dtype=dtype, gpu=model)
        assert p.time_ms > 0 and math.isfinite(p.time_ms)
        assert p.flops == 2 * m * n * k * batch  # FLOPs exact
        assert 0 < p.tflops <= p.peak_tflops * (1 + 1e-12)  # held at the ideal time, to rounding


@settings(max_examples=300, deadline=None)
@given(dims, dims, dims, layouts, dtypes)
def test_losses_account_for_the_whole_gap_to_peak(m, n, k, layout, dtype):
    assume(dtype != "fp8" or layout == "nt")  # torch's one fp8 GEMM; predict_gemm refuses others
    for model in (SPEC_H200, cost_model("h200")):
        p = predict_gemm(m, n, k, layout=layout, dtype=dtype, gpu=model)
        ideal_ms = p.flops / (p.peak_tflops * 1e9)
        # every cause is a loss; a profile's measured correction is its own part, of either sign
        assert all(p.losses[name] >= -1e-12 for name in LOSS_NAMES if name != "correction")
        assert ideal_ms + sum(p.losses.values()) == pytest.approx(p.time_ms, rel=1e-9)
        if model is SPEC_H200:
            assert p.losses["correction"] == 0


def _pad_misaligned_leads(m, n, k, layout, vec=8):
    pad = lambda x: x if x == 1 else -(-x // vec) * vec  # noqa: E731  (a leading dim of 1 is a vector: aligned)
    if layout == "tn":
        return pad(m), pad(n), k
    return m, pad(n), pad(k)


@settings(max_examples=400, deadline=None)
@given(dims, dims, dims, layouts)
def test_padding_a_misaligned_dim_is_never_predicted_slower(m, n, k, layout):
    assume(min(m, n) > 1)  # a side of 1 is a gemv, which padding would turn into a tiled GEMM
    pm, pn, pk = _pad_misaligned_leads(m, n, k, layout)
    slow = predict_gemm(m, n, k, layout=layout)
    fast = predict_gemm(pm, pn, pk, layout=layout)
    assert fast.time_ms <= slow.time_ms * (1 + 1e-12)


def test_alignment_classes_match_the_h200():
    # DESIGN facts: 8192×8192 · 8192×n on an H200: n=4096 789 TFLOP/s, 4097 123, 4098 275, 4104 758.
    t = {n: predict_gemm(8192, n, 8192).tflops for n in (4096, 4097, 4098, 4104)}
    assert t[4097] < t[4098] < t[4104]
    assert 4.5 < t[4104] / t[4097] < 7.5
    assert 2.0 < t[4104] / t[4098] < 3.5
    assert t[4104] / t[4096] > 0.9


def test_layout_decides_which_dim_must_be_aligned():
    # In a weight gradient ("tn") A is stored k×m: m is a leading dim, k is not.
    assert predict_gemm(4097, 4096, 4096, layout="tn").main_loss == "misalign"
    assert predict_gemm(4096, 4096, 4097, layout="tn").losses["misalign"] == 0
    assert predict_gemm(4096, 4096, 4097, layout="nn").main_loss == "misalign"
    assert predict_gemm(4097, 4096, 4096, layout="nn").losses["misalign"] == 0


def test_small_gemv_is_memory_bound_and_large_square_is_not():
    assert predict_gemm(1, 8192, 8192, layout="nt").main_loss == "memory"
    assert predict_gemm(8192, 8192, 8192).losses["memory"] == 0


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 65536), st.integers(1, 65536), st.integers(1, 64), layouts, st.booleans())
def test_a_side_of_one_is_a_gemv_bound_by_memory(other, k, batch, layout, m_is_one):
    m, n = (1, other) if m_is_one else (other, 1)
    p = predict_gemm(m, n, k, batch=batch, layout=layout)  # the analytic model: no tiles, no padding
    params, gpu = SPEC_H200.params, SPEC_H200.gpu
    stream_ms = (p.bytes / (gpu.bytes_per_s * params.gemv_bandwidth)
                 + params.gemv_latency_ms * 1e-3 * min(1.0, p.bytes / (params.memory_ramp_mb * 1e6))) * 1e3
    lead_a = m if layout == "tn" else k
    narrow = (lead_a > 1 and lead_a * 2 % 16 != 0) or (n > 1 and n * 2 % 16 != 0)
    if not narrow and batch == 1:  # aligned weight streaming: priced as the memory-bound GEMMs are
        assert p.time_ms >= p.bytes / (gpu.bytes_per_s * params.gemm_bandwidth) * 1e3 + params.launch_ms - 1e-12
        return
    assert (p.losses["misalign"] > 0) == narrow
    slow = params.gemv_misaligned if narrow else 1.0
    assert p.time_ms == pytest.approx(stream_ms * slow + params.gemv_fixed_ms, rel=1e-9)
    assert p.losses["tile"] == p.losses["wave"] == 0 and p.main_loss in ("memory", "launch", "misalign")


@pytest.mark.parametrize("m, n, k, layout", [(3264, 1, 31336, "nt"), (17920, 1, 1664, "nn"), (1, 54520, 1448, "tn"),
                                             (48828, 1, 4032, "nn")])
def test_a_leading_dim_of_one_is_a_vector_never_misaligned(m, n, k, layout):
    """Measured on an H200 (results/h200-skinny/) at 2.3-3.1 TB/s in nvjet and gemv kernels; an n of 1
    (or a "tn" m of 1) classed odd had them priced as misaligned tiles, 2-3x slow."""
    for model in (SPEC_H200, cost_model("h200")):
        p = predict_gemm(m, n, k, layout=layout, gpu=model)
        assert p.losses["misalign"] == 0
        assert p.bytes / (p.time_ms * 1e-3) > 1e12  # streamed at 1 TB/s or more


def test_the_power_cap_slows_long_calls_near_peak_rate_only():
    """Past power_onset_ms a call runs slower by power_slowdown times its fraction of peak rate,
    booked to the kernel's ceiling: short calls and memory-bound ones are untouched."""

    capped = shapewise.CostModel(SPEC_H200.gpu, dataclasses.replace(SPEC_H200.params, power_onset_ms=2.0,
                                                                     power_slowdown=0.2))
    for m, n, k, layout in ((16384, 16384, 16384, "nt"), (8192, 8192, 1024, "nn"), (1, 65536, 65536, "nt")):
        plain, slow = (predict_gemm(m, n, k, layout=layout, gpu=model) for model in (SPEC_H200, capped))
        busy = plain.flops / (plain.peak_tflops * 1e9) / plain.time_ms
        expected = plain.time_ms + 0.2 * busy * max(plain.time_ms - 2.0, 0.0)
        assert slow.time_ms == pytest.approx(expected, rel=1e-12)
        assert slow.losses["kernel"] - plain.losses["kernel"] == pytest.approx(slow.time_ms - plain.time_ms, abs=1e-12)
    big = predict_gemm(16384, 16384, 16384, layout="nt", gpu=capped)
    assert big.time_ms > 1.1 * predict_gemm(16384, 16384, 16384, layout="nt", gpu=SPEC_H200).time_ms
    assert predict_gemm(8192, 8192, 1024, gpu=capped).time_ms == predict_gemm(8192, 8192, 1024, gpu=SPEC_H200).time_ms


def test_a_weight_stream_fills_over_memory_fill_mb_then_runs_at_bandwidth():
    """A memory-bound GEMM's fill (memory_fill_ms over its first memory_fill_mb) is booked to memory:
    it adds in proportion to the bytes up to memory_fill_mb and the whole of it past; the spec model has none."""

    filled = shapewise.CostModel(SPEC_H200.gpu, dataclasses.replace(SPEC_H200.params, memory_fill_ms=0.02,
                                                                     memory_fill_mb=100.0))
    for m, n, k, share in ((8, 4096, 4096, 4096 * 4104 * 2 + 8 * 4096 * 2), (32, 151936, 8192, None)):
        plain, slow = (predict_gemm(m, n, k, layout="nt", gpu=model) for model in (SPEC_H200, filled))
        assert plain.main_loss == slow.main_loss == "memory"
        added = 0.02 * (min(1.0, share / 100e6) if share else 1.0)
        assert slow.time_ms - plain.time_ms == pytest.approx(added, rel=1e-9)
        assert slow.losses["memory"] - plain.losses["memory"] == pytest.approx(added, rel=1e-9)
    assert SPEC_H200.params.memory_fill_ms == 0
    compute = predict_gemm(8192, 8192, 8192, gpu=filled)
    assert compute.time_ms == predict_gemm(8192, 8192, 8192, gpu=SPEC_H200).time_ms


def test_one_row_walk_prices_the_h200s_clusters_in_its_bands_only():
    """A weight of 705-1056 columns read by 1-3 rows (`nt`, aligned, k up to WALK_MAX_K) costs at least
    the walk's line with the H200's profile, k split four ways up to 960 columns and two past, booked to
    the waves; outside the bands, with the walk off, in the spec model and on an H100 borrowing the
    profile (its cuBLAS runs another kernel there), nothing changes."""

    def off(model):
        return shapewise.CostModel(model.gpu, dataclasses.replace(model.params, walk_fixed_ms=0.0, walk_per_k_ms=0.0))

    h200 = cost_model("h200")
    assert h200.params.walk_per_k_ms > 0 and SPEC.walk_per_k_ms == 0
    for m, n, k, ways in ((1, 1024, 2048, 2), (3, 1000, 2560, 2), (2, 968, 1664, 2), (1, 1056, 1776, 2),
                          (1, 768, 2048, 4), (2, 960, 2400, 4), (3, 712, 1600, 4)):
        walked, plain = (predict_gemm(m, n, k, layout="nt", gpu=gpu) for gpu in (h200, off(h200)))
        line = h200.params.walk_fixed_ms + h200.params.walk_per_k_ms * k / ways
        assert walked.time_ms == pytest.approx(max(line, plain.time_ms), rel=1e-9)
        assert walked.time_ms > plain.time_ms and walked.split_k == ways
        assert walked.losses["wave"] - plain.losses["wave"] == pytest.approx(walked.time_ms - plain.time_ms)
    for m, n, k, layout, batch in ((4, 1024, 2048, "nt", 1), (1, 704, 2048, "nt", 1), (1, 1064, 2048, "nt", 1),
                                   (1, 1024, 2568, "nt", 1), (1, 1024, 2048, "nn", 1), (1, 1020, 2048, "nt", 1),
                                   (1, 1024, 2047, "nt", 1), (1, 1024, 2048, "nt", 2)):
        assert predict_gemm(m, n, k, layout=layout, batch=batch, gpu=h200).time_ms == \
            predict_gemm(m, n, k, layout=layout, batch=batch, gpu=off(h200)).time_ms
    h100 = cost_model("h100")
    assert h100.params.walk_per_k_ms == 0 and h100.params.gemm_trees == h200.params.gemm_trees  # borrowed, less the walk
    import argparse  # and lent on purpose (--profile with --borrow-profile): the same
    from importlib import resources

    from shapewise.cli.common import cost_model as chosen
    from shapewise.hardware import get_gpu

    shipped = str(resources.files("shapewise") / "data" / "profiles" / "h200.json")
    args = argparse.Namespace(profile=shipped, borrow_profile=True, spec_only=False)
    assert chosen(args, get_gpu("h200")).params.walk_per_k_ms == h200.params.walk_per_k_ms
    lent = chosen(args, get_gpu("h100"))
    assert lent.params.walk_per_k_ms == 0 and lent.profile.borrowed_for == "h100"


def test_fp32_has_no_alignment_penalty():
    assert predict_gemm(4096, 4097, 4096, dtype="fp32").losses["misalign"] == 0


def test_vectorized_matches_scalar():
    rng = np.random.default_rng(0)
    m, n, k = (rng.integers(1, 10000, 50) for _ in range(3))
    many = predict_gemm(m, n, k, layout="nt")
    for i in range(50):
        one = predict_gemm(int(m[i]), int(n[i]), int(k[i]), layout="nt")
        assert one.time_ms == pytest.approx(many.time_ms[i], rel=1e-12)
        assert tuple(many.tile[i]) == one.tile


def test_prediction_rate_is_vectorized():
    rng = np.random.default_rng(1)
    m, n, k = (rng.integers(16, 16384, 100_000) for _ in range(3))
    start = time.perf_counter()
    predict_gemm(m, n, k, layout="nt")
    # 100,000 predictions per second is the target; allow slow CI machines a wide margin here and
    # leave the real figure to benchmarks/bench_predict.py.
    assert time.perf_counter() - start < 5.0


@pytest.mark.parametrize("bad", [dict(m=0, n=1, k=1), dict(m=1, n=-3, k=1), dict(m=1.5, n=1, k=1)])
def test_bad_dims_raise_a_user_error(bad):
    with pytest.raises(ShapewiseError):
        predict_gemm(**bad)


def test_bad_layout_dtype_and_gpu_raise_user_errors():
    with pytest.raises(ShapewiseError, match="layout"):
        predict_gemm(8, 8, 8, layout="tt")
    with pytest.raises(ShapewiseError, match="dtype"):
        predict_gemm(8, 8, 8, dtype="int3")
    with pytest.raises(ShapewiseError, match="unknown GPU"):
        predict_gemm(8, 8, 8, gpu="h2000")


def test_losses_add_and_scale():
    a, b = Losses(kernel=1, tile=2), Losses(tile=1, memory=4)
    assert (a + b).as_dict() == {"kernel": 1, "tile": 3, "wave": 0, "misalign": 0, "memory": 4, "launch": 0, "comm": 0,
                                   "window": 0, "correction": 0}
    assert (2 * a).tile == 4 and (a * 2).total == 6
    assert (a + b).main == "memory"
    assert Losses(kernel=5).main is None


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([1, 4, 16]), st.integers(64, 8192), st.sampled_from([64, 128]),
       st.sampled_from(["fwd", "bwd"]))
def test_fused_attention_time_grows_with_the_sequence(batch, seq, head_dim, pass_):
    op = lambda s: attention_op(pass_, seqs=batch, heads=32, kv_heads=32, q_len=s, kv_len=s,  # noqa: E731
                                head_dim=head_dim, causal=True, dtype_bytes=2)
    short, long = predict_ops([op(seq), op(seq * 2)], gpu="h200", dtype="bf16")
    assert long.time_ms > short.time_ms and sum(long.losses.values()) == pytest.approx(long.time_ms - long.op.flops / 989.4e12 * 1e3, rel=1e-6)


def test_decoding_attention_reads_the_cache_and_pads_no_query_block():
    """One new token against an 8192-token cache: the kernel streams the cache; it must not be priced
    as 128 padded query rows (three times the cache's read time)."""
    op = attention_op("fwd", seqs=16, heads=32, kv_heads=8, q_len=1, kv_len=8192, head_dim=128, causal=False,
                      dtype_bytes=2)
    cost = predict_ops([op], gpu="h200", dtype="bf16")[0]
    read_ms = op.bytes / get_gpu("h200").bytes_per_s * 1e3
    assert cost.losses.main == "memory" and read_ms < cost.time_ms < 1.5 * read_ms


def _decode(seqs, heads, kv_heads, kv_len, head_dim, q_len=1):
    return attention_op("fwd", seqs=seqs, heads=heads, kv_heads=kv_heads, q_len=q_len, kv_len=kv_len, head_dim=head_dim,
                        causal=False, dtype_bytes=2)


@pytest.mark.parametrize("shape, tile, blocks, splits, busiest", [
    # (sequences, query heads, key heads, cache, head dim); splits as cuDNN's grids had them on an H200
    # (benchmarks/results/h200-decode-probe/decode-grid-probe.json)
    ((16, 71, 1, 16384, 64), 0, 80, 1, 128),  # Falcon-7B: 71 query heads are 5 blocks of 16 rows, too many to split
    ((32, 232, 8, 4096, 64), 0, 512, 1, 2 * 32),  # Falcon-180B: 29 per key head, 2 blocks each; 2 an SM: 2 waves
    ((1, 32, 8, 4096, 128), 1, 8, 32, 1),  # one sequence: 32 parts of one step each (grid 32x8)
    ((4, 12, 12, 32768, 64), 0, 48, 4, 64),  # GPT-2 at 32k: 4 parts (grid 4x48), 192 blocks in one wave of two an SM
    ((3, 22, 22, 8192, 64), 0, 66, 2, 32),  # 66 blocks: 2 parts, 4 would make 264 (grid 2x66)
    ((3, 24, 24, 8192, 64), 0, 72, 1, 64),  # 72 blocks: more than half the SMs, whole (grid 1x72)
    ((1, 8, 8, 640, 128), 1, 8, 4, 2),  # 5 steps: 4 parts (grid 4x8)
    ((4, 16, 4, 512, 256), 2, 16, 1, 4),  # 4 steps: too short to split (cuDNN ran it whole)
    ((2, 4, 2, 1024, 256), 2, 4, 8, 1),  # 8 steps: 8 parts
    ((8, 32, 32, 2000, 80), 1, 256, 1, 16),  # head dim 80 runs in the 128 tile; 2000 keys are 16 steps
])
def test_decoding_attention_is_laid_out_as_cudnn_runs_it(shape, tile, blocks, splits, busiest):
    from shapewise.cost import decode_blocks

    got = decode_blocks(_decode(*shape), 132)
    assert (got["tile"], got["blocks"], got["splits"], got["busiest"]) == (tile, blocks, splits, busiest)


def test_decoding_attention_prices_query_heads_past_a_block_and_unsplit_blocks_walking_long_caches():
    """With the shipped profile: 71 query heads per key head take 5 blocks walking the same cache, so
    they cost far more than 16 (one block) for the same bytes; and 80 sequences of one key head (80
    blocks, too many to split) walk 32768 keys each at a time a byte over 64 sequences' (split
    in two across the SMs), as cuDNN ran them (benchmarks/archive/decode_probe.py)."""
    many, one = predict_ops([_decode(16, 71, 1, 16384, 64), _decode(16, 16, 1, 16384, 64)], gpu="h200", dtype="bf16")
    assert many.time_ms > 2 * one.time_ms
    split, whole = predict_ops([_decode(64, 1, 1, 32768, 64), _decode(80, 1, 1, 32768, 64)], gpu="h200", dtype="bf16")
    assert whole.time_ms / whole.op.bytes > 1.15 * split.time_ms / split.op.bytes
    for cost in (many, one, split, whole):
        assert sum(cost.losses.values()) == pytest.approx(cost.time_ms - cost.op.flops / 989.4e12 * 1e3, rel=1e-6)


def test_a_short_chunk_against_a_long_cache_is_priced_by_its_stream_alone():
    """More than one query token bound by memory: the decode kernel's walk was measured for one token
    only, so the chunk's busiest SM walks no steps and its time is the stream and the fixed time."""
    from shapewise.cost import decode_blocks, decode_parts_ms

    chunk = _decode(4, 32, 8, 32768, 128, q_len=4)
    assert decode_blocks(chunk, 132)["busiest"] == 0
    stream, walk, _ = decode_parts_ms(chunk, get_gpu("h200"), cost_model("h200").params)
    assert walk == 0 and stream > 0


def test_the_busiest_sm_takes_blocks_in_order_as_they_free():
    from shapewise.cost import _busiest_sm

    assert _busiest_sm((5.0, 3.0, 1.0), 2, 132) == 5.0  # fewer blocks than SMs: the longest
    assert _busiest_sm((2.0,), 4 * 132, 132) == 8.0  # equal blocks: whole waves
    # Two SMs, blocks 4, 3, 2, 1 twice: 4 | 3, then 2 -> the SM free at 3 (5), 1 -> the one at 4 (5),
    # 4 -> 5+4 = 9, 3 -> 8, 2 -> 10, 1 -> 9: the busiest ends at 10, an even share.
    assert _busiest_sm((4.0, 3.0, 2.0, 1.0), 2, 2) == 10.0
    # Three: 4 | 3 | 2, 1 -> 3, 4 -> 7, 3 -> 6, 2 -> 6, 1 -> 7: whole blocks end at 7, past 20/3.
    assert _busiest_sm((4.0, 3.0, 2.0, 1.0), 2, 3) == 7.0
    # many waves: an SM's share and half the longest block, within 0.5% of dealing them all out
    blocks = tuple(float(x) for x in range(16, 0, -1))
    copies = 64 * 132 // 16 + 1
    share = sum(blocks) * copies / 132
    assert _busiest_sm(blocks, copies, 132) == share + 8
    free = [0.0] * 132
    for length in blocks * copies:
        heapq.heappush(free, heapq.heappop(free) + length)
    assert max(free) == pytest.approx(share + 8, rel=0.005)


def test_fused_attention_with_few_heads_waits_for_its_busiest_sm():
    # 16 sequences × heads of 2048 tokens: 256 query blocks on 132 SMs, the long ones first, so
    # some SMs run two long blocks: slower per FLOP than 256 sequences × heads, whose 4096 blocks
    # fill many waves evenly.
    op = lambda heads: attention_op("fwd", seqs=1, heads=heads, kv_heads=heads, q_len=2048, kv_len=2048,  # noqa: E731
                                    head_dim=128, causal=True, dtype_bytes=2)
    few, many = predict_ops([op(16), op(256)], gpu="h200", dtype="bf16")
    assert few.tflops < 0.8 * many.tflops and few.losses.wave > 0.2 * few.time_ms


@given(seq=st.integers(1, 1200), window=st.integers(1, 1300), partial=st.sampled_from([1.0, 2.25]))
@settings(max_examples=60, deadline=None)
def test_a_window_runs_the_mask_blocks_holding_its_pairs(seq, window, partial):
    """FlexAttention runs every mask block the band touches, and the cut ones dearer: counted pair by
    pair on small sequences, a block is run when it holds a kept pair (query at or after the key,
    less than `window` behind), and costs `partial` unless it holds nothing else."""
    from shapewise.cost import _band_blocks
    from shapewise.params import FLEX_MASK

    i, j = np.arange(seq)[:, None], np.arange(seq)[None, :]
    kept = (i >= j) & (i - j < window)
    blocks = -(-seq // FLEX_MASK)
    padded = np.zeros((blocks * FLEX_MASK, blocks * FLEX_MASK), bool)
    valid = np.zeros_like(padded)
    padded[:seq, :seq], valid[:seq, :seq] = kept, True
    tiles = padded.reshape(blocks, FLEX_MASK, blocks, FLEX_MASK).any(axis=(1, 3))
    full = (padded == valid).reshape(blocks, FLEX_MASK, blocks, FLEX_MASK).all(axis=(1, 3))
    cost = np.where(full, 1.0, partial) * tiles
    per_row, per_col = _band_blocks(seq, seq, window, partial)
    assert np.allclose(per_row, cost.sum(axis=1)) and np.allclose(per_col, cost.sum(axis=0))


@given(seq=st.integers(256, 16384), windows=st.lists(st.integers(1, 16384), min_size=2, max_size=2),
       d=st.sampled_from([64, 96, 128, 256]), heads=st.sampled_from([(8, 8), (8, 2), (9, 1)]),
       pass_=st.sampled_from(["fwd", "bwd"]))
@settings(max_examples=60, deadline=None)
def test_a_wider_window_never_costs_less(seq, windows, d, heads, pass_):
    """A window's kernel runs more blocks, never fewer, as the window widens (priced alike, whole or
    cut: a wider window can make a cut block whole, which the kernel runs cheaper); its programs cover
    every pair it keeps at the FLOPs the kernel spends on one (4 a pair and dim forward; 14 backward:
    the scores and their gradient recomputed)."""

    from shapewise.cost import _flex_work
    from shapewise.ops import attended_pairs

    narrow, wide = sorted(windows)
    assume(wide < seq)
    make = lambda w: attention_op(pass_, seqs=2, heads=heads[0], kv_heads=heads[1], q_len=seq, kv_len=seq,  # noqa: E731
                                  head_dim=d, causal=True, dtype_bytes=2, window=w, name="attn/window")
    model = cost_model("h200")
    alike = dataclasses.replace(model, params=dataclasses.replace(model.params, flash_window_partial=1.0))
    t_narrow, t_wide = (predict_ops([make(w)], gpu=alike, dtype="bf16")[0].time_ms for w in (narrow, wide))
    assert t_narrow <= t_wide * (1 + 1e-9)
    op = make(wide)
    work, busiest = _flex_work(op, 132)
    per_pair = 4 if pass_ == "fwd" else 14
    assert work >= op.batch * attended_pairs(seq, seq, causal=True, window=wide) * per_pair * d * (1 - 1e-9)
    assert work / 132 <= busiest * (1 + 1e-9) <= work


@given(seq=st.integers(2, 16384), window=st.integers(1, 16384), d=st.sampled_from([64, 80, 96, 128, 192, 256]),
       heads=st.sampled_from([(8, 8), (8, 2), (9, 1), (32, 8)]), pass_=st.sampled_from(["fwd", "bwd"]))
@settings(max_examples=80, deadline=None)
def test_a_windows_losses_are_causes_and_account_for_its_time(seq, window, d, heads, pass_):
    """A sliding window's time is its ideal time and its losses, each 0 or more (a window factor
    under 1, FlexAttention faster than cuDNN's rate, lessens the kernel's loss, never a negative
    window loss), in the spec model and the H200's profile."""
    assume(window < seq)
    op = attention_op(pass_, seqs=2, heads=heads[0], kv_heads=heads[1], q_len=seq, kv_len=seq, head_dim=d,
                      causal=True, dtype_bytes=2, window=window, name="attn/window")
    for model in (SPEC_H200, cost_model("h200")):
        cost = predict_ops([op], gpu=model, dtype="bf16")[0]
        assert all(getattr(cost.losses, name) >= -1e-12 for name in (*LOSS_NAMES, "window") if name != "correction")
        ideal_ms = op.flops / (cost.peak_tflops * 1e9)
        assert ideal_ms + sum(getattr(cost.losses, name) for name in (*LOSS_NAMES, "window")) == pytest.approx(
            cost.time_ms, rel=1e-9)


def test_a_grouped_windowed_backward_walks_its_group_in_one_program():
    """FlexAttention's backward sums a key head's group inside its dK/dV programs: with one key head
    for nine query heads (StarCoder2-7B on four GPUs) it has a ninth of the programs, each nine times
    as long, and on 132 SMs runs slower than with a key head per query head, though the FLOPs are the
    same (measured on an H200: 1.26 ms against 0.85 for nine sequences × heads of 8192, window 4096)."""
    make = lambda kv: attention_op("bwd", seqs=1, heads=9, kv_heads=kv, q_len=8192, kv_len=8192,  # noqa: E731
                                   head_dim=128, causal=True, dtype_bytes=2, window=4096, name="attn/window")
    model = cost_model("h200")
    grouped, ungrouped = (predict_ops([make(kv)], gpu=model, dtype="bf16")[0] for kv in (1, 9))
    assert grouped.op.flops == ungrouped.op.flops
    assert grouped.time_ms > 1.2 * ungrouped.time_ms and grouped.losses.wave > ungrouped.losses.wave


def test_a_windowed_kernels_rate_is_its_own_loss_and_named_where_it_dominates():
    """FlexAttention's rate against cuDNN's causal kernel is the window's own cause (a kernel with a
    native window would not pay it), not the kernel ceiling: Gemma-3's d256 windows name it."""

    from shapewise.cost import window_factor

    model = cost_model("h200")
    op = attention_op("bwd", seqs=32, heads=8, kv_heads=4, q_len=8192, kv_len=8192, head_dim=256, causal=True,
                      dtype_bytes=2, window=1024, name="attn/window")
    cost = predict_ops([op], gpu=model, dtype="bf16")[0]
    factor = window_factor(op, model.params)
    assert factor > 1.5 and cost.losses.main == "window"
    assert cost.losses.window == pytest.approx(cost.time_ms * (1 - 1 / factor), rel=0.02)  # all but the launch
    full = predict_ops([dataclasses.replace(op, window=0)], gpu=model, dtype="bf16")[0]
    assert full.losses.window == 0


@settings(max_examples=200, deadline=None)
@given(dims, dims, dims, st.integers(1, 64), layouts)
def test_another_candidate_tile_never_makes_a_gemm_slower(m, n, k, batch, layout):
    """The analytic model prices a GEMM as the fastest of its candidates, so one more tile can only
    win, misaligned and split K included (a misaligned split-K GEMM was once chosen with its reduction
    at full speed and then priced with the reduction slowed by the misalignment)."""
    h200 = get_gpu("h200")
    more = dataclasses.replace(SPEC, tiles=SPEC.tiles + ((192, 192),), tile_rates=SPEC.tile_rates + (1.0,))
    fewer = predict_gemm(m, n, k, batch=batch, layout=layout, gpu=CostModel(h200, SPEC)).time_ms
    assert predict_gemm(m, n, k, batch=batch, layout=layout, gpu=CostModel(h200, more)).time_ms <= fewer * (1 + 1e-12)
