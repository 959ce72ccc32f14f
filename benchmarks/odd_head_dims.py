"""Fused attention at head dims that are not multiples of 8 (benchmarks/RESULTS.md, "head dims not a multiple of 8"):
torch's SDPA runs FlashAttention-2 on padded copies there, not cuDNN's kernel. Prints the factors params.PADDED_SDPA
holds, fitted on the probe's calls (results/h100-odd-head-dims/: the measured time over the price of cuDNN's kernel at
that head dim, over the same ratio where cuDNN runs, the median of each), then judges the shipped factors on the calls
they were not fitted on: every measured call at such a head dim in the models sets' exports given (the models
seed 37 run over tests/data/hf-eighteenth on an H100, by default), priced with and without them.

--fresh EXPORT judges them on a results export of `bench attention` and `bench ops` runs at head dims off 8 and beside
them (benchmarks/results/h100-odd-head-dims-fresh/, drawn after the factors were fixed): each call's error with and
without the factors, by head dim class and regime.

python benchmarks/odd_head_dims.py [--probe JSON] [--judge FOLDER:SEED:CONFIGS ...] [--fresh EXPORT [--gpu GPU]]   (on the CPU; seconds)
"""

import argparse
import json
import sys
import tempfile
import warnings

import numpy as np

sys.path.insert(0, "benchmarks")
from judge_figures import import_export, measured_rows  # noqa: E402
from machine_files import machine_profile_at  # noqa: E402

from shapewise import params  # noqa: E402
from shapewise.cases import op_from_case  # noqa: E402
from shapewise.cost import predict_ops  # noqa: E402
from shapewise.hardware import get_gpu  # noqa: E402
from shapewise.ops import attention_op  # noqa: E402
from shapewise.profile import cost_model, find  # noqa: E402

PROBE = "benchmarks/results/h100-odd-head-dims/sdpa-odd-head-dims.json"
JUDGED = ("benchmarks/results/h100-judges-37:37:tests/data/hf-eighteenth",)


def probe_calls(d: int, calls: dict) -> dict:
    """The probe's three calls at head dim d as ops (names as the probe's keys)."""
    t, c = calls["train"], calls["decode"]

    def op(pass_, call):
        return attention_op(pass_, seqs=call["batch"], heads=call["heads"], kv_heads=call["heads"],
                            q_len=call["q_len"], kv_len=call["kv_len"], head_dim=d, causal=call["causal"],
                            dtype_bytes=2)
    return {"fwd": op("fwd", t), "bwd": op("bwd", t), "decode": op("fwd", c)}


def unpadded():
    """The same cost model with every padded-SDPA factor 1: the price of cuDNN's kernel at any head dim."""
    saved = dict(params.PADDED_SDPA)
    params.PADDED_SDPA.update({k: 1.0 for k in saved})
    return saved


def fit(path: str, model) -> dict:
    """Each pass's factor from the probe, and the ratios it is the median of."""
    with open(path) as f:
        probe = json.load(f)
    ratios = {"fwd": {}, "bwd": {}, "decode": {}}
    for d, row in probe["head_dims"].items():
        ops = probe_calls(int(d), probe["calls"])
        priced = {k: c.time_ms for k, c in zip(ops, predict_ops(list(ops.values()), gpu=model, dtype="bf16"))}
        fwd, both = row["train fwd default ms"], row["train fwdbwd default ms"]
        measured = {"fwd": fwd, "bwd": both - fwd, "decode": row["decode fwd default ms"]}
        for k in ratios:
            ratios[k][int(d)] = measured[k] / priced[k]
    odd = sorted(d for d in ratios["fwd"] if d % 8)
    even = sorted(d for d in ratios["fwd"] if d % 8 == 0)
    print(f"probe: {probe['gpu']}, torch {probe['torch']}; head dims SDPA ran as FlashAttention-2 on padded copies "
          f"{odd} (its default there: {sorted({probe['head_dims'][str(d)]['default'] for d in odd})}), as cuDNN's "
          f"kernel {even} ({sorted({probe['head_dims'][str(d)]['default'] for d in even})})")
    factors = {}
    for k, r in ratios.items():
        machine = float(np.median([r[d] for d in even]))
        factors[k] = float(np.median([r[d] for d in odd])) / machine
        print(f"  {k:6s}: measured / priced where cuDNN runs {machine:.3f} (median; "
              f"{min(r[d] for d in even):.2f}-{max(r[d] for d in even):.2f}), at the padded head dims "
              + ", ".join(f"{d}: {r[d]:.2f}" for d in odd) + f"; the factor {factors[k]:.2f}")
    return factors


def judge(spec: str, model) -> None:
    """The calls at odd head dims of one models run, priced with the shipped factors and without them."""
    folder, seed, configs = spec.split(":")
    with tempfile.TemporaryDirectory() as tmp:
        import_export(f"{folder}/judges.csv.gz", f"{tmp}/run.db")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            drawn, rows = measured_rows(f"{tmp}/run.db", "models", int(seed), configs.split(","))
    odd = [(case, row) for case, row in rows if case.bench == "op" and case.params["kind"] == "flash"
           and case.params["k"] % 8]
    print(f"\njudged: {folder} (models seed {seed} over {configs}): {len(odd)} measured calls at head dims not a "
          "multiple of 8")
    ops = [op_from_case(case.params, flops=case.flops, nbytes=case.bytes) for case, _ in odd]
    shipped = [c.time_ms for c in predict_ops(ops, gpu=model, dtype="bf16")]
    saved = unpadded()
    try:
        before = [c.time_ms for c in predict_ops(ops, gpu=model, dtype="bf16")]
    finally:
        params.PADDED_SDPA.update(saved)
    for (case, row), op, a, b in zip(odd, ops, before, shipped):
        ms = float(row["median_ms"])
        print(f"  {op.pass_:3s} {op.batch:5d}×(q{op.m} kv{op.n} d{op.k}) measured {ms:.4f} ms: priced as cuDNN's "
              f"{a:.4f} ({a / ms - 1:+.1%}), with the factor {b:.4f} ({b / ms - 1:+.1%})")


def fresh(path: str, gpu) -> None:
    """Every attention call of a results export priced with and without the factors: errors by regime and class."""
    import csv
    import gzip

    from shapewise.cases import Case, predict_case

    model = cost_model(gpu, profile=find(gpu))
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        rows = [r for r in csv.DictReader(f) if not r["error"] and r["median_ms"]]
    cases = []
    for r in rows:
        p = json.loads(r["key"])
        bench = p.pop("bench")
        case = Case(bench, p, flops=float(r["flops"]) if r["flops"] else None,
                    bytes=float(r["bytes"]) if r["bytes"] else None)
        if bench == "attention":
            d, regime = p["head_dim"], p["pass"]
        elif bench == "op" and p["kind"] == "flash":
            d, regime = p["k"], "decode" if p["m"] == 1 else p["pass_"]
        else:
            continue
        cases.append((case, float(r["median_ms"]), d, regime))
    shipped = [predict_case(c, gpu=model) for c, *_ in cases]
    saved = unpadded()
    try:
        plain = [predict_case(c, gpu=model) for c, *_ in cases]
    finally:
        params.PADDED_SDPA.update(saved)
    print(f"\nfresh: {path}: {len(cases)} attention calls (`bench attention`: fwd, fwdbwd; `bench ops`: fwd, bwd, "
          "decode), median / p90 |error| (median signed) with the factors | without")
    groups = {}
    for (case, ms, d, regime), a, b in zip(cases, shipped, plain):
        groups.setdefault((regime, "off 8" if d % 8 else "a multiple of 8"), []).append((a / ms - 1, b / ms - 1))
    for (regime, kind), errs in sorted(groups.items()):
        e = np.array(errs)
        print(f"  {regime:6s} head dims {kind:15s} {len(e):3d}: "
              + " | ".join(f"{np.median(np.abs(e[:, i])):6.1%} / {np.quantile(np.abs(e[:, i]), 0.9):6.1%} "
                           f"({np.median(e[:, i]):+6.1%})" for i in (0, 1)))


def verified_bitnet() -> None:
    """verify's prediction of BitNet b1.58 3B's top suggestion (head dim 128) as it priced it on that H100 (layers and
    head, b=4, s=2048, the H100's calibrate --quick profile), with and without the factors; measured there 1.312x
    (benchmarks/results/h100-verify-eighteenth/)."""
    from shapewise.hf import load_config
    from shapewise.shapes import Workload
    from shapewise.verify import predicted_step_ms

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shape = load_config("tests/data/hf-eighteenth/bitnet_b1_58-3b.json")
    top = shape.replace(hidden=3584, num_layers=21, num_heads=28, ffn=9472, vocab=32064)  # its changes, head dim 128
    model = cost_model("h100", profile=machine_profile_at("benchmarks/results/h100-judges-37/h100-machine.json.gz"))
    w = Workload(batch=4, seq=2048)

    def speedup() -> float:
        return predicted_step_ms(shape, w, gpu=model) / predicted_step_ms(top, w, gpu=model)

    with_factors = speedup()
    saved = unpadded()
    try:
        without = speedup()
    finally:
        params.PADDED_SDPA.update(saved)
    print(f"\nverify's BitNet 3B top suggestion (head dim {top.d_head}): predicted {with_factors:.3f}x with the "
          f"factors, {without:.3f}x without; measured 1.312x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", default=PROBE)
    ap.add_argument("--judge", nargs="*", default=list(JUDGED), metavar="FOLDER:SEED:CONFIGS")
    ap.add_argument("--fresh", metavar="EXPORT", help="a results export of attention calls to judge the factors on")
    ap.add_argument("--gpu", default="h100", help="the GPU the --fresh export was measured on, priced with the profile "
                                                  "it finds (default h100: the H200's, borrowed)")
    args = ap.parse_args()
    gpu = get_gpu("h100")
    model = cost_model(gpu, profile=find(gpu))  # the profile an H100 borrows, as the probe's calls were priced
    saved = unpadded()
    try:
        fitted = fit(args.probe, model)
    finally:
        params.PADDED_SDPA.update(saved)
    print("shipped (params.PADDED_SDPA): " + ", ".join(f"{k} {v:.2f}" for k, v in params.PADDED_SDPA.items())
          + "; fitted now: " + ", ".join(f"{k} {v:.2f}" for k, v in fitted.items()))
    for spec in args.judge:
        judge(spec, model)
    if args.judge:
        verified_bitnet()
    if args.fresh:
        fresh(args.fresh, get_gpu(args.gpu))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
