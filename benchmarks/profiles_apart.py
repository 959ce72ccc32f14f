"""How far two profiles' prices of the same GEMMs and batched GEMMs are apart, and each one's error
against what was measured: for telling whether a freeze's gain on a fresh set is more than two fits
of the same data differ (benchmarks/RESULTS.md, "how far a refit moves the fresh figures on its own").

python benchmarks/profiles_apart.py A.json B.json [--export results/h200-judges-fresh15/judges.csv.gz]
(on the CPU; seconds; "shipped" names the shipped H200 profile)
"""

import argparse
import sys

import numpy as np
from wide_by_dims import measured_gemms

from shapewise.cost import predict_gemm
from shapewise.errors import ShapewiseError
from shapewise.profile import cost_model

EXPORT = "benchmarks/results/h200-judges-fresh15/judges.csv.gz"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("profiles", nargs=2, help="two profiles (a path, or 'shipped')")
    ap.add_argument("--export", default=EXPORT, help=f"a judges export (default {EXPORT})")
    args = ap.parse_args()
    try:
        models = [cost_model("h200", profile=None if p == "shipped" else p) for p in args.profiles]
        m, n, k, batch, layout, measured = measured_gemms([args.export])
    except (OSError, ShapewiseError) as err:
        print(f"profiles_apart.py: {err}", file=sys.stderr)
        return 2
    a, b = (np.asarray(predict_gemm(m, n, k, batch=batch, layout=layout, gpu=model).time_ms) for model in models)
    line = lambda x: f"median {np.median(x):5.1%}, p90 {np.quantile(x, 0.9):5.1%}"  # noqa: E731
    print(f"{len(m)} GEMMs and batched GEMMs of {args.export}")
    print(f"  the two profiles apart: {line(np.abs(b / a - 1))}")
    for name, predicted in zip(args.profiles, (a, b)):
        print(f"  {name}: |error| {line(np.abs(predicted / measured - 1))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
