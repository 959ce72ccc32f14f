"""Would `calibrate --quick` do better with one GEMM factor for aligned GEMMs and another for misaligned ones?
(benchmarks/RESULTS.md, "the quick sample's GEMMs split by alignment (a lead refuted)".) For each export of a
card that ran `calibrate --quick` beside the judges' sets: the designed GEMMs it measured (at MIN_MS or longer,
not weight streams) give the factor as `calibrate --quick` reads it, over all of them ("one") or apart for
aligned and misaligned ones ("split", cost.align_classes: both leading dims at 16 bytes); the judged single
GEMMs measured there (every case outside the designed set) priced borrowed, with one factor and split:
median / p90 of |predicted / measured − 1| and the signed median. --reference: the same factors read on the
H200 the shipped profile was fitted on, from its own calibration exports.

python benchmarks/archive/quick_gemm_split.py h100 benchmarks/results/h100-judges*/judges*.csv.gz
python benchmarks/archive/quick_gemm_split.py h200 benchmarks/results/h200-judges-fresh*/judges*.csv.gz
python benchmarks/archive/quick_gemm_split.py h200 --reference
(on the CPU, from the repository root with PYTHONPATH=src; a minute or two)
"""

import argparse
import csv
import json

import numpy as np

from shapewise.cost import align_classes, predict_gemm, streams_weights
from shapewise.draws import calibration_cases, drawn_beside
from shapewise.exports import open_export
from shapewise.machine import MIN_MS
from shapewise.profile import cost_model

REFERENCE = ("benchmarks/results/h200-calibration/calibration.csv.gz", "benchmarks/results/h200-calibration/calibration-2.csv.gz",
             "benchmarks/results/h200-calibration/calibration-3.csv.gz", "benchmarks/results/h200-calibration/calibration-4.csv.gz",
             "benchmarks/results/h200-settled/settled-designed.csv.gz")


def single_gemms(path: str, designed: set) -> list[tuple]:
    """(designed?, m, n, k, layout, ms) of each single bf16 GEMM measured without error, its first measurement."""
    seen = {}
    with open_export(path) as f:
        for r in csv.DictReader(f):
            if r["bench"] not in ("gemm", "op") or r["error"] or not r["median_ms"] or r["key"] in seen:
                continue
            c = json.loads(r["key"])
            if c.get("kind", "gemm") == "gemm" and c.get("batch", 1) == 1 and c.get("dtype", "bf16") == "bf16":
                seen[r["key"]] = (r["key"] in designed, c["m"], c["n"], c["k"], c["layout"], float(r["median_ms"]))
    return list(seen.values())


def shown(errors: np.ndarray) -> str:
    a = np.abs(errors)
    return f"{np.median(a):5.1%} / {np.percentile(a, 90):5.1%} (signed {np.median(errors):+.1%})"


def factor(ratios: np.ndarray) -> float:
    return float(np.exp(np.median(np.log(ratios))))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("gpu", choices=("h100", "h200"))
    ap.add_argument("exports", nargs="*")
    ap.add_argument("--reference", action="store_true", help="the fitted H200's own calibration exports")
    args = ap.parse_args()
    model = cost_model(args.gpu)  # the shipped profile (borrowed on an H100)
    designed = {c.key for c in calibration_cases() if c.bench == "gemm"} | {c.key for c in drawn_beside(streams=1)}
    for path in REFERENCE if args.reference else args.exports:
        rows = single_gemms(path, designed)
        is_designed, m, n, k, layout, ms = (np.array(x) for x in zip(*rows))
        predicted = predict_gemm(m, n, k, layout=layout, gpu=model).time_ms
        class_a, class_n = align_classes(m, n, k, layout, "bf16", 16)
        aligned = (class_a == 0) & (class_n == 0)
        sample = is_designed & (ms >= MIN_MS) & ~streams_weights(m, n, 1)
        if (sample & aligned).sum() < 3 or (sample & ~aligned).sum() < 3:
            print(f"{path}: too few designed GEMMs measured to read factors ({sample.sum()})")
            continue
        ratio = ms / predicted
        one, on_aligned, on_misaligned = (factor(ratio[sample & s]) for s in (True, aligned, ~aligned))
        print(f"{path}: factor {one:.3f} over {sample.sum()} designed GEMMs; aligned {on_aligned:.3f} "
              f"({(sample & aligned).sum()}), misaligned {on_misaligned:.3f} ({(sample & ~aligned).sum()})")
        if args.reference:
            continue
        judged = ~is_designed & ~streams_weights(m, n, 1)
        priced = {"borrowed": predicted, "one": predicted * one,
                  "split": predicted * np.where(aligned, on_aligned, on_misaligned)}
        for name, which in (("aligned", judged & aligned), ("misaligned", judged & ~aligned), ("all", judged)):
            if which.sum() >= 10:
                print(f"  judged {name:10s} {which.sum():5d}: " + " | ".join(
                    f"{how} {shown(p[which] / ms[which] - 1)}" for how, p in priced.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
