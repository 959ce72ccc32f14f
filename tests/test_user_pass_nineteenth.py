"""What a new user's nineteenth pass over measuring and the results store found: a layout, backend or pass given
twice was measured, listed and counted twice, where a dim given twice is one case. A command whose output was piped
into a reader that stops early (`| head`) ended in a traceback. calibrate took --json and --cuda-graph and did nothing
with either, and validate took --cuda-graph and timed each call as without it; calibrate's and validate's --gpu were
helped as bench's "GPU to predict for beside each measurement"."""

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


def test_calibrate_and_validate_take_only_the_flags_they_use(capsys, tmp_path):
    """`calibrate --quick --device cpu --json` printed the same text as without it, and `calibrate --cuda-graph` and
    `validate --cuda-graph` measured each call as without it, on the CPU too, where bench refuses --cuda-graph.
    calibrate takes neither flag (argparse's one line); validate times graph replays with it, so on the CPU it is
    refused as bench refuses it. Their --gpu says what it is for: the GPU fitted for, the GPU judged."""
    code, out, err = run(capsys, "calibrate", "--help")
    text = " ".join(out.split())
    assert code == 0 and "--json" not in text and "--cuda-graph" not in text, text
    assert "--gpu GPU the GPU to fit the profile for (default: the one measured" in text, text
    code, out, err = run(capsys, "validate", "--help")
    assert "--gpu GPU the GPU whose models are judged (default: the one measured" in " ".join(out.split())
    for flag in ("--json", "--cuda-graph"):
        code, out, err = run(capsys, "calibrate", "--quick", "--device", "cpu", "--db", str(tmp_path / "c.db"), flag)
        assert code == 2 and out == "" and len(err.splitlines()) == 1, err
        assert f"unrecognized arguments: {flag}" in err, err
    pytest.importorskip("torch")
    code, out, err = run(capsys, "validate", "--quick", "--gpu", "h100", "--db", str(tmp_path / "v.db"), "--cuda-graph",
                         *FAST)
    assert code == 2 and out == "" and err == "shapewise: error: --cuda-graph needs a CUDA device\n", err
