"""The figures of benchmarks/RESULTS.md's "a lead: one-row GEMMs whose split cuBLAS halves": the models
seeds' GEMMs of 1-16 rows on H200s (results/h200-judges-fresh*/) against the shipped profile, the
kernels and grids their census names, and the --shards draws' kernels (results/h200-draws-4/).

python benchmarks/archive/one_row_split.py   (on the CPU; seconds)
"""

import collections
import csv
import glob
import gzip
import json
import re

import numpy as np

from shapewise.cost import predict_gemm
from shapewise.profile import cost_model

R = "benchmarks/results"
SHOWN = [(1, 1024, 2560), (1, 1024, 2048), (1, 1024, 1152), (1, 768, 2048), (1, 768, 1152)]


def models_gemms() -> dict:
    """(m, n, k, layout) -> measured ms of the models seeds' unbatched GEMMs of 1-16 rows."""
    out = {}
    for path in sorted(glob.glob(f"{R}/h200-judges-fresh*/judges.csv.gz")):
        with gzip.open(path, "rt") as f:
            for r in csv.DictReader(f):
                if r["bench"] == "op" and r["p_kind"] == "gemm" and not r["error"] and r["median_ms"] \
                        and int(r["p_m"]) <= 16 and int(r["p_batch"] or 1) == 1:
                    out[(int(r["p_m"]), int(r["p_n"]), int(r["p_k"]), r["p_layout"])] = float(r["median_ms"])
    return out


def census() -> dict:
    """(m, n, k) -> (kernel, grid) of the models seeds' GEMMs their census named."""
    out = {}
    for path in sorted(glob.glob(f"{R}/h200-judges-fresh*/census.json.gz")):
        with gzip.open(path, "rt") as f:
            for row in json.load(f):
                case, metrics = json.loads(row["params"]["of"]), row.get("metrics") or {}
                if "m" not in case or not metrics.get("kernels"):
                    continue
                out[(case["m"], case["n"], case["k"])] = (metrics["kernels"][0].split("(")[0], (metrics.get("grids") or ["?"])[0])
    return out


def main() -> int:
    measured = models_gemms()
    keys = list(measured)
    m, n, k = (np.array([key[i] for key in keys]) for i in range(3))
    layout = np.array([key[3] for key in keys])
    ms = np.array([measured[key] for key in keys])
    predicted = np.asarray(predict_gemm(m, n, k, layout=layout, gpu=cost_model("h200")).time_ms)
    error = predicted / ms - 1
    print(f"{len(keys)} GEMMs of 1-16 rows: {np.median(np.abs(error)):.1%} / {np.quantile(np.abs(error), 0.9):.1%}")
    print("at n = 1024, 1-4 rows:")
    for i in np.argsort(error):
        if n[i] == 1024 and m[i] <= 4:
            print(f"  {m[i]} × {n[i]} × {k[i]} {layout[i]}: measured {ms[i] * 1e3:.1f} µs, priced {predicted[i] * 1e3:.1f} "
                  f"({error[i]:+.1%})")
    named = census()
    print("the five of the table (kernel, grid; measured; 5.8 + 0.0097 × k per block):")
    for shape in SHOWN:
        kernel, grid = named.get(shape, ("not named", "?"))
        split = int(grid.split("x")[0]) if grid != "?" else None
        fit = f"{5.8 + 0.0097 * shape[2] / split:.1f}" if split else "-"
        print(f"  {' × '.join(map(str, shape))}: {kernel[-40:]} {grid}; {measured.get((*shape, 'nt'), float('nan')) * 1e3:.1f} "
              f"µs; {fit}")
    # The --shards draws: which cluster each few-row kernel ran, by n, and how far the profile prices it.
    times, kernels = {}, {}
    for i in (1, 2):
        with gzip.open(f"{R}/h200-draws-4/calibration-shards-{i}.csv.gz", "rt") as f:
            times.update({r["key"]: float(r["median_ms"]) for r in csv.DictReader(f)
                          if r["bench"] == "gemm" and not r["error"] and r["median_ms"]})
        with gzip.open(f"{R}/h200-draws-4/kernels-shards-{i}.csv.gz", "rt") as f:
            kernels.update({r["key"]: r["kernels"].split("(")[0] for r in csv.DictReader(f)})
    groups = collections.defaultdict(list)
    for key, kernel in kernels.items():
        found = re.search(r"nvjet_sm90_tst_(\d+x\d+)_\d+x\d+_(\dx\d)_v_bz_(TNN|TNT)$", kernel)
        if key in times and found:
            case = json.loads(key)
            groups[found.group(1), found.group(2), found.group(3)].append((case, times[key]))
    print("the --shards draws' few-row nvjet kernels (tile, cluster, variant: calls, n range, priced against measured):")
    for (tile, cluster, variant), calls in sorted(groups.items()):
        if len(calls) < 10 and tile != "8x64":
            continue
        cm, cn, ck = (np.array([c[d] for c, _ in calls]) for d in ("m", "n", "k"))
        cl = np.array([c["layout"] for c, _ in calls])
        off = np.asarray(predict_gemm(cm, cn, ck, layout=cl, gpu=cost_model("h200")).time_ms) / [t for _, t in calls] - 1
        print(f"  {tile} {cluster} {variant}: {len(calls)}, n {cn.min()}-{cn.max()}, {np.median(off):+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
