"""The measuring side as a new user met it on the CPU: what cannot run is refused before the sweep,
a step total over part of the ops says so, and verify's progress, intervals and errors."""

import json

import pytest

from helpers import run

pytest.importorskip("torch")

TINY = {"model_type": "llama", "hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 2, "intermediate_size": 256, "vocab_size": 512}


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return str(path)


def one_error(err: str) -> bool:
    return err.count("\n") == 1 and err.startswith("shapewise: error:")


def test_fp8_gemms_outside_the_nt_layout_are_refused_before_the_sweep(capsys, tmp_path):
    code, _, err = run(capsys, "bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--dtype", "fp8", "--device", "cpu",
                       "--db", str(tmp_path / "x.db"))
    assert code == 2 and one_error(err) and "--layout nt" in err
    assert not (tmp_path / "x.db").exists()  # refused before the store was opened: nothing stored as failed


def test_cuda_only_attention_backends_are_refused_on_the_cpu(capsys, tmp_path):
    code, _, err = run(capsys, "bench", "attention", "--heads", "4", "--head-dim", "32", "--seq", "64", "--batch", "1",
                       "--backend", "efficient", "cudnn", "--device", "cpu", "--db", str(tmp_path / "x.db"))
    assert code == 2 and one_error(err) and "only on CUDA" in err


def test_a_step_total_over_part_of_the_ops_says_so(capsys, tmp_path, tiny, monkeypatch):
    from shapewise import bench

    build = bench.build

    def no_memory_ops(case, device):  # the memory-bound ops fail, the GEMMs and attention run
        if case.params.get("kind") == "memory":
            raise RuntimeError("no kernel for this op here")
        return build(case, device)

    monkeypatch.setattr(bench, "build", no_memory_ops)
    code, out, _ = run(capsys, "bench", "ops", "--config", tiny, "--batch", "1", "--seq", "64", "--device", "cpu",
                       "--db", str(tmp_path / "x.db"), "--warmup-ms", "1", "--budget-ms", "2")
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("step"))
    assert "failed: not the whole step" in line or "no total" in line


def test_verify_says_a_round_is_too_few_for_an_interval_and_words_its_tp_error(capsys, tiny):
    code, out, err = run(capsys, "verify", tiny, "--device", "cpu", "-b", "1", "-s", "64", "--top", "1", "--rounds", "1")
    assert code == 0 and "(1 round)" in out.replace("\n", " ") and "too few for a measured interval" in err
    code, _, err = run(capsys, "verify", tiny, "--device", "cpu", "-b", "1", "-s", "64", "--tp", "2")
    assert code == 2 and one_error(err) and "give --tp 1 (got --tp 2)" in err and "--mode" not in err


def test_interleave_reports_each_round():
    from shapewise.measure import interleave

    done = []
    interleave({"a": lambda: None, "b": lambda: None}, device="cpu", rounds=4, budget_ms=1, warmup_ms=0.1,
               flush_l2=False, on_round=done.append)
    assert done == [1, 2, 3, 4]
