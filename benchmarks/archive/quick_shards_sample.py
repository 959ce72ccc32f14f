"""The `--shards 1` draw's stream factor (benchmarks/archive/quick_from_draws.py's rule) read from a sample of
the draw's size that `calibrate --quick` could measure: COUNT of its 790 calls, five samples, each written as a
copy of the card's `calibrate --quick` profile (OUT/s0.json … s4.json) to judge with
`benchmarks/step_breakdown.py --profile`.

PYTHONPATH=src:benchmarks:benchmarks/archive python benchmarks/archive/quick_shards_sample.py CARD-FOLDER OUT-FOLDER [COUNT=80]
(on the CPU, seconds)
"""

import gzip
import json
import sys

import numpy as np
from machine_files import machine_profile_at
from quick_from_draws import REFERENCE, measured

from shapewise.cases import predict_cases
from shapewise.draws import drawn_beside
from shapewise.hardware import get_gpu
from shapewise.machine import MACHINE_STREAM, without_factors
from shapewise.profile import CostModel, find


def main() -> int:
    folder, out = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 80
    card, ref = measured(f"{folder}/judges.csv.gz"), measured(REFERENCE["shards"])
    machine_path = f"{folder}/h100-machine.json.gz"
    machine = machine_profile_at(machine_path)
    pool = [c for c in drawn_beside(shards=1) if c.key in card and c.key in ref]
    borrowed, reference = find(get_gpu("h100")), find(get_gpu("h200"))
    for sample in range(5):
        rng = np.random.default_rng([MACHINE_STREAM, sample])
        picked = [pool[i] for i in sorted(rng.choice(len(pool), min(count, len(pool)), replace=False))]
        on_card = predict_cases(picked, gpu=CostModel(get_gpu("h100"), without_factors(borrowed.params)))
        on_ref = predict_cases(picked, gpu=CostModel(get_gpu("h200"), without_factors(reference.params)))
        logs = [np.log((card[c.key] - machine.params.machine_launch_ms) / p) - np.log(ref[c.key] / q)
                for c, p, q in zip(picked, on_card, on_ref)]
        factor = float(np.exp(np.median(logs)))
        with gzip.open(machine_path, "rt") as f:
            data = json.load(f)
        data["params"]["machine_stream"] = round(factor, 4)
        with open(f"{out}/s{sample}.json", "w") as f:
            json.dump(data, f)
        print(f"sample {sample}: {factor - 1:+.2%} over {len(picked)} calls (calibrate --quick read "
              f"{machine.params.machine_stream - 1:+.2%}); wrote {out}/s{sample}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
