"""The CUTLASS chooser's lead (RESULTS "the wide set's tail" and "the forest's lead priced") with several
times the named shapes: a random forest fitted on the shipped profile's calibration choices plus the
91,762 misaligned shapes an H100 named (results/h100-names/names-draws*.json.gz; where both GPUs ran a
CUTLASS-family kernel, the H100 chose the H200's configuration for every one of 3,421 wide cases:
names_apart.py), judged on the wide seeds' cases the H200s named (never fitted) and priced as
chooser_forest.py prices (hard choice, and the chooser's probabilities times the forest's).

python benchmarks/archive/chooser_more_names.py   (on the CPU; needs scikit-learn, an experiment only)
"""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

from shapewise.fit import cutlass_config

here = Path(__file__).parent


def module(name):
    spec = importlib.util.spec_from_file_location(name, here / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


wide_tail, forest_mod, names_apart = module("wide_tail"), module("chooser_forest"), module("names_apart")


def named_draws() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, labels and batched flags of the H100-named draws whose first CUTLASS-family kernel parses."""
    shapes, labels = [], []
    for key, names in names_apart.compact_rows(f"{wide_tail.R}/h100-names/names-draws*.json.gz"):
        ran = [r for r in map(cutlass_config, names) if r]
        if ran:
            shapes.append(json.loads(key))
            labels.append(forest_mod.label(ran[0]))
    x = forest_mod.shape_features(*(np.array([p.get(d, 1) for p in shapes]) for d in ("m", "n", "k", "batch")),
                                  np.array([p["layout"] for p in shapes]))
    return x, np.array(labels), x[:, 3] > 0  # log2 batch > 0


def main() -> int:
    try:
        from sklearn.ensemble import RandomForestClassifier
    except ImportError:
        print("chooser_more_names.py: needs scikit-learn (pip install scikit-learn)", file=sys.stderr)
        return 2
    x_cal, y_cal, b_cal = forest_mod.calibration_choices()
    x_new, y_new, b_new = named_draws()
    print(f"calibration's choices {len(y_cal)}; the H100's named draws {len(y_new)} "
          f"({b_new.sum()} batched)")
    cases = wide_tail.load()
    blends = wide_tail.chooser_blends(cases)
    every = forest_mod.case_features(cases)
    for gemm in (True, False):
        x_out, y_out = forest_mod.held_out(cases, gemm)
        for what, (x, y) in {"calibration's choices": (x_cal[b_cal != gemm], y_cal[b_cal != gemm]),
                             "and the H100's names": (np.vstack([x_cal[b_cal != gemm], x_new[b_new != gemm]]),
                                                      np.concatenate([y_cal[b_cal != gemm], y_new[b_new != gemm]]))
                             }.items():
            forest = RandomForestClassifier(n_estimators=100, min_samples_leaf=2, n_jobs=2, random_state=0).fit(x, y)
            print(f"{wide_tail.kind(gemm)}, fitted on {what} ({len(y)}): right for "
                  f"{np.mean(forest.predict(x_out) == y_out):.1%} of the wide seeds' {len(y_out)} (held out)")
            proba = forest.predict_proba(every)
            shipped, hard, blend = forest_mod.priced(cases, blends, proba, forest.classes_, gemm)
            print(f"  priced, all {len(shipped)} (median / p90): shipped {np.median(shipped):.1%} / "
                  f"{wide_tail.p90(shipped):.1%}; the forest's likeliest {np.median(hard):.1%} / {wide_tail.p90(hard):.1%}")
            forest_mod.combined(cases, blends, proba, forest.classes_, gemm)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
