"""The chooser's own logit (fit.fit_chooser) taught by the H100's named draws as well as the calibration's
choices (RESULTS "the chooser taught by named shapes"): the shipped profile's chooser refitted with and without
the 150k misaligned shapes an H100 named (results/h100-names/names-draws*.json.gz; the H100 chooses the H200's
CUTLASS configuration wherever both ran one: names_apart.py), then judged on the wide seeds' cases the H200s
named (never fitted): how often the likeliest configuration is cuBLAS's, and every wide GEMM and batched GEMM
priced again with the refitted chooser (the trees and every other table kept).

python benchmarks/archive/chooser_names_logit.py [--out P.json]   (on the CPU; about 15 minutes)
--out writes the shipped profile with the chooser taught by the names, for judge_fresh.py --profile.
"""

import argparse
import dataclasses
import json
import time
from pathlib import Path

import chooser_more_names
import numpy as np

from shapewise import fit
from shapewise.cost import LAYOUTS, align_classes, predict_gemm
from shapewise.fit import WMMA, cutlass_config
from shapewise.hardware import get_gpu
from shapewise.profile import CostModel, cost_model

# run as a script, this folder is on the path: its modules load as chooser_more_names loads them
wide_tail, names_apart, chooser_refit = (chooser_more_names.module(name) for name in ("wide_tail", "names_apart",
                                                                                   "chooser_refit"))


def named_choices(kernels: np.ndarray) -> tuple[list[tuple], list[dict]]:
    """Choice rows (without residuals) and shapes of the H100's named draws whose first CUTLASS-family
    kernel is a configuration of the profile's kernel table, keyed as fit.fit_cutlass keys it."""
    index = {(r[0], r[1], r[2], r[3], r[4], r[6], r[7]): i for i, r in enumerate(kernels.astype(int).tolist())}
    rows, shapes = [], []
    for key, names in names_apart.compact_rows(f"{wide_tail.R}/h100-names/names-draws*.json.gz"):
        shape = json.loads(key)
        m, n, k, batch, layout = shape["m"], shape["n"], shape["k"], shape.get("batch", 1), shape["layout"]
        worst = int(max(align_classes(m, n, k, layout, "bf16", 16)))
        config = next((c for c in map(cutlass_config, names) if c), None)
        if worst == 0 or config is None:
            continue
        if batch == 1 or config[0] not in WMMA:
            config = config[:4] + (0, 0)
        row = index.get((*config[:4], LAYOUTS.index(layout), *config[4:6]))
        if row is None:
            continue
        rows.append((LAYOUTS.index(layout), worst, *(round(float(np.log2(v)), 4) for v in (m, n, k, batch)), row))
        shapes.append(dict(m=m, n=n, k=k, batch=batch))
    return rows, shapes


def refit(params, named) -> object:
    """params with the chooser fitted again on the calibration's choices and `named`."""
    choices = np.array(params.cutlass_choices, dtype=float).reshape(-1, 8)
    chosen = [dict(m=int(round(2 ** r[2])), n=int(round(2 ** r[3])), k=int(round(2 ** r[4])), batch=int(round(2 ** r[5])))
              for r in choices]
    report, start = {}, time.time()
    chooser, sharpness, vote = fit.fit_chooser(list(params.cutlass_kernels), [tuple(r[:7]) for r in choices], chosen,
                                               gpu=get_gpu("h200"), octaves=params.residual_octaves,
                                               prior=params.residual_prior, named=named, report=report)
    print(f"  fitted on {report['chooser_cases']} shapes in {time.time() - start:.0f} s: right for "
          f"{report['chooser_right']:.1%} of them; sharpness {sharpness:.3f}, vote {vote:.3f}")
    return dataclasses.replace(params, cutlass_chooser=chooser, cutlass_chooser_sharpness=sharpness,
                               cutlass_chooser_vote=vote)


def priced(cases, params) -> np.ndarray:
    """Each wide case's error priced with params."""
    m, n, k, b = (np.array([getattr(c, d) for c in cases]) for d in ("m", "n", "k", "batch"))
    res = predict_gemm(m, n, k, batch=b, layout=np.array([c.layout for c in cases]),
                       gpu=CostModel(get_gpu("h200"), params))
    return res.time_ms / np.array([c.ms for c in cases]) - 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="write the shipped profile with the chooser taught by the names here")
    args = ap.parse_args()
    shipped = cost_model("h200").params
    cases = wide_tail.load()
    gemm = np.array([c.gemm for c in cases])
    named = named_choices(np.array(shipped.cutlass_kernels, dtype=float))
    print(f"the H100's named draws in the profile's configurations: {len(named[0])}")
    for what, extra in {"refitted on the calibration's choices alone": ((), ()), "taught by the names too": named}.items():
        print(what)
        params = refit(shipped, extra)
        errors = {"shipped": np.array([c.err for c in cases]), "refitted": priced(cases, params)}
        for g in (True, False):
            right, total = chooser_refit.held_out_right(cases, params, g)
            print(f"  {wide_tail.kind(g)}: the likeliest is cuBLAS's for {right} of {total} named ({right / total:.1%}); "
                  + "; ".join(f"{k} {np.median(np.abs(e[gemm == g])):.1%} / {wide_tail.p90(e[gemm == g]):.1%}"
                              for k, e in errors.items()) + f" (median / p90 of {int((gemm == g).sum())})")
        if args.out and extra:
            doc = json.loads(Path("src/shapewise/data/profiles/h200.json").read_text())
            doc["params"].update(cutlass_chooser=[list(r) for r in params.cutlass_chooser],
                       cutlass_chooser_sharpness=params.cutlass_chooser_sharpness,
                       cutlass_chooser_vote=params.cutlass_chooser_vote)
            Path(args.out).write_text(json.dumps(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
