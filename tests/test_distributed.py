"""Sweeps and collectives across ranks started by torchrun, with the gloo backend on the CPU."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shapewise.cli import main
from shapewise.store import Store

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

GEMMS = ["bench", "gemm", "--device", "cpu", "-m", "64", "128", "-n", "64", "-k", "64:256:64",
         "--warmup-ms", "1", "--budget-ms", "2"]


def torchrun(*argv, ranks=2):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
               "-m", "shapewise", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=240)


def keys(db):
    with Store(db) as store:
        return {(row["bench"], row["key"]) for row in store.rows() if row["error"] is None}


def test_a_two_rank_sweep_stores_what_one_rank_does(tmp_path, capsys):
    two, one = str(tmp_path / "two.db"), str(tmp_path / "one.db")
    done = torchrun(*GEMMS, "--db", two)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "8 measured, 0 already in the store, 0 failed, on 2 ranks" in done.stdout
    assert main([*GEMMS, "--db", one]) == 0
    capsys.readouterr()
    assert keys(two) == keys(one) and len(keys(two)) == 8
    again = torchrun(*GEMMS, "--db", two)  # resumes: nothing left to measure
    assert again.returncode == 0 and "0 measured, 8 already in the store" in again.stdout


def test_collectives_on_two_ranks(tmp_path):
    db = str(tmp_path / "comm.db")
    done = torchrun("bench", "comm", "--device", "cpu", "--sizes", "64K:256K", "--iters", "3", "--db", db, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout[done.stdout.index("["):])
    assert {(r["op"], r["bytes"]) for r in rows} == {(op, size) for op in ("all_reduce", "all_gather", "reduce_scatter")
                                                     for size in (65536, 131072, 262144)}
    for r in rows:
        factor = 2 if r["op"] == "all_reduce" else 1
        assert r["busbw_gbs"] == pytest.approx(r["algbw_gbs"] * factor / 2)  # (n-1)/n with n = 2
    with Store(db) as store:
        assert len(store.rows(bench="comm")) == 9


def test_a_size_one_rank_cannot_hold_is_recorded_failed_on_every_rank(tmp_path):
    """A buffer that fails on one rank only (here rank 1's torch.empty refuses 256 KiB) must not leave the
    other rank waiting in a collective: both skip the size, rank 0 stores it failed, the run goes on."""
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(
        "import os\nif os.environ.get('RANK') == '1':\n    import torch\n    empty = torch.empty\n"
        "    def refuse(*size, **kw):\n"
        "        n = size[0] if size and isinstance(size[0], int) else 0\n"
        "        if n >= 65536:\n            raise RuntimeError('cannot allocate (a test)')\n"
        "        return empty(*size, **kw)\n    torch.empty = refuse\n")
    db = str(tmp_path / "comm.db")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "shapewise",
               "bench", "comm", "--device", "cpu", "--sizes", "64K", "256K", "--ops", "all_reduce", "--iters", "3",
               "--db", db, "--json"]
    env = {**__import__("os").environ, "PYTHONPATH": f"{tmp_path / 'hook'}:{Path(__file__).parents[1] / 'src'}"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout[done.stdout.index("["):])
    assert [r["bytes"] for r in rows if "error" not in r] == [65536]
    assert [r["bytes"] for r in rows if r.get("error")] == [262144]
    with Store(db) as store:
        assert [r["error"] is not None for r in store.rows(bench="comm")].count(True) == 1


def test_collectives_need_several_ranks(capsys, tmp_path):
    try:
        code = main(["bench", "comm", "--device", "cpu", "--db", str(tmp_path / "x.db")])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2 and "torchrun" in capsys.readouterr().err


def test_link_calibration_fits_into_the_profile(tmp_path):
    out = tmp_path / "h200.json"
    done = torchrun("calibrate", "--comm", "--quick", "--device", "cpu", "--gpu", "h200", "--no-install",
                    "--out", str(out), "--db", str(tmp_path / "c.db"))
    assert done.returncode == 0, done.stderr[-2000:]
    from shapewise.profile import load

    profile = load(out)
    assert profile.fit["comm_ranks"] == 2 and profile.params.comm_bandwidth > 0 and "the link reaches" in done.stdout


def test_fit_comm_recovers_a_known_link():
    import dataclasses

    from shapewise.cost import SPEC, predict_ops
    from shapewise.fit import fit_comm
    from shapewise.hardware import get_gpu
    from shapewise.ops import COMM, Op
    from shapewise.profile import CostModel

    gpu = get_gpu("h200")
    truth = dataclasses.replace(SPEC, comm_bandwidth=0.7, comm_latency_ms=0.02)
    rows = []
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        for size in (2**20, 2**24, 2**28, 2**30):
            collective = Op("tp/x", "fwd", COMM, 1, 0, size, m=1, n=1, k=8, family=op)
            rows.append(dict(op=op, bytes=size, world=8,
                             median_ms=predict_ops([collective], gpu=CostModel(gpu, truth), dtype="bf16")[0].time_ms))
    fitted = fit_comm(rows, gpu=gpu, params=SPEC)
    assert fitted.comm_bandwidth == pytest.approx(0.7, rel=1e-3) and fitted.comm_latency_ms == pytest.approx(0.02, abs=1e-4)


@pytest.mark.parametrize("ranks", [2, 4])  # at t=4 the 2-kv-head models replicate theirs, as the 1-kv-head one does at 2
def test_tensor_parallel_layers_compute_the_full_layer(ranks):
    script = str(Path(__file__).parent / "tp_layer_check.py")
    done = subprocess.run([sys.executable, "-W", "ignore", "-m", "torch.distributed.run", "--standalone",
                           f"--nproc-per-node={ranks}", script], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "errors" in done.stdout


@pytest.mark.parametrize("kv_heads", [2, 1])  # 1: each rank keeps a copy of the one kv head
def test_a_tensor_parallel_layer_is_benchmarked_against_its_prediction(tmp_path, kv_heads):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "num_key_value_heads": kv_heads, "intermediate_size": 128,
                                  "vocab_size": 256, "hidden_act": "silu"}))
    done = torchrun("bench", "layer", "--config", str(config), "--tp", "2", "--batch", "1", "--seq", "32",
                    "--device", "cpu", "--gpu", "h200", "--db", str(tmp_path / "l.db"), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout[done.stdout.index("["):])
    assert {r["pass"] for r in rows} == {"fwdbwd", "fwd"} and all(r["measured_ms"] > 0 and r["predicted_ms"] > 0
                                                                   for r in rows)
