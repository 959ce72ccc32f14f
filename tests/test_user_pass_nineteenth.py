"""What a new user's nineteenth pass over measuring and the results store found: a layout, backend or pass given
twice was measured, listed and counted twice, where a dim given twice is one case."""

from __future__ import annotations

import json

import pytest

from helpers import run

FAST = ["--device", "cpu", "--warmup-ms", "0", "--budget-ms", "1"]


def test_a_value_given_twice_is_one_case(capsys, tmp_path):
    """`bench gemm -m 64 -n 64 -k 64 --layout nt tn nt` listed the nt case twice and said "3 measured" of two cases;
    `bench attention --backend math math --pass fwd fwd` listed one case four times. Each is one case, as `-m 64 64`
    was already."""
    pytest.importorskip("torch")
    db = ["--db", str(tmp_path / "r.db")]
    code, out, err = run(capsys, "bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--layout", "nt", "tn", "nt",
                         *db, *FAST)
    assert code == 0, err
    assert [line.split()[2] for line in out.splitlines() if line.startswith("gemm ")] == ["nt", "tn"], out
    assert "2 measured, 0 already in the store" in out, out
    code, out, err = run(capsys, "bench", "attention", "--heads", "2", "--head-dim", "16", "--seq", "32", "--batch",
                         "1", "--backend", "math", "math", "--pass", "fwd", "fwd", "--json", *db, *FAST)
    assert code == 0, err
    assert [row["params"]["backend"] for row in json.loads(out)] == ["math"], out
