"""A stream factor for `calibrate --quick`, tried on seen data (benchmarks/RESULTS.md, "a stream factor
tried"): the `models` set's whole steps of an H100 run, priced with that H100's `calibrate --quick` profile,
with every single GEMM of 1-16 rows or columns (a weight stream) priced again by a factor (the profile's own
stream factor, where it has one, set to 1 first), either on its
whole time or on its streaming part alone (its bytes at the GPU's bandwidth); how many steps come within 5%.

python benchmarks/archive/h100_stream_factor.py benchmarks/results/h100-judges-26/judges.csv.gz --seed 26 \
    --profile benchmarks/results/h100-variants-16-new/h100-machine.json.gz \
    --configs tests/data/hf-later tests/data/hf-third tests/data/hf-fourth tests/data/hf-fifth tests/data/hf-sixth
(on the CPU, from the repository root with PYTHONPATH=src:benchmarks; about a minute)
"""

import argparse
import dataclasses
import tempfile

from judge_figures import import_export
from machine_files import machine_profile_at

from shapewise.bench import stored_rows
from shapewise.cost import streams_weights
from shapewise.hardware import get_gpu
from shapewise.judges import judge, judge_set_cases
from shapewise.store import Store

FACTORS = (1.0, 1.03, 1.045, 1.06, 1.1, 1.2)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--configs", nargs="+", required=True)
    ap.add_argument("--profile", required=True, help="that H100's calibrate --quick profile")
    args = ap.parse_args()
    gpu = get_gpu("h100")
    with tempfile.TemporaryDirectory() as tmp:
        import_export(args.export, f"{tmp}/run.db")
        drawn = judge_set_cases("models", seed=args.seed, configs=args.configs)
        with Store(f"{tmp}/run.db") as store:
            rows = stored_rows(drawn.cases, store=store)
    ok = [(c, r) for c, r in rows if r.get("error") is None]
    profile = machine_profile_at(args.profile)  # its own stream factor (calibrate --quick's since it has one) set to 1: each tried
    profile = dataclasses.replace(profile, params=dataclasses.replace(profile.params, machine_stream=1.0))
    by_key = {c.key: (c, j) for (c, _), j in zip(ok, judge(ok, gpu=gpu, profile=profile))}

    def streams(case) -> bool:
        p = case.params
        return p.get("kind") == "gemm" and bool(streams_weights(p["m"], p["n"], p["batch"]))

    steps = [[(by_key[key], count) for key, count in step.ops] for step in drawn.steps
             if all(key in by_key for key, _ in step.ops)]
    print(f"{len(steps)} steps measured whole; steps within 5% with each stream factor:")
    for factor in FACTORS:
        within = {"whole time": 0, "streaming part": 0}
        for step in steps:
            measured = sum(j.measured_ms * n for (_, j), n in step)
            for how in within:
                predicted = 0.0
                for (case, j), n in step:
                    ms = j.predicted_ms["calibrated"]
                    if streams(case):
                        ms = ms * factor if how == "whole time" else ms + (factor - 1) * case.bytes / gpu.bytes_per_s * 1e3
                    predicted += ms * n
                within[how] += abs(predicted / measured - 1) <= 0.05
        print(f"  {factor:.3f}: " + ", ".join(f"{how} {n} of {len(steps)}" for how, n in within.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
