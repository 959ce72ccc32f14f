"""Misaligned GEMMs of the calibration set, one call each, for Nsight Compute's load counters: what
the Ampere and Turing kernels cuBLAS falls back to spend their time on.

Run on the GPU (the cases' keys go to stdout in order, one per line, the counters to OUT.csv):
  ncu --csv --page raw -k regex:"Kernel2|nvjet|gemm" --metrics gpu__time_duration.sum,\
l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,\
smsp__inst_executed.sum,launch__grid_size --log-file OUT.csv python benchmarks/ncu_sweep.py [COUNT]
"""

import sys

import numpy as np
import torch

from shapewise.bench import build
from shapewise.calibrate import calibration_cases


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    misaligned = [c for c in calibration_cases() if c.bench == "gemm"
                  and (c.params["k"] % 8 or c.params["n"] % 8 or (c.params["layout"] == "tn" and c.params["m"] % 8))]
    chosen = [misaligned[i] for i in np.linspace(0, len(misaligned) - 1, count).astype(int)]
    for case in chosen:
        fn, context = build(case, "cuda")
        with context:
            fn()
            torch.cuda.synchronize()
        print(case.key, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
