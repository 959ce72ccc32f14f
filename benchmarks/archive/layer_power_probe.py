"""Where does a layer's measured time part from its ops' predictions? For a few real models at
micro-batch 4 and 8 (s=2048, training), one layer forward+backward as verify's layer mode builds it:
its ops each timed alone (`bench ops`, as the judges time them), the layer timed alone (flush and
cushion before each call, as `interleave` times it) and the layer back to back for a few seconds with
the SM clock sampled (a training run's steady state).

PYTHONPATH=src python3 benchmarks/archive/layer_power_probe.py OUT.json CONFIG.json...   (GPU; ~2 min)
"""

import json
import sys
import tempfile

import torch
from sustained_probe import sampled

from shapewise.bench import bench_ops
from shapewise.hf import load_config
from shapewise.measure import time_fn
from shapewise.ops import OUTSIDE_LAYERS
from shapewise.profile import cost_model
from shapewise.shapes import Workload
from shapewise.store import Store
from shapewise.verify import _layer_fn


def layer_parts(shape, batch: int, db: str) -> tuple[dict, object]:
    """One layer's ops each timed alone against their predictions and the layer timed alone (s=2048,
    training), and the layer's call."""
    workload = Workload(batch=batch, seq=2048)
    with Store(db) as store:
        ops = bench_ops(shape.one_layer(), workload, store=store, gpu=cost_model("h200"), progress=False)
    layer_ops = [(op, row, p) for op, (_, row, p) in zip(ops.ops, ops.rows) if op.name not in OUTSIDE_LAYERS]
    fn = _layer_fn(shape, workload, "cuda", 0)
    return dict(model=shape.name, batch=batch, predicted_ms=sum(op.count * p for op, _, p in layer_ops),
                ops_alone_ms=sum(op.count * row["median_ms"] for op, row, _ in layer_ops if row.get("median_ms")),
                layer_alone_ms=time_fn(fn, budget_ms=400).median_ms,
                ops=[[op.name, op.pass_, op.count, row.get("median_ms"), p] for op, row, p in layer_ops]), fn


def probe(shape, batch: int, db: str) -> dict:
    result, fn = layer_parts(shape, batch, db)
    runs, samples = sampled(fn, 3.0)
    tail = sorted(runs[len(runs) // 2:])
    torch.cuda.empty_cache()
    return dict(result, layer_sustained_ms=tail[len(tail) // 2], clocks=[c[1] for c in samples][::4])


def main() -> int:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sys.argv[2:]:
            shape = load_config(path)
            for batch in (4, 8):
                r = probe(shape, batch, f"{tmp}/ops.db")
                out.append(r)
                print(f"{r['model'][-24:]:24s} b{batch}: predicted {r['predicted_ms']:.2f} ops alone {r['ops_alone_ms']:.2f} "
                      f"layer alone {r['layer_alone_ms']:.2f} sustained {r['layer_sustained_ms']:.2f} ms; clocks {r['clocks'][-1]}",
                      flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
