"""Hold the cost model against a results-store export (`shapewise results --export X.csv`): every
GEMM, BMM, default-kernel attention, op and layer row, predicted now and compared.

Run: python benchmarks/compare_bench.py [benchmarks/results/h200-bench.csv] [--gpu h200] [--profile PATH|shipped]
"""

import argparse
import csv
import json
from pathlib import Path

import numpy as np

from shapewise import ModelShape, Workload, predict_gemm
from shapewise.cases import op_from_case
from shapewise.cost import SPEC, predict_attention, predict_ops
from shapewise.ops import layer_ops
from shapewise.profile import CostModel, find, load


def predict(row, gpu: str, params=SPEC):
    """(set name, predicted ms), or None where the model describes no such kernel."""
    bench, dtype = row["bench"], row["p_dtype"]
    p = json.loads(row["key"])  # the case's parameters, canonical JSON
    if bench in ("gemm", "bmm"):
        pred = predict_gemm(p["m"], p["n"], p["k"], batch=p["batch"], layout=p["layout"], gpu=CostModel(gpu, params), dtype=dtype)
        return bench, float(pred.time_ms)
    if bench == "attention":
        if p["backend"] != "default":
            return None
        return f"attention/{p['pass']}", predict_attention(
            batch=p["batch"], heads=p["heads"], kv_heads=p["kv_heads"], seq=p["seq"], head_dim=p["head_dim"],
            causal=p["causal"], pass_=p["pass"], gpu=CostModel(gpu, params), dtype=dtype)
    seconds = float(row["median_ms"]) * 1e-3  # older exports carry rates, not the work itself
    if bench == "op":
        flops = float(row["tflops"]) * 1e12 * seconds if row["tflops"] else None
        op = op_from_case(p, flops=flops, nbytes=float(row["gbps"]) * 1e9 * seconds)
        return f"op/{p['kind']}", predict_ops([op], gpu=CostModel(gpu, params), dtype=dtype)[0].time_ms
    if bench == "layer":
        shape = ModelShape(**p["shape"])
        mode = "train" if p["pass"] == "fwdbwd" else "prefill"
        ops = layer_ops(shape, Workload(batch=p["batch"], seq=p["seq"], mode=mode))
        return f"layer/{p['pass']}", sum(c.total_ms for c in predict_ops(ops, gpu=CostModel(gpu, params), dtype=dtype))
    return None


def spearman(a, b) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", default=str(Path(__file__).parent / "results" / "h200-bench.csv"))
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--profile", help="a profile's path, or 'shipped' for the package's (default: spec model)")
    args = parser.parse_args()
    params = SPEC
    if args.profile:
        params = (find(args.gpu) if args.profile == "shipped" else load(args.profile)).params
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.DictReader(f) if not r["error"]]
    sets: dict[str, list] = {}
    layers = []
    for row in rows:
        got = predict(row, args.gpu, params)
        if got:
            sets.setdefault(got[0], []).append((float(row["median_ms"]), got[1]))
            if row["bench"] == "layer":
                p = json.loads(row["key"])
                layers.append((p["model"], p["pass"], float(row["median_ms"]), got[1]))
    print(f"{'set':18} {'n':>4} {'median |err|':>12} {'p90 |err|':>10} {'bias':>7} {'spearman':>8}")
    for name, pairs in sorted(sets.items()):
        meas, pred = np.array(pairs).T
        err = pred / meas - 1
        rho = spearman(pred, meas) if len(pairs) > 2 else float("nan")
        print(f"{name:18} {len(pairs):4d} {np.median(abs(err)):12.1%} {np.percentile(abs(err), 90):10.1%} "
              f"{np.median(err):+7.1%} {rho:8.3f}")
    print(f"\n{'layer':16} {'pass':7} {'measured ms':>11} {'predicted ms':>12} {'error':>7}")
    for model, pass_, meas, pred in sorted(layers):
        print(f"{model:16} {pass_:7} {meas:11.3f} {pred:12.3f} {pred / meas - 1:+7.1%}")


if __name__ == "__main__":
    main()
