"""The figures of benchmarks/RESULTS.md's "an H100 measured" entry that no maintained script prints,
from the committed exports of the two H100s (results/h100-judges/, h100-judges-later/: the first card;
h100-judges-21/: the second, measured blind) and the H200's of the same wide seed (h200-judges-fresh16/).

python benchmarks/archive/h100_analysis.py delta      the per-call delta as a what-if on the first H100's steps
python benchmarks/archive/h100_analysis.py apart      the wide set's errors on the H200 and the H100, case by case
python benchmarks/archive/h100_analysis.py intensity  the quick sample's GEMMs and batched GEMMs by arithmetic intensity
python benchmarks/archive/h100_analysis.py streams    a second GEMM factor for weight streams (tried, not taken)
python benchmarks/archive/h100_analysis.py refit EXPORT OUT.json
    the export's folder's h100-machine.json.gz with `calibrate --quick`'s factors refitted from the export by the
    shapewise on PYTHONPATH (the factor on the whole time: PYTHONPATH=<a checkout of 1d59c01>/src), for
    `benchmarks/step_breakdown.py EXPORT --seed S --gpu h100 --profile OUT.json` by the same code
(on the CPU; a minute or two each)
"""

import csv
import dataclasses
import gzip
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from judge_figures import import_export  # noqa: E402

from shapewise.bench import stored_rows  # noqa: E402
from shapewise.cases import predict_cases  # noqa: E402
from shapewise.hardware import get_gpu  # noqa: E402
from shapewise.judges import judge_set_cases  # noqa: E402
from shapewise.machine import family, machine_cases, machine_factors, with_factors  # noqa: E402
from shapewise.profile import CostModel, find  # noqa: E402
from shapewise.store import Store  # noqa: E402

R = "benchmarks/results"
FIRST, LATER, BLIND = f"{R}/h100-judges", f"{R}/h100-judges-later", f"{R}/h100-judges-21"
# (export, seed, configs, label) of the models seeds measured on the H100s
MODELS = {"first": [(f"{FIRST}/judges.csv.gz", 19, "tests/data/hf", "models 19"),
                    (f"{LATER}/judges.csv.gz", 20, "tests/data/hf-later", "models 20")],
          "blind": [(f"{BLIND}/judges.csv.gz", 21, "tests/data/hf", "models 21")]}


def rows_of(export: str, cases) -> list:
    with tempfile.TemporaryDirectory() as tmp:
        import_export(export, f"{tmp}/run.db")
        with Store(f"{tmp}/run.db") as store:
            return [(c, r) for c, r in stored_rows(cases, store=store) if r.get("error") is None]


def quick_factors(export: str) -> dict:
    """`calibrate --quick`'s factors from the calls of an export, by the code at hand."""
    gpu = get_gpu("h100")
    return machine_factors(rows_of(export, machine_cases()), gpu=gpu, params=find(gpu).params)


def machine_params(factors: dict, **overrides):
    gpu = get_gpu("h100")
    return dataclasses.replace(with_factors(find(gpu).params, factors), **overrides)


def judged_steps(export, seed, configs, params, adjust=None) -> dict:
    """Each fully measured step's error by mode, and the GEMM ops' errors, under params (adjust: a
    function of (case, predicted ms) giving the ms to use instead)."""
    drawn = judge_set_cases("models", seed=seed, configs=[configs])
    rows = rows_of(export, drawn.cases)
    cases = [c for c, _ in rows]
    predicted = predict_cases(cases, gpu=CostModel(get_gpu("h100"), params))
    if adjust is not None:
        predicted = [adjust(c, ms) for c, ms in zip(cases, predicted)]
    by_key = {c.key: (r["median_ms"], ms) for (c, r), ms in zip(rows, predicted)}
    steps = {}
    for step in drawn.steps:
        if all(key in by_key for key, _ in step.ops):
            measured = sum(by_key[key][0] * n for key, n in step.ops)
            steps[step.name] = sum(by_key[key][1] * n for key, n in step.ops) / measured - 1
    gemm = [ms / r["median_ms"] - 1 for (c, r), ms in zip(rows, predicted) if family(c) == "gemm"]
    return {"steps": steps, "gemm": np.abs(gemm)}


def within(steps: dict) -> str:
    return f"{sum(abs(e) <= 0.05 for e in steps.values())} of {len(steps)} steps within 5%"


def mode(steps: dict, name: str) -> str:
    e = np.abs([v for k, v in steps.items() if f" {name} " in k])
    return f"{name} {np.median(e):.1%} / {np.quantile(e, 0.9):.1%}"


def delta() -> None:
    factors = quick_factors(f"{FIRST}/judges.csv.gz")  # the first card measured no calls of a few µs
    print("the first H100's factors, refitted:", {k: round(v.get("factor", 0), 4) for k, v in factors.items()})
    for ms in (0.0, 0.0002, 0.0004):
        params = machine_params(factors, machine_launch_ms=ms)
        print(f"  a delta of {ms * 1e3:.1f} µs:", "; ".join(f"{label}: {within(judged_steps(e, s, c, params)['steps'])}"
                                                        for e, s, c, label in MODELS["first"]))
    factors = quick_factors(f"{BLIND}/judges.csv.gz")  # the blind card measured them: its delta fitted
    export, seed, configs, _ = MODELS["blind"][0]
    for name, params in (("fitted", machine_params(factors)), ("set to 0", machine_params(factors, machine_launch_ms=0.0))):
        print(f"the blind H100, its delta {name} ({params.machine_launch_ms * 1e3:.2f} µs): models 21: "
              f"{within(judged_steps(export, seed, configs, params)['steps'])}")


def wide_rows(path: str) -> dict:
    out = {}
    with gzip.open(path, "rt") as f:
        for r in csv.DictReader(f):
            if r["bench"] in ("gemm", "bmm", "op") and not r["error"] and r["median_ms"]:
                out[r["key"]] = (r["bench"] if r["bench"] != "op" else f"op {r['p_kind']}", float(r["median_ms"]))
    return out


def apart() -> None:
    h200 = wide_rows(f"{R}/h200-judges-fresh16/judges.csv.gz")
    h100 = wide_rows(f"{FIRST}/judges.csv.gz")
    both = [k for k in h200 if k in h100]
    tiny = {}
    for key in both:
        if h200[key][1] < 0.008:
            tiny.setdefault(h200[key][0], []).append(h100[key][1] / h200[key][1])
    print("calls under 8 µs on the H200, H100 over H200 (median, interquartile):")
    for kind, ratios in sorted(tiny.items()):
        print(f"  {kind:10s} {len(ratios):4d}  {np.median(ratios):.3f}  {np.subtract(*np.percentile(ratios, [75, 25])):.3f}")
    drawn = judge_set_cases("wide", seed=37)
    cases = [c for c in drawn.cases if c.key in h200 and c.key in h100]
    e200 = np.log(np.array(predict_cases(cases, gpu=CostModel(get_gpu("h200"), find(get_gpu("h200")).params)))
                  / [h200[c.key][1] for c in cases])
    e100 = np.log(np.array(predict_cases(cases, gpu=CostModel(get_gpu("h100"), find(get_gpu("h100")).params)))
                  / [h100[c.key][1] for c in cases])
    big200, big100 = np.abs(e200) > np.log(1.12), np.abs(e100) > np.log(1.12)
    print(f"wide 37, {len(cases)} cases on both: log errors correlate {np.corrcoef(e200, e100)[0, 1]:.2f}; "
          f"{big200.sum()} over 12% on the H200, {(big200 & big100 & (np.sign(e200) == np.sign(e100))).sum()} of them "
          f"over 12% the same way on the H100; the two errors apart by {np.median(np.abs(e200 - e100)):.1%} median, "
          f"{np.quantile(np.abs(e200 - e100), 0.9):.1%} p90")


def intensity() -> None:
    gpu = get_gpu("h100")
    base = CostModel(gpu, find(gpu).params)
    for export in (f"{FIRST}/judges.csv.gz", f"{BLIND}/judges.csv.gz"):
        rows = [(c, r) for c, r in rows_of(export, machine_cases())
                if family(c) in ("gemm", "bmm") and r["median_ms"] >= 0.03]
        ratio = np.array([r["median_ms"] for _, r in rows]) / predict_cases([c for c, _ in rows], gpu=base)
        level = np.array([c.flops / c.bytes for c, _ in rows])
        print(export, "; ".join(f"{lo}-{hi} FLOP/B: {np.median(ratio[(level >= lo) & (level < hi)]):.3f} "
                                f"({((level >= lo) & (level < hi)).sum()})"
                                for lo, hi in ((0, 30), (30, 100), (100, 300), (300, 10**9))))


STREAM_INTENSITY, STREAM_WEIGHT = 8.0, 0.25


def stream_weight(case, gpu) -> float:
    """0 at the ridge point (peak FLOP/s over bandwidth) and above, 1 at STREAM_INTENSITY and below."""
    ridge = gpu.peak_tflops("bf16") * 1e12 / gpu.bytes_per_s
    return float(np.clip(np.log(ridge / (case.flops / case.bytes)) / np.log(ridge / STREAM_INTENSITY), 0, 1))


def streams() -> None:
    gpu = get_gpu("h100")
    for card, first in (("first", True), ("blind", False)):
        export = f"{FIRST if first else BLIND}/judges.csv.gz"
        factors = quick_factors(export)
        params = machine_params(factors)
        launch = params.machine_launch_ms
        rows = [(c, r) for c, r in rows_of(export, machine_cases()) if family(c) == "gemm" and r["median_ms"] >= 0.03]
        base = predict_cases([c for c, _ in rows], gpu=CostModel(gpu, find(gpu).params))
        logs = np.log([(r["median_ms"] - launch) / ms for (_, r), ms in zip(rows, base)])
        w = np.array([stream_weight(c, gpu) for c, _ in rows])
        log_c = np.median(logs[w == 0])
        log_s = np.median((logs[w >= STREAM_WEIGHT] - (1 - w[w >= STREAM_WEIGHT]) * log_c) / w[w >= STREAM_WEIGHT])
        print(f"{card} H100: GEMMs at the ridge and above {np.exp(log_c):.3f} ({(w == 0).sum()}), streams "
              f"{np.exp(log_s):.3f} ({(w >= STREAM_WEIGHT).sum()}), one factor {params.machine_gemm:.3f}")

        def blended(case, ms):
            if family(case) != "gemm" or case.params.get("batch", 1) > 1:
                return ms
            x = stream_weight(case, gpu)
            return (ms - launch) / params.machine_gemm * np.exp((1 - x) * log_c + x * log_s) + launch

        for export_m, seed, configs, label in MODELS[card]:
            for name, adjust in (("one GEMM factor", None), ("with the stream factor", blended)):
                got = judged_steps(export_m, seed, configs, params, adjust)
                print(f"  {label}, {name}: {within(got['steps'])}; GEMMs {np.median(got['gemm']):.1%} / "
                      f"{np.quantile(got['gemm'], 0.9):.1%}; steps {mode(got['steps'], 'decode')}")


def refit(export: str, out: str) -> None:
    """The export's folder's h100-machine.json.gz with its machine_* parameters refitted by the code at hand."""
    gpu = get_gpu("h100")
    params = with_factors(find(gpu).params, machine_factors(rows_of(export, machine_cases()), gpu=gpu,
                                                            params=find(gpu).params))
    factors = {k: v for k, v in vars(params).items() if k.startswith("machine_")}
    with gzip.open(Path(export).parent / "h100-machine.json.gz", "rt") as f:  # kept gzipped
        profile = json.load(f)
    profile["params"] = {**{k: v for k, v in profile["params"].items() if not k.startswith("machine_")}, **factors}
    Path(out).write_text(json.dumps(profile))
    print(out, factors)


def main() -> int:
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "refit" and len(sys.argv) == 4:
        refit(sys.argv[2], sys.argv[3])
    elif what in ("delta", "apart", "intensity", "streams") and len(sys.argv) == 2:
        globals()[what]()
    else:
        print("h100_analysis.py: give delta, apart, intensity, streams, or refit EXPORT OUT.json", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
