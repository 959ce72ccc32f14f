"""shapewise.limits: every bound holds its reason, and numbers are read the way users type them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shapewise import limits
from shapewise.errors import ShapewiseError
from shapewise.hardware import GPUS
from shapewise.presets import PRESETS


def test_the_reasons_beside_the_bounds_hold():
    # A square weight at the width bound is 2 TiB in bf16, beyond (ten times) every GPU's memory.
    weight_bytes = limits.WIDTH_MAX ** 2 * 2
    assert weight_bytes > 10 * max(g.memory_gb for g in GPUS) * 1e9
    assert limits.VOCAB.high >= 64 * max(s.vocab for s in PRESETS.values())
    assert limits.LAYERS.high >= 600 * max(s.num_layers for s in PRESETS.values())
    assert limits.TOKENS.high == 2**31 - 1 == limits.GEMM_DIM.high  # cuBLAS's int m, n, k
    for limit in vars(limits).values():
        if isinstance(limit, limits.Limit):
            assert limit.reason and limit.low < limit.high


@pytest.mark.parametrize("text, value", [("4096", 4096), (" 4_096 ", 4096), ("1e3", 1000), ("2048.0", 2048)])
def test_whole_numbers_as_typed(text, value):
    assert limits.SEQ.check(text) == value and isinstance(limits.SEQ.check(text), int)


@pytest.mark.parametrize("value, needle", [
    ("0", "positive"), ("-1", "positive"), ("1.5", "whole number"), ("nan", "finite"), ("inf", "finite"),
    ("1e400", "finite"), ("99999999999999999999999999", "from 1 to 16,777,216 = 2^24 ("), ("x", "whole number"), ("", "whole number"),
    (True, "bool"), (None, "NoneType"), ([1], "list"), (2**24 + 1, "2^24"),
    ("1" + "0" * 400, "2^24"), pytest.param(10**400, "2^24", id="10**400"),  # past a float: once an OverflowError
])
def test_wrong_numbers_say_what_is_wanted(value, needle):
    with pytest.raises(ShapewiseError, match="sequence length") as err:
        limits.SEQ.check(value, "--seq")
    assert needle in str(err.value) and "\n" not in str(err.value) and str(err.value).startswith("--seq: ")


def test_reals_and_open_bounds():
    assert limits.PARAMS_TOL.check("0.05") == 0.05
    for bad in ("0", "-0.1", "0.6", "nan"):
        with pytest.raises(ShapewiseError, match="tolerance"):
            limits.PARAMS_TOL.check(bad)
    assert limits.WARMUP_MS.check("0") == 0.0
    with pytest.raises(ShapewiseError, match="above 0"):
        limits.BUDGET_MS.check("0")


def test_sweeps_are_counted_before_they_are_made():
    assert limits.dims(["64", "60:68:4", "64"], name="-n") == [64, 60, 68]
    with pytest.raises(ShapewiseError, match="at most 65,536"):
        limits.dims(["1:1000000000"], name="--values")  # would be 8 GB as a list
    with pytest.raises(ShapewiseError, match="at most 65,536"):
        limits.dims(["1:40000", "50001:90000"], name="--values")
    for bad, needle in (("0", "positive"), ("5:1", "START <= STOP"), ("1:10:0", "positive STEP"), ("a:b", "range"),
                        ("1:2:3:4", "range"), ("1e10", r"2\^31-1")):
        with pytest.raises(ShapewiseError, match=needle):
            limits.dims([bad], name="-m")


def test_sizes():
    assert limits.sizes(["1K:4K", "1M"]) == [1024, 2048, 4096, 2**20]
    for bad in ("nan", "infK", "-1", "0", "1e30", "2T:1K", "x"):
        with pytest.raises(ShapewiseError, match="--sizes"):
            limits.sizes([bad])
    for bad in ("0", "0.5", " 4T "):  # named as typed, not as the float it was read as ("got 0.0")
        with pytest.raises(ShapewiseError, match=f"got {bad.strip()}$"):
            limits.sizes([bad])


@given(st.one_of(st.text(max_size=12), st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**100, 2**100),
                 st.booleans(), st.none()))
def test_every_value_is_a_number_in_range_or_one_line(value):
    for limit in (limits.SEQ, limits.PARAMS_TOL, limits.BUDGET_MS):
        try:
            got = limit.check(value)
        except ShapewiseError as err:
            assert "\n" not in str(err)
        else:
            assert math.isfinite(got) and limit.low <= got <= limit.high
