"""ModelShape's whole-number fields: numpy integers read as Python's, anything not a whole number refused."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shapewise.errors import ShapewiseError
from shapewise.shapes import WHOLE_TYPES, ModelShape, Workload

# Every whole-number field set, none at its default, so that each is checked as a number given.
EVERY_FIELD = ModelShape(
    name="every field", hidden=1024, num_layers=4, num_heads=8, vocab=1000, num_kv_heads=4, head_dim=128, ffn=4096,
    mlp="swiglu", learned_positions=2048, num_experts=8, top_k=2, expert_ffn=1024, num_shared_experts=1,
    norms_per_layer=4, window=512, global_every=2, nope_every=4, num_dense_layers=1, kv_lora_rank=256, q_lora_rank=512,
    rope_head_dim=64, v_head_dim=96, published_params=7_000_000_000, context=8192)
# Found by value, not by annotation, so that a field the annotations miss shows up here.
WHOLE = [k for k, v in dataclasses.asdict(EVERY_FIELD).items() if type(v) is int]
NUMPY_INTS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)


def test_every_field_is_annotated_as_one_of_the_kinds_checked():
    # A whole number annotated otherwise (Optional[int]) would escape the checks that read annotations.
    for cls in (ModelShape, Workload):
        assert {f.type for f in dataclasses.fields(cls)} <= {*WHOLE_TYPES, "bool", "float", "str"}
    assert len(WHOLE) == 23


@given(field=st.sampled_from(WHOLE), kind=st.sampled_from(NUMPY_INTS))
def test_a_numpy_integer_is_held_as_a_python_int(field, kind):
    value = getattr(EVERY_FIELD, field)
    if value > np.iinfo(kind).max:
        kind = np.int64  # a kind too narrow for the value (published_params past int32, hidden past int8)
    shape = EVERY_FIELD.replace(**{field: kind(value)})
    assert type(getattr(shape, field)) is int and getattr(shape, field) == value
    assert shape == EVERY_FIELD


def test_published_params_computed_with_numpy():
    shape = ModelShape(name="m", hidden=np.int64(4096), num_layers=32, num_heads=32, vocab=32000,
                       published_params=np.int64(7_000_000_000))
    assert type(shape.published_params) is int and type(shape.hidden) is int


@given(field=st.sampled_from(WHOLE), value=st.floats(allow_nan=True, allow_infinity=True), numpy=st.booleans())
def test_a_float_is_refused_in_a_whole_number_field(field, value, numpy):
    value = np.float64(value) if numpy else value
    with pytest.raises(ShapewiseError, match=f"{field} must be a whole number, got"):
        EVERY_FIELD.replace(**{field: value})


@given(field=st.sampled_from(WHOLE), value=st.sampled_from([True, False, np.True_, np.False_, "4096", b"4", [4]]))
def test_a_bool_or_text_is_refused_in_a_whole_number_field(field, value):
    with pytest.raises(ShapewiseError, match=f"{field} must be a whole number, got"):
        EVERY_FIELD.replace(**{field: value})
