"""A seventeenth user pass: the public Python API given numpy numbers, as arrays and sweeps hand them over; suggest
naming the dtype it priced, as check does."""

import numpy as np
import pytest

import shapewise
from shapewise import ModelShape, ShapewiseError, Workload


def test_search_takes_a_numpy_integer_budget():
    """The user swept budgets with `for p in np.array([1e8, 3e8]).astype(np.int64): search(params_target=p, ...)`
    and saw `the parameter budget must be a number, got 100000000 (int64)`, while the text "100000000"
    and np.float64 were taken. A numpy integer is read as the number it is, as ModelShape and Workload
    read theirs; a numpy bool is still refused."""
    result = shapewise.search(params_target=np.int64(100_000_000), gpu="h200", workload=Workload(batch=1, seq=4096),
                              top=np.int32(3))
    plain = shapewise.search(params_target=100_000_000, gpu="h200", workload=Workload(batch=1, seq=4096), top=3)
    assert [c.shape for c in result.top] == [c.shape for c in plain.top]
    with pytest.raises(ShapewiseError, match="must be a number"):
        shapewise.search(params_target=np.bool_(True), gpu="h200", workload=Workload())


def test_model_shape_takes_a_numpy_float_rotary_fraction():
    """The user built ModelShape(..., rotary_fraction=np.float32(0.5)) from an array of fractions and saw
    `rotary_fraction must be between 0 and 1, got np.float32(0.5)`: a refusal that contradicts itself.
    It is held as the Python float 0.5, the same shape as rotary_fraction=0.5."""
    shape = ModelShape("x", 768, 12, 12, 50257, rotary_fraction=np.float32(0.5))
    assert type(shape.rotary_fraction) is float
    assert shape == ModelShape("x", 768, 12, 12, 50257, rotary_fraction=0.5)
    with pytest.raises(ShapewiseError, match="between 0 and 1"):
        ModelShape("x", 768, 12, 12, 50257, rotary_fraction=np.float64(1.5))


def test_suggest_names_the_dtype_it_priced(capsys):
    """`suggest gpt2 --dtype fp8` headed its table "(train, b=4 s=2048 t=1)", where `check` says "t=1 fp8": a user
    comparing the two could not tell which precision the speedups were priced in. It names it as check does."""
    from helpers import run

    for dtype in ("fp8", "bf16"):
        code, out, err = run(capsys, "suggest", "gpt2", "--dtype", dtype, "--gpu", "h100")
        assert code == 0, err
        assert f"(train, b=4 s=2048 t=1 {dtype}); cost model" in out.splitlines()[0]
