"""Hold the tensor-parallel model against a two-GPU run (`benchmarks/h200x2_tp.sh`): each collective
of `bench comm` and each t=2 layer of `bench layer --tp 2`, predicted with the link the datasheet
and an assumed efficiency give (the spec model's) and with the link as calibrated (the profile's).

Run: python benchmarks/compare_tp.py [benchmarks/results/h200x2-tp/tp.csv] [--profile PATH|shipped]
"""

import argparse
import csv
import dataclasses
import json

import numpy as np

from shapewise import ModelShape, Workload
from shapewise.cost import SPEC, predict_ops
from shapewise.hardware import get_gpu
from shapewise.ops import COMM, Op, layer_ops
from shapewise.profile import CostModel, find, load


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="?", default="benchmarks/results/h200x2-tp/tp.csv")
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--profile", default="shipped")
    args = ap.parse_args()
    gpu = get_gpu(args.gpu)
    calibrated = (find(gpu) if args.profile == "shipped" else load(args.profile)).params
    assumed = dataclasses.replace(calibrated, comm_bandwidth=SPEC.comm_bandwidth, comm_latency_ms=SPEC.comm_latency_ms)
    models = {"assumed link": assumed, "calibrated link": calibrated}
    print(f"link: assumed {assumed.comm_bandwidth:.0%} of the datasheet + {assumed.comm_latency_ms * 1e3:.0f} µs; "
          f"calibrated {calibrated.comm_bandwidth:.1%} + {calibrated.comm_latency_ms * 1e3:.1f} µs")
    with open(args.csv, newline="") as f:
        rows = list(csv.DictReader(f))

    print("\ncollectives (2 ranks): predicted / measured")
    print(f"{'op':15s} {'MiB':>8s} {'measured ms':>12s} " + " ".join(f"{m:>16s}" for m in models))
    for r in (r for r in rows if r["bench"] == "comm"):
        size, world = int(r["p_bytes"]), int(r["p_world"])
        op = Op(r["p_op"], "fwd", COMM, count=1, flops=0, bytes=size, k=world, family=r["p_op"])
        ratios = [predict_ops([op], gpu=CostModel(gpu, p), dtype="bf16")[0].time_ms / float(r["median_ms"])
                  for p in models.values()]
        print(f"{r['p_op']:15s} {size / 2**20:8.2f} {float(r['median_ms']):12.4f} " + " ".join(f"{x:16.2f}" for x in ratios))

    print("\nlayers at t=2 (the slowest rank): error of the prediction")
    print(f"{'model':12s} {'b×s':>9s} {'pass':6s} {'measured ms':>12s} " + " ".join(f"{m:>16s}" for m in models))
    errors = {m: [] for m in models}
    for r in (r for r in rows if r["bench"] == "layer" and r["p_tp"]):
        p = json.loads(r["key"])
        shape = ModelShape(**p["shape"])
        mode = "train" if p["pass"] == "fwdbwd" else "prefill"
        ops = layer_ops(shape, Workload(batch=p["batch"], seq=p["seq"], tp=p["tp"], mode=mode, attention=p["attention"]))
        measured = float(r["median_ms"])
        line = []
        for name, params in models.items():
            err = sum(c.total_ms for c in predict_ops(ops, gpu=CostModel(gpu, params), dtype="bf16")) / measured - 1
            errors[name].append(abs(err))
            line.append(f"{err:+16.1%}")
        print(f"{shape.name:12s} {p['batch']:>4d}×{p['seq']:<4d} {p['pass']:6s} {measured:12.3f} " + " ".join(line))
    print(f"{'worst |error|':42s}" + " ".join(f"{max(e):16.1%}" for e in errors.values()))
    print(f"{'median |error|':42s}" + " ".join(f"{np.median(e):16.1%}" for e in errors.values()))


if __name__ == "__main__":
    main()
