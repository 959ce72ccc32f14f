"""Items a review noted and left alone, mended:

1. The results store: a store's own export read back into it no longer doubles its rows (an imported row
   that is the same measurement as a stored one, by case, machine and stack as an export names them,
   numbers and created_utc, is not stored twice), and the JSON export's rows all carry their fields in
   the CSV's order, params in the p_ columns' order.
2. `search --json`: each shape's row carries its norm, bias and tied embeddings (search fixes them, and
   ModelShape's defaults differ), so that a row builds its shape again.
3. A serving step's memory (check --mode decode or prefill, and the report) no longer prints "activations 0.0"
   and "loss 0.0": a serving step has no loss, so its part of the last positions' logits is named logits, its
   gradients and optimizer state are left out of --json's parts as of the text, and a part under 0.05 GiB
   prints as <0.1, not as a zero that reads as none.
4. Code written twice, now once: a collective's size is ops.size_text's (bench comm's own copy gone); a step's
   TFLOP is rules.figure's (report.tflop_text picks the number and where one decimal begins); validate's
   --db folder is refused by open_store alone, as calibrate's by the check open_store makes
   (cli.common.check_store_folder); verify's head ops are TIMED_HEAD_OPS, what its head timing covers, no
   second meaning of ops.HEAD_OPS.
"""

from __future__ import annotations

import csv
import json

import pytest

from helpers import run
from shapewise.exports import CSV_HEAD, CSV_TAIL, PARAM_PREFIX
from shapewise.measure import Timing
from shapewise.memory import GIB, Memory, estimate
from shapewise.presets import get_model
from shapewise.shapes import ModelShape, Workload
from shapewise.store import Store, case_key

H200 = {"device": "cuda:0", "gpu_name": "NVIDIA H200", "driver_version": "550.54.15", "torch_version": "2.5.1+cu124",
        "cuda_version": "12.4", "cublas_version": "12.4.5"}


# ---- 1. the results store ----------------------------------------------------------------------------

@pytest.fixture
def db(tmp_path):
    """A store of a GEMM (its parameters given in another order than the next one's), an op and a failed case."""
    path = tmp_path / "r.db"
    with Store(path) as store:
        env = store.environment_id(H200)
        for bench, params, samples, error in (
                ("gemm", {"n": 64, "m": 128, "k": 32}, (0.01, 0.012, 0.02), None),
                ("gemm", {"m": 256, "n": 64, "k": 32}, (0.02, 0.021), None),
                ("op", {"label": "attn/qkv", "m": 8}, (0.005,), None),
                ("gemm", {"m": 1 << 20, "n": 64, "k": 32}, (), "out of memory")):
            store.record(env_id=env, bench=bench, key=case_key({"bench": bench, **params}), params=params,
                         timing=Timing(samples_ms=samples) if samples else None, flops=1e6 if samples else None,
                         error=error)
    return path


@pytest.mark.parametrize("name", ["rows.csv", "rows.json", "rows.csv.gz"])
def test_a_stores_own_export_read_back_changes_nothing(capsys, tmp_path, db, name):
    with Store(db, read_only=True) as store:
        before, summary = store.rows(), store.summary()
    assert run(capsys, "results", "--db", str(db), "--export", str(tmp_path / name))[0] == 0
    code, out, _ = run(capsys, "results", "--db", str(db), "--import", str(tmp_path / name))
    assert code == 0 and "0 new, 4 already there (4 the same measurements, not stored twice)" in out
    with Store(db, read_only=True) as store:
        assert store.rows() == before and store.summary() == summary  # no rows, nor an empty environment, added


def test_a_case_measured_again_is_imported_beside_the_local_one(capsys, tmp_path, db):
    """Identical means the same measurement: a row with another time or created_utc is a measurement of its own."""
    out = tmp_path / "rows.json"
    assert run(capsys, "results", "--db", str(db), "--export", str(out))[0] == 0
    rows = json.loads(out.read_text())
    rows[0]["created_utc"] = "2030-01-01T00:00:00+00:00"
    out.write_text(json.dumps(rows))
    code, said, _ = run(capsys, "results", "--db", str(db), "--import", str(out))
    assert code == 0 and "1 new, 3 already there (3 the same measurements, not stored twice)" in said
    with Store(db, read_only=True) as store:
        assert len(store.rows()) == 5


def test_the_json_export_keeps_the_csvs_column_order_in_every_row(capsys, tmp_path, db):
    for name in ("rows.csv", "rows.json"):
        assert run(capsys, "results", "--db", str(db), "--export", str(tmp_path / name))[0] == 0
    with open(tmp_path / "rows.csv", newline="", encoding="utf-8") as f:
        header = next(csv.reader(f))
    params = [c[len(PARAM_PREFIX):] for c in header if c.startswith(PARAM_PREFIX)]
    assert header == [*CSV_HEAD, *(PARAM_PREFIX + p for p in params), *CSV_TAIL]
    rows = json.loads((tmp_path / "rows.json").read_text())
    for row in rows:
        assert list(row)[:len(CSV_HEAD) + 1 + len(CSV_TAIL)] == [*CSV_HEAD, "params", *CSV_TAIL]
        assert list(row["params"]) == [p for p in params if p in row["params"]]
    assert {tuple(row) for row in rows} == {tuple(rows[0])}  # one order for every row


# ---- 2. search --json --------------------------------------------------------------------------------

def test_a_search_json_row_builds_its_shape_again(capsys):
    code, out, _ = run(capsys, "search", "--params", "1e9", "--top", "2", "--json")
    assert code == 0
    result = json.loads(out)
    for row in (*result["pareto"], *result["top"]):
        assert (row["norm"], row["bias"], row["tied_embeddings"]) == ("rmsnorm", False, False)
        shape = ModelShape(row["name"], hidden=row["hidden"], num_layers=row["layers"], num_heads=row["heads"],
                           num_kv_heads=row["kv_heads"], head_dim=row["head_dim"], ffn=row["ffn"], vocab=row["vocab"],
                           mlp=row["mlp"], norm=row["norm"], bias=row["bias"], tied_embeddings=row["tied_embeddings"])
        assert shape.params == row["params"]


# ---- 3. a serving step's memory ----------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_a_serving_steps_memory_names_no_loss_and_prints_no_zero(capsys, mode):
    code, out, err = run(capsys, "check", "llama3-8b", "--mode", mode, "--batch", "1", "--seq", "4096")
    assert code == 0, err
    line = next(t for t in out.splitlines() if t.startswith("memory per GPU"))
    assert " 0.0," not in line and " 0.0 " not in line and "loss" not in line and "grads" not in line, line
    assert "logits <0.1" in line and "kv cache 0.5" in line, line
    code, out, err = run(capsys, "check", "llama3-8b", "--mode", mode, "--batch", "1", "--seq", "4096", "--json")
    memory = json.loads(out)["memory"]
    assert set(memory["parts_bytes"]) == {"weights", "activations", "logits", "kv_cache", "allocator"}
    assert sum(memory["parts_bytes"].values()) == pytest.approx(memory["per_gpu_bytes"], abs=5)


def test_a_training_steps_memory_keeps_its_parts():
    shape = get_model("llama3-8b")
    memory = estimate(shape, Workload(batch=1, seq=4096))
    assert memory.parts() == memory.as_dict() and "loss" in memory.parts("train")
    assert Memory(weights=GIB, loss=GIB / 100).text() == "1.0 GiB (weights 1.0, loss <0.1 GiB)"


# ---- 4. code written twice ---------------------------------------------------------------------------

def test_a_collectives_size_is_said_by_ops_size_text(capsys, monkeypatch, tmp_path):
    from shapewise import distributed
    from shapewise.cli import bench as cli_bench
    from shapewise.ops import size_text

    assert not hasattr(cli_bench, "_bytes_text")
    rows = [{"op": "all_reduce", "bytes": n, "median_ms": 0.5, "algbw_gbs": 1.0, "busbw_gbs": 2.0, "error": None}
            for n in (4096, 3 * 2**19, 2 * 2**30)]
    monkeypatch.setattr(distributed, "bench_comm", lambda *a, **k: (0, rows))
    code, out, err = run(capsys, "bench", "comm", "--sizes", "4K", "1536K", "2G", "--ops", "all_reduce", "--device",
                         "cpu", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert all(f" {size} " in out for size in ("4 KiB", "1.5 MiB", "2 GiB")), out
    # an op's row keeps its own words: MiB past a GiB, one decimal (stored cases are keyed by them)
    assert (size_text(32 * 2**10), size_text(3 * 2**30)) == ("32.0 KiB", "3,072.0 MiB")


def test_a_steps_tflop_is_said_by_rules_figure():
    from types import SimpleNamespace

    from shapewise.report import tflop_text
    from shapewise.rules import figure

    for flops, said in ((7.23e12, "7.2"), (1.91e10, "0.0191"), (123.45e12, "123.5")):
        assert tflop_text(SimpleNamespace(flops=flops)) == figure(flops / 1e12, one_decimal_from=1) == said
    assert figure(7.23) == "7.23" and figure(12.34) == "12.3"  # a finding's words, as before


def test_validates_db_folder_is_refused_by_open_store_alone(capsys, monkeypatch, tmp_path):
    from shapewise.cli import calibrate as cli_calibrate
    from shapewise.cli.common import open_store

    opened = []
    monkeypatch.setattr(cli_calibrate, "open_store", lambda args: opened.append(args.db) or open_store(args))
    db = str(tmp_path / "missing" / "r.db")
    code, out, err = run(capsys, "validate", "--db", db, "--device", "cpu", "--gpu", "h200")
    assert code == 2 and opened == [db]
    assert err.strip().splitlines() == [f"shapewise: error: the folder {tmp_path / 'missing'} does not exist: create "
                                        "it, or add --mkdir to have it made"]
    assert not (tmp_path / "missing").exists()


def test_verifys_head_ops_are_named_for_what_its_head_timing_covers():
    import importlib

    from shapewise import ops

    verify = importlib.import_module("shapewise.verify")  # the package's `verify` is the function
    assert not hasattr(verify, "HEAD_OPS")
    assert set(verify.TIMED_HEAD_OPS) < set(ops.HEAD_OPS)
