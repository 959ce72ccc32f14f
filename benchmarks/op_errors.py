"""The cost model's measured error per op class, kept with the shipped H200 profile for suggest's
intervals (shapewise.uncertainty): the 90th percentile of |log(predicted / measured)| of every
held-out op the committed exports measured, judged with the shipped profile as it is now.

python benchmarks/op_errors.py          # print the figures (calibrated profile and spec model)
python benchmarks/op_errors.py --write  # and write them into src/shapewise/data/profiles/h200.json

Sources: the designed validation sets of seeds 2-19 (benchmarks/results/h200-calibration/validation*.csv;
the live repeats of seeds 2 and 4 are left out, their cases counted once).
"""

import argparse
import dataclasses
import tempfile

import numpy as np

from shapewise.calibrate import judge
from shapewise.draws import validation_cases
from shapewise.hardware import get_gpu
from shapewise.profile import find, save
from shapewise.store import Store
from shapewise.uncertainty import CLASSES, QUANTILE

PROFILE = "src/shapewise/data/profiles/h200.json"
VALIDATION = "benchmarks/results/h200-calibration"
EXPORTS = {2: "validation.csv", **{seed: f"validation-seed{seed}.csv" for seed in range(3, 20)}}
# validate's categories by op class; layers and variants are steps of many ops, not one class
CATEGORY = {"gemm": "gemm", "bmm": "bmm", "attention fwd": "attention fwd", "attention bwd": "attention bwd",
            "attention decode": "attention decode", "memory, decoding": "memory", "memory": "memory"}


def judged_validation(gpu, profile) -> list:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed, export in EXPORTS.items():
            db = f"{tmp}/{seed}.db"
            with Store(db) as store:
                store.import_csv(f"{VALIDATION}/{export}")
                rows = list(store.rows())
            by_key = {c.key: c for c in validation_cases(seed=seed)}
            found = {r["key"]: r for r in rows if r["key"] in by_key and r.get("error") is None}
            out += judge([(by_key[k], r) for k, r in found.items()], gpu=gpu, profile=profile)
    return out


def quantiles(judged, model: str) -> tuple[dict, dict]:
    errors: dict = {c: [] for c in CLASSES}
    for j in judged:
        if j.category in CATEGORY:
            errors[CATEGORY[j.category]].append(abs(np.log(j.predicted_ms[model] / j.measured_ms)))
    return ({c: round(float(np.quantile(e, QUANTILE)), 4) for c, e in errors.items()},
            {c: len(e) for c, e in errors.items()})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help=f"write the calibrated figures into {PROFILE}")
    args = ap.parse_args()
    gpu = get_gpu("h200")
    profile = find(gpu)
    judged = judged_validation(gpu, profile)
    calibrated, cases = quantiles(judged, "calibrated")
    spec, _ = quantiles(judged, "spec-only")
    print(f"{'class':18s} {'cases':>6s} {'calibrated q90':>15s} {'spec-only q90':>14s}  (|log(predicted/measured)|)")
    for c in CLASSES:
        print(f"{c:18s} {cases[c]:6d} {calibrated[c]:15.4f} {spec[c]:14.4f}")
    if args.write:
        fit = {**profile.fit, "op_errors": {
            "q90_abs_log_error": calibrated, "cases": cases,
            "from": "benchmarks/op_errors.py: held-out designed sets, seeds 2-19 (h200-calibration/validation*.csv)"}}
        save(dataclasses.replace(profile, fit=fit), PROFILE)
        print(f"written to {PROFILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
