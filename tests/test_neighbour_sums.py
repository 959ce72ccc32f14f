"""corrections.neighbour_sums against the sums it stands for, taken over every point."""

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shapewise.corrections import NEIGHBOUR_REACH, neighbour_sums


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.4, 1.0, 1.7]), st.integers(1, 1500))
@example(seed=603, octaves=1.7, num_queries=1110)  # a point at the reach itself, to a part in 10^7
def test_the_sums_are_those_over_every_point_within_reach(seed, octaves, num_queries):
    """Queries crowded into a few octaves (so that cells of many queries are sliced) and spread over
    many, against points spread over all of them. A point at the reach itself, to within single precision, may
    be counted or not: each query's sums are those with it or those without it."""
    rng = np.random.default_rng(seed)
    spread = rng.choice([2.0, 17.0])
    queries = np.column_stack([rng.uniform(12, 12 + spread, (num_queries, 3)), rng.uniform(0, 3, num_queries)])
    points = np.column_stack([rng.uniform(0, 17, (800, 3)), rng.uniform(0, 3, 800)])
    values = rng.normal(size=(800, 3))
    sums, total = neighbour_sums(queries, points, values, octaves)
    d2 = ((queries[:, None, :] - points[None]) ** 2).sum(axis=-1)
    reach2, weight = (NEIGHBOUR_REACH * octaves) ** 2, np.exp(-d2 / (2 * octaves ** 2))
    with_edge = np.where(d2 <= reach2 * (1 + 1e-5), weight, 0.0)
    without_edge = np.where(d2 < reach2 * (1 - 1e-5), weight, 0.0)
    # single-precision weights: each within a few parts in 10^7 of its exact value
    close = [np.isclose(total, w.sum(axis=1), rtol=1e-6, atol=1e-12) for w in (with_edge, without_edge)]
    assert (close[0] | close[1]).all(), np.flatnonzero(~(close[0] | close[1]))
    w = np.where(close[0][:, None], with_edge, without_edge)
    np.testing.assert_allclose(sums, w @ values, rtol=0, atol=1e-6 * (w @ np.abs(values)).max() + 1e-12)
