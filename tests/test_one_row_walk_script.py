"""benchmarks/one_row_walk.py: the shipped H200 profile holds the line its fit gives, its draws are what
they say, and a draw is measured, exported and judged end to end on the CPU."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shapewise.params import WALK_BANDS, WALK_MAX_K, WALK_ROWS
from shapewise.profile import cost_model

ROOT = Path(__file__).parents[1]
spec = importlib.util.spec_from_file_location("one_row_walk", ROOT / "benchmarks" / "one_row_walk.py")
walk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(walk)


def test_the_shipped_profile_holds_the_line_fitted_on_the_committed_calls(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["one_row_walk.py"])
    assert walk.main() == 0
    out = capsys.readouterr().out
    fitted = out.split("line fitted: ")[1].split(" (")[0]
    params = cost_model("h200").params
    assert fitted == f"{params.walk_fixed_ms * 1e3:.2f} µs + {params.walk_per_k_ms * 1e6:.2f} ns × k / ways"
    assert "the bands: 113 calls" in out


def test_the_scripts_bands_are_the_cost_models():
    """walk.ways, which the fit and the judgement group calls by, says what cost.one_row_walk_ms prices."""
    from shapewise.cost import align_classes, one_row_walk_ms

    m, n, k = (a.ravel() for a in np.meshgrid([1, 2, 3, 4], np.arange(640, 1120, 4), [8, 100, 1024, 2560, 2568, 4096]))
    for layout in ("nt", "nn"):
        class_a, class_n = align_classes(m, n, k, np.full(m.shape, layout), "bf16", 16)
        _, ways = one_row_walk_ms(m, n, k, np.ones_like(m), np.full(m.shape, layout), class_a, class_n, 2,
                                  cost_model("h200").params)
        assert list(ways) == [walk.ways(*shape, layout) for shape in zip(m, n, k)]
        assert layout == "nn" or {2, 4} <= set(ways)


def test_a_draw_is_deterministic_half_in_the_bands_and_never_in_the_fit():
    first, again, other = walk.drawn(41), walk.drawn(41), walk.drawn(42)
    assert [c.key for c in first] == [c.key for c in again] != [c.key for c in other]
    inside = [c for c in first if walk.ways(c.params["m"], c.params["n"], c.params["k"], c.params["layout"])]
    assert len(first) == 120 and len(inside) == 60
    low, high = WALK_BANDS[0][0], WALK_BANDS[-1][1]
    assert all(c.params["m"] <= WALK_ROWS and low < c.params["n"] <= high and c.params["k"] <= WALK_MAX_K for c in inside)
    outside = [c for c in first if c not in inside]
    assert {c.params["layout"] for c in outside} == {"nt", "nn"} and max(c.params["m"] for c in outside) > WALK_ROWS


def test_a_draw_measured_on_the_cpu_is_exported_and_judged(tmp_path):
    pytest.importorskip("torch")
    db = tmp_path / "walk.db"

    def run(*args):
        done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "120 of 120 calls measured" in run("benchmarks/one_row_walk.py", "--draw", "3", "--db", str(db), "--device", "cpu")
    run("-m", "shapewise", "results", "--db", str(db), "--export", str(tmp_path / "walk.csv"))
    # the CPU names no kernel: the census's export is refused in one line and writes nothing; judged without it
    census = subprocess.run([sys.executable, "-m", "shapewise", "results", "--db", str(db), "--bench", "kernels",
                             "--export", str(tmp_path / "census.json")], cwd=ROOT, capture_output=True, text=True)
    assert census.returncode == 2 and "nothing to export" in census.stderr and not (tmp_path / "census.json").exists()
    judged = run("benchmarks/one_row_walk.py", "--judge", str(tmp_path / "walk.csv"))
    measured = int(judged.split(" calls measured")[0])
    assert measured == len({c.key for c in walk.drawn(3)}) and "in the bands priced with the walk" in judged
    # CPU times are no GPU's: the figures are only read, never judged here
    assert np.isfinite(float(judged.split("|error| median ")[1].split("%")[0]))


def test_a_judgement_of_files_not_there_is_a_one_line_error(tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/one_row_walk.py", "--judge", str(tmp_path / "no.csv"),
                           "--census", str(tmp_path / "no.json")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "no such file" in done.stderr and "Traceback" not in done.stderr
