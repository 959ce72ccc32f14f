"""The gradient-boosted trees a profile corrects GEMMs with (trees.py), and their place in the cost model."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shapewise.corrections import TREE_FEATURES, tree_features
from shapewise.cost import predict_gemm
from shapewise.errors import ShapewiseError
from shapewise.fit import GemmSamples, fit_trees
from shapewise.hardware import get_gpu
from shapewise.params import SPEC
from shapewise.profile import CostModel, Profile, from_text, to_text
from shapewise.trees import CHUNK, DEPTH, LEAVES, NO_SPLIT, ROW_WIDTH, Forest, fit_forest, predict_forest


def _reference(forest: Forest, x: np.ndarray) -> np.ndarray:
    """The forest's definition, sample by sample: each level's answer is bit `level` of the leaf."""
    out = []
    for row in x:
        total = forest.base
        for t in range(forest.trees):
            leaf = sum(int(row[forest.feature[t, d]] > forest.threshold[t, d]) << d for d in range(DEPTH))
            total += forest.leaf[t, leaf]
        out.append(total)
    return np.array(out)


def test_a_known_step_function_is_learnt_and_carries_over_to_fresh_samples():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 4, (4000, 3))
    truth = lambda x: 0.3 * (x[:, 0] > 1.5) - 0.2 * (x[:, 1] > 2.5) + 0.1 * (x[:, 0] > 3) * (x[:, 2] < 1)  # noqa: E731
    forest = fit_forest(x, truth(x) + rng.normal(0, 0.02, len(x)))
    fresh = rng.uniform(0, 4, (2000, 3))
    assert np.median(np.abs(predict_forest(forest, fresh) - truth(fresh))) < 0.01
    assert np.percentile(np.abs(predict_forest(forest, fresh) - truth(fresh)), 90) < 0.03
    # Deterministic, and a profile's rows give the same forest back.
    assert forest.trees == 100
    back = Forest.from_rows(forest.base, forest.rows())
    assert np.array_equal(predict_forest(back, fresh), predict_forest(forest, fresh))
    assert len(forest.rows()[0]) == ROW_WIDTH == 2 * DEPTH + LEAVES


def test_the_same_samples_give_the_same_forest():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(500, 4)), rng.normal(size=500)
    a, b = fit_forest(x, y, trees=10), fit_forest(x, y, trees=10)
    assert a.rows() == b.rows() and a.base == b.base


def test_a_feature_with_one_value_is_never_asked_and_a_constant_target_gives_its_mean():
    x = np.column_stack([np.full(300, 7.0), np.arange(300.0)])
    forest = fit_forest(x, np.full(300, 0.25), trees=5)
    assert not (forest.feature == 0).any() or (forest.threshold[forest.feature == 0] == NO_SPLIT).all()
    assert predict_forest(forest, x) == pytest.approx(np.full(300, 0.25))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 6), st.integers(1, 40))
def test_prediction_by_ranks_is_the_forest_asked_level_by_level(seed, features, rows):
    """predict_forest compares each sample's rank among a feature's thresholds: the same answers as
    comparing its value, for thresholds and values that tie, repeat and include NO_SPLIT."""
    rng = np.random.default_rng(seed)
    grid = np.round(rng.normal(size=8), 1)  # few values: ties between samples and thresholds
    trees = 3
    feature = rng.integers(0, features, (trees, DEPTH))
    threshold = rng.choice(np.append(grid, NO_SPLIT), (trees, DEPTH))
    forest = Forest(float(rng.normal()), feature, threshold, rng.normal(size=(trees, LEAVES)))
    x = rng.choice(grid, (rows, features))
    assert predict_forest(forest, x) == pytest.approx(_reference(forest, x))


def test_many_samples_are_predicted_in_chunks_as_one_by_one():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(600, 3))
    forest = fit_forest(x, x[:, 0] ** 2, trees=8)
    many = np.repeat(x, (CHUNK * 2 + 50) // len(x) + 1, axis=0)[:CHUNK * 2 + 50]
    pieces = np.concatenate([predict_forest(forest, many[i:i + 97]) for i in range(0, len(many), 97)])
    assert predict_forest(forest, many) == pytest.approx(pieces)
    assert predict_forest(forest, many[:5]) == pytest.approx(_reference(forest, many[:5]))


def test_a_sample_gets_the_same_value_to_the_last_bit_alone_or_among_others():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3000, 5))
    forest = fit_forest(x, np.sin(x[:, 0]) + x[:, 1], trees=30)
    together = predict_forest(forest, x)
    assert all(predict_forest(forest, x[i:i + 1])[0] == together[i] for i in range(0, 3000, 149))


def test_tree_features_read_the_tile_grid_the_leading_dims_alignment_layout_time_and_rate():
    f = tree_features(np.array([4096, 4097]), 64, np.array([96, 1]), 2, np.array([0, 2]), np.array([1.0, 0.5]))
    assert f.shape == (2, len(TREE_FEATURES))
    row = dict(zip(TREE_FEATURES, f[0]))
    assert (row["m"], row["n"], row["batch"], row["A lead twos"], row["n twos"]) == (12, 6, 1, 5, 6)  # k leads A in nn
    assert (row["nn"], row["nt"], row["time"]) == (1, 0, 0)
    assert row["rate"] == pytest.approx(np.log2(2 * 4096 * 64 * 96 * 2 / 1e-3 / 1e12))  # TFLOP/s
    tn = dict(zip(TREE_FEATURES, f[1]))
    assert tn["m"] == pytest.approx(np.log2(4096 + 128)) and tn["A lead twos"] == 0  # 4097 rows: 33 tiles; m leads A


def test_gemms_inside_one_tile_get_one_correction_so_tile_quantization_stands():
    """3003 tokens fill the same 24 row tiles as 3072 and their dims lead no matrix: the trees must not
    tell them apart (on an H200 they cost 2-3% more a token in the forward, as the tiles say)."""
    m, n, k = np.array([3003, 3072]), 4096, 4096
    for layout in (0, 1):
        f = tree_features(m, n, k, 1, layout, np.array([0.1, 0.1]))
        assert (f[0] == f[1]).all()
    wgrad = tree_features(4096, 4096, np.array([3003, 3072]), 1, 2, np.array([0.1, 0.1]))  # tokens are K: they lead nothing
    assert wgrad[0][TREE_FEATURES.index("A lead twos")] == wgrad[1][TREE_FEATURES.index("A lead twos")]
    assert (tree_features(3003, 4096, 4096, 1, 2, 0.1) != tree_features(3072, 4096, 4096, 1, 2, 0.1)).any()  # m leads A in tn


H200 = get_gpu("h200")


def _forest_of(base: float, trees: int = 1) -> Forest:
    return Forest(base, np.zeros((trees, DEPTH), dtype=np.int64), np.full((trees, DEPTH), NO_SPLIT),
                  np.zeros((trees, LEAVES)))


def test_a_profiles_trees_multiply_its_gemms_and_the_loss_is_a_measured_correction():
    m, n, k = np.array([512, 4096, 8191]), np.array([4096, 4096, 333]), np.array([4096, 1024, 2048])
    bare = CostModel(H200, dataclasses.replace(SPEC, gemm_trees=_forest_of(0.0).rows(), gemm_tree_base=0.0))
    slower = CostModel(H200, dataclasses.replace(SPEC, gemm_trees=_forest_of(0.0).rows(), gemm_tree_base=np.log(1.1)))
    before, after = predict_gemm(m, n, k, gpu=bare), predict_gemm(m, n, k, gpu=slower)
    assert np.asarray(after.time_ms) == pytest.approx(1.1 * np.asarray(before.time_ms))
    gained = np.asarray(after.losses["correction"]) - np.asarray(before.losses["correction"])
    assert gained == pytest.approx(0.1 * np.asarray(before.time_ms))
    # Never under the ideal time, however much faster the trees say.
    faster = CostModel(H200, dataclasses.replace(SPEC, gemm_trees=_forest_of(0.0).rows(), gemm_tree_base=-5.0))
    fast = predict_gemm(m, n, k, gpu=faster)
    ideal_ms = np.asarray(fast.flops) / (fast.peak_tflops * 1e9)
    assert (np.asarray(fast.time_ms) >= ideal_ms * (1 - 1e-12)).all() and (np.asarray(fast.time_ms) < before.time_ms).all()


def test_fit_trees_learns_what_the_rest_of_the_model_leaves_over():
    """Measurements 25% over the model on batched GEMMs and 10% under it on nn ones: the fitted trees
    give that back, on shapes they were not fitted on too, and the profile holds no residual table."""
    rng = np.random.default_rng(3)

    def draw(count):
        dims = [rng.integers(64, 8192, count) for _ in range(3)]
        return (*dims, rng.choice([1, 1, 8], count), rng.choice(["nn", "nt", "tn"], count))

    def truth(m, n, k, b, layout):
        model = np.asarray(predict_gemm(m, n, k, batch=b, layout=layout, gpu=CostModel(H200, SPEC)).time_ms)
        return model * np.where(b > 1, 1.25, 1.0) * np.where(layout == "nn", 0.9, 1.0)

    m, n, k, b, layout = draw(3000)
    samples = GemmSamples(m, n, k, b, layout, truth(m, n, k, b, layout))
    params = fit_trees(samples, dataclasses.replace(SPEC, gemm_residuals=((0, 0, 0, 1.0, 1.0, 1.0, 0.0, 0.5),)), gpu=H200)
    assert params.gemm_residuals == () and len(params.gemm_trees) == 100
    fresh = draw(500)
    predicted = np.asarray(predict_gemm(*fresh[:3], batch=fresh[3], layout=fresh[4], gpu=CostModel(H200, params)).time_ms)
    assert np.percentile(np.abs(predicted / truth(*fresh) - 1), 90) < 0.01


def test_a_profile_keeps_its_trees_and_refuses_trees_that_ask_of_no_feature():
    params = dataclasses.replace(SPEC, gemm_trees=_forest_of(0.05, trees=2).rows(), gemm_tree_base=-0.05)
    back = from_text(to_text(Profile(gpu="h200", params=params)))
    assert back.params.gemm_trees == params.gemm_trees and back.params.gemm_tree_base == -0.05
    bad = list(map(list, params.gemm_trees))
    bad[1][0] = len(TREE_FEATURES)  # a feature past the last
    text = to_text(Profile(gpu="h200", params=dataclasses.replace(params, gemm_trees=tuple(map(tuple, bad)))))
    with pytest.raises(ShapewiseError, match="gemm_trees ask of features"):
        from_text(text)
    for base, leaf in ((1e300, 0.0), (0.0, 1.0)):  # past a millionfold: a damaged file, not a correction
        far = _forest_of(base, trees=20)
        far = Forest(far.base, far.feature, far.threshold, np.full_like(far.leaf, leaf))
        text = to_text(Profile(gpu="h200", params=dataclasses.replace(params, gemm_trees=far.rows(), gemm_tree_base=base)))
        with pytest.raises(ShapewiseError, match="gemm_trees could scale a GEMM's time by e"):
            from_text(text)
    short = to_text(Profile(gpu="h200", params=dataclasses.replace(params, gemm_trees=((0.0,) * 10,))))
    with pytest.raises(ShapewiseError, match=f"gemm_trees must be {ROW_WIDTH} finite numbers"):
        from_text(short)
