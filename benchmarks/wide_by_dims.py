"""The wide set's GEMMs and batched GEMMs split by their smallest and largest dims, from the committed
exports of results/h200-judges/ (seeds 1-3, 11, 12 and the models sets, both H200s): where the error
is, and which part of a change's gain came from which dims.

python benchmarks/wide_by_dims.py [--profile PATH]   (on the CPU; a few seconds)
"""

import argparse
import csv

import numpy as np

from shapewise.cost import predict_gemm
from shapewise.profile import cost_model

R = "benchmarks/results/h200-judges"
EXPORTS = ("judges-1.csv", "judges-2.csv")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", help="the profile to judge (default: the shipped H200 profile)")
    args = ap.parse_args()
    model = cost_model("h200", profile=args.profile)
    rows = [r for e in EXPORTS for r in csv.DictReader(open(f"{R}/{e}"))
            if r["bench"] in ("gemm", "bmm") and not r["error"] and r["median_ms"]]
    m, n, k, b = (np.array([int(r[f"p_{d}"]) for r in rows]) for d in ("m", "n", "k", "batch"))
    measured = np.array([float(r["median_ms"]) for r in rows])
    layout = np.array([r["p_layout"] for r in rows])
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
