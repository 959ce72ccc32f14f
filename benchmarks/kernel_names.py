"""Which kernels cuBLAS runs for each GEMM and batched GEMM of the calibration and validation sets:
the kernel census `shapewise calibrate` takes (bench.kernel_census: one warm call of each under
torch.profiler, its GPU kernels' names and grids kept), for both sets, as a CSV.

Run on the GPU: python benchmarks/kernel_names.py OUT.csv [--quick] [--db STORE] [--seeds S ...] [--held-out-only]
[--extended [SEED]] [--edges SEED] [--census]
(--db: a results store that `shapewise calibrate` wrote on this machine; the cases it named already
are read from it, not named again. --seeds: the held-out sets to name, by the seed `shapewise
validate --seed` draws them with (default 2; none: `--seeds` alone); --held-out-only leaves the
calibration set out; --extended [SEED] takes the set of `calibrate --extended [SEED]`; --census adds 5330 random misaligned shapes, none of the calibration's: the
census of the experiment in benchmarks/RESULTS.md that told kernels by shapes named but not timed.)
Writes one row per case: bench, the case's key (as the results store writes it), the names of the
kernels its one call ran, in order, joined by " | ", and each kernel's grid (x×y×z blocks: the
tiles, and the split-K slices).
"""

import argparse
import contextlib
import csv
import sys
import tempfile

import numpy as np
import torch

from shapewise.bench import census_rows, kernel_census
from shapewise.cases import is_gemm
from shapewise.cost import align_classes
from shapewise.draws import DRAWS, _random_bmms, _random_gemms, calibration_cases, drawn_beside, validation_cases
from shapewise.hardware import get_gpu
from shapewise.store import Store


def census_shapes(*, quick: bool, seed: int = 11) -> list:
    """3000 random GEMMs and as many batched ones, drawn as the calibration draws its own (every
    alignment class), the aligned ones and the calibration's own left out."""
    rng = np.random.default_rng(seed)
    if quick:
        cases = _random_gemms(rng, 6, low=16, high=128, max_flops=1e7, classes=True, dtype="bf16")
    else:
        cases = (_random_gemms(rng, 3000, low=32, high=16384, max_flops=1e12, classes=True, dtype="bf16")
                 + _random_bmms(rng, 3000, dtype="bf16"))
    timed = {c.key for c in calibration_cases(quick=quick)}
    return [c for c in cases if c.key not in timed
            and max(align_classes(c.params["m"], c.params["n"], c.params["k"], c.params["layout"], "bf16",
                                  get_gpu("h200").align_bytes)) > 0]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--quick", action="store_true", help="the toy sets, for a smoke test")
    ap.add_argument("--db", help="a results store to name the kernels in (default: a temporary one)")
    ap.add_argument("--seeds", type=int, nargs="*", default=[2], help="the held-out sets' seeds (default: 2)")
    ap.add_argument("--held-out-only", action="store_true", help="leave the calibration set out")
    ap.add_argument("--extended", type=int, nargs="?", const=1, metavar="SEED",
                    help="the calibration set of `calibrate --extended SEED`")
    for draw in DRAWS:
        if draw != "extended":
            ap.add_argument(f"--{draw}", type=int, metavar="SEED", help=f"and the {draw} draws of `calibrate --{draw} SEED`")
    ap.add_argument("--census", action="store_true", help="add random misaligned shapes, none of the calibration's")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("kernel_names.py names GPU kernels: it needs a CUDA GPU", file=sys.stderr)
        return 2
    drawn = [] if args.held_out_only else calibration_cases(quick=args.quick, extended=args.extended)
    drawn += drawn_beside(quick=args.quick, **{draw: getattr(args, draw) for draw in DRAWS if draw != "extended"})
    drawn += census_shapes(quick=args.quick) if args.census else []
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
