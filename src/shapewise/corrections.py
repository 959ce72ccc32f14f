"""What a calibrated profile adds to the analytic model (cost.py): measured corrections of GEMMs.

A profile measured on a GPU carries tables (see params.CostParams) that the analytic model's
prediction of a GEMM or batched GEMM goes through, when the profile has them:

    kernels    a misaligned 16-bit GEMM is timed as the CUTLASS kernel cuBLAS runs for it (older
               kernels with narrow loads, each with a time model of its own, _cutlass_ms), chosen as
               the profile's learned chooser says cuBLAS chooses (Hopper's own kernels, slowed down,
               are not what runs)
    trees      every GEMM's time so far times what gradient-boosted trees (trees.py), fitted on the
               calibration's GEMMs, say the model leaves over for its dims, alignment, layout, time and
               rate (tree_factor; cost.py applies it after `correct`)
    residuals  (profiles before the trees) every other GEMM's analytic time times the measured
               deviation of the calibration shapes nearby (of the same layout and alignment),
               _residual_factor

One call, `correct`, takes the analytic times and returns the corrected ones with the kernel each
shape is timed as; cost.py reports the difference, the trees' included, as its own loss ("measured
correction"), so that the analytic causes stay causes. Everything is numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import trees
from .params import CostParams

# The Turing WMMA kernel is not the Ampere one with another name: it loads one element at a time
# and runs 1.5-2.6x as long (fitted apart, batched GEMMs' in-sample p90 error 15.1% -> 12.6%:
# benchmarks/archive/kernel_model.py).
# cuBLAS's own SIMT kernels for a GEMM of a few rows (torch's m up to 16) with a misaligned dim,
# gemmSN_NN and gemmSN_TN, and MAGMA's sgemmEx for a short K, are timed as the CUTLASS kernels are: a
# block streams its columns of the large matrix over all of K (fit.cutlass_config says their tiles).
CUTLASS_FAMILIES = ("Turing CUTLASS align1", "Ampere CUTLASS align2", "Ampere WMMA", "Turing WMMA align1", "Hopper xmma",
                    "cuBLAS few-row SIMT", "MAGMA SIMT")
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
CHUNK = 16384  # shapes at a time where a step makes an array per shape and candidate
# A kernel configuration is a candidate for a shape only within this many octaves of the range of the
# calibration shapes it ran, in each of m, n, k and batch: its time model is not to be trusted far
# outside it (on the H200, Hopper's xmma kernels ran K of 34 to 60 alone, and their fit, with no
# K-step terms, put a batched GEMM of K 3178 at a seventh of its time).
CANDIDATE_REACH = 1.0
# A calibration shape farther than this many kernel widths (CostParams.residual_octaves) from a
# prediction's shape weighs nothing in its corrections (its weight would be under 1.2%).
NEIGHBOUR_REACH = 3.0
NEIGHBOUR_BLOCK = 16384  # query-point pairs whose weights neighbour_sums makes at once
# neighbour_sums slices a cell this many ways along each of m, n and k: a slice's queries meet about
# half the points a whole cell's would, most of them beyond reach
NEIGHBOUR_SLICES = 3
NEIGHBOUR_SLICED = 200  # queries in a cell from which neighbour_sums slices it
# What the trees of a profile (CostParams.gemm_trees) ask of a GEMM: log2 of m and n on the tile grid
# (rounded up to a multiple of TREE_TILE once over it), of k and of batch; how many times 2 divides the
# dims that lead a matrix (A's lead, m in tn and k otherwise, and n), up to TREE_MAX_TWOS; whether its
# layout is nn or nt (else tn); log2 of its time predicted before them (ms), and of the rate that time
# makes on the tile grid (TFLOP/s). The time and rate come first in what the trees learnt on the H200
# (benchmarks/RESULTS.md): the analytic model's misses follow its own regimes more than any one dim.
# Only what a kernel sees: two GEMMs that differ in a dim inside one tile, or in the alignment of a
# dim that leads no matrix, get the same correction, so that the analytic model's tile and wave
# quantization stand (3003 tokens cost 2-3% more a token than 3072 in the forward's GEMMs on an H200,
# as the analytic model says; trees that saw the exact dims said 0.5-1.5% less).
TREE_FEATURES = ("m", "n", "k", "batch", "A lead twos", "n twos", "nn", "nt", "time", "rate")
TREE_TILE = 128
TREE_MAX_TWOS = 7

@dataclass(frozen=True)
class Corrected:
    """A profile's corrections of GEMM predictions, each field an array shaped as the shapes."""

    time_ms: np.ndarray  # the corrected time (not yet held at or above the ideal time)
    served: np.ndarray  # True where timed as a CUTLASS kernel (the fields below are then that kernel's)
    tile: np.ndarray  # (rows, cols) on a last axis
    split: np.ndarray  # the K split the kernel runs at
    family: np.ndarray  # an index into CUTLASS_FAMILIES, -1 where not served


def corrects(p: CostParams) -> bool:
    """Whether the parameters carry measured corrections (a calibrated profile's tables)."""
    return bool(p.gemm_residuals or p.cutlass_kernels or p.gemm_trees)


def tree_features(m, n, k, batch, layout_index, time_ms) -> np.ndarray:
    """TREE_FEATURES of GEMMs (arrays of one shape) predicted to take time_ms before the trees' correction:
    one row per GEMM."""
    m, n, k, batch, layout_index, time_ms = (np.ravel(x) for x in np.broadcast_arrays(m, n, k, batch, layout_index,
                                                                                       time_ms))
    grid_m, grid_n = (np.where(x > TREE_TILE, -(-x // TREE_TILE) * TREE_TILE, x) for x in (m, n))
    lead_a = np.where(layout_index == 2, m, k)  # as align_classes has it: m leads A in tn, k in nn and nt
    columns = [np.log2(grid_m), np.log2(grid_n), np.log2(k), np.log2(batch), _trailing_zeros(lead_a),
               _trailing_zeros(n), layout_index == 0, layout_index == 1, np.log2(time_ms),
               np.log2(2.0 * grid_m * grid_n * k * batch / time_ms / 1e9)]
    return np.stack(columns, axis=1).astype(float)


def _trailing_zeros(x: np.ndarray) -> np.ndarray:
    """How many times 2 divides x, up to TREE_MAX_TWOS: its alignment in elements."""
    x = np.asarray(x, dtype=np.int64)
    return sum(((x % (2 ** i)) == 0).astype(np.int64) for i in range(1, TREE_MAX_TWOS + 1))


def tree_factor(p: CostParams, m, n, k, batch, layout_index, time_ms) -> np.ndarray:
    """exp of the profile's trees at these GEMMs: what multiplies their time predicted before."""
    forest = _forest(p)
    return np.exp(trees.predict_forest(forest, tree_features(m, n, k, batch, layout_index, time_ms))).reshape(
        np.shape(time_ms))


def _forest(p: CostParams) -> trees.Forest:
    found = _FORESTS.get(id(p.gemm_trees))
    if found is not None and found[0] is p.gemm_trees and found[1] == p.gemm_tree_base:
        return found[2]
    forest = trees.Forest.from_rows(p.gemm_tree_base, p.gemm_trees)
    if len(_FORESTS) >= 8:
        _FORESTS.clear()
    _FORESTS[id(p.gemm_trees)] = (p.gemm_trees, p.gemm_tree_base, forest)
    return forest


_FORESTS: dict = {}


def correct(p: CostParams, time_ms: np.ndarray, *, m, n, k, batch, layout_index, class_a, class_n, dtype_bytes: int,
            sms: int) -> Corrected:
    """The analytic times of GEMMs (arrays shaped as m) corrected by the profile's tables: misaligned
    16-bit GEMMs timed as the CUTLASS kernel cuBLAS runs for them, where the profile recorded such
    kernels; the others (and misaligned ones no kernel serves) scaled by the residual table."""
    shape = np.shape(m)
    served = np.zeros(shape, dtype=bool)
    tile, split, family = np.zeros(shape + (2,), dtype=np.int64), np.ones(shape, dtype=np.int64), np.full(shape, -1)
    kernel_ms = np.zeros(shape)
    if p.cutlass_kernels and dtype_bytes == 2:  # the tables are of 16-bit GEMMs (bf16, fp16), as calibrated
        served, kernel_ms, tile, split, family = _cutlass_ms(p, layout_index, np.maximum(class_a, class_n),
                                                             m, n, k, batch, sms)
        # A side of 1 runs cuBLAS's gemv kernels, not CUTLASS ones (on the H200, 20 of 419 such edge
        # shapes ran a CUTLASS kernel): cost.py times it as a gemv, and only the residuals correct it.
        served &= np.minimum(m, n) > 1
    factor = np.ones(shape)
    rest = ~served
    if p.gemm_residuals and rest.any():  # the table corrects what the kernels do not serve
        factor[rest] = _residual_factor(p, *(np.broadcast_to(x, shape)[rest]
                                             for x in (layout_index, class_a, class_n, m, n, k, batch)))
    return Corrected(np.where(served, kernel_ms, time_ms * factor), served, tile, split, family)


def kernel_words(family: int, tile, split: int) -> str:
    """The kernel a GEMM is timed as, e.g. "Turing CUTLASS align1, 128×128 tiles, K split 3 ways" for
    one of a profile's CUTLASS kernels, or "modelled kernel, 128×256 tiles" for the analytic model's
    own (family -1)."""
    name = CUTLASS_FAMILIES[family] if family >= 0 else "modelled kernel"
    return f"{name}, {int(tile[0])}×{int(tile[1])} tiles" + (f", K split {split} ways" if split > 1 else "")


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
    # Floats: every value here is a whole number, exact in float64 below 2^53 (where int64 products of
    # four dims near cuBLAS's 2^31 would overflow), and float division is far faster than int64's.
    m, n, k, batch, tm, tn, splits, occupancy = (np.asarray(x, dtype=float)
                                                 for x in (m, n, k, batch, tm, tn, splits, occupancy))
    rows, cols = np.ceil(n / tm), np.ceil(m / tn)
    per_sm = np.ceil(rows * cols * batch * splits / sms)
    slice_ = np.ceil(k / splits)
    split = (splits > 1).astype(float)
    # A partial tile loads only its rows and columns that hold data (the rest are predicated off):
    # the load path carries the tiles' mean share of a full tile's loads. By the fit's leave-one-out
    # (mean |log error|, benchmarks/RESULTS.md): single GEMMs 0.0641 -> 0.0633, batched 0.0752 -> 0.0725.
    filled = (n / rows + m / cols) / (tm + tn)
    return [np.ones(()), per_sm * slice_ * filled, np.ceil(per_sm / occupancy) * slice_, per_sm,
            m * n * batch * (split * splits), split]


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
                  choices=choices, choice_groups=choice_groups(choices), ranges=kernel_ranges(choices, len(p.cutlass_kernels)),
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
    reach (in m, n and k), and the queries too, a cell of many queries cut in NEIGHBOUR_SLICES³
    slices, so that the queries of a cell or slice meet only the points of the cells around it that
    come within reach of it: a profile of many calibration shapes stays fast."""
    sums, total = np.zeros((len(queries), values.shape[1])), np.zeros(len(queries))
    if not len(queries) or not len(points):
        return sums, total
    reach = NEIGHBOUR_REACH * octaves
    width = reach / NEIGHBOUR_SLICES
    fine = np.floor(queries[:, :3] / width).astype(np.int64)
    cell_q = fine // NEIGHBOUR_SLICES
    cell_p = np.floor(points[:, :3] / width).astype(np.int64) // NEIGHBOUR_SLICES
    low = np.minimum(cell_q.min(axis=0), cell_p.min(axis=0)) - 1
    span = np.maximum(cell_q.max(axis=0), cell_p.max(axis=0)) - low + 2
    key_p = np.ravel_multi_index((cell_p - low).T, span)
    order = np.argsort(key_p, kind="stable")
    sorted_keys = key_p[order]
    around = np.ravel_multi_index(np.indices((3, 3, 3)).reshape(3, -1), span) - np.ravel_multi_index((1, 1, 1), span)
    # The queries by cell, or by slice where their cell holds many: a slice's own points are fewer,
    # but a few queries each would cost more in numpy's calls than they save.
    cells, which, count = np.unique(np.ravel_multi_index((cell_q - low).T, span), return_inverse=True,
                                    return_counts=True)
    sliced = count[which] >= NEIGHBOUR_SLICED
    box = np.where(sliced[:, None], fine, cell_q * NEIGHBOUR_SLICES)  # a query's box's lowest corner, in slices
    size = np.where(sliced, 1, NEIGHBOUR_SLICES)  # its side, in slices
    keys, first, which = np.unique(which * NEIGHBOUR_SLICES ** 3 + np.ravel_multi_index((box - cell_q * NEIGHBOUR_SLICES).T, (NEIGHBOUR_SLICES,) * 3),
                                   return_index=True, return_inverse=True)
    by_key = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[by_key], np.arange(len(keys) + 1))
    lows, highs = box[first] * width, (box[first] + size[first, None]) * width
    key_cells = cells[keys // NEIGHBOUR_SLICES ** 3]
    # squared distances as one matrix product, [q, 1, |q|²]·[-2p, |p|², 1] (in double precision:
    # |q|² and |p|² are large beside d²), and the weights in single precision, which they need no
    # more; their sums in double, so that which points beyond reach (weighing nothing) a query
    # meets does not round its sums differently
    lifted_q = np.column_stack([queries, np.ones(len(queries)), (queries ** 2).sum(axis=1)])
    lifted_p = np.vstack([-2 * points.T, (points ** 2).sum(axis=1), np.ones(len(points))])
    weighed = np.column_stack([values, np.ones(len(points))]).astype(np.float32).astype(float)
    scale, out = np.float32(-0.5 / octaves ** 2), np.zeros((len(queries), values.shape[1] + 1))
    limit = reach ** 2 * (1 + 1e-6)  # within reach, with a margin for rounding
    beyond = np.nextafter(np.float32(reach ** 2), np.float32(np.inf)).view(np.int32)  # the least single beyond reach
    for c in range(len(keys)):
        if c == 0 or key_cells[c] != key_cells[c - 1]:  # a new cell: the points around it
            ranges = zip(*(np.searchsorted(sorted_keys, key_cells[c] + around, side) for side in ("left", "right")))
            near = np.concatenate([order[a:b] for a, b in ranges if b > a] or [np.zeros(0, dtype=np.int64)])
            near_points = points[near, :3]
        gap = np.maximum(np.maximum(lows[c] - near_points, near_points - highs[c]), 0.0)
        mine_near = near[(gap ** 2).sum(axis=1) <= limit]
        if not len(mine_near):
            continue
        to_near, near_values = lifted_p[:, mine_near], weighed[mine_near]
        rows = max(1, NEIGHBOUR_BLOCK // len(mine_near))  # a block of queries' weights stays in the CPU's cache
        for start in range(bounds[c], bounds[c + 1], rows):
            mine = by_key[start:min(start + rows, bounds[c + 1])]
            d2 = (lifted_q[mine] @ to_near).astype(np.float32)
            w = np.exp(d2 * scale)
            # nothing beyond reach: the weight's bits and-ed with all ones within reach, with none
            # beyond (a positive float's bits order as the float does, a negative d² is within reach)
            mask = d2.view(np.int32) - beyond
            np.right_shift(mask, 31, out=mask)
            np.bitwise_and(w.view(np.int32), mask, out=w.view(np.int32))
            out[mine] = w.astype(float) @ near_values
    return out[:, :-1], out[:, -1]


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
    kernels, chooser = tables["kernels"], tables["chooser"]
    shape = np.shape(m)
    m, n, k, batch, layout_index, worst = (np.broadcast_to(x, shape).ravel()
                                           for x in (m, n, k, batch, layout_index, worst))
    served, ms = np.zeros(m.shape, dtype=bool), np.zeros(m.shape)
    tile, split = np.zeros(m.shape + (2,), dtype=np.int64), np.ones(m.shape, dtype=np.int64)
    family = np.full(m.shape, -1)
    coords = np.log2(np.stack([m, n, k, batch], axis=1).astype(float))
    group = (layout_index * 3 + worst) * 2 + (batch > 1)
    theirs_group = tables["choice_groups"]
    for code in np.unique(group[worst > 0]):
        mine = np.flatnonzero(group == code)
        if not (theirs_group == code).any() or not len(chooser):
            continue
        configs, near_correction, near_share = group_neighbours(p, tables, code, coords[mine])
        for start in range(0, len(mine), CHUNK):  # bounded memory for many shapes at once
            part = mine[start:start + CHUNK]
            correction, share = near_correction[start:start + CHUNK], near_share[start:start + CHUNK]
            log_t, finite, splits, score = candidate_scores(p, tables, configs, m[part], n[part], k[part], batch[part],
                                                            coords[part], share, sms)
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


def group_neighbours(p: CostParams, tables: dict, code: int, coords: np.ndarray) -> tuple:
    """What the calibration shapes of a choice group (layout, alignment class, batchedness) say of shapes at
    `coords` (log2 m, n, k, batch): the group's configurations (rows of the kernel table), each shape's
    residual correction (the group's mean, moved by its neighbours' deviation from it) and its neighbours'
    share of each configuration. The cells of calibration shapes near them are found once for all."""
    choices = tables["choices"]
    theirs = tables["choice_groups"] == code
    points, residuals = choices[theirs, 2:6], choices[theirs, 7]
    # the group's configurations, each timed once per shape; a choice names one by its position
    configs, position = np.unique(choices[theirs, 6].astype(np.int64), return_inverse=True)
    base = residuals.sum() / (len(residuals) + 1)
    values = np.column_stack([residuals - base, np.eye(len(configs))[position]])
    sums, total = neighbour_sums(coords, points, values, p.residual_octaves)
    return (configs, base + sums[:, 0] / (total + p.residual_prior),
            sums[:, 1:] / (total + p.residual_prior)[:, None])


def candidate_scores(p: CostParams, tables: dict, configs, m, n, k, batch, coords, share, sms: int) -> tuple:
    """Each shape's candidates, the configurations `configs` within their range of it: the log of each
    one's time at its fastest split (0 where not timed), whether it was timed, that split, and the
    chooser's score of it (-inf where not timed)."""
    times, splits = kernel_times(tables["kernels"][configs], m, n, k, batch, sms,
                                 inside=within_range(tables["ranges"][configs], coords))
    log_t = np.log(times)
    finite = np.isfinite(log_t)
    log_t = np.where(finite, log_t, 0.0)
    score = (chooser_features(m, n, k, batch) @ tables["chooser"][configs].T
             + p.cutlass_chooser_vote * share - p.cutlass_chooser_sharpness * log_t)
    return log_t, finite, splits, np.where(finite, score, -np.inf)


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
    low, high = ranges[:, 0] - CANDIDATE_REACH, ranges[:, 1] + CANDIDATE_REACH
    # dim by dim, shapes × configurations each: no shapes × configurations × dims arrays to reduce
    inside = np.ones((len(coords), len(ranges)), dtype=bool)
    for dim in range(coords.shape[1]):
        inside &= (coords[:, dim, None] >= low[:, dim]) & (coords[:, dim, None] <= high[:, dim])
    return inside | ~inside.any(axis=1, keepdims=True)


def choice_groups(choices: np.ndarray) -> np.ndarray:
    """The group of each row of cutlass_choices: its layout, alignment class and batchedness, as _cutlass_ms
    groups shapes."""
    return ((choices[:, 0] * 3 + choices[:, 1]) * 2 + (choices[:, 5] > 0)).astype(np.int64)


def kernel_times(rows, m, n, k, batch, sms, inside=None) -> tuple[np.ndarray, np.ndarray]:
    """Each shape's time on each kernel configuration (rows of cutlass_kernels) at its fastest split,
    and that split: two arrays of shapes × configurations. Only the pairs `inside` (shapes ×
    configurations, all by default) are timed; the others are infinite, at split 1.

    Splits past the first FIRST_SPLITS are timed only where one could beat the best of those: a split
    s runs at least its tiles × s / SMs tiles per SM, each over at least K / s, so with no negative
    coefficient its time is at least a + s × b (_split_floor), which grows with s."""
    m, n, k, batch = (np.asarray(x, dtype=float) for x in (m, n, k, batch))
    # configurations × shapes, so that a block of one configuration's pairs fills a run of them
    times, best_split = np.full((len(rows), len(m)), np.inf), np.ones((len(rows), len(m)), dtype=np.int64)
    splits = np.array(CUTLASS_SPLITS)
    slice_ = np.ceil(k[:, None] / splits)
    single = batch[:, None] == 1
    valid = (splits == 1) | ((slice_ >= CUTLASS_MIN_SLICE) & single)
    # a kernel that writes fp32 partials runs split: in slices of CUTLASS_MIN_SLICE or more where
    # K allows, in shorter ones where not, and unsplit only where K is too short even for those
    split_ok = valid & (splits > 1)
    split_ok |= (splits > 1) & (slice_ >= CUTLASS_MIN_PARTIAL_SLICE) & single & ~split_ok.any(axis=-1, keepdims=True)
    # by kind of kernel: 0 writes its output, 1 writes fp32 partials
    valid = np.stack([valid, np.where(split_ok.any(axis=-1, keepdims=True), split_ok, valid)])
    # splits × (kind, shape): a pair's splits lie along the first axis, as its times do below
    valid = valid.transpose(2, 0, 1).reshape(len(splits), -1)
    later_valid = valid[FIRST_SPLITS:].any(axis=0)  # none for batched shapes: a batch is not split
    # every (shape, configuration) pair to time, on one axis, a configuration's pairs after one another
    # and a cache-sized block at a time; the kernels' columns on the first axis, so that a block of
    # one configuration takes its row once (broadcast) rather than once per pair
    pairs = np.flatnonzero(np.ones(times.shape, dtype=bool) if inside is None else inside.T)
    rows = np.asarray(rows, dtype=float).T.copy()
    first, later_splits = splits[:FIRST_SPLITS], splits[FIRST_SPLITS:]
    for start in range(0, len(pairs), CUTLASS_BLOCK):
        config, shape = np.divmod(pairs[start:start + CUTLASS_BLOCK], len(m))
        row = rows[:, config[:1]] if config[0] == config[-1] else rows[:, config]
        dims = [x[shape] for x in (m, n, k, batch)]
        kind_shape = (row[3] > 0) * len(m) + shape
        t = _config_ms(row, *dims, first, valid[:FIRST_SPLITS, kind_shape], sms)
        best = np.argmin(t, axis=0)
        least = t[best, np.arange(len(shape))]
        later = later_valid[kind_shape]
        if later.any():  # where no later split can beat the best so far, they are not timed
            floor = _split_floor(row, *dims, later_splits[0], sms)
            later &= ~(floor > least * (1 + 1e-9))  # a margin far above rounding; NaN: timed
        some = np.flatnonzero(later)
        if len(some):
            t = _config_ms(row if row.shape[1] == 1 else row[:, some], *(x[some] for x in dims), later_splits,
                           valid[FIRST_SPLITS:, kind_shape[some]], sms)
            best_later = np.argmin(t, axis=0)
            t = t[best_later, np.arange(len(some))]
            # a later split only where strictly faster: of equal times the first wins, as one argmin
            # over every split picks it
            wins = t < least[some]
            least[some[wins]], best[some[wins]] = t[wins], FIRST_SPLITS + best_later[wins]
        block = pairs[start:start + CUTLASS_BLOCK]
        times.ravel()[block], best_split.ravel()[block] = least, splits[best]
    return times.T, best_split.T


CUTLASS_BLOCK = 8192  # (shape, configuration) pairs kernel_times times at once: their arrays stay in the CPU's cache
FIRST_SPLITS = 4  # kernel_times times these splits of CUTLASS_SPLITS for every shape, the others where they may win


def _config_ms(rows, m, n, k, batch, splits, ok, sms: int) -> np.ndarray:
    """Kernel configurations' times on shapes (1-D arrays) at each of `splits`: splits × shapes,
    infinite where not `ok`. rows: cutlass_kernels' columns × shapes (one configuration per shape),
    or × 1 (one for all)."""
    terms = _cutlass_term_list(m, n, k, batch, rows[1], rows[2], splits[:, None], rows[5], sms)
    return np.where(ok, sum(term * rows[KERNEL_COLUMNS + i] for i, term in enumerate(terms)), np.inf)


def _split_floor(rows, m, n, k, batch, least: int, sms: int) -> np.ndarray:
    """The least time any split of `least` ways or more can take on kernel configurations (rows as
    _config_ms takes them), per shape; -inf where a negative coefficient or no occupancy allows no
    such floor. See _cutlass_term_list: each SM runs at least tiles × s / SMs tiles of at least K / s
    steps each."""
    coef, tm, tn, occupancy = rows[KERNEL_COLUMNS:], rows[1], rows[2], rows[5]
    tiles = np.ceil(n / tm) * np.ceil(m / tn) * batch
    filled = (n / np.ceil(n / tm) + m / np.ceil(m / tn)) / (tm + tn)
    with np.errstate(divide="ignore", invalid="ignore"):  # no occupancy: no floor, below
        floor = (coef[0] + coef[5] + tiles * k / sms * (coef[1] * filled + coef[2] / occupancy)
                 + least * (coef[3] * tiles / sms + coef[4] * m * n * batch))
    return np.where((coef[1:] >= 0).all(axis=0) & (occupancy > 0), floor, -np.inf)


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
