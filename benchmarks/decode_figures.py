"""Decoding attention's error, from the committed exports: every call of one query token against a
cache measured on an H200, each shape once (the median of its measurements), split into the calls
the profile was fitted on (the calibration exports) and the ones it was not (the models sets of
the fresh judgements, the corpus run and the decode probes), by tile, by query heads per key head,
and by bytes; then the named real-model cases where the earlier model missed most. Head dims over 256
are left out: no fused kernel runs them (the one such call, latent attention of 576 as an older
shapewise mapped it, took SDPA's unfused path; the models sets now price it as batched GEMMs).

python benchmarks/decode_figures.py [--profile PATH] [--reread A | --l2 TBS]   (on the CPU; a few seconds)

--reread A tries one structural question: a key head's query heads past 16 run in more blocks
(cost.decode_blocks), each walking the same cache; if each re-read cost A of a first read, the stream
is A × (blocks per key head - 1) longer. --l2 TBS tries another: every block reads its key head's
cache through L2 at TBS TB/s, a floor under the call's time (that traffic and the fixed time). Only
calls of more than 16 query heads per key head change (under TBS of 4.8, the H200's own bandwidth).

Only predict_ops, Op and the profile loader are used, so the same script prices the calls with an
older shapewise: PYTHONPATH=<a checkout of that commit>/src python benchmarks/decode_figures.py
"""

import argparse
import csv
import glob
import json

import numpy as np

from shapewise import cost
from shapewise.cost import predict_ops
from shapewise.exports import open_export
from shapewise.ops import FLASH, Op
from shapewise.params import DECODE_OVERLAP, DECODE_ROWS
from shapewise.profile import cost_model, load

R = "benchmarks/results"
FITTED = ("h200-calibration/calibration", "h200-settled/", "h200-batched/")  # the profile's own decoding calls
JUDGED = ("h200-judges-fresh", "h200-judges-corpus/")
PROBE = f"{R}/h200-decode-probe/decode-probe.json"
# (sequences × query heads, query heads per key head, cache, head dim): Falcon-7B, Falcon-180B, GPT-J
# at a 32k cache, Llama-3-8B, Gemma-7B (16 heads of 256).
NAMED = {"Falcon-7B, 16 × 71/1, 16k, d64": (1136, 71, 16384, 64), "Falcon-180B, 32 × 232/8, 4k, d64": (7424, 29, 4096, 64),
         "GPT-J, 4 × 16/16, 32k, d256": (64, 1, 32768, 256), "Llama-3-8B, 32 × 32/8, 4k, d128": (1024, 4, 4096, 128),
         "Gemma-7B, 16 × 16/16, 4k, d256": (256, 1, 4096, 256)}


def calls() -> list[dict]:
    """Every measured decoding call, once per shape: batch, groups, cache, head dim, bytes, ms, where."""
    found = {}
    for path in sorted(glob.glob(f"{R}/**/*.csv*", recursive=True)):
        where = "fitted" if any(f in path for f in FITTED) and "validation" not in path else (
            "judged" if any(j in path for j in JUDGED) else "")
        if not where:
            continue
        with open_export(path) as f:
            for r in csv.DictReader(f):
                if (r["bench"] != "op" or r.get("p_kind") != FLASH or r["p_m"] != "1" or r.get("p_pass_") != "fwd"
                        or r["error"] or not r["median_ms"] or int(r["p_k"]) > 256):
                    continue
                shape = (int(r["p_batch"]), int(r["p_groups"] or 1), int(r["p_n"]), int(r["p_k"]))
                entry = found.setdefault(shape, {"ms": [], "where": set(), "bytes": int(float(r["bytes"]))})
                entry["ms"].append(float(r["median_ms"]))
                entry["where"].add(where)
    with open(PROBE) as f:
        for r in json.load(f):
            shape = (r["seqs"] * r["heads"], r["heads"] // r["kv_heads"], r["kv_len"], r["head_dim"])
            entry = found.setdefault(shape, {"ms": [], "where": set(), "bytes": r["bytes"]})
            entry["ms"].append(r["measured_ms"])
            entry["where"].add("judged")
    return [dict(batch=b, groups=g, n=n, k=k, bytes=e["bytes"], ms=float(np.median(e["ms"])),
                 where="fitted" if "fitted" in e["where"] else "judged") for (b, g, n, k), e in found.items()]


def share(text: str) -> float:
    """--reread's A, for argparse: a number from 0 to 1 (a bad one is its one-line error, exit 2)."""
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a share of a read from 0 to 1")
    return value


def rate(text: str) -> float:
    """--l2's TBS, for argparse: a bandwidth in TB/s over 0."""
    value = _number(text)
    if not 0 < value < 1e3:
        raise argparse.ArgumentTypeError(f"{text!r}: give a bandwidth in TB/s over 0")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value != value:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number")
    return value


def reread(part: float) -> None:
    """Price decoding attention's stream as if each block past a key head's first re-read `part` of its
    cache (this script only: cost.decode_terms, patched)."""
    terms = cost.decode_terms

    def reread_terms(op, gpu):
        t = dict(terms(op, gpu))
        factor = 1 + part * (-(-max(op.groups, 1) // DECODE_ROWS) - 1)
        t["narrow"], t["wide"] = t["narrow"] * factor, t["wide"] * factor
        return t
    cost.decode_terms = reread_terms


def l2_floor(tb_per_s: float) -> None:
    """Floor decoding attention's time at every block's read of its key head's cache through L2 at
    tb_per_s, plus its fixed time (this script only: cost.decode_busy_ms and decode_parts_ms, patched)."""
    parts = cost.decode_parts_ms

    def floored_parts(op, gpu, p):
        stream, walk, fixed = parts(op, gpu, p)
        l2 = op.bytes * -(-max(op.groups, 1) // DECODE_ROWS) / (tb_per_s * 1e12) * 1e3
        return stream, max(walk, (max(l2 ** DECODE_OVERLAP - stream ** DECODE_OVERLAP, 0.0)) ** (1 / DECODE_OVERLAP)), fixed
    cost.decode_parts_ms = floored_parts


def line(err) -> str:
    if not len(err):
        return "    0"
    return f"{len(err):5d}  {np.median(np.abs(err)):6.1%} / {np.percentile(np.abs(err), 90):6.1%}  signed {np.median(err):+.1%}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", help="a profile JSON (default: the shipped H200 profile)")
    ap.add_argument("--reread", type=share, default=0.0, metavar="A",
                    help="price each extra block of a key head's group as re-reading A of the cache (default 0: the model's)")
    ap.add_argument("--l2", type=rate, default=0.0, metavar="TBS",
                    help="floor each call at every block's cache read through L2 at TBS TB/s (default: none)")
    args = ap.parse_args()
    if args.reread:
        reread(args.reread)
    if args.l2:
        l2_floor(args.l2)
    model = cost_model("h200", profile=load(args.profile) if args.profile else None)
    rows = calls()
    ops = [Op("attn/flash", "fwd", FLASH, count=1, flops=4 * r["batch"] * r["n"] * r["k"], bytes=r["bytes"], m=1, n=r["n"],
              k=r["k"], batch=r["batch"], groups=r["groups"]) for r in rows]
    predicted = np.array([c.time_ms for c in predict_ops(ops, gpu=model, dtype="bf16")])
    err = predicted / np.array([r["ms"] for r in rows]) - 1
    where = np.array([r["where"] for r in rows])
    k, groups, mb = (np.array([r[name] for r in rows]) for name in ("k", "groups", "bytes"))
    mb = mb / 1e6
    bands = {"all": k > 0, "head dim ≤ 64": k <= 64, "head dim 65-128": (k > 64) & (k <= 128), "head dim > 128": k > 128,
             "1 query head per key head": groups == 1, "2-16 per key head": (groups > 1) & (groups <= 16),
             "more than 16": groups > 16, "under 20 MB": mb < 20, "20-200 MB": (mb >= 20) & (mb < 200),
             "200 MB-1 GB": (mb >= 200) & (mb < 1000), "1 GB and more": mb >= 1000}
    print("decoding attention: calls, median / p90 |error|, signed median (predicted / measured - 1)")
    for name, sel in bands.items():
        print(f"  {name:26s} fitted {line(err[sel & (where == 'fitted')])}   judged {line(err[sel & (where == 'judged')])}")
    print("named real-model calls (judged):")
    for name, (batch, g, n, d) in NAMED.items():
        hit = [i for i, r in enumerate(rows) if (r["batch"], r["groups"], r["n"], r["k"]) == (batch, g, n, d)]
        for i in hit:
            print(f"  {name:34s} measured {rows[i]['ms'] * 1e3:7.1f} µs, predicted {predicted[i] * 1e3:7.1f} ({err[i]:+.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
