"""What a new user met measuring on the CPU (pass 3): a sweep cut short by Ctrl-C never reports its part
as the whole, and times set beside another device's predictions say so."""

from __future__ import annotations

import json

import pytest

from helpers import run

torch = pytest.importorskip("torch")

TINY = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256, "hidden_act": "silu"}
FAST = ["--device", "cpu", "--warmup-ms", "0", "--budget-ms", "1"]


def _interrupt_after(monkeypatch, num_cases: int) -> None:
    import shapewise.bench as bench

    measure, calls = bench._measure_one, []

    def measure_then_stop(*args, **kwargs):
        calls.append(1)
        if len(calls) > num_cases:
            raise KeyboardInterrupt
        return measure(*args, **kwargs)

    monkeypatch.setattr(bench, "_measure_one", measure_then_stop)


def _config(tmp_path) -> str:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    return str(config)


def test_an_interrupted_bench_ops_gives_no_step_total_as_if_whole(capsys, tmp_path, monkeypatch):
    _interrupt_after(monkeypatch, 3)
    code, out, _ = run(capsys, "bench", "ops", "--config", _config(tmp_path), "--batch", "1", "--seq", "32",
                       "--db", str(tmp_path / "r.db"), *FAST)
    flat = " ".join(out.split())
    assert code == 130 and "interrupted" in flat
    assert "step, measured op by op" not in flat, "three ops summed and called the step"
    assert "step over the 3 of" in flat and "not measured: not the whole step" in flat


def test_an_interrupted_bench_layer_counts_no_unmeasured_op_as_failed(capsys, tmp_path, monkeypatch):
    _interrupt_after(monkeypatch, 3)  # the two passes of the layer whole, then one op
    code, out, _ = run(capsys, "bench", "layer", "--config", _config(tmp_path), "--batch", "1", "--seq", "32",
                       "--db", str(tmp_path / "r.db"), *FAST)
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()[:1] in (["fwdbwd"], ["fwd"])}
    assert code == 130 and set(rows) == {"fwdbwd", "fwd"}
    for line in rows.values():
        cells = [c.strip() for c in line.split("│")]
        assert cells[-1].startswith("0, ") and cells[-1].endswith("not measured"), line
        assert cells[3] == "", f"ops/layer from a part of the ops: {line}"
