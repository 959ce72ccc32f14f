"""validate's independent sets measured on an H100 (benchmarks/h200_judges.sh with GPU=h100), judged
three ways: with the profile an H100 borrows (the H200's: the same chip and clocks, less bandwidth),
with the spec model (what a GPU with no profile gets), and with the profile `calibrate --quick` fitted
on that H100 on top of the borrowed one (its machine_* factors).

python benchmarks/h100_judged.py [--folder benchmarks/results/h100-judges] [--sets wide:37 attention:32 models:19]
    [--configs tests/data/hf [FOLDER …]] [--machine PROFILE.json] [--candidate H200-PROFILE.json]
--candidate: an H200 profile to judge beside the shipped one (a refit), borrowed as the shipped one is and with
the same calibrate --quick factors: two more columns.
(on the CPU; a few minutes)
"""

import argparse
import dataclasses
import sys
import tempfile

from judge_figures import SHOWN, import_export, measured_rows, with_machine_factors

from shapewise.calibrate import summarize
from shapewise.errors import ShapewiseError
from shapewise.hardware import get_gpu
from shapewise.judges import judge_sets
from shapewise.profile import find, load


def name_seed(text: str) -> tuple[str, int]:
    """A set as NAME:SEED (wide:37), for argparse: a bad one is its one-line error, exit 2."""
    name, _, seed = text.partition(":")
    if name not in ("wide", "attention", "models") or not seed.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME:SEED, NAME one of wide, attention, models")
    return name, int(seed)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", default="benchmarks/results/h100-judges")
    ap.add_argument("--sets", nargs="+", type=name_seed, default=[("wide", 37), ("attention", 32), ("models", 19)],
                    help="NAME:SEED each (default wide:37 attention:32 models:19)")
    ap.add_argument("--configs", nargs="+", default=["tests/data/hf"])
    ap.add_argument("--machine", help="calibrate --quick's profile of that H100 (default: FOLDER/h100-machine.json.gz; "
                                      "another folder's for a later call on the same card; none: a run without one)")
    ap.add_argument("--candidate", help="an H200 profile (a refit) judged beside the shipped one, borrowed alike")
    args = ap.parse_args()
    gpu = get_gpu("h100")
    borrowed = find(gpu)
    if borrowed is None or borrowed.borrowed_for != "h100":  # a user's own H100 profile would be judged instead
        print("h100_judged.py: this machine has a profile of its own for the H100 (profile folder); move it aside "
              "to judge the borrowed one", file=sys.stderr)
        return 2
    machine = args.machine or f"{args.folder}/h100-machine.json.gz"
    if machine == "none":  # a run without calibrate --quick: the borrowed profile and the spec model alone
        quick = None
    else:
        try:
            quick = with_machine_factors(borrowed, machine)
        except (OSError, ShapewiseError) as err:
            print(f"h100_judged.py: {err} (benchmarks/h200_judges.sh with GPU=h100 QUICK_CALIBRATE=1 writes it; "
                  "--machine none judges without it)", file=sys.stderr)
            return 2
    profiles = {"borrowed": borrowed, **({"quick": quick} if quick else {})}
    if args.candidate:
        try:
            other = dataclasses.replace(borrowed, params=load(args.candidate).params)
        except ShapewiseError as err:
            print(f"h100_judged.py: --candidate: {err}", file=sys.stderr)
            return 2
        profiles.update(candidate=other, **({"candidate quick": with_machine_factors(other, machine)} if quick else {}))
    if quick:
        print("calibrate --quick's factors on the H100:",
              ", ".join(f"launch {v * 1e3:+.2f} µs a call" if k == "machine_launch_ms" else f"{k[8:]} {v:.3f}"
                        for k, v in vars(quick.params).items() if k.startswith("machine_")))
    with tempfile.TemporaryDirectory() as tmp:
        import_export(f"{args.folder}/judges.csv.gz", f"{tmp}/run.db")
        for name, seed in args.sets:
            drawn, rows = measured_rows(f"{tmp}/run.db", name, seed, args.configs)
            print(f"== {name} seed {seed}: {len(rows)} of {len(drawn.cases)} cases measured  "
                  f"(median / p90 |error|: borrowed H200 profile | spec model | after calibrate --quick"
                  + (" | the candidate borrowed | and after calibrate --quick)" if args.candidate else ")"))
            lines = {}
            for label, profile in profiles.items():
                for row in summarize(judge_sets(drawn, rows, gpu=gpu, profile=profile)):
                    if row["category"] in SHOWN and row["model"] in ("calibrated", "spec-only"):
                        key = "spec" if row["model"] == "spec-only" else label
                        lines.setdefault(row["category"], {"n": row["n"]})[key] = f"{row['median_ape']:5.1%} / {row['p90_ape']:5.1%}"
            for category, got in lines.items():
                print(f"  {category:18s} {got['n']:5d}   {got.get('borrowed', '-'):>15s} | {got.get('spec', '-'):>15s} | "
                      f"{got.get('quick', '-'):>15s}" + "".join(f" | {got.get(k, '-'):>15s}" for k in profiles
                                                                 if k.startswith("candidate")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
