"""The store's rows carry the device their environment measured on, and `validate --from-db` tells a CPU's
rows by it (not by a missing CUDA version); a store written before rows carried it reads the same."""

from __future__ import annotations

import json
import sqlite3

import pytest

from helpers import run
from shapewise.calibrate import measured_on_cpu
from shapewise.draws import validation_cases
from shapewise.measure import Timing
from shapewise.store import Store, case_key

# A GPU whose environment read no CUDA version (a ROCm build of torch reports none): still a GPU.
GPU_NO_CUDA = {"device": "cuda:0", "gpu_name": "NVIDIA H200", "torch_version": "2.11.0"}
CPU = {"device": "cpu", "processor": "AMD EPYC 9654", "torch_version": "2.11.0+cpu"}

# The schema as the first version of the store wrote it (user_version 1).
OLD_SCHEMA = """
CREATE TABLE environments (id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE, device TEXT, gpu_name TEXT,
    driver TEXT, torch TEXT, cuda TEXT, cublas TEXT, cudnn TEXT, first_seen_utc TEXT NOT NULL, env_json TEXT NOT NULL);
CREATE TABLE results (id INTEGER PRIMARY KEY, env_id INTEGER NOT NULL REFERENCES environments(id), bench TEXT NOT NULL,
    key TEXT NOT NULL, params_json TEXT NOT NULL, median_ms REAL, q25_ms REAL, q75_ms REAL, iqr_ms REAL,
    num_reps INTEGER, samples_json TEXT, flops REAL, bytes REAL, tflops REAL, gbps REAL, metrics_json TEXT,
    error TEXT NULL, created_utc TEXT NOT NULL, UNIQUE (env_id, bench, key));
"""


def _fill(path, env) -> str:
    """The quick default validation set, as if measured in `env`."""
    with Store(path) as store:
        env_id = store.environment_id(env)
        for case in validation_cases(quick=True, seed=2):
            store.record(env_id=env_id, bench=case.bench, key=case.key, params=case.params, flops=case.flops,
                         bytes=case.bytes, timing=Timing(samples_ms=(0.01, 0.011)))
    return str(path)


def test_rows_carry_their_environments_device(tmp_path):
    with Store(tmp_path / "r.db") as store:
        for env, m in ((GPU_NO_CUDA, 1), (CPU, 2)):
            params = {"m": m}
            store.record(env_id=store.environment_id(env), bench="gemm", key=case_key({"bench": "gemm", **params}),
                         params=params, timing=Timing((1.0,)))
        store.export(tmp_path / "rows.csv")
        assert [(r["params"]["m"], r["device"]) for r in store.rows()] == [(1, "cuda:0"), (2, "cpu")]
        assert [r["device"] for r in store._readable_rows(None)[0]] == ["cuda:0", "cpu"]
    with Store(tmp_path / "imported.db") as store:  # an export does not say the device: unknown, not guessed
        store.import_csv(tmp_path / "rows.csv")
        assert [r["device"] for r in store.rows()] == [None, None]


def test_a_cpus_rows_are_told_by_their_device_and_imported_ones_by_their_cuda_version():
    assert measured_on_cpu({"device": "cpu", "cuda": None})
    assert not measured_on_cpu({"device": "cuda:0", "cuda": None})
    assert measured_on_cpu({"device": None, "cuda": None})  # imported: a CPU records no CUDA version
    assert not measured_on_cpu({"device": None, "cuda": "13.0"})


def test_a_store_written_by_an_older_version_reads_with_its_devices(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(OLD_SCHEMA)
    conn.execute("PRAGMA user_version = 1")
    for env_id, env in ((1, GPU_NO_CUDA), (2, CPU)):
        conn.execute("INSERT INTO environments (id, fingerprint, device, gpu_name, torch, first_seen_utc, env_json) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)", (env_id, f"fp{env_id}", env["device"],
                                                      env.get("gpu_name", env.get("processor")), env["torch_version"],
                                                      "2026-01-01T00:00:00+00:00", json.dumps(env)))
        conn.execute("INSERT INTO results (env_id, bench, key, params_json, median_ms, created_utc) "
                     "VALUES (?, 'gemm', ?, '{}', 1.0, '2026-01-01T00:00:00+00:00')", (env_id, f"k{env_id}"))
    conn.commit()
    conn.close()
    for read_only in (True, False):
        with Store(path, read_only=read_only) as store:
            assert [r["device"] for r in store.rows()] == ["cuda:0", "cpu"]


def test_validate_from_the_store_takes_a_gpus_rows_without_a_cuda_version_as_the_gpus(tmp_path, capsys):
    db = _fill(tmp_path / "gpu.db", GPU_NO_CUDA)
    code, stdout, err = run(capsys, "validate", "--from-db", "--quick", "--db", db, "--gpu", "h200", "--json")
    assert code == 0 and "measured on the CPU" not in err, err
    assert json.loads(stdout)["measured_on"] == "NVIDIA H200"
    code, stdout, err = run(capsys, "validate", "--from-db", "--quick", "--db", db, "--json")  # no --gpu: the GPU's
    assert code == 0 and json.loads(stdout)["gpu"] == "h200", err


@pytest.mark.parametrize("imported", [False, True])
def test_validate_from_the_store_still_takes_a_cpus_rows_as_a_smoke_test(tmp_path, capsys, imported):
    db = _fill(tmp_path / "cpu.db", CPU)
    if imported:  # through an export, which lacks the device: told by the missing CUDA version
        with Store(db) as store:
            store.export(tmp_path / "rows.csv")
        db = str(tmp_path / "imported.db")
        with Store(db) as store:
            store.import_csv(tmp_path / "rows.csv")
            assert {r["device"] for r in store.rows()} == {None}
    code, stdout, err = run(capsys, "validate", "--from-db", "--quick", "--db", db, "--gpu", "h200", "--json")
    assert code == 0 and "measured on the CPU" in err and json.loads(stdout)["measured_on"] == "the CPU", err
