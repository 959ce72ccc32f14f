"""The CUTLASS chooser refitted alone (fit.fit_chooser) from the shipped H200 profile's calibration choices,
and judged on the kernels cuBLAS ran for the wide seeds' misaligned GEMMs (held out: never fitted), for
benchmarks/RESULTS.md's "the wide set's tail: where it comes from (a lead)": does a richer chooser, or
more of the same data, pick cuBLAS's configuration more often?

python benchmarks/archive/chooser_refit.py [--features base|hinge|waves] [--half]   (on the CPU; 3-7 minutes)
  base: the chooser's own features (corrections.CHOOSER_FEATURES); hinge: those and, for each of m, n
  and k, max(log2 dim - knot, 0) at knots every 2 octaves from 2 to 16; waves: those and the log of the
  output tiles over the SMs for tiles of 32, 64 and 128 (and its part above one wave); --half: fitted on a random half of
  the calibration's choices (and the held-out cases' neighbours and candidates drawn from that half too).
Each choice's shape is read back from its log2 coordinates (rounded to 4 decimals: exact to the element).
"""

import argparse
import dataclasses
import importlib.util
from pathlib import Path

import numpy as np

from shapewise import corrections, fit
from shapewise.cost import LAYOUTS, align_classes
from shapewise.fit import cutlass_config
from shapewise.hardware import get_gpu
from shapewise.profile import cost_model

spec = importlib.util.spec_from_file_location("wide_tail", Path(__file__).with_name("wide_tail.py"))
wide_tail = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wide_tail)
BASE = corrections.chooser_features
KNOTS = np.arange(2, 17, 2.0)


def hinge_features(m, n, k, batch) -> np.ndarray:
    """The chooser's features and a hinge at each knot of each of log2 m, n and k."""
    x = np.log2(np.stack([m, n, k], axis=1).astype(float))
    return np.column_stack([BASE(m, n, k, batch), *(np.maximum(x[:, d:d + 1] - KNOTS, 0) / 3.0 for d in range(3))])


def wave_features(m, n, k, batch) -> np.ndarray:
    """The chooser's features and, for square tiles of 32, 64 and 128, log2 of the tiles over the SMs (and
    its part above one wave): the occupancy a heuristic would weigh between small and large tiles."""
    waves = [np.log2(np.ceil(m / t) * np.ceil(n / t) * batch / wide_tail.SMS) for t in (32, 64, 128)]
    return np.column_stack([BASE(m, n, k, batch), *(w / 3.0 for w in waves), *(np.maximum(w, 0) / 3.0 for w in waves)])


def refit(choices: np.ndarray, params, features) -> object:
    """params with the chooser fitted again on `choices` (rows of cutlass_choices) with `features`."""
    chosen = [dict(m=int(round(2 ** r[2])), n=int(round(2 ** r[3])), k=int(round(2 ** r[4])), batch=int(round(2 ** r[5])))
              for r in choices]
    report = {}
    chooser, sharpness, vote = fit.fit_chooser(list(params.cutlass_kernels), [tuple(r) for r in choices], chosen,
                                               gpu=get_gpu("h200"), octaves=params.residual_octaves,
                                               prior=params.residual_prior, report=report)
    print(f"fitted on {report['chooser_cases']} calibration choices: right for {report['chooser_right']:.1%} of them")
    return dataclasses.replace(params, cutlass_choices=tuple(map(tuple, choices)), cutlass_chooser=chooser,
                               cutlass_chooser_sharpness=sharpness, cutlass_chooser_vote=vote)


def held_out_right(cases, params, gemm: bool) -> tuple[int, int]:
    """How many of the named cases priced as CUTLASS kernels the chooser's likeliest configuration (family,
    tile, partials) is the one cuBLAS ran, of how many (scored by corrections.candidate_scores, with the
    chooser's features as main() sets them)."""
    tables = corrections._tables(params)
    named = [c for c in cases if c.gemm == gemm and c.kernels and c.served]
    m, n, k, b = (np.array([getattr(c, d) for c in named]) for d in ("m", "n", "k", "batch"))
    layout = np.array([c.layout for c in named])
    class_a, class_n = align_classes(m, n, k, layout, "bf16", 16)
    coords = np.log2(np.stack([m, n, k, b], axis=1).astype(float))
    group = (np.searchsorted(np.array(LAYOUTS), layout) * 3 + np.maximum(class_a, class_n)) * 2 + (b > 1)
    right = total = 0
    for code in np.unique(group):
        mine = np.flatnonzero(group == code)
        if not (tables["choice_groups"] == code).any():
            continue
        configs, _, share = corrections.group_neighbours(params, tables, code, coords[mine])
        *_, score = corrections.candidate_scores(params, tables, configs, m[mine], n[mine], k[mine], b[mine],
                                                 coords[mine], share, wide_tail.SMS)
        for j, best in zip(mine, configs[score.argmax(axis=1)]):
            ran = [cutlass_config(name) for name in named[j].kernels if cutlass_config(name)]
            if ran:
                total += 1
                right += tuple(tables["kernels"][best][:4]) == tuple(ran[0][:4])
    return right, total


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--features", choices=("base", "hinge", "waves"), default="base")
    ap.add_argument("--half", action="store_true", help="fit on a random half of the calibration's choices")
    args = ap.parse_args()
    params = cost_model("h200").params
    cases = wide_tail.load()  # priced by the shipped profile, before the features change
    features = {"base": BASE, "hinge": hinge_features, "waves": wave_features}[args.features]
    fit.chooser_features = corrections.chooser_features = features
    choices = np.array(params.cutlass_choices, dtype=float).reshape(-1, 8)
    if args.half:
        choices = choices[np.random.default_rng(0).random(len(choices)) < 0.5]
    refitted = refit(choices, params, features)
    corrections.CHOOSER_FEATURES = tuple(range(len(refitted.cutlass_chooser[0])))  # the tables' width
    for gemm in (True, False):
        right, total = held_out_right(cases, refitted, gemm)
        print(f"{wide_tail.kind(gemm)} of the wide seeds (held out): the likeliest is what cuBLAS ran for {right} of "
              f"{total} ({right / total:.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
