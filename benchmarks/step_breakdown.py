"""Where a whole step's error comes from: the `models` set's steps from a stored run, each step's ops
ranked by how much of the step's error they carry (count × (predicted − measured) per call).

python benchmarks/step_breakdown.py EXPORT.csv[.gz] --seed S [--configs PATH...] [--gpu h200] [--profile PATH] [--over 0.05] [--top 6]
(on the CPU: the export is `shapewise results --export` of a `validate --set models` run; about a minute)
"""

import argparse
import sys
import tempfile

from judge_figures import import_export
from machine_files import machine_profile_at

from shapewise.bench import stored_rows
from shapewise.errors import ShapewiseError
from shapewise.hardware import get_gpu
from shapewise.judges import judge, judge_set_cases
from shapewise.profile import find
from shapewise.store import Store


def gpu_arg(text: str):
    """A GPU by name, for argparse: an unknown one is its one-line error, exit 2."""
    try:
        return get_gpu(text)
    except ShapewiseError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--configs", nargs="+", default=["tests/data/hf"], help="config files or folders (default tests/data/hf)")
    ap.add_argument("--gpu", default="h200", type=gpu_arg,
                    help="the GPU measured (default h200; h100 borrows the H200's profile)")
    ap.add_argument("--profile", help="the profile to judge (default: the GPU's shipped or borrowed profile)")
    ap.add_argument("--over", type=float, default=0.05, help="show the steps whose error is over this (default 5%%)")
    ap.add_argument("--top", type=int, default=6, help="ops shown per step")
    args = ap.parse_args()
    gpu = args.gpu
    profile = machine_profile_at(args.profile, gpu.key) if args.profile else find(gpu)
    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/run.db"
        import_export(args.export, db)
        try:
            drawn = judge_set_cases("models", seed=args.seed, configs=args.configs)
        except ShapewiseError as err:
            print(f"step_breakdown.py: {err}", file=sys.stderr)
            return 2
        with Store(db) as store:
            rows = stored_rows(drawn.cases, store=store)
    ok = [(c, r) for c, r in rows if r.get("error") is None]
    by_key = {c.key: (c, j) for (c, _), j in zip(ok, judge(ok, gpu=gpu, profile=profile))}
    shown = whole = 0
    for step in drawn.steps:
        if not all(key in by_key for key, _ in step.ops):
            continue
        whole += 1
        parts = [(by_key[key][0], by_key[key][1], count) for key, count in step.ops]
        measured = sum(j.measured_ms * n for _, j, n in parts)
        predicted = sum(j.predicted_ms["calibrated"] * n for _, j, n in parts)
        if abs(predicted / measured - 1) <= args.over:
            continue
        shown += 1
        print(f"{step.name}: predicted {predicted:.3f} ms, measured {measured:.3f} ms ({predicted / measured - 1:+.1%})")
        parts.sort(key=lambda p: -abs(p[1].predicted_ms["calibrated"] - p[1].measured_ms) * p[2])
        for case, j, n in parts[:args.top]:
            off = (j.predicted_ms["calibrated"] - j.measured_ms) * n
            print(f"   {off / measured:+6.1%} of the step  {n:4d} × {j.label}: predicted {j.predicted_ms['calibrated']:.4f}, "
                  f"measured {j.measured_ms:.4f} ms")
    print(f"{shown} steps off by more than {args.over:.0%} (of {whole} steps measured whole)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
