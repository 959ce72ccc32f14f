"""Where the models sets' ops the calibration never timed come out: fused attention's backward by
sequences × heads (the blocks of query rows a position: few on a tensor-parallel rank of a training
run), and memory-bound ops under 2 MB by family and pass. Signed error (predicted / measured - 1) of
every such op the committed exports of the fresh judgements measured, each shape once (seen data: it
chose `calibrate --heads` and `--rows`, not any parameter).

python benchmarks/few_blocks.py [--profile PATH]   (on the CPU; about a minute)
"""

import argparse
import csv
import glob
import json
from collections import defaultdict

import numpy as np

from shapewise.cases import op_from_case
from shapewise.cost import predict_ops
from shapewise.exports import open_export
from shapewise.ops import attended_pairs
from shapewise.profile import cost_model

SMALL_BYTES = 2e6
BLOCKS = ((1, 4), (5, 8), (9, 16), (17, 48), (49, 10 ** 9))


def measured_ops(kind: str) -> list[tuple[dict, dict]]:
    """(case params, export row) of every op of `kind` the fresh judgements measured, each key once;
    not the sliding windows the first runs timed as causal attention over the whole sequence."""
    rows = {}
    for path in sorted(glob.glob("benchmarks/results/h200-judges-fresh*/judges*.csv.gz")):
        with open_export(path) as f:
            for r in csv.DictReader(f):
                if r["bench"] == "op" and r["p_kind"] == kind and not r["error"] and r["median_ms"]:
                    rows.setdefault(r["key"], r)
    out = []
    for key, r in rows.items():
        params = json.loads(key)
        params.pop("bench")
        if _window_timed_as_causal(params, r):
            continue
        out.append((params, r))
    return out


def _window_timed_as_causal(params: dict, row: dict) -> bool:
    """A sliding window the first runs timed as causal attention over the whole sequence (before windows
    were measured as windows): no window among its parameters, but a window's FLOPs, fewer than its
    causal attention's (decoding's calls, and windows as long as the sequence, are causal and kept)."""
    if params.get("kind") != "flash" or params.get("window") or params["m"] == 1:
        return False
    causal = 4 * params["batch"] * attended_pairs(params["m"], params["n"], causal=True, window=0) * params["k"]
    return float(row["flops"] or 0) < 0.99 * causal * (2.5 if params["pass_"] == "bwd" else 1)


def signed(pairs, model) -> np.ndarray:
    ops = [op_from_case(p, flops=float(r["flops"] or 0), nbytes=float(r["bytes"])) for p, r in pairs]
    predicted = np.array([c.time_ms for c in predict_ops(ops, gpu=model, dtype="bf16")])
    return predicted / np.array([float(r["median_ms"]) for _, r in pairs]) - 1


def line(label: str, err: np.ndarray) -> str:
    return (f"  {label:28s} {len(err):4d}  signed median {np.median(err):+6.1%}  p10 {np.percentile(err, 10):+6.1%}"
            f"  p90 {np.percentile(err, 90):+6.1%}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", help="the profile to judge (default: the shipped H200 profile)")
    model = cost_model("h200", profile=ap.parse_args().profile)
    backward = [(p, r) for p, r in measured_ops("flash") if p["pass_"] == "bwd" and not p.get("window")]
    err, blocks = signed(backward, model), np.array([p["batch"] for p, _ in backward])
    print("fused attention's backward, by sequences × heads:")
    for low, high in BLOCKS:
        chosen = (blocks >= low) & (blocks <= high)
        if chosen.any():
            print(line(f"{low}-{high}" if high < 10 ** 9 else f"{low} and more", err[chosen]))
    small = [(p, r) for p, r in measured_ops("memory") if float(r["bytes"]) < SMALL_BYTES]
    err = signed(small, model)
    by = defaultdict(list)
    for (p, _), e in zip(small, err):
        by[p["family"] + (".bwd" if p["pass_"] == "bwd" else "")].append(e)
    print(f"memory-bound ops under {SMALL_BYTES / 1e6:.0f} MB, by family and pass:")
    for name, values in sorted(by.items()):
        if len(values) >= 5:
            print(line(name, np.array(values)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
