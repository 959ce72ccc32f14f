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

Everything is vectorized over shapes with numpy; nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
from dataclasses import dataclass, field, fields

import numpy as np

from .errors import ShapewiseError
from .hardware import GPU, get_gpu
from .ops import BMM, COMM, FLASH, GEMM, MEMORY, Op, model_ops
from .shapes import DTYPE_BYTES, ModelShape, Workload

LAYOUTS = ("nn", "nt", "tn")
TENSOR_CORE_DTYPES = ("tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class CostParams:
    """The cost model's free parameters. The defaults are the spec-only model: the GEMM parameters were
    fitted by benchmarks/fit_probe.py to the H200 run in benchmarks/results/h200-probe.csv, the others
    read off the same run (benchmarks/RESULTS.md). A calibrated profile replaces them for its own GPU."""

    # Fraction of the datasheet peak the best GEMM kernels reach (the H200 ran 8192³ bf16 at 790 of 989).
    gemm_ceiling: float = 0.78
    # Per-tile fixed work (prologue, epilogue) in units of K: a tile costs K + k_overhead steps.
    k_overhead: float = 102.6496
    # Output tiles cuBLAS chooses among (rows, cols), and each one's rate relative to the largest.
    # The small ones run small problems on many SMs: on the H200 cuBLAS 13.1 picked 32×64 and 64×32
    # Hopper kernels and 32×32 Ampere WMMA kernels for them (benchmarks/results/h200-kernels/); their
    # rates are the H200 calibration's fit, rounded (the probe that set the others had no such shapes).
    tiles: tuple[tuple[int, int], ...] = ((128, 256), (256, 128), (128, 128), (128, 64), (64, 128), (64, 64),
                                          (64, 32), (32, 64), (32, 32))
    tile_rates: tuple[float, ...] = (1.0, 1.0, 0.964, 0.944, 0.695, 0.47, 0.25, 0.27, 0.16)
    # Split-K factors; a slice keeps at least min_split_k of K. cuBLAS splits K by any count (and
    # Hopper's stream-K balances the work further); the factors between powers of two cut the
    # H200 calibration's cross-validated GEMM error (median 7.9% to 7.5%, p90 24% to 23%).
    splits: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
    min_split_k: int = 256
    # How much of a partly filled last wave's idle time a GPU's kernels win back (0: whole waves, as
    # the classic wave quantization has it; 1: none idle). Hopper's cuBLAS runs persistent kernels
    # and picks among tiles of many sizes (192×192, 320×128, … on the H200: benchmarks/results/
    # h200-kernels/), so a calibration fits it (the H200's: 0.71); the spec model keeps whole waves.
    wave_credit: float = 0.0
    # Slowdown when a leading dim is only 4- or 8-byte aligned (fitted), and when it is odd: that one
    # depends on the layout and on whether the odd dim leads A or leads C (n), so it is a table over
    # the layouts nn, nt, tn, read off the probe's align set (the aligned 4096³ rate, about 740 TFLOP/s,
    # over the rate with one dim made 4097).
    misaligned_even: float = 2.7562
    misaligned_odd_a: tuple[float, float, float] = (5.4, 5.8, 5.2)
    misaligned_odd_n: tuple[float, float, float] = (6.0, 7.7, 4.9)
    # The same for memory-bound GEMMs (narrower loads, no TMA); the probe found no extra cost for odd dims.
    misaligned_even_memory: float = 1.5889
    misaligned_odd_memory: float = 1.0
    # Fraction of the datasheet bandwidth memory-bound GEMMs reach (a 2 GiB copy reached 4.22 of 4.8 TB/s).
    gemm_bandwidth: float = 0.8045
    # torch's memory-bound kernels by family and pass, as fractions of the datasheet bandwidth
    # (H200, bf16, large tensors; probe rows "elementwise" and "copy"). Where the probe measured no
    # backward (glu, loss) the forward's figure stands in.
    bandwidth: tuple[tuple[str, float], ...] = (
        ("copy", 0.88), ("copy.bwd", 0.88), ("add", 0.91), ("add.bwd", 0.91), ("layernorm", 0.48), ("layernorm.bwd", 0.33), ("rmsnorm", 0.53),
        ("rmsnorm.bwd", 0.33),
        ("act", 0.75), ("act.bwd", 0.86), ("glu", 0.52), ("glu.bwd", 0.52), ("softmax", 0.30),
        ("softmax.bwd", 0.45), ("loss", 0.22), ("loss.bwd", 0.33),
        # Embedding gather, and its backward (zero the table, scatter-add the rows): llama3-8b's, from
        # `bench ops` (benchmarks/results/h200-bench.csv).
        ("embed", 0.59), ("embed.bwd", 0.36),
        # Rotary embeddings as Hugging Face's Llama applies them (rotate-half: five kernels where one
        # would do), against the bytes one fused kernel would move: the H200 calibration's
        # (benchmarks/results/h200-calibration/), rounded.
        ("rope", 0.075), ("rope.bwd", 0.063))
    launch_ms: float = 0.0056
    # Fixed time per call of a memory-bound op, by family (as `bandwidth`), where it is not one launch:
    # Hugging Face's rotate-half RoPE runs five kernels, and what decoding's one-token rows cost is
    # mostly this. A calibrated profile fits it from small rows; unlisted families cost launch_ms.
    memory_fixed_ms: tuple[tuple[str, float], ...] = ()
    # And where a kernel reduces each row (the norms), its fixed time grows with the row's width: a
    # few rows' call takes one row's reduction. Per element of a row, by family; a calibration with
    # rows of several widths fits it (on the H200, LayerNorm took 8.5 µs on 1600-wide rows, 13 µs on
    # 4096-wide ones); unlisted families have none.
    memory_fixed_per_width_ms: tuple[tuple[str, float], ...] = ()
    # torch's embedding gathers its rows with index_select, which for SMALL_INDEX rows or fewer runs a
    # kernel that walks the indices one after another: a few rows cost more than many (on the H200,
    # 1 row 5.3 µs, 16 rows 14.5 µs, 31 rows 5.1 µs). Per row up to SMALL_INDEX, by family (embed).
    memory_fixed_per_row_ms: tuple[tuple[str, float], ...] = ()
    # Memory-bound GEMMs start slower than bandwidth allows (DRAM ramp, few tiles in flight): a delay
    # that grows with the bytes moved up to memory_ramp_mb, then stays.
    memory_latency_ms: float = 0.0045
    memory_ramp_mb: float = 17.9106
    # Fused attention as torch's SDPA runs it by default: on an H200 with torch 2.11 that is the cuDNN
    # kernel (the default rows of benchmarks/results/h200-bench.csv match the probe's cuDNN rows).
    # The kernel gives each SM one query block of flash_block_q rows (the backward's kernels: blocks
    # of flash_block_bwd rows) of one sequence and head at a time; a block walks the key blocks it
    # attends to (all of them, or up to the diagonal when causal), at the bucket's fraction of peak
    # per step, plus flash_overhead_* steps of its own (loading Q, writing O). The call takes as long as the SM with the most steps, with the blocks
    # dealt out in order to whichever SM frees first (_busiest_sm). flash_latency_* is the fixed time of a
    # call (the backward runs several kernels), launch included. cuDNN pads the head dim to a multiple
    # of 64 (d=80 and 96 run as 128, d=160 as 192), which is a tile loss. Defaults: the H200
    # calibration's fit (benchmarks/results/h200-calibration/, 204 cuDNN calls of 8 to 256 sequences ×
    # heads, 512 to 8192 tokens, head dims 64 to 256), rounded.
    flash_buckets: tuple[int, ...] = (64, 128, 192, 256)
    flash_fwd: tuple[float, ...] = (0.48, 0.65, 0.70, 0.70)
    flash_bwd: tuple[float, ...] = (0.43, 0.57, 0.39, 0.45)
    flash_overhead_fwd: float = 1.5
    flash_overhead_bwd: float = 4.25
    flash_latency_fwd_ms: float = 0.007
    flash_latency_bwd_ms: float = 0.020
    flash_block_q: int = 128
    # cuDNN's backward deals out 64-row blocks: the H200 calibration's backward calls fit it best (mean
    # |log error| 0.055 at 128 rows, 0.040 at 64, 0.050 at 32; fit.fit_flash chooses among these). At
    # 128 a few heads of short sequences came out 20-67% over: 8 × 1067 tokens, d=192, are 72
    # blocks of 128 rows for 132 SMs, but 136 of 64.
    flash_block_bwd: int = 64
    # Decoding's attention (one query token against the cache) streams the cache: a fraction of the
    # datasheet bandwidth and a fixed cost per call (the spec model: the memory-bound GEMMs' own).
    flash_memory_bandwidth: float = 0.8045
    flash_memory_fixed_ms: float = 0.0056
    # One head's cache is walked by a few blocks in turn, however many heads and sequences run beside
    # it: a time per million of its elements (kv_len × head dim). The spec model has none. On the
    # H200, fitted from the calibration's 24 decoding calls, it took the held-out sets' decoding
    # attention from 7.3% to 5.3% median error (too fast before on long caches of few heads;
    # benchmarks/RESULTS.md).
    flash_memory_stream_ms: float = 0.0
    # Tensor-parallel collectives ride the GPU's peer link (hardware.NVLINK_DATASHEETS): ring
    # all-gather and reduce-scatter move (t-1)/t of the message each way. The spec model assumes
    # nccl-tests' usual bus bandwidth on NVLink (about 80%) and 10 µs a call; `calibrate --comm`
    # measures the link (two H200s: 68.7% and 94.5 µs, benchmarks/results/h200x2-tp/).
    comm_bandwidth: float = 0.8
    comm_latency_ms: float = 0.01
    # A calibrated profile's measured residuals of GEMMs and BMMs, one row per calibration shape:
    # (layout index, A-lead alignment class, n alignment class, log2 m, log2 n, log2 k, log2 batch,
    # ln(measured / predicted)). Predictions are then multiplied by a kernel-weighted average of the
    # residuals of shapes of the same layout and alignment, nearby ones most (see _residual_factor).
    gemm_residuals: tuple[tuple[float, ...], ...] = ()
    residual_octaves: float = 0.75  # kernel width, in octaves of each dim
    residual_prior: float = 0.5  # weight of "no correction": few or far neighbours correct little
    # Misaligned GEMMs as cuBLAS runs them, where a calibration recorded its kernels (on a GPU): not
    # the Hopper kernels slowed down, but older CUTLASS kernels with narrow loads (odd dims: Turing
    # align1 tiles and 32×32 WMMA; even: Ampere align2 tiles and 32×32 WMMA), each with a time model
    # of its own (see _cutlass_ms). One row per kernel configuration: (family, an index into
    # CUTLASS_FAMILIES; tile rows; tile cols; 1 if it writes fp32 partials for a split-K reduction;
    # layout index; occupancy; K block and pipeline stages, 0 where the name gives none; then the
    # coefficients of CUTLASS_TERMS, in ms).
    cutlass_kernels: tuple[tuple[float, ...], ...] = ()
    # Which configuration cuBLAS ran for each misaligned GEMM and batched GEMM of the calibration:
    # (layout index, worst alignment class, log2 m, log2 n, log2 k, log2 batch, row of
    # cutlass_kernels, ln(measured / predicted)). They tell a shape which configurations its group
    # (the same layout, class and batchedness) runs, which of them its neighbours ran, and how far the
    # tables missed nearby (a correction, as the residual table's).
    cutlass_choices: tuple[tuple[float, ...], ...] = ()
    # Which configuration cuBLAS picks, as a calibration learned it from the choices (fit.fit_chooser):
    # one row per row of cutlass_kernels, the weights of CHOOSER_FEATURES of the shape in that
    # configuration's score; the score also adds cutlass_chooser_vote times the share of the
    # neighbours that ran it and takes off cutlass_chooser_sharpness times its log time. cuBLAS picks
    # by a model of its own, not always the kernel that runs fastest: on the H200 the likeliest
    # configuration has cuBLAS's tile for 82% of held-out GEMMs and 83% of batched ones, the nearest
    # calibration shape's for 75% and 68% (benchmarks/kernel_model.py).
    cutlass_chooser: tuple[tuple[float, ...], ...] = ()
    cutlass_chooser_sharpness: float = 0.0
    cutlass_chooser_vote: float = 0.0
    # This machine against the one its profile was fitted on, by op family: a time factor fitted by
    # `calibrate --quick` (calibrate.machine_factors). GPUs of one model differ by a few percent in
    # clocks and memory (benchmarks/RESULTS.md: the same GEMMs on two H200s, 2.3% apart).
    machine_gemm: float = 1.0
    machine_bmm: float = 1.0
    machine_flash: float = 1.0
    machine_memory: float = 1.0

SPEC = CostParams()

# The Turing WMMA kernel is not the Ampere one with another name: it loads one element at a time
# and runs 1.5-2.6x as long (fitted apart, batched GEMMs' in-sample p90 error 15.1% -> 12.6%:
# benchmarks/kernel_model.py).
CUTLASS_FAMILIES = ("Turing CUTLASS align1", "Ampere CUTLASS align2", "Ampere WMMA", "Turing WMMA align1", "Hopper xmma")
# The terms of a CUTLASS kernel's time (cutlass_terms), each with a fitted coefficient.
CUTLASS_TERMS = ("launch", "k-steps", "k-steps per resident group", "epilogues", "partials", "reduction launch")
# How many slices cuBLAS cuts K into for these kernels (seen up to 130 on the H200), a slice at least
# CUTLASS_MIN_SLICE long; the fastest under the kernel's own model is taken, as cuBLAS mostly does.
# A kernel that writes fp32 partials always runs split, with the reduction kernel after it: where K
# is too short for two such slices, cuBLAS cuts shorter ones (down to 6 on the H200), and so does
# the model, down to CUTLASS_MIN_PARTIAL_SLICE.
CUTLASS_SPLITS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 96, 128)
CUTLASS_MIN_SLICE = 64
CUTLASS_MIN_PARTIAL_SLICE = 8
KERNEL_COLUMNS = 8  # cutlass_kernels' columns before the coefficients
# What a kernel's score in cutlass_chooser weighs: log2 of m, n, k and batch, centred on CHOOSER_CENTRE
# and scaled by CHOOSER_SCALE, their squares and the products of m, n and k, and whether it is batched.
CHOOSER_FEATURES = ("1", "m", "n", "k", "batch", "m²", "n²", "k²", "batch²", "m·n", "m·k", "n·k", "m·batch", "n·batch",
                    "k·batch", "batched")
CHOOSER_CENTRE = (8.0, 8.0, 9.0, 2.0)
CHOOSER_SCALE = 3.0
SMALL_INDEX = 16  # index_select's small-index kernel takes this many indices or fewer (ATen's Indexing.cu)
CHUNK = 16384  # shapes at a time where a step makes an array per shape and candidate
# A kernel configuration is a candidate for a shape only within this many octaves of the range of the
# calibration shapes it ran, in each of m, n, k and batch: its time model is not to be trusted far
# outside it (on the H200, Hopper's xmma kernels ran K of 34 to 60 alone, and their fit, with no
# K-step terms, put a batched GEMM of K 3178 at a seventh of its time).
CANDIDATE_REACH = 1.0
# A calibration shape farther than this many kernel widths (CostParams.residual_octaves) from a
# prediction's shape weighs nothing in its corrections (its weight would be under 1.2%).
NEIGHBOUR_REACH = 3.0
LOSS_NAMES = ("kernel", "tile", "wave", "misalign", "memory", "launch")


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

    def __add__(self, other: "Losses") -> "Losses":
        return Losses(*(a + b for a, b in zip(self.values(), other.values())))

    def __mul__(self, scale: float) -> "Losses":
        return Losses(*(a * scale for a in self.values()))

    __rmul__ = __mul__

    def values(self) -> tuple[float, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def total(self) -> float:
        return sum(self.values())

    @property
    def main(self) -> str | None:
        """The largest avoidable loss (the kernel ceiling is not a property of the shape)."""
        name, value = max(((n, v) for n, v in self.as_dict().items() if n != "kernel"), key=lambda nv: nv[1])
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
        names = [n for n in LOSS_NAMES if n != "kernel"]
        stacked = np.stack([np.asarray(self.losses[n], dtype=float) for n in names])
        best = stacked.argmax(axis=0)
        if stacked.ndim == 1:
            return names[int(best)] if stacked.max() > 0 else None
        return np.where(stacked.max(axis=0) > 0, np.array(names, dtype=object)[best], None)


def _resolve_gpu(gpu: GPU | str) -> GPU:
    return gpu if isinstance(gpu, GPU) else get_gpu(gpu)


def _align_class(dim: np.ndarray, dtype: str, align_bytes: int) -> np.ndarray:
    """0 = aligned as the tensor cores need (16 bytes on NVIDIA), 1 = 4-byte aligned or better, 2 = worse."""
    if dtype not in TENSOR_CORE_DTYPES:
        return np.zeros_like(dim)  # the fp32 SIMT path has no such need
    nbytes = dim * DTYPE_BYTES[dtype]
    return np.where(nbytes % align_bytes == 0, 0, np.where(nbytes % 4 == 0, 1, 2))


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
    flops = 2.0 * m * n * k * batch
    nbytes = (m * k + k * n + m * n) * batch * size
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
    padded = lambda dim, lead: np.where(lead & (dim * size % gpu.align_bytes != 0), -(-dim // vec) * vec, dim)  # noqa: E731
    m_e, k_e = padded(m, a_lead_is_m), padded(k, ~a_lead_is_m)
    n_e = padded(n, np.ones_like(a_lead_is_m))

    tm = np.array([t[0] for t in p.tiles], dtype=np.int64)
    tn = np.array([t[1] for t in p.tiles], dtype=np.int64)
    rate = np.array(p.tile_rates)
    splits = np.array(p.splits, dtype=np.int64)
    # Candidates on a trailing axis: C = tiles × splits.
    c_tm, c_tn, c_rate = (np.repeat(x, len(splits)) for x in (tm, tn, rate))
    c_split = np.tile(splits, len(tm))
    M, N, K, BT = (x[..., None] for x in (m_e, n_e, k_e, batch))
    num_tiles = BT * -(-M // c_tm) * -(-N // c_tn)
    units = num_tiles * c_split
    waves = -(-units // gpu.num_sms)
    credit = min(max(p.wave_credit, 0.0), 1.0)  # the last wave's idle SMs, won back in part
    waves = waves - credit * (waves - np.maximum(units / gpu.num_sms, 1.0))
    k_slice = K / c_split
    per_sm = peak * p.gemm_ceiling / gpu.num_sms
    t_compute = waves * 2.0 * c_tm * c_tn * (k_slice + p.k_overhead) / (per_sm * c_rate)
    # Split-K writes fp32 partial tiles and reads them back to reduce them.
    t_reduce = np.where(c_split > 1, 2 * 4 * M * N * BT * c_split / gpu.bytes_per_s, 0.0)
    valid = (c_split == 1) | (k_slice >= p.min_split_k)
    t_cand = np.where(valid, t_compute * slow_compute[..., None] + t_reduce, np.inf)
    best = np.argmin(t_cand, axis=-1)[..., None]

    def pick(candidates):  # each shape's value for its fastest candidate
        return np.take_along_axis(np.broadcast_to(candidates, t_cand.shape), best, axis=-1)[..., 0]

    b_tm, b_tn, b_rate, b_split = pick(c_tm), pick(c_tn), pick(c_rate), pick(c_split)
    b_units, b_waves, b_reduce = pick(units), pick(waves), pick(t_reduce)
    ks = k_e / b_split
    t0 = flops / peak
    # Each factor of the chosen candidate's time in turn; the step each one adds is its loss.
    t1 = t0 * (k_e / k) / (p.gemm_ceiling * ks / (ks + p.k_overhead))
    t2 = t1 * (pick(num_tiles) * b_tm * b_tn) / (m * n * batch) / b_rate
    t3 = t2 * b_waves * gpu.num_sms / b_units + b_reduce
    t4 = t3 * slow_compute
    bytes_e = (m_e * k_e + k_e * n_e + m_e * n_e) * batch * size
    ramp = np.minimum(1.0, bytes_e / (p.memory_ramp_mb * 1e6))
    t_mem = bytes_e / (gpu.bytes_per_s * p.gemm_bandwidth) + p.memory_latency_ms * 1e-3 * ramp
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
    tile = np.stack([b_tm, b_tn], axis=-1)
    family = np.full(np.shape(m), -1)
    if p.gemm_residuals or p.cutlass_kernels:
        # A profile's measured corrections: misaligned GEMMs timed as the CUTLASS kernel cuBLAS runs
        # for them, and the residual table for the rest. The losses are scaled together so that they still
        # add up to the gap between the ideal and the corrected time.
        served = np.zeros(np.shape(m), dtype=bool)
        if p.cutlass_kernels and size == 2:  # the tables are of 16-bit GEMMs (bf16, fp16), as calibrated
            served, kernel_ms, kernel_tile, kernel_split, kernel_family = _cutlass_ms(p, which, worst, m, n, k, batch,
                                                                                      gpu.num_sms)
        factor = np.ones(np.shape(m))
        rest = ~served
        if p.gemm_residuals and rest.any():  # the table corrects what the kernels do not serve
            factor[rest] = _residual_factor(p, *(np.broadcast_to(x, np.shape(m))[rest]
                                                 for x in (which, class_a, class_n, m, n, k, batch)))
        corrected = time_ms * factor
        if served.any():
            corrected = np.where(served, kernel_ms, corrected)
            tile = np.where(served[..., None], kernel_tile, tile)
            b_split = np.where(served, kernel_split, b_split)
            family = np.where(served, kernel_family, family)
        ideal = t0 * s
        corrected = np.maximum(corrected, ideal)
        scale = (corrected - ideal) / np.maximum(time_ms - ideal, 1e-30)
        losses = {name: loss * scale for name, loss in losses.items()}
        time_ms = corrected
    factor = np.where(batch > 1, p.machine_bmm, p.machine_gemm)
    if np.any(factor != 1.0):
        time_ms, losses = _on_this_machine(time_ms, losses, t0 * s, factor, "kernel")
    return dict(time_ms=time_ms, flops=flops, bytes=nbytes, losses=losses, tile=tile, split_k=b_split,
                peak_tflops=peak / 1e12, family=family)


def _on_this_machine(time_ms, losses: dict, ideal_ms, factor, into: str):
    """A time and its losses on this machine: every loss scaled with the time, and what the factor
    adds to (or takes from) the ideal time booked to `into`, so that the losses still add up."""
    scaled = {name: loss * factor for name, loss in losses.items()}
    scaled[into] = scaled[into] + (factor - 1.0) * ideal_ms
    return time_ms * factor, scaled


def cutlass_terms(m, n, k, batch, tm, tn, splits, occupancy, sms: int) -> np.ndarray:
    """The terms of a CUTLASS kernel's time (CUTLASS_TERMS, on a last axis), broadcast over the inputs:
    see _cutlass_term_list."""
    return np.stack(np.broadcast_arrays(*_cutlass_term_list(m, n, k, batch, tm, tn, splits, occupancy, sms)),
                    axis=-1).astype(float)


def _cutlass_term_list(m, n, k, batch, tm, tn, splits, occupancy, sms: int) -> list:
    """The terms of CUTLASS_TERMS, each broadcast as far as its inputs go.

    Each SM runs T = ⌈tiles × splits / SMs⌉ tiles (of one K slice each) in turn, `occupancy` of them
    resident at once. A k-step's narrow loads go through the SM's load path, which its resident
    tiles share (T × slice × the filled share of a tile's rows and columns), and each step has a
    latency the resident tiles overlap (⌈T / occupancy⌉ × slice); each tile ends with an epilogue
    of narrow stores (T). A split-K kernel writes fp32 partials that a second kernel reduces
    (m·n·batch·splits elements, one more launch). cuBLAS is column-major, so a tile's rows run
    along torch's n."""
    m, n, k, batch, tm, tn, splits, occupancy = (np.asarray(x, dtype=np.int64)
                                                 for x in (m, n, k, batch, tm, tn, splits, occupancy))
    rows, cols = -(-n // tm), -(-m // tn)
    per_sm = -(-(rows * cols * batch * splits) // sms)
    slice_ = -(-k // splits)
    split = (splits > 1).astype(float)
    # A partial tile loads only its rows and columns that hold data (the rest are predicated off):
    # the load path carries the tiles' mean share of a full tile's loads. By the fit's leave-one-out
    # (mean |log error|, benchmarks/RESULTS.md): single GEMMs 0.0641 -> 0.0633, batched 0.0752 -> 0.0725.
    filled = (n / rows + m / cols) / (tm + tn)
    return [np.ones(per_sm.shape), per_sm * slice_ * filled, -(-per_sm // occupancy) * slice_, per_sm,
            split * m * n * batch * splits, split]


def _tables(p: CostParams) -> dict:
    """The profile's tables as arrays, made once per profile (keyed by the tables' identity: hashing
    tuples of thousands of rows on every call would cost more than the prediction)."""
    mine = (p.cutlass_kernels, p.cutlass_choices, p.cutlass_chooser, p.gemm_residuals)
    found = _TABLES.get(tuple(map(id, mine)))
    if found is not None:  # the entry holds the tables it was made from, so their ids are still theirs
        return found[1]
    residuals = np.array(p.gemm_residuals, dtype=float).reshape(-1, 8)
    choices = np.array(p.cutlass_choices, dtype=float).reshape(-1, 8)
    tables = dict(kernels=np.array(p.cutlass_kernels, dtype=float).reshape(-1, KERNEL_COLUMNS + len(CUTLASS_TERMS)),
                  choices=choices, ranges=kernel_ranges(choices, len(p.cutlass_kernels)),
                  chooser=np.array(p.cutlass_chooser, dtype=float).reshape(-1, len(CHOOSER_FEATURES)),
                  residual_groups=(residuals[:, 0] * 9 + residuals[:, 1] * 3 + residuals[:, 2]).astype(np.int64),
                  residual_points=residuals[:, 3:7], residual_values=residuals[:, 7])
    if len(_TABLES) >= 8:
        _TABLES.clear()
    _TABLES[tuple(map(id, mine))] = (mine, tables)
    return tables


_TABLES: dict = {}


def neighbour_sums(queries: np.ndarray, points: np.ndarray, values: np.ndarray, octaves: float):
    """For each query (a row of log2 dims), the sum over points of w × the point's row of `values`,
    and the sum of w: w = exp(-d² / 2σ²) with d the distance in log2 dims and σ = `octaves`, and
    nothing from points beyond NEIGHBOUR_REACH σ. The points are bucketed in cells as wide as that
    reach (in m, n and k), so that a query meets only the points of its own cell and the cells
    around it: a profile of many calibration shapes stays fast."""
    sums, total = np.zeros((len(queries), values.shape[1])), np.zeros(len(queries))
    if not len(queries) or not len(points):
        return sums, total
    reach = NEIGHBOUR_REACH * octaves
    cell_q, cell_p = (np.floor(x[:, :3] / reach).astype(np.int64) for x in (queries, points))
    low = np.minimum(cell_q.min(axis=0), cell_p.min(axis=0)) - 1
    span = np.maximum(cell_q.max(axis=0), cell_p.max(axis=0)) - low + 2
    key_p = np.ravel_multi_index((cell_p - low).T, span)
    order = np.argsort(key_p, kind="stable")
    sorted_keys = key_p[order]
    around = np.ravel_multi_index(np.indices((3, 3, 3)).reshape(3, -1), span) - np.ravel_multi_index((1, 1, 1), span)
    cells, which = np.unique(np.ravel_multi_index((cell_q - low).T, span), return_inverse=True)
    by_cell = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[by_cell], np.arange(len(cells) + 1))
    scale, square_q, square_p = np.float32(-0.5 / octaves ** 2), (queries ** 2).sum(axis=1), (points ** 2).sum(axis=1)
    for c, cell in enumerate(cells):
        lo, hi = np.searchsorted(sorted_keys, cell + around, "left"), np.searchsorted(sorted_keys, cell + around, "right")
        near = np.concatenate([order[a:b] for a, b in zip(lo, hi) if b > a] or [np.zeros(0, dtype=np.int64)])
        if not len(near):
            continue
        mine = by_cell[bounds[c]:bounds[c + 1]]
        # squared distances as |a|² + |b|² - 2a·b (a matrix product: fast); single precision for the
        # weights, which need no more, and whose exponentials are most of the time here
        d2 = (square_q[mine][:, None] + square_p[near][None, :] - 2 * queries[mine] @ points[near].T).astype(np.float32)
        w = np.exp(np.maximum(d2, 0) * scale)
        w[d2 > reach ** 2] = 0
        sums[mine] = w @ values[near].astype(np.float32)
        total[mine] = w.sum(axis=1)
    return sums, total


def _cutlass_ms(p: CostParams, layout_index, worst, m, n, k, batch, sms: int):
    """Misaligned GEMMs and batched GEMMs timed as the CUTLASS kernels cuBLAS runs for them. A shape's
    candidates are the configurations its calibration group (the same layout, alignment class and
    batchedness) ran near it (within_range), each at its fastest split (a batch is not split). Each
    gets a probability that cuBLAS runs it, from the profile's chooser: a softmax of its score, a
    quadratic in the log dims (CHOOSER_FEATURES), plus cutlass_chooser_vote times the share of the
    calibration shapes nearby that ran it, less cutlass_chooser_sharpness times its log time. The
    time is the geometric mean of the candidates' times by those probabilities, corrected by the
    residuals of the calibration shapes nearby (as _residual_factor does). Returns (served, ms,
    tile, split, family), each shaped as m, the tile, split and family those of the likeliest
    configuration; served is False where the profile has no such shapes."""
    tables = _tables(p)
    kernels, choices, chooser = tables["kernels"], tables["choices"], tables["chooser"]
    shape = np.shape(m)
    m, n, k, batch, layout_index, worst = (np.broadcast_to(x, shape).ravel()
                                           for x in (m, n, k, batch, layout_index, worst))
    served, ms = np.zeros(m.shape, dtype=bool), np.zeros(m.shape)
    tile, split = np.zeros(m.shape + (2,), dtype=np.int64), np.ones(m.shape, dtype=np.int64)
    family = np.full(m.shape, -1)
    coords = np.log2(np.stack([m, n, k, batch], axis=1).astype(float))
    group = (layout_index * 3 + worst) * 2 + (batch > 1)
    theirs_group = choice_groups(choices)
    for code in np.unique(group[worst > 0]):
        mine, theirs = np.flatnonzero(group == code), theirs_group == code
        if not theirs.any() or not len(chooser):
            continue
        points, residuals = choices[theirs, 2:6], choices[theirs, 7]
        # the group's configurations, each timed once per shape; a choice names one by its position
        configs, position = np.unique(choices[theirs, 6].astype(np.int64), return_inverse=True)
        base = residuals.sum() / (len(residuals) + 1)
        # what a shape's neighbours say: their residuals' deviation from the group's mean, and which
        # configuration each ran
        values = np.column_stack([residuals - base, np.eye(len(configs))[position]])
        for start in range(0, len(mine), CHUNK):  # bounded memory for many shapes at once
            part = mine[start:start + CHUNK]
            sums, total = neighbour_sums(coords[part], points, values, p.residual_octaves)
            correction = base + sums[:, 0] / (total + p.residual_prior)
            share = sums[:, 1:] / (total + p.residual_prior)[:, None]
            times, splits = _kernel_times(kernels[configs], m[part], n[part], k[part], batch[part], sms)
            times = np.where(within_range(tables["ranges"][configs], coords[part]), times, np.inf)
            log_t = np.log(times)
            finite = np.isfinite(log_t)
            log_t = np.where(finite, log_t, 0.0)
            score = (chooser_features(m[part], n[part], k[part], batch[part]) @ chooser[configs].T
                     + p.cutlass_chooser_vote * share - p.cutlass_chooser_sharpness * log_t)
            score = np.where(finite, score, -np.inf)
            best = np.argmax(score, axis=1)
            prob = np.exp(score - score[np.arange(len(part)), best][:, None])
            prob /= prob.sum(axis=1, keepdims=True)
            served[part] = finite.any(axis=1)
            ms[part] = np.exp((prob * log_t).sum(axis=1) + correction)
            tile[part] = kernels[configs[best], 1:3].astype(np.int64)
            family[part] = kernels[configs[best], 0].astype(np.int64)
            split[part] = splits[np.arange(len(part)), best]
    return (served.reshape(shape), ms.reshape(shape), tile.reshape(shape + (2,)), split.reshape(shape),
            family.reshape(shape))


def kernel_ranges(choices: np.ndarray, count: int) -> np.ndarray:
    """Each kernel configuration's range: the least and the most log2 m, n, k and batch of the
    calibration shapes that ran it (rows of cutlass_choices), as configurations × 2 × 4."""
    ranges = np.full((count, 2, 4), np.nan)
    for row in range(count):
        mine = choices[choices[:, 6] == row, 2:6]
        if len(mine):
            ranges[row] = mine.min(axis=0), mine.max(axis=0)
    return ranges


def within_range(ranges: np.ndarray, coords: np.ndarray) -> np.ndarray:
    """Shapes × configurations: whether each shape (log2 dims) lies within CANDIDATE_REACH octaves of
    each configuration's range; where none does, all count (a shape far from every calibration
    shape is better priced by all the kernels than by none)."""
    inside = ((coords[:, None, :] >= ranges[None, :, 0] - CANDIDATE_REACH)
              & (coords[:, None, :] <= ranges[None, :, 1] + CANDIDATE_REACH)).all(axis=-1)
    return inside | ~inside.any(axis=1, keepdims=True)


def choice_groups(choices: np.ndarray) -> np.ndarray:
    """The group of each row of cutlass_choices: its layout, alignment class and batchedness, as _cutlass_ms
    groups shapes."""
    return ((choices[:, 0] * 3 + choices[:, 1]) * 2 + (choices[:, 5] > 0)).astype(np.int64)


def _kernel_times(rows, m, n, k, batch, sms) -> tuple[np.ndarray, np.ndarray]:
    """Each shape's time on each kernel configuration (rows of cutlass_kernels) at its fastest split,
    and that split: two arrays of shapes × configurations."""
    splits = np.array(CUTLASS_SPLITS)
    kk, bb = k[:, None, None], batch[:, None, None]
    terms = _cutlass_term_list(m[:, None, None], n[:, None, None], kk, bb, rows[None, :, 1:2], rows[None, :, 2:3],
                               splits, rows[None, :, 5:6], sms)
    t = sum(term * rows[None, :, KERNEL_COLUMNS + i, None] for i, term in enumerate(terms))  # shapes × configs × splits
    slice_ = -(-kk // splits)
    valid = (splits == 1) | ((slice_ >= CUTLASS_MIN_SLICE) & (bb == 1))
    # a kernel that writes fp32 partials runs split: in slices of CUTLASS_MIN_SLICE or more where
    # K allows, in shorter ones where not, and unsplit only where K is too short even for those
    split_ok = valid & (splits > 1)
    split_ok |= (splits > 1) & (slice_ >= CUTLASS_MIN_PARTIAL_SLICE) & (bb == 1) & ~split_ok.any(axis=-1, keepdims=True)
    valid = np.where((rows[None, :, 3:4] > 0) & split_ok.any(axis=-1, keepdims=True), split_ok, valid)
    t = np.where(valid, t, np.inf)
    best = np.argmin(t, axis=-1)
    return np.take_along_axis(t, best[..., None], axis=-1)[..., 0], splits[best]


def chooser_features(m, n, k, batch) -> np.ndarray:
    """CHOOSER_FEATURES of shapes (1-D arrays): one row each."""
    x = (np.log2(np.stack([m, n, k, batch], axis=1).astype(float)) - np.array(CHOOSER_CENTRE)) / CHOOSER_SCALE
    return np.column_stack([np.ones(len(x)), x, x ** 2, x[:, 0] * x[:, 1], x[:, 0] * x[:, 2], x[:, 1] * x[:, 2],
                            x[:, :3] * x[:, 3:], (np.asarray(batch) > 1).astype(float)])


def _residual_factor(p: CostParams, layout_index, class_a, class_n, m, n, k, batch) -> np.ndarray:
    """exp of the profile's log residuals over calibration shapes of the same layout and alignment
    classes: their mean, plus a Nadaraya-Watson average of the deviations nearby (a Gaussian kernel
    in log2 dims, neighbour_sums)."""
    tables = _tables(p)
    groups, points, values = tables["residual_groups"], tables["residual_points"], tables["residual_values"]
    query_groups = (np.asarray(layout_index) * 9 + class_a * 3 + class_n).ravel()
    coords = np.stack([np.log2(np.asarray(x, dtype=float)).ravel() for x in np.broadcast_arrays(m, n, k, batch)], axis=1)
    out = np.zeros(len(coords))
    for group in np.unique(groups):  # each group against its own points only: fast with many shapes
        mine, theirs = query_groups == group, groups == group
        if not mine.any():
            continue
        # Two levels: the group's mean residual (shrunk towards none by one pseudo-sample), then the
        # kernel-weighted average of what nearby shapes deviate from that mean.
        v = values[theirs]
        base = v.sum() / (len(v) + 1)
        sums, total = neighbour_sums(coords[mine], points[theirs], (v - base)[:, None], p.residual_octaves)
        out[mine] = base + sums[:, 0] / (total + p.residual_prior)
    return np.exp(out).reshape(np.shape(m))


def _check_dims(**dims) -> None:
    for name, value in dims.items():
        arr = np.asarray(value)
        if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(arr == np.round(arr))):
            raise ShapewiseError(f"{name} must be whole numbers, got {value!r}")
        if np.any(arr <= 0):
            raise ShapewiseError(f"{name} must be positive, got {value!r}")


def predict_gemm(m, n, k, *, batch=1, gpu: GPU | str = "h200", dtype: str = "bf16", layout: str = "nn",
                 params: CostParams = SPEC) -> GemmPrediction:
    """Predict torch.matmul of a (batch×)m×k tensor by a (batch×)k×n tensor on a GPU.

    layout "nn": both row-major; "nt": the second is a transposed n×k tensor (F.linear's weight);
    "tn": the first is a transposed k×m tensor (a weight gradient). Scalars give scalar fields,
    arrays give arrays (vectorized: use arrays for many shapes at once).
    """
    _check_dims(m=m, n=n, k=k, batch=batch)
    if np.any(~np.isin(np.asarray(layout), LAYOUTS)):
        raise ShapewiseError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if dtype not in DTYPE_BYTES:
        raise ShapewiseError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPE_BYTES)}")
    out = _gemm_arrays(m, n, k, batch, layout, _resolve_gpu(gpu), dtype, params)
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

    @property
    def total_ms(self) -> float:
        return self.time_ms * self.op.count

    @property
    def tflops(self) -> float:
        return self.op.flops / (self.time_ms * 1e9)

    @property
    def gbps(self) -> float:
        return self.op.bytes / (self.time_ms * 1e6)

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


def _flash_cost(op: Op, gpu: GPU, dtype: str, p: CostParams) -> tuple[float, Losses]:
    peak = gpu.peak_tflops(dtype) * 1e12
    d = op.k
    buckets = np.array(p.flash_buckets)
    bucket = int(buckets[np.searchsorted(buckets, d)]) if d <= buckets[-1] else -(-d // 64) * 64
    fwd = op.pass_ == "fwd"
    table = p.flash_fwd if fwd else p.flash_bwd
    overhead = p.flash_overhead_fwd if fwd else p.flash_overhead_bwd
    latency = max(p.flash_latency_fwd_ms if fwd else p.flash_latency_bwd_ms, p.launch_ms)
    eff = table[p.flash_buckets.index(bucket)] if bucket in p.flash_buckets else table[-1]
    block = p.flash_block_q if fwd else p.flash_block_bwd
    steps, work, span = _flash_steps(op, block, overhead, gpu.num_sms)  # span: steps on the busiest SM
    exact = op.batch * (op.m * op.n / 2 if op.causal else op.m * op.n) / block ** 2  # steps without padding
    t0 = op.flops / peak
    t1 = op.flops / (peak * eff)
    t2 = t1 * (bucket / d) * (steps / exact)  # padded head dim, whole blocks on the diagonal
    t3 = t2 * work / steps  # each block's own prologue and epilogue
    t4 = t3 * span * gpu.num_sms / work  # SMs idle while the busiest finishes
    t_mem = op.bytes / (gpu.bytes_per_s * p.flash_memory_bandwidth)
    s = 1e3
    if t_mem > t4:
        fixed = max(p.flash_memory_fixed_ms, p.launch_ms)
        stream = p.flash_memory_stream_ms * op.n * op.k / 1e6  # the longest walk of one head's cache
        return t_mem * s + stream + fixed, Losses(memory=(t_mem - t0) * s + stream, launch=fixed)
    # Grouped-query backward: each query head's dK and dV are accumulated in fp32 and then summed over
    # its group, one more pass over 8 bytes per element of every query head's K and V. On the H200
    # (cuDNN) the grouped backwards of the independent attention set ran 5-6% over the model without
    # it, 0.55 of twice these bytes at full bandwidth; the MHA ones 1% (benchmarks/RESULTS.md).
    t_groups = 8 * op.batch * op.n * op.k / gpu.bytes_per_s if not fwd and op.groups > 1 else 0.0
    return (t4 + t_groups) * s + latency, Losses(kernel=(t1 - t0 + t3 - t2) * s + latency - p.launch_ms,
                                                 tile=(t2 - t1) * s, wave=(t4 - t3) * s, memory=t_groups * s,
                                                 launch=p.launch_ms)


def _comm_ms(op: Op, gpu: GPU, p: CostParams) -> float:
    """A ring collective over k ranks: (k-1)/k of the message (twice for an all-reduce) over the link."""
    from .hardware import link

    peer = link(gpu)
    if peer is None:
        raise ShapewiseError(f"{gpu.name} has no GPU-to-GPU link in the table: tensor parallelism cannot be modelled")
    ranks = op.k
    share = (ranks - 1) / ranks * (2 if op.family == "all_reduce" else 1)
    return share * op.bytes / (peer[1] * 1e9 * p.comm_bandwidth) * 1e3 + p.comm_latency_ms + p.launch_ms


def kernel_words(family: int, tile, split: int) -> str:
    """A CUTLASS kernel as the cost model times it, e.g. "Turing CUTLASS align1, 128×128 tiles, K split 3
    ways"; "" for a GEMM modelled as Hopper's own kernels run (family -1)."""
    if family < 0:
        return ""
    return f"{CUTLASS_FAMILIES[family]}, {int(tile[0])}×{int(tile[1])} tiles" + (f", K split {split} ways" if split > 1 else "")


def memory_fixed_ms(base: float, per_width: float, per_row: float, *, width: int, rows: int) -> float:
    """A memory-bound call's fixed time: its own, plus its rows' width's share (a norm reduces each
    row) and, on SMALL_INDEX rows or fewer, a cost per row (the embedding's small-index gather)."""
    return base + per_width * width + (per_row * rows if rows <= SMALL_INDEX else 0.0)


def predict_ops(ops: list[Op], *, gpu: GPU | str, dtype: str, params: CostParams = SPEC) -> list[OpCost]:
    """Predict every op of a step; all GEMMs and BMMs in one vectorized call."""
    gpu = _resolve_gpu(gpu)
    peak = gpu.peak_tflops(dtype)
    costs: list[OpCost | None] = [None] * len(ops)
    bandwidth = {**dict(SPEC.bandwidth), **dict(params.bandwidth)}  # a profile may predate a family
    memory_fixed, per_width = dict(params.memory_fixed_ms), dict(params.memory_fixed_per_width_ms)
    per_row = dict(params.memory_fixed_per_row_ms)
    mm = [i for i, op in enumerate(ops) if op.kind in (GEMM, BMM)]
    if mm:
        m, n, k, batch, layout = (np.array([getattr(ops[i], a) for i in mm]) for a in ("m", "n", "k", "batch", "layout"))
        pred = _gemm_arrays(m, n, k, batch, layout, gpu, dtype, params)
        for j, i in enumerate(mm):
            losses = Losses(**{name: float(pred["losses"][name][j]) for name in LOSS_NAMES})
            costs[i] = OpCost(ops[i], float(pred["time_ms"][j]), losses, peak, gpu.bytes_per_s,
                              kernel_words(int(pred["family"][j]), pred["tile"][j], int(pred["split_k"][j])))
    for i, op in enumerate(ops):
        if op.kind == FLASH:
            time_ms, losses = _flash_cost(op, gpu, dtype, params)
        elif op.kind == COMM:
            from .hardware import link

            time_ms = _comm_ms(op, gpu, params)
            losses = Losses(comm=time_ms - params.launch_ms, launch=params.launch_ms)
            # A collective's "peak" is its link: fraction_of_peak then reads as a share of it.
            costs[i] = OpCost(op, time_ms, losses, peak, link(gpu)[1] * 1e9)
            continue
        elif op.kind == MEMORY:
            ideal = op.bytes / gpu.bytes_per_s * 1e3
            key = op.family + ("" if op.pass_ == "fwd" else ".bwd")
            real = op.bytes / (gpu.bytes_per_s * bandwidth[key]) * 1e3
            fixed = memory_fixed_ms(memory_fixed.get(key, params.launch_ms), per_width.get(key, 0.0),
                                    per_row.get(key, 0.0), width=op.n, rows=op.m)
            time_ms, losses = real + fixed, Losses(memory=real - ideal, launch=fixed)
        else:
            continue
        factor = params.machine_flash if op.kind == FLASH else params.machine_memory
        if factor != 1.0:
            ideal = (op.bytes / gpu.bytes_per_s if op.kind == MEMORY else op.flops / (peak * 1e12)) * 1e3
            time_ms, scaled = _on_this_machine(time_ms, losses.as_dict(), ideal, factor,
                                               "memory" if op.kind == MEMORY else "kernel")
            losses = Losses(**scaled)
        costs[i] = OpCost(op, time_ms, losses, peak, gpu.bytes_per_s)
    assert all(c is not None for c in costs)
    return costs  # type: ignore[return-value]


@dataclass(frozen=True)
class StepCost:
    """One step of a model on one tensor-parallel rank: every op's cost and the totals."""

    shape: ModelShape
    workload: Workload
    gpu: GPU
    costs: tuple[OpCost, ...]

    @property
    def time_ms(self) -> float:
        return sum(c.total_ms for c in self.costs)

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

    def by_name(self) -> dict[str, float]:
        """Total ms per op name, backward passes included."""
        totals: dict[str, float] = {}
        for c in self.costs:
            totals[c.op.name] = totals.get(c.op.name, 0.0) + c.total_ms
        return totals


def predict_step(shape: ModelShape, workload: Workload, *, gpu: GPU | str,
                 params: CostParams = SPEC) -> StepCost:
    gpu = _resolve_gpu(gpu)
    ops = model_ops(shape, workload)
    costs = predict_ops(ops, gpu=gpu, dtype=workload.dtype, params=params)
    if workload.overlap_comm:  # hidden behind compute: only the launch stays on the critical path
        costs = [dataclasses.replace(c, time_ms=params.launch_ms, losses=Losses(launch=params.launch_ms))
                 if c.op.kind == COMM else c for c in costs]
    return StepCost(shape, workload, gpu, tuple(costs))


def predict_layer_and_outside(shape: ModelShape, workload: Workload, *, gpu: GPU | str,
                              params: CostParams = SPEC) -> tuple[float, list[OpCost]]:
    """ms of one layer, and the costs of every op outside the layers (embedding, head, loss): a
    model's step is its layers × that layer + those, which is how search and verify count it."""
    from .ops import OUTSIDE_LAYERS

    step = predict_step(shape.one_layer(), workload, gpu=gpu, params=params)
    layer = sum(c.total_ms for c in step.costs if c.op.name not in OUTSIDE_LAYERS)
    return layer, [c for c in step.costs if c.op.name in OUTSIDE_LAYERS]


def predict_attention(*, batch: int, heads: int, kv_heads: int, seq: int, head_dim: int, causal: bool = True,
                      pass_: str = "fwd", gpu: GPU | str, dtype: str = "bf16", params: CostParams = SPEC) -> float:
    """Predicted ms of fused attention (torch's default SDPA kernel): forward, or forward + backward."""
    from .ops import attention_op

    ops = [attention_op("fwd", seqs=batch, heads=heads, kv_heads=kv_heads, q_len=seq, kv_len=seq, head_dim=head_dim,
                        causal=causal, dtype_bytes=DTYPE_BYTES[dtype])]
    if pass_ != "fwd":
        ops.append(attention_op("bwd", seqs=batch, heads=heads, kv_heads=kv_heads, q_len=seq, kv_len=seq,
                                head_dim=head_dim, causal=causal, dtype_bytes=DTYPE_BYTES[dtype]))
    return sum(c.time_ms for c in predict_ops(ops, gpu=gpu, dtype=dtype, params=params))
