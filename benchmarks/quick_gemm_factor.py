"""Does `calibrate --quick`'s GEMM factor help an H100's whole steps? Each H100 that ran `calibrate --quick` beside
a models set, judged three ways: with the profile it borrows (the H200's), with its `calibrate --quick` profile
as fitted, and with that profile's GEMM factor alone set to 1 (benchmarks/RESULTS.md, "a lead in its GEMM
factor"): steps off by more than 5% and the GEMMs' median |error|.

The rule, written before the next card's data: on an H100 never used, with a models seed never drawn,
`calibrate --quick` stops fitting a GEMM factor only if, without it, the steps within 5% rise and the GEMMs'
median does not. Judged on a fifteenth H100 (results/h100-judges-31, models seed 31, 66 whole steps): off by
more than 5%, 7 with the factor and 5 without; the GEMMs' median 3.4% and 2.5%. It passed: since then a GPU
that borrows another's profile has its GEMM factor measured and said but not applied (machine.py). On an
H200's own profile the factor stays (results/h200-judges-fresh17, seen: 2 steps off with it, 4 without). The
later H100s (results/h100-judges-32 to -35) ran `calibrate --quick` after that: their profiles
hold the factor unapplied, so their columns two and three agree.

The same for another family's factor, `--family bmm`; and over wide sets, the family's median and p90
|error| instead of steps (`--wide FOLDER:SEED:MACHINE:-`, e.g. h100-judges-24:39:-:-).

python benchmarks/quick_gemm_factor.py [--family gemm|bmm] [--card FOLDER:SEED:MACHINE:CONFIG[,CONFIG…] …]
    [--wide FOLDER:SEED:MACHINE:- …]   (on the CPU; minutes)
(default: the fifteen cards of results/h100-judges*; MACHINE relative to benchmarks/results, or "-" for FOLDER's
h100-machine.json.gz; a new card: --card h100-judges-31:31:-:tests/data/hf; an H200's run, whose "borrowed"
column is then the shipped profile itself: --gpu h200 --card h200-judges-fresh17:22:-:tests/data/hf)
"""

import argparse
import dataclasses
import sys
import tempfile

import numpy as np
from judge_figures import import_export, measured_rows, with_machine_factors

from shapewise.calibrate import judge
from shapewise.errors import ShapewiseError
from shapewise.hardware import get_gpu
from shapewise.profile import find

R = "benchmarks/results"
LATER = "tests/data/hf-later,tests/data/hf-third,tests/data/hf-fourth,tests/data/hf-fifth,tests/data/hf-sixth"
CARDS = ["h100-judges:19:-:tests/data/hf", "h100-judges-later-2:20:-:tests/data/hf-later",
         "h100-judges-21:21:-:tests/data/hf", "h100-judges-24:24:-:tests/data/hf", "h100-judges-25:25:-:tests/data/hf",
         f"h100-judges-26:26:h100-variants-16-new/h100-machine.json.gz:{LATER}",
         f"h100-judges-27:27:-:{LATER},tests/data/hf-seventh,tests/data/hf-eighth",
         "h100-judges-28:28:-:tests/data/hf-later,tests/data/hf-seventh,tests/data/hf-eighth",
         "h100-judges-29:29:-:tests/data/hf-ninth,tests/data/hf-tenth,tests/data/hf-eleventh,tests/data/hf-twelfth",
         "h100-judges-30:30:-:tests/data/hf-later,tests/data/hf-fifth,tests/data/hf-sixth,tests/data/hf-seventh",
         "h100-judges-31:31:-:tests/data/hf", "h100-judges-32:32:-:tests/data/hf",
         "h100-judges-33:33:-:tests/data/hf-ninth,tests/data/hf-tenth,tests/data/hf-eleventh,tests/data/hf-twelfth,"
         "tests/data/hf-thirteenth,tests/data/hf-fourteenth", "h100-judges-34:34:-:tests/data/hf-fifteenth",
         "h100-judges-35:35:-:tests/data/hf-sixteenth"]


def card_arg(text: str) -> tuple[str, int, str, list[str]]:
    """FOLDER:SEED:MACHINE:CONFIG[,CONFIG…], for argparse: a malformed one is its one-line error, exit 2."""
    parts = text.split(":")
    if len(parts) != 4 or not parts[1].isdigit() or not parts[3]:
        raise argparse.ArgumentTypeError(f"{text!r}: give FOLDER:SEED:MACHINE:CONFIGS (MACHINE - for FOLDER's own)")
    folder, seed, machine, configs = parts
    return folder, int(seed), machine, configs.split(",")


def judged(drawn, rows, profile, gpu, family: str = "gemm") -> tuple[int, int, float]:
    """Steps measured whole, those off by more than 5%, and the family's ops' median |error|."""
    by_key = {c.key: j for (c, _), j in zip(rows, judge(rows, gpu=gpu, profile=profile))}
    kind = {c.key: c.params.get("kind", c.bench) for c, _ in rows}
    whole = off = 0
    for step in drawn.steps:
        if all(key in by_key for key, _ in step.ops):
            whole += 1
            measured = sum(by_key[key].measured_ms * n for key, n in step.ops)
            predicted = sum(by_key[key].predicted_ms["calibrated"] * n for key, n in step.ops)
            off += abs(predicted / measured - 1) > 0.05
    ops = [abs(j.predicted_ms["calibrated"] / j.measured_ms - 1) for key, j in by_key.items() if kind[key] == family]
    return whole, off, float(np.median(ops)) if ops else float("nan")


def judged_wide(rows, profile, gpu, family: str) -> tuple[int, float, float]:
    """A wide set's cases of the family (gemm, bmm) and their median and p90 |error|."""
    errors = [abs(j.predicted_ms["calibrated"] / j.measured_ms - 1) for (c, _), j in
              zip(rows, judge(rows, gpu=gpu, profile=profile)) if c.params.get("kind", c.bench) == family]
    return len(errors), float(np.median(errors)), float(np.percentile(errors, 90))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.error = lambda message: sys.exit(print(f"quick_gemm_factor.py: {message}", file=sys.stderr) or 2)  # one line
    ap.add_argument("--card", nargs="+", type=card_arg, default=[card_arg(c) for c in CARDS],
                    help="FOLDER:SEED:MACHINE:CONFIGS (default: the eleven H100s)")
    ap.add_argument("--family", choices=("gemm", "bmm"), default="gemm",
                    help="the factor set to 1 in the third column (default: gemm)")
    ap.add_argument("--wide", nargs="+", type=card_arg, default=[],
                    help="FOLDER:SEED:MACHINE:- wide sets judged instead: the family's median and p90 |error|")
    ap.add_argument("--gpu", choices=("h100", "h200"), default="h100",
                    help="the cards' GPU: h200 judges an H200's run against the shipped profile, its own (default: h100)")
    args = ap.parse_args()
    gpu = get_gpu(args.gpu)
    borrowed = find(gpu)
    factor, name = f"machine_{args.family}", {"gemm": "GEMMs", "bmm": "batched GEMMs"}[args.family]
    wide = bool(args.wide)
    print(f"{'card (wide seed)' if wide else 'card (models seed)':34s} {args.family + ' factor':>11s}   "
          + (f"{name}' median / p90" if wide else f"steps off by > 5%, {name}' median")
          + f": borrowed | quick | quick without its {args.family} factor")
    totals = np.zeros(3, dtype=int)
    for folder, seed, machine, configs in args.wide or args.card:
        machine = f"{R}/{folder}/{args.gpu}-machine.json.gz" if machine == "-" else f"{R}/{machine}"
        try:
            quick = with_machine_factors(borrowed, machine)
        except (OSError, ShapewiseError) as err:
            print(f"quick_gemm_factor.py: {err}", file=sys.stderr)
            return 2
        profiles = (borrowed, quick, dataclasses.replace(quick, params=dataclasses.replace(quick.params, **{factor: 1.0})))
        with tempfile.TemporaryDirectory() as tmp:
            import_export(f"{R}/{folder}/judges.csv.gz", f"{tmp}/run.db")
            drawn, rows = measured_rows(f"{tmp}/run.db", "wide" if wide else "models", seed,
                                        None if wide else configs)
        head = f"{f'{folder} ({seed})':34s} {getattr(quick.params, factor) - 1:+10.1%}   "
        if wide:
            got = [judged_wide(rows, p, gpu, args.family) for p in profiles]
            print(head + " | ".join(f"{median:4.1%} / {p90:4.1%} of {n}" for n, median, p90 in got))
            continue
        got = [judged(drawn, rows, p, gpu, args.family) for p in profiles]
        totals += [off for _, off, _ in got]
        print(head + " | ".join(f"{off:3d} of {whole:4d}, {median:4.1%}" for whole, off, median in got))
    if not wide:
        print(f"{'all':34s} {'':11s}   " + " | ".join(f"{n:3d} off" for n in totals))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
