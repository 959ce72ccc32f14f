"""The co-design paper's figures, drawn from the cost model's predictions and the store's measurements.

Each figure comes in two halves. A data function (numpy only) computes what is drawn and returns a
plain dict of numpy arrays, lists and text: that is what tests check and what a report can tabulate.
A figure function takes that dict and returns a matplotlib Figure. matplotlib is optional
(pip install 'shapewise[plot]'): only the figure functions import it, and they build figures with the
object-oriented API (matplotlib.figure.Figure), never pyplot, so no GUI backend is chosen, saving
renders with Agg (PNG) or the SVG backend, and no figure lingers in pyplot's registry.

Measured points come from store rows (Store.rows(), or rows read back from an export): dicts with
"params", "median_ms", "tflops" and, where known, "bench", "error" and "gpu_name". A row is drawn
only where it measured the very case on the x axis (every fixed dim equal), it succeeded, and it ran
on the figure's GPU; left_out counts, by device, the rows of the very cases that ran elsewhere, for
the caller to say. Every title names the GPU, the dtype and the data source: "predicted",
"measured", or "measured and predicted".
"""

from __future__ import annotations

import math
import textwrap

import numpy as np

from .canvas import FORMATS, colormap, figure, png_bytes, save  # noqa: F401  (plots.save, plots.png_bytes)
from .cost import ATTENTION_PASSES, _align_class, predict_attention, predict_gemm, predict_ops, predict_step
from .errors import ShapewiseError, argument, warn
from .hardware import GPU, find_gpu, get_gpu
from .limits import HIDDEN
from .ops import attention_op, layer_ops
from .profile import CostModel, cost_model
from .search import change_text
from .shapes import DTYPE_BYTES, MLP_KINDS, ModelShape, Workload

# What an attention figure draws: fused attention as SDPA runs it ("flash"), or its score product QKᵀ
# alone ("bmm"). Not a workload's attention (shapes.ATTENTION_KINDS: fused or unfused).
ATTENTION_FIGURES = ("flash", "bmm")
MAX_BOUNDARY_LINES = 32  # more vertical lines than this hide the curve they explain
MARKED_POINTS = 64  # a GEMM sweep of at most this many values marks each one on its curve
OTHER_BELOW = 0.02  # breakdown: ops under this share of every mode's step are drawn as "other"
ALIGN_COLOURS = ("tab:green", "tab:orange", "tab:red")


# ---- shared helpers ---------------------------------------------------------------------------

def _model(gpu: GPU | str | CostModel) -> CostModel:
    """The cost model a figure's predictions use, chosen once: see profile.cost_model."""
    return cost_model(gpu)


def _gpu(gpu: GPU | str | CostModel) -> GPU:
    """The GPU of a figure that predicts nothing itself."""
    return gpu.gpu if isinstance(gpu, CostModel) else gpu if isinstance(gpu, GPU) else get_gpu(gpu)


def _source(measured_points: int, predicted: bool = True) -> str:
    if measured_points and predicted:
        return "measured and predicted"
    return "measured" if measured_points else "predicted"


def _whole_numbers(values, name: str) -> np.ndarray:
    """Sorted distinct positive whole numbers: a line plot needs its x in order."""
    if np.isscalar(values):
        values = [values]
    arr = np.asarray(list(values))  # list(): ranges and generators too
    if arr.size == 0:
        raise ShapewiseError(f"{name}: give at least one value")
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(arr == np.round(arr))):
        raise ShapewiseError(f"{name} must be whole numbers, got {values!r}")
    arr = np.unique(arr.astype(np.int64))
    if arr[0] <= 0:
        raise ShapewiseError(f"{name} must be positive, got {values!r}")
    return arr


def _say_left_out(left: np.ndarray, num_given: int, flag: str, why: str) -> None:
    """Values of `flag` that the figure cannot draw (`why`), said in one line with the first few named, where
    they were left out without a word."""
    if left.size:
        named = ", ".join(str(v) for v in left[:5].tolist()) + (", …" if left.size > 5 else "")
        warn(f"{flag} {named}: {why}; left out of the figure ({left.size:,} of {num_given:,})")


def _same_gpu(row: dict, gpu: GPU) -> bool:
    """Rows of another GPU (or of a CPU run) must not be overlaid on this GPU's predictions;
    rows that do not say where they ran are taken as the caller's."""
    name = row.get("gpu_name")
    if not name:
        return True
    measured = find_gpu(name)  # cached: a figure's rows name a few devices many times
    return measured is not None and measured.key == gpu.key


def _measured_rows(rows, benches: tuple[str, ...], gpu: GPU | None):
    """(params, median_ms, tflops or None) of the rows of these benches that succeeded on this GPU
    (gpu None: on any device). A row that does not name its bench (a hand-made one) is let through
    to the caller's checks."""
    for row in rows or ():
        params = row.get("params") or {}
        bench = row.get("bench") or params.get("bench")
        if bench is not None and bench not in benches:
            continue
        median = row.get("median_ms")
        if row.get("error") or median is None or not median > 0 or (gpu is not None and not _same_gpu(row, gpu)):
            continue
        tflops = row.get("tflops")
        yield params, float(median), (None if tflops is None or tflops == "" else float(tflops))


def _left_out(rows, gpu: GPU, points_of) -> dict[str, int]:
    """{device: how many of its rows points_of(rows) would draw} for the rows of other devices: the
    figure leaves them out, and the caller says so rather than draw fewer points without a word."""
    others: dict[str, list] = {}
    for row in rows or ():
        if not _same_gpu(row, gpu):
            others.setdefault(row.get("gpu_name"), []).append(row)
    counts = {name: len(points_of(group)) for name, group in others.items()}
    return {name: count for name, count in counts.items() if count}


def _in_sweep(value, x: np.ndarray) -> bool:
    """A measured point within the swept range, between the sweep's ends: one beyond would stretch the
    axis past what was asked (a sweep of one value would show every measurement of the store). Compared
    as they are: int() of an end of 1023.5 took in 1023."""
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and x[0] <= value <= x[-1]


def _pow2_key(value: int, cap: int = 64) -> int:
    """The largest power of two dividing value, capped: the series of the paper's figure 7."""
    return min(value & -value, cap)


# ---- GEMM: throughput along one dim, with tile and wave quantization marked ----------------------

def _gemm_align(m, n, k, layout: str, dtype: str, gpu: GPU) -> np.ndarray:
    """The worse alignment class of the two leading dims cuBLAS checks: A's (m for "tn", else k) and n."""
    m, n, k = np.broadcast_arrays(*(np.asarray(d, dtype=np.int64) for d in (m, n, k)))
    a_lead = m if layout == "tn" else k
    return np.maximum(_align_class(a_lead, dtype, gpu.align_bytes), _align_class(n, dtype, gpu.align_bytes))


def _align_labels(dtype: str, gpu: GPU) -> tuple[str, str, str]:
    """Words for alignment classes 0, 1 and 2 of a dtype: for bf16 "multiple of 8", "even", "odd"."""
    size = DTYPE_BYTES[dtype]
    per_vector = max(1, gpu.align_bytes // size)
    if size == 2:
        return f"multiple of {per_vector}", "even", "odd"
    if size == 1:
        return f"multiple of {per_vector}", "multiple of 4", "not a multiple of 4"
    return f"multiple of {per_vector}", f"not a multiple of {per_vector}", "unused"  # 4-byte dtypes: no class 2


def gemm_data(*, gpu: GPU | str | CostModel, dim: str = "n", values, m: int = 8192, n: int = 8192,
              k: int = 8192, layout: str = "nn", dtype: str = "bf16", measured=None) -> dict:
    """A GEMM's predicted throughput as one dim (m, n or k) sweeps `values`, the others fixed.

    tile_boundaries: the multiples of the tile edge along the swept dim within the sweep, for the
    tile the model chose at the largest x: one more x needs one more row or column of tiles.
    waves: ceil(tiles / SMs) at each x for that same tile, and wave_boundaries the last x of each
    wave count before it rises. One reference tile, not the tile chosen at each x, because the model
    switches to small tiles where they fill the SMs better (at m=k=8192, n=4352 it picks 128×64,
    33 waves of small tiles instead of 9 of 128×256), and wave counts of different tiles do not
    compare: with one tile, a rising count is a wave-quantization step of that kernel.
    measured_x/measured_tflops: the rows of `measured` with the fixed dims, layout and dtype (batch 1).
    """
    model = _model(gpu)
    gpu = model.gpu
    if dim not in ("m", "n", "k"):
        raise ShapewiseError(f"dim must be m, n or k, got {dim!r}")
    x = _whole_numbers(values, f"values of {dim}")
    dims = {"m": m, "n": n, "k": k}
    fixed = {d: int(v) for d, v in dims.items() if d != dim}
    dims[dim] = x
    pred = predict_gemm(dims["m"], dims["n"], dims["k"], gpu=model, dtype=dtype, layout=layout)

    tile = tuple(int(t) for t in pred.tile[-1])
    edge = {"m": tile[0], "n": tile[1]}.get(dim)  # tiles cut the output, m×n; k has no tile edge
    if edge:
        first = -(-int(x[0]) // edge) * edge
        tile_boundaries = np.arange(first, x[-1], edge, dtype=np.int64)
    else:
        tile_boundaries = np.array([], dtype=np.int64)
    m_arr, n_arr, _ = np.broadcast_arrays(np.asarray(dims["m"]), np.asarray(dims["n"]), x)
    tiles = -(-m_arr // tile[0]) * -(-n_arr // tile[1])
    waves = -(-tiles // gpu.num_sms)
    wave_boundaries = x[:-1][np.diff(waves) > 0]

    def points_of(rows, on):
        points = []
        for p, median, tflops in _measured_rows(rows, ("gemm",), on):
            if (p.get("layout") != layout or p.get("dtype") != dtype or p.get("batch", 1) != 1 or dim not in p
                    or any(p.get(d) != v for d, v in fixed.items()) or not _in_sweep(p[dim], x)):
                continue
            points.append((int(p[dim]), tflops if tflops is not None else 2.0 * p["m"] * p["n"] * p["k"] / (median * 1e9)))
        return points

    points = points_of(measured, gpu)
    mx, my = [p[0] for p in points], [p[1] for p in points]
    order = np.argsort(mx, kind="stable")
    measured_x = np.array(mx, dtype=np.int64)[order]
    measured_dims = {**fixed, dim: measured_x}
    return {
        "figure": "gemm", "gpu": gpu.name, "num_sms": gpu.num_sms, "dtype": dtype, "source": _source(len(mx)),
        "cost_model": model.source,
        "dim": dim, "fixed": fixed, "layout": layout,
        "x": x, "predicted_tflops": np.asarray(pred.tflops, dtype=float),
        "align_class": _gemm_align(dims["m"], dims["n"], dims["k"], layout, dtype, gpu),
        "align_labels": _align_labels(dtype, gpu),
        "tile": tile, "chosen_tile": np.asarray(pred.tile), "waves": waves,
        "tile_boundaries": tile_boundaries, "wave_boundaries": wave_boundaries,
        "measured_x": measured_x, "measured_tflops": np.array(my, dtype=float)[order],
        "measured_align_class": _gemm_align(measured_dims["m"], measured_dims["n"], measured_dims["k"], layout,
                                            dtype, gpu),
        "left_out": _left_out(measured, gpu, lambda rows: points_of(rows, None)),
    }


def _thin(values: np.ndarray, limit: int = MAX_BOUNDARY_LINES) -> np.ndarray:
    """At most `limit` of the values, evenly spread."""
    step = max(1, math.ceil(len(values) / limit))
    return values[::step]


def gemm_figure(data: dict):
    """Predicted TFLOP/s against the swept dim; predicted points (hollow) and measured ones (filled)
    coloured by alignment class; tile boundaries dotted and wave boundaries dashed."""
    fixed = ", ".join(f"{d} = {v}" for d, v in data["fixed"].items())
    fig, ax = figure(f"GEMM throughput, {fixed}, {data['layout']} layout, {data['dim']} swept", data)
    few = len(data["x"]) <= MARKED_POINTS
    # Faint in a long sweep: the curve of a misaligned one fills the area between its classes' levels.
    ax.plot(data["x"], data["predicted_tflops"], color="C0", linewidth=1.2, alpha=1.0 if few else 0.4,
            label="predicted")
    # Every predicted point marked in its class's colour, as the measured are: a sweep of one value draws
    # no line at all, and the teeth of a misaligned sweep's curve are its classes. Smaller in a long sweep.
    for cls in (0, 1, 2):
        chosen = data["align_class"] == cls
        if chosen.any():
            ax.plot(data["x"][chosen], data["predicted_tflops"][chosen], linestyle="none", marker="o",
                    markersize=4.5 if few else 2.5, markerfacecolor="none", markeredgecolor=ALIGN_COLOURS[cls],
                    markeredgewidth=0.9, label=f"predicted, {data['align_labels'][cls]}")
    for cls in (0, 1, 2):
        chosen = data["measured_align_class"] == cls
        if chosen.any():
            ax.scatter(data["measured_x"][chosen], data["measured_tflops"][chosen], s=14, zorder=3,
                       color=ALIGN_COLOURS[cls], label=f"measured, {data['align_labels'][cls]}")
    tile = "×".join(str(t) for t in data["tile"])
    for i, b in enumerate(_thin(data["tile_boundaries"])):
        ax.axvline(b, color="0.55", linestyle=":", linewidth=0.8, label=f"{tile} tile boundary" if i == 0 else None)
    for i, b in enumerate(_thin(data["wave_boundaries"])):
        ax.axvline(b, color="0.35", linestyle="--", linewidth=0.8,
                   label=f"wave boundary ({data['num_sms']} SMs, {tile} tiles)" if i == 0 else None)
    ax.set_xlabel(f"{data['dim']} (elements)")
    ax.set_ylabel("TFLOP/s")
    top = np.nanmax(np.concatenate([data["predicted_tflops"], data["measured_tflops"]]))
    ax.set_ylim(0, 1.08 * top if top > 0 else None)  # headroom: a point at the top is not cut in half
    # Under the axes, not in them: a sweep of misaligned dims fills every corner with its curve.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncols=3, fontsize="small", frameon=False)
    return fig


# ---- attention: figures 7 (against hidden size) and 8 (against head count) --------------------------

def _check_attention(kind: str, pass_: str, dtype: str) -> None:
    if kind not in ATTENTION_FIGURES:
        raise ShapewiseError(f"kind must be one of {', '.join(ATTENTION_FIGURES)}, got {kind!r}")
    if pass_ not in ATTENTION_PASSES:
        raise ShapewiseError(f"pass_ must be one of {', '.join(ATTENTION_PASSES)}, got {pass_!r}")
    if kind == "bmm" and pass_ != "fwd":
        raise ShapewiseError("the score BMM is drawn forward only: use pass_='fwd' with kind='bmm'")
    if dtype == "fp8":  # torch's fp8 GEMM, _scaled_mm, takes no batch, and SDPA no fp8 (dtypes.activation_dtype)
        what = "score BMM" if kind == "bmm" else "fused attention"
        raise ShapewiseError(f"no {what} runs in fp8 (torch._scaled_mm takes no batch, SDPA no fp8; an fp8 step runs "
                             f"its attention in bf16): give {argument('dtype')} bf16")


def _attention_tflops(kind: str, *, heads: np.ndarray, head_dims: np.ndarray, batch: int, seq: int, causal: bool,
                      pass_: str, model: CostModel, dtype: str) -> np.ndarray:
    """Predicted TFLOP/s of fused attention, or of its score BMM, per (heads, head dim) pair."""
    if kind == "bmm":
        # QKᵀ for every (sequence, head): (b·a) × (s×s×d), K read transposed.
        pred = predict_gemm(seq, seq, head_dims, batch=batch * heads, layout="nt", gpu=model, dtype=dtype)
        return np.asarray(pred.tflops, dtype=float).reshape(-1)
    out = []
    for a, d in zip(heads.tolist(), head_dims.tolist()):
        ms = predict_attention(batch=batch, heads=a, kv_heads=a, seq=seq, head_dim=d, causal=causal, pass_=pass_,
                               gpu=model, dtype=dtype)
        out.append(_attention_flops(batch, a, seq, d, causal=causal, pass_=pass_, dtype=dtype) / (ms * 1e9))
    return np.array(out, dtype=float)


def _attention_flops(batch: int, heads: int, seq: int, head_dim: int, *, causal: bool, pass_: str, dtype: str) -> int:
    """Matrix FLOPs of fused attention as the cost model and the attention bench count them."""
    passes = ("fwd",) if pass_ == "fwd" else ("fwd", "bwd")
    return sum(attention_op(p, seqs=batch, heads=heads, kv_heads=heads, q_len=seq, kv_len=seq, head_dim=head_dim,
                            causal=causal, dtype_bytes=DTYPE_BYTES[dtype]).flops for p in passes)


def _attention_measured(rows, *, kind: str, gpu: GPU | None, batch: int, seq: int, dtype: str, causal: bool, pass_: str):
    """(heads, head dim, TFLOP/s) of the measured rows of this attention case: bench "attention"
    with SDPA's default backend (what the cost model describes), or the "bmm" of the score product."""
    out = []
    if kind == "flash":
        for p, median, tflops in _measured_rows(rows, ("attention",), gpu):
            if (p.get("backend") == "default" and p.get("batch") == batch and p.get("seq") == seq
                    and p.get("dtype") == dtype and p.get("causal") == causal and p.get("pass") == pass_
                    and p.get("heads") is not None and p.get("kv_heads") == p.get("heads")):
                a, d = int(p["heads"]), int(p["head_dim"])
                if tflops is None:
                    flops = _attention_flops(batch, a, seq, d, causal=causal, pass_=pass_, dtype=dtype)
                    tflops = flops / (median * 1e9)
                out.append((a, d, tflops))
    else:
        for p, median, tflops in _measured_rows(rows, ("bmm",), gpu):
            bh = p.get("batch", 1)
            if (p.get("layout") == "nt" and p.get("m") == seq and p.get("n") == seq and p.get("dtype") == dtype
                    and bh % batch == 0):
                rate = tflops if tflops is not None else 2.0 * bh * seq * seq * p["k"] / (median * 1e9)
                out.append((bh // batch, int(p["k"]), rate))
    return out


def _attention_what(kind: str, *, batch: int, seq: int, causal: bool, pass_: str, heads: str) -> str:
    if kind == "bmm":
        return f"Attention score BMM QKᵀ, (b·a) × (s×s×d) nt, b = {batch}, {heads}, s = {seq}"
    passes = "forward" if pass_ == "fwd" else "forward + backward"
    return f"Fused attention (SDPA default), {passes}, b = {batch}, {heads}, s = {seq}{', causal' if causal else ''}"


def _series_label_pow2(key: int) -> str:
    if key == 1:
        return "h/a odd"
    return "h/a multiple of 64" if key >= 64 else f"h/a = {key} × odd"


def _split_series(keys: np.ndarray, x: np.ndarray, y: np.ndarray, label, extra: dict | None = None) -> dict:
    """{key: {"label", "x", "predicted_tflops", ...}} for each distinct key, in key order."""
    series = {}
    for key in sorted(set(keys.tolist())):
        chosen = keys == key
        series[key] = {"label": label(key), "x": x[chosen], "predicted_tflops": y[chosen],
                       **{name: values[chosen] for name, values in (extra or {}).items()}}
    return series


def _fused_caveats(head_dims: np.ndarray, kind: str, dtype: str, gpu: GPU) -> None:
    """Fused attention drawn where its kernels do not run as priced (past their head dims, at head dims not
    multiples of 8, in fp32 or tf32, on a GPU older than Ampere): each said once, as check says it."""
    from .rules import fused_caveats, gpu_caveats

    if kind == "flash":
        said = fused_caveats(head_dims.tolist(), dtype) + gpu_caveats(gpu, Workload(batch=1, seq=1, dtype=dtype))
        for caveat in said:
            warn(caveat)


def attention_data(*, gpu: GPU | str | CostModel, hiddens, heads: int, seq: int = 2048,
                   batch: int = 4, kind: str = "flash", dtype: str = "bf16", causal: bool = True, pass_: str = "fwd",
                   measured=None) -> dict:
    """Figure 7: attention throughput against hidden size h at a fixed head count a, one series per
    largest power of two dividing the head dim h/a (1, 2, 4, … 64, where 64 stands for 64 and up).

    kind "flash": fused attention as SDPA runs it by default; kind "bmm": its score product QKᵀ alone,
    (b·a) × (s×s×d) in nt layout. Hidden sizes that a does not divide are left out.
    """
    model = _model(gpu)
    gpu = model.gpu
    _check_attention(kind, pass_, dtype)
    x_all = _whole_numbers(hiddens, "hiddens")
    x = x_all[x_all % heads == 0]
    if x.size == 0:
        raise ShapewiseError(f"no hidden size of {argument('hiddens')} is a multiple of {heads} heads")
    _say_left_out(x_all[x_all % heads != 0], len(x_all), argument("hiddens"), f"not a multiple of {heads} heads")
    head_dims = x // heads
    _fused_caveats(head_dims, kind, dtype, gpu)
    y = _attention_tflops(kind, heads=np.full_like(x, heads), head_dims=head_dims, batch=batch, seq=seq, causal=causal,
                          pass_=pass_, model=model, dtype=dtype)
    keys = np.array([_pow2_key(int(d)) for d in head_dims], dtype=np.int64)
    def points_of(rows, on):
        return [(a * d, d, rate) for a, d, rate in _attention_measured(
            rows, kind=kind, gpu=on, batch=batch, seq=seq, dtype=dtype, causal=causal, pass_=pass_)
            if a == heads and _in_sweep(a * d, x)]

    points = sorted(points_of(measured, gpu))
    return {
        "figure": "attention", "gpu": gpu.name, "dtype": dtype, "source": _source(len(points)), "kind": kind,
        "cost_model": model.source,
        "what": _attention_what(kind, batch=batch, seq=seq, causal=causal, pass_=pass_, heads=f"a = {heads}"),
        "x_label": "hidden size h (elements)", "y_label": "TFLOP/s", "connect_series": False,
        "x": x, "head_dim": head_dims, "predicted_tflops": y, "series_key": keys,
        "series": _split_series(keys, x, y, _series_label_pow2, {"head_dim": head_dims}),
        "measured_x": np.array([p[0] for p in points], dtype=np.int64),
        "measured_tflops": np.array([p[2] for p in points], dtype=float),
        "measured_series": np.array([_pow2_key(p[1]) for p in points], dtype=np.int64),
        "left_out": _left_out(measured, gpu, lambda rows: points_of(rows, None)),
    }


def attention_heads_data(*, gpu: GPU | str | CostModel, head_dim, head_counts, seq: int = 2048,
                         batch: int = 4, kind: str = "flash", dtype: str = "bf16", causal: bool = True,
                         pass_: str = "fwd", measured=None) -> dict:
    """Figure 8: attention throughput against the head count a at a fixed head dim h/a (so the hidden
    size is head_dim × a), one series per head dim (head_dim: one, or several)."""
    model = _model(gpu)
    gpu = model.gpu
    _check_attention(kind, pass_, dtype)
    counts = _whole_numbers(head_counts, "head_counts")
    dims = _whole_numbers(head_dim, "head_dim")
    a = np.tile(counts, len(dims))
    d = np.repeat(dims, len(counts))
    for heads, dim in zip(a.tolist(), d.tolist()):  # the width the heads make, bounded as a hidden size is
        HIDDEN.check(heads * dim, f"head count {heads} × head dim {dim}")
    _fused_caveats(d, kind, dtype, gpu)
    y = _attention_tflops(kind, heads=a, head_dims=d, batch=batch, seq=seq, causal=causal, pass_=pass_, model=model,
                          dtype=dtype)
    def points_of(rows, on):
        return [(heads, dim, rate) for heads, dim, rate in _attention_measured(
            rows, kind=kind, gpu=on, batch=batch, seq=seq, dtype=dtype, causal=causal, pass_=pass_)
            if heads in counts and dim in dims]

    points = sorted(points_of(measured, gpu))
    return {
        "figure": "attention_heads", "gpu": gpu.name, "dtype": dtype, "source": _source(len(points)), "kind": kind,
        "cost_model": model.source,
        "what": _attention_what(kind, batch=batch, seq=seq, causal=causal, pass_=pass_, heads="h/a fixed"),
        "x_label": "attention heads a", "y_label": "TFLOP/s", "connect_series": True,
        "x": a, "head_dim": d, "hidden": a * d, "predicted_tflops": y, "series_key": d,
        "series": _split_series(d, a, y, lambda key: f"h/a = {key}", {"hidden": a * d}),
        "measured_x": np.array([p[0] for p in points], dtype=np.int64),
        "measured_tflops": np.array([p[2] for p in points], dtype=float),
        "measured_series": np.array([p[1] for p in points], dtype=np.int64),
        "left_out": _left_out(measured, gpu, lambda rows: points_of(rows, None)),
    }


def _series_figure(data: dict):
    """Each series in its colour, and the measured points in their series' colour, black-edged.

    Where a series is a curve of its own (one head count, one head dim) its points are joined. The
    power-of-two series of figure 7 interleave along one curve, so that curve is drawn once, in grey,
    and each series marks its points on it."""
    fig, ax = figure(data["what"], data)
    joined = data.get("connect_series", True)
    if not joined:
        ax.plot(data["x"], data["predicted_tflops"], color="0.7", linewidth=0.8, label="predicted")
    colours = {}
    for i, (key, s) in enumerate(data["series"].items()):
        colours[key] = f"C{i % 10}"
        ax.plot(s["x"], s["predicted_tflops"], color=colours[key], marker="o", markersize=3.5,
                linestyle="-" if joined else "none", linewidth=1,
                label=f"{s['label']} (predicted)" if joined else s["label"])
    if len(data["measured_x"]):
        ax.scatter(data["measured_x"], data["measured_tflops"], s=36, marker="D", edgecolors="black", zorder=3,
                   c=[colours.get(key, "0.5") for key in data["measured_series"].tolist()], label="measured")
    ax.set_xlabel(data["x_label"])
    ax.set_ylabel(data["y_label"])
    ax.set_ylim(bottom=0)
    ax.legend(loc="best", fontsize="small")
    return fig


def attention_figure(data: dict):
    """Figure 7 or 8, from attention_data or attention_heads_data."""
    return _series_figure(data)


# ---- one transformer layer, forward + backward ---------------------------------------------------

def _layer_shape(hidden: int, heads: int, mlp: str, seq: int) -> ModelShape:
    """A one-layer model: GPT-3's layer for plain MLPs (LayerNorm, biases, learned positions: what
    benchmarks/configs measured), Llama's for gated ones (RMSNorm, no biases, rotary embeddings)."""
    gated = MLP_KINDS[mlp] == 3
    return ModelShape(name=f"h{hidden}-a{heads}", hidden=hidden, num_layers=1, num_heads=heads, vocab=50304, mlp=mlp,
                      norm="rmsnorm" if gated else "layernorm", bias=not gated, learned_positions=0 if gated else seq)


def layer_data(*, gpu: GPU | str | CostModel, hiddens, head_counts, seq: int = 2048, batch: int = 4,
               mlp: str = "gelu", dtype: str = "bf16", measured=None) -> dict:
    """Predicted forward + backward throughput of one layer (its matrix FLOPs over its predicted
    time) against hidden size, one series per head count; hidden sizes a head count does not divide
    are left out. Measured points: rows of bench "layer" (pass "fwdbwd", flash attention) of these
    head counts and this MLP, their rate from the same FLOP count of the shape they measured."""
    model = _model(gpu)
    gpu = model.gpu
    if mlp not in MLP_KINDS:
        raise ShapewiseError(f"unknown MLP kind {mlp!r}; use one of {', '.join(MLP_KINDS)}")
    x_all = _whole_numbers(hiddens, "hiddens")
    counts = _whole_numbers(head_counts, "head_counts")
    workload = Workload(batch=batch, seq=seq, dtype=dtype, mode="train")
    # Every layer's ops in one predict_ops call: its GEMMs are then predicted in one vectorized pass.
    ops, spans = [], []
    for a in counts.tolist():
        for h in x_all[x_all % a == 0].tolist():
            layer = layer_ops(_layer_shape(h, a, mlp, seq), workload)
            spans.append((a, h, len(ops), len(ops) + len(layer)))
            ops += layer
    hiddens_name, counts_name = argument("hiddens"), argument("head_counts")
    if not spans:
        raise ShapewiseError(f"no hidden size of {hiddens_name} is a multiple of any head count of {counts_name}")
    _say_left_out(np.array([a for a in counts.tolist() if not np.any(x_all % a == 0)]), len(counts),
                  counts_name, f"a divisor of no hidden size of {hiddens_name}")
    _say_left_out(np.array([h for h in x_all.tolist() if not np.any(h % counts == 0)]), len(x_all),
                  hiddens_name, f"a multiple of no head count of {counts_name}")
    _fused_caveats(np.array([h // a for a, h, _, _ in spans]), "flash", dtype, model.gpu)
    costs = predict_ops(ops, gpu=model, dtype=dtype)
    heads = np.array([s[0] for s in spans], dtype=np.int64)
    x = np.array([s[1] for s in spans], dtype=np.int64)
    flops = np.array([sum(op.total_flops for op in ops[i:j]) for _, _, i, j in spans], dtype=float)
    ms = np.array([sum(c.total_ms for c in costs[i:j]) for _, _, i, j in spans])
    y = flops / (ms * 1e9)

    def points_of(rows, on):
        found = []
        for p, median, _ in _measured_rows(rows, ("layer",), on):
            if (p.get("pass") != "fwdbwd" or p.get("batch") != batch or p.get("seq") != seq or p.get("dtype") != dtype
                    or p.get("attention", "flash") != "flash" or not isinstance(p.get("shape"), dict)):
                continue
            try:
                shape = ModelShape(**p["shape"])
            except (ShapewiseError, TypeError):
                continue  # a shape this version cannot read is no point of this figure
            if shape.mlp != mlp or shape.num_heads not in counts or not _in_sweep(shape.hidden, x_all):
                continue
            layer_flops = sum(op.total_flops for op in layer_ops(shape, workload))
            found.append((shape.hidden, shape.num_heads, layer_flops / (median * 1e9)))
        return found

    points = sorted(points_of(measured, gpu))
    return {
        "figure": "layer", "gpu": gpu.name, "dtype": dtype, "source": _source(len(points)),
        "cost_model": model.source,
        "what": f"One transformer layer, forward + backward, b = {batch}, s = {seq}, {mlp} MLP",
        "x_label": "hidden size h (elements)", "y_label": "TFLOP/s (forward + backward)", "connect_series": True,
        "x": x, "heads": heads, "flops": flops, "predicted_ms": ms, "predicted_tflops": y, "series_key": heads,
        "series": _split_series(heads, x, y, lambda a: f"a = {a}", {"flops": flops, "predicted_ms": ms}),
        "measured_x": np.array([p[0] for p in points], dtype=np.int64),
        "measured_tflops": np.array([p[2] for p in points], dtype=float),
        "measured_series": np.array([p[1] for p in points], dtype=np.int64),
        "left_out": _left_out(measured, gpu, lambda rows: points_of(rows, None)),
    }


def layer_figure(data: dict):
    """Layer throughput against hidden size, one line per head count, measured points on top."""
    return _series_figure(data)


# ---- where a step's time goes, per mode ------------------------------------------------------------

def breakdown_data(shape: ModelShape, *, gpu: GPU | str | CostModel,
                   workloads: dict[str, Workload]) -> dict:
    """Predicted ms per op name for each mode's step (backward passes folded into their op's name),
    their shares of the step, and the stack the figure draws: ops under 2% of every mode's step
    merged into "other", so every bar has the same legend."""
    model = _model(gpu)
    gpu = model.gpu
    if not workloads:
        raise ShapewiseError("breakdown needs at least one workload, e.g. {'train': Workload(mode='train')}")
    modes, names, ms, totals = list(workloads), {}, {}, {}
    for mode, workload in workloads.items():
        step = predict_step(shape, workload, gpu=model)
        by_name = step.by_name()  # op name → ms, its backward passes included
        names[mode] = list(by_name)
        ms[mode] = np.array(list(by_name.values()), dtype=float)
        totals[mode] = step.time_ms
    shares = {mode: ms[mode] / totals[mode] for mode in modes}

    # The stack: every name in the order it first runs, kept where it reaches OTHER_BELOW anywhere.
    every = list(dict.fromkeys(name for mode in modes for name in names[mode]))
    share_of = {mode: dict(zip(names[mode], shares[mode].tolist())) for mode in modes}
    kept = [n for n in every if max(share_of[mode].get(n, 0.0) for mode in modes) >= OTHER_BELOW]
    stack = np.array([[share_of[mode].get(n, 0.0) for mode in modes] for n in kept]).reshape(len(kept), len(modes))
    rest = 1.0 - stack.sum(axis=0)
    if len(kept) < len(every):
        kept.append("other")
        stack = np.vstack([stack, rest])
    dtypes = ", ".join(dict.fromkeys(w.dtype for w in workloads.values()))
    return {
        "figure": "breakdown", "gpu": gpu.name, "dtype": dtypes, "source": "predicted",
        "cost_model": model.source, "model": shape.name,
        "modes": modes, "names": names, "ms": ms, "shares": shares, "total_ms": totals,
        "workloads": {mode: f"b = {w.batch}, s = {w.seq}, t = {w.tp}" for mode, w in workloads.items()},
        "stack_names": kept, "stack_shares": stack,
    }


def _ms_text(ms: float) -> str:
    """A step's time in the unit that reads: ms under 10 s, s under an hour, then hours."""
    if ms >= 3_600_000:
        return f"{ms / 3_600_000:,.1f} h"
    if ms >= 10_000:
        return f"{ms / 1000:,.1f} s"
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.3g} ms"


def breakdown_figure(data: dict):
    """One stacked bar per mode, as shares of that mode's step, each bar's total ms above it."""
    fig, ax = figure(f"{data['model']}: step time by op", data, size=(9, 5.2))
    positions = np.arange(len(data["modes"]))
    bottom = np.zeros(len(positions))
    cmap = colormap("tab20")
    for j, (name, heights) in enumerate(zip(data["stack_names"], data["stack_shares"])):
        colour = "0.75" if name == "other" else cmap(j % 20)
        ax.bar(positions, heights, 0.6, bottom=bottom, label=name, color=colour, edgecolor="white", linewidth=0.5)
        bottom = bottom + heights
    for i, mode in enumerate(data["modes"]):
        ax.text(i, 1.015, _ms_text(data["total_ms"][mode]), ha="center", va="bottom", fontsize="small")
    ax.set_xticks(positions, [f"{mode}\n{data['workloads'][mode]}" for mode in data["modes"]])
    ax.set_xlabel("mode")
    ax.set_ylabel("share of step time")
    ax.set_ylim(0, 1.1)
    handles, labels = ax.get_legend_handles_labels()
    # Top of the legend = top of the stack.
    ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return fig


# ---- suggestions: predicted against measured speedups ---------------------------------------------


def suggestions_data(suggestions, verified=None, *, gpu: GPU | str | CostModel) -> dict:
    """Labels ("original", then "#1 hidden 2560→2688, …"), predicted speedups per token (the
    original's is 1), and where `verified` (verify.Verification, in the order of the suggestions)
    is given, measured speedups with their confidence intervals (NaN for suggestions not verified)."""
    gpu = _gpu(gpu)
    # No shape faster beyond the model's error: the nearest ones, as `suggest` lists them, not a lone bar.
    none_faster = not suggestions.suggestions
    picked = list(suggestions.suggestions or suggestions.alternatives)
    verified = list(verified or ())
    if len(verified) > len(picked):
        raise ShapewiseError(f"{len(verified)} verifications for {len(picked)} suggestions: they are matched by order")
    labels = ["original", *(f"#{i} {change_text(s.changes)}" for i, s in enumerate(picked, 1))]
    measured, low, high = (np.full(len(labels), np.nan) for _ in range(3))
    if verified:
        measured[0] = low[0] = high[0] = 1.0  # the original is what every speedup is measured against
        for i, v in enumerate(verified, 1):
            measured[i], low[i], high[i] = v.measured_speedup, v.ci_low, v.ci_high
    original = suggestions.original
    w = original.workload
    return {
        "figure": "suggestions", "gpu": gpu.name, "dtype": w.dtype,
        "source": _source(len(verified)), "cost_model": suggestions.model.source, "model": original.shape.name,
        "workload": f"{w.mode}, b = {w.batch}, s = {w.seq}, t = {w.tp}", "none_faster": none_faster,
        "labels": labels,
        "predicted_speedup": np.array([1.0, *(s.speedup for s in picked)], dtype=float),
        "measured_speedup": measured, "ci_low": low, "ci_high": high,
    }


def verified_data(rows: list[dict], *, model: str, gpu: GPU | str, dtype: str = "bf16") -> dict:
    """suggestions_data's dict from the JSON rows of `shapewise verify --json` (candidate,
    predicted_speedup, measured_speedup, ci): a verify run drawn as it was measured. A null (under
    three rounds, no interval) is NaN. A row lacking a field, or with one of another kind, is refused by name."""
    if not isinstance(rows, list) or not rows:
        raise ShapewiseError("expected a non-empty list of verified candidates")
    for number, row in enumerate(rows, 1):
        _check_verified(row, number)
    gpu = _gpu(gpu)
    at = verified_at(rows)
    places = {row.get("measured_on") for row in rows}
    on = places.pop() if len(places) == 1 else None  # one device's name, as verify --json records it
    source = _source(len(rows)) if not isinstance(on, str) or not on else f"measured on {on[:40]} and predicted"

    def column(values) -> np.ndarray:
        return np.array([1.0, *(math.nan if v is None else float(v) for v in values)])

    return {
        "figure": "suggestions", "gpu": gpu.name, "dtype": dtype, "source": source, "model": model,
        **({"workload": f"train, b = {at['batch']}, s = {at['seq']}"} if "batch" in at and "seq" in at else {}),
        "labels": ["original", *(str(r["candidate"]) for r in rows)],
        "predicted_speedup": column(r["predicted_speedup"] for r in rows),
        "measured_speedup": column(r["measured_speedup"] for r in rows),
        "ci_low": column(r["ci"][0] for r in rows),
        "ci_high": column(r["ci"][1] for r in rows),
    }


# What a verify run records of where it measured and what it predicted for (verify.Verification.to_json), as
# the plot's flags name them.
VERIFIED_AT = {"batch": "--batch", "seq": "--seq", "dtype": "--dtype", "gpu": "--gpu"}


def verified_at(rows: list[dict]) -> dict:
    """The micro-batch, sequence length and dtype a verify run measured at, and the GPU it predicted for, as
    its rows record them; empty for a file written before verify --json gave them."""
    found = [tuple(row.get(name) for name in VERIFIED_AT) for row in rows]
    if any(at != found[0] for at in found):
        raise ShapewiseError("its candidates give different batch, seq and dtype: "
                             + ", ".join(str(at)[:60] for at in found[:3]))
    at = {name: value for name, value in zip(VERIFIED_AT, found[0]) if value is not None}
    for name in ("batch", "seq"):
        value = at.get(name, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ShapewiseError(f"{name} is {str(value)[:40]}, not a positive whole number")
    if not isinstance(at.get("dtype", "bf16"), str) or at.get("dtype", "bf16") not in DTYPE_BYTES:
        raise ShapewiseError(f"dtype is {str(at['dtype'])[:40]}, not one of {', '.join(DTYPE_BYTES)}")
    if "gpu" in at:
        from .hardware import GPUS

        if not isinstance(at["gpu"], str) or at["gpu"] not in {g.key for g in GPUS}:
            raise ShapewiseError(f"gpu is {str(at['gpu'])[:40]}, not a GPU of the table (`shapewise gpus`)")
    return at


def _check_verified(row, number: int) -> None:
    """A `verify --json` row as verified_data reads it: candidate, the speedups (numbers, or null where too
    few rounds ran) and ci (two of them)."""
    if not isinstance(row, dict):
        raise ShapewiseError(f"candidate {number} is not an object")
    missing = [name for name in ("candidate", "predicted_speedup", "measured_speedup", "ci") if name not in row]
    if missing:
        raise ShapewiseError(f"candidate {number} lacks the field{'s' if len(missing) > 1 else ''} "
                             f"{', '.join(missing)}")
    ci = row["ci"]
    if not isinstance(ci, list) or len(ci) != 2:
        raise ShapewiseError(f"candidate {number}: ci is {str(ci)[:40]}, not a list of two numbers")
    numbers = {"predicted_speedup": row["predicted_speedup"], "measured_speedup": row["measured_speedup"],
               "ci[0]": ci[0], "ci[1]": ci[1]}
    for name, value in numbers.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ShapewiseError(f"candidate {number}: {name} is {str(value)[:40]}, not a number")
    changes = row.get("changes")
    if changes is not None and not (isinstance(changes, dict) and all(
            isinstance(pair, list) and len(pair) == 2 for pair in changes.values())):
        raise ShapewiseError(f"candidate {number}: changes is not an object of [original, candidate] pairs")


# The fields of a suggestion's changes (search._changes' names), as a shape holds them.
CHANGED_FIELDS = {"hidden": "hidden", "layers": "num_layers", "heads": "num_heads", "kv_heads": "kv_heads",
                  "head_dim": "d_head", "vocab": "vocab"}


def _verified_changes(row: dict) -> dict:
    """A verify row's changes, field -> [original's, candidate's]: its "changes" (null for a `--config`
    candidate, which names none). A file written before verify --json gave them has the label alone,
    "#1 heads 32→20, head dim 80→128" (search.change_text), and its changes are read back from it."""
    if "changes" in row:
        return row["changes"] or {}
    label = str(row["candidate"])
    if not label.startswith("#"):  # "config other.json": no change named
        return {}
    changes = {}
    for change in label.split(" ", 1)[-1].split(", "):
        name, _, values = change.rpartition(" ")
        old, arrow, new = values.partition("→")
        if arrow:
            changes[name.replace(" ", "_")] = (old, new)  # "head dim": head_dim
    return changes


def verified_model_mismatch(rows: list[dict], shape: ModelShape) -> str:
    """Where a verify run's candidates say its original differs from `shape` ("" where they agree, or
    where none says: a `--config` candidate names no change). Each suggestion names the original's
    value of what it changes."""
    have = {name: getattr(shape, field) for name, field in CHANGED_FIELDS.items()}
    have["ffn"] = shape.mlp_width
    for row in rows:
        for name, (old, _) in _verified_changes(row).items():
            if name in have and str(old) != str(have[name]):
                return f"its candidates change {change_text({name: (old, '…')})}, but {shape.name} has {have[name]}"
    return ""


def suggestions_figure(data: dict):
    """Predicted and measured speedup per token side by side, the measured ones with their interval."""
    what = "no faster shape: the nearest ones" if data.get("none_faster") else "suggested shapes"
    workload = f" ({data['workload']})" if data.get("workload") else ""
    # 1.45 inches a bar: its label wrapped at 18 characters fits under it without touching the next.
    fig, ax = figure(f"{data['model']}: {what}{workload}", data, size=(max(6.0, 1.45 * len(data["labels"]) + 2), 5))
    x = np.arange(len(data["labels"]))
    width = 0.38
    done = np.isfinite(data["measured_speedup"])
    # Side by side where something was measured; alone, the predicted bars stand centred on their label.
    predicted = ax.bar(x - width / 2 if done.any() else x, data["predicted_speedup"], width, label="predicted",
                       color="C0")
    # Each speedup written on its bar: a few percent is all a shape of the same size gains, too little to read off.
    ax.bar_label(predicted, [f"{v:.3f}×" for v in data["predicted_speedup"]], fontsize="x-small", padding=2)
    ax.set_xlim(-0.75, len(x) - 0.25)  # a bar keeps its width alone
    if done.any():
        mid = data["measured_speedup"][done]
        ax.bar(x[done] + width / 2, mid, width, color="C1", label="measured (95% interval)",
               yerr=[mid - data["ci_low"][done], data["ci_high"][done] - mid], capsize=3)
    ax.axhline(1.0, color="0.4", linestyle=":", linewidth=0.8)
    ax.set_xticks(x, [textwrap.fill(label, 18) for label in data["labels"]], fontsize="small")
    ax.set_ylabel("speedup per token (×)")
    # Headroom above the tallest bar or interval, for the legend to sit in without covering a bar.
    top = np.nanmax(np.concatenate([data["predicted_speedup"], data["ci_high"]]))
    ax.set_ylim(0, top * 1.2)
    ax.legend(loc="upper left", ncols=2, fontsize="small")
    return fig
