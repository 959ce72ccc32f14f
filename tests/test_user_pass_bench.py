"""What a new user met measuring on the CPU (pass 3): a sweep cut short by Ctrl-C never reports its part
as the whole, and times set beside another device's predictions say so."""

from __future__ import annotations

import json

import pytest

from helpers import interrupt_after, run

torch = pytest.importorskip("torch")

TINY = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256, "hidden_act": "silu"}
FAST = ["--device", "cpu", "--warmup-ms", "0", "--budget-ms", "1"]


def _config(tmp_path) -> str:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    return str(config)


def test_an_interrupted_bench_ops_gives_no_step_total_as_if_whole(capsys, tmp_path, monkeypatch):
    interrupt_after(monkeypatch, 3)
    code, out, _ = run(capsys, "bench", "ops", "--config", _config(tmp_path), "--batch", "1", "--seq", "32",
                       "--db", str(tmp_path / "r.db"), *FAST)
    flat = " ".join(out.split())
    assert code == 130 and "interrupted" in flat
    assert "step, measured op by op" not in flat, "three ops summed and called the step"
    assert "step over the 3 of" in flat and "not measured: not the whole step" in flat


def test_an_interrupted_bench_layer_counts_no_unmeasured_op_as_failed(capsys, tmp_path, monkeypatch):
    interrupt_after(monkeypatch, 3)  # the two passes of the layer whole, then one op
    code, out, _ = run(capsys, "bench", "layer", "--config", _config(tmp_path), "--batch", "1", "--seq", "32",
                       "--db", str(tmp_path / "r.db"), *FAST)
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()[:1] in (["fwdbwd"], ["fwd"])}
    assert code == 130 and set(rows) == {"fwdbwd", "fwd"}
    for line in rows.values():
        cells = [c.strip() for c in line.split("│")]
        assert cells[-1].startswith("0, ") and cells[-1].endswith("not measured"), line
        assert cells[3] == "", f"ops/layer from a part of the ops: {line}"


VERIFY = ["--device", "cpu", "--batch", "1", "--seq", "32", "--params-tol", "0.1", "--top", "1", "--rounds", "3"]
TINY_VERIFY = {**TINY, "hidden_size": 80, "num_key_value_heads": 4, "intermediate_size": 213, "vocab_size": 250}


def _tiny_verify_config(tmp_path) -> str:
    config = tmp_path / "verify.json"
    config.write_text(json.dumps(TINY_VERIFY))
    return str(config)


def test_verify_says_its_cpu_times_are_no_test_of_the_gpu_predicted(capsys, tmp_path):
    code, out, err = run(capsys, "verify", _tiny_verify_config(tmp_path), *VERIFY)
    assert code == 0 and "measured speedup" in out
    assert "measured on the CPU" in err and "h200" in err and err.count("shapewise: warning:") >= 1


def test_verify_says_when_it_measured_another_gpu_than_it_predicts(capsys, tmp_path, monkeypatch):
    import shapewise.measure as measure

    real = measure.environment
    monkeypatch.setattr(measure, "environment",
                        lambda device="cuda": {**real(device), "gpu_name": "NVIDIA H100 80GB HBM3"})
    code, _, err = run(capsys, "verify", _tiny_verify_config(tmp_path), *VERIFY, "--json")
    assert code == 0 and "measured on NVIDIA H100 80GB HBM3, not on the h200" in err
    code, _, err = run(capsys, "verify", _tiny_verify_config(tmp_path), *VERIFY, "--gpu", "h100")
    assert code == 0 and "not on the" not in err and "measured on the CPU" not in err


@pytest.mark.parametrize("backends, said", [(["flash"], "the flash SDPA backend runs only on CUDA devices"),
                                            (["flash", "cudnn"], "the cudnn, flash SDPA backends run only on")])
def test_a_cuda_only_attention_backend_on_the_cpu_is_one_line(capsys, tmp_path, backends, said):
    code, _, err = run(capsys, "bench", "attention", "--heads", "2", "--head-dim", "16", "--seq", "32",
                       "--backend", *backends, "--db", str(tmp_path / "r.db"), *FAST)
    assert code == 2 and said in err and err.count("\n") == 1


def test_a_sweep_with_wide_spreads_says_so_once():
    import warnings

    from shapewise.cli.bench import _warn_wide
    from shapewise.errors import ShapewiseWarning

    rows = [{"median_ms": 1.0, "iqr_ms": 0.5}, {"median_ms": 2.0, "iqr_ms": 0.1}, {"median_ms": None, "error": "x"}]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        _warn_wide(rows)
        _warn_wide(rows[1:])  # none wide: nothing said
    said = [str(w.message) for w in record if issubclass(w.category, ShapewiseWarning)]
    assert len(said) == 1 and "1 of 2 cases measured with a spread (IQR) over 10% of their median (up to 50%)" in said[0]


def test_an_interrupted_sweep_in_json_says_so_on_stderr(capsys, tmp_path, monkeypatch):
    interrupt_after(monkeypatch, 2)
    code, out, err = run(capsys, "bench", "gemm", "-m", "16", "32", "48", "-n", "16", "-k", "16", "--json",
                         "--db", str(tmp_path / "r.db"), *FAST)
    assert code == 130 and len(json.loads(out)) == 2
    assert "interrupted: 2 measured" in err and "kept in the store" in err
