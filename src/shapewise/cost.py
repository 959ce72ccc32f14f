"""Predicted time of each op on a GPU, and the losses that explain its gap to the GPU's peak.

A GEMM is modelled as cuBLAS runs it: the output is cut into tiles, one tile (or one slice of K, with
split-K) per SM at a time, so the time is (waves of tiles) × (time of one tile). The tile shape and split
are chosen as the library would, by trying a realistic set and keeping the fastest. Each inefficiency
is then a factor, and each factor's share of the time is a named loss:

    ideal     = flops / datasheet peak
    kernel    the best kernel's ceiling (it never reaches the datasheet) and its per-tile prologue
    tile      tile quantization: padding the last row and column of tiles, and small tiles' lower rate
    wave      wave quantization: the last wave of tiles leaves SMs idle (split-K reductions count here)
    misalign  a leading dim that is not a multiple of 16 bytes drops cuBLAS to slower kernels (with a
              calibrated profile, a misaligned GEMM is timed as the CUTLASS kernel cuBLAS runs for it)
    memory    the op is bound by memory bandwidth, not by the tensor cores (roofline)
    launch    fixed cost of a kernel launch, which dominates tiny ops
    window    a sliding window's kernel (FlexAttention's: cuDNN's SDPA has none) against cuDNN's causal
              kernel on the blocks the window keeps

Everything is vectorized over shapes with numpy; nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
from dataclasses import dataclass, field, fields

import numpy as np

from .corrections import correct, corrects, kernel_words, tree_factor
from .dtypes import activation_dtype, refuse_fp8_layout
from .errors import ShapewiseError, argument, check_name
from .hardware import GPU
from .limits import RATE
from .ops import (
    COMM,
    FLASH,
    MEMORY,
    REPLICA_GRADS,
    Op,
    attended_pairs,
    model_ops,
    replica_grad_ops,
    run_dtype,
)
from .params import (
    DECODE_KEYS,
    DECODE_OCCUPANCY,
    DECODE_OVERLAP,
    DECODE_ROWS,
    DECODE_SPLIT_BLOCKS,
    DECODE_SPLIT_STEPS,
    DECODE_TILES,
    FLEX_BWD,
    FLEX_FWD,
    FLEX_FWD_OTHER,
    FLEX_MASK,
    PADDED_SDPA,
    SPEC,
    STREAM_ROWS,
    WALK_BANDS,
    WALK_MAX_K,
    WALK_ROWS,
    WINDOW_HEAD_DIMS,
    CostParams,
)
from .profile import CostModel, cost_model
from .shapes import DTYPE_BYTES, ModelShape, Workload

LAYOUTS = ("nn", "nt", "tn")
ATTENTION_PASSES = ("fwd", "fwdbwd")  # predict_attention's: forward, or forward and backward
TENSOR_CORE_DTYPES = ("tf32", "bf16", "fp16", "fp8")

CANDIDATE_CHUNK = 4096  # GEMMs whose candidates are timed at once: their arrays stay in the CPU's cache
SMALL_INDEX = 16  # index_select's small-index kernel takes this many indices or fewer (ATen's Indexing.cu)
LOSS_NAMES = ("kernel", "tile", "wave", "misalign", "memory", "launch", "correction")
# Parts of the time that are not a shape's avoidable cause: the best kernel's ceiling, and a
# profile's measured correction (the measurement's word against the analytic model's).
NOT_CAUSES = ("kernel", "correction")


@dataclass(frozen=True)
class Losses:
    """Time lost to each cause, in ms. Adds and scales, so a step's losses are a sum over its ops."""

    kernel: float = 0.0
    tile: float = 0.0
    wave: float = 0.0
    misalign: float = 0.0
    memory: float = 0.0
    launch: float = 0.0
    comm: float = 0.0  # tensor-parallel collectives: time the GPUs spend talking, not computing
    window: float = 0.0  # a sliding window's kernel, slower than the causal kernel it stands in for
    correction: float = 0.0  # a calibrated profile's measured correction of the analytic time (either sign)

    def __add__(self, other: "Losses") -> "Losses":
        return Losses(*(a + b for a, b in zip(self.values(), other.values())))

    def __mul__(self, scale: float) -> "Losses":
        return Losses(*(a * scale for a in self.values()))

    __rmul__ = __mul__

    def values(self) -> tuple[float, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict[str, float]:
        """The losses by name, a rounding residue (under a femtosecond: -1e-16 ms from a difference of
        equal terms) written as 0."""
        return {f.name: 0.0 if abs(getattr(self, f.name)) < 1e-12 else getattr(self, f.name) for f in fields(self)}

    @property
    def total(self) -> float:
        return sum(self.values())

    @property
    def main(self) -> str | None:
        """The largest avoidable loss (the kernel ceiling is not a property of the shape, nor a
        measured correction a cause)."""
        name, value = max(((n, v) for n, v in self.as_dict().items() if n not in NOT_CAUSES), key=lambda nv: nv[1])
        return name if value > 0 else None


@dataclass(frozen=True)
class GemmPrediction:
    """Prediction for one GEMM or BMM, or for arrays of them (then every field is an array)."""

    time_ms: object
    flops: object
    bytes: object
    losses: dict = field(repr=False)  # loss name -> ms (float or array)
    tile: object  # (rows, cols) of the chosen tile, or an N×2 array
    split_k: object
    peak_tflops: float
    # The CUTLASS kernel family a calibrated profile times a misaligned GEMM as (an index into
    # CUTLASS_FAMILIES), or -1 where the GEMM is modelled as Hopper's own kernels are.
    family: object = -1

    @property
    def tflops(self):
        return self.flops / (np.asarray(self.time_ms) * 1e9)

    @property
    def fraction_of_peak(self):
        return self.tflops / self.peak_tflops

    @property
    def main_loss(self):
        names = [n for n in LOSS_NAMES if n not in NOT_CAUSES]
        stacked = np.stack([np.asarray(self.losses[n], dtype=float) for n in names])
        best = stacked.argmax(axis=0)
        if stacked.ndim == 1:
            return names[int(best)] if stacked.max() > 0 else None
        return np.where(stacked.max(axis=0) > 0, np.array(names, dtype=object)[best], None)


def _align_class(dim: np.ndarray, dtype: str, align_bytes: int) -> np.ndarray:
    """0 = aligned as the tensor cores need (16 bytes on NVIDIA), 1 = 4-byte aligned or better, 2 = worse.
    A leading dim of 1 is a vector's, whatever its stride: 0. (On the H200 the four such GEMMs of
    tests/test_cost.py ran at 2.3-3.1 TB/s in nvjet and gemv kernels; classed odd, they had been priced
    as misaligned tiles, 2-3x slow: benchmarks/RESULTS.md.)"""
    if dtype not in TENSOR_CORE_DTYPES:
        return np.zeros_like(dim)  # the fp32 SIMT path has no such need
    nbytes = dim * DTYPE_BYTES[dtype]
    return np.where((nbytes % align_bytes == 0) | (dim == 1), 0, np.where(nbytes % 4 == 0, 1, 2))


def align_classes(m, n, k, layout, dtype: str, align_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """The alignment classes (_align_class) of the leading dims cuBLAS sees: A's ("tn" stores A as k×m,
    leading dim m; the others as m×k, leading dim k), and n, which leads B and C in every layout."""
    lead_a = np.where(np.asarray(layout) == "tn", m, k)
    return _align_class(np.asarray(lead_a), dtype, align_bytes), _align_class(np.asarray(n), dtype, align_bytes)


def _gemm_arrays(m, n, k, batch, layout, gpu: GPU, dtype: str, p: CostParams) -> dict:
    """Vectorized core: every GEMM against every (tile, split) candidate, keep the fastest."""
    m, n, k, batch = (np.asarray(x, dtype=np.int64) for x in np.broadcast_arrays(m, n, k, batch))
    layout = np.broadcast_to(np.asarray(layout), m.shape)
    peak = gpu.peak_tflops(dtype) * 1e12  # FLOP/s
    size = DTYPE_BYTES[dtype]
    # Float dims for every product: products of four dims overflow int64 near 2^31 (cuBLAS's limit),
    # and below 2^53 every product and ceil-division is as exact in float64.
    mf, nf, kf, bf = (x.astype(float) for x in (m, n, k, batch))
    flops = 2.0 * mf * nf * kf * bf
    nbytes = (mf * kf + kf * nf + mf * nf) * bf * size
    a_lead_is_m = layout == "tn"
    class_a, class_n = align_classes(m, n, k, layout, dtype, gpu.align_bytes)
    which = np.searchsorted(np.array(LAYOUTS), layout)  # LAYOUTS is sorted: nn, nt, tn
    slow_compute = np.maximum(
        np.choose(class_a, [1.0, p.misaligned_even, np.array(p.misaligned_odd_a)[which]]),
        np.choose(class_n, [1.0, p.misaligned_even, np.array(p.misaligned_odd_n)[which]]))
    worst = np.maximum(class_a, class_n)
    slow_memory = np.choose(worst, [1.0, p.misaligned_even_memory, p.misaligned_odd_memory])
    # A misaligned kernel still moves and multiplies whole 16-byte vectors: it works on the shape with
    # its misaligned leading dims padded, and then runs slower. So padding is never predicted slower.
    vec = max(1, gpu.align_bytes // size)
    padded = lambda dim, lead: np.where(lead & (dim * size % gpu.align_bytes != 0) & (dim > 1), -(-dim // vec) * vec, dim)  # noqa: E731
    m_e, k_e = padded(m, a_lead_is_m), padded(k, ~a_lead_is_m)
    n_e = padded(n, np.ones_like(a_lead_is_m))

    M, N, K = (x.astype(float) for x in (m_e, n_e, k_e))
    tiles, rate = np.array(p.tiles, dtype=np.int64).reshape(-1, 2), np.array(p.tile_rates, dtype=float)
    splits = np.array(p.splits, dtype=np.int64)
    best_tile, best_split = _fastest(M, N, K, bf, slow_compute, tiles, rate, splits, gpu, p, peak)
    b_tm, b_tn, b_rate, b_split = tiles[best_tile, 0], tiles[best_tile, 1], rate[best_tile], splits[best_split]
    _, b_tiles, b_units, b_waves, b_reduce = _candidate_times(M, N, K, bf, slow_compute, b_tm.astype(float),
                                                              b_tn.astype(float), b_rate, b_split.astype(float),
                                                              gpu, p, peak)
    ks = K / b_split
    t0 = flops / peak
    # Each factor of the chosen candidate's time in turn; the step each one adds is its loss.
    t1 = t0 * (K / kf) / (p.gemm_ceiling * ks / (ks + p.k_overhead))
    t2 = t1 * (b_tiles * b_tm * b_tn) / (mf * nf * bf) / b_rate
    t3 = t2 * b_waves * gpu.num_sms / b_units + b_reduce
    t4 = t3 * slow_compute
    bytes_e = (M * K + K * N + M * N) * bf * size
    ramp = np.minimum(1.0, bytes_e / (p.memory_ramp_mb * 1e6))
    fill = np.minimum(1.0, bytes_e / (p.memory_fill_mb * 1e6))
    t_mem = (bytes_e / (gpu.bytes_per_s * p.gemm_bandwidth) + p.memory_latency_ms * 1e-3 * ramp
             + p.memory_fill_ms * 1e-3 * fill)
    t_mem_slow = t_mem * slow_memory
    memory_bound = t_mem_slow > t4
    zero = np.zeros_like(t0)
    s = 1e3  # seconds to ms
    losses = {
        "kernel": np.where(memory_bound, zero, t1 - t0) * s,
        "tile": np.where(memory_bound, zero, t2 - t1) * s,
        "wave": np.where(memory_bound, zero, t3 - t2) * s,
        "misalign": np.where(memory_bound, t_mem_slow - t_mem, t4 - t3) * s,
        "memory": np.where(memory_bound, t_mem - t0, zero) * s,
        "launch": np.full_like(t0, p.launch_ms),
    }
    time_ms = np.maximum(t4, t_mem_slow) * s + p.launch_ms
    # A matrix-vector product with a misaligned leading dim (a dim of 1 is a vector, whatever its
    # stride), or batched, runs cuBLAS's gemv kernels: bound by memory, no tiles (params.gemv_*). An
    # aligned unbatched one (a decoding step's weights streamed for one token) runs near the
    # bandwidth of the memory-bound GEMMs and stays with them: on the H200 such weight streaming ran
    # at 2.9-4.4 TB/s, the misaligned and batched gemv at 0.1-3.0 (benchmarks/results/h200-edges/),
    # and one gemv bandwidth for both put decoding steps at one token 8-22% slow (benchmarks/RESULTS.md).
    narrow = (class_a > 0) | (class_n > 0)
    gemv = (np.minimum(m, n) == 1) & (narrow | (batch > 1))
    if np.any(gemv):
        t_gemv = (nbytes / (gpu.bytes_per_s * p.gemv_bandwidth)
                  + p.gemv_latency_ms * 1e-3 * np.minimum(1.0, nbytes / (p.memory_ramp_mb * 1e6)))
        t_narrow = t_gemv * np.where(narrow, p.gemv_misaligned, 1.0)
        for name in ("kernel", "tile", "wave"):
            losses[name] = np.where(gemv, 0.0, losses[name])
        losses["misalign"] = np.where(gemv, (t_narrow - t_gemv) * s, losses["misalign"])
        losses["memory"] = np.where(gemv, (t_gemv - t0) * s, losses["memory"])
        losses["launch"] = np.where(gemv, p.gemv_fixed_ms, losses["launch"])
        time_ms = np.where(gemv, t_narrow * s + p.gemv_fixed_ms, time_ms)
    if p.power_slowdown > 0:
        capped = power_capped_ms(time_ms, np.clip(t0 * s / time_ms, 0.0, 1.0), p.power_onset_ms, p.power_slowdown)
        losses["kernel"] = losses["kernel"] + capped
        time_ms = time_ms + capped
    tile = np.stack([b_tm, b_tn], axis=-1)
    family = np.full(np.shape(m), -1)
    losses["correction"] = np.zeros_like(t0)
    if corrects(p):  # a calibrated profile's measured corrections (corrections.py)
        fixed = correct(p, time_ms, m=m, n=n, k=k, batch=batch, layout_index=which, class_a=class_a, class_n=class_n,
                        dtype_bytes=size, sms=gpu.num_sms)
        corrected, served = np.maximum(fixed.time_ms, t0 * s), fixed.served
        if p.gemm_trees:  # what the calibration's GEMMs left over after all of the above
            corrected = np.maximum(corrected * tree_factor(p, m, n, k, batch, which, corrected), t0 * s)
        # Where the profile times a misaligned GEMM as the CUTLASS kernel cuBLAS runs for it, that
        # kernel's excess over the aligned GEMM's analytic time is what the misalignment costs; elsewhere
        # the analytic losses stand. What is left is the measured correction, a part of its own.
        aligned = time_ms - losses["misalign"]
        misalign = np.where(served, np.maximum(corrected - aligned, 0.0), losses["misalign"])
        losses["correction"] = corrected - aligned - misalign
        losses["misalign"] = misalign
        tile = np.where(served[..., None], fixed.tile, tile)
        b_split = np.where(served, fixed.split, b_split)
        family = np.where(served, fixed.family, family)
        time_ms = corrected
    if p.walk_per_k_ms:  # the H200 profile's own (params.WALK_*)
        walk, ways = one_row_walk_ms(m, n, k, batch, layout, class_a, class_n, size, p)
        longer = walk > time_ms
        if np.any(longer):
            # Its blocks fill at most one wave but each walks its share of k alone: the SMs' parallelism lost
            # to too few ways along k, booked with the waves' (a cause the shape has, not the kernel's ceiling).
            losses["wave"] = np.where(longer, losses["wave"] + walk - time_ms, losses["wave"])
            time_ms, b_split = np.where(longer, walk, time_ms), np.where(longer, ways, b_split)
    factor = np.where(batch > 1, p.machine_bmm, np.where(streams_weights(m, n, batch), p.machine_stream, p.machine_gemm))
    if np.any(factor != 1.0):
        time_ms, losses = _on_this_machine(time_ms, losses, t0 * s, factor, "kernel")
    if p.machine_launch_ms:
        time_ms, losses = time_ms + p.machine_launch_ms, {**losses, "launch": losses["launch"] + p.machine_launch_ms}
    return dict(time_ms=time_ms, flops=flops, bytes=nbytes, losses=losses, tile=tile, split_k=b_split,
                peak_tflops=peak / 1e12, family=family)


def streams_weights(m, n, batch):
    """Whether GEMMs (arrays or scalars) stream their weights: unbatched, with STREAM_ROWS rows or columns or
    fewer (a decoding step's, an expert's few tokens), bound by memory: this machine's machine_stream prices
    them, and `calibrate --quick` times them as a family of their own (machine.family)."""
    return (np.asarray(batch) == 1) & (np.minimum(m, n) <= STREAM_ROWS)


def one_row_walk_ms(m, n, k, batch, layout, class_a, class_n, dtype_bytes: int, p: CostParams) -> tuple:
    """The time of cuBLAS's one-row walk (params.WALK_*) where a GEMM is in one of its bands, 0
    elsewhere (a fixed part and each block's serial walk of k / ways), and the ways k is split."""
    few = ((m <= WALK_ROWS) & (k <= WALK_MAX_K) & (batch == 1) & (layout == "nt") & (class_a == 0) & (class_n == 0)
           & (dtype_bytes == 2))
    ways = np.select([few & (n > over) & (n <= upto) for over, upto, _ in WALK_BANDS], [w for *_, w in WALK_BANDS], 0)
    return np.where(ways > 0, p.walk_fixed_ms + p.walk_per_k_ms * k / np.maximum(ways, 1), 0.0), ways


def power_capped_ms(time_ms, busy, onset_ms: float, slowdown: float):
    """What the power cap adds to a call of time_ms at a fraction `busy` of peak rate: past the onset,
    the clock falls in proportion to the rate (params.power_*)."""
    return slowdown * busy * np.maximum(time_ms - onset_ms, 0.0)


def _candidate_times(m, n, k, batch, slow, tm, tn, rate, split, gpu: GPU, p: CostParams, peak: float) -> tuple:
    """The time of GEMMs (float dims, leading dims already padded) on candidates (a tile tm×tn at its
    rate, K split `split` ways), broadcast over the inputs; and the candidates' tiles, work units
    (tiles × splits) and waves, and the split-K reduction's time. Infinite where the split leaves a
    slice shorter than min_split_k. (In place where it can be: this runs on every candidate.)"""
    num_tiles = batch * np.ceil(m / tm) * np.ceil(n / tn)
    units = num_tiles * split
    per_sm_units = units / gpu.num_sms
    waves = np.ceil(per_sm_units)
    credit = min(max(p.wave_credit, 0.0), 1.0)  # the last wave's idle SMs, won back in part
    if credit:
        waves -= credit * (waves - np.maximum(per_sm_units, 1.0))
    k_slice = k / split
    per_sm = peak * p.gemm_ceiling / gpu.num_sms
    t = waves * 2.0
    t *= tm
    t *= tn
    t *= k_slice + p.k_overhead
    t /= per_sm * rate  # the compute time
    # Split-K writes fp32 partial tiles and reads them back to reduce them; a misaligned GEMM's
    # slowdown covers both, as _gemm_arrays prices the candidate chosen here.
    t_reduce = np.where(split > 1, 2 * 4 * m * n * batch * split / gpu.bytes_per_s, 0.0)
    t += t_reduce
    t *= slow
    invalid = (split != 1) & (k_slice < p.min_split_k)
    return (np.where(invalid, np.inf, t) if np.any(invalid) else t), num_tiles, units, waves, t_reduce


def _fastest(m, n, k, batch, slow, tiles, rate, splits, gpu: GPU, p: CostParams, peak: float) -> tuple:
    """Each GEMM's fastest candidate, as cuBLAS's heuristics pick it: the first of the least time over
    every (tile, split) pair, tile by tile; returned as the index of its tile and of its split.

    Split-K is tried only for the GEMMs where a split could win: a split candidate takes at least
    its tiles' share of the SMs over all of K, plus its reduction (_split_bound), and where that
    exceeds the best unsplit time for every tile, only the unsplit candidates are timed (most
    GEMMs: they have many tiles). The answer is the same as trying all. A few thousand GEMMs at a
    time, so that the candidates' arrays stay in the CPU's cache."""
    shape = np.shape(m)
    m, n, k, batch, slow = (np.ravel(x) for x in (m, n, k, batch, slow))
    best_tile, best_split = np.zeros(m.shape, dtype=np.int64), np.zeros(m.shape, dtype=np.int64)
    tm, tn = tiles[:, 0].astype(float), tiles[:, 1].astype(float)
    unsplit = np.flatnonzero(splits == 1)
    for start in range(0, len(m), CANDIDATE_CHUNK):
        part = slice(start, start + CANDIDATE_CHUNK)
        dims = [x[part] for x in (m, n, k, batch, slow)]
        some = np.arange(len(dims[0]))
        if len(unsplit) and (splits > 1).any():
            t_unsplit = _candidate_times(*(x[:, None] for x in dims), tm, tn, rate, 1.0, gpu, p, peak)[0]
            best_tile[part] = np.argmin(t_unsplit, axis=-1)
            best_split[part] = unsplit[0]
            bound = _split_bound(*dims, tm, tn, rate, splits, gpu, p, peak)
            if bound is not None:
                best = t_unsplit[some, best_tile[part]]
                some = np.flatnonzero(~(bound > best * (1 + 1e-9)))  # a margin far above rounding; NaN: try all
        if len(some):
            cand = _candidate_times(*(x[some, None, None] for x in dims), tm[:, None], tn[:, None], rate[:, None],
                                    splits.astype(float), gpu, p, peak)[0]
            best_tile[start + some], best_split[start + some] = np.divmod(
                np.argmin(cand.reshape(len(some), -1), axis=-1), len(splits))
    return best_tile.reshape(shape), best_split.reshape(shape)


def _split_bound(m, n, k, batch, slow, tm, tn, rate, splits, gpu: GPU, p: CostParams, peak: float):
    """A lower bound of every split candidate's time (_candidate_times), per GEMM; infinite where K
    is too short for any split; None where the parameters allow no such bound. A split s runs at
    least its tiles × s / SMs waves (and at least one) of K/s + k_overhead steps each, so at least
    tiles / SMs × (K + s × k_overhead) steps, plus its reduction, which grows with s."""
    per_sm = peak * p.gemm_ceiling / gpu.num_sms
    if not (p.k_overhead >= 0 and per_sm > 0 and (rate > 0).all() and gpu.bytes_per_s > 0):
        return None
    least = splits[splits > 1].min()
    tiles = batch[..., None] * np.ceil(m[..., None] / tm) * np.ceil(n[..., None] / tn)
    steps = tiles / gpu.num_sms * (2.0 * tm * tn / (per_sm * rate))
    bound = steps.min(axis=-1) * (k + least * p.k_overhead) * slow + 2 * 4 * m * n * batch * least / gpu.bytes_per_s
    return np.where(k / least >= p.min_split_k, np.where(slow > 0, bound, -np.inf), np.inf)


def _on_this_machine(time_ms, losses: dict, ideal_ms, factor, into: str):
    """A time and its losses on this machine: every loss scaled with the time, and what the factor
    adds to (or takes from) the ideal time booked to `into`, so that the losses still add up."""
    scaled = {name: loss * factor for name, loss in losses.items()}
    scaled[into] = scaled[into] + (factor - 1.0) * ideal_ms
    return time_ms * factor, scaled


def _check_dims(**dims) -> None:
    """Each dim a whole number from 1 to GEMM_DIM's bound (cuBLAS's 32-bit int), as the commands check
    theirs; an array's first bad element is named by its position."""
    from .limits import GEMM_DIM

    for name, value in dims.items():
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError):
            raise ShapewiseError(f"{name} must be whole numbers, got {value!r}") from None
        if arr.dtype.kind not in "iuf":  # 2**70 is an object array: past every bound too
            raise ShapewiseError(f"{name} must be whole numbers from 1 to {GEMM_DIM.high:,} (a GEMM dim is a 32-bit "
                                 f"int in cuBLAS), got {value!r}")
        if arr.dtype.kind == "f":  # float16 cannot hold the bound: comparing with it warned of an overflow
            arr = arr.astype(np.float64)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) | (arr != np.round(arr)) | (arr < 1) | (arr > GEMM_DIM.high)
        if np.any(bad):
            where = np.unravel_index(int(np.argmax(bad)), arr.shape) if arr.ndim else ()
            got = (arr[where] if arr.ndim else arr).item()
            at = f" at {where if len(where) > 1 else where[0]}" if arr.ndim else ""
            raise ShapewiseError(f"{name} must be whole numbers from 1 to {GEMM_DIM.high:,} (a GEMM dim is a 32-bit "
                                 f"int in cuBLAS), got {got!r}{at}")


def predict_gemm(m, n, k, *, batch=1, gpu: GPU | str | CostModel = "h200", dtype: str = "bf16",
                 layout: str = "nn") -> GemmPrediction:
    """Predict torch.matmul of a (batch×)m×k tensor by a (batch×)k×n tensor on a GPU.

    gpu: a CostModel, or a GPU (or its name) whose default cost model is used: its calibrated
    profile where there is one, else the spec model (profile.cost_model).

    layout "nn": both row-major; "nt": the second is a transposed n×k tensor (F.linear's weight);
    "tn": the first is a transposed k×m tensor (a weight gradient); fp8 only unbatched in "nt", the one fp8 GEMM
    torch runs (torch._scaled_mm), as bench measures it. Scalars give scalar fields,
    arrays give arrays (vectorized: use arrays for many shapes at once).
    """
    _check_dims(m=m, n=n, k=k, batch=batch)
    if np.any(~np.isin(np.asarray(layout), LAYOUTS)):
        raise ShapewiseError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    check_name(dtype, DTYPE_BYTES, "dtype")
    args = {"m": m, "n": n, "k": k, "batch": batch, "layout": layout}
    try:
        np.broadcast_shapes(*(np.shape(x) for x in args.values()))
    except ValueError:
        shapes = ", ".join(f"{name} {np.shape(x)}" for name, x in args.items() if np.ndim(x))
        raise ShapewiseError(f"the arrays' shapes do not broadcast together ({shapes}): give arrays of one shape, "
                             "or of shapes numpy broadcasts") from None
    model = cost_model(gpu)
    if dtype == "fp8":  # as bench refuses them: torch runs no other fp8 GEMM to predict (a GPU without fp8 said first)
        model.gpu.check_dtype(dtype)
        batches = np.unique(np.asarray(batch)).tolist()
        refuse_fp8_layout(np.unique(np.asarray(layout)).tolist(), batches, hint=f": give {argument('layout')} nt"
                          + (f" and {argument('batch')} 1" if max(batches) > 1 else ""))
    out = _gemm_arrays(m, n, k, batch, layout, model.gpu, dtype, model.params)
    if all(np.ndim(x) == 0 for x in (m, n, k, batch, layout)):
        out = {key: _scalar(value) for key, value in out.items()}
    return GemmPrediction(**out)


def _scalar(value):
    if isinstance(value, dict):
        return {key: float(v) for key, v in value.items()}
    arr = np.asarray(value)
    if arr.ndim == 1 and arr.shape[0] == 2:  # a tile
        return tuple(int(x) for x in arr)
    return arr.item() if arr.ndim == 0 else value


@dataclass(frozen=True)
class OpCost:
    """An op with its predicted time per call and the losses behind it."""

    op: Op
    time_ms: float
    losses: Losses
    peak_tflops: float
    bytes_per_s: float
    kernel: str = ""  # for a misaligned GEMM timed from a profile's kernel tables: the kernel, in words
    # A collective overlapped with compute (--overlap-comm): the time its transfer takes behind compute, where
    # time_ms is its launch alone, on the critical path. Its rate is the transfer's, not its bytes over the launch
    # (64 MiB over 5.5 µs read 12,179 GB/s, 2706% of the link).
    hidden_ms: float | None = None

    def __post_init__(self):  # Python's floats, not numpy's scalars (np.float64(0.0404) in every repr)
        object.__setattr__(self, "time_ms", float(self.time_ms))
        object.__setattr__(self, "losses", Losses(*(float(v) for v in self.losses.values())))

    @property
    def total_ms(self) -> float:
        return self.time_ms * self.op.count

    @property
    def tflops(self) -> float:
        return self.op.flops / (self.time_ms * 1e9)

    @property
    def gbps(self) -> float:
        return self.op.bytes / ((self.time_ms if self.hidden_ms is None else self.hidden_ms) * 1e6)

    @property
    def fraction_of_peak(self) -> float:
        """Of the matrix peak for compute ops, of the memory bandwidth for memory ops, of the peer
        link for collectives."""
        if self.op.kind in (MEMORY, COMM):
            return self.gbps * 1e9 / self.bytes_per_s
        return self.tflops / self.peak_tflops


def _flash_steps(op: Op, block: int, overhead: float, sms: int) -> tuple[float, float, float]:
    """Key-block steps of one fused attention call (block×block tiles of the score matrix the kernel
    computes): the useful ones, those plus each query block's own `overhead` steps, and the busiest
    SM's. A query shorter than a block (decoding) fills that part of it: decode kernels do not pad
    one token to a whole block."""
    q_blocks, kv_blocks = -(-op.m // block), -(-op.n // block)
    fill = min(op.m, block) / block
    if op.causal:  # query block i attends to the key blocks up to its diagonal
        per_block = np.minimum(kv_blocks - q_blocks + np.arange(1, q_blocks + 1), kv_blocks)
    else:
        per_block = np.full(q_blocks, kv_blocks)
    steps = float(per_block.sum()) * op.batch * fill
    busiest = _busiest_sm(tuple(float(x) + overhead for x in per_block[::-1]), op.batch, sms)
    return steps, steps + overhead * op.batch * q_blocks * fill, busiest * fill


def _flash_steps_by_keys(op: Op, keys: int, queries: int, overhead: float, sms: int) -> tuple[float, float, float]:
    """As _flash_steps, for a backward: each SM takes a block of `keys` key rows of one sequence and
    head and walks the query blocks (`queries` rows each) that attend to it, from its diagonal on
    when causal (queries end-aligned with the keys); a step is one keys × queries tile. With
    keys == queries and as many queries as keys it is _flash_steps over the same blocks."""
    q_blocks, kv_blocks = -(-op.m // queries), -(-op.n // keys)
    fill = min(op.m, queries) / queries
    if op.causal:  # key block j: the query blocks holding a query at or after its first key
        first = np.maximum(-(-(np.arange(kv_blocks) * keys - (op.n - op.m) + 1) // queries) - 1, 0)
        per_block = np.maximum(q_blocks - first, 0)
    else:
        per_block = np.full(kv_blocks, q_blocks)
    steps = float(per_block.sum()) * op.batch * fill
    busiest = _busiest_sm(tuple(float(x) + overhead for x in per_block), op.batch, sms)
    return steps, steps + overhead * op.batch * kv_blocks * fill, busiest * fill


@functools.lru_cache(maxsize=1024)
def _band_blocks(q_len: int, kv_len: int, window: int, partial: float) -> tuple[np.ndarray, np.ndarray]:
    """The mask blocks (FLEX_MASK × FLEX_MASK) a causal sliding window runs, each cut one (some of its
    pairs outside the band) counted as `partial` whole ones: for each block row of queries its key
    blocks, and for each block column of keys its query blocks."""
    starts = np.arange(-(-q_len // FLEX_MASK)) * FLEX_MASK
    first_q, last_q = starts[:, None], np.minimum(starts + FLEX_MASK, q_len)[:, None] - 1
    keys = np.arange(-(-kv_len // FLEX_MASK)) * FLEX_MASK
    first_k, last_k = keys[None, :], np.minimum(keys + FLEX_MASK, kv_len)[None, :] - 1
    # a block holds a kept pair when some key is at or before some query (first key <= last query)
    # and the nearest pair is inside the window (first query - last key < window); all its pairs
    # when every key is at or before every query and the farthest pair is inside the window
    touched = (first_k <= last_q) & (first_q - last_k < window)
    whole = (last_k <= first_q) & (last_q - first_k < window)
    cost = np.where(whole, 1.0, partial) * touched
    return cost.sum(axis=1), cost.sum(axis=0)


def flex_blocks(head_dim: int) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
    """FlexAttention's programs at a head dim (params.FLEX_FWD, FLEX_BWD)."""
    fwd = FLEX_FWD.get(head_dim, FLEX_FWD_OTHER) if head_dim <= 256 else (64, 32)
    return fwd, FLEX_BWD[0 if head_dim < 64 else 1 if head_dim <= 128 else 2]


# FlexAttention's FLOPs a query-key pair and head dim (_flex_work): the forward's QKᵀ and PV; a dK/dV
# program's QKᵀ, dO Vᵀ, Pᵀ dO and dSᵀ Q; a dQ program's QKᵀ, dO Vᵀ and dS K. Its backward spends
# FLEX_DKDV + FLEX_DQ where an op counts 10 (ops.attention_op: 2.5 forwards): the rest is recomputation.
FLEX_FWD_FLOPS, FLEX_DKDV_FLOPS, FLEX_DQ_FLOPS = 4, 8, 6
FLEX_RECOMPUTE = (FLEX_DKDV_FLOPS + FLEX_DQ_FLOPS) / (FLEX_FWD_FLOPS * 5 / 2)


def _flex_work(op: Op, sms: int, partial: float = 1.0) -> tuple[float, float]:
    """A sliding-window call as FlexAttention runs it: the multiply-adds' FLOPs of every program (whole
    mask blocks, the head dim padded to a power of two, the backward's recomputed scores) and those of
    the busiest SM, each program dispatched to the SM that frees first. The forward: a program for
    each block of query rows of each head, walking the key blocks of its mask row. The backward: for
    each key head, a dK/dV program per block of key rows, walking the query blocks of its mask column
    for every query head of the group, then a dQ program per block of query rows of each query head,
    walking its mask row's key blocks (FLEX_*_FLOPS a pair and dim). A block the band cuts counts as
    `partial` whole ones (params.flash_window_partial)."""
    dim = 1 << max(op.k - 1, 15).bit_length()
    per_row, per_col = _band_blocks(op.m, op.n, op.window, partial)
    (rows, _), (keys1, _, rows2, _) = flex_blocks(op.k)
    if op.pass_ == "fwd":
        programs = np.repeat(per_row * (FLEX_FWD_FLOPS * rows * FLEX_MASK * dim), FLEX_MASK // rows)
        copies = op.batch
    else:
        group = max(op.groups, 1)
        dkdv = np.repeat(per_col * (group * FLEX_DKDV_FLOPS * keys1 * FLEX_MASK * dim), FLEX_MASK // keys1)
        dq = np.tile(np.repeat(per_row * (FLEX_DQ_FLOPS * rows2 * FLEX_MASK * dim), FLEX_MASK // rows2), group)
        programs, copies = np.concatenate([dkdv, dq]), max(op.batch // group, 1)
    lengths = tuple(float(x) for x in programs)
    return sum(lengths) * copies, _busiest_sm(lengths, copies, sms)


@functools.lru_cache(maxsize=4096)
def _busiest_sm(blocks: tuple, copies: int, sms: int) -> float:
    """The steps of the busiest SM when `copies` runs of `blocks` (steps each) are dispatched in
    order, each block to the SM that frees first, as the GPU's block scheduler does.

    The query blocks of one sequence and head go longest first (the one on the diagonal, when
    causal), then the next head's: against the H200 calibration's causal cuDNN calls this order
    fits (mean |log error| forward 0.086 -> 0.025, backward 0.084 -> 0.053, benchmarks/RESULTS.md)
    where the longest block or an SM's even share of the work did not, and better than the other
    orders. Many waves even out: past 64 blocks an SM, the busiest gets its share and half the
    longest block (dealt out, it gets 0.45 to 0.62 of one more)."""
    total = len(blocks) * copies
    if total > 64 * sms:
        return sum(blocks) * copies / sms + max(blocks) / 2
    free = [0.0] * sms
    for length in blocks * copies:
        heapq.heappush(free, heapq.heappop(free) + length)
    return max(free)


def _rate(value: float, what: str) -> float:
    """A fraction of a datasheet rate, about to be divided by: a zero or negative one (a profile
    fitted by an older shapewise on a far slower device) is refused, not divided by."""
    if not value > 0:
        raise ShapewiseError(f"the cost model's {what} is {value}, not a rate: calibrate this GPU again")
    return value


def decode_blocks(op: Op, sms: int) -> dict[str, float]:
    """How decoding attention's kernel lays out a call (params.DECODE_*): its tile (an index into
    DECODE_TILES), its blocks (each key head's query heads, DECODE_ROWS at a time), the steps of one
    block's walk, the ways the cache is split, and the busiest SM's steps (its waves of the blocks it
    holds at once, each a block's walk). Measured for one query token; a memory-bound call of more (a
    short chunk against a long cache) is priced by its stream alone: its busiest SM is given no steps."""
    tile = min(int(np.searchsorted(DECODE_TILES, op.k)), len(DECODE_TILES) - 1)
    groups = max(op.groups, 1)
    blocks = max(op.batch // groups, 1) * -(-groups // DECODE_ROWS)
    steps = -(-op.n // DECODE_KEYS)
    splits = 1
    if steps >= DECODE_SPLIT_STEPS and sms // blocks > 1:
        while splits * 2 <= steps and blocks * splits * 2 < DECODE_SPLIT_BLOCKS * sms:
            splits *= 2
    waves = -(-blocks * splits // (sms * DECODE_OCCUPANCY[tile]))
    busiest = waves * -(-steps // splits) if op.m == 1 else 0
    return {"tile": tile, "blocks": blocks, "steps": steps, "splits": splits, "busiest": busiest}


def decode_terms(op: Op, gpu: GPU) -> dict[str, float]:
    """The terms of decoding attention's time (one query token against the cache), each in ms at the
    datasheet rate or per unit of its parameter (params.flash_memory_* and flash_decode_*): the bytes
    it loads (the cache's up to its last whole step of keys, each row padded to a 256-wide tile), at
    tiles up to 128 wide ("narrow") or 256 ("wide"); the bytes its fill covers; the busiest SM's
    steps; the tile; and whether it splits."""
    layout = decode_blocks(op, gpu.num_sms)
    wide = DECODE_TILES[layout["tile"]] > 128
    # A step loads a whole tile of keys (measured for one query token: a chunk's bytes stay as they are),
    # and the 256-wide tile loads whole rows of it: head dims 160 and 192 streamed at 1.6-2.2 and
    # 2.5-2.8 TB/s of their own bytes where 256 did at 3.3-3.5 (the 128 tile loads only its head dim:
    # 80 ran at 3.8 TB/s).
    walked = op.bytes * layout["steps"] * DECODE_KEYS / max(op.n, 1) if op.m == 1 else op.bytes
    walked *= max(DECODE_TILES[-1] / op.k, 1.0) if wide else 1.0
    nbytes = walked / gpu.bytes_per_s * 1e3
    return {"narrow": 0.0 if wide else nbytes, "wide": nbytes if wide else 0.0, "fill": float(walked),
            "steps": float(layout["busiest"]), "tile": layout["tile"], "split": layout["splits"] > 1}


def decode_busy_ms(stream, walk):
    """Decoding attention's time apart from its fixed time: its memory stream and its busiest SM's walk
    overlap, but not wholly, as the cube root of their cubes' sum. On the H200's calibration (its 184
    decoding calls) a power of 3 fits better than 2, 4, 6 or the larger of the two
    (benchmarks/decode_choices.py)."""
    return (stream ** DECODE_OVERLAP + walk ** DECODE_OVERLAP) ** (1 / DECODE_OVERLAP)


def decode_parts_ms(op: Op, gpu: GPU, p: CostParams) -> tuple[float, float, float]:
    """Decoding attention's time by its parts (decode_terms at p's rates), in ms: the memory stream, the
    busiest SM's walk, and the fixed time (the split's reduction included); the call takes the fixed
    time and decode_busy_ms of the other two."""
    t = decode_terms(op, gpu)
    stream = (t["narrow"] / _rate(p.flash_memory_bandwidth, "decoding attention's bandwidth")
              + t["wide"] / _rate(p.flash_memory_bandwidth_wide, "decoding attention's bandwidth at wide heads")
              + p.flash_memory_fill_ms * min(1.0, t["fill"] / (p.flash_memory_fill_mb * 1e6)))
    walk = t["steps"] * p.flash_decode_step_ms[t["tile"]]
    fixed = max(p.flash_decode_fixed_ms[t["tile"]], p.launch_ms) + (p.flash_decode_split_ms if t["split"] else 0.0)
    return stream, walk, fixed


def window_bucket(head_dim: int) -> int:
    """The bucket of params.WINDOW_HEAD_DIMS a head dim falls in (past the last: the last)."""
    return min(int(np.searchsorted(WINDOW_HEAD_DIMS, head_dim)), len(WINDOW_HEAD_DIMS) - 1)


def window_factor(op: Op, p: CostParams) -> float:
    """A sliding-window call's rate against cuDNN's causal kernel (params.flash_window_*)."""
    return _rate((p.flash_window_fwd if op.pass_ == "fwd" else p.flash_window_bwd)[window_bucket(op.k)],
                 f"sliding-window attention's {op.pass_} factor")


def flash_block_bwd(p: CostParams, head_dim: int) -> int:
    """The backward's key rows a block at a head dim: its bucket's (the last bucket's past them), else
    flash_block_bwd (square blocks)."""
    if not p.flash_blocks_bwd:
        return p.flash_block_bwd
    return p.flash_blocks_bwd[min(int(np.searchsorted(p.flash_buckets, head_dim)), len(p.flash_buckets) - 1)]


def _flash_cost(op: Op, gpu: GPU, dtype: str, p: CostParams) -> tuple[float, Losses]:
    peak = gpu.peak_tflops(dtype) * 1e12
    d = op.k
    buckets = np.array(p.flash_buckets)
    bucket = int(buckets[np.searchsorted(buckets, d)]) if d <= buckets[-1] else -(-d // 64) * 64
    fwd = op.pass_ == "fwd"
    table = p.flash_fwd if fwd else p.flash_bwd
    overhead = p.flash_overhead_fwd if fwd else p.flash_overhead_bwd
    latency = max(p.flash_latency_fwd_ms if fwd else p.flash_latency_bwd_ms, p.launch_ms)
    eff = _rate(table[p.flash_buckets.index(bucket)] if bucket in p.flash_buckets else table[-1],
                f"fused attention {op.pass_} efficiency at head dim {bucket}")
    t0 = op.flops / peak
    t1 = op.flops / (peak * eff)
    if op.window and op.m > 1:
        return _window_cost(op, gpu, p, t0, t1, latency)
    if fwd:  # blocks of query rows walking the key blocks
        rows = cols = p.flash_block_q
        steps, work, span = _flash_steps(op, rows, overhead, gpu.num_sms)  # span: steps on the busiest SM
    else:  # blocks of key rows walking the query blocks
        rows, cols = flash_block_bwd(p, d), p.flash_block_bwd
        steps, work, span = _flash_steps_by_keys(op, rows, cols, overhead, gpu.num_sms)
    exact = op.batch * attended_pairs(op.m, op.n, causal=op.causal, window=op.window) / (rows * cols)  # steps unpadded
    t2 = t1 * (bucket / d) * (steps / exact)  # padded head dim, whole blocks on the diagonal
    t3 = t2 * work / steps  # each block's own prologue and epilogue
    t4 = t3 * span * gpu.num_sms / work  # SMs idle while the busiest finishes
    stream, walk, fixed = decode_parts_ms(op, gpu, p)
    busy = decode_busy_ms(stream, walk)  # ms
    s = 1e3
    if busy / s > t4:  # bound by streaming the cache (decoding), not by the multiplies
        return padded_sdpa(op, "decode", busy + fixed, Losses(
            memory=stream - t0 * s, kernel=busy - stream + fixed - p.launch_ms, launch=p.launch_ms))
    # Grouped-query backward: each query head's dK and dV are accumulated in fp32 and then summed over
    # its group, one more pass over 8 bytes per element of every query head's K and V. On the H200
    # (cuDNN) the grouped backwards of the independent attention set ran 5-6% over the model without
    # it, 0.55 of twice these bytes at full bandwidth; the MHA ones 1% (benchmarks/RESULTS.md).
    t_groups = 8 * op.batch * op.n * op.k / gpu.bytes_per_s if not fwd and op.groups > 1 else 0.0
    return padded_sdpa(op, op.pass_, (t4 + t_groups) * s + latency, Losses(
        kernel=(t1 - t0 + t3 - t2) * s + latency - p.launch_ms, tile=(t2 - t1) * s, wave=(t4 - t3) * s,
        memory=t_groups * s, launch=p.launch_ms))


def padded_sdpa(op: Op, regime: str, time_ms: float, losses: Losses) -> tuple[float, Losses]:
    """A fused attention call at a head dim that is not a multiple of 8, as torch's SDPA runs it: FlashAttention-2
    on padded copies, not cuDNN's kernel, priced as cuDNN's times params.PADDED_SDPA[regime] (fwd, bwd, or decode),
    its excess booked to the head dim's misalignment; any other call as priced."""
    factor = PADDED_SDPA[regime] if op.k % 8 else 1.0
    if factor == 1.0:
        return time_ms, losses
    return time_ms * factor, losses + Losses(misalign=time_ms * (factor - 1))


def _window_cost(op: Op, gpu: GPU, p: CostParams, t0: float, t1: float, latency: float) -> tuple[float, Losses]:
    """A sliding-window call: another kernel (FlexAttention's; cuDNN's SDPA has no window), priced by
    its own programs (_flex_work) at cuDNN's efficiency for the head dim (t1: the call's FLOPs at it),
    then at the window's own rate against it, the profile's measured factor (params.flash_window_*),
    its own cause: a kernel with a native window would not pay it (where the factor is under 1, the
    kernel's loss is that much less). The backward's recomputed scores and score gradients are the
    kernel's; whole mask blocks and the padded head dim are tiles. A grouped backward sums its group
    inside the dK/dV programs, with no pass of its own."""
    work, busiest = _flex_work(op, gpu.num_sms, p.flash_window_partial)
    t_kernel = t1 * (FLEX_RECOMPUTE if op.pass_ == "bwd" else 1.0)
    t2 = t1 * work / op.flops  # whole mask blocks (the cut ones dearer), the head dim padded
    t4 = t2 * busiest * gpu.num_sms / work  # SMs idle while the busiest finishes
    slower = t4 * (window_factor(op, p) - 1.0)
    t_window, faster = max(slower, 0.0), min(slower, 0.0)
    s = 1e3
    return (t4 + slower) * s + latency, Losses(
        kernel=(t_kernel - t0 + faster) * s + latency - p.launch_ms, tile=(t2 - t_kernel) * s, wave=(t4 - t2) * s,
        launch=p.launch_ms, window=t_window * s)


def _link_gbs(gpu: GPU, link_gbs: float | None = None) -> float:
    """GB/s per GPU of the link collectives travel: link_gbs where given (plan's --intra-node-gbs), else
    the GPU's datasheet link; refused where the table has none and none is given."""
    from .hardware import link

    if link_gbs is not None:
        return RATE.keyword(link_gbs, "link_gbs")  # 0 divided by zero, and NaN or a negative priced nonsense
    peer = link(gpu)
    if peer is None:
        raise ShapewiseError(f"{gpu.name} has no GPU-to-GPU link in the table: tensor parallelism cannot be modelled")
    return peer[1]


def comm_ms(op: Op, gpu: GPU, p: CostParams, *, link_gbs: float | None = None) -> float:
    """A ring collective over k ranks: (k-1)/k of the message (twice for an all-reduce) over the link
    (_link_gbs: the given one, else the GPU's datasheet link)."""
    link_gbs = _link_gbs(gpu, link_gbs)
    ranks = op.k
    share = (ranks - 1) / ranks * (2 if op.family == "all_reduce" else 1)
    return share * op.bytes / (link_gbs * 1e9 * _rate(p.comm_bandwidth, "link bandwidth")) * 1e3 + p.comm_latency_ms + p.launch_ms


EMBED_TABLE = "embed.table"


def memory_parts(op: Op, key: str) -> dict[str, float]:
    """A memory-bound op's bytes by the bandwidth (a key of CostParams.bandwidth) they move at. The
    embedding's backward zeroes its whole table (a memset, at nearly full bandwidth) and then
    scatter-adds the token rows into it (slow, atomic): one rate for both put a Llama-sized table's
    gradient at 2.5x its time and a small table's at half (the H200 corpus run, benchmarks/RESULTS.md)."""
    if key != "embed.bwd" or not op.k:
        return {key: op.bytes}
    table = op.bytes * op.k / (2 * op.m + op.k)  # bytes = (2·tokens·h + vocab·h) × dtype bytes (ops.py)
    return {key: op.bytes - table, EMBED_TABLE: table}


def memory_fixed_ms(base: float, per_width: float, per_row: float, *, width: int, rows: int) -> float:
    """A memory-bound call's fixed time: its own, plus its rows' width's share (a norm reduces each
    row) and, on SMALL_INDEX rows or fewer, a cost per row (the embedding's small-index gather)."""
    return base + per_width * width + (per_row * rows if rows <= SMALL_INDEX else 0.0)


def memory_fill_share(nbytes: float, params: CostParams):
    """The share of params.memory_op_fill_ms a memory-bound call of `nbytes` pays: its bytes over the
    fill's, at most all of it."""
    return np.minimum(1.0, nbytes / (params.memory_op_fill_mb * 1e6))


def predict_ops(ops: list[Op], *, gpu: GPU | str | CostModel, dtype: str,
                link_gbs: float | None = None) -> list[OpCost]:
    """Predict every op of a step; all GEMMs and BMMs in one vectorized call. gpu: as predict_gemm's;
    collectives over link_gbs GB/s per GPU where given, else over the GPU's datasheet link."""
    model = cost_model(gpu)
    gpu, params = model.gpu, model.params
    peak = gpu.peak_tflops(dtype)
    if link_gbs is not None:  # checked where no op travels it too: a step of one GPU took "fast" without a word
        link_gbs = _link_gbs(gpu, link_gbs)
    # an fp8 step's GEMMs run in fp8, its attention, batched GEMMs and router in bf16 (ops.run_dtype)
    inner = activation_dtype(dtype)
    costs: list[OpCost | None] = [None] * len(ops)
    bandwidth = {**dict(SPEC.bandwidth), **dict(params.bandwidth)}  # a profile may predate a family
    memory_fixed, per_width = dict(params.memory_fixed_ms), dict(params.memory_fixed_per_width_ms)
    per_row, fill = dict(params.memory_fixed_per_row_ms), dict(params.memory_op_fill_ms)
    for its_dtype in dict.fromkeys((dtype, inner)):
        mm = [i for i, op in enumerate(ops) if op.is_matmul and run_dtype(op, dtype) == its_dtype]
        if not mm:
            continue
        m, n, k, batch, layout = (np.array([getattr(ops[i], a) for i in mm]) for a in ("m", "n", "k", "batch", "layout"))
        pred = _gemm_arrays(m, n, k, batch, layout, gpu, its_dtype, params)
        for j, i in enumerate(mm):
            losses = Losses(**{name: float(pred["losses"][name][j]) for name in LOSS_NAMES})
            costs[i] = OpCost(ops[i], float(pred["time_ms"][j]), losses, gpu.peak_tflops(its_dtype), gpu.bytes_per_s,
                              kernel_words(int(pred["family"][j]), pred["tile"][j], int(pred["split_k"][j])))
    for i, op in enumerate(ops):
        if op.kind == FLASH:
            time_ms, losses = _flash_cost(op, gpu, inner, params)
        elif op.kind == COMM:
            gbs = _link_gbs(gpu, link_gbs)
            time_ms = comm_ms(op, gpu, params, link_gbs=gbs)
            losses = Losses(comm=time_ms - params.launch_ms, launch=params.launch_ms)
            # A collective's "peak" is its link: fraction_of_peak then reads as a share of it.
            costs[i] = OpCost(op, time_ms, losses, peak, gbs * 1e9)
            continue
        elif op.kind == MEMORY:
            ideal = op.bytes / gpu.bytes_per_s * 1e3
            key = op.family + ("" if op.pass_ == "fwd" else ".bwd")
            real = sum(part / (gpu.bytes_per_s * _rate(bandwidth[name], f"{name} bandwidth")) * 1e3
                       for name, part in memory_parts(op, key).items())
            real += fill.get(key, 0.0) * memory_fill_share(op.bytes, params)
            real *= params.machine_memory  # this machine's streaming rate; its launch costs the same
            fixed = memory_fixed_ms(memory_fixed.get(key, params.launch_ms), per_width.get(key, 0.0),
                                    per_row.get(key, 0.0), width=op.n, rows=op.m)
            time_ms, losses = real + fixed, Losses(memory=real - ideal, launch=fixed)
        else:
            continue
        if op.kind == FLASH and params.machine_flash != 1.0:
            time_ms, scaled = _on_this_machine(time_ms, losses.as_dict(), op.flops / (gpu.peak_tflops(inner) * 1e12) * 1e3,
                                               params.machine_flash, "kernel")
            losses = Losses(**scaled)
        if params.machine_launch_ms:
            time_ms, losses = time_ms + params.machine_launch_ms, dataclasses.replace(
                losses, launch=losses.launch + params.machine_launch_ms)
        costs[i] = OpCost(op, time_ms, losses, gpu.peak_tflops(inner) if op.kind == FLASH else peak, gpu.bytes_per_s)
    assert all(c is not None for c in costs)
    return costs  # type: ignore[return-value]


@dataclass(frozen=True)
class StepCost:
    """One step of a model on one tensor-parallel rank: every op's cost and the totals."""

    shape: ModelShape
    workload: Workload
    model: CostModel  # the GPU and the cost model the step was predicted with
    costs: tuple[OpCost, ...]

    @property
    def gpu(self) -> GPU:
        return self.model.gpu

    @property
    def time_ms(self) -> float:
        return float(sum(c.total_ms for c in self.costs))

    @property
    def flops(self) -> int:
        return sum(c.op.total_flops for c in self.costs)

    @property
    def losses(self) -> Losses:
        return sum((c.losses * c.op.count for c in self.costs), Losses())

    @property
    def tokens_per_s(self) -> float:
        """Tokens per second of the tensor-parallel group (all t ranks together)."""
        return self.workload.tokens / (self.time_ms * 1e-3)

    @property
    def gpu_ms_per_token(self) -> float:
        """GPU time one token costs, summed over the ranks: what shape changes are compared by."""
        return self.time_ms * self.workload.tp / self.workload.tokens

    @property
    def mfu(self) -> float:
        """Matrix FLOPs executed over the time of the step at the dtype's peak."""
        return self.flops / (self.time_ms * 1e-3 * self.gpu.peak_tflops(self.workload.dtype) * 1e12)

    def __repr__(self) -> str:  # its ops are `costs` (a step of a large model holds over a hundred)
        return (f"StepCost(shape={self.shape.name!r}, workload={self.workload!r}, model={self.model!r}, "
                f"time_ms={self.time_ms:.6g}, costs=<{len(self.costs)} ops>)")

    def by_name(self) -> dict[str, float]:
        """Total ms per op name, backward passes included."""
        totals: dict[str, float] = {}
        for c in self.costs:
            totals[c.op.name] = totals.get(c.op.name, 0.0) + c.total_ms
        return totals


def predict_step(shape: ModelShape, workload: Workload, *, gpu: GPU | str | CostModel,
                 link_gbs: float | None = None) -> StepCost:
    """Every op of one step of a model, predicted. gpu: as predict_gemm's; link_gbs: as predict_ops'."""
    model = cost_model(gpu)
    params = model.params
    ops = model_ops(shape, workload)
    costs = predict_ops(ops, gpu=model, dtype=workload.dtype, link_gbs=link_gbs)
    if workload.overlap_comm:  # hidden behind compute: only the launch stays on the critical path
        # (the replicas' gradients are all-reduced after the last backward, with nothing left to hide behind)
        costs = [dataclasses.replace(c, time_ms=params.launch_ms, losses=Losses(launch=params.launch_ms),
                                     hidden_ms=c.time_ms)
                 if c.op.kind == COMM and c.op.name not in REPLICA_GRADS else c for c in costs]
    return StepCost(shape, workload, model, tuple(costs))


def layers_priced(shape: ModelShape) -> tuple[ModelShape, int]:
    """The model whose ops price a shape's layers, and the layers it holds: one block where the layers
    are alike (a model's layers × it, fast when only the layer count changes), else the whole model
    (dense-first layers among MoE ones, windows among global layers), whose layers' time / its layers
    is the mean layer."""
    return (shape.one_layer(), 1) if shape.layers_alike else (shape, shape.num_layers)


def predict_layer_and_outside(shape: ModelShape, workload: Workload, *, gpu: GPU | str | CostModel,
                              one_block: bool = False) -> tuple[float, list[OpCost]]:
    """ms of one (the mean) layer, and the costs of every op outside the layers (embedding, head, loss):
    a model's step is its layers × that layer + those, which is how search counts it (the same as
    check's step). one_block: one block × the layers whatever the model, as verify builds and measures it."""
    from .ops import OUTSIDE_LAYERS

    priced, layers = (shape.one_layer(), 1) if one_block else layers_priced(shape)
    step = predict_step(priced, workload, gpu=gpu)
    layer = sum(c.total_ms for c in step.costs if c.op.name not in OUTSIDE_LAYERS) / layers
    # the replicas' gradients of every layer, all-reduced once: the whole model's, not one block's
    replicas = predict_ops(replica_grad_ops(shape, workload), gpu=step.model, dtype=workload.dtype) \
        if workload.mode == "train" else []
    return layer, [c for c in step.costs if c.op.name in OUTSIDE_LAYERS and c.op.name not in REPLICA_GRADS] + replicas


def predict_attention(*, batch: int, heads: int, kv_heads: int, seq: int, head_dim: int, causal: bool = True,
                      pass_: str = "fwd", gpu: GPU | str | CostModel, dtype: str = "bf16") -> float:
    """Predicted ms of fused attention (torch's default SDPA kernel): forward (pass_ "fwd"), or forward +
    backward ("fwdbwd"). Not in fp8: SDPA takes none (an fp8 step runs its attention in bf16, as check prices it)."""
    from .limits import BATCH, HEAD_DIM, HEADS, SEQ, flag
    from .ops import attention_op

    batch, seq, head_dim = BATCH.keyword(batch, "batch"), SEQ.keyword(seq, "seq"), HEAD_DIM.keyword(head_dim, "head_dim")
    heads, kv_heads = HEADS.keyword(heads, "heads"), HEADS.keyword(kv_heads, "kv_heads")
    causal = flag(causal, "causal")
    check_name(pass_, ATTENTION_PASSES, "pass_")
    check_name(dtype, DTYPE_BYTES, "dtype")
    if heads % kv_heads:
        raise ShapewiseError(f"{kv_heads} kv_heads do not divide {heads} heads: give a divisor of {heads} "
                             "(1 for multi-query attention)")
    if dtype == "fp8":  # its bf16 time, priced as fp8's, would be a guess
        raise ShapewiseError(f"no fused attention runs in fp8 (SDPA takes no fp8; an fp8 step runs its attention in "
                             f"bf16): give {argument('dtype')} bf16")
    ops = [attention_op("fwd", seqs=batch, heads=heads, kv_heads=kv_heads, q_len=seq, kv_len=seq, head_dim=head_dim,
                        causal=causal, dtype_bytes=DTYPE_BYTES[dtype])]
    if pass_ != "fwd":
        ops.append(attention_op("bwd", seqs=batch, heads=heads, kv_heads=kv_heads, q_len=seq, kv_len=seq,
                                head_dim=head_dim, causal=causal, dtype_bytes=DTYPE_BYTES[dtype]))
    return sum(c.time_ms for c in predict_ops(ops, gpu=gpu, dtype=dtype))
