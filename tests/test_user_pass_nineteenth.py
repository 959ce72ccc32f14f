"""What a new user's nineteenth pass over measuring and the results store found: a layout, backend or pass given
twice was measured, listed and counted twice, where a dim given twice is one case. A command whose output was piped
into a reader that stops early (`| head`) ended in a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run

SRC = Path(__file__).parents[1] / "src"
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


def test_a_reader_that_stops_early_is_no_traceback():
    """`shapewise check gpt2 --gpu h100 --json | head -1` (and `results --json`, `bench ... --json`, `validate
    --json`) ended in "BrokenPipeError: [Errno 32] Broken pipe" and its traceback once head had left. It ends quietly
    with 1, as the commands that print through rich's console already did."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for argv in (["check", "gpt2", "--gpu", "h100", "--json"], ["models"]):
        proc = subprocess.Popen([sys.executable, "-m", "shapewise", *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        proc.stdout.close()  # the reader gone before a line was written
        err = proc.stderr.read().decode()
        proc.stderr.close()
        assert proc.wait() == 1 and err == "", err
