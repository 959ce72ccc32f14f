"""The one-norm parallel layers' whole step as verify times it (layers × layer + head), measured on an H100
and predicted with one norm a layer and with two (benchmarks/RESULTS.md, "a ninth round of real configs … an
eleventh H100"), priced with that H100's `calibrate --quick` profile.

PYTHONPATH=src:benchmarks python benchmarks/archive/one_norm_steps.py   (from the repository root, on the CPU; seconds)
"""

import gzip
import json
import warnings

from machine_files import machine_profile_at

from shapewise.hardware import get_gpu
from shapewise.hf import load_config
from shapewise.profile import CostModel
from shapewise.shapes import Workload
from shapewise.verify import predicted_step_ms

RUN = "benchmarks/results/h100-verify-norms/verify-real.json.gz"
PROFILE = "benchmarks/results/h100-judges-27/h100-machine.json.gz"  # the same card's


def main() -> int:
    model = CostModel(get_gpu("h100"), machine_profile_at(PROFILE).params)
    with gzip.open(RUN, "rt") as f:
        run = json.load(f)
    for name in ("falcon-7b", "phi-2", "gpt-j-6b"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            shape = load_config(f"tests/data/hf/{name}.json")
        workload, measured = Workload(batch=4, seq=2048), run[name][0]["original_measured_step_ms"]
        one = predicted_step_ms(shape, workload, gpu=model)
        two = predicted_step_ms(shape.replace(norms_per_layer=2), workload, gpu=model)
        print(f"{name}: measured {measured:.2f} ms; predicted with one norm {one:.2f} ({one / measured - 1:+.1%}), "
              f"with two {two:.2f} ({two / measured - 1:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
