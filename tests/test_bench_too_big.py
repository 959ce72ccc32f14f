"""A case whose tensors cannot fit the device's memory is refused up front, never allocated:
a sweep of nothing else is one line and exit code 2; among cases that fit, it is recorded as failed with
what it needs and what the device has, and the sweep goes on."""

from __future__ import annotations

import json
import os

import pytest

import shapewise.bench as bench
from helpers import run
from shapewise.cases import Case, attention_cases, gemm_cases
from shapewise.store import Store

torch = pytest.importorskip("torch")

FAST = ["--device", "cpu", "--warmup-ms", "1", "--budget-ms", "2"]
TINY = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256, "hidden_act": "silu"}


@pytest.fixture
def built(monkeypatch):
    """The labels of the cases built (allocated), in order."""
    labels, real = [], bench.build

    def recording(case, device):
        labels.append(case.label)
        return real(case, device)

    monkeypatch.setattr(bench, "build", recording)
    return labels


def test_the_cpus_memory_is_the_machines():
    assert bench.device_memory_bytes("cpu") == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_a_gemm_past_the_devices_memory_is_one_line_and_exit_2_with_nothing_allocated(capsys, tmp_path, built):
    db = tmp_path / "r.db"
    code, out, err = run(capsys, "bench", "gemm", "-m", "10000000", "-n", "10000000", "-k", "1000", "--db", str(db),
                         *FAST)
    have = bench.device_memory_bytes("cpu") / 1e9
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert (f"gemm 10000000×10000000×1000 nn bf16 does not fit the memory of the CPU: it needs 200,040.0 GB for its "
            f"tensors, the device has {have:,.1f} GB; give smaller sizes") in err, err
    assert built == []
    assert not db.exists()  # nothing recorded: the refused run's new store is taken back


def test_a_sweep_of_none_that_fits_names_the_largest(capsys, tmp_path, built):
    code, _, err = run(capsys, "bench", "bmm", "-b", "2", "-m", "1000000", "2000000", "-n", "1000000", "-k", "8",
                       "--db", str(tmp_path / "r.db"), *FAST)
    assert code == 2 and err.count("\n") == 1 and built == [], err
    assert "none of the 2 cases fits the memory of the CPU: the largest, bmm 2×2000000×1000000×8 nn bf16, needs " \
           "8,000.1 GB for its tensors" in err, err


def test_among_cases_that_fit_one_too_big_is_recorded_as_failed_and_the_sweep_goes_on(monkeypatch, tmp_path, built):
    monkeypatch.setattr(bench, "device_memory_bytes", lambda device: 2 * 10**9)
    small, big = gemm_cases([32], [32], [32]), gemm_cases([20000], [20000], [20000])  # big: 2.4 GB of bf16
    with Store(tmp_path / "r.db") as store:
        result = bench.sweep([*small, *big], store=store, device="cpu", warmup_ms=1, budget_ms=2, progress=False)
    assert result.measured == 1 and result.failed == 1 and built == [small[0].label]
    rows = {case.label: row for case, row in result.rows}
    assert rows[big[0].label]["error"] == "needs 2.4 GB, the device has 2.0 GB"
    assert rows[big[0].label]["median_ms"] is None and rows[big[0].label]["bytes"] == big[0].bytes
    assert rows[small[0].label]["error"] is None and rows[small[0].label]["median_ms"] > 0


def test_bench_ops_records_the_ops_too_big_and_sums_the_others(capsys, monkeypatch, tmp_path, built):
    """The memory between the ops' sizes: the larger ops refused, the step summed over the rest."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    limit = 40_000  # bytes: the attention and logits ops of this step read and write more
    monkeypatch.setattr(bench, "device_memory_bytes", lambda device: limit)
    code, out, _ = run(capsys, "bench", "ops", "--config", str(config), "--batch", "1", "--seq", "32", "--json",
                       "--db", str(tmp_path / "r.db"), *FAST)
    rows = json.loads(out)
    refused = [r for r in rows if r["bytes"] > limit]
    assert code == 0 and refused and len(refused) < len(rows)
    assert all(r["error"].startswith("needs ") and r["median_ms"] is None for r in refused)
    assert all(r["error"] is None for r in rows if r["bytes"] <= limit)
    assert len(built) == len(rows) - len(refused)


def test_a_case_of_unknown_bytes_is_tried():
    """A layer carries no bytes (its tensors depend on the model's build): nothing to refuse it by, so it
    is built (and fails where it does, out of memory, as before); nor is anything refused where the
    device's memory is unknown."""
    assert bench.too_big(Case("layer", {}), 1) is None
    assert bench.too_big(gemm_cases([8], [8], [8])[0], None) is None  # the memory unknown: tried


def test_the_kernel_census_names_no_kernel_of_a_case_too_big(monkeypatch, tmp_path):
    """On a GPU the census builds each GEMM again: one too big is recorded with the reason, not built."""
    tried = []

    def profiled(torch, cases, device):  # what the profiler would see: no kernel on this machine
        tried.extend(cases)
        return [([], [], "no GPU kernel ran") for _ in cases]

    monkeypatch.setattr(bench, "_kernels_of", profiled)
    small, big = gemm_cases([32], [32], [32]), gemm_cases([20000], [20000], [20000])
    with Store(tmp_path / "r.db") as store:
        env = {"device": "cuda:0", "gpu_name": "NVIDIA H200", "cuda_version": "13.0", "memory_bytes": 2 * 10**9}
        bench.kernel_census([*small, *big], store=store, device="cuda", env=env, progress=False)
        rows = {row["metrics"]["case"]: row for row in store.rows(bench="kernels")}
    assert tried == small
    assert rows[big[0].key]["error"] == "needs 2.4 GB, the device has 2.0 GB"


def test_an_attention_call_past_the_devices_memory_is_refused_by_its_tensors(capsys, tmp_path, built):
    # q, k, v and the output of 4096 × 64 heads of 128 over 1,048,576 tokens: 4.4 TB; with the gradients twice.
    fwd, bwd = attention_cases(batches=[4096], heads=[64], kv_heads=[64], head_dims=[128], seqs=[1 << 20])
    assert bench.footprint(fwd) == 4 * 4096 * 64 * 128 * (1 << 20) * 2 and bench.footprint(bwd) == 2 * bench.footprint(fwd)
    code, out, err = run(capsys, "bench", "attention", "--batch", "4096", "--heads", "64", "--head-dim", "128",
                         "--seq", str(1 << 20), "--db", str(tmp_path / "r.db"), *FAST)
    assert code == 2 and out == "" and err.count("\n") == 1 and built == [], err
    assert "fits the memory of the CPU" in err and "for its tensors" in err, err
