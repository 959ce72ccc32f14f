"""The cost model's free parameters (CostParams) and the spec model's values of them (SPEC).

cost.py reads the analytic ones (tiles, ceilings, bandwidths, fused attention, collectives);
corrections.py reads a calibrated profile's tables (residuals, CUTLASS kernels and their chooser).
A profile (profile.py) holds the fields that differ from SPEC.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields

from .errors import ShapewiseError

WINDOW_HEAD_DIMS = (64, 128, 256)  # the head dims of the window factors' buckets
# Head dims that are not multiples of 8 (16 bytes of bf16): cuDNN's attention and torch's memory-efficient kernel
# refuse them, and SDPA runs FlashAttention-2 on copies of q, k and v padded to the next multiple of 8, a slower
# kernel after three copies. Such a call is priced as cuDNN's kernel at its head dim times these factors, by pass
# (decode: one query against a cache, the memory-bound branch), measured on an H100 with torch 2.11 at seven such
# head dims from 36 to 250, each factor the median of measured over priced there over the same ratio at ten head
# dims cuDNN takes (benchmarks/odd_head_dims.py over benchmarks/results/h100-odd-head-dims/).
PADDED_SDPA = {"fwd": 2.92, "bwd": 1.98, "decode": 5.77}
# A sliding window's kernel (FlexAttention, compiled, with a block mask) tiles the score matrix in
# mask blocks of FLEX_MASK rows × FLEX_MASK keys and runs every block the band touches whole. Its
# programs, by head dim (torch's defaults for 16-bit inputs on sm90, the H100 and H200, in its inductor's
# template heuristics for flex attention, CUDAConfigHeuristic): the forward's
# query rows × key columns a step (FLEX_FWD: (64, 128, 256) → (128, 128), (128, 64), (64, 32); other
# head dims up to 256 (128, 64)); the backward's (FLEX_BWD) key rows of a dK/dV program × the query
# rows it walks a step, and query rows of a dQ program × the keys it walks a step, by head dim under
# 64, up to 128, and up to 256. A dK/dV program walks every query head of its key head's group.
FLEX_MASK = 128
FLEX_FWD = {64: (128, 128), 128: (128, 64), 256: (64, 32)}
FLEX_FWD_OTHER = (128, 64)
FLEX_BWD = ((64, 64, 64, 64), (128, 64, 128, 64), (64, 64, 64, 64))
# Decoding attention's kernel (CostParams.flash_decode_*): the widths of its tiles, a block's query
# rows and the keys of one step (the H200's kernel names: 16x128x64, 16x128x128, 16x128x256). A call
# of at most half as many blocks as SMs, over a cache of DECODE_SPLIT_STEPS steps or more, splits the
# cache into the most parts, a power of two, that keep its blocks under DECODE_SPLIT_BLOCKS an SM
# (and each part a step at least), then reduces them (cuDNN's lean_reduction kernel): the grids of 30
# calls on an H200 (benchmarks/archive/decode_grid_probe.py) follow this rule, all 30, from 1 to 32
# parts; 66 blocks split in two, 70 ran whole, 4 steps whole, 5 in four parts.
DECODE_TILES = (64, 128, 256)
DECODE_ROWS = 16
DECODE_KEYS = 128
DECODE_SPLIT_STEPS = 5
DECODE_SPLIT_BLOCKS = 2
# Blocks an SM holds at once, by tile: two, as the split's grid is sized, up to 128 wide; one at 256,
# whose block is two thread blocks (each half of the head dim: grids of 2 × blocks). On the H200's
# calibration (its 184 decoding calls) this fits within 0.5% of the best of 1-3 × 1-2 × 1-2, (3, 2, 1)
# (benchmarks/decode_choices.py).
DECODE_OCCUPANCY = (2, 2, 1)
DECODE_OVERLAP = 3  # cost.decode_busy_ms
# A weight of 705-1056 columns read by 1-3 rows (a decoding step's projection at a tensor-parallel
# shard of 768, 896 or 1024): cuBLAS on the H200 runs its nvjet 8x64 kernel, n / 8 blocks clustered
# along k, four ways up to 960 columns and two ways past (to 1056, where the blocks fill its 132 SMs;
# past that it runs 16-row tiles). Each block walks k / ways serially, a latency-bound loop (5 MB in
# 12 µs is 0.4 TB/s) that no tile, wave or bandwidth term prices (CostParams.walk_*); under 705 columns,
# fewer blocks walk faster than that line. Every aligned `nt` call of 1-3 rows in these bands with k up
# to WALK_MAX_K measured on H200s ran it; longer k ran split-K kernels with a separate reduction
# (benchmarks/one_row_walk.py). An H100, with the same cuBLAS, ran 57 of 60 such calls on its 64x8
# kernel instead, so the walk is the H200 profile's own and never borrowed. Each band: (columns over,
# up to, ways).
WALK_BANDS = ((704, 960, 4), (960, 1056, 2))
WALK_ROWS = 3
WALK_MAX_K = 2560
# A GEMM of this many rows or columns or fewer streams its weights: `calibrate --quick` times such GEMMs
# as a family of their own (CostParams.machine_stream).
STREAM_ROWS = 16


# Scalars that may take either sign: the chooser's logit weights, the trees' base (a log ratio) and
# the time a machine's host adds to each call (less on a faster host). Every other one is a time, a
# rate, a fraction or a count, and negative would make no sense of it.
SIGNED = {"cutlass_chooser_vote", "cutlass_chooser_sharpness", "gemm_tree_base", "machine_launch_ms"}
# Scalars that must be over 0: the bytes of a fill or a ramp, which the cost model divides by, a cut
# mask block's cost in whole ones (0 would price a window's edges free), a machine's time factors
# (0 would price an op family free), the rates and fractions of peak or bandwidth a time is divided by,
# and the rows of a block or a K slice.
POSITIVE = {"memory_ramp_mb", "memory_fill_mb", "memory_op_fill_mb", "flash_memory_fill_mb", "flash_window_partial",
            "machine_gemm", "machine_bmm", "machine_flash", "machine_memory", "machine_stream",
            "gemm_ceiling", "gemm_bandwidth", "gemv_bandwidth", "flash_memory_bandwidth", "flash_memory_bandwidth_wide",
            "comm_bandwidth", "min_split_k", "flash_block_q", "flash_block_bwd"}
# Lists of rates a time is divided by: each over 0 (bandwidth's by family, the second of each pair).
RATE_LISTS = {"tile_rates", "flash_fwd", "flash_bwd", "flash_window_fwd", "flash_window_bwd", "bandwidth"}


def scalar_problem(name: str, value) -> str:
    """What is wrong with the value of CostParams' scalar `name`, or "" (a profile's reader and
    CostParams itself say it, each where it was given)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"{name} must be a number, got {str(value)[:40]}"
    if not math.isfinite(value) or (value < 0 and name not in SIGNED):
        return f"{name} is {value}; it must be a finite number, 0 or more"
    if name in POSITIVE and not value > 0:
        return f"{name} is {value}; it must be over 0 (a rate, a fill's or a ramp's bytes, a block's rows, a " \
               "machine's time factor)"
    return ""


@dataclass(frozen=True)
class CostParams:
    """The cost model's free parameters. The defaults are the spec-only model: the GEMM parameters were
    fitted by benchmarks/archive/fit_probe.py to the H200 run in benchmarks/results/h200-probe.csv, the others
    read off the same run (benchmarks/RESULTS.md). A calibrated profile replaces them for its own GPU.
    Each scalar and each rate is checked where the params are built (CostParams(gemm_bandwidth=0) is
    refused in one line, as a profile holding it is); the tables are checked where a profile is read."""

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
        # The embedding backward's zeroing of its table (cost.memory_parts): a memset, taken as a copy.
        ("embed.table", 0.88),
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
    # A memory-bound kernel's stream takes a while to reach its rate: over its first memory_op_fill_mb
    # it costs up to memory_op_fill_ms more (by family, a share of it for a smaller call), so that a
    # one-row call pays only its launch. Without it the H200's fit put the fixed time of an add or an
    # activation at 4.6 µs to serve calls of 0.1-2 MB, and their one-row calls (4.2-4.3 µs measured)
    # came out 5-6% slow (benchmarks/RESULTS.md). A calibration fits both; the spec model has none.
    memory_op_fill_ms: tuple[tuple[str, float], ...] = ()
    memory_op_fill_mb: float = 0.5
    # Memory-bound GEMMs start slower than bandwidth allows (DRAM ramp, few tiles in flight): a delay
    # that grows with the bytes moved up to memory_ramp_mb, then stays.
    memory_latency_ms: float = 0.0045
    memory_ramp_mb: float = 17.9106
    # And a longer fill, over memory_fill_mb: a stream of weights past a few rows climbs from
    # 1.2-1.6 TB/s at 10-30 MB to 4.1-4.2 TB/s past a gigabyte on an H200 (benchmarks/results/h200-streams/),
    # which one short ramp and one bandwidth cannot both follow (0: none, the spec model).
    memory_fill_ms: float = 0.0
    memory_fill_mb: float = 100.0
    # A GEMM with a side of 1 is a matrix-vector product: cuBLAS runs gemv kernels (or a dot product)
    # that stream the operands once and never pad a side to a tile: bytes at this fraction of the
    # datasheet bandwidth, a ramp of gemv_latency_ms over the first memory_ramp_mb, a fixed time, and
    # a slowdown where a leading dim is not 16-byte aligned. Read off the H200's edge draws
    # (benchmarks/results/h200-edges/): aligned weight streaming reached 4.2-4.4 TB/s on gigabytes,
    # the misaligned ones about 2.5, every call at least 5-6 µs; a calibration fits them.
    gemv_bandwidth: float = 0.88
    gemv_latency_ms: float = 0.01
    gemv_misaligned: float = 1.6
    gemv_fixed_ms: float = 0.0058
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
    # The backward's blocks are key rows, each walking the query blocks (flash_block_bwd rows a step)
    # that attend to it: flash_blocks_bwd holds their rows by head-dim bucket (flash_buckets; empty:
    # flash_block_bwd, square). The kernels tile the backward by head dim (the H200 fit chose 128 key
    # rows a block up to d=128 and 64 past it, with 64 query rows a step), which tells on few blocks:
    # on the H200 the backwards of 1-8 sequences × heads came out 20-37% fast at d <= 128 and 10-35%
    # slow at d=192 and 256 with square blocks of 64 (calibrate --heads 1 and 2, benchmarks/RESULTS.md),
    # and square blocks of 128 put short sequences' many-block calls up to 25% slow (whole blocks
    # on the diagonal). fit.fit_flash chooses each bucket's.
    flash_blocks_bwd: tuple[int, ...] = ()
    # Decoding's attention (a query token against the cache) runs cuDNN's flash forward kernel (on the
    # H200, benchmarks/archive/decode_probe.py): a block of DECODE_ROWS query rows, a key head's group
    # of query heads packed as its rows, walks the cache DECODE_KEYS keys a step, in a tile 64, 128 or
    # 256 wide (DECODE_TILES, the head dim rounded up; the widest loads whole rows of it). Few blocks
    # (at most half the SMs) split the cache among the SMs and reduce the parts after (cuDNN's
    # lean_reduction kernel), where the cache is DECODE_SPLIT_STEPS steps or longer. The call streams
    # its bytes (at flash_memory_bandwidth up to tile 128, flash_memory_bandwidth_wide at 256, after a
    # slower fill: flash_memory_fill_ms over the first flash_memory_fill_mb) while the busiest SM
    # walks its blocks, DECODE_OCCUPANCY at a time, a step each flash_decode_step_ms (by tile); the
    # two overlap in part (cost.decode_busy_ms). A fixed time by tile, and flash_decode_split_ms more
    # for a split. The spec model: the memory-bound GEMMs' bandwidth and fixed time, no fill, no walk.
    flash_memory_bandwidth: float = 0.8045
    flash_memory_bandwidth_wide: float = 0.8045
    flash_memory_fill_ms: float = 0.0
    flash_memory_fill_mb: float = 50.0
    flash_decode_fixed_ms: tuple[float, float, float] = (0.0056, 0.0056, 0.0056)
    flash_decode_split_ms: float = 0.0
    flash_decode_step_ms: tuple[float, float, float] = (0.0, 0.0, 0.0)
    # Sliding-window attention's kernel (FlexAttention with a window block mask, compiled), its own
    # programs (cost._flex_work) at cuDNN's efficiency for the head dim, against which its rate is
    # this factor, forward and backward, by head dim up to 64, 128 and 256 (WINDOW_HEAD_DIMS): the
    # spec model assumes the same rate; a calibration measures it (on the H200, the designed set's
    # 24 window calls: forward 1.2-2.1x, backward 1.0-2.0x, slowest at head dim 256).
    flash_window_fwd: tuple[float, float, float] = (1.0, 1.0, 1.0)
    flash_window_bwd: tuple[float, float, float] = (1.0, 1.0, 1.0)
    # A mask block the band cuts (on the diagonal, at the window's far edge) runs the mask on every
    # pair: its cost in whole blocks (cost._flex_work). The spec model: 1; a calibration fits it with
    # the factors above (fit.fit_flash_window).
    flash_window_partial: float = 1.0
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
    # What a calibration's GEMMs and BMMs leave over after everything else, learnt as gradient-boosted
    # trees (trees.py) of corrections.TREE_FEATURES (the dims, their alignment, the layout, and the time
    # and rate predicted before): one row per tree, ln(measured / predicted) its leaves' sum plus
    # gemm_tree_base. A profile with trees has no residual table: the trees replace it (they carried
    # over to shapes the calibration never drew, where the table's neighbours were few and far).
    gemm_trees: tuple[tuple[float, ...], ...] = ()
    gemm_tree_base: float = 0.0
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
    # calibration shape's for 75% and 68% (benchmarks/archive/kernel_model.py).
    cutlass_chooser: tuple[tuple[float, ...], ...] = ()
    cutlass_chooser_sharpness: float = 0.0
    cutlass_chooser_vote: float = 0.0
    # This machine against the one its profile was fitted on, by op family: a time factor fitted by
    # `calibrate --quick` (calibrate.machine_factors). GPUs of one model differ by a few percent in
    # clocks and memory (benchmarks/RESULTS.md: the same GEMMs on two H200s, 2.3% apart).
    machine_gemm: float = 1.0
    machine_bmm: float = 1.0
    # The power cap within one call. An H200 at its burst clock draws more than its 700 W on a GEMM near
    # peak rate, and the clock falls a few milliseconds into the call: real models' GEMMs of 4-8 ms ran
    # 7% slower than priced, those over 8 ms 9% (benchmarks/RESULTS.md). Past power_onset_ms, a GEMM's
    # time grows by power_slowdown times its fraction of peak rate (fit.fit_power); 0: no such term.
    power_onset_ms: float = 0.0
    power_slowdown: float = 0.0
    machine_flash: float = 1.0
    machine_memory: float = 1.0  # a memory-bound op's streaming part only (its launch is machine_launch_ms's)
    # A GEMM of STREAM_ROWS rows or columns or fewer (a decoding step's, an expert's few tokens) streams its
    # weights: bound by memory, it runs at this machine's rate of streaming them, not of multiplying (an
    # H100 pricing with the H200's profile: such GEMMs 1.4-7.2% fast, the others within 0.3%).
    machine_stream: float = 1.0
    # Every call's time beyond the profile's on this machine, fitted on calls of a few microseconds: the
    # host and driver launch each kernel (an H100's took 6% longer on calls under 8 µs than the H200 the
    # profile was fitted on; benchmarks/RESULTS.md, "an H100 measured").
    machine_launch_ms: float = 0.0
    # The one-row walk's time (WALK_*): a fixed part and a part per element of k each block walks; the
    # H200's profile holds it (benchmarks/one_row_walk.py --write), 0: none (the spec model, other GPUs).
    walk_fixed_ms: float = 0.0
    walk_per_k_ms: float = 0.0

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in RATE_LISTS:
                rates = [v[1] if isinstance(v, tuple) and len(v) == 2 else v for v in value] \
                    if isinstance(value, tuple) else [value]
                problem = next((f"{f.name} holds {r!r}; each rate must be a finite number over 0" for r in rates
                                if isinstance(r, bool) or not isinstance(r, numbers.Real) or not math.isfinite(r)
                                or r <= 0), "")
            elif f.name not in _SCALARS:
                continue  # a table or a list of tiles and splits: checked where a profile is read
            elif f.type == "int" and isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
                problem = f"{f.name} must be a whole number, got {value!r}"  # rows of a block, as a profile's are
            else:
                problem = scalar_problem(f.name, value)
            if problem:
                raise ShapewiseError(f"CostParams: {problem}")


_SCALARS = {f.name for f in fields(CostParams) if f.type in ("float", "int")}  # (annotations are text here)
SPEC = CostParams()
