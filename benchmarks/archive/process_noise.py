"""How much a GEMM's measured time moves from one process to the next, and whether cuBLAS runs the
same kernels each time: the floor under any prediction of the small GEMMs whose split-K kernel
and reduction run as two kernels.

Run (on a GPU): python benchmarks/process_noise.py [--processes 5]
Each process times every GEMM below as `shapewise bench` does (L2 flushed, CUDA events, median)
and names the kernels of one call; the table gives each GEMM's medians across processes, their
spread ((max - min) / min) and how many different kernel sequences the processes saw.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

# (m, n, k, layout): the GEMMs whose measurements moved most between the held-out set's runs (split-K
# fp32 partials and a reduction), then single-kernel ones to compare
GEMMS = [(217, 122, 73, "nn"), (346, 56, 953, "nn"), (121, 88, 345, "nt"), (81, 82, 426, "tn"),
         (465, 105, 778, "tn"), (154, 610, 193, "nn"), (48, 154, 1538, "nt"), (128, 112, 137, "nn"),
         (3010, 96, 40, "nt"), (1496, 200, 34, "tn"), (2048, 2048, 2048, "nn"), (4096, 4096, 4096, "nn")]


def child() -> None:
    from shapewise.bench import _kernels_of, build
    from shapewise.cases import gemm_cases
    from shapewise.measure import import_torch
    from shapewise.measure import time_fn

    torch = import_torch()
    cases = [gemm_cases([m], [n], [k], layouts=(layout,))[0] for m, n, k, layout in GEMMS]
    named = _kernels_of(torch, cases, "cuda")
    for case, (kernels, grids, _) in zip(cases, named):
        fn, context = build(case, "cuda")
        with context:
            result = time_fn(fn, device="cuda")
        print(json.dumps(dict(key=case.label, ms=result.median_ms, kernels=[k.split("(")[0][:60] for k in kernels],
                              grids=grids)), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child()
        return 0
    runs = []
    for _ in range(args.processes):
        out = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True, env=os.environ)
        if out.returncode:
            print(out.stderr, file=sys.stderr)
            return out.returncode
        runs.append([json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")])
    print(f"{'GEMM':28s} {'medians across processes, ms':48s} spread  kernel sequences")
    for i in range(len(GEMMS)):
        ms = np.array([run[i]["ms"] for run in runs])
        sequences = {(tuple(run[i]["kernels"]), tuple(run[i]["grids"])) for run in runs}
        medians = " ".join(f"{x:.4f}" for x in ms)
        print(f"{runs[0][i]['key'][:28]:28s} {medians:48s} {ms.max() / ms.min() - 1:6.1%}  {len(sequences)}: "
              + "; ".join(" | ".join(f"{k} {g}" for k, g in zip(*s)) for s in sequences))
    return 0


if __name__ == "__main__":
    sys.exit(main())
