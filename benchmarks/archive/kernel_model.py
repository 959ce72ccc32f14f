"""The misaligned GEMMs with cuBLAS's kernel known: a time model per kernel, and how well the kernel
can be told from the shape.

Reads the committed calibration and held-out sets (benchmarks/results/h200-calibration/) and the
kernel each case ran (benchmarks/results/h200-kernels/kernels.csv.gz, from benchmarks/kernel_names.py).
A misaligned GEMM runs a CUTLASS kernel of one configuration: family (Turing align1, Ampere align2,
Ampere WMMA, Turing WMMA, or Hopper's xmma), tile, output type (fp32 partials for a split-K
reduction, or bf16) and operand layout.
Its time is modelled per configuration as

    launch + T·K·f·a + ⌈T/occupancy⌉·K·b + T·e  [+ split-K: c + d·m·n·batch·splits]

with T the tiles (× K slices) each SM runs, ⌈tiles·splits / SMs⌉, K the slice length, f the filled
share of a tile's rows and columns (a partial tile's empty ones load nothing), a the load
path's throughput per k-step, b the latency of a k-step shared by `occupancy` resident tiles, and e
each tile's epilogue (its narrow stores of C). Least squares on relative error with nonnegative
coefficients; the occupancy (1–8, as the cost model's fit tries) is the one that fits best. Then how
well the kernel is told from the shape: by the nearest calibration shapes, by the shipped profile's
chooser (fit.fit_chooser), and what error each leaves.

Run: python benchmarks/kernel_model.py (about a minute)
"""

import csv
import dataclasses
import json
import re
import sys
from collections import Counter, defaultdict
from typing import NamedTuple

import numpy as np
from refit_profile import kernels_from_csv, rows_from_export  # beside this script

from shapewise.corrections import cutlass_terms, kernel_times as _kernel_times
from shapewise.cost import align_classes, predict_gemm
from shapewise.exports import open_export
from shapewise.fit import CUTLASS_OCCUPANCIES, cutlass_config, nonnegative_lstsq
from shapewise.profile import CostModel, find

RESULTS = "benchmarks/results/"
OCCUPANCIES = CUTLASS_OCCUPANCIES
MIN_CASES = 6  # a configuration seen fewer times in calibration is not fitted here (as fit.CUTLASS_MIN_CASES)
OP = re.compile(r"_(nn|nt|tn)_(?:align\d|n_tilesize)")
CUBLAS_OP = {"nn": "nn", "nt": "tn", "tn": "nt"}  # torch's row-major layout as the column-major kernel names it


class Config(NamedTuple):
    family: str
    tm: int
    tn: int
    fp32_out: bool
    op: str

    @classmethod
    def of(cls, kernel: str) -> "Config | None":
        """The kernel's family, tile, output and operand layout: as the cost model reads its name
        (fit.cutlass_config), with the layout beside it and the K block left out."""
        config = cutlass_config(kernel)
        if config is None:
            return None
        family, tm, tn, partials = config[:4]
        return cls(("Turing", "Ampere", "WMMA", "Turing WMMA", "xmma")[family], tm, tn, bool(partials),
                   OP.search(kernel).group(1))

    def __str__(self):
        return f"{self.family} {self.tm}×{self.tn} {self.op}{' fp32' if self.fp32_out else ''}"


def read_cases(path: str, kernels: dict) -> list[dict]:
    """GEMM and BMM rows of a results export (model ops that are GEMMs too), each with its kernel
    configuration and split where recorded."""
    cases = []
    with open_export(path)  # the export, gzipped as it is kept as f:
        for row in csv.DictReader(f):
            p = json.loads(row["key"])
            if not (row["bench"] in ("gemm", "bmm") or p.get("kind") in ("gemm", "bmm")) or not row["median_ms"]:
                continue  # the GEMMs, the ops of real models among them, as a profile's fit takes them
            case = {"m": p["m"], "n": p["n"], "k": p["k"], "batch": p["batch"], "layout": p["layout"],
                    "ms": float(row["median_ms"])}
            case["worst"] = int(max(align_classes(p["m"], p["n"], p["k"], p["layout"], "bf16", 16)))
            named = kernels.get(row["key"], {"kernels": [""], "grids": ["1x1x1"]})
            config = Config.of(named["kernels"][0])
            if config is not None:
                case["config"] = config
                # CUTLASS splits K over z
                case["splits"] = int(named["grids"][0].split("x")[2]) if p["batch"] == 1 else 1
            cases.append(case)
    return cases


def features(case: dict, config: Config, splits: int, occupancy: int, epilogue: bool = True) -> np.ndarray:
    """The cost model's terms (cost.cutlass_terms) of a case on the H200's 132 SMs; without the epilogue's
    if asked."""
    terms = cutlass_terms(case["m"], case["n"], case["k"], case["batch"], config.tm, config.tn, splits, occupancy, 132)
    return terms * np.array([1, 1, 1, float(epilogue), 1, 1])


def fit_one(cases: list[dict], config: Config, epilogue: bool = True) -> tuple[int, np.ndarray, np.ndarray]:
    """(occupancy, coefficients, in-sample relative errors) of the best-fitting occupancy."""
    y = np.array([c["ms"] for c in cases])
    best = None
    for occupancy in OCCUPANCIES:
        x = np.array([features(c, config, c["splits"], occupancy, epilogue) for c in cases])
        coef = nonnegative_lstsq(x / y[:, None], np.ones_like(y))
        err = np.abs(x @ coef / y - 1)
        if best is None or np.median(err) < np.median(best[2]):
            best = (occupancy, coef, err)
    return best


class KernelModel:
    def __init__(self, calibration: list[dict]):
        self.pool = [c for c in calibration if c["worst"] and "config" in c]
        by_config = defaultdict(list)
        for c in self.pool:
            by_config[c["config"]].append(c)
        self.by_config = by_config
        self.fits = {cfg: fit_one(cases, cfg)[:2] for cfg, cases in by_config.items() if len(cases) >= MIN_CASES}
        self.pool = [c for c in self.pool if c["config"] in self.fits]

    def time(self, case: dict, config: Config, splits: int) -> float:
        occupancy, coef = self.fits[config]
        return float(np.array(features(case, config, splits, occupancy)) @ coef)

    def fastest_split(self, case: dict, config: Config) -> float | None:
        """The configuration's time at its fastest split, as cuBLAS's split choice mostly is: the cost
        model's own rule (corrections.kernel_times) on this fit's coefficients."""
        if config not in self.fits:
            return None
        occupancy, coef = self.fits[config]
        row = np.array([[0, config.tm, config.tn, float(config.fp32_out), 0, occupancy, 0, 0, *coef]])
        times, _ = _kernel_times(row, *(np.array([case[key]]) for key in ("m", "n", "k", "batch")), 132)
        return float(times[0, 0])

    def candidates(self, case: dict) -> list[Config]:
        return [cfg for cfg in self.fits if cfg.op == CUBLAS_OP[case["layout"]]
                and cfg.family in (("Turing", "Turing WMMA") if case["worst"] == 2 else ("Ampere", "WMMA"))]

    def neighbours(self, case: dict, pool: list[dict] | None = None, count: int = 5) -> list[Config]:
        """The configurations cuBLAS ran for the nearest calibration shapes (log2 dims) of the same
        alignment class, layout and batchedness, nearest first."""
        same = [c for c in (pool or self.pool) if c is not case and c["worst"] == case["worst"]
                and c["layout"] == case["layout"] and (c["batch"] > 1) == (case["batch"] > 1)]
        if not same:
            return []
        here = np.log2([case["m"], case["n"], case["k"], case["batch"]])
        d = ((np.log2([[c["m"], c["n"], c["k"], c["batch"]] for c in same]) - here) ** 2).sum(axis=1)
        return [same[i]["config"] for i in np.argsort(d, kind="stable")[:count]]

    def from_shape(self, case: dict, how: str) -> float | None:
        if how == "fastest kernel":
            times = [t for cfg in self.candidates(case) if (t := self.fastest_split(case, cfg)) is not None]
            return min(times, default=None)
        near = self.neighbours(case)
        if not near:
            return None
        chosen = Counter(near).most_common(1)[0][0] if how == "neighbours' kernel" else near[0]
        return self.fastest_split(case, chosen)

    def fastest_of_nearest(self, case: dict, count: int, pool: list[dict] | None = None) -> float | None:
        """The fastest of the configurations the `count` nearest calibration shapes ran (the cost model's choice)."""
        times = [t for cfg in dict.fromkeys(self.neighbours(case, pool, count)) if (t := self.fastest_split(case, cfg))]
        return min(times, default=None)


def chooser_fit(least: int, rows: list, kernels: dict) -> dict:
    """The profile fitted from calibration rows and their kernels with fit.CUTLASS_MIN_CASES = least:
    its chooser's report (how many choices it learned from, and the share it tells right in-sample)."""
    from shapewise import fit
    from shapewise.calibrate import fit_profile
    from shapewise.hardware import get_gpu

    saved, fit.CUTLASS_MIN_CASES = fit.CUTLASS_MIN_CASES, least
    try:
        profile = fit_profile(rows, gpu=get_gpu("h200"), dtype="bf16", environment={}, kernels=kernels)
    finally:
        fit.CUTLASS_MIN_CASES = saved
    return profile.fit["cutlass_chooser"]


def summary(errors, count: bool = True) -> str:
    e = np.asarray(errors)
    return f"median {np.median(e):5.1%}, p90 {np.percentile(e, 90):5.1%}" + (f" (n={len(e)})" if count else "")


def in_sample(model: KernelModel) -> dict:
    """Each configuration's fit on its own cases: the |relative errors| of single and of batched GEMMs."""
    errors = {False: [], True: []}
    for config, cases in model.by_config.items():
        if config in model.fits:
            for c in cases:
                errors[c["batch"] > 1].append(abs(model.time(c, config, c["splits"]) / c["ms"] - 1))
    return errors


def main() -> int:
    kernels = kernels_from_csv(RESULTS + "h200-kernels/kernels.csv.gz")
    calibration = read_cases(RESULTS + "h200-calibration/calibration.csv.gz", kernels)
    held_out = read_cases(RESULTS + "h200-calibration/validation.csv", kernels)
    model = KernelModel(calibration)

    print(f"per-configuration fits on the misaligned calibration cases ({len(model.pool)} in {len(model.fits)} "
          "configurations); in-sample |error| with the epilogue term, and without it:")
    for cfg, cases in sorted(model.by_config.items(), key=lambda kv: -len(kv[1])):
        if len(cases) < 20:
            continue
        occupancy, _, err = fit_one(cases, cfg)
        _, _, bare = fit_one(cases, cfg, epilogue=False)
        print(f"  {cfg!s:26s} n={len(cases):3d} occupancy {occupancy}: {summary(err, False)}; "
              f"without: {summary(bare, False)}")

    # the Turing and Ampere 32×32 WMMA kernels as one configuration, as the cost model had them
    merged = KernelModel([dict(c, config=c["config"]._replace(family="WMMA"))
                          if c.get("config") and c["config"].family == "Turing WMMA" else c for c in calibration])
    print("in-sample |error| of every configuration's fit:")
    for name, model_ in (("the Turing and Ampere WMMA kernels apart:", model), ("the two as one:", merged)):
        errors = in_sample(model_)
        print(f"  {name:44s}single {summary(errors[False])}; batched {summary(errors[True])}")

    with_tables = find("h200").params
    # the shipped profile as it was before its CUTLASS tables: the analytic model and the residual table
    shipped = dataclasses.replace(with_tables, cutlass_kernels=(), cutlass_choices=())
    known = [c for c in held_out if c["worst"] and c.get("config") in model.fits]
    misaligned = [c for c in held_out if c["worst"]]

    def shipped_error(c, params=shipped):
        p = predict_gemm(c["m"], c["n"], c["k"], batch=c["batch"], layout=c["layout"], gpu=CostModel("h200", params))
        return abs(float(p.time_ms) / c["ms"] - 1)

    print(f"held-out misaligned GEMMs and BMMs whose kernel was recorded and fitted (n={len(known)}):")
    print(f"  {'without kernel tables:':44s}{summary([shipped_error(c) for c in known])}")
    print(f"  {'recorded kernel and split:':44s}"
          f"{summary([abs(model.time(c, c['config'], c['splits']) / c['ms'] - 1) for c in known])}")
    print(f"  {'recorded kernel, fastest split:':44s}"
          f"{summary([abs(model.fastest_split(c, c['config']) / c['ms'] - 1) for c in known])}")
    print(f"all held-out misaligned GEMMs and BMMs, the kernel told from the shape (n={len(misaligned)}):")
    print(f"  {'without kernel tables:':44s}{summary([shipped_error(c) for c in misaligned])}")
    for how in ("fastest kernel", "nearest neighbour's kernel", "neighbours' kernel"):
        errs = [abs(t / c["ms"] - 1) if (t := model.from_shape(c, how)) else shipped_error(c) for c in misaligned]
        print(f"  {how + ', fastest split:':44s}{summary(errs)}")
    for count in (2, 3):
        errs = [abs(t / c["ms"] - 1) if (t := model.fastest_of_nearest(c, count)) else shipped_error(c)
                for c in misaligned]
        label = f"fastest of the {count} nearest shapes' kernels:"
        print(f"  {label:44s}{summary(errs)}")
    print(f"  {'the shipped profile (its kernel tables):':44s}"
          f"{summary([shipped_error(c, with_tables) for c in misaligned])}")
    print("  by set: the fastest of the 2 nearest shapes' kernels; the profile without kernel tables; the shipped profile")
    for name, batched in (("GEMMs", False), ("batched GEMMs", True)):
        mine = [c for c in misaligned if (c["batch"] > 1) == batched]
        errs = [abs(t / c["ms"] - 1) if (t := model.fastest_of_nearest(c, 2)) else shipped_error(c) for c in mine]
        print(f"    {name:14s} {summary(errs)}; {summary([shipped_error(c) for c in mine], False)}; "
              f"{summary([shipped_error(c, with_tables) for c in mine], False)}")
    print("  the shipped profile by alignment class (the worst dim's: even, or odd)")
    for name, batched in (("GEMMs", False), ("batched GEMMs", True)):
        for worst, words in ((1, "even"), (2, "odd")):
            mine = [c for c in misaligned if (c["batch"] > 1) == batched and c["worst"] == worst]
            print(f"    {name + ', ' + words:20s} {summary([shipped_error(c, with_tables) for c in mine])}")

    rng = np.random.default_rng(0)
    # Seeds 3-12: each held-out set's kernels named in one census (h200-kernels/kernels-heldout.csv.gz)
    named = kernels_from_csv(RESULTS + "h200-kernels/kernels-heldout.csv.gz")
    later = [c for seed in range(3, 13) for c in read_cases(RESULTS + f"h200-calibration/validation-seed{seed}.csv", named)
             if c["worst"] and c.get("config") in model.fits]
    print(f"held-out seeds 3-12, misaligned GEMMs and BMMs whose kernel was recorded and fitted (n={len(later)}):")
    for name, batched in (("GEMMs", False), ("batched GEMMs", True)):
        mine = [c for c in later if (c["batch"] > 1) == batched]
        print(f"  {name} (n={len(mine)}): recorded kernel and split "
              f"{summary([abs(model.time(c, c['config'], c['splits']) / c['ms'] - 1) for c in mine], False)}; "
              f"recorded kernel, fastest split "
              f"{summary([abs(model.fastest_split(c, c['config']) / c['ms'] - 1) for c in mine], False)}; "
              f"the shipped profile {summary([shipped_error(c, with_tables) for c in mine], False)}")
    print("  the shipped profile with a random part of its choices (3 draws each): do more shapes' kernels tell better?")
    choices = np.array(with_tables.cutlass_choices)
    for part in (1.0, 0.5, 0.25):
        errors = {False: [], True: []}
        for _ in range(3 if part < 1 else 1):
            kept = dataclasses.replace(with_tables, cutlass_choices=tuple(map(tuple, choices[rng.random(len(choices)) < part])))
            for c in later:
                errors[c["batch"] > 1].append(shipped_error(c, kept))
        print(f"    {part:4.0%} of the choices: GEMMs {summary(errors[False], False)}; "
              f"batched GEMMs {summary(errors[True], False)}")

    print("the chooser fitted from the first calibration run alone, with configurations fitted from 4, 6, 8 and "
          "10 cases up: the choices it learned from, and the share it tells right in-sample:")
    rows = rows_from_export(RESULTS + "h200-calibration/calibration.csv.gz")
    for least in (4, 6, 8, 10):
        found = chooser_fit(least, rows, kernels)
        print(f"  {least:2d} cases — {found['chooser_cases']} choices, {found['chooser_right']:.1%} right")
    print("the tile cuBLAS runs for held-out seeds 3-12 (recorded), told by the shipped profile's likeliest "
          "configuration and by the nearest shape of its choices:")
    choices = np.array(with_tables.cutlass_choices)
    kernels_table = np.array(with_tables.cutlass_kernels)
    for name, batched in (("GEMMs", False), ("batched GEMMs", True)):
        mine = [c for c in later if (c["batch"] > 1) == batched]
        col = lambda key: np.array([c[key] for c in mine])  # noqa: E731
        told = predict_gemm(col("m"), col("n"), col("k"), batch=col("batch"), layout=col("layout"), gpu=CostModel("h200", with_tables))
        right = [tuple(t) == (c["config"].tm, c["config"].tn) for t, c in zip(told.tile, mine)]
        nearest = []
        for c in mine:
            layout = ["nn", "nt", "tn"].index(c["layout"])
            same = (choices[:, 0] == layout) & (choices[:, 1] == c["worst"]) & ((choices[:, 5] > 0) == batched)
            d = ((choices[same, 2:6] - np.log2([c["m"], c["n"], c["k"], c["batch"]])) ** 2).sum(axis=1)
            row = kernels_table[int(choices[same][np.argmin(d), 6])]
            nearest.append((int(row[1]), int(row[2])) == (c["config"].tm, c["config"].tn))
        print(f"  {name:14s} the chooser {np.mean(right):.0%}, the nearest shape {np.mean(nearest):.0%} (n={len(mine)})")
    print("the tile cuBLAS runs, told by the nearest calibration shape's (held-out cases with a recorded kernel);"
          " learning curve over random parts of the calibration set (3 draws each):")
    for part in (0.25, 0.5, 0.75, 1.0):
        rates = []
        for _ in range(3 if part < 1 else 1):
            pool = [model.pool[i] for i in rng.permutation(len(model.pool))[:int(part * len(model.pool))]]
            hits = [(near[0][:3] == c["config"][:3]) for c in known if (near := model.neighbours(c, pool, 1))]
            rates.append(np.mean(hits))
        print(f"  {part:4.0%} of the calibration cases: {np.mean(rates):.0%} of tiles right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
