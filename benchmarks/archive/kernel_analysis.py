"""What the recorded cuBLAS kernels say (benchmarks/kernel_names.py, benchmarks/ncu_sweep.py): the
kernel family by the worst-aligned leading dim, how often and how deep K is split, whether the
cost model splits where cuBLAS does, and the misaligned kernels' global-load requests against a
count from the tile and their time against those requests.

Run: python benchmarks/kernel_analysis.py
"""

import csv
import dataclasses
import json
import re
import sys
from collections import Counter, defaultdict

import numpy as np

from shapewise.cost import _align_class, predict_gemm
from shapewise.exports import open_export
from shapewise.profile import CostModel, find

RESULTS = "benchmarks/results/h200-kernels/"
CALIBRATION = "benchmarks/results/h200-calibration/calibration.csv.gz"
TILE = re.compile(r"_(\d+)x(\d+)(?:_\d+x\d+)?_(?:nn|nt|tn)_align(\d)|tst_(\d+)x(\d+)_")


def family(name: str) -> str:
    if name.startswith("nvjet"):
        return "Hopper nvjet"
    if "wmma" in name:
        return "Ampere WMMA"
    if "cutlass_80" in name:
        return "Ampere CUTLASS"
    if "cutlass_75" in name:
        return "Turing CUTLASS"
    if "sm90_xmma" in name:
        return "Hopper xmma"
    return "other"


def read(path: str) -> list[dict]:
    with open_export(path)  # the export, gzipped as it is kept as f:
        return list(csv.DictReader(f))


def main() -> int:
    kernels = read(RESULTS + "kernels.csv")
    measured = {r["key"]: float(r["median_ms"]) for r in read(CALIBRATION) if r["median_ms"]}
    by_class, splits, agree = defaultdict(Counter), defaultdict(list), defaultdict(list)
    # the analytic model's own choice of tile and split: no residual table, no CUTLASS kernel tables
    params = dataclasses.replace(find("h200").params, gemm_residuals=(), cutlass_kernels=(), cutlass_choices=())
    for row in kernels:
        p = json.loads(row["key"])
        names = row["kernels"].split(" | ")
        fam, split = family(names[0]), any("splitK" in n for n in names)
        worst = int(max(_align_class(np.array(p["m"] if p["layout"] == "tn" else p["k"]), "bf16", 16),
                        _align_class(np.array(p["n"]), "bf16", 16)))
        by_class[worst][fam] += 1
        if p["batch"] == 1:
            # CUTLASS kernels split K over the grid's z; nvjet's split kernels do not say how deep
            depth = int(row["grids"].split(" | ")[0].split("x")[2]) if split and "CUTLASS" in fam else 1 + split
            splits["misaligned" if worst else "aligned"].append(depth)
            if worst and row["key"] in measured:
                pred = predict_gemm(p["m"], p["n"], p["k"], layout=p["layout"], gpu=CostModel("h200", params))
                agree[(fam, split, int(pred.split_k) > 1)].append(abs(np.log(measured[row["key"]] / pred.time_ms)))
    print("kernel family by the worst-aligned leading dim (0: multiple of 8 elements, 1: even, 2: odd)")
    for worst in sorted(by_class):
        print(f"  {worst}: " + ", ".join(f"{f} {n}" for f, n in by_class[worst].most_common()))
    for name, depths in splits.items():
        d = np.array(depths)
        deepest = f", up to {d.max()} ways" if name == "misaligned" else " (nvjet does not show how deep)"
        print(f"single {name} GEMMs split by cuBLAS: {np.mean(d > 1):.0%} of {len(d)}{deepest}")
    print("misaligned calibration GEMMs, spec-model parameters of the shipped profile without its residual table:")
    for (fam, cublas, model), errs in sorted(agree.items()):
        print(f"  {fam:15s} cuBLAS {'splits' if cublas else 'no split':8s} model {'splits' if model else 'no split':8s}"
              f" n={len(errs):3d} median |log error| {np.median(errs):.3f}")
    sweep = read(RESULTS + "ncu-sweep.csv")
    print("global-load requests (Nsight Compute) against tiles × (tm + tn) × K / (32 × alignment), and time:")
    for fam in ("Turing CUTLASS", "Ampere CUTLASS"):
        rows = [r for r in sweep if family(r["kernel"]) == fam]
        ratio, requests, ns = [], [], []
        for r in rows:
            p, t = json.loads(r["key"]), TILE.search(r["kernel"])
            tm, tn, align = int(t.group(1)), int(t.group(2)), int(t.group(3))
            count = p["batch"] * -(-p["m"] // tm) * -(-p["n"] // tn) * (tm + tn) * p["k"] / (32 * align)
            ratio.append(count / float(r["ld_requests"]))
            requests.append(float(r["ld_requests"]))
            ns.append(float(r["duration_ns"]))
        x, y = np.array(requests), np.array(ns)
        fixed, slope = np.linalg.lstsq(np.stack([np.ones_like(x), x], 1) / y[:, None], np.ones_like(y), rcond=None)[0]
        err = np.abs((fixed + slope * x) / y - 1)
        print(f"  {fam}: {len(rows)} kernels; count / counter median {np.median(ratio):.2f} "
              f"(quartiles {np.percentile(ratio, 25):.2f}–{np.percentile(ratio, 75):.2f}); "
              f"time = {fixed / 1e3:.1f} µs + {slope * 1e3:.0f} ps × requests, median |error| {np.median(err):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
