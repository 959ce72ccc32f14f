"""Fitting the cost model to measurements: the parameters of CostParams, then the residual table.

GEMM parameters are fitted by coordinate descent on the mean absolute log error (robust to the odd
noisy measurement, and scale-free across microseconds and tens of milliseconds); fused attention and
the memory-bound kernel families have closed-form fits. Everything here is numpy only.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from .corrections import (
    CUTLASS_FAMILIES,
    KERNEL_COLUMNS,
    choice_groups,
    chooser_features,
    cutlass_terms,
    kernel_ranges,
    kernel_times,
    neighbour_sums,
    tree_features,
    within_range,
)
from .cost import (
    LAYOUTS,
    SMALL_INDEX,
    _flash_cost,
    align_classes,
    decode_busy_ms,
    decode_terms,
    flash_block_bwd,
    memory_fill_share,
    memory_parts,
    power_capped_ms,
    predict_gemm,
    window_bucket,
)
from .errors import ShapewiseError
from .hardware import GPU
from .ops import FLASH, MEMORY, Op
from .params import DECODE_OVERLAP, SPEC, CostParams
from .profile import CostModel
from .trees import fit_forest

# Where the fit starts: first guesses from the datasheet and DESIGN's H200 notes. Starting from a
# fixed point (not the current defaults) makes the fit reproducible.
START = dataclasses.replace(SPEC, gemm_ceiling=0.78, k_overhead=64.0, misaligned_even=2.7, gemm_bandwidth=0.89,
                            launch_ms=0.005, memory_latency_ms=0.005, memory_ramp_mb=16.0, memory_fill_ms=0.008,
                            memory_fill_mb=80.0,
                            misaligned_even_memory=1.0, misaligned_odd_memory=1.0, wave_credit=0.5,
                            tile_rates=(1.0, 1.0, 0.92, 0.80, 0.80, 0.60, 0.4, 0.4, 0.25), gemm_residuals=())
GEMM_SCALARS = ("gemm_ceiling", "k_overhead", "misaligned_even", "gemm_bandwidth", "launch_ms",
                "memory_latency_ms", "memory_ramp_mb", "memory_fill_ms", "memory_fill_mb", "misaligned_even_memory",
                "misaligned_odd_memory", "wave_credit", "gemv_bandwidth", "gemv_latency_ms", "gemv_misaligned", "gemv_fixed_ms")
FRACTIONS = ("wave_credit",)  # parameters between 0 and 1
PER_ROW = ("embed",)  # families whose few-row calls cost by the row (cost.SMALL_INDEX)


@dataclass(frozen=True)
class GemmSamples:
    """Measured GEMMs/BMMs as arrays: dims, layout and median time in ms."""

    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    batch: np.ndarray
    layout: np.ndarray
    time_ms: np.ndarray

    @classmethod
    def from_rows(cls, rows: list[dict]) -> "GemmSamples":
        col = lambda key, dtype=np.int64: np.array([r[key] for r in rows], dtype=dtype)  # noqa: E731
        return cls(col("m"), col("n"), col("k"), col("batch"), col("layout", object).astype(str),
                   col("time_ms", float))

    def __len__(self) -> int:
        return len(self.m)

    def subset(self, mask: np.ndarray) -> GemmSamples:
        return GemmSamples(*(getattr(self, f.name)[mask] for f in dataclasses.fields(self)))

    def log_error(self, params: CostParams, gpu: GPU, dtype: str) -> np.ndarray:
        pred = predict_gemm(self.m, self.n, self.k, batch=self.batch, layout=self.layout, gpu=CostModel(gpu, params),
                            dtype=dtype)
        return np.log(np.asarray(pred.time_ms) / self.time_ms)


def _get(params: CostParams, name: str) -> float:
    if name == "big_tiles":  # the largest tiles' rate against the others (see _set)
        return params.gemm_ceiling
    if name.endswith("]"):  # an entry of a tuple: tile_rates[2]
        field, index = name[:-1].split("[")
        return getattr(params, field)[int(index)]
    return getattr(params, name)


def _set(params: CostParams, name: str, value: float) -> CostParams:
    if name == "big_tiles":
        # The ceiling moves and the smaller tiles' relative rates move the other way, so that only the
        # largest tiles' speed changes: the ceiling and the tile rates are otherwise nearly degenerate.
        scale = params.gemm_ceiling / value
        rates = params.tile_rates[:2] + tuple(min(1.0, r * scale) for r in params.tile_rates[2:])
        return dataclasses.replace(params, gemm_ceiling=value, tile_rates=rates)
    if name.endswith("]"):
        field, index = name[:-1].split("[")
        values = list(getattr(params, field))
        values[int(index)] = min(1.0, value) if field == "tile_rates" else value  # no tile beats the largest
        return dataclasses.replace(params, **{field: tuple(values)})
    return dataclasses.replace(params, **{name: value})


def fit_gemm(samples: GemmSamples, *, gpu: GPU, dtype: str = "bf16", start: CostParams = START,
             rounds: int = 8) -> tuple[CostParams, list[float]]:
    """Coordinate descent over the GEMM parameters; returns the params and the loss after each round."""
    names = list(GEMM_SCALARS) + [f"tile_rates[{i}]" for i in range(2, len(start.tile_rates))] + ["big_tiles"]
    params = dataclasses.replace(start, gemm_residuals=())
    best = float(np.mean(np.abs(samples.log_error(params, gpu, dtype))))
    history, step = [], 0.2
    for _ in range(rounds):
        for name in names:
            value = _get(params, name)
            if name in FRACTIONS:  # steps of the fraction itself, so that 0 and 1 are within reach
                trials = [min(max(value + d, 0.0), 1.0) for d in (step, -step, step / 4, -step / 4)]
            else:
                trials = [value * f for f in (1 + step, 1 / (1 + step), 1 + step / 4, 1 / (1 + step / 4))]
            for value in trials:
                trial = _set(params, name, value)
                loss = float(np.mean(np.abs(samples.log_error(trial, gpu, dtype))))
                if loss < best:
                    params, best = trial, loss
        step /= 2
        history.append(best)
    return params, history


# fit_power's grid: where the power cap sets in (ms into a call) and how much slower a call at peak rate
# runs past it; only calls long enough to tell (POWER_MIN_MS measured) weigh in.
POWER_ONSETS = tuple(np.arange(0.5, 8.01, 0.25))
POWER_SLOWDOWNS = tuple(np.arange(0.0, 0.401, 0.005))
POWER_MIN_MS = 0.5
# Only calls priced at this fraction of peak rate or more weigh in: the term moves the others little
# whatever its onset, and their errors (far more of them) held the onset late. Fitted on the H200's
# calibration: 3.75 ms onset over every call, 2.75 ms over these; real models' GEMMs (the models sets
# of seeds 4-10) were best priced with 1.75 ms (benchmarks/RESULTS.md).
POWER_MIN_BUSY = 0.6
POWER_MIN_GAIN = 0.002  # what the term must take off the score (fit_power) to be kept: not noise fitted


def fit_power(samples: GemmSamples, params: CostParams, *, gpu: GPU, dtype: str = "bf16") -> CostParams:
    """params.power_onset_ms and power_slowdown: the pair of the grid whose predictions of the calls of
    POWER_MIN_MS or more, priced at POWER_MIN_BUSY of peak rate or more, have the least median |log
    error| within each octave of measured time, averaged over the octaves (so that the few long calls
    weigh as much as the many short ones); none where it gains less than POWER_MIN_GAIN over no term."""
    bare = dataclasses.replace(params, power_slowdown=0.0)
    long = samples.subset(samples.time_ms >= POWER_MIN_MS)
    if len(long) == 0:
        return bare
    predicted = predict_gemm(long.m, long.n, long.k, batch=long.batch, layout=long.layout, gpu=CostModel(gpu, bare),
                             dtype=dtype)
    busy = np.clip(np.asarray(predicted.fraction_of_peak), 0.0, 1.0)  # as cost._gemm_arrays weighs it
    near = busy >= POWER_MIN_BUSY
    if not near.any():
        return bare
    long, pred, busy = long.subset(near), np.asarray(predicted.time_ms)[near], busy[near]
    octave = np.floor(np.log2(long.time_ms / POWER_MIN_MS)).astype(int)

    def score(onset: float, slowdown: float) -> float:
        error = np.abs(np.log((pred + power_capped_ms(pred, busy, onset, slowdown)) / long.time_ms))
        return float(np.mean([np.median(error[octave == o]) for o in np.unique(octave)]))

    onset, slowdown = min(((o, s) for o in POWER_ONSETS for s in POWER_SLOWDOWNS), key=lambda pair: score(*pair))
    if score(onset, slowdown) > score(0.0, 0.0) - POWER_MIN_GAIN:
        return bare
    return dataclasses.replace(params, power_onset_ms=round(float(onset), 4), power_slowdown=round(float(slowdown), 4))


def residual_rows(samples: GemmSamples, params: CostParams, *, gpu: GPU, dtype: str = "bf16") -> tuple:
    """The residual table of a profile: each calibration GEMM's place and ln(measured / predicted)."""
    base = dataclasses.replace(params, gemm_residuals=(), gemm_trees=())
    err = -samples.log_error(base, gpu, dtype)
    class_a, class_n = align_classes(samples.m, samples.n, samples.k, samples.layout, dtype, gpu.align_bytes)
    layout_index = np.searchsorted(np.array(LAYOUTS), samples.layout)
    logs = [np.log2(x.astype(float)) for x in (samples.m, samples.n, samples.k, samples.batch)]
    return tuple((int(layout_index[i]), int(class_a[i]), int(class_n[i]), *(round(float(v[i]), 4) for v in logs),
                  round(float(err[i]), 5)) for i in range(len(samples)))


def fit_trees(samples: GemmSamples, params: CostParams, *, gpu: GPU, dtype: str = "bf16", trees: int | None = None,
              rate: float | None = None) -> CostParams:
    """The profile's trees (CostParams.gemm_trees) fitted to what the calibration GEMMs leave over after
    the rest of `params` (its residual table and trees left out): ln(measured / predicted)."""
    bare = dataclasses.replace(params, gemm_residuals=(), gemm_trees=(), gemm_tree_base=0.0)
    predicted = np.asarray(predict_gemm(samples.m, samples.n, samples.k, batch=samples.batch, layout=samples.layout,
                                        gpu=CostModel(gpu, bare), dtype=dtype).time_ms)
    layout_index = np.searchsorted(np.array(LAYOUTS), samples.layout)
    features = tree_features(samples.m, samples.n, samples.k, samples.batch, layout_index, predicted)
    forest = fit_forest(features, np.log(samples.time_ms / predicted), trees=trees or TREES, rate=rate or TREE_RATE)
    return dataclasses.replace(bare, gemm_trees=forest.rows(), gemm_tree_base=forest.base)


# The trees' count and learning rate, chosen on the H200's calibration GEMMs against the held-out
# designed sets and the wide and models sets of earlier seeds (benchmarks/RESULTS.md, "the GEMMs'
# corrections learnt as trees"): 100 trees at 0.2 came within 0.1 point of 300 at 0.1, at a third of
# the time a prediction takes.
TREES, TREE_RATE = 100, 0.2


def residual_kernel(samples: GemmSamples, params: CostParams, *, gpu: GPU, dtype: str = "bf16",
                    folds: int = 5, seed: int = 0) -> tuple[float, float]:
    """The residual table's kernel width (octaves) and prior weight, chosen by cross-validation on the
    calibration GEMMs themselves: each fold predicted from the others' residuals, least mean |log error|."""
    table = np.array(residual_rows(samples, params, gpu=gpu, dtype=dtype))
    fold = np.random.default_rng(seed).integers(0, folds, len(samples))
    best = None
    for octaves in (0.75, 1.0, 1.5):
        for prior in (0.1, 0.5, 2.0):
            errors = []
            for f in range(folds):
                held = fold == f
                trial = dataclasses.replace(params, gemm_residuals=tuple(map(tuple, table[~held])),
                                            residual_octaves=octaves, residual_prior=prior)
                errors.append(np.abs(samples.subset(held).log_error(trial, gpu, dtype)))
            err = float(np.mean(np.concatenate(errors)))
            if best is None or err < best[0]:
                best = (err, octaves, prior)
    return best[1], best[2]


FLASH_BLOCKS_BWD = (32, 64, 128)  # the backward's block rows a fit tries
# A fitted efficiency (a fraction of a datasheet rate) is kept to four significant digits and at least
# this: a slow device (the CPU, a loaded machine) runs at a tiny fraction of the GPU's datasheet, which
# rounding to four decimals made zero, and the next prediction then divided by it.
MIN_EFFICIENCY = 1e-6


def efficiency(value: float) -> float:
    """A fitted fraction of a datasheet rate, as a profile keeps it: four significant digits, never
    below MIN_EFFICIENCY (so never zero)."""
    return max(float(f"{value:.4g}"), MIN_EFFICIENCY)


def fit_flash(samples: list[dict], *, gpu: GPU, dtype: str, params: CostParams) -> CostParams:
    """Efficiency per head-dim bucket, per-block overhead and fixed latency, for each pass, and the
    backward's block rows per bucket.

    samples: dicts with batch (sequences × query heads), seq, head_dim, pass ("fwd" or "bwd"), groups
    (query heads per key head; 1 when absent), time_ms (a backward's own time: forward+backward minus
    forward). Overhead and latency are searched on a grid; for each choice every bucket's efficiency
    (and a backward's block, of FLASH_BLOCKS_BWD) has a closed form (the median of what its rows show,
    head dims padded to the bucket included; the block whose rows fit best), and the choice with the
    least mean absolute log error wins. A bucket without rows keeps its efficiency and block."""
    updates = {}
    edges = np.array(params.flash_buckets)
    for pass_ in ("fwd", "bwd"):
        rows = [r for r in samples if r["pass"] == pass_ and r["head_dim"] <= params.flash_buckets[-1]]
        if not rows:
            continue
        ops = [_attention_op(r, pass_, dtype) for r in rows]
        measured = np.array([r["time_ms"] for r in rows])
        buckets = edges[np.searchsorted(edges, [r["head_dim"] for r in rows])]
        masks = {int(b): buckets == b for b in sorted(set(buckets))}
        blocks = FLASH_BLOCKS_BWD if pass_ == "bwd" else (params.flash_block_q,)
        best = None
        for overhead in np.arange(0.0, 8.01, 0.25):
            work_ms, moved_ms = {}, {}
            for block in blocks:
                unit = dataclasses.replace(params, flash_fwd=(1.0,) * len(edges), flash_bwd=(1.0,) * len(edges),
                                           flash_overhead_fwd=overhead, flash_overhead_bwd=overhead,
                                           flash_latency_fwd_ms=0.0, flash_latency_bwd_ms=0.0, launch_ms=0.0,
                                           flash_blocks_bwd=(block,) * len(edges))
                # at efficiency 1; a grouped backward's sum over its group (memory) is not scaled by it
                costs = [_flash_cost(op, gpu, dtype, unit) for op in ops]
                moved_ms[block] = np.array([losses.memory for _, losses in costs])
                work_ms[block] = np.array([ms for ms, _ in costs]) - moved_ms[block]
            for latency in np.arange(0.004, 0.0301, 0.001):
                err, chosen = 0.0, {}
                for b, mask in masks.items():
                    fits = []
                    for block in blocks:
                        work, moved, time = work_ms[block][mask], moved_ms[block][mask], measured[mask]
                        eff = float(np.exp(np.median(np.log(work / np.maximum(time - latency - moved, 1e-6)))))
                        fits.append((float(np.abs(np.log((work / eff + moved + latency) / time)).sum()), eff, block))
                    bucket_err, eff, block = min(fits)
                    err += bucket_err
                    chosen[b] = (eff, block)
                if best is None or err < best[0]:
                    best = (err, overhead, latency, chosen)
        _, overhead, latency, chosen = best
        old = dict(zip(params.flash_buckets, getattr(params, f"flash_{pass_}")))
        updates[f"flash_{pass_}"] = tuple(efficiency(chosen[b][0]) if b in chosen else old[b] for b in params.flash_buckets)
        if pass_ == "bwd":
            updates["flash_blocks_bwd"] = tuple(int(chosen[b][1]) if b in chosen else flash_block_bwd(params, b)
                                                for b in params.flash_buckets)
        updates[f"flash_overhead_{pass_}"] = float(overhead)
        updates[f"flash_latency_{pass_}_ms"] = round(float(latency), 4)
    return dataclasses.replace(params, **updates)


def _attention_op(r: dict, pass_: str, dtype: str) -> Op:
    from .ops import attention_op
    from .shapes import DTYPE_BYTES

    return attention_op(pass_, seqs=1, heads=r["batch"], kv_heads=r["batch"] // r.get("groups", 1), q_len=r["seq"],
                        kv_len=r["seq"], head_dim=r["head_dim"], causal=True, dtype_bytes=DTYPE_BYTES[dtype])


MEMORY_FILLS_MB = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0)  # the fills fit_bandwidth chooses among


def fit_bandwidth(samples: list[dict], *, gpu: GPU, params: CostParams, max_small_bytes: float = 1e6) -> CostParams:
    """Per kernel family and pass, one least-squares line through all its calls (on relative error,
    so that a few microseconds count as much as a few milliseconds; no term negative): a fixed time
    per call, where the calls have rows of several widths a cost per element of a row (one row's
    reduction: the norms), for the embedding's gather (PER_ROW), whose few-row kernel walks its
    rows one by one, a cost per row up to SMALL_INDEX rows, the fill of its stream (a time paid in
    full past the fill's bytes, in part below: cost.memory_fill_share), and the bytes over a fraction
    of the datasheet bandwidth (two fractions where the op moves bytes at two rates:
    cost.memory_parts). Without calls of at most `max_small_bytes` the fixed time is one launch and
    there is no fill. The fill's bytes, one for all families, are those of MEMORY_FILLS_MB whose
    lines leave the least squared relative error over all calls.

    All calls in one fit: fitting the fixed time on the few-row calls and the bandwidth on the largest
    apart put the norms of 1 to 8 thousand rows (most of a model's) 10-40% off on the H200, both
    ways, since a row's reduction, all of a one-row call, hides behind the stream in a large one.

    samples: dicts with family, pass ("fwd"/"bwd"), bytes, time_ms, width (a row's elements), rows
    and table (the embedding's table rows)."""
    best = None
    for fill_mb in MEMORY_FILLS_MB:
        fitted, error = _fit_memory_lines(samples, gpu=gpu, params=dataclasses.replace(params, memory_op_fill_mb=fill_mb),
                                          max_small_bytes=max_small_bytes)
        if best is None or error < best[0] * (1 - 1e-9):
            best = (error, fitted)
    return best[1] if best else params


def _fit_memory_lines(samples: list[dict], *, gpu: GPU, params: CostParams, max_small_bytes: float) -> tuple[CostParams, float]:
    """fit_bandwidth's lines at params' fill bytes, and the squared relative error they leave."""
    table, fixed = dict(params.bandwidth), dict(params.memory_fixed_ms)
    per_width, per_row = dict(params.memory_fixed_per_width_ms), dict(params.memory_fixed_per_row_ms)
    fills = dict(params.memory_op_fill_ms)
    error = 0.0
    for family, pass_ in sorted({(r["family"], r["pass"]) for r in samples}):
        key = family + ("" if pass_ == "fwd" else ".bwd")
        rows = [r for r in samples if (r["family"], r["pass"]) == (family, pass_)]
        time = np.array([r["time_ms"] for r in rows])
        parts = [memory_parts(Op(family, pass_, MEMORY, count=1, flops=0, bytes=int(r["bytes"]), m=r.get("rows", 0),
                                 n=r.get("width", 0), k=r.get("table", 0), family=family), key) for r in rows]
        names = list(parts[0])
        columns = {name: np.array([p[name] for p in parts]) / gpu.bytes_per_s * 1e3 for name in names}
        nbytes = np.array([float(r["bytes"]) for r in rows])
        small = nbytes <= max_small_bytes
        widths = np.array([float(r.get("width", 0)) for r in rows])
        counts = np.array([float(r.get("rows", 0)) for r in rows])
        few = counts <= SMALL_INDEX
        if small.any():
            columns["fixed"] = np.ones_like(time)
            if key in PER_ROW and len(set(counts[few & small])) > 1:
                columns["per row"] = np.where(few, counts, 0.0)
            elif len(set(widths[small])) > 1:
                columns["per width"] = widths
            columns["fill"] = memory_fill_share(nbytes, params)
            rest = time
        else:
            rest = time - params.launch_ms
        if len(rows) < len(columns):
            continue  # too few calls to tell the terms apart: the parameters stay as they were
        names = list(columns)
        design = np.stack([columns[n] for n in names], axis=1) / time[:, None]
        coef = nonnegative_lstsq(design, rest / time)
        error += float(np.sum((design @ coef - rest / time) ** 2))
        found = dict(zip(names, coef))
        for name in parts[0]:
            if found[name] > 0:
                table[name] = efficiency(min(1.0, 1 / found[name]))
        if small.any():
            fixed[key] = round(float(found["fixed"]), 5)
            for where, term in ((per_width, "per width"), (per_row, "per row"), (fills, "fill")):
                if found.get(term, 0.0) > 0:
                    where[key] = float(f"{found[term]:.4g}")
                else:
                    where.pop(key, None)
    return dataclasses.replace(params, bandwidth=tuple(table.items()), memory_fixed_ms=tuple(sorted(fixed.items())),
                               memory_fixed_per_width_ms=tuple(sorted(per_width.items())),
                               memory_fixed_per_row_ms=tuple(sorted(per_row.items())),
                               memory_op_fill_ms=tuple(sorted(fills.items()))), error


DECODE_FILLS_MB = (25.0, 50.0, 100.0)  # the fills fit_flash_memory chooses among
# Where its steps' times start (besides the profile's own, where it has them): the sum of the stream
# and the walk has more than one minimum, and one start can stop at another.
DECODE_START_STEPS_MS = (0.0005, 0.001, 0.002, 0.004)


def fit_flash_memory(samples: list[dict], *, gpu: GPU, params: CostParams) -> CostParams:
    """Decoding's attention (cost.decode_parts_ms): per tile a fixed time and a step's time, a split's
    time, the bandwidths up to tile 128 and at 256, and the fill (its time, and its length among
    DECODE_FILLS_MB), by least squares on relative error (Levenberg-Marquardt, none negative). A
    parameter the samples cannot tell (no call of that tile, none split, too few calls) keeps its
    value. samples: dicts with the op's fields batch (sequences × query heads), groups, kv_len,
    head_dim, bytes, and time_ms."""
    if len(samples) < 2:
        return params
    ops = [Op("attn/flash", "fwd", FLASH, count=1, flops=0, bytes=int(r["bytes"]), m=1, n=r["kv_len"], k=r["head_dim"],
              batch=r.get("batch", 1), groups=r.get("groups", 1)) for r in samples]
    terms = [decode_terms(op, gpu) for op in ops]
    measured = np.array([r["time_ms"] for r in samples])
    tile = np.array([t["tile"] for t in terms])
    split = np.array([float(t["split"]) for t in terms])
    narrow, wide, steps = (np.array([t[name] for t in terms]) for name in ("narrow", "wide", "steps"))
    nbytes = np.array([t["fill"] for t in terms])
    ones = np.eye(3)[tile]  # which tile's fixed time and step each call takes
    # x: fixed by tile (3), split, 1/bandwidth narrow, wide, fill, step by tile (3)
    base = [*params.flash_decode_fixed_ms, params.flash_decode_split_ms, 1 / params.flash_memory_bandwidth,
            1 / params.flash_memory_bandwidth_wide, params.flash_memory_fill_ms]
    kept = np.array(base + list(params.flash_decode_step_ms))  # the profile's own values
    starts = [np.array(base + [step] * 3) for step in DECODE_START_STEPS_MS]
    if any(params.flash_decode_step_ms):
        starts.append(np.array(base + [v or DECODE_START_STEPS_MS[1] for v in params.flash_decode_step_ms]))
    lower = np.zeros(len(starts[0]))
    lower[4:6] = 1.0  # no faster than the datasheet's bandwidth
    best = None
    for fill_mb in DECODE_FILLS_MB:
        filled = np.minimum(1.0, nbytes / (fill_mb * 1e6))

        def parts(x):
            stream = narrow * x[4] + wide * x[5] + filled * x[6]
            walk = steps * (ones @ x[7:10])
            return stream, walk, decode_busy_ms(stream, walk)

        def residuals(x):
            return (ones @ x[:3] + split * x[3] + parts(x)[2]) / measured - 1

        def jacobian(x):
            stream, walk, busy = parts(x)
            busy = np.maximum(busy, 1e-12)
            a, b = ((v / busy) ** (DECODE_OVERLAP - 1) for v in (stream, walk))  # d busy / d stream, d walk
            cols = [ones[:, 0], ones[:, 1], ones[:, 2], split, a * narrow, a * wide, a * filled,
                    *(b * steps * ones[:, i] for i in range(3))]
            return np.stack(cols, axis=1) / measured[:, None]

        for start in starts:
            x = _levenberg(residuals, jacobian, np.maximum(start, lower), lower=lower)
            cost = float(np.sum(residuals(x) ** 2))
            if best is None or cost < best[0] * (1 - 1e-9):
                best = (cost, x, fill_mb)
    _, x, fill_mb = best
    told = np.concatenate([ones.any(axis=0), [split.any(), narrow.any(), wide.any(), True], ones.any(axis=0)])
    x = np.where(told, x, kept)
    r5 = lambda v: round(float(v), 6)  # noqa: E731
    return dataclasses.replace(
        params, flash_decode_fixed_ms=tuple(r5(max(v, params.launch_ms)) for v in x[:3]), flash_decode_split_ms=r5(x[3]),
        flash_memory_bandwidth=efficiency(1 / x[4]) if narrow.any() else params.flash_memory_bandwidth,
        flash_memory_bandwidth_wide=efficiency(1 / x[5]) if wide.any() else params.flash_memory_bandwidth_wide,
        flash_memory_fill_ms=r5(x[6]), flash_memory_fill_mb=fill_mb, flash_decode_step_ms=tuple(r5(v) for v in x[7:10]))


def _levenberg(residuals, jacobian, start: np.ndarray, *, lower: np.ndarray, iterations: int = 200) -> np.ndarray:
    """Least squares of residuals(x) over x ≥ lower from start (Levenberg-Marquardt, each step clipped
    at the bounds). A parameter no residual depends on (its Jacobian column all zero) keeps its start."""
    x = start.astype(float).copy()
    r = residuals(x)
    cost, damping = float(r @ r), 1e-3
    for _ in range(iterations):
        jac = jacobian(x)
        free = np.flatnonzero(np.abs(jac).sum(axis=0) > 0)
        j = jac[:, free]
        hess, grad = j.T @ j, j.T @ r
        try:
            step = np.linalg.solve(hess + damping * np.diag(np.diag(hess) + 1e-12), -grad)
        except np.linalg.LinAlgError:
            break
        trial = x.copy()
        trial[free] = np.maximum(x[free] + step, lower[free])
        r_trial = residuals(trial)
        cost_trial = float(r_trial @ r_trial)
        if cost_trial < cost:
            done = cost - cost_trial < 1e-12 * max(cost, 1e-30)
            x, r, cost, damping = trial, r_trial, cost_trial, max(damping / 3, 1e-9)
            if done:
                break
        else:
            damping *= 4
            if damping > 1e9:
                break
    return x


WINDOW_PARTIALS = tuple(1.0 + 0.25 * i for i in range(13))  # fit_flash_window's choices, 1 to 4 whole blocks


def fit_flash_window(samples: list[tuple[Op, float]], *, gpu: GPU, dtype: str, params: CostParams) -> CostParams:
    """Sliding-window attention's kernel (cost._window_cost): the cost of a mask block the band cuts
    (params.flash_window_partial, among WINDOW_PARTIALS) and, at each, the rate against the causal
    kernel per pass and head dim bucket (params.flash_window_*: the geometric mean over its calls of
    the factor that puts the prediction on the measurement); the partial cost whose factors leave the
    least mean |log error|. samples: (op, measured ms) of windowed attention calls; a bucket without
    any keeps its factor, and no samples keep every parameter."""
    samples = [(op, ms) for op, ms in samples if ms and op.window]
    if not samples:
        return params
    best = None
    for partial in WINDOW_PARTIALS:
        fitted = _window_factors(samples, gpu=gpu, dtype=dtype,
                                 params=dataclasses.replace(params, flash_window_partial=partial))
        error = float(np.mean([abs(math.log(_flash_cost(op, gpu, dtype, fitted)[0] / ms)) for op, ms in samples]))
        if best is None or error < best[0] - 1e-12:
            best = (error, fitted)
    return best[1]


def _window_factors(samples: list[tuple[Op, float]], *, gpu: GPU, dtype: str, params: CostParams) -> CostParams:
    """fit_flash_window's factors at params' partial-block cost."""
    update = {}
    for pass_, field in (("fwd", "flash_window_fwd"), ("bwd", "flash_window_bwd")):
        table = list(getattr(params, field))
        once, twice = (dataclasses.replace(params, **{field: (f,) * len(table)}) for f in (1.0, 2.0))
        for bucket in range(len(table)):
            factors = []
            for op, ms in samples:
                if op.pass_ == pass_ and window_bucket(op.k) == bucket:
                    base = _flash_cost(op, gpu, dtype, once)[0]  # the factor scales all but the fixed latency
                    scaled = _flash_cost(op, gpu, dtype, twice)[0] - base
                    if scaled > 0:
                        factors.append(max(1 + (ms - base) / scaled, 0.05))
            if factors:
                table[bucket] = round(float(np.exp(np.mean(np.log(factors)))), 4)
        update[field] = tuple(table)
    return dataclasses.replace(params, **update)


def fit_comm(rows: list[dict], *, gpu: GPU, params: CostParams) -> CostParams:
    """The link's efficiency and the per-collective latency, from `bench comm` rows (op, bytes, world,
    median_ms): a least-squares line through time = share·bytes / (link × efficiency) + fixed, with
    share (k-1)/k of the buffer (twice for an all-reduce), as the cost model prices collectives."""
    from .hardware import link

    peer = link(gpu)
    if peer is None:
        raise ShapewiseError(f"{gpu.name} has no GPU-to-GPU link in the table to fit")
    rows = [r for r in rows if r["world"] > 1]
    if len(rows) < 3:
        raise ShapewiseError("fitting the link needs at least three collective measurements on several ranks")
    share = np.array([(r["world"] - 1) / r["world"] * (2 if r["op"] == "all_reduce" else 1) for r in rows])
    ideal_ms = share * np.array([r["bytes"] for r in rows], float) / (peer[1] * 1e9) * 1e3
    slope, fixed = np.polyfit(ideal_ms, np.array([r["median_ms"] for r in rows], float), 1)
    if slope <= 0:
        raise ShapewiseError("the collective timings do not grow with their size: measure larger messages")
    latency = max(0.0, float(fixed) - params.launch_ms)
    return dataclasses.replace(params, comm_bandwidth=efficiency(float(1 / slope)), comm_latency_ms=round(latency, 5))


# A CUTLASS GEMM kernel's name as cuBLAS's fallback kernels spell it, e.g.
# cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1 or
# cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_nn_align2: the tile is the first AxB.
_CUTLASS_NAME = re.compile(r"cutlass_(75|80)_(wmma_)?tensorop_.*?gemm_\w+?_(\d+)x(\d+)_(?:(\d+)x(\d+)_)?(?:nn|nt|tn)_align\d")
# cuBLAS's Hopper xmma kernels, which it runs for some misaligned batched GEMMs, e.g.
# sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cgasize1x1x1_…: persistent, one tile per SM
# at a time, timed as the CUTLASS kernels are (the tile is rows × cols × K block).
_XMMA_NAME = re.compile(r"sm90_xmma_gemm_\w*?_tilesize(\d+)x(\d+)x(\d+)_")
XMMA = CUTLASS_FAMILIES.index("Hopper xmma")
# cuBLAS's few-row SIMT kernels, e.g. gemmSN_NN_kernel<float, 256, 4, 2, 8, 4, 4, …> and
# gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, …> (threads, then threads per output column): a block
# takes threads / that many of torch's n and a few of its m over all of K, its grid ⌈n / cols⌉ ×
# ⌈m / rows⌉. How many rows cuBLAS gives a block depends on m; the recorded grids on the H200 (m 2 to
# 16) are met best by 5 (NN) and 10 (TN). MAGMA's sgemmEx kernel (a K of 16 or less) takes 64 of n and
# all of m up to 16.
_FEW_ROW_NAME = re.compile(r"gemmSN_(NN|TN)_kernel\w*<float, (\d+), (\d+),")
FEW_ROW_ROWS = {"NN": 5, "TN": 10}
FEW_ROW = CUTLASS_FAMILIES.index("cuBLAS few-row SIMT")
MAGMA = CUTLASS_FAMILIES.index("MAGMA SIMT")
MAGMA_TILE = (64, 16)
# A configuration seen less often in calibration is not fitted (its shapes take their neighbours'
# kernels' coefficients, scaled): as many cases as a fit has coefficients. Leave-one-out on the H200
# calibration (benchmarks/archive/kernel_model.py) finds more worse and fewer no better.
CUTLASS_MIN_CASES = 6
# Tiles an SM may hold at once: small tiles (32×32, 64×64) fit up to 8.
CUTLASS_OCCUPANCIES = (1, 2, 3, 4, 6, 8)
# The 32×32 WMMA kernels (Ampere align2, Turing align1): batched, they are told apart by K block too.
WMMA = (CUTLASS_FAMILIES.index("Ampere WMMA"), CUTLASS_FAMILIES.index("Turing WMMA align1"))


def cutlass_config(name: str) -> tuple[int, ...] | None:
    """(family index into cost.CUTLASS_FAMILIES, tile rows, tile cols, 1 if it writes fp32 partials,
    K block, pipeline stages) of a CUTLASS kernel name (the Turing kernels name no K block or stages:
    0, 0), of a Hopper xmma one (its stages unnamed: 0) or of cuBLAS's few-row or MAGMA's SIMT
    kernels (0, 0, 0), or None for any other kernel."""
    found = _CUTLASS_NAME.search(name)
    if not found:
        if few := _FEW_ROW_NAME.search(name):
            return FEW_ROW, int(few.group(2)) // int(few.group(3)), FEW_ROW_ROWS[few.group(1)], 0, 0, 0
        if "magma_sgemmEx_kernel" in name:
            return MAGMA, *MAGMA_TILE, 0, 0, 0
        xmma = _XMMA_NAME.search(name)
        return (XMMA, int(xmma.group(1)), int(xmma.group(2)), 0, int(xmma.group(3)), 0) if xmma else None
    family = (3 if found.group(1) == "75" else 2) if found.group(2) else (0 if found.group(1) == "75" else 1)
    partials = re.search(r"tensorop_s\d", name) is not None  # an fp32 output type, where bf16_s… is not
    return family, int(found.group(3)), int(found.group(4)), int(partials), int(found.group(5) or 0), \
        int(found.group(6) or 0)


def nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with the coefficients that come out negative dropped and the rest refitted."""
    keep = np.ones(a.shape[1], dtype=bool)
    while True:
        coef = np.zeros(a.shape[1])
        coef[keep] = np.linalg.lstsq(a[:, keep], b, rcond=None)[0]
        if (coef >= 0).all():
            return coef
        keep &= coef >= 0


def fit_cutlass(rows: list[dict], params: CostParams, *, gpu: GPU, dtype: str = "bf16",
                report: dict | None = None) -> CostParams:
    """The CUTLASS kernel tables of a profile, from misaligned GEMMs whose kernels were recorded.

    rows: dicts with m, n, k, batch, layout, time_ms, kernels (the names of the kernels one call
    ran, in order) and grids ("x×y×z" each; CUTLASS splits a single GEMM's K over z, and runs a
    batch over z). Each configuration seen at least CUTLASS_MIN_CASES times gets the coefficients of
    cost.CUTLASS_TERMS that fit its cases best (least squares on relative error, none negative) at
    the occupancy that fits best; each of its cases becomes a choice, with its residual against
    what the tables then predict for it. Which configuration cuBLAS picks for a shape is learned from
    the choices (fit_chooser); `report`, where given, gets how well that tells the choices apart.
    Hopper's xmma kernels, which cuBLAS runs for some misaligned batched GEMMs, are fitted as the
    CUTLASS ones are."""
    cases = defaultdict(list)
    for r in rows:
        layout = LAYOUTS.index(r["layout"])
        worst = int(max(align_classes(r["m"], r["n"], r["k"], r["layout"], dtype, gpu.align_bytes)))
        found = [(c, g) for name, g in zip(r["kernels"], r["grids"]) if (c := cutlass_config(name))]
        if worst == 0 or not found:
            continue
        config, grid = found[0]
        if r["batch"] == 1 or config[0] not in WMMA:
            # Kernels are told apart by tile alone: by leave-one-out their K blocks and stages add
            # nothing and thin each fit (batched GEMMs' mean |log error| 0.0802 -> 0.0774 without
            # them), but batched GEMMs' 32×32 WMMA kernels differ 2× by K block.
            config = config[:4] + (0, 0)
        splits = int(grid.split("x")[2]) if r["batch"] == 1 and grid.count("x") == 2 else 1
        cases[(*config, layout)].append(dict(r, splits=splits, worst=worst))
    kernels, choices, chosen = [], [], []
    for (family, tm, tn, partials, block, stages, layout), mine in sorted(cases.items()):
        if len(mine) < CUTLASS_MIN_CASES:
            continue
        measured = np.array([c["time_ms"] for c in mine])
        best = None
        for occupancy in CUTLASS_OCCUPANCIES:
            terms = _case_terms(mine, tm, tn, occupancy, gpu)
            coef = nonnegative_lstsq(terms / measured[:, None], np.ones_like(measured))
            err = float(np.median(np.abs(terms @ coef / measured - 1)))
            if best is None or err < best[0]:
                best = (err, occupancy, coef)
        _, occupancy, coef = best
        choices += _choice_rows(mine, layout, len(kernels))
        chosen += mine
        kernels.append((family, tm, tn, partials, layout, occupancy, block, stages, *(float(f"{c:.6g}") for c in coef)))
    # A configuration too rare to fit borrows a fitted one's coefficients (the same family, output
    # and layout, the nearest tile and K block), scaled to its own cases: by leave-one-out, better
    # for batched GEMMs and no worse for single ones (benchmarks/RESULTS.md).
    for (family, tm, tn, partials, block, stages, layout), mine in sorted(cases.items()):
        donors = [row for row in kernels if (row[0], row[3], row[4]) == (family, partials, layout)]
        if len(mine) >= CUTLASS_MIN_CASES or not donors:
            continue
        donor = min(donors, key=lambda row: abs(np.log(row[1] * row[2] / (tm * tn)))
                    + abs(np.log(max(row[6], 1) / max(block, 1))))
        predicted = _case_terms(mine, tm, tn, donor[5], gpu) @ np.array(donor[KERNEL_COLUMNS:])
        scale = float(np.exp(np.median(np.log(np.array([c["time_ms"] for c in mine]) / predicted))))
        choices += _choice_rows(mine, layout, len(kernels))
        chosen += mine
        kernels.append((family, tm, tn, partials, layout, donor[5], block, stages,
                        *(float(f"{c * scale:.6g}") for c in donor[KERNEL_COLUMNS:])))
    if not chosen:
        return dataclasses.replace(params, cutlass_kernels=tuple(kernels), cutlass_choices=())
    chooser, sharpness, vote = fit_chooser(kernels, choices, chosen, gpu=gpu, octaves=params.residual_octaves,
                                           prior=params.residual_prior, report=report)
    params = dataclasses.replace(params, cutlass_chooser=chooser, cutlass_chooser_sharpness=sharpness,
                                 cutlass_chooser_vote=vote)
    return _with_residuals(params, kernels, choices, chosen, gpu=gpu, dtype=dtype)


# The chooser's fit (fit_chooser): Adam on the mean cross-entropy of cuBLAS's recorded choices, with
# a small ridge on the weights, a fixed number of steps from zeros (so a refit is reproducible).
CHOOSER_STEPS = 3000
CHOOSER_RATE = 0.05
CHOOSER_RIDGE = 1e-4


def fit_chooser(kernels: list[tuple], choices: list[tuple], chosen: list[dict], *, gpu: GPU, octaves: float,
                prior: float, named: tuple[list[tuple], list[dict]] = ((), ()),
                report: dict | None = None) -> tuple[tuple[tuple[float, ...], ...], float, float]:
    """cost.CostParams.cutlass_chooser, its sharpness and its vote, from the configurations cuBLAS ran
    for the calibration's misaligned GEMMs (`choices`, rows of cutlass_choices, and `chosen`, their
    shapes): a multinomial logit over the configurations each shape's group ran, scored as
    cost._cutlass_ms scores them. A shape's own choice is left out of its neighbours' votes, as a
    new shape's would be. `named`, where given, adds shapes whose kernels were named but not timed
    (choice rows without a residual, and their shapes): they teach the chooser as the choices do,
    while the candidates, their ranges and the neighbours' votes stay the choices' own, as a
    prediction sees them; a named shape whose configuration its group's choices never ran teaches
    nothing. `report`, where given, gets the cases and the share of them whose likeliest
    configuration is the one cuBLAS ran."""
    rows, table = np.array(kernels, dtype=float), np.array(choices, dtype=float)
    extra = np.array(named[0], dtype=float).reshape(-1, 7)
    ranges = kernel_ranges(table, len(rows))
    samples = np.vstack([table[:, :7], extra])  # the choices, then the named shapes
    label, group, coords = samples[:, 6].astype(np.int64), choice_groups(samples), samples[:, 2:6]
    own = np.arange(len(samples)) < len(table)
    col = lambda key: np.array([c[key] for c in [*chosen, *named[1]]], dtype=np.int64)  # noqa: E731
    m, n, k, batch = col("m"), col("n"), col("k"), col("batch")
    log_t = np.full((len(samples), len(rows)), np.inf)
    share = np.zeros_like(log_t)
    for code in np.unique(group[own]):
        mine, theirs = np.flatnonzero(group == code), np.flatnonzero((group == code) & own)
        configs = np.unique(label[theirs])
        times, _ = kernel_times(rows[configs], m[mine], n[mine], k[mine], batch[mine], gpu.num_sms)
        times = np.where(within_range(ranges[configs], coords[mine]), times, np.inf)
        log_t[np.ix_(mine, configs)] = np.log(times)
        votes = np.eye(len(rows))[label[theirs]]
        sums, total = neighbour_sums(coords[mine], coords[theirs], votes, octaves)
        self_vote = np.eye(len(rows))[label[mine]] * own[mine, None]  # a choice's own vote (weight 1) left out
        share[mine] = (sums - self_vote) / (total - own[mine] + prior)[:, None]
    finite = np.isfinite(log_t)
    keep = finite[np.arange(len(label)), label]  # a shape its own kernel cannot run (no valid split) teaches nothing
    finite, label, share = finite[keep], label[keep], share[keep]
    log_t = np.where(finite, log_t[keep], 0.0)
    x = chooser_features(m[keep], n[keep], k[keep], batch[keep])
    onehot = np.eye(len(rows))[label]

    def scores(weights, sharpness, vote):
        return np.where(finite, x @ weights - sharpness * log_t + vote * share, -np.inf)

    params = [np.zeros((x.shape[1], len(rows))), np.zeros(()), np.zeros(())]  # weights, sharpness, vote
    first, second = [np.zeros_like(q) for q in params], [np.zeros_like(q) for q in params]
    for step in range(1, CHOOSER_STEPS + 1):
        score = scores(*params)
        prob = np.exp(score - score.max(axis=1, keepdims=True))
        prob /= prob.sum(axis=1, keepdims=True)
        slope = (prob - onehot) / len(label)  # d(mean cross-entropy) / d(score)
        grads = (x.T @ slope + CHOOSER_RIDGE * params[0], -(slope * log_t).sum(), (slope * share).sum())
        for i, g in enumerate(grads):
            first[i] = 0.9 * first[i] + 0.1 * g
            second[i] = 0.999 * second[i] + 0.001 * g * g
            params[i] = params[i] - CHOOSER_RATE * (first[i] / (1 - 0.9 ** step)) / (
                np.sqrt(second[i] / (1 - 0.999 ** step)) + 1e-8)
    weights, sharpness, vote = params[0], float(params[1]), float(params[2])
    if report is not None:
        right = scores(*params).argmax(axis=1) == label
        report.update(chooser_cases=int(len(label)), chooser_right=round(float(right.mean()), 4),
                      sharpness=round(sharpness, 4), vote=round(vote, 4))
    return (tuple(tuple(float(f"{w:.6g}") for w in row) for row in weights.T), float(f"{sharpness:.6g}"),
            float(f"{vote:.6g}"))


def _case_terms(cases: list[dict], tm: int, tn: int, occupancy: int, gpu: GPU) -> np.ndarray:
    """cost.cutlass_terms of a configuration's cases, one row each."""
    col = lambda key: np.array([c[key] for c in cases])  # noqa: E731
    return cutlass_terms(col("m"), col("n"), col("k"), col("batch"), tm, tn, col("splits"), occupancy, gpu.num_sms)


def _choice_rows(cases: list[dict], layout: int, index: int) -> list[tuple]:
    """cost.CostParams.cutlass_choices rows of a configuration's cases, before their residuals."""
    return [(layout, c["worst"], *(round(float(np.log2(c[key])), 4) for key in ("m", "n", "k", "batch")), index)
            for c in cases]


def _with_residuals(params, kernels, choices, chosen, *, gpu: GPU, dtype: str) -> CostParams:
    """The tables with each choice's residual against what they predict for its own shape."""
    bare = dataclasses.replace(params, cutlass_kernels=tuple(kernels), cutlass_choices=tuple(r + (0.0,) for r in choices))
    col = lambda key: np.array([c[key] for c in chosen])  # noqa: E731
    predicted = predict_gemm(col("m"), col("n"), col("k"), batch=col("batch"), layout=col("layout"),
                             gpu=CostModel(gpu, bare), dtype=dtype).time_ms
    residuals = np.log(col("time_ms") / predicted)
    return dataclasses.replace(bare, cutlass_choices=tuple(r + (round(float(e), 5),) for r, e in zip(choices, residuals)))
