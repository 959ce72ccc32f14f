"""Which CUTLASS configuration cuBLAS runs, learnt by a random forest from the shipped H200 profile's
calibration choices and judged on the kernels cuBLAS ran for the wide seeds' misaligned GEMMs (held out),
with a quarter, a half and all of the choices: for benchmarks/RESULTS.md's "the wide set's tail: where it
comes from (a lead)". An experiment, not the cost model: it needs scikit-learn, which shapewise does not
(`pip install scikit-learn`).

python benchmarks/archive/chooser_forest.py   (on the CPU; under a minute)

Then the price: every wide case the chooser serves (named or not) priced with the forest's choice in place of
the chooser's blend (its likeliest configuration of the shape's group at that configuration's fastest split,
or the blend of the group's configurations by the forest's probabilities), every other factor kept, as
wide_tail.py's oracle does with cuBLAS's choice; median / p90 |error| against the shipped profile's.

Features: log2 m, n, k and batch, the layout, the alignment class, whether batched, and log2 of the output
tiles over the SMs for square tiles of 16 to 256. A label is a configuration's family, tile and partials.
"""

import collections
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


def shape_features(m, n, k, batch, layout) -> np.ndarray:
    """features() of shapes given by their dims and layouts (arrays)."""
    m, n, k, batch, layout = (np.asarray(v) for v in (m, n, k, batch, layout))
    class_a, class_n = align_classes(m, n, k, layout, "bf16", 16)
    return features(np.log2(np.stack([m, n, k, batch], axis=1).astype(float)),
                    np.searchsorted(np.array(LAYOUTS), layout), np.maximum(class_a, class_n))


def case_features(cases) -> np.ndarray:
    """features() of wide_tail's cases."""
    return shape_features(*(np.array([getattr(c, d) for c in cases]) for d in ("m", "n", "k", "batch", "layout")))


def calibration_choices() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, labels and batched flags of the shipped H200 profile's calibration choices."""
    tables = corrections._tables(cost_model("h200").params)
    kernels, choices = tables["kernels"], tables["choices"]
    x = features(choices[:, 2:6], choices[:, 0], choices[:, 1])
    return x, np.array([label(kernels[int(i)]) for i in choices[:, 6]]), choices[:, 5] > 0  # log2 batch > 0


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
    return case_features(kept), np.array(labels)


def priced(cases, blends: dict, proba: np.ndarray, classes, gemm: bool) -> tuple:
    """|error| of the GEMMs (or batched GEMMs) as shipped, with the forest's likeliest configuration and with
    its probabilities blended; a case the chooser does not serve, or whose group's configurations the
    forest gives no weight, keeps its shipped error."""
    column = {c: i for i, c in enumerate(classes)}
    shipped, hard, blend = [], [], []
    for i, c in enumerate(cases):
        if c.gemm != gemm:
            continue
        shipped.append(c.err)
        d = blends.get(i)
        weight = (np.array([proba[i, column[label(r)]] if label(r) in column else 0.0 for r in d["rows"]])
                  if d and c.served else np.zeros(1))
        timed = np.isfinite(d["ms"]) & (d["ms"] > 0) if d else np.zeros(1, dtype=bool)
        weight = np.where(timed, weight, 0.0)
        if weight.sum() <= 0:
            hard.append(c.err)
            blend.append(c.err)
            continue
        weight /= weight.sum()
        log_ms = np.log(np.where(timed, d["ms"], 1.0))
        hard.append((1 + c.err) * np.exp(log_ms[np.argmax(weight)] - d["log_blend"]) - 1)
        blend.append((1 + c.err) * np.exp((weight * log_ms).sum() - d["log_blend"]) - 1)
    return tuple(np.abs(np.array(e)) for e in (shipped, hard, blend))


def by_agreement(cases, blends: dict, proba: np.ndarray, classes, gemm: bool) -> None:
    """The named cases split by whether the forest's likeliest configuration and the chooser's are cuBLAS's:
    the p90 |error| of each part as shipped and with the forest's choice."""
    column = {c: i for i, c in enumerate(classes)}
    parts = collections.defaultdict(lambda: ([], []))
    for i, c in enumerate(cases):
        ran = [cutlass_config(name) for name in c.kernels or () if cutlass_config(name)]
        d = blends.get(i)
        if c.gemm != gemm or not d or not c.served or not ran:
            continue
        weight = np.array([proba[i, column[label(r)]] if label(r) in column else 0.0 for r in d["rows"]])
        weight = np.where(np.isfinite(d["ms"]) & (d["ms"] > 0), weight, 0.0)
        if weight.sum() <= 0:
            continue
        j = int(np.argmax(weight))
        key = (label(d["rows"][j]) == label(ran[0]), c.picked == c.ran.split(" P")[0])
        parts[key][0].append(c.err)
        parts[key][1].append((1 + c.err) * np.exp(np.log(d["ms"][j]) - d["log_blend"]) - 1)
    for (forest_right, chooser_right), (shipped, forest) in sorted(parts.items(), reverse=True):
        print(f"    named, the forest {'right' if forest_right else 'wrong'}, the chooser "
              f"{'right' if chooser_right else 'wrong'}: {len(shipped):4d}, p90 shipped {wide_tail.p90(shipped):.1%}, "
              f"with the forest's choice {wide_tail.p90(forest):.1%}")


def combined(cases, blends: dict, proba: np.ndarray, classes, gemm: bool) -> None:
    """Two ways to use the forest beside the chooser, p90 |error| over all the wide cases: the forest's
    likeliest configuration only where its probability reaches a bar (else the chooser's blend), and the
    chooser's probabilities times the forest's (+0.02), blended."""
    column = {c: i for i, c in enumerate(classes)}
    sure, product, shipped = {bar: [] for bar in (0.5, 0.7, 0.9, 0.95)}, [], []
    for i, c in enumerate(cases):
        if c.gemm != gemm:
            continue
        shipped.append(c.err)
        d = blends.get(i)
        forest = np.array([proba[i, column[label(r)]] if label(r) in column else 0.0 for r in d["rows"]]) \
            if d and c.served else np.zeros(1)
        timed = (np.isfinite(d["ms"]) & (d["ms"] > 0)) if d and c.served else np.zeros(1, dtype=bool)
        if not timed.any() or forest[timed].sum() <= 0:
            product.append(c.err)
            for errs in sure.values():
                errs.append(c.err)
            continue
        log_ms = np.log(np.where(timed, d["ms"], 1.0))
        j = int(np.argmax(np.where(timed, forest, 0.0)))
        picked = (1 + c.err) * np.exp(log_ms[j] - d["log_blend"]) - 1
        for bar, errs in sure.items():
            errs.append(picked if forest[j] / max(proba[i].sum(), 1e-9) >= bar else c.err)
        ok = timed & (d["prob"] > 0)
        weight = np.where(ok, d["prob"] * (forest + 0.02), 0.0)
        old = np.where(ok, d["prob"], 0.0)
        if weight.sum() <= 0:
            product.append(c.err)
            continue
        mix = (weight / weight.sum() * log_ms).sum() - (old / old.sum() * log_ms).sum()
        product.append((1 + c.err) * np.exp(mix) - 1)
    print(f"    the forest only where sure (p90; shipped {wide_tail.p90(shipped):.1%}): "
          + ", ".join(f"≥ {bar}: {wide_tail.p90(errs):.1%}" for bar, errs in sure.items())
          + f"; the chooser's probabilities times the forest's: {wide_tail.p90(product):.1%}")


def main() -> int:
    try:
        from sklearn.ensemble import RandomForestClassifier
    except ImportError:
        print("chooser_forest.py: needs scikit-learn (pip install scikit-learn)", file=sys.stderr)
        return 2
    x, y, batched = calibration_choices()
    cases = wide_tail.load()
    blends = wide_tail.chooser_blends(cases)
    every = case_features(cases)
    for gemm in (True, False):
        x_out, y_out = held_out(cases, gemm)
        theirs = batched != gemm
        for share in (0.25, 0.5, 1.0):
            some = theirs & (np.random.default_rng(1).random(len(theirs)) < share)
            forest = RandomForestClassifier(n_estimators=100, min_samples_leaf=2, n_jobs=2, random_state=0).fit(x[some], y[some])
            print(f"{wide_tail.kind(gemm)}: {some.sum()} calibration choices ({share:.0%}): right for "
                  f"{np.mean(forest.predict(x[some]) == y[some]):.1%} of them, "
                  f"{np.mean(forest.predict(x_out) == y_out):.1%} of the wide seeds' {len(y_out)} (held out)")
        shipped, hard, blend = priced(cases, blends, forest.predict_proba(every), forest.classes_, gemm)
        print(f"  priced, all {len(shipped)} wide {wide_tail.kind(gemm)} (median / p90 |error|): shipped "
              f"{np.median(shipped):.1%} / {wide_tail.p90(shipped):.1%}; the forest's likeliest configuration "
              f"{np.median(hard):.1%} / {wide_tail.p90(hard):.1%}; its probabilities blended "
              f"{np.median(blend):.1%} / {wide_tail.p90(blend):.1%}")
        by_agreement(cases, blends, forest.predict_proba(every), forest.classes_, gemm)
        combined(cases, blends, forest.predict_proba(every), forest.classes_, gemm)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
