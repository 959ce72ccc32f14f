"""Decoding steps op by op: `shapewise bench ops MODEL --mode decode` measured every op of a decoding
step alone (benchmarks/results/h200-decode/); this adds them up, count times measured, beside the
cost model's step for the same ops, with the spec model and with the shipped profile.

Run: python benchmarks/compare_decode.py [benchmarks/results/h200-decode/decode.csv]
"""

import csv
import sys

from shapewise import Workload
from shapewise.cases import op_case
from shapewise.cost import SPEC, predict_ops
from shapewise.ops import model_ops
from shapewise.presets import get_model
from shapewise.profile import CostModel, find

RUNS = (("llama3-8b", 16, 8192), ("llama2-7b", 1, 4096), ("mistral-7b", 32, 4096), ("gpt2", 8, 1024))


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/h200-decode/decode.csv"
    with open(path, newline="") as f:
        measured = {r["key"]: float(r["median_ms"]) for r in csv.DictReader(f) if r["median_ms"]}
    models = {"spec model": SPEC, "shipped profile": find("h200").params}
    print(f"{'model':12s} {'b×s':>9s} {'measured ms':>12s} " + " ".join(f"{m:>22s}" for m in models))
    for name, batch, seq in RUNS:
        ops = model_ops(get_model(name), Workload(batch=batch, seq=seq, mode="decode"))
        keys = [op_case(op, "bf16").key for op in ops]
        if any(k not in measured for k in keys):
            print(f"{name}: not every op was measured in {path}")
            continue
        step = sum(op.count * measured[k] for op, k in zip(ops, keys))
        line = []
        for params in models.values():
            predicted = sum(c.total_ms for c in predict_ops(ops, gpu=CostModel("h200", params), dtype="bf16"))
            line.append(f"{predicted:12.3f} ({predicted / step - 1:+6.1%})")
        print(f"{name:12s} {batch:>4d}×{seq:<4d} {step:12.3f} " + " ".join(f"{x:>22s}" for x in line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
