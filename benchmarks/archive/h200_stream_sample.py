"""`calibrate --quick`'s sample on the H200 the shipped profile was fitted on: its factors, the stream family's
among them, from that H200's own calibration measurements (benchmarks/RESULTS.md, "a ninth round of real configs
… an eleventh H100": the shipped profile lands at +0.2% on the 20 streams).

PYTHONPATH=src python benchmarks/archive/h200_stream_sample.py   (from the repository root, on the CPU; seconds)
"""

import tempfile

from shapewise.hardware import get_gpu
from shapewise.machine import machine_cases, machine_factors
from shapewise.profile import find
from shapewise.store import Store

EXPORTS = ("benchmarks/results/h200-calibration/calibration.csv.gz",
           "benchmarks/results/h200-streams/calibration-streams-1.csv.gz")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp, Store(f"{tmp}/run.db") as store:
        for path in EXPORTS:
            store.import_csv(path)
        stored = {}
        for row in store.rows():
            stored.setdefault(row["key"], row)  # the first measurement of each case
    rows = [(case, stored[case.key]) for case in machine_cases() if case.key in stored]
    gpu = get_gpu("h200")
    print(f"{len(rows)} of the sample's {len(machine_cases())} cases measured on that H200")
    for name, f in machine_factors(rows, gpu=gpu, params=find(gpu).params).items():
        said = f"{f['ms'] * 1e3:+.2f} µs a call" if name == "launch" else f"{f['factor'] - 1:+.1%}"
        print(f"  {name}: {said} ({f['cases']} cases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
