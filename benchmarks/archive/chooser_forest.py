"""Which CUTLASS configuration cuBLAS runs, learnt by a random forest from the shipped H200 profile's
calibration choices and judged on the kernels cuBLAS ran for the wide seeds' misaligned GEMMs (held out),
with a quarter, a half and all of the choices: for benchmarks/RESULTS.md's "the wide set's tail: where it
comes from (a lead)". An experiment, not the cost model: it needs scikit-learn, which shapewise does not
(`pip install scikit-learn`).

python benchmarks/archive/chooser_forest.py   (on the CPU; under a minute)

Features: log2 m, n, k and batch, the layout, the alignment class, whether batched, and log2 of the output
tiles over the SMs for square tiles of 16 to 256. A label is a configuration's family, tile and partials.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np

from shapewise import corrections
from shapewise.cost import LAYOUTS, align_classes
from shapewise.fit import cutlass_config
from shapewise.profile import cost_model

spec = importlib.util.spec_from_file_location("wide_tail", Path(__file__).with_name("wide_tail.py"))
wide_tail = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wide_tail)


def features(coords: np.ndarray, layout: np.ndarray, worst: np.ndarray) -> np.ndarray:
    """One row per shape (coords: log2 m, n, k, batch)."""
    m, n, b = (2 ** coords[:, i] for i in (0, 1, 3))
    tiles = [np.log2(np.ceil(m / t) * np.ceil(n / t) * b / wide_tail.SMS) for t in (16, 32, 64, 128, 256)]
    return np.column_stack([coords, layout, worst, b > 1, *tiles])


def label(config) -> str:
    return "{}-{}-{}-{}".format(*(int(x) for x in config[:4]))


def held_out(cases, gemm: bool) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels of the wide seeds' named cases priced as CUTLASS kernels (GEMMs or batched)."""
    kept, labels = [], []
    for c in cases:
        ran = [cutlass_config(name) for name in c.kernels or () if cutlass_config(name)]
        if c.gemm == gemm and c.served and ran:
            kept.append(c)
            labels.append(label(ran[0]))
    m, n, k, b = (np.array([getattr(c, d) for c in kept]) for d in ("m", "n", "k", "batch"))
    layout = np.array([c.layout for c in kept])
    class_a, class_n = align_classes(m, n, k, layout, "bf16", 16)
    coords = np.log2(np.stack([m, n, k, b], axis=1).astype(float))
    return features(coords, np.searchsorted(np.array(LAYOUTS), layout), np.maximum(class_a, class_n)), np.array(labels)


def main() -> int:
    try:
        from sklearn.ensemble import RandomForestClassifier
    except ImportError:
        print("chooser_forest.py: needs scikit-learn (pip install scikit-learn)", file=sys.stderr)
        return 2
    tables = corrections._tables(cost_model("h200").params)
    kernels, choices = tables["kernels"], tables["choices"]
    x = features(choices[:, 2:6], choices[:, 0], choices[:, 1])
    y = np.array([label(kernels[int(i)]) for i in choices[:, 6]])
    cases = wide_tail.load()
    for gemm in (True, False):
        x_out, y_out = held_out(cases, gemm)
        theirs = (choices[:, 5] > 0) != gemm  # log2 batch > 0: batched
        for share in (0.25, 0.5, 1.0):
            some = theirs & (np.random.default_rng(1).random(len(theirs)) < share)
            forest = RandomForestClassifier(n_estimators=100, min_samples_leaf=2, n_jobs=2, random_state=0).fit(x[some], y[some])
            print(f"{wide_tail.kind(gemm)}: {some.sum()} calibration choices ({share:.0%}): right for "
                  f"{np.mean(forest.predict(x[some]) == y[some]):.1%} of them, "
                  f"{np.mean(forest.predict(x_out) == y_out):.1%} of the wide seeds' {len(y_out)} (held out)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
