"""The command line: real output, exit codes, one-line errors, and no traceback on any input."""

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import run
from shapewise.cli import main
from shapewise.errors import ShapewiseError


def test_check_gpt2_flags_the_vocab(capsys):
    code, out, err = run(capsys, "check", "gpt2", "--gpu", "h200", "--seq", "1024")
    assert code == 0 and err == ""
    assert "vocab 50,257 is not a multiple of 64" in out and "50,304" in out
    assert "logits.wgrad" in out and "step" in out and "tokens/s" in out


def test_check_gpt3_2_7b_flags_head_dim_80(capsys):
    code, out, _ = run(capsys, "check", "gpt3-2.7b", "--gpu", "h200")
    assert code == 0 and "head dim 80 is not a multiple of 64" in out


def test_falcon_with_tp2_stops_with_a_clear_error(capsys):
    code, out, err = run(capsys, "check", "falcon-7b", "--tp", "2")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "71 heads" in err


def test_json_carries_the_same_content(capsys):
    code, out, _ = run(capsys, "check", "gpt2", "--json", "--mode", "train")
    doc = json.loads(out)
    assert code == 0
    assert doc["model"]["params"] == 124_439_808
    assert doc["gpu"]["key"] == "h200"
    logits = next(op for op in doc["ops"] if op["name"] == "logits" and op["pass"] == "fwd")
    assert (logits["m"], logits["n"], logits["k"]) == (8192, 50257, 768)
    assert logits["main_loss"] == "misalign"
    assert doc["findings"][0]["rule"] == "vocab"
    assert doc["totals"]["step_ms"] == pytest.approx(sum(op["total_ms"] for op in doc["ops"]))


def test_strict_exits_1_on_a_costly_finding(capsys):
    assert run(capsys, "check", "gpt2", "--strict", "--json")[0] == 1
    assert run(capsys, "check", "llama2-7b", "--strict", "--json", "--mode", "prefill")[0] == 0
    # Mixed-precision Adam for 6.7B parameters (16 bytes each, 20 at the step) does not fit one H200.
    code, out, _ = run(capsys, "check", "llama2-7b", "--strict", "--json")
    assert code == 1 and json.loads(out)["findings"][0]["rule"] == "memory"


def test_config_file_instead_of_a_preset(capsys, tmp_path):
    config = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
              "num_key_value_heads": 4, "intermediate_size": 5632, "vocab_size": 32000, "hidden_act": "silu"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, out, _ = run(capsys, "check", "--config", str(tmp_path), "--json")
    assert code == 0 and json.loads(out)["model"]["num_kv_heads"] == 4


@pytest.mark.parametrize("argv, needle", [
    (["check", "gpt5"], "unknown model"),
    (["check", "gpt2", "--gpu", "h2000"], "did you mean"),
    (["check", "gpt2", "--batch", "0"], "positive"),
    (["check", "gpt2", "--seq", "1.5"], "whole number"),
    (["check", "gpt2", "--mode", "serve"], "invalid choice"),
    (["check"], "name a model"),
    (["check", "gpt2", "--config", "x.json"], "not both"),
    (["check", "--config", "/nonexistent/config.json"], "config"),
    (["check", "gpt2", "--dtype", "fp8", "--gpu", "a100-80gb"], "fp8"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_gpus_and_models_list_everything(capsys):
    code, out, _ = run(capsys, "gpus")
    assert code == 0 and "h200" in out and "mi300x" in out
    code, out, _ = run(capsys, "models")
    assert code == 0 and "llama3-70b" in out and "gpt2-xl" in out


words = st.sampled_from(["check", "gpt2", "llama2-7b", "--gpu", "h200", "a100", "--tp", "--batch", "--seq",
                         "--mode", "decode", "--dtype", "fp8", "--attention", "unfused", "--json", "--config",
                         "0", "-1", "3", "8", "71", "x", "", "--strict", "falcon-7b", "mixtral-8x7b"])


@settings(max_examples=150, deadline=None)
@given(st.lists(words | st.text(max_size=8), max_size=8))
def test_fuzzed_command_lines_never_crash(argv):
    try:
        code = main(["check", *argv])
    except SystemExit as exit_:  # argparse's own exit: usage errors (2) or --help (0)
        code = exit_.code
    assert code in (0, 1, 2)


def test_python_dash_m_runs_without_importing_torch():
    code = ("import runpy, sys; sys.argv = ['shapewise', 'check', 'gpt2', '--json'];"
            "\ntry:\n runpy.run_module('shapewise', run_name='__main__')\nexcept SystemExit: pass"
            "\nassert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_check_says_which_cost_model_it_used(capsys, tmp_path):
    code, out, _ = run(capsys, "check", "gpt2", "--gpu", "a100", "--json")
    assert json.loads(out)["cost_model"] == {"source": "spec-only (no calibrated profile for this GPU)",
                                             "calibrated": False}
    code, out, _ = run(capsys, "check", "gpt2", "--gpu", "h200", "--spec-only")
    assert "cost model: spec-only" in out
    code, out, err = run(capsys, "check", "gpt2", "--profile", str(tmp_path / "missing.json"))
    assert code == 2 and "cannot read profile" in err


def test_version_prints_the_package_version(capsys):
    import shapewise

    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"shapewise {shapewise.__version__}"


def test_every_command_chooses_its_cost_model_in_one_place(capsys):
    from types import SimpleNamespace

    from shapewise.cli.common import cost_model
    from shapewise.cost import SPEC
    from shapewise.hardware import get_gpu

    h200 = get_gpu("h200")
    spec = cost_model(SimpleNamespace(spec_only=True), h200)
    assert spec.params is SPEC and spec.source == "spec-only" and spec.gpu is h200
    own = cost_model(SimpleNamespace(), h200)  # a command without the flags: the GPU's own profile
    assert own.source.startswith("calibrated profile of NVIDIA H200") and own.params is not SPEC
    assert cost_model(SimpleNamespace(), None) is None  # nothing to predict for
    with pytest.raises(ShapewiseError, match="not both"):
        cost_model(SimpleNamespace(spec_only=True, profile="x.json"), h200)


def _byte_counts(doc, key=""):
    """Every number under a key that names bytes ("bytes", "memory_bytes", "parts_bytes": {...})."""
    if isinstance(doc, dict):
        for name, value in doc.items():
            yield from _byte_counts(value, name if "bytes" in name else key)
    elif isinstance(doc, list):
        for value in doc:
            yield from _byte_counts(value, key)
    elif key and isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield key, doc


@pytest.mark.parametrize("argv", [
    ("check", "gpt2", "--json"),
    ("suggest", "gpt2", "--json"),
    ("suggest", "llama-3-8b", "--json"),  # no fit: original_memory_bytes and the alternatives'
    ("search", "--params", "1e9", "--json", "--top", "2"),
    ("plan", "gpt2", "--gpus", "8", "--global-batch", "524288", "--seq", "1024", "--json", "--top", "2"),
])
def test_byte_counts_in_json_are_whole_numbers(capsys, argv):
    # suggest gave original_memory_bytes 11215860326.4: an estimate's 11% allowance is no fraction of a byte
    code, out, _ = run(capsys, *argv)
    counts = list(_byte_counts(json.loads(out)))
    assert code == 0 and len(counts) >= 2
    assert [(key, n) for key, n in counts if type(n) is not int] == []
