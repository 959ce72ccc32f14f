"""The calibration draws measured for the thirteenth freeze (results/h200-draws-2/: calibrate's
--heads 1 2, --rows 1 2, --batched 2 3, --skinny 3, --edges 4) judged by a profile, by kind of op:
|predicted/measured - 1| median / p90 and the signed median. Drawn after the twelfth freeze, they
were fresh to its profile (`--profile` with it: git show 6f8d13a:src/shapewise/data/profiles/h200.json);
the shipped profile was fitted on them (in-sample).

The shards draws measured for the sixteenth freeze (results/h200-draws-4/: calibrate's --shards 1 2) were
fresh to the fifteenth's profile (git show 56e1669:src/shapewise/data/profiles/h200.json).

python benchmarks/draws_judged.py [--profile PATH] [--folder results/h200-draws-4]   (on the CPU; about 30 s)
"""

import argparse
import glob
from collections import defaultdict

import numpy as np
from decode_figures import line as summary
from refit_profile import rows_from_export

from shapewise.cases import predict_cases
from shapewise.profile import cost_model

R = "benchmarks/results/h200-draws-2"
FEW = 8  # sequences × heads: a fused attention call of few blocks


def kind(case) -> str:
    """The op's kind: gemm, bmm, a fused attention pass (of few blocks or not) or a memory-bound family's pass."""
    p = case.params
    if case.bench != "op":
        return case.bench
    if p["kind"] == "flash":
        return f"attention {p['pass_']}" + (f" ≤{FEW} blocks" if p["m"] > 1 and p["batch"] <= FEW else "")
    return f"{p['family']} {p['pass_']}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", help="the profile to judge (default: the shipped H200 profile)")
    ap.add_argument("--folder", default=R, help=f"the draws' exports (default {R})")
    args = ap.parse_args()
    model = cost_model("h200", profile=args.profile)
    for path in sorted(glob.glob(f"{args.folder}/calibration-*.csv.gz")):
        rows = [(c, r) for c, r in rows_from_export(path) if not r["error"] and r["median_ms"]]
        err = np.array(predict_cases([c for c, _ in rows], gpu=model)) / np.array([r["median_ms"] for _, r in rows]) - 1
        by = defaultdict(list)
        for (case, _), e in zip(rows, err):
            by[kind(case)].append(e)
        print(f"{path.split('/')[-1]}: {len(rows)} cases")
        for name, values in sorted(by.items()):
            print(f"  {name:24s} {summary(np.array(values))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
