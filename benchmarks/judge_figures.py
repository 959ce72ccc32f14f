"""The figures of benchmarks/RESULTS.md's independent sets, from the committed exports: each set and
seed judged (median and 90th-percentile error per category), the same cases on two H200s, and
`calibrate --quick`'s factors before and after.

python benchmarks/judge_figures.py [--profile PATH] [--machine-factors JSON]
(on this machine's CPU; about a minute).
"""

import argparse
import tempfile

import numpy as np
from machine_files import with_machine_factors

from shapewise.calibrate import summarize
from shapewise.hardware import get_gpu
from shapewise.judges import judge_set_cases, judge_sets
from shapewise.profile import find, load
from shapewise.store import Store

R = "benchmarks/results/h200-judges"
# The ten real configs the models set was drawn from when it was measured (now in the corpus).
CONFIGS = [f"tests/data/hf/{name}.json" for name in ("bloom-7b1", "falcon-7b", "gemma-7b", "gpt2", "llama-2-7b",
                                                   "mixtral-8x7b", "opt-1.3b", "phi-2", "pythia-1b", "qwen2-7b")]
# Which sets each export measured (first H200, second H200); seeds 11, 12 and models 2 were drawn
# after the first export was judged.
MEASURED = {"judges-1.csv.gz": [("wide", 1), ("wide", 2), ("wide", 3), ("attention", 1), ("models", 1)],
            "judges-2.csv.gz": [("wide", 11), ("wide", 12), ("wide", 1), ("attention", 11), ("attention", 1),
                             ("models", 2), ("models", 1)]}
REPEATS = {("judges-2.csv.gz", "wide", 1), ("judges-2.csv.gz", "attention", 1), ("judges-2.csv.gz", "models", 1)}
SHOWN = ("gemm", "bmm", "attention fwd", "attention bwd", "attention decode", "memory", "step train", "step prefill",
         "step decode")


def import_export(path: str, db: str) -> None:
    """A results-store export (CSV, or CSV gzipped as committed) into the store at `db`."""
    with Store(db) as store:
        store.import_csv(path)


def measured_rows(db: str, name: str, seed: int, configs=CONFIGS):
    drawn = judge_set_cases(name, seed=seed, configs=configs)
    by_key = {c.key: c for c in drawn.cases}
    with Store(db) as store:
        found = {r["key"]: r for r in store.rows() if r["key"] in by_key and r.get("error") is None}
    return drawn, [(by_key[k], r) for k, r in found.items()]


def table(judged, *, categories=None) -> list[str]:
    lines = []
    for row in summarize(judged):
        if row["model"] == "calibrated" and (categories is None or row["category"] in categories):
            lines.append(f"{row['category']:22s} {row['n']:4d}  {row['median_ape']:6.1%} {row['p90_ape']:6.1%} "
                         f"{row['max_ape']:7.1%}")
    return lines


def print_judged(title: str, drawn, rows, *, gpu, profile, regimes: bool, on_second=None) -> list:
    """One measured set judged: its heading, each kind's (or every regime's) figures, and where the
    set was measured on a second machine, the kinds' figures with calibrate --quick's factors there."""
    judged = judge_sets(drawn, rows, gpu=gpu, profile=profile)
    print(f"== {title}: {len(rows)} of {len(drawn.cases)} cases measured")
    if drawn.steps:
        # A step is judged where the run measured every op the code draws for it today: one the code has priced
        # otherwise since the run (another op, another shape) drops out, and the figure recorded then is the run's
        # commit's.
        steps = [j for j in judged if j.category.startswith("step ")]
        near = sum(1 for j in steps if abs(j.predicted_ms["calibrated"] / j.measured_ms - 1) <= 0.05)
        print(f"  {len(steps)} of {len(drawn.steps)} steps measured whole, {near} of them within 5%; the rest hold an "
              "op the run did not time (cut short or failed) or one the code draws otherwise since the run: judge "
              "those at its commit")
    for line in table(judged, categories=None if regimes else SHOWN):
        print("  " + line)
    if on_second is not None:
        print("  with calibrate --quick's factors:")
        for line in table(judge_sets(drawn, rows, gpu=gpu, profile=on_second), categories=SHOWN):
            print("    " + line)
    return judged


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", help="the profile to judge (default: the shipped H200 profile)")
    ap.add_argument("--regimes", action="store_true", help="every regime's line, not only the kinds'")
    args = ap.parse_args()
    gpu = get_gpu("h200")
    shipped = load(args.profile) if args.profile else find(gpu)
    on_second = with_machine_factors(shipped, f"{R}/machine-2.json")
    with tempfile.TemporaryDirectory() as tmp:
        dbs = {}
        for export in MEASURED:
            dbs[export] = f"{tmp}/{export}.db"
            import_export(f"{R}/{export}", dbs[export])
        pooled: dict = {}
        for export, sets in MEASURED.items():
            for name, seed in sets:
                drawn, rows = measured_rows(dbs[export], name, seed)
                judged = print_judged(f"{export} {name} seed {seed}", drawn, rows, gpu=gpu, profile=shipped,
                                      regimes=args.regimes, on_second=on_second if export == "judges-2.csv.gz" else None)
                if (export, name, seed) not in REPEATS:
                    pooled.setdefault((export, name), []).extend(judged)
        for (export, name), judged in pooled.items():
            print(f"== pooled: {export} {name}, every regime")
            for line in table(judged):
                print("  " + line)
        print("== the same cases on the two H200s (second / first, median of each case's times)")
        for name in ("wide", "attention", "models"):
            print(spread(name, measured_rows(dbs["judges-1.csv.gz"], name, 1)[1],
                         measured_rows(dbs["judges-2.csv.gz"], name, 1)[1]))
    return 0


def spread(name: str, one: list, two: list) -> str:
    """The same cases measured on two machines ((case, row) pairs of each): how far apart."""
    first = {c.key: r["median_ms"] for c, r in one}
    ratio = np.array([r["median_ms"] / first[c.key] for c, r in two if c.key in first])
    big = np.array([first[c.key] >= 0.03 for c, r in two if c.key in first])
    dev = np.abs(ratio - 1)
    return (f"  {name:10s} {len(ratio):4d} cases: |difference| median {np.median(dev):.1%}, p90 "
            f"{np.percentile(dev, 90):.1%}; second/first geometric mean {np.exp(np.mean(np.log(ratio))):.4f}; "
            f"cases of 30 µs or more ({big.sum()}): median {np.median(dev[big]):.1%}, p90 "
            f"{np.percentile(dev[big], 90):.1%}")


if __name__ == "__main__":
    raise SystemExit(main())
