"""Which correction of the GEMMs carries over to shapes the calibration never drew: none, the
residual table (the tenth freeze's: each shape corrected by its calibration neighbours), or
gradient-boosted trees (corrections.TREE_FEATURES; trees.py) of several sizes, each fitted on the
H200's calibration GEMMs (the shipped profile's own exports) and judged on what it was not fitted on:
the wide sets (seeds 21-32 seen when the trees were chosen, 33 drawn after), the models sets' GEMMs
(seeds 1-14 seen, 15 after) and the held-out designed sets (seeds 2-19). Prints median / p90 |error|
per set and kind, and the GEMM predictions per second each correction leaves.

python benchmarks/tree_choices.py   (on the CPU; about 5 minutes)
"""

import csv
import dataclasses
import glob
import time

import numpy as np
from refit_profile import averaged, rows_from_export

from shapewise.calibrate import _gemm_rows
from shapewise.cost import predict_gemm
from shapewise.exports import open_export
from shapewise.fit import GemmSamples, fit_trees, residual_rows
from shapewise.hardware import get_gpu
from shapewise.judges import judge_set_cases
from shapewise.profile import CostModel, find

R = "benchmarks/results"
WIDE = range(21, 34)


def measured(files, keep) -> GemmSamples:
    """The GEMMs and batched GEMMs (cases or a model's GEMM ops) of these exports that `keep` takes,
    each key once (its first measurement)."""
    rows = {}
    for path in files:
        with open_export(path) as f:
            for r in csv.DictReader(f):
                gemm = r["bench"] in ("gemm", "bmm") or (r["bench"] == "op" and r.get("p_kind") == "gemm")
                if gemm and not r["error"] and r["median_ms"] and r["p_dtype"] == "bf16" and keep(r["key"]):
                    rows.setdefault(r["key"], dict(m=int(r["p_m"]), n=int(r["p_n"]), k=int(r["p_k"]),
                                                   batch=int(r["p_batch"]), layout=r["p_layout"],
                                                   time_ms=float(r["median_ms"])))
    return GemmSamples.from_rows(list(rows.values()))


def errors(samples: GemmSamples, model) -> str:
    predicted = np.asarray(predict_gemm(samples.m, samples.n, samples.k, batch=samples.batch, layout=samples.layout,
                                        gpu=model).time_ms)
    error = np.abs(predicted / samples.time_ms - 1)
    return "  ".join(f"{kind} {np.median(error[sel]):5.1%} / {np.percentile(error[sel], 90):5.1%}"
                     for kind, sel in (("gemm", samples.batch == 1), ("bmm", samples.batch > 1)) if sel.any())


def main() -> int:
    shipped = find("h200")
    gpu = get_gpu(shipped.gpu)
    calibration = GemmSamples.from_rows(_gemm_rows(averaged([rows_from_export(p) for p in shipped.fit["refitted_from"]])))
    wide = {seed: {c.key for c in judge_set_cases("wide", seed=seed).cases} for seed in WIDE}
    every_wide = set().union(*wide.values())
    fresh = sorted(glob.glob(f"{R}/h200-judges-fresh*/judges.csv.gz"))
    late = f"{R}/h200-judges-fresh12/judges.csv.gz"
    sets = {"wide 21-32 (seen)": measured(fresh, lambda k: any(k in wide[s] for s in WIDE if s < 33)),
            "wide 33 (fresh)": measured([late], lambda k: k in wide[33]),
            "models 1-14 (seen)": measured([f for f in fresh if f != late], lambda k: k not in every_wide),
            "models 15 (fresh)": measured([late], lambda k: k not in every_wide),
            "held-out designed 2-19": measured(sorted(glob.glob(f"{R}/h200-calibration/validation-seed*.csv"))
                                               + [f"{R}/h200-calibration/validation.csv"], lambda k: True)}
    bare = dataclasses.replace(shipped.params, gemm_residuals=(), gemm_trees=(), gemm_tree_base=0.0)
    table = dataclasses.replace(bare, gemm_residuals=residual_rows(calibration, bare, gpu=gpu))
    corrections = {"none": bare, "residual table (tenth freeze)": table}
    for trees, rate in ((50, 0.2), (100, 0.2), (300, 0.1)):
        corrections[f"{trees} trees at {rate}" + (" (shipped)" if (trees, rate) == (100, 0.2) else "")] = fit_trees(
            calibration, bare, gpu=gpu, trees=trees, rate=rate)
    rng = np.random.default_rng(0)
    m, n, k = (rng.integers(1, 16384, 100_000) for _ in range(3))
    for name, params in corrections.items():
        model, layouts = CostModel(shipped.gpu, params), rng.choice(["nn", "nt", "tn"], len(m))
        predict_gemm(m[:10], n[:10], k[:10], gpu=model)  # the tables' arrays are made once per profile
        start = time.perf_counter()
        predict_gemm(m, n, k, layout=layouts, gpu=model)
        print(f"== {name}: {len(m) / (time.perf_counter() - start):,.0f} GEMM predictions/s")
        for label, samples in (("calibration (fitted)", calibration), *sets.items()):
            print(f"  {label:24s} {len(samples):6d}  {errors(samples, model)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
