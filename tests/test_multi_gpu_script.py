"""benchmarks/multi_gpu.py end to end on the CPU (gloo, tiny shapes): the multi-GPU run's smoke test."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def test_the_multi_gpu_benchmark_runs_on_the_cpu(tmp_path):
    pytest.importorskip("torch")
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("torch.distributed with gloo is not available")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "multi_gpu.py"), "--device", "cpu", "--quick",
                           "--out", str(tmp_path)], check=False, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "multi_gpu.json").read_text())
    assert (tmp_path / "topology.txt").exists() and result["gpus"] == 2
    assert {r["op"] for r in result["comm"]} == {"all_reduce", "all_gather", "reduce_scatter"}
    assert {(r["model"], r["kind"]) for r in result["dp"]} == {(m, k) for m in ("tiny-a", "tiny-b", "tiny-c")
                                                               for k in ("ddp", "fsdp")}
    assert all(r["step_ms"] > 0 and r["predicted"]["total_ms"] > 0 for r in result["dp"])
    configs = {(r["model"], r["stages"], r["micro_batches"], r["virtual"]) for r in result["pp"]}
    assert configs == {(m, 2, k, v) for m in ("tiny-a", "tiny-c") for k in (2, 4) for v in (1, 2)}
    for r in result["pp"]:
        assert set(r["idle_slots"]) == {r["formula_idle_slots"]}  # counted from the run's messages
        assert r["predicted"]["bubble_ms"] > 0 and r["step_ms"] >= max(r["busy_ms"])
    assert "pipeline" in done.stdout and "predicted" in done.stdout
