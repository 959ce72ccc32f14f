"""Which kernels cuBLAS runs for each GEMM and batched GEMM of the calibration and validation sets:
the kernel census `shapewise calibrate` takes (bench.kernel_census: one warm call of each under
torch.profiler, its GPU kernels' names and grids kept), for both sets, as a CSV.

Run on the GPU: python benchmarks/kernel_names.py OUT.csv [--quick] [--db STORE] [--seeds S ...] [--held-out-only]
(--db: a results store that `shapewise calibrate` wrote on this machine; the cases it named already
are read from it, not named again. --seeds: the held-out sets to name, by the seed `shapewise
validate --seed` draws them with (default 2); --held-out-only leaves the calibration set out.)
Writes one row per case: bench, the case's key (as the results store writes it), the names of the
kernels its one call ran, in order, joined by " | ", and each kernel's grid (x×y×z blocks: the
tiles, and the split-K slices).
"""

import argparse
import contextlib
import csv
import sys
import tempfile

import torch

from shapewise.bench import census_rows, is_gemm, kernel_census
from shapewise.calibrate import calibration_cases, validation_cases
from shapewise.store import Store


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--quick", action="store_true", help="the toy sets, for a smoke test")
    ap.add_argument("--db", help="a results store to name the kernels in (default: a temporary one)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[2], help="the held-out sets' seeds (default: 2)")
    ap.add_argument("--held-out-only", action="store_true", help="leave the calibration set out")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("kernel_names.py names GPU kernels: it needs a CUDA GPU", file=sys.stderr)
        return 2
    drawn = [] if args.held_out_only else calibration_cases(quick=args.quick)
    for seed in args.seeds:
        drawn += validation_cases(quick=args.quick, seed=seed)
    cases = list({c.key: c for c in drawn if is_gemm(c)}.values())
    with contextlib.ExitStack() as stack:  # a temporary store only where none was given
        path = args.db or f"{stack.enter_context(tempfile.TemporaryDirectory())}/census.db"
        with Store(path) as store:
            kernel_census(cases, store=store, device="cuda")
            found = census_rows(store)
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["bench", "key", "kernels", "grids"])
        for case in cases:
            named = found.get(case.key, {"kernels": [], "grids": []})
            w.writerow([case.bench, case.key, " | ".join(named["kernels"]), " | ".join(named["grids"])])
    print(f"wrote {len(cases)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
