"""The CUTLASS chooser's lead (RESULTS "the wide set's tail" and "the forest's lead priced") with several
times the named shapes: a random forest fitted on the shipped profile's calibration choices plus the
91,762 misaligned shapes an H100 named (results/h100-names/names-draws*.json.gz; where both GPUs ran a
CUTLASS-family kernel, the H100 chose the H200's configuration for every one of 3,421 wide cases:
names_apart.py), judged on the wide seeds' cases the H200s named (never fitted) and priced as
chooser_forest.py prices (hard choice, and the chooser's probabilities times the forest's).

python benchmarks/archive/chooser_more_names.py   (on the CPU; needs scikit-learn, an experiment only)
"""

import gzip
import glob
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

from shapewise import corrections
from shapewise.cost import LAYOUTS, align_classes
from shapewise.fit import cutlass_config
from shapewise.profile import cost_model

here = Path(__file__).parent


def module(name):
    spec = importlib.util.spec_from_file_location(name, here / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


wide_tail, forest_mod = module("wide_tail"), module("chooser_forest")


def named_draws() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, labels and batched flags of the H100-named draws whose first CUTLASS-family kernel parses."""
    coords, layouts, worst, labels = [], [], [], []
    for path in sorted(glob.glob(f"{wide_tail.R}/h100-names/names-draws*.json.gz")):
        with gzip.open(path, "rt") as f:
            doc = json.load(f)
        for key, idx, _grids, _error in doc["rows"]:
            ran = [cutlass_config(doc["names"][i]) for i in idx]
            ran = [r for r in ran if r]
            if not ran:
                continue
            p = json.loads(key)
            coords.append([p["m"], p["n"], p["k"], p.get("batch", 1)])
            layouts.append(p["layout"])
            labels.append(forest_mod.label(ran[0]))
    c = np.array(coords)
    layout = np.array(layouts)
    class_a, class_n = align_classes(c[:, 0], c[:, 1], c[:, 2], layout, "bf16", 16)
    x = forest_mod.features(np.log2(c.astype(float)), np.searchsorted(np.array(LAYOUTS), layout),
                            np.maximum(class_a, class_n))
    return x, np.array(labels), c[:, 3] > 1


def main() -> int:
    try:
        from sklearn.ensemble import RandomForestClassifier
    except ImportError:
        print("chooser_more_names.py: needs scikit-learn (pip install scikit-learn)", file=sys.stderr)
        return 2
    tables = corrections._tables(cost_model("h200").params)
    kernels, choices = tables["kernels"], tables["choices"]
    x_cal = forest_mod.features(choices[:, 2:6], choices[:, 0], choices[:, 1])
    y_cal = np.array([forest_mod.label(kernels[int(i)]) for i in choices[:, 6]])
    b_cal = choices[:, 5] > 0
    x_new, y_new, b_new = named_draws()
    print(f"calibration's choices {len(y_cal)}; the H100's named draws {len(y_new)} "
          f"({b_new.sum()} batched)")
    cases = wide_tail.load()
    blends = wide_tail.chooser_blends(cases)
    m, n, k, b = (np.array([getattr(c, d) for c in cases]) for d in ("m", "n", "k", "batch"))
    layout = np.array([c.layout for c in cases])
    class_a, class_n = align_classes(m, n, k, layout, "bf16", 16)
    every = forest_mod.features(np.log2(np.stack([m, n, k, b], axis=1).astype(float)),
                                np.searchsorted(np.array(LAYOUTS), layout), np.maximum(class_a, class_n))
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
