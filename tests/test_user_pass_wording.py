"""What a new user's pass found in the wording: lists read "a, b or c", a flag named once, search's --top
said against its whole Pareto front, a CPU smoke test's fit not shown as a perfect one, --strict's both
cases in --help, no folder made for a report that cannot be drawn, and calibrate's durations as measured."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import run
from shapewise.errors import listed


def _one_line_error(capsys, *argv) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (code, out, err)
    return err


def _help(capsys, *argv) -> str:
    code, out, _ = run(capsys, *argv, "--help")
    assert code == 0
    return " ".join(out.split())


# ---- 1. a list of choices reads "a, b or c" ----

def test_listed_joins_the_last_with_or_or_and():
    assert listed([".png"]) == ".png"
    assert listed([".csv", ".json"]) == ".csv or .json"
    assert listed([".png", ".svg", ".pdf"]) == ".png, .svg or .pdf"
    assert listed(["batch", "tp"], "and") == "batch and tp"


def test_file_extensions_are_listed_with_or(capsys, tmp_path):
    err = _one_line_error(capsys, "results", "--db", str(tmp_path / "x.db"), "--export", str(tmp_path / "x.txt"))
    assert "name the file .csv, .json, .csv.gz or .json.gz" in err, err
    err = _one_line_error(capsys, "plot", "breakdown", "gpt2", "--out", str(tmp_path / "b.jpg"))
    assert "name the file .png or .svg" in err, err
    err = _one_line_error(capsys, "report", "gpt2", "--out", str(tmp_path / "r.txt"))
    assert "name the file .html, .htm, .md or .markdown" in err, err


# ---- 2. --keep named once, with the fields it takes ----

def test_an_unknown_keep_field_names_the_flag_once_and_the_fields(capsys):
    err = _one_line_error(capsys, "suggest", "gpt3-2.7b", "--keep", "foo")
    assert err.count("--keep") == 1 and "(keep)" not in err, err
    assert "unknown field foo;" in err and "hidden, layers, heads, kv_heads, head_dim, ffn, vocab, batch and tp" in err
    err = _one_line_error(capsys, "suggest", "gpt3-2.7b", "--vary", "hidden")
    assert err.count("--vary") == 1 and "(vary)" not in err and "batch and tp" in err, err


# ---- 3. search: --top limits the fastest list; the Pareto front is shown whole, and said so ----

def test_search_says_the_front_is_whole_and_top_limits_the_fastest(capsys):
    assert "the Pareto front is listed whole, whatever --top" in _help(capsys, "search")
    code, out, _ = run(capsys, "search", "--params", "7e9", "--top", "3", "--json")
    doc = json.loads(out)
    assert code == 0 and len(doc["top"]) == 3 and len(doc["pareto"]) > 3  # the front is not cut to --top
    front = len(doc["pareto"])
    listed_shapes = len({row["name"] for row in doc["pareto"] + doc["top"]})
    code, out, err = run(capsys, "search", "--params", "7e9", "--top", "3")
    flat = " ".join(out.split())
    assert code == 0
    assert f"Pareto front, all {front} shapes (--top limits the list below)" in flat, flat
    assert "the 3 fastest (--top 3)" in flat, flat
    assert f"of the {listed_shapes} shapes listed (the Pareto front's {front} and the 3 fastest" in err, err


# ---- 4. calibrate --quick on the CPU: no in-sample 0.000 passed off as the profile's error ----

def test_a_cpu_smoke_fit_says_why_it_has_no_error(capsys, tmp_path):
    pytest.importorskip("torch")
    code, out, _ = run(capsys, "calibrate", "--quick", "--device", "cpu", "--gpu", "h200", "--warmup-ms", "0",
                       "--budget-ms", "1", "--db", str(tmp_path / "c.db"), "--out", str(tmp_path / "p.json"),
                       "--no-install")
    flat = " ".join(out.split())
    assert code == 0, out
    assert "no held-out error for the profile: a CPU smoke test holds no case out" in flat, flat
    assert "(spec model) ->" not in flat, flat  # the old in-sample arrow, which read as a perfect fit


# ---- 5. check --strict: both reasons it exits 1 ----

def test_strict_help_says_it_also_refuses_a_guessed_config(capsys, tmp_path):
    text = _help(capsys, "check")
    assert "more than 1% of the step, or when the model's config can only be read by guessing fields" in text, text
    config = json.loads((Path(__file__).parent / "data/hf/llama-3.1-8b.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(config, model_type="mystery")))
    code, out, err = run(capsys, "check", "--config", str(path), "--strict")
    assert code == 1 and "mystery" in err and "--strict refuses guesses" in err, (code, err)


# ---- 6. no matplotlib: said before --mkdir makes anything ----

@pytest.mark.parametrize("argv", [("report", "gpt2"), ("plot", "breakdown", "gpt2")])
def test_no_matplotlib_is_said_before_any_folder_is_made(capsys, tmp_path, monkeypatch, argv):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    folder = tmp_path / "nt"
    out = folder / ("report.html" if argv[0] == "report" else "b.png")
    err = _one_line_error(capsys, *argv, "--out", str(out), "--mkdir")
    assert "figures need matplotlib" in err, err
    assert not folder.exists()


# ---- 7. calibrate --help: the durations and counts benchmarks/RESULTS.md measured ----

def test_calibrate_help_gives_the_measured_durations_and_counts(capsys):
    from shapewise.cli.calibrate import DRAW_HELP
    from shapewise.draws import calibration_cases

    text = _help(capsys, "calibrate")
    assert "38 s on an H200, 44 s on an H100" in text  # calibrate --quick, end to end
    assert "about 90 s more on an H200: 91 s measured" in DRAW_HELP["edges"]
    assert "about 70 s more on an H200: 64 and 76 s measured" in DRAW_HELP["batched"]
    assert "90 to 135 s more on an H200" in DRAW_HELP["extended"]
    assert not any("2 minutes" in words for words in DRAW_HELP.values())
    base = len(calibration_cases())
    for seed in (1, 2):  # the shards draws measured: 790 and 786 of the 800 drawn (repeats measured once)
        measured = len(calibration_cases(shards=seed)) - base
        assert f"{measured} for seed {seed}" in DRAW_HELP["shards"], (seed, measured)
    assert "800 drawn" in DRAW_HELP["shards"]
