"""The one-row walk (params.WALK_*, CostParams.walk_*): cuBLAS's kernel for a weight of 961-1024 columns
read by 1-3 rows, and the line its time follows, fitted on every such GEMM measured on H200s and
committed (the models seeds and the --shards draws of benchmarks/results/h200-*/), with the kernels their
census named.

It prints: which kernel cuBLAS ran for the GEMMs of the band and around it (the rule's evidence), the
line fitted on the band's calls (fixed + per_k × k / 2) against the values params.py holds, and every
band call priced with and without the walk.

python benchmarks/one_row_walk.py   (on the CPU; seconds)
"""

import collections
import csv
import dataclasses
import glob
import gzip
import json
import re

import numpy as np

from shapewise.cost import predict_gemm
from shapewise.exports import open_export
from shapewise.params import WALK_MAX_K, WALK_ROWS, WALK_SPLIT, WALK_TILE_N, WALK_TILES
from shapewise.profile import cost_model

R = "benchmarks/results"
KERNEL = re.compile(r"nvjet_sm90_tst_(\d+x\d+)_\d+x\d+_(\dx\d)_v_bz_")


def few_row_gemms() -> dict:
    """(m, n, k, layout) -> median ms of the unbatched bf16 GEMMs of at most 16 rows measured on H200s."""
    times = collections.defaultdict(list)
    for path in sorted(glob.glob(f"{R}/h200-*/*.csv.gz")):
        with open_export(path) as f:
            reader = csv.DictReader(f)
            if "p_m" not in (reader.fieldnames or ()):
                continue
            for r in reader:
                if r["bench"] not in ("gemm", "op") or r.get("p_kind", "gemm") not in ("gemm", "") or r["error"] \
                        or not r["median_ms"] or (r.get("p_dtype") or "bf16") != "bf16":
                    continue
                try:
                    m, n, k, batch = int(r["p_m"]), int(r["p_n"]), int(r["p_k"]), int(r.get("p_batch") or 1)
                except ValueError:
                    continue
                if m <= 16 and batch == 1:
                    times[m, n, k, r["p_layout"]].append(float(r["median_ms"]))
    return {key: float(np.median(value)) for key, value in times.items()}


def kernels_named() -> dict:
    """(m, n, k, layout) -> the first kernel the census named for it (models seeds' census and the draws' kernels)."""
    named = {}
    for path in sorted(glob.glob(f"{R}/h200-*/census.json.gz")):
        with gzip.open(path, "rt") as f:
            for row in json.load(f):
                case, metrics = json.loads(row["params"]["of"]), row.get("metrics") or {}
                if "m" in case and metrics.get("kernels"):
                    named[case["m"], case["n"], case["k"], case.get("layout", "nt")] = metrics["kernels"][0]
    for path in sorted(glob.glob(f"{R}/h200-*/kernels*.csv.gz")):
        with gzip.open(path, "rt") as f:
            for r in csv.DictReader(f):
                case = json.loads(r["key"]) if r.get("key", "").startswith("{") else {}
                if "m" in case and r.get("kernels"):
                    named.setdefault((case["m"], case["n"], case["k"], case.get("layout", "nt")), r["kernels"])
    return named


def in_band(m, n, k, layout) -> bool:
    return (m <= WALK_ROWS and (WALK_TILES - 1) * WALK_TILE_N < n <= WALK_TILES * WALK_TILE_N and n % 8 == 0
            and k % 8 == 0 and k <= WALK_MAX_K and layout == "nt")


def main() -> int:
    measured, named = few_row_gemms(), kernels_named()
    print(f"{len(measured)} unbatched GEMMs of 1-16 rows measured on H200s; {sum(key in named for key in measured)} "
          "with the kernel named")
    # The rule's evidence: the kernel cuBLAS ran, by band of n, for aligned `nt` GEMMs of 1-3 rows and k ≤ WALK_MAX_K.
    runs = collections.Counter()
    for (m, n, k, layout), _ in measured.items():
        kernel = named.get((m, n, k, layout))
        found = KERNEL.search(kernel or "")
        if kernel and m <= WALK_ROWS and layout == "nt" and n % 8 == 0 and k % 8 == 0 and k <= WALK_MAX_K and n <= 2048:
            band = "n 961-1024" if in_band(m, n, k, layout) else ("n ≤ 960" if n <= 960 else "n 1025-2048")
            runs[band, f"{found.group(1)} cluster {found.group(2)}" if found else kernel.split("(")[0][-40:]] += 1
    print(f"kernels of aligned `nt` GEMMs of 1-{WALK_ROWS} rows, k ≤ {WALK_MAX_K} (calls):")
    for (band, kernel), count in sorted(runs.items()):
        print(f"  {band:12} {kernel:44} {count}")
    band = [key for key in measured if in_band(*key)]
    m, n, k = (np.array([key[i] for key in band]) for i in range(3))
    ms = np.array([measured[key] for key in band])
    walked = k / WALK_SPLIT
    # The line, fitted in relative terms (each call weighs the same whatever its time).
    a = np.stack([np.ones_like(walked), walked], axis=1) / ms[:, None]
    fixed, per_k = np.linalg.lstsq(a, np.ones_like(ms), rcond=None)[0]
    held = cost_model("h200").params
    print(f"\nthe band: {len(band)} calls; line fitted: {fixed * 1e3:.2f} µs + {per_k * 1e6:.2f} ns × k / {WALK_SPLIT} "
          f"(params.py: {held.walk_fixed_ms * 1e3:.2f} µs + {held.walk_per_k_ms * 1e6:.2f} ns)")
    model = cost_model("h200")
    without = dataclasses.replace(model, params=dataclasses.replace(model.params, walk_fixed_ms=0.0, walk_per_k_ms=0.0))
    layout = np.full(len(band), "nt")
    priced = {name: np.asarray(predict_gemm(m, n, k, layout=layout, gpu=cm).time_ms)
              for name, cm in (("with the walk", model), ("without", without))}
    for name, p in priced.items():
        error = p / ms - 1
        print(f"  priced {name:14}: |error| median {np.median(np.abs(error)):.1%}, p90 {np.quantile(np.abs(error), 0.9):.1%}, "
              f"signed median {np.median(error):+.1%}")
    print("  m × n × k: measured µs; priced with the walk, without")
    for i in np.argsort(k):
        print(f"    {m[i]} × {n[i]} × {k[i]}: {ms[i] * 1e3:.1f}; {priced['with the walk'][i] * 1e3:.1f}, "
              f"{priced['without'][i] * 1e3:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
