"""benchmarks/machine_files.py: the results' folders keep `calibrate --quick`'s profiles as their factors only (the
tables are the shipped profile's); the factors read back as shapewise reads a whole profile's, and the profile a
file stands for prices as the GPU it was measured on."""

import gzip
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from machine_files import FACTORS_ONLY, MACHINE, machine_params, machine_profile_at, main  # noqa: E402

from shapewise import Workload, get_model, predict_step  # noqa: E402
from shapewise.profile import FORMAT, cost_model, load, measured_elsewhere  # noqa: E402

WHOLE = ROOT / "benchmarks/results/h100-judges/h100-machine.json.gz"  # kept whole: a test reads it so


def test_a_whole_profile_slimmed_keeps_its_factors_and_prices_as_its_gpu(tmp_path, capsys):
    path = tmp_path / "h100-machine.json.gz"
    path.write_bytes(WHOLE.read_bytes())
    before = {name: getattr(load(WHOLE).params, name) for name in MACHINE}
    assert before["machine_stream"] == before["machine_gemm"] != 1.0  # a file without machine_stream: gemm's
    assert main([str(path)]) == 0 and "→" in capsys.readouterr().out
    data = json.loads(gzip.decompress(path.read_bytes()))
    assert data["format"] == FACTORS_ONLY and set(data["params"]) == set(MACHINE)
    assert path.stat().st_size < 5_000 < WHOLE.stat().st_size
    assert machine_params(path) == before
    profile = machine_profile_at(path)
    assert profile.gpu == "h100" and profile.fit["borrowed_from"] == "h200" and measured_elsewhere(profile, "h100") == ""
    assert all(getattr(profile.params, name) == value for name, value in before.items())
    # the tables are the shipped profile's: the same step as the shipped (borrowed) profile with these factors
    step = predict_step(get_model("llama3-8b"), Workload(batch=2, seq=2048), gpu=cost_model("h100", profile=profile))
    borrowed = predict_step(get_model("llama3-8b"), Workload(batch=2, seq=2048), gpu="h100")
    assert step.time_ms != borrowed.time_ms and step.time_ms == pytest.approx(borrowed.time_ms, rel=0.05)
    assert main([str(path)]) == 0 and "left as it is" in capsys.readouterr().out  # slimmed once


def test_every_committed_machine_file_reads_and_the_slim_ones_are_small():
    files = sorted((ROOT / "benchmarks/results").glob("*/*machine*.json*"))
    assert len(files) >= 30
    for path in files:
        factors = machine_params(path)
        assert set(factors) == set(MACHINE) and all(0.5 < factors[k] < 1.5 for k in MACHINE if k != "machine_launch_ms")
        if json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()).get(
                "format") == FORMAT:
            assert path.parent.name in ("h100-judges", "h100-variants-14"), f"{path} was committed whole"
        else:
            assert path.stat().st_size < 5_000, path


def test_a_file_that_is_neither_is_refused_in_one_line(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"format": "something", "params": {}}))
    with pytest.raises(SystemExit, match="neither a shapewise profile nor"):
        machine_profile_at(path)
