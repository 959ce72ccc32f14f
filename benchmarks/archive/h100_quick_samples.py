"""What `calibrate --quick`'s GEMM sample reads on an H100 against what the models set's GEMMs show there
(benchmarks/RESULTS.md, "a ninth round of real configs … an eleventh H100", the twelfth card's lead): the
borrowed profile's signed median error (predicted / measured − 1) of the models' GEMMs of more than 128 rows by
predicted length, and of the quick sample's GEMMs its factor is fitted on (measured at MIN_MS or longer),
aligned (every dim a multiple of 64) or not. The export must hold this version's quick sample (`h200_judges.sh`
with QUICK_CALIBRATE=1 since the stream family: the twelfth card's).

python benchmarks/archive/h100_quick_samples.py benchmarks/results/h100-judges-28/judges.csv.gz
(on the CPU, from the repository root with PYTHONPATH=src:benchmarks/archive; seconds)
"""

import csv
import sys

import numpy as np
from h100_few_rows import single_gemms

from shapewise.cases import predict_case
from shapewise.cost import predict_gemm
from shapewise.exports import open_export
from shapewise.machine import MIN_MS, family, machine_cases
from shapewise.profile import cost_model

LENGTHS_MS = ((0, 0.03), (0.03, 0.1), (0.1, 0.5), (0.5, 2), (2, np.inf))


def main() -> int:
    model = cost_model("h100")  # the borrowed profile
    sample = [c for c in machine_cases() if family(c) == "gemm"]
    for path in sys.argv[1:]:
        m, n, k, layout, ms = (np.array(x) for x in zip(*single_gemms(path)))
        error = predict_gemm(m, n, k, layout=layout, gpu=model).time_ms / ms - 1
        large = np.minimum(m, n) > 128
        print(f"{path}: models' GEMMs of more than 128 rows, by predicted length:")
        predicted = ms * (1 + error)
        for low, high in LENGTHS_MS:
            mine = large & (predicted >= low) & (predicted < high)
            if mine.any():
                print(f"  {low}-{high} ms: {mine.sum():4d}, {np.median(error[mine]):+.1%}")
        with open_export(path) as f:
            measured = {r["key"]: float(r["median_ms"]) for r in csv.DictReader(f)
                        if r["median_ms"] and not r["error"] and float(r["median_ms"]) >= MIN_MS}
        rows = [(predict_case(c, gpu=model) / measured[c.key] - 1, all(c.params[d] % 64 == 0 for d in "mnk"))
                for c in sample if c.key in measured]
        for aligned in (True, False):
            mine = [e for e, a in rows if a == aligned]
            if mine:
                print(f"  the quick sample's GEMMs, {'aligned' if aligned else 'misaligned'}: {len(mine)}, "
                      f"{np.median(mine):+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
