"""Which of a layer's kernels run slower in the layer than their ops timed alone? (stream_probe.py found
falcon-7b's neighbour at hidden 4480, micro-batch 8, with its GEMMs 8% slower in the layer than alone,
the neighbour at 4608 1.6%.) For falcon-7b and those two neighbours at micro-batch 8 and 4 (s=2048,
training): every GEMM op of the layer timed alone (`bench`'s builder, as the judges time it) with the
kernel it ran; the layer's kernels in one call under the profiler, in order, after an idle second
(settled) and after three seconds back to back (a training run's steady state).

PYTHONPATH=src:benchmarks/archive python3 benchmarks/archive/stream_kernels.py OUT.json   (on a GPU; ~2 min)
"""

import dataclasses
import json
import sys
import time

import torch
from stream_probe import FALCON_4480, FALCON_4608, C, kind

from shapewise.bench import build
from shapewise.cases import op_case
from shapewise.cost import predict_ops
from shapewise.hf import load_config
from shapewise.measure import time_fn
from shapewise.ops import OUTSIDE_LAYERS, model_ops
from shapewise.profile import cost_model
from shapewise.shapes import Workload
from shapewise.verify import _layer_fn


def profiled(fn) -> list:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                    key=lambda e: e.time_range.start)
    return [[e.name[:90], e.time_range.elapsed_us() / 1e3] for e in events]


def ops_alone(shape, workload) -> list:
    model = cost_model("h200")
    ops = [op for op in model_ops(shape.one_layer(), workload) if op.is_matmul and op.name not in OUTSIDE_LAYERS]
    out = []
    for op, cost in zip(ops, predict_ops(ops, gpu=model, dtype=workload.dtype)):
        case = op_case(op, workload.dtype)
        fn, context = build(case, "cuda")
        with context:
            ms = time_fn(fn, budget_ms=150).median_ms
            names = [n for n, _ in profiled(fn) if kind(n) == "gemm"]
        out.append(dict(op=op.name, pass_=op.pass_, params=case.params, alone_ms=ms, predicted_ms=cost.time_ms, kernels=names))
        del fn, context
        torch.cuda.empty_cache()
    return out


def main() -> int:
    out = []
    for changes in ({}, FALCON_4480, FALCON_4608):
        shape = dataclasses.replace(load_config(f"{C}/falcon-7b.json"), **changes)
        for batch in (8, 4):
            workload = Workload(batch=batch, seq=2048)
            alone = ops_alone(shape, workload)
            fn = _layer_fn(shape, workload, "cuda", 0)
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            time.sleep(1.0)
            settled = profiled(fn)
            start = time.time()
            while time.time() - start < 3.0:
                fn()
            sustained = profiled(fn)
            del fn
            torch.cuda.empty_cache()
            r = dict(changes=changes, batch=batch, alone=alone, settled=settled, sustained=sustained)
            out.append(r)
            g = lambda ks: sum(ms for n, ms in ks if kind(n) == "gemm")
            print(f"hidden {shape.hidden} b{batch}: GEMMs alone {sum(a['alone_ms'] for a in alone):.3f} predicted "
                  f"{sum(a['predicted_ms'] for a in alone):.3f} settled {g(settled):.3f} sustained {g(sustained):.3f}", flush=True)
            for a in alone:
                print(f"   {a['op']:9s} {a['pass_']:5s} {a['alone_ms']:.3f} pred {a['predicted_ms']:.3f} {' '.join(a['kernels'])[:70]}")
            print("   in layer (settled, sustained):")
            for (n, ms), (_, ms2) in zip(settled, sustained):
                if kind(n) == "gemm":
                    print(f"   {ms:.3f} {ms2:.3f} {n[:70]}")
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
