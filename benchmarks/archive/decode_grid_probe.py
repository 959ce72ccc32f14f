"""How cuDNN splits decoding attention among the SMs: for one query token against caches of several
lengths, head dims and numbers of blocks (a key head's query heads, 16 rows a block), the kernels one
call runs with their grids (the fprop kernel's grid is how many blocks it runs at once; a split adds
cuDNN's lean_reduction kernel), and its time as the judges time it, beside the shipped profile's
prediction and the model's own layout (cost.decode_blocks).

PYTHONPATH=src python3 benchmarks/archive/decode_grid_probe.py OUT.json   (on a GPU; about a minute)
"""

import json
import sys

import torch

from shapewise.bench import _kernels_of, build
from shapewise.cases import op_case
from shapewise.cost import decode_blocks, predict_ops
from shapewise.measure import time_fn
from shapewise.ops import attention_op
from shapewise.profile import cost_model

# (sequences, query heads, key heads, cache, head dim): blocks from 1 to 128 around the model's split
# bound (at most 66 blocks), caches from 4 to 256 steps of 128 keys, every tile, groups 1 to 71.
CASES = [(1, 1, 1, 4096, 64), (1, 8, 8, 32768, 64), (4, 12, 12, 32768, 64), (2, 32, 32, 8192, 64), (3, 22, 22, 8192, 64),
         (3, 24, 24, 8192, 64), (4, 20, 20, 8192, 64), (4, 32, 32, 8192, 64), (2, 71, 1, 16384, 64), (8, 71, 1, 16384, 64),
         (13, 71, 1, 16384, 64), (14, 71, 1, 16384, 64), (1, 32, 8, 4096, 128), (2, 32, 8, 16384, 128),
         (8, 32, 8, 4096, 128), (9, 32, 8, 4096, 128), (10, 32, 8, 4096, 128), (4, 32, 32, 2048, 128),
         (16, 32, 8, 16384, 128), (1, 8, 8, 512, 128), (1, 8, 8, 640, 128), (1, 8, 8, 768, 128), (1, 8, 8, 896, 128),
         (1, 8, 8, 1024, 128), (1, 16, 16, 4096, 256), (2, 8, 8, 32768, 256), (4, 16, 16, 32768, 256),
         (5, 16, 16, 4096, 256), (8, 16, 16, 4096, 256), (4, 32, 8, 32768, 96)]


def main() -> int:
    model, out = cost_model("h200"), []
    for seqs, heads, kv_heads, kv_len, d in CASES:
        op = attention_op("fwd", seqs=seqs, heads=heads, kv_heads=kv_heads, q_len=1, kv_len=kv_len, head_dim=d,
                          causal=False, dtype_bytes=2)
        case = op_case(op, "bf16")
        fn, context = build(case, "cuda")
        with context:
            measured = time_fn(fn, warmup_ms=3, budget_ms=20).median_ms
        fn = context = None
        names, grids, error = _kernels_of(torch, [case], "cuda")[0]
        predicted = predict_ops([op], gpu=model, dtype="bf16")[0].time_ms
        layout = decode_blocks(op, 132)
        out.append(dict(seqs=seqs, heads=heads, kv_heads=kv_heads, kv_len=kv_len, head_dim=d, bytes=op.bytes,
                        measured_ms=measured, predicted_ms=predicted, kernels=names, grids=grids, error=error, model=layout))
        print(f"{seqs:3d}×{heads:3d}/{kv_heads:3d} kv{kv_len:6d} d{d:3d}: blocks {layout['blocks']:4d}, model splits "
              f"{layout['splits']:3d}; measured {measured * 1e3:7.1f} µs, predicted {predicted * 1e3:7.1f} "
              f"({predicted / measured - 1:+.0%}); grids {grids}; {[n[:60] for n in names]}", flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
