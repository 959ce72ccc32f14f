"""Whether the cost model keeps tile quantization: GEMMs of a step at token counts that fill their
last tile of 128 rows partly (1001, 2047, 3003, 6007) against the counts that fill it (1024, 2048,
3072, 6144), each time per token, measured on an H200 (results/h200-tokens/, the forward's and input
gradient's GEMMs with the tokens as m, the weight gradient's with them as k; n of 4096 and 11008,
k or m of 4096) and predicted.

python benchmarks/tokens_pairs.py [--profile PATH]   (on the CPU; a few seconds)

Measured with: shapewise bench gemm -m 1001 1024 2047 2048 3003 3072 6007 6144 -n 4096 11008 -k 4096
--layout nt nn --kernels; shapewise bench gemm -m 4096 11008 -n 4096 -k 1001 1024 3003 3072 6007 6144
--layout tn --kernels; shapewise results --export tokens.csv
"""

import argparse
import csv

import numpy as np

from shapewise.cost import predict_gemm
from shapewise.exports import open_export
from shapewise.profile import cost_model

PAIRS = ((1001, 1024), (2047, 2048), (3003, 3072), (6007, 6144))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", help="the profile to judge (default: the shipped H200 profile)")
    args = ap.parse_args()
    model = cost_model("h200", profile=args.profile)
    with open_export("benchmarks/results/h200-tokens/tokens.csv.gz") as f:
        measured = {(int(r["p_m"]), int(r["p_n"]), int(r["p_k"]), r["p_layout"]): float(r["median_ms"])
                    for r in csv.DictReader(f) if r["bench"] == "gemm" and r["median_ms"]}

    def predicted(key):
        m, n, k, layout = key
        return float(predict_gemm(m, n, k, layout=layout, gpu=model).time_ms)

    print("GEMM (tokens partly filling a tile)      against  time a token, partial / full: measured  predicted")
    misses = []
    for partial, full in PAIRS:
        for key in sorted(measured):
            m, n, k, layout = key
            if (layout != "tn" and m == partial) or (layout == "tn" and k == partial):
                other = (full, n, k, layout) if layout != "tn" else (m, n, full, layout)
                ratio = lambda t: (t(key) / partial) / (t(other) / full)  # noqa: E731
                got, want = ratio(predicted), ratio(measured.__getitem__)
                misses.append(got / want - 1)
                print(f"  {m:5d}×{n:5d}×{k:5d} {layout}  {full:5d}            {want:.3f}     {got:.3f}")
    errors = np.abs(misses)
    print(f"{len(misses)} pairs: the predicted ratio off by {np.median(errors):.1%} (median), {errors.max():.1%} "
          f"(worst), {np.mean(misses):+.1%} on average")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
