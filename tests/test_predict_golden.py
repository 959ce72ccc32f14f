"""GEMM predictions held against stored ones: a change made for speed must not move any of them.

Random shapes (every layout, dtype and alignment, single and batched, dims 1 to 2^17) through the
analytic model and a calibrated profile's corrections, on GPUs of different SM counts. The tile,
split and kernel must be the same; each time to 1e-12 of the shape's time with the analytic model,
and to 1e-6 with a profile: its corrections weigh calibration shapes nearby in single precision,
summed in blocks that depend on the other shapes of the call (the code these predictions were
stored from gave one shape times up to 3.5e-8 apart beside different shapes). To accept a
deliberate change of the model after review:
    SHAPEWISE_UPDATE_GOLDEN=1 python -m pytest tests/test_predict_golden.py
"""

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shapewise import corrections, cost
from shapewise.cost import LAYOUTS, LOSS_NAMES, GemmPrediction, _gemm_arrays, predict_gemm
from shapewise.hardware import get_gpu
from shapewise.params import SPEC
from shapewise.profile import CostModel, find

GOLDEN = Path(__file__).parent / "golden" / "gemm_predictions.npz"
NUM_SHAPES = 1000
DTYPES = ("bf16", "fp16", "fp8", "tf32", "fp32")


def models() -> dict[str, CostModel]:
    profile = find("h200").params
    return {"h200-profile": CostModel("h200", profile), "h200-spec": CostModel("h200", SPEC),
            "a100-spec": CostModel("a100-80gb", SPEC), "a100-with-h200-profile": CostModel("a100-80gb", profile)}


def shapes(seed: int) -> dict[str, np.ndarray]:
    """Dims log-uniform from 1 to 2^17, a third of them rounded to a multiple of 64 (aligned), a third
    odd; half the shapes batched (up to 2^12)."""
    rng = np.random.default_rng(seed)
    m, n, k = (np.maximum(1, np.round(2 ** rng.uniform(0, 17, NUM_SHAPES))).astype(np.int64) for _ in range(3))
    kind = rng.integers(0, 3, (3, NUM_SHAPES))
    m, n, k = (np.where(c == 0, -(-x // 64) * 64, np.where(c == 1, x | 1, x)) for x, c in zip((m, n, k), kind))
    batch = np.where(rng.random(NUM_SHAPES) < 0.5, 1, np.round(2 ** rng.uniform(0, 12, NUM_SHAPES))).astype(np.int64)
    layout = rng.choice(LAYOUTS, NUM_SHAPES)
    return dict(m=m, n=n, k=k, batch=batch, layout=layout)


def priced(m, n, k, *, batch, layout, gpu: CostModel, dtype: str) -> GemmPrediction:
    """The model's GEMMs as a step's ops are priced (predict_ops), fp8 in every layout and batched too: predict_gemm
    refuses those torch._scaled_mm does not run, but the model behind it, which an fp8 step's backward takes, is held."""
    return GemmPrediction(**_gemm_arrays(m, n, k, batch, layout, gpu.gpu, dtype, gpu.params))


def predictions() -> dict[str, np.ndarray]:
    out = {}
    for i, (name, model) in enumerate(models().items()):
        for j, dtype in enumerate(d for d in DTYPES if d in model.gpu.tflops):
            s = shapes(100 * i + j)
            p = priced(s["m"], s["n"], s["k"], batch=s["batch"], layout=s["layout"], gpu=model, dtype=dtype)
            key = f"{name}/{dtype}/"
            fields = dict(time_ms=p.time_ms, flops=p.flops, bytes=p.bytes, tile=p.tile, split_k=p.split_k,
                          family=p.family, **{f"loss.{n}": p.losses[n] for n in LOSS_NAMES})
            out.update({key + f: np.asarray(v) for f, v in fields.items()})
    return out


@pytest.fixture(scope="module")
def got() -> dict[str, np.ndarray]:
    got = predictions()
    if os.environ.get("SHAPEWISE_UPDATE_GOLDEN"):
        np.savez_compressed(GOLDEN, **got)
    return got


def test_every_prediction_equals_the_stored_one(got):
    want = dict(np.load(GOLDEN))
    assert sorted(got) == sorted(want)
    for key in sorted(want):
        scale = want[key.rsplit("/", 1)[0] + "/time_ms"]
        if key.endswith(("tile", "split_k", "family")):  # integers: exactly
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
        elif key.endswith(("flops", "bytes")):
            np.testing.assert_allclose(got[key], want[key], rtol=1e-15, atol=0, err_msg=key)
        else:  # times and their parts, to a share of the shape's time
            rtol = 1e-6 if "profile" in key else 1e-12
            assert np.all(np.abs(got[key] - want[key]) <= rtol * scale), key


def test_the_shapes_cover_what_the_model_tells_apart(got):
    """A golden file of only aligned shapes, or none served by a CUTLASS kernel, would guard little."""
    served = got["h200-profile/bf16/family"] >= 0
    assert 0.05 < served.mean() < 0.95
    assert (got["h200-profile/bf16/split_k"] > 1).any() and (got["h200-spec/bf16/split_k"] > 1).any()
    memory_bound = got["h200-spec/bf16/loss.memory"] > 0
    assert 0.05 < memory_bound.mean() < 0.95


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0, 1), st.floats(0, 400), st.sampled_from([1, 64, 256, 1024]),
       st.sampled_from(["h200", "a100-80gb", "v100"]))
def test_split_k_is_left_out_only_where_it_cannot_win(seed, credit, k_overhead, min_split_k, gpu):
    """cost._fastest times split candidates only where a bound says one could win: it must pick what
    trying every candidate picks, whatever the parameters."""
    rng = np.random.default_rng(seed)
    m, n, k, batch = (np.round(2 ** rng.uniform(0, hi, 500)) for hi in (16, 16, 17, 6))
    slow = rng.choice([1.0, 1.3, 2.5], 500)
    p = dataclasses.replace(SPEC, wave_credit=credit, k_overhead=k_overhead, min_split_k=min_split_k)
    g = get_gpu(gpu)
    tiles, rate, splits = np.array(p.tiles), np.array(p.tile_rates), np.array(p.splits)
    got = cost._fastest(m, n, k, batch, slow, tiles, rate, splits, g, p, 1e15)
    every = cost._candidate_times(*(x[:, None, None] for x in (m, n, k, batch, slow)), tiles[:, 0, None].astype(float),
                                  tiles[:, 1, None].astype(float), rate[:, None], splits.astype(float), g, p, 1e15)[0]
    want = np.divmod(np.argmin(every.reshape(len(m), -1), axis=-1), len(splits))
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_a_prediction_does_not_depend_on_the_shapes_beside_it():
    model, s = models()["h200-profile"], shapes(7)
    together = predict_gemm(s["m"], s["n"], s["k"], batch=s["batch"], layout=s["layout"], gpu=model)
    for i in range(0, NUM_SHAPES, 97):
        alone = predict_gemm(int(s["m"][i]), int(s["n"][i]), int(s["k"][i]), batch=int(s["batch"][i]),
                             layout=str(s["layout"][i]), gpu=model)
        assert alone.time_ms == pytest.approx(together.time_ms[i], rel=1e-6)
        assert (alone.tile, alone.split_k, alone.family) == (tuple(together.tile[i]), together.split_k[i],
                                                             together.family[i])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_cutlass_splits_are_left_out_only_where_they_cannot_win(seed):
    """corrections.kernel_times times later splits only where a floor says one could win: it must
    pick what timing every split picks, for any kernel with no negative coefficient."""
    rng = np.random.default_rng(seed)
    rows = np.column_stack([np.zeros(6), rng.choice([32, 64, 128, 256], (6, 2)), rng.integers(0, 2, 6), np.zeros(6),
                            rng.integers(1, 9, 6), np.zeros((6, 2)),
                            rng.exponential([1e-2, 3e-5, 8e-5, 2e-2, 6e-8, 1e-2], (6, 6)) * (rng.random((6, 6)) < 0.8)])
    m, n, k = (np.round(2 ** rng.uniform(0, 15, 300)) for _ in range(3))
    batch = np.where(rng.random(300) < 0.3, np.round(2 ** rng.uniform(0, 8, 300)), 1)
    inside = rng.random((300, 6)) < 0.7
    got = corrections.kernel_times(rows, m, n, k, batch, 132, inside=inside)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(corrections, "FIRST_SPLITS", len(corrections.CUTLASS_SPLITS))  # every split, every shape
        want = corrections.kernel_times(rows, m, n, k, batch, 132)
    np.testing.assert_array_equal(got[0][inside], want[0][inside])
    np.testing.assert_array_equal(got[1][inside], want[1][inside])
    assert np.isinf(got[0][~inside]).all()
