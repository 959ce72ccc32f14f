"""A lead for `calibrate --quick` on a card it was never tried on, its rule written before the card's data came:
read the GEMM factor from the `--prefill 1` draw (models' matrices at prefill token counts) and the stream
factor from the `--shards 1` draw (models' weight shards past 1-16 rows), each case against the same case
measured on the H200 the shipped profile was fitted on (results/h200-draws-5/, h200-draws-4/), in place of the
designed GEMMs and `--streams 1`'s wide misaligned weights (benchmarks/RESULTS.md, "the quick sample's GEMMs
split by alignment (a lead refuted)": the designed GEMMs read +1 to +3% on H100s whose models' GEMMs needed
no factor).

The rule. On the card, every case of the draw measured without error; launch: the card's own
`calibrate --quick` estimate, taken off each time as `calibrate --quick` does. Per case, the card's ratio
(measured less launch, over the borrowed profile's price without machine factors) over the reference H200's
ratio (measured there, over the shipped profile's price); the factor is the geometric median of these. The
prefill draw's cases are GEMMs of more than STREAM_ROWS rows (all of it), the shards draw's all streams. The
factors go into copies of the card's `calibrate --quick` profile (machine_gemm: "prefill", machine_stream:
"shards", both: "both"), written to OUT, each judged by `benchmarks/h100_judged.py --machine` on the card's
models set against the profile `calibrate --quick` wrote. Adopted only if whole steps within 5% rise and the
GEMMs' median does not (one card: a lead, not a verdict).

PYTHONPATH=src:benchmarks python benchmarks/archive/quick_from_draws.py CARD-FOLDER OUT-FOLDER
(CARD-FOLDER holds judges.csv.gz with the draws measured beside the sets, and h100-machine.json.gz;
on the CPU, from the repository root with PYTHONPATH=src:benchmarks; seconds)
"""

import csv
import gzip
import json
import sys

import numpy as np

from machine_files import machine_profile_at

from shapewise.cases import predict_cases
from shapewise.draws import drawn_beside
from shapewise.exports import open_export
from shapewise.hardware import get_gpu
from shapewise.machine import without_factors
from shapewise.profile import CostModel, find

REFERENCE = {"prefill": "benchmarks/results/h200-draws-5/calibration-prefill-1.csv.gz",
             "shards": "benchmarks/results/h200-draws-4/calibration-shards-1.csv.gz"}
FACTOR = {"prefill": "machine_gemm", "shards": "machine_stream"}


def measured(path: str) -> dict[str, float]:
    """Case key -> its first measurement without error."""
    out: dict[str, float] = {}
    with open_export(path) as f:
        for r in csv.DictReader(f):
            if r["median_ms"] and not r["error"]:
                out.setdefault(r["key"], float(r["median_ms"]))
    return out


def draw_factor(name: str, card: dict, launch_ms: float, card_params, ref_params) -> tuple[float, int, float]:
    """The factor of draw `name` (1) by the rule above, the cases it rests on and their interquartile range."""
    ref = measured(REFERENCE[name])
    cases = [c for c in drawn_beside(**{name: 1}) if c.key in card and c.key in ref]
    if not cases:
        return 1.0, 0, 0.0
    on_card = predict_cases(cases, gpu=CostModel(get_gpu("h100"), card_params))
    on_ref = predict_cases(cases, gpu=CostModel(get_gpu("h200"), ref_params))
    logs = np.array([np.log((card[c.key] - launch_ms) / p) - np.log(ref[c.key] / q)
                     for c, p, q in zip(cases, on_card, on_ref)])
    return float(np.exp(np.median(logs))), len(cases), float(np.subtract(*np.percentile(logs, [75, 25])))


def main() -> int:
    folder, out = sys.argv[1], sys.argv[2]
    card = measured(f"{folder}/judges.csv.gz")
    machine_path = f"{folder}/h100-machine.json.gz"
    machine = machine_profile_at(machine_path)
    borrowed = find(get_gpu("h100"))
    launch_ms = machine.params.machine_launch_ms
    ref_params = find(get_gpu("h200")).params
    factors = {}
    for name in ("prefill", "shards"):
        factor, count, iqr = draw_factor(name, card, launch_ms, without_factors(borrowed.params), ref_params)
        if not count:  # a card that measured one draw only (the second card: the shards draw)
            print(f"{name}: no case of the draw measured on both cards")
            continue
        factors[name] = factor
        now = getattr(machine.params, FACTOR[name])
        print(f"{name}: {factors[name] - 1:+.1%} over {count} cases (interquartile {iqr:.1%}); "
              f"calibrate --quick read {now - 1:+.1%}")
    with gzip.open(machine_path, "rt") as f:
        data = json.load(f)
    for label, names in (("prefill", ("prefill",)), ("shards", ("shards",)), ("both", ("prefill", "shards"))):
        if not set(names) <= set(factors):
            continue
        changed = json.loads(json.dumps(data))
        for name in names:
            changed["params"][FACTOR[name]] = round(factors[name], 4)
        with open(f"{out}/h100-machine-{label}.json", "w") as f:
            json.dump(changed, f)
        print(f"wrote {out}/h100-machine-{label}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
