"""What shapewise says without being asked is a Python warning (ShapewiseWarning): a library user filters,
captures or escalates it as any other; the commands print each as one `shapewise: warning:` line."""

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import shapewise
from helpers import run
from shapewise import ShapewiseWarning, load_config
from shapewise.cli import common
from shapewise.errors import warn

GEMMA3 = Path(__file__).parent / "data" / "hf" / "gemma-3-4b-it.json"  # multimodal: its vision tower is not priced
MULTIMODAL = "gemma3 is multimodal; shapewise prices its language model"
OVERLAP = "--overlap-comm has no effect at --tp 1: there is no tensor-parallel collective to overlap"


def test_a_library_call_warns_with_a_shapewise_warning_at_the_callers_line():
    assert issubclass(ShapewiseWarning, UserWarning) and "ShapewiseWarning" in shapewise.__all__
    with pytest.warns(ShapewiseWarning, match=MULTIMODAL) as record:
        load_config(GEMMA3)
    assert len(record) == 1 and record[0].filename == __file__  # the user's call, not shapewise's inside


def test_a_warning_filter_turns_it_into_an_error():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShapewiseWarning)
        with pytest.raises(ShapewiseWarning, match=MULTIMODAL):
            load_config(GEMMA3)


def test_a_user_can_silence_it():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=ShapewiseWarning)
        assert load_config(GEMMA3).hidden == 2560
    assert record == []


def test_the_command_prints_one_line_a_warning_and_keeps_its_exit_code(capsys):
    code, _, err = run(capsys, "check", "--config", str(GEMMA3), "--seq", "1024", "--overlap-comm")
    assert code == 0 and err.startswith(f"shapewise: warning: {GEMMA3}: {MULTIMODAL}")
    assert err.splitlines()[1:] == [f"shapewise: warning: {OVERLAP}"]
    code, _, err = run(capsys, "check", "gpt2", "--seq", "1024", "--overlap-comm")  # said again, each time
    assert code == 0 and err == f"shapewise: warning: {OVERLAP}\n"


def test_the_command_says_a_warning_however_the_caller_filters_them_and_leaves_the_filters_as_they_were(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShapewiseWarning)
        filters, show = list(warnings.filters), warnings.showwarning
        code, _, err = run(capsys, "check", "gpt2", "--seq", "1024", "--overlap-comm")
        assert code == 0 and err == f"shapewise: warning: {OVERLAP}\n"
        assert warnings.filters == filters and warnings.showwarning is show


def test_the_command_says_a_repeated_warning_each_time_and_lets_other_warnings_through(capsys, monkeypatch):
    def twice(batch, seq, mode="train"):  # as check_tokens is called: the mode bounds the tokens
        for _ in range(2):
            warn("the same words")
        warnings.warn("not shapewise's", UserWarning)

    monkeypatch.setattr(common, "check_tokens", twice)
    with pytest.warns(UserWarning, match="not shapewise's") as record:  # shown as Python shows it, here recorded
        code, _, err = run(capsys, "check", "gpt2", "--seq", "1024")
    assert code == 0 and err == "shapewise: warning: the same words\n" * 2
    assert not any(issubclass(w.category, ShapewiseWarning) for w in record)


def test_the_command_run_as_a_process_prints_one_line_a_warning():
    done = subprocess.run([sys.executable, "-m", "shapewise", "check", "gpt2", "--seq", "1024", "--overlap-comm"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == f"shapewise: warning: {OVERLAP}\n", done.stderr


def test_a_tensor_parallel_caveat_is_in_check_json_as_well_as_said(capsys):
    code, out, err = run(capsys, "check", "gpt2", "--seq", "1024", "--overlap-comm", "--json")
    assert code == 0 and err == f"shapewise: warning: {OVERLAP}\n"
    assert OVERLAP in json.loads(out)["caveats"]
    code, out, err = run(capsys, "check", "llama-2-70b", "--seq", "1024", "--tp", "16", "--json")
    assert code == 0 and "--tp 16: tensor parallelism past one node's 8 GPUs" in err
    assert any(line.startswith("--tp 16: tensor parallelism past one node") for line in json.loads(out)["caveats"])


def test_check_json_carries_every_warning_it_said_and_a_quiet_run_says_none(capsys):
    code, out, err = run(capsys, "check", "--config", str(GEMMA3), "--seq", "1024", "--json")
    said = [line.removeprefix("shapewise: warning: ") for line in err.splitlines()]
    assert code == 0 and json.loads(out)["warnings"] == said and MULTIMODAL in said[0]
    code, out, err = run(capsys, "check", "gpt2", "--seq", "1024", "--json")  # none left from the run before
    assert code == 0 and json.loads(out)["warnings"] == [] and err == ""


@pytest.mark.parametrize("command", [("suggest",), ("plan", "--gpus", "8", "--global-batch", "1048576")])
def test_the_pricing_commands_json_carries_the_warnings_said(capsys, command):
    code, out, err = run(capsys, *command, "--config", str(GEMMA3), "--seq", "2048", "--json")
    said = [line.removeprefix("shapewise: warning: ") for line in err.splitlines()]
    assert code == 0 and json.loads(out)["warnings"] == said and MULTIMODAL in said[0]


def test_check_json_warnings_hold_the_caveats_said_after_it(capsys):
    code, out, err = run(capsys, "check", "gpt2", "--seq", "4096", "--overlap-comm", "--json")
    said = [line.removeprefix("shapewise: warning: ") for line in err.splitlines()]
    assert code == 0 and len(said) == 2 and json.loads(out)["warnings"] == said


def test_an_embedding_model_whose_file_names_a_causal_head_is_said(tmp_path):
    """Qwen3-Embedding-8B's config.json names Qwen3ForCausalLM: its name alone says that the 0.62B head is
    not run. Said once; a Qwen3 file of another name is read without a word."""
    file = Path(__file__).parent / "data" / "hf-thirteenth" / "qwen3-embedding-8b.json"
    with pytest.warns(ShapewiseWarning, match=r"qwen3-embedding-8b\) says an embedding model") as record:
        shape = load_config(file)
    assert len(record) == 1 and shape.vocab == 151_665
    other = tmp_path / "qwen3-8b.json"
    other.write_text(file.read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_config(other) == shape.replace(name="qwen3-8b", source=str(other))
