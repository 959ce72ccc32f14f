"""The seen-data figures of benchmarks/RESULTS.md's entry "weight streams, the memory-bound fill, the
power cap fitted near peak rate, verify's rounds settled and shuffled", from the committed exports:

1. memory-bound aligned GEMMs with 2 to 128 rows (weight streams), signed error by the bytes they
   stream: the streams draws and the models sets (seeds 4-11);
2. the streams draws whole (median / p90 / signed);
3. real models' GEMMs of 2 ms or more priced at 60% of peak or more (models sets 4-11);
4. the variants sets 3, 5 and 6: candidates timed right after a candidate of twice the micro-batch,
   against the rest;
5. the wide sets' batched GEMMs (seeds 21-30): outer products and batched gemv apart from the rest.

python benchmarks/streams_figures.py [--profile PATH]   (on the CPU; about a minute; default: the shipped profile)
"""

import argparse
import csv
import dataclasses
import glob
import gzip
import json

import numpy as np
from decode_figures import line

from shapewise.cost import align_classes, predict_gemm
from shapewise.exports import open_export
from shapewise.profile import CostModel, cost_model

R = "benchmarks/results"
BANDS = ((1e6, 1e7), (1e7, 3e7), (3e7, 1e8), (1e8, 3e8), (3e8, 1e9), (1e9, 1e11))


def gemm_rows(paths, benches) -> dict:
    """(m, n, k, batch, layout) -> median of the measured medians, over the exports' GEMM cases."""
    found = {}
    for path in paths:
        with open_export(path) as f:
            for r in csv.DictReader(f):
                if r["bench"] not in benches or r["error"] or not r["median_ms"]:
                    continue
                if r["bench"] == "op" and r["p_kind"] != "gemm":
                    continue
                key = (int(r["p_m"]), int(r["p_n"]), int(r["p_k"]), int(r["p_batch"] or 1), r["p_layout"])
                found.setdefault(key, []).append(float(r["median_ms"]))
    return {key: float(np.median(v)) for key, v in found.items()}


def arrays(rows: dict, model):
    keys = list(rows)
    m, n, k, b = (np.array([key[i] for key in keys]) for i in range(4))
    layout = np.array([key[4] for key in keys])
    measured = np.array([rows[key] for key in keys])
    predicted = predict_gemm(m, n, k, batch=b, layout=layout, gpu=model)
    return m, n, k, b, layout, measured, predicted


def streams_by_bytes(title: str, rows: dict, model) -> None:
    m, n, k, b, layout, measured, p = arrays(rows, model)
    analytic = arrays(rows, CostModel(model.gpu, dataclasses.replace(model.params, gemm_residuals=(), gemm_trees=(), cutlass_kernels=())))[-1]
    bare = np.asarray(analytic.time_ms) / measured - 1
    a, c = align_classes(m, n, k, layout, "bf16", 16)
    keep = (b == 1) & (a == 0) & (c == 0) & (np.minimum(m, n) >= 2) & (np.minimum(m, n) <= 128) & (p.losses["memory"] > 0)
    nbytes = (m * k + k * n + m * n) * 2.0
    err = np.asarray(p.time_ms) / measured - 1
    print(f"{title}: memory-bound aligned GEMMs of 2-128 rows, by bytes streamed (count, |error| median / p90, "
          "signed; the analytic part alone, without the profile's tables, signed)")
    for low, high in BANDS:
        s = keep & (nbytes >= low) & (nbytes < high)
        if s.any():
            print(f"  {low / 1e6:6.0f}-{high / 1e6:6.0f} MB {line(err[s])}  analytic {np.median(bare[s]):+.1%}  measured "
                  f"{np.median(nbytes[s] / measured[s]) / 1e9:.2f} TB/s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", help="the profile to judge (default: the shipped H200 profile)")
    args = ap.parse_args()
    model = cost_model("h200", profile=args.profile)
    streams = gemm_rows(sorted(glob.glob(f"{R}/h200-streams/calibration-streams-*.csv.gz")), ("gemm",))
    judges = sorted(glob.glob(f"{R}/h200-judges-fresh*/judges*.csv.gz"))
    models = gemm_rows(judges, ("op",))
    print(f"profile: {model.source}")
    streams_by_bytes("streams draws 1, 2", streams, model)
    streams_by_bytes("models sets", models, model)
    *_, measured, p = arrays(streams, model)
    print(f"streams draws 1, 2, every GEMM: {line(np.asarray(p.time_ms) / measured - 1)}")
    *_, b, _, measured, p = arrays(models, model)
    near = (b == 1) & (measured >= 2) & (np.asarray(p.fraction_of_peak) >= 0.6)
    print(f"models sets, GEMMs of 2 ms or more at 60% of peak or more: {line((np.asarray(p.time_ms) / measured - 1)[near])}")
    for seed in (3, 5, 6):
        with gzip.open(f"{R}/h200-variants-{seed}/variants.json.gz", "rt") as f:
            judged = json.load(f)
        after, rest = [], []
        for entry in judged["models"]:
            hot = False
            for c in entry["candidates"]:
                if c["error"] or not c["measured_speedup"]:
                    hot = False
                    continue
                (after if hot else rest).append(c["predicted_speedup"] / c["measured_speedup"] - 1)
                hot = "batch 4→8" in c["candidate"]
        for name, err in (("after a candidate of twice the micro-batch", after), ("after another", rest)):
            err = np.array(err)
            print(f"variants seed {seed}, {name}: {len(err)} signed {np.median(err):+.1%}, within 3%: "
                  f"{np.mean(np.abs(err) <= 0.03):.0%}")
    m, n, k, b, _, measured, p = arrays(gemm_rows(judges, ("bmm",)), model)
    err = np.asarray(p.time_ms) / measured - 1
    degenerate = (k <= 2) | (np.minimum(m, n) == 1)
    print(f"wide batched GEMMs, K of 1-2 or a side of 1: {line(err[degenerate])}")
    print(f"wide batched GEMMs, the rest:                {line(err[~degenerate])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
