"""plots: the data behind each figure is right, and each figure draws exactly that data.

Data tests need numpy only; figure tests skip where matplotlib is missing."""

import csv
import gc
import json
import os
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest

from shapewise import plots
from shapewise.errors import ShapewiseError
from shapewise.hardware import get_gpu
from shapewise.presets import get_model
from shapewise.search import suggest
from shapewise.shapes import Workload
from shapewise.verify import Verification

H200 = get_gpu("h200")
BENCH_CSV = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "h200-bench.csv"


@pytest.fixture
def mpl():
    return pytest.importorskip("matplotlib")


def h200_rows() -> list[dict]:
    """The committed H200 export, as the store's rows() gives them (the fields plots reads)."""
    rows = []
    with open(BENCH_CSV, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            rows.append({"bench": row["bench"], "params": json.loads(row["key"]),
                         "median_ms": float(row["median_ms"]) if row["median_ms"] else None,
                         "tflops": float(row["tflops"]) if row["tflops"] else None,
                         "error": row["error"] or None, "gpu_name": row["gpu_name"]})
    return rows


def gemm_row(m, n, k, tflops, **changes) -> dict:
    params = {"bench": "gemm", "m": m, "n": n, "k": k, "batch": 1, "layout": "nn", "dtype": "bf16"}
    params.update(changes)
    return {"params": params, "median_ms": 2.0 * m * n * k / (tflops * 1e9), "tflops": tflops}


# ---- GEMM --------------------------------------------------------------------------------------

def test_gemm_alignment_classes_and_the_odd_cliff():
    data = plots.gemm_data(gpu="h200", dim="n", values=range(4088, 4105))
    x, cls, rate = data["x"], data["align_class"], data["predicted_tflops"]
    assert list(x) == list(range(4088, 4105))
    at = {int(v): i for i, v in enumerate(x)}
    assert cls[at[4096]] == 0 and cls[at[4104]] == 0
    assert cls[at[4098]] == 1 and cls[at[4100]] == 1
    assert cls[at[4097]] == 2 and cls[at[4099]] == 2
    assert rate[at[4097]] < 0.3 * rate[at[4096]]
    assert rate[at[4098]] < rate[at[4096]]
    assert data["align_labels"] == ("multiple of 8", "even", "odd")
    assert data["source"] == "predicted" and data["gpu"] == H200.name


def test_gemm_alignment_follows_the_leading_dims():
    # In "nn" m leads nothing: an odd m is as aligned as an even one. In "tn" it leads A.
    nn = plots.gemm_data(gpu="h200", dim="m", values=[4096, 4097], layout="nn")
    tn = plots.gemm_data(gpu="h200", dim="m", values=[4096, 4097], layout="tn")
    assert list(nn["align_class"]) == [0, 0]
    assert list(tn["align_class"]) == [0, 2]


def test_gemm_tile_boundaries_are_multiples_of_the_tile():
    for dim, side in (("n", 1), ("m", 0)):
        data = plots.gemm_data(gpu="h200", dim=dim, values=np.arange(64, 8193, 64))
        edge = data["tile"][side]
        bounds = data["tile_boundaries"]
        assert len(bounds) > 0
        assert np.all(bounds % edge == 0)
        assert bounds.min() >= 64 and bounds.max() < 8192
        assert np.all(np.diff(bounds) == edge)  # every one of them in the range
        assert tuple(data["chosen_tile"][-1]) == data["tile"]  # the tile chosen at the largest x
    # Tiles cut the output (m×n): a k sweep crosses none.
    assert len(plots.gemm_data(gpu="h200", dim="k", values=np.arange(64, 8193, 64))["tile_boundaries"]) == 0


def test_gemm_waves_rise_with_x_at_tile_boundaries():
    data = plots.gemm_data(gpu="h200", dim="n", values=range(3000, 6001))
    waves, x = data["waves"], data["x"]
    assert np.all(np.diff(waves) >= 0)
    tm, tn = data["tile"]
    assert np.array_equal(waves, -(-(-(-8192 // tm) * -(-x // tn)) // H200.num_sms))
    bounds = data["wave_boundaries"]
    assert len(bounds) > 0
    # Each is the last x of its wave count; with one tile, counts change only where tiles do.
    for b in bounds:
        i = int(np.flatnonzero(x == b)[0])
        assert waves[i + 1] == waves[i] + 1
    assert set(bounds.tolist()) <= set(data["tile_boundaries"].tolist())


def test_gemm_measured_rows_match_only_the_fixed_dims():
    rows = [
        gemm_row(8192, 4096, 8192, 700.0),
        gemm_row(8192, 4097, 8192, 130.0),
        gemm_row(8192, 4098, 4096, 500.0),  # other k
        gemm_row(4096, 4099, 8192, 500.0),  # other m
        gemm_row(8192, 4100, 8192, 500.0, layout="nt"),
        gemm_row(8192, 4101, 8192, 500.0, dtype="fp16"),
        gemm_row(8192, 4102, 8192, 500.0, batch=2, bench="bmm"),
        {**gemm_row(8192, 4103, 8192, 500.0), "error": "CUDA out of memory"},
        {**gemm_row(8192, 4104, 8192, 500.0), "gpu_name": "NVIDIA A100-SXM4-80GB"},  # another GPU
        {**gemm_row(8192, 4092, 8192, 600.0), "gpu_name": "NVIDIA H200", "bench": "gemm"},
        {**gemm_row(8192, 4088, 8192, 650.0), "tflops": None},  # rate from the time
    ]
    data = plots.gemm_data(gpu="h200", dim="n", values=range(4088, 4105), measured=rows)
    assert data["measured_x"].tolist() == [4088, 4092, 4096, 4097]
    assert np.allclose(data["measured_tflops"], [650.0, 600.0, 700.0, 130.0])
    assert data["measured_align_class"].tolist() == [0, 1, 0, 2]  # 4092 = 4 × 1023: even, not 8-aligned
    assert data["source"] == "measured and predicted"
    assert plots.gemm_data(gpu="h200", values=[4096], measured=rows[2:9])["source"] == "predicted"


def test_gemm_data_rejects_bad_input():
    with pytest.raises(ShapewiseError, match="dim"):
        plots.gemm_data(gpu="h200", dim="q", values=[64])
    with pytest.raises(ShapewiseError):
        plots.gemm_data(gpu="h200", values=[])
    with pytest.raises(ShapewiseError):
        plots.gemm_data(gpu="h200", values=[0, 64])


def test_data_functions_do_not_import_matplotlib():
    src = Path(plots.__file__).resolve().parents[1]
    code = ("import sys; from shapewise import plots; plots.gemm_data(gpu='h200', values=[4096, 4097]); "
            "plots.attention_data(gpu='h200', hiddens=[4096], heads=32); "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    env = {**os.environ, "PYTHONPATH": str(src)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


# ---- attention ----------------------------------------------------------------------------------

def test_attention_series_are_largest_powers_of_two_of_the_head_dim():
    hiddens = list(range(1000, 8193, 8))  # many not multiples of 32: left out
    data = plots.attention_data(gpu="h200", hiddens=hiddens, heads=32)
    assert np.all(data["x"] % 32 == 0)
    assert len(data["x"]) == sum(h % 32 == 0 for h in hiddens)
    assert set(data["series"]) <= {1, 2, 4, 8, 16, 32, 64}
    assert len(data["series"]) == 7
    total = 0
    for key, s in data["series"].items():
        for h in s["x"].tolist():
            d = h // 32
            largest = d & -d
            assert (largest >= 64) if key == 64 else (largest == key), (key, h)
        total += len(s["x"])
    assert total == len(data["x"])
    assert np.all((data["predicted_tflops"] > 0) & (data["predicted_tflops"] < H200.peak_tflops("bf16")))


def test_attention_flash_and_bmm_measured_points_from_the_h200_export():
    rows = h200_rows()
    hiddens = [32 * d for d in (64, 80, 96, 128, 160, 192, 256)]
    flash = plots.attention_data(gpu="h200", hiddens=hiddens, heads=32, measured=rows)
    # The default backend's forward rows only (not flash, cudnn or unfused, not fwdbwd).
    assert flash["measured_x"].tolist() == hiddens
    assert flash["measured_tflops"][0] == pytest.approx(363.98026562482096)
    assert flash["source"] == "measured and predicted"
    both = plots.attention_data(gpu="h200", hiddens=hiddens, heads=32, pass_="fwdbwd", measured=rows)
    assert both["measured_tflops"][0] == pytest.approx(327.69, rel=1e-4)
    bmm = plots.attention_data(gpu="h200", hiddens=hiddens, heads=32, kind="bmm", measured=rows)
    assert bmm["measured_x"].tolist() == [32 * d for d in (64, 80, 96, 128, 160, 256)]  # nt rows, k = d
    assert bmm["measured_tflops"][0] == pytest.approx(209.96125552391803)
    # Another head count, or another batch, matches none of them.
    assert len(plots.attention_data(gpu="h200", hiddens=hiddens, heads=16, measured=rows)["measured_x"]) == 0
    assert len(plots.attention_data(gpu="h200", hiddens=hiddens, heads=32, batch=8, kind="bmm",
                                    measured=rows)["measured_x"]) == 0


def test_attention_bmm_is_the_score_gemm():
    from shapewise.cost import predict_gemm

    data = plots.attention_data(gpu="h200", hiddens=[2048, 2560], heads=32, kind="bmm", seq=1024, batch=2)
    expected = predict_gemm(1024, 1024, np.array([64, 80]), batch=64, layout="nt", gpu="h200").tflops
    assert np.allclose(data["predicted_tflops"], expected)
    with pytest.raises(ShapewiseError):
        plots.attention_data(gpu="h200", hiddens=[2048], heads=32, kind="bmm", pass_="fwdbwd")
    with pytest.raises(ShapewiseError):
        plots.attention_data(gpu="h200", hiddens=[2048], heads=32, kind="sdpa")


def test_attention_heads_data_fixes_the_head_dim():
    rows = h200_rows()
    data = plots.attention_heads_data(gpu="h200", head_dim=[64, 128], head_counts=[8, 16, 32, 64], measured=rows)
    assert list(data["series"]) == [64, 128]
    for d, s in data["series"].items():
        assert s["x"].tolist() == [8, 16, 32, 64]
        assert s["hidden"].tolist() == [d * a for a in (8, 16, 32, 64)]
    assert data["measured_x"].tolist() == [32, 32]
    assert data["measured_series"].tolist() == [64, 128]
    single = plots.attention_heads_data(gpu="h200", head_dim=128, head_counts=[16, 32])
    assert list(single["series"]) == [128] and single["source"] == "predicted"


# ---- layer --------------------------------------------------------------------------------------

def test_layer_data_counts_one_layers_matrix_flops():
    b, s = 4, 2048
    data = plots.layer_data(gpu="h200", hiddens=[1000, 2048, 2560, 4096], head_counts=[16, 32], seq=s, batch=b)
    assert list(data["series"]) == [16, 32]
    assert data["series"][16]["x"].tolist() == [2048, 2560, 4096]  # 1000 is no multiple of 16
    assert data["series"][32]["x"].tolist() == [2048, 2560, 4096]
    for series in data["series"].values():
        h = series["x"].astype(float)
        # Forward: 24·b·s·h² for the projections and MLP, 2·b·s(s+1)·h for causal attention (query i sees
        # keys 0..i); backward adds twice the projections' and 2.5× attention's: no embedding, logits or loss.
        assert np.allclose(series["flops"], 72 * b * s * h ** 2 + 7 * b * s * (s + 1) * h)
        assert np.allclose(series["predicted_tflops"], series["flops"] / (series["predicted_ms"] * 1e9))
        assert np.all(series["predicted_tflops"] < H200.peak_tflops("bf16"))


def test_layer_measured_points_from_the_h200_export():
    rows = h200_rows()
    data = plots.layer_data(gpu="h200", hiddens=range(1024, 8193, 512), head_counts=[16, 20, 32, 40, 64], measured=rows)
    pairs = list(zip(data["measured_x"].tolist(), data["measured_series"].tolist()))
    assert pairs == [(2048, 16), (2048, 32), (2560, 20), (2560, 32), (2560, 40), (4096, 32), (4096, 64)]
    # gpt-h2048-a16 forward + backward took 4.38976 ms (the fwd rows are not drawn).
    flops = 72 * 4 * 2048 * 2048.0 ** 2 + 7 * 4 * 2048 * 2049 * 2048
    median = next(r["median_ms"] for r in rows if r["bench"] == "layer" and r["params"]["model"] == "gpt-h2048-a16"
                  and r["params"]["pass"] == "fwdbwd")
    assert data["measured_tflops"][0] == pytest.approx(flops / (median * 1e9))
    # Only the head counts asked for, only the MLP asked for.
    assert len(plots.layer_data(gpu="h200", hiddens=[2048], head_counts=[16], mlp="swiglu",
                                measured=rows)["measured_x"]) == 0
    only_64 = plots.layer_data(gpu="h200", hiddens=[2048, 4096], head_counts=[64], measured=rows)
    assert only_64["measured_x"].tolist() == [4096]


def test_measured_points_stay_within_the_sweep():
    """A measurement beyond the swept range is no point of the figure: drawn, it stretched the axis past
    what was asked, and a sweep of one value showed every measurement the store holds along that dim."""
    rows = h200_rows()
    gemm = plots.gemm_data(gpu="h200", values=[4096], measured=rows)
    assert gemm["measured_x"].tolist() == [4096]
    assert plots.gemm_data(gpu="h200", values=range(4090, 4099), measured=rows)["measured_x"].tolist() == list(
        range(4090, 4099))
    attention = plots.attention_data(gpu="h200", hiddens=[2048, 2560], heads=32, measured=rows)
    assert attention["measured_x"].tolist() == [2048, 2560]
    bmm = plots.attention_data(gpu="h200", hiddens=[2048], heads=32, kind="bmm", measured=rows)
    assert bmm["measured_x"].tolist() == [2048]
    layer = plots.layer_data(gpu="h200", hiddens=[2048], head_counts=[16, 32, 64], measured=rows)
    assert layer["measured_x"].tolist() == [2048, 2048]


# ---- breakdown ----------------------------------------------------------------------------------

WORKLOADS = {"train": Workload(mode="train"), "prefill": Workload(mode="prefill"), "decode": Workload(mode="decode")}


def test_breakdown_shares_sum_to_one_with_backward_folded():
    from shapewise.cost import predict_step

    shape = get_model("llama3-8b")
    data = plots.breakdown_data(shape, gpu="h200", workloads=WORKLOADS)
    assert data["modes"] == ["train", "prefill", "decode"]
    for mode, workload in WORKLOADS.items():
        assert data["shares"][mode].sum() == pytest.approx(1.0)
        assert data["ms"][mode].sum() == pytest.approx(data["total_ms"][mode])
        assert data["total_ms"][mode] == pytest.approx(predict_step(shape, workload, gpu="h200").time_ms)
        assert len(set(data["names"][mode])) == len(data["names"][mode])
    train = data["names"]["train"]
    assert not any("." in name for name in train)  # no .dgrad, .wgrad or .bwd: folded into their op
    assert "attn/qkv" in train and "loss" in train
    assert "loss" not in data["names"]["decode"]
    # The stack: columns sum to 1, and only ops reaching 2% somewhere stand alone.
    assert np.allclose(data["stack_shares"].sum(axis=0), 1.0)
    for name, shares in zip(data["stack_names"], data["stack_shares"]):
        if name != "other":
            assert shares.max() >= plots.OTHER_BELOW
    assert data["stack_names"][-1] == "other"
    with pytest.raises(ShapewiseError):
        plots.breakdown_data(shape, gpu="h200", workloads={})


# ---- suggestions --------------------------------------------------------------------------------

def fake_verifications(suggestions, count):
    out = []
    for i, s in enumerate(suggestions.suggestions[:count]):
        measured = s.speedup * (0.9 + 0.02 * i)
        out.append(Verification("model", f"#{i + 1}", s.candidate.shape, s.candidate.workload, s.speedup, measured,
                                measured - 0.03, measured + 0.04, 100.0, 0.0))
    return out


def test_suggestions_data_starts_with_the_original():
    result = suggest(get_model("gpt3-2.7b"), Workload(), gpu="h200", top=4)
    data = plots.suggestions_data(result, gpu="h200")
    assert data["labels"][0] == "original" and data["predicted_speedup"][0] == 1.0
    assert len(data["labels"]) == 1 + len(result.suggestions)
    assert data["labels"][1].startswith("#1 ") and "→" in data["labels"][1]
    assert np.allclose(data["predicted_speedup"][1:], [s.speedup for s in result.suggestions])
    assert np.all(np.isnan(data["measured_speedup"])) and data["source"] == "predicted"

    verified = fake_verifications(result, 2)
    data = plots.suggestions_data(result, verified, gpu="h200")
    assert data["measured_speedup"][0] == 1.0
    assert data["measured_speedup"][1:3].tolist() == [v.measured_speedup for v in verified]
    assert data["ci_low"][2] == verified[1].ci_low and data["ci_high"][2] == verified[1].ci_high
    assert np.all(np.isnan(data["measured_speedup"][3:]))
    assert data["source"] == "measured and predicted"
    with pytest.raises(ShapewiseError):
        plots.suggestions_data(result, fake_verifications(result, 4) * 2, gpu="h200")


# ---- figures ------------------------------------------------------------------------------------

def scatter_points(ax) -> np.ndarray:
    return np.concatenate([c.get_offsets() for c in ax.collections]) if ax.collections else np.empty((0, 2))


def check_title(ax, data):
    title = ax.get_title()
    assert data["gpu"] in title and "H200" in title
    assert data["dtype"] in title and data["source"] in title


def test_gemm_figure_draws_the_data(mpl):
    rows = [gemm_row(8192, n, 8192, 700.0 if n % 8 == 0 else 150.0) for n in (4094, 4095, 4096, 4097)]
    data = plots.gemm_data(gpu="h200", dim="n", values=range(3000, 6001), measured=rows)
    fig = plots.gemm_figure(data)
    ax = fig.axes[0]
    assert np.array_equal(ax.lines[0].get_xdata(), data["x"])
    assert np.array_equal(ax.lines[0].get_ydata(), data["predicted_tflops"])
    # One scatter per alignment class, in class order: 4096 (aligned), 4094 (even), 4095 and 4097 (odd).
    points = scatter_points(ax)
    assert points[:, 0].tolist() == [4096, 4094, 4095, 4097]
    assert points[:, 1].tolist() == [700.0, 150.0, 150.0, 150.0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("multiple of 8" in t for t in labels) and any("even" in t for t in labels)
    assert any("odd" in t for t in labels)
    dotted = [line.get_xdata()[0] for line in ax.lines[1:] if line.get_linestyle() == ":"]
    dashed = [line.get_xdata()[0] for line in ax.lines[1:] if line.get_linestyle() == "--"]
    assert dotted == data["tile_boundaries"].tolist()
    assert dashed == data["wave_boundaries"].tolist()
    check_title(ax, data)
    assert "TFLOP/s" in ax.get_ylabel() and "n" in ax.get_xlabel() and "elements" in ax.get_xlabel()


def test_gemm_figure_shows_a_single_value_and_keeps_its_legend_off_the_curve(mpl):
    data = plots.gemm_data(gpu="v100", dim="n", values=[4096], dtype="fp16")
    fig = plots.gemm_figure(data)
    ax = fig.axes[0]
    marked = [line for line in ax.lines if line.get_marker() == "o"]  # one point: a line alone draws nothing
    assert [line.get_xdata().tolist() for line in marked] == [[4096]]
    dense = plots.gemm_figure(plots.gemm_data(gpu="v100", dim="n", values=range(1000, 1101), dtype="fp16"))
    fig.draw_without_rendering()
    dense.draw_without_rendering()
    for figure in (fig, dense):  # the legend under the axes: a misaligned sweep's curve fills every corner
        ax = figure.axes[0]
        legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
        assert legend.y1 <= box.y0
        assert legend.y0 >= 0 and ax.title.get_window_extent().x0 >= 0  # nothing cut off
        assert ax.get_ylim()[1] > data["predicted_tflops"].max()


def test_gemm_figure_limits_boundary_lines(mpl):
    data = plots.gemm_data(gpu="h200", dim="m", values=range(64, 32769, 64))
    assert len(data["tile_boundaries"]) > plots.MAX_BOUNDARY_LINES
    ax = plots.gemm_figure(data).axes[0]
    dotted = [line for line in ax.lines if line.get_linestyle() == ":"]
    assert 0 < len(dotted) <= plots.MAX_BOUNDARY_LINES


def test_attention_and_layer_figures_draw_the_data(mpl):
    rows = h200_rows()
    fig7 = plots.attention_data(gpu="h200", hiddens=range(1024, 8193, 64), heads=32, measured=rows)
    fig8 = plots.attention_heads_data(gpu="h200", head_dim=[64, 128], head_counts=[8, 16, 32, 64], measured=rows)
    layer = plots.layer_data(gpu="h200", hiddens=range(1024, 8193, 256), head_counts=[16, 32], measured=rows)
    for data, figure in ((fig7, plots.attention_figure), (fig8, plots.attention_figure), (layer, plots.layer_figure)):
        ax = figure(data).axes[0]
        series_lines = ax.lines[-len(data["series"]):]
        for line, s in zip(series_lines, data["series"].values()):
            assert np.array_equal(line.get_xdata(), s["x"])
            assert np.array_equal(line.get_ydata(), s["predicted_tflops"])
        points = scatter_points(ax)
        assert np.array_equal(points[:, 0], data["measured_x"])
        assert np.allclose(points[:, 1], data["measured_tflops"])
        check_title(ax, data)
        assert "TFLOP/s" in ax.get_ylabel() and ax.get_xlabel()
    # Figure 7 draws the whole predicted curve first, the series as markers on it.
    ax = plots.attention_figure(fig7).axes[0]
    assert np.array_equal(ax.lines[0].get_ydata(), fig7["predicted_tflops"])


def test_breakdown_figure_stacks_the_shares(mpl):
    data = plots.breakdown_data(get_model("gpt3-2.7b"), gpu="h200", workloads=WORKLOADS)
    ax = plots.breakdown_figure(data).axes[0]
    modes = len(data["modes"])
    heights = np.array([p.get_height() for p in ax.patches]).reshape(len(data["stack_names"]), modes)
    assert np.allclose(heights, data["stack_shares"])
    tops = np.array([p.get_y() + p.get_height() for p in ax.patches]).reshape(-1, modes)
    assert np.allclose(tops[-1], 1.0)
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == modes and all(t.endswith(" ms") for t in texts)
    assert ax.get_ylabel() == "share of step time"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == data["stack_names"][::-1]
    check_title(ax, data)


def test_suggestions_figure_says_the_workload_each_speedup_and_the_nearest_when_none_is_faster(mpl):
    result = suggest(get_model("llama3-8b"), Workload(), gpu="h200", top=3)
    assert not result.suggestions and result.alternatives  # none faster beyond error: a lone "original" bar
    data = plots.suggestions_data(result, gpu="h200")
    assert data["none_faster"] and len(data["labels"]) == 1 + len(result.alternatives)
    assert np.allclose(data["predicted_speedup"][1:], [s.speedup for s in result.alternatives])
    ax = plots.suggestions_figure(data).axes[0]
    assert "no faster shape" in ax.get_title() and "train, b = 4, s = 2048, t = 1" in ax.get_title()
    assert [t.get_text() for t in ax.texts] == [f"{v:.3f}×" for v in data["predicted_speedup"]]
    decode = suggest(get_model("gpt3-2.7b"), Workload(mode="decode", tp=2), gpu="h200", top=2)
    assert "(decode, b = 4, s = 2048, t = 2)" in plots.suggestions_figure(
        plots.suggestions_data(decode, gpu="h200")).axes[0].get_title()


def test_suggestions_figure_labels_do_not_overlap(mpl):
    rows = json.loads((BENCH_CSV.parent / "h200-verify" / "verify-gpt3-2.7b.json").read_text())
    fig = plots.suggestions_figure(plots.verified_data(rows, model="gpt3-2.7b", gpu="h200"))
    fig.draw_without_rendering()
    boxes = [t.get_window_extent() for t in fig.axes[0].get_xticklabels()]
    assert all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:]))


def test_suggestions_figure_bars_and_intervals(mpl):
    result = suggest(get_model("gpt3-2.7b"), Workload(), gpu="h200", top=3)
    data = plots.suggestions_data(result, fake_verifications(result, 2), gpu="h200")
    ax = plots.suggestions_figure(data).axes[0]
    heights = [p.get_height() for p in ax.patches]
    n = len(data["labels"])
    assert np.allclose(heights[:n], data["predicted_speedup"])
    assert np.allclose(heights[n:], data["measured_speedup"][:3])  # the original and the two verified
    measured = [c for c in ax.containers if c.get_label() == "measured (95% interval)"]
    assert len(measured) == 1 and measured[0].errorbar is not None
    segments = measured[0].errorbar.lines[2][0].get_segments()
    assert np.allclose([s[0][1] for s in segments], data["ci_low"][:3])
    assert np.allclose([s[1][1] for s in segments], data["ci_high"][:3])
    check_title(ax, data)
    assert "speedup" in ax.get_ylabel()


def test_save_png_and_svg_and_reject_others(mpl, tmp_path):
    import matplotlib.pyplot as plt

    fig = plots.gemm_figure(plots.gemm_data(gpu="h200", values=[4096, 4097, 4098]))
    png = plots.save(fig, tmp_path / "gemm.png")
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    svg = plots.save(fig, tmp_path / "gemm.SVG")  # the same figure again, another format
    assert b"<svg" in svg.read_bytes()[:2000]
    with pytest.raises(ShapewiseError, match=r"\.png or \.svg"):
        plots.save(fig, tmp_path / "gemm.jpg")
    assert not (tmp_path / "gemm.jpg").exists()
    assert plots.png_bytes(fig).startswith(b"\x89PNG")
    with pytest.raises(ShapewiseError, match="cannot write"):
        plots.save(fig, tmp_path / "no" / "such" / "folder.png")
    # Nothing keeps a saved figure alive: no pyplot registry, no module cache.
    assert plt.get_fignums() == []
    ref = weakref.ref(fig)
    del fig
    gc.collect()
    assert ref() is None


def test_gemm_figure_from_the_committed_h200_export(mpl, tmp_path):
    rows = []
    with open(BENCH_CSV, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["median_ms"]:
                rows.append({"params": json.loads(row["key"]), "median_ms": float(row["median_ms"]),
                             "tflops": float(row["tflops"]) if row["tflops"] else None})
    data = plots.gemm_data(gpu="h200", dim="n", values=np.arange(64, 8193, 64), m=8192, k=8192, layout="nn",
                           measured=rows)
    assert len(data["measured_x"]) >= 100
    assert data["source"] == "measured and predicted"
    # The misaligned n (4088…4104 odd and even) measured far below their aligned neighbours.
    aligned = data["measured_tflops"][data["measured_align_class"] == 0]
    odd = data["measured_tflops"][data["measured_align_class"] == 2]
    assert len(odd) >= 8 and odd.max() < 0.5 * np.median(aligned)
    fig = plots.gemm_figure(data)
    assert len(scatter_points(fig.axes[0])) == len(data["measured_x"])
    assert plots.save(fig, tmp_path / "h200-gemm-n.png").stat().st_size > 10_000


def test_a_bars_total_reads_in_its_unit():
    # a 405B model's decode at b=64, s=32768 was labelled "9,239,080 ms"
    assert [plots._ms_text(ms) for ms in (0.5, 250, 12_345, 9_239_080)] == ["0.5 ms", "250 ms", "12.3 s", "2.6 h"]


def test_gemm_figure_colours_predicted_points_by_alignment_without_measurements(mpl):
    # only measured points were coloured: a figure of predictions alone showed no alignment at all
    data = plots.gemm_data(gpu="h200", dim="n", values=range(4088, 4098))  # 4088 and 4096 aligned, even, odd
    assert data["source"] == "predicted" and len(data["measured_x"]) == 0
    ax = plots.gemm_figure(data).axes[0]
    marked = {line.get_label(): line for line in ax.lines if line.get_marker() == "o"}
    assert list(marked) == [f"predicted, {label}" for label in ("multiple of 8", "even", "odd")]
    for cls, line in enumerate(marked.values()):
        assert line.get_markeredgecolor() == plots.ALIGN_COLOURS[cls]
        assert line.get_xdata().tolist() == data["x"][data["align_class"] == cls].tolist()
        assert line.get_ydata().tolist() == data["predicted_tflops"][data["align_class"] == cls].tolist()
    assert [int(x) for x in marked["predicted, multiple of 8"].get_xdata()] == [4088, 4096]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:4] == ["predicted", *marked] and not any(t.startswith("measured") for t in labels)
    assert len(ax.collections) == 0  # the measured points' scatter: none


def test_in_sweep_compares_float_ends_as_they_are():
    # int() of the ends took in 1023 for a sweep from 1023.5, and left out 2048.5 from one ending at 2048.7
    x = np.array([1023.5, 1536.0, 2048.7])
    assert not plots._in_sweep(1023, x) and plots._in_sweep(1023.5, x)
    assert plots._in_sweep(2048.5, x) and not plots._in_sweep(2049, x)
    assert plots._in_sweep(np.int64(1536), x) and plots._in_sweep(1536.0, np.array([1024, 2048]))
    assert not plots._in_sweep(True, np.array([0, 2])) and not plots._in_sweep("1536", x)
    assert not plots._in_sweep(float("nan"), x)
