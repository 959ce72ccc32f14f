"""Which kernels cuBLAS runs for each GEMM and batched GEMM of the calibration and validation sets:
one call of each under torch.profiler, its GPU kernels' names (tile, split-K, kernel family) kept.

Run on the GPU: python benchmarks/kernel_names.py OUT.csv [--quick]
Writes one row per case: bench, the case's key (as the results store writes it), the names of the
kernels its one call ran, in order, joined by " | ", and each kernel's grid (x×y×z blocks: the
tiles, and the split-K slices). On a CPU it records the aten ops instead.
"""

import argparse
import csv
import json
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from shapewise.bench import build
from shapewise.calibrate import calibration_cases, validation_cases


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--quick", action="store_true", help="the toy sets, for a smoke test")
    args = ap.parse_args()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    cases = [c for c in calibration_cases(quick=args.quick) + validation_cases(quick=args.quick)
             if c.bench in ("gemm", "bmm") or (c.bench == "op" and c.params.get("kind") in ("gemm", "bmm"))]
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    names, grids = {}, {}
    batch = 200  # cases per profiler session: keeps each trace small
    for start in range(0, len(cases), batch):
        chunk = cases[start:start + batch]
        with profile(activities=activities) as prof:
            for i, case in enumerate(chunk):
                fn, context = build(case, device)
                with context:
                    fn()  # warm, outside the case's range: cuBLAS picks and loads its kernel here
                    sync()
                    with record_function(f"case:{i}"):
                        fn()
                        sync()
                del fn
        with tempfile.TemporaryDirectory() as tmp:  # the trace holds each kernel's grid; FunctionEvents do not
            prof.export_chrome_trace(f"{tmp}/trace.json")
            with open(f"{tmp}/trace.json") as f:
                trace = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        marks = "gpu_user_annotation" if cuda else "user_annotation"
        ranges = {int(e["name"][5:]): (e["ts"], e["ts"] + e["dur"]) for e in trace
                  if e.get("cat") == marks and e["name"].startswith("case:")}
        kernels = [e for e in trace if e.get("cat") == "kernel"] if cuda else \
            [e for e in trace if e.get("cat") == "cpu_op" and e["name"] in ("aten::mm", "aten::bmm")]
        for i, (t0, t1) in ranges.items():
            inside = sorted((e for e in kernels if t0 <= e["ts"] <= t1), key=lambda e: e["ts"])
            names[start + i] = " | ".join(e["name"] for e in inside)
            grids[start + i] = " | ".join("x".join(map(str, e.get("args", {}).get("grid", []))) for e in inside)
        if cuda:
            torch.cuda.empty_cache()
        print(f"{min(start + batch, len(cases))}/{len(cases)}", file=sys.stderr, flush=True)
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["bench", "key", "kernels", "grids"])
        for i, case in enumerate(cases):
            w.writerow([case.bench, case.key, names.get(i, ""), grids.get(i, "")])
    print(f"wrote {len(cases)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
