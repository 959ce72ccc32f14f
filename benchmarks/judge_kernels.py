"""Which kernels ran for each case of `validate`'s independent sets: cuBLAS's for the GEMMs and
batched GEMMs, and the SDPA backend's for fused attention (cuDNN or flash), as a CSV.

Run on the GPU: python benchmarks/judge_kernels.py OUT.csv --db STORE --set wide:1 wide:2 attention:1
[models:1 --configs DIR]. One warm call of each case under torch.profiler (bench.kernel_census's
method); rows: bench, the case's key, the kernels its call ran, in order, joined by " | ", and their
grids.
"""

import argparse
import csv
import sys

import torch

from shapewise.bench import _kernels_of, census_rows, kernel_census
from shapewise.cases import is_gemm
from shapewise.judges import judge_set_cases
from shapewise.ops import FLASH
from shapewise.store import Store


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--db", required=True)
    ap.add_argument("--set", nargs="+", required=True, metavar="NAME:SEED")
    ap.add_argument("--configs", nargs="*")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("judge_kernels.py names GPU kernels: it needs a CUDA GPU", file=sys.stderr)
        return 2
    cases = {}
    for item in args.set:
        name, seed = item.split(":")
        for case in judge_set_cases(name, seed=int(seed), configs=args.configs).cases:
            cases.setdefault(case.key, case)
    gemms = [c for c in cases.values() if is_gemm(c)]
    flash = [c for c in cases.values() if c.bench == "op" and c.params["kind"] == FLASH]
    with Store(args.db) as store:
        kernel_census(gemms, store=store, device="cuda")
        found = census_rows(store)
    for start in range(0, len(flash), 100):
        part = flash[start:start + 100]
        for case, (names, grids, error) in zip(part, _kernels_of(torch, part, "cuda")):
            found[case.key] = {"kernels": names, "grids": grids}
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["bench", "key", "kernels", "grids"])
        for case in gemms + flash:
            named = found.get(case.key, {"kernels": [], "grids": []})
            w.writerow([case.bench, case.key, " | ".join(named["kernels"]), " | ".join(named["grids"])])
    print(f"wrote {len(gemms) + len(flash)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
