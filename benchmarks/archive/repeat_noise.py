"""The held-out set measured twice in one run: how far the two medians of each case are apart.

Run: python benchmarks/repeat_noise.py [validation.csv validation-repeat.csv]
"""

import csv
import json
import sys
from collections import defaultdict

import numpy as np


def category(bench: str, params: dict) -> str:
    if bench != "op":
        return bench
    if params["kind"] == "memory":
        return "memory, decoding"
    return "attention decode" if params["m"] == 1 else "attention"


def load(path: str) -> dict:
    with open(path, newline="") as f:
        return {r["key"]: r for r in csv.DictReader(f) if r["median_ms"]}


def main() -> int:
    first, second = sys.argv[1:3] if len(sys.argv) > 2 else (
        "benchmarks/results/h200-calibration/validation.csv", "benchmarks/results/h200-calibration/validation-repeat.csv")
    a, b = load(first), load(second)
    gaps = defaultdict(list)
    for key, row in a.items():
        if key in b:
            gaps[category(row["bench"], json.loads(key))].append(abs(float(row["median_ms"]) / float(b[key]["median_ms"]) - 1))
    print(f"{'cases':18s} {'n':>4s} {'median':>7s} {'p90':>7s}")
    for name, v in gaps.items():
        print(f"{name:18s} {len(v):4d} {np.median(v):7.1%} {np.percentile(v, 90):7.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
