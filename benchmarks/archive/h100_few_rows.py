"""GEMMs of few rows (weight streams) on the H100s, priced by the H200 profile an H100 borrows (no `calibrate
--quick` factors): the signed median error by row count, over every single GEMM of each H100 export named,
for benchmarks/RESULTS.md's "a seventh and eighth round of real configs" (the MoE decode steps priced fast on a ninth H100).

python benchmarks/archive/h100_few_rows.py EXPORT.csv.gz...   (on the CPU; seconds)
e.g. benchmarks/results/h100-judges-{26,24}/judges.csv.gz benchmarks/results/h100-judges-later*/judges.csv.gz
"""

import csv
import json
import sys

import numpy as np

from shapewise.cost import predict_gemm
from shapewise.errors import ShapewiseError
from shapewise.exports import open_export
from shapewise.profile import cost_model

ROWS = ((1, 1), (2, 4), (5, 16), (17, 128), (129, None))
WEIGHTS_MB = 20  # a stream this large is bandwidth's, not launch's


def single_gemms(path: str) -> list[tuple]:
    """(m, n, k, layout, measured ms) of every single GEMM measured without error (a `gemm` bench or a model's op)."""
    out = []
    with open_export(path) as f:
        for r in csv.DictReader(f):
            if r["bench"] not in ("gemm", "op") or r["error"] or not r["median_ms"]:
                continue
            c = json.loads(r["key"])
            if c.get("kind", "gemm") == "gemm" and c.get("batch", 1) == 1:
                out.append((c["m"], c["n"], c["k"], c["layout"], float(r["median_ms"])))
    return out


def main() -> int:
    model = cost_model("h100")  # the borrowed profile: the H200's, at the H100's bandwidth
    for path in sys.argv[1:]:
        try:
            rows = single_gemms(path)
        except (OSError, ShapewiseError) as err:
            print(f"h100_few_rows.py: {path}: {getattr(err, 'strerror', None) or err}", file=sys.stderr)
            return 2
        if not rows:
            print(f"{path}: no single GEMMs")
            continue
        m, n, k, layout, ms = (np.array(x) for x in zip(*rows))
        error = predict_gemm(m, n, k, layout=layout, gpu=model).time_ms / ms - 1
        few = np.minimum(m, n)
        weights_mb = 2.0 * np.maximum(m, n) * k / 1e6  # the matrix the few rows stream, bf16
        print(f"{path}: {len(rows)} GEMMs (signed median error, borrowed profile)")
        for low, high in ROWS:
            mine = (few >= low) & (few <= (high or np.inf))
            big = mine & (weights_mb > WEIGHTS_MB)
            if mine.any():
                print(f"  {low}-{high or ''} rows: {mine.sum():5d}, {np.median(error[mine]):+.1%}; streaming over "
                      f"{WEIGHTS_MB} MB: {big.sum():4d}" + (f", {np.median(error[big]):+.1%}" if big.any() else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
