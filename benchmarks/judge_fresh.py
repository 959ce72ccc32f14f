"""The figures of the fresh judgements (benchmarks/RESULTS.md, "judged once after the edges"): seeds
drawn after the cost model and the shipped H200 profile were frozen, measured on two H200s, from the
committed exports in results/h200-judges-fresh/: wide seeds 21 and 22, attention seed 21 and models
seed 4 over every corpus config on the first; wide 21 and attention 21 again on the second, with
`calibrate --quick`'s factors (machine-2.json) before and after; and the same cases' spread between
the two machines.

python benchmarks/judge_fresh.py [--profile PATH] [--regimes]   (on the CPU; a few minutes)
"""

import argparse
import dataclasses
import gzip
import json
import shutil
import tempfile

import numpy as np
from judge_figures import table

from shapewise.hardware import get_gpu
from shapewise.judges import judge_set_cases, judge_sets
from shapewise.profile import find, load
from shapewise.store import Store

R = "benchmarks/results/h200-judges-fresh"
CONFIGS = ["tests/data/hf"]
MEASURED = {"judges.csv.gz": [("wide", 21), ("wide", 22), ("attention", 21), ("models", 4)],
            "judges-2.csv.gz": [("wide", 21), ("attention", 21)]}
# After the gemv pricing was narrowed and the profile refitted (the first freeze's models run had been
# seen), one more run of fresh seeds on a third H200.
SECOND = ("benchmarks/results/h200-judges-fresh2",
          {"judges.csv.gz": [("wide", 23), ("wide", 24), ("attention", 22), ("models", 5)]})
SHOWN = ("gemm", "bmm", "attention fwd", "attention bwd", "attention decode", "memory", "step train", "step prefill",
         "step decode")


def rows_of(db: str, name: str, seed: int):
    drawn = judge_set_cases(name, seed=seed, configs=CONFIGS)
    by_key = {c.key: c for c in drawn.cases}
    with Store(db) as store:
        found = {r["key"]: r for r in store.rows() if r["key"] in by_key and r.get("error") is None}
    return drawn, [(by_key[k], r) for k, r in found.items()]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", help="the profile to judge (default: the shipped H200 profile)")
    ap.add_argument("--regimes", action="store_true", help="every regime's line, not only the kinds'")
    ap.add_argument("--second", action="store_true",
                    help="the second freeze's run (results/h200-judges-fresh2/: wide 23, 24; attention 22; models 5)")
    args = ap.parse_args()
    global R, MEASURED
    if args.second:
        R, MEASURED = SECOND
    gpu = get_gpu("h200")
    shipped = load(args.profile) if args.profile else find(gpu)
    on_second = None
    if "judges-2.csv.gz" in MEASURED:
        with open(f"{R}/machine-2.json") as f:
            machine = json.load(f)["params"]
        on_second = dataclasses.replace(shipped, params=dataclasses.replace(shipped.params, **machine))
    with tempfile.TemporaryDirectory() as tmp:
        dbs = {}
        for export in MEASURED:
            plain, dbs[export] = f"{tmp}/{export}.csv", f"{tmp}/{export}.db"
            with gzip.open(f"{R}/{export}", "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)
            with Store(dbs[export]) as store:
                store.import_csv(plain)
        for export, sets in MEASURED.items():
            for name, seed in sets:
                drawn, rows = rows_of(dbs[export], name, seed)
                judged = judge_sets(drawn, rows, gpu=gpu, profile=shipped)
                print(f"== {export} {name} seed {seed}: {len(rows)} of {len(drawn.cases)} cases measured")
                for line in table(judged, categories=None if args.regimes else SHOWN):
                    print("  " + line)
                if export == "judges-2.csv.gz":
                    print("  with calibrate --quick's factors:")
                    for line in table(judge_sets(drawn, rows, gpu=gpu, profile=on_second), categories=SHOWN):
                        print("    " + line)
        if on_second is None:
            return 0
        print("== the same cases on the two H200s (second / first, median of each case's times)")
        for name, seed in MEASURED["judges-2.csv.gz"]:
            _, one = rows_of(dbs["judges.csv.gz"], name, seed)
            _, two = rows_of(dbs["judges-2.csv.gz"], name, seed)
            first = {c.key: r["median_ms"] for c, r in one}
            ratio = np.array([r["median_ms"] / first[c.key] for c, r in two if c.key in first])
            dev = np.abs(ratio - 1)
            print(f"  {name:10s} {len(ratio):4d} cases: |difference| median {np.median(dev):.1%}, p90 "
                  f"{np.percentile(dev, 90):.1%}; second/first geometric mean {np.exp(np.mean(np.log(ratio))):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
