"""Fit a profile again from a calibration run's export, without a GPU: for when the cost model
changes after the measurements were taken.

Run: python benchmarks/refit_profile.py CALIBRATION.csv [MORE.csv ...] OLD_PROFILE.json OUT.json
        [--link PROFILE.json] [--kernels KERNELS.csv [MORE.csv ...]]
The new profile keeps the old one's environment (the measurements are the same) and its link
parameters (calibrate --comm measures those, not this export; --link takes them from another
profile), read from its JSON whatever its format version, and notes the refit. --kernels gives the
kernels each case ran (benchmarks/kernel_names.py's CSVs), which an export does not carry.
Several exports (calibration runs on several GPUs of one kind) are fitted as one: a case measured
in more than one takes the geometric mean of its medians, which evens out one machine's or one
moment's clocks.
"""

import argparse
import csv
import dataclasses
import json
import math
import sys

from shapewise.calibrate import fit_profile
from shapewise.cases import Case
from shapewise.exports import open_export
from shapewise.hardware import get_gpu
from shapewise.profile import save


def rows_from_export(path: str) -> list[tuple[Case, dict]]:
    """(case, row) pairs as a sweep returns them, rebuilt from `shapewise results --export`."""
    pairs = []
    with open_export(path) as f:
        for r in csv.DictReader(f):
            params = json.loads(r["key"])
            bench = params.pop("bench")
            params.pop("cuda_graph", None)
            row = {"median_ms": float(r["median_ms"]) if r["median_ms"] else None, "error": r["error"] or None}
            pairs.append((Case(bench, params, flops=float(r["flops"]) if r.get("flops") else None,
                               bytes=float(r["bytes"]) if r.get("bytes") else None), row))
    return pairs


def averaged(runs: list[list[tuple[Case, dict]]]) -> list[tuple[Case, dict]]:
    """The cases of several exports, each once, in the order first seen: where more than one
    measured a case, the geometric mean of their medians; a case failed in one run and measured in
    another keeps the measurement."""
    cases, times = {}, {}
    for run in runs:
        for case, row in run:
            cases.setdefault(case.key, (case, row))
            if row["error"] is None and row["median_ms"]:
                times.setdefault(case.key, []).append(row["median_ms"])
    out = []
    for key, (case, row) in cases.items():
        if key in times:
            row = dict(row, error=None, median_ms=math.exp(sum(math.log(t) for t in times[key]) / len(times[key])))
        out.append((case, row))
    return out


def kernels_from_csv(path: str) -> dict[str, dict]:
    """benchmarks/kernel_names.py's CSV as fit_profile takes it: case key -> {"kernels", "grids"}."""
    with open_export(path) as f:
        return {r["key"]: {"kernels": r["kernels"].split(" | "), "grids": r["grids"].split(" | ")}
                for r in csv.DictReader(f)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("calibration", nargs="+", help="a calibration run's export (CSV), or several runs' exports")
    ap.add_argument("old", help="the profile the (first) run wrote: its environment is kept")
    ap.add_argument("out")
    ap.add_argument("--link", metavar="PROFILE", help="take the link's parameters from this profile (default: OLD)")
    ap.add_argument("--kernels", metavar="CSV", nargs="+", default=[],
                    help="the kernels each case ran (benchmarks/kernel_names.py's CSVs)")
    args = ap.parse_args()
    kernels = {key: named for path in args.kernels for key, named in kernels_from_csv(path).items()}
    with open(args.old) as f:  # read raw: the old profile may be of an older format than this shapewise reads
        old = json.load(f)
    with open(args.link or args.old) as f:
        linked = json.load(f)
    rows = averaged([rows_from_export(path) for path in args.calibration])
    profile = fit_profile(rows, gpu=get_gpu(old["gpu"]),
                          dtype=old["fit"].get("dtype", "bf16"), environment=old["environment"], kernels=kernels)
    # The link's parameters come from `calibrate --comm` on several GPUs, not from this export: keep them.
    link = {k: v for k, v in linked["params"].items() if k.startswith("comm_")}
    profile = dataclasses.replace(profile, params=dataclasses.replace(profile.params, **link))
    profile.fit.update({k: v for k, v in linked["fit"].items() if k.startswith("comm_")},
                       refitted_from=args.calibration[0] if len(args.calibration) == 1 else args.calibration)
    if args.kernels:
        profile.fit["kernels_from"] = args.kernels
    save(profile, args.out)
    print(json.dumps(profile.fit, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
