"""verify's measured interval (none under three rounds, verify.MIN_INTERVAL_ROUNDS: the table, the JSON
and the variants set alike) and what a
verify run's JSON says of the model it measured (plots.verified_model_mismatch)."""

import gzip
import json
from pathlib import Path

import pytest

from helpers import run
from shapewise import plots
from shapewise.presets import get_model
from shapewise.search import change_text

TINY = {"model_type": "llama", "hidden_size": 80, "num_hidden_layers": 4, "num_attention_heads": 4,
        "intermediate_size": 213, "vocab_size": 250, "hidden_act": "silu"}
CPU = ("--device", "cpu", "--batch", "1", "--seq", "32")


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    return str(path)


def _config(tmp_path, name: str, **changes) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({**TINY, **changes}))
    return str(path)


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_the_json_says_no_interval_where_the_table_does(capsys, tmp_path, tiny, rounds):
    pytest.importorskip("torch")
    other = _config(tmp_path, "other.json", vocab_size=256)
    argv = ("verify", tiny, "--config", other, *CPU, "--rounds", str(rounds))
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    (row,) = json.loads(out)
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    cells = [c.strip() for c in next(line for line in out.splitlines() if line.startswith("config ")).split("│")]
    interval = cells[4]  # candidate, predicted, its interval, measured, its interval
    if rounds < 3:
        assert row["ci"] == [None, None] and interval == "–"
    else:
        low, high = row["ci"]
        assert low < high and low <= row["measured_speedup"] <= high
        assert interval != "–" and "–" in interval


def test_a_verify_runs_model_is_read_from_its_changes_not_its_label():
    gpt2 = get_model("gpt2")  # 12 heads of 64, vocabulary 50257
    assert plots.verified_model_mismatch([{"candidate": "#1 fewer heads", "changes": {"heads": [32, 20]}}],
                                         gpt2) == "its candidates change heads 32→…, but gpt2 has 12"
    agrees = [{"candidate": "#1 heads 32→20", "changes": {"heads": [12, 8], "batch": [4, 8]}},
              {"candidate": "config other.json", "changes": None}]  # a config names no change
    assert plots.verified_model_mismatch(agrees, gpt2) == ""
    # A file written before verify --json gave its changes: the label says them.
    older = [{"candidate": "config other.json"}, {"candidate": "#2 head dim 80→128, vocab 50257→50304"}]
    assert "head dim 80→…" in plots.verified_model_mismatch(older, gpt2)
    assert plots.verified_model_mismatch([{"candidate": "#1 head dim 64→128, vocab 50257→50304"}], gpt2) == ""


def test_a_verify_run_is_drawn_for_its_model_and_refused_for_another(capsys, tmp_path, tiny):
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    code, out, err = run(capsys, "verify", tiny, "--params-tol", "0.1", "--top", "1", *CPU, "--rounds", "1", "--json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["changes"] and row["candidate"] == f"#1 {change_text(row['changes'])}" and row["ci"] == [None, None]
    verified = tmp_path / "verify.json"
    verified.write_text(out)
    code, _, err = run(capsys, "plot", "suggestions", tiny, "--verified", str(verified), *CPU[2:],
                       "--out", str(tmp_path / "v.png"))
    assert code == 0, err  # drawn without an interval
    (name, (old, _)), = row["changes"].items()
    assert name == "vocab"  # the tiny model's only neighbours change its vocabulary
    other = _config(tmp_path, "other.json", vocab_size=old + 50)
    code, _, err = run(capsys, "plot", "suggestions", other, "--verified", str(verified), *CPU[2:],
                       "--out", str(tmp_path / "w.png"))
    assert code == 2 and "another model" in err and f"vocab {old}→" in err and not (tmp_path / "w.png").exists()


@pytest.mark.parametrize("measure", ["model", "layer"])
def test_the_json_names_the_step_it_timed_and_gives_the_originals(capsys, tmp_path, tiny, measure):
    # verify --json called a whole step "layer_ms" in model mode, and gave no step time of the original
    pytest.importorskip("torch")
    other = _config(tmp_path, "other.json", vocab_size=256)
    code, out, err = run(capsys, "verify", tiny, "--config", other, *CPU, "--rounds", "1", "--measure", measure, "--json")
    assert code == 0, err
    (row,) = json.loads(out)
    steps = ("predicted_step_ms", "measured_step_ms", "original_predicted_step_ms", "original_measured_step_ms")
    assert row["mode"] == measure and all(row[name] > 0 for name in steps)
    # the predicted speedup is the predicted steps' ratio, per token (the two shapes' tokens are the same)
    assert row["predicted_speedup"] == pytest.approx(row["original_predicted_step_ms"] / row["predicted_step_ms"])
    if measure == "model":
        assert "layer_ms" not in row and "head_ms" not in row
    else:  # a layer run's step is its layers and head: the tiny model has 4 layers
        assert row["measured_step_ms"] == pytest.approx(4 * row["layer_ms"] + row["head_ms"])
    verified = tmp_path / "verify.json"
    verified.write_text(out)
    code, _, err = run(capsys, "plot", "suggestions", tiny, "--verified", str(verified), *CPU[2:],
                       "--out", str(tmp_path / "v.png"))
    assert code == 0, err


RESULTS = Path(__file__).parent.parent / "benchmarks" / "results"


def _verify_runs():
    """Every committed verify run, as (file, model, rows): a `verify --json` list, or several by model."""
    for path in sorted(RESULTS.glob("*verify*/*.json*")):
        opened = gzip.open(path, "rt") if path.suffix == ".gz" else path.open()
        with opened as f:
            doc = json.load(f)
        runs = doc.items() if isinstance(doc, dict) else [(path.stem.removeprefix("verify-"), doc)]
        # verify_real.py's files say beside the models how their layers were built ("shared_norms": true)
        yield from ((path, model, rows) for model, rows in runs if isinstance(rows, list))


def test_the_reader_reads_every_verify_run_written_before_the_step_times():
    # written with "layer_ms" (the whole step's in model mode) and no original step time
    runs = list(_verify_runs())
    assert len(runs) >= 10 and any("layer_ms" in row for _, _, rows in runs for row in rows)
    for path, model, rows in runs:
        data = plots.verified_data(rows, model=model, gpu="h200")
        assert len(data["labels"]) == len(rows) + 1, path
        assert list(data["predicted_speedup"][1:]) == [r["predicted_speedup"] for r in rows], path


@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\x00\x00", b"[{\"candidate\": \"#1 \xff\"}]"])
def test_a_binary_file_for_verified_is_refused_in_words(capsys, tmp_path, content):
    # the decoder's own words were shown: 'utf-8' codec can't decode byte 0x89 in position 0: invalid start byte
    pytest.importorskip("matplotlib")
    binary = tmp_path / "figure.png"
    binary.write_bytes(content)
    code, out, err = run(capsys, "plot", "suggestions", "gpt2", "--verified", str(binary), "--out", str(tmp_path / "v.png"))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "is not the output of `shapewise verify --json`: not a text file (not UTF-8)" in err
    assert "codec" not in err and "0x" not in err


WINDOWED = {"model_type": "gemma3_text", "hidden_size": 64, "head_dim": 16, "num_attention_heads": 4,
            "num_key_value_heads": 1, "num_hidden_layers": 6, "intermediate_size": 128, "vocab_size": 256,
            "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 16, "sliding_window_pattern": 6}


@pytest.mark.parametrize("measure", ["model", "layer"])
def test_layer_mode_says_it_times_a_global_layer_where_windows_alternate(capsys, tmp_path, measure):
    """A user verified Gemma 3 (five of every six layers in a window) in layer mode and read steps timed and
    priced as six global layers, without a word: layer mode now says so in one line, naming `--measure
    model`, which times the windows and says nothing."""
    pytest.importorskip("torch")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(WINDOWED))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**WINDOWED, "vocab_size": 320}))
    code, _, err = run(capsys, "verify", str(path), "--config", str(other), *CPU, "--rounds", "1",
                       "--measure", measure, "--json")
    assert code == 0, err
    said = [line for line in err.splitlines() if "layer mode times one global rotary layer" in line]
    if measure == "layer":
        assert len(said) == 1 and "each of its 6 layers" in said[0] and "5 of them attend within a 16-token window" \
            in said[0] and "`--measure model`" in said[0]
    else:
        assert not said
