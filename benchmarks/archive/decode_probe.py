"""Which kernel runs a decoding step's attention (one query token against a cache), and how long:
real models' groupings of query heads per key head (1 to 71) and head dims (64 to 256), each timed
as the judges time it (bench.build of the op case: sequences × heads folded into heads) against the
shipped profile's prediction, with the CUDA kernels one call runs.

PYTHONPATH=src python3 benchmarks/archive/decode_probe.py OUT.json   (on a GPU; about a minute)
"""

import json
import sys

import torch

from shapewise.bench import build
from shapewise.cases import op_case
from shapewise.cost import predict_ops
from shapewise.measure import time_fn
from shapewise.ops import attention_op
from shapewise.profile import cost_model

# (sequences, query heads, key heads, cache length, head dim): real models' decoding at the batches
# the models sets drew, where the models sets' decoding attention missed most (benchmarks/RESULTS.md).
CASES = [(16, 71, 1, 16384, 64), (4, 71, 1, 4096, 64), (32, 232, 8, 4096, 64), (8, 32, 8, 4096, 128),
         (32, 32, 8, 4096, 128), (64, 28, 4, 2048, 128), (8, 40, 8, 4096, 128), (16, 64, 8, 4096, 128),
         (128, 36, 4, 2048, 128), (1, 40, 8, 4096, 128), (4, 16, 16, 32768, 256), (4, 8, 8, 32768, 256),
         (32, 16, 16, 4096, 256), (8, 16, 8, 2048, 256), (64, 32, 32, 1024, 80), (16, 32, 32, 16384, 64)]


def kernels(fn) -> list[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name[:100] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def main() -> int:
    model, out = cost_model("h200"), []
    for seqs, heads, kv_heads, kv_len, d in CASES:
        op = attention_op("fwd", seqs=seqs, heads=heads, kv_heads=kv_heads, q_len=1, kv_len=kv_len, head_dim=d,
                          causal=False, dtype_bytes=2)
        fn, context = build(op_case(op, "bf16"), "cuda")
        with context:
            measured = time_fn(fn, warmup_ms=3, budget_ms=20).median_ms
            names = kernels(fn)
        predicted = predict_ops([op], gpu=model, dtype="bf16")[0].time_ms
        out.append(dict(seqs=seqs, heads=heads, kv_heads=kv_heads, kv_len=kv_len, head_dim=d, bytes=op.bytes,
                        measured_ms=measured, predicted_ms=predicted, kernels=names))
        print(f"{seqs:4d}×{heads:3d}/{kv_heads:3d} kv{kv_len:6d} d{d:3d}: measured {measured * 1e3:8.1f} µs, predicted "
              f"{predicted * 1e3:8.1f} ({predicted / measured - 1:+.0%}), {op.bytes / measured / 1e9:.2f} TB/s; {names}",
              flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
