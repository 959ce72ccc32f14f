"""The wide set's GEMMs and batched GEMMs split by their smallest and largest dims and by their
measured time, from the committed exports of results/h200-judges/ (seeds 1-3, 11, 12 and the models
sets, both H200s) or those named: where the error is, and which part of a change's gain came from
which dims.

python benchmarks/wide_by_dims.py [--profile PATH] [--exports EXPORT.csv[.gz] ...]   (on the CPU; seconds)
(the fourteenth freeze's fresh wide sets: --exports results/h200-judges-fresh1{3,4}/judges.csv.gz)
"""

import argparse
import csv

import numpy as np

from shapewise.cost import predict_gemm
from shapewise.exports import open_export
from shapewise.profile import cost_model

R = "benchmarks/results/h200-judges"
EXPORTS = ("judges-1.csv.gz", "judges-2.csv.gz")


def measured_gemms(paths) -> tuple:
    """The GEMMs and batched GEMMs measured in judges exports: m, n, k, batch, layout and median ms, as arrays."""
    rows = []
    for path in paths:
        with open_export(path) as f:
            rows += [r for r in csv.DictReader(f) if r["bench"] in ("gemm", "bmm") and not r["error"] and r["median_ms"]]
    m, n, k, b = (np.array([int(r[f"p_{d}"]) for r in rows]) for d in ("m", "n", "k", "batch"))
    return m, n, k, b, np.array([r["p_layout"] for r in rows]), np.array([float(r["median_ms"]) for r in rows])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", help="the profile to judge (default: the shipped H200 profile)")
    ap.add_argument("--exports", nargs="+", default=[f"{R}/{e}" for e in EXPORTS],
                    help="judges exports (default: results/h200-judges/'s)")
    args = ap.parse_args()
    model = cost_model("h200", profile=args.profile)
    m, n, k, b, layout, measured = measured_gemms(args.exports)
    predicted = np.asarray(predict_gemm(m, n, k, batch=b, layout=layout, gpu=model).time_ms)
    error = np.abs(predicted / measured - 1)
    low, high = np.minimum(np.minimum(m, n), k), np.maximum(np.maximum(m, n), k)
    for kind, chosen in (("gemm", b == 1), ("bmm", b > 1)):
        for label, where in (("all", chosen), ("a side of 1", low == 1), ("smallest 2-16", (low > 1) & (low <= 16)),
                             ("smallest 17-31", (low > 16) & (low < 32)), ("largest over 16,384", (high > 16384) & (low >= 32)),
                             ("all within 32-16,384", (high <= 16384) & (low >= 32))):
            sel = chosen & where
            if sel.any():
                print(f"{kind:5s} {label:22s} {sel.sum():5d}  {np.median(error[sel]):6.1%} {np.quantile(error[sel], 0.9):6.1%}")
        for label, low_ms, high_ms in (("0-10 µs", 0, 0.01), ("10-50 µs", 0.01, 0.05), ("50-200 µs", 0.05, 0.2),
                                       ("200 µs-1 ms", 0.2, 1), ("1 ms and over", 1, np.inf)):
            sel = chosen & (measured >= low_ms) & (measured < high_ms)
            if sel.any():
                print(f"{kind:5s} {label:22s} {sel.sum():5d}  {np.median(error[sel]):6.1%} {np.quantile(error[sel], 0.9):6.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
