"""shapewise.store: schema, environment fingerprints, the resume keys, durability across an
interrupt or a crash, exports read back, and the errors a bad file gives."""

from __future__ import annotations

import csv
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from shapewise.errors import ShapewiseError
from shapewise.measure import Timing
from shapewise.store import Store, case_key, default_path

SRC = Path(__file__).resolve().parents[1] / "src"

ENV = {
    "timestamp_utc": "2025-01-01T00:00:00+00:00",
    "python_version": "3.11.7",
    "platform": "Linux-x86_64",
    "torch_version": "2.5.1+cu124",
    "device": "cuda:0",
    "gpu_name": "NVIDIA H200",
    "compute_capability": "9.0",
    "driver_version": "550.54.15",
    "cuda_version": "12.4",
    "cublas_version": "12.4.5",
    "cudnn_version": 90100,
    "sm_clock_mhz": 1980.0,
    "temperature_c": 35.0,
}

CPU_ENV = {"timestamp_utc": "2025-01-01T00:00:00+00:00", "torch_version": None, "device": "cpu",
           "processor": "AMD EPYC 9654", "cpu_count": 16}


def timing(*samples):
    return Timing(samples_ms=samples or (1.0, 1.1, 1.2, 1.3, 1.5))


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "results.db") as s:
        yield s


# ---- schema ---------------------------------------------------------------------------------

def test_schema_created_and_reopened(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "dir" / "results.db"  # the default store's folders are made on open
    monkeypatch.setenv("SHAPEWISE_DB", str(path))
    with Store(path) as s:
        env_id = s.environment_id(ENV)
        s.record(env_id=env_id, bench="gemm", key="a", params={"M": 1}, timing=timing())
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"environments", "results"} <= tables
    conn.close()
    with Store(path) as s:  # reopening keeps the rows and does not recreate the schema
        assert s.environment_id(ENV) == env_id
        assert s.done_keys(env_id, "gemm") == {"a"}


def test_default_path_honours_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("SHAPEWISE_DB", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_path() == tmp_path / "home" / ".cache" / "shapewise" / "results.db"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "xdg" / "shapewise" / "results.db"
    monkeypatch.setenv("SHAPEWISE_DB", str(tmp_path / "explicit.db"))
    assert default_path() == tmp_path / "explicit.db"
    assert not (tmp_path / "xdg").exists()  # nothing created until a store is opened
    with Store() as s:
        assert s.path == tmp_path / "explicit.db"
    assert (tmp_path / "explicit.db").exists()


# ---- environments ---------------------------------------------------------------------------

def test_environment_fingerprint(store):
    env_id = store.environment_id(ENV)
    assert store.environment_id(dict(ENV)) == env_id
    drifted = dict(ENV, sm_clock_mhz=1755.0, temperature_c=60.0, timestamp_utc="2025-06-01T12:00:00+00:00")
    assert store.environment_id(drifted) == env_id
    assert store.environment_id(dict(ENV, driver_version="560.35.03")) != env_id
    assert store.environment_id(dict(ENV, cublas_version="12.6.4")) != env_id
    assert store.summary()["environments"] == 3


def test_cpu_environment_uses_processor(store):
    env_id = store.environment_id(CPU_ENV)
    store.record(env_id=env_id, bench="gemm", key="k", params={}, timing=timing())
    assert store.rows()[0]["gpu_name"] == "AMD EPYC 9654"
    assert store.environment_id(dict(CPU_ENV, processor="Intel Xeon")) != env_id


# ---- results --------------------------------------------------------------------------------

def test_case_key_is_canonical():
    assert case_key({"M": 4096, "N": 1024, "dtype": "bf16"}) == case_key({"dtype": "bf16", "N": 1024, "M": 4096})
    assert case_key({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    with pytest.raises(ShapewiseError):
        case_key({"x": object()})


def test_record_done_and_failed_keys(store):
    env_id = store.environment_id(ENV)
    other_env = store.environment_id(dict(ENV, driver_version="1"))
    store.record(env_id=env_id, bench="gemm", key="ok1", params={"M": 1}, timing=timing())
    store.record(env_id=env_id, bench="gemm", key="ok2", params={"M": 2}, timing=timing())
    store.record(env_id=env_id, bench="gemm", key="bad", params={"M": 3}, error="CUDA out of memory")
    store.record(env_id=env_id, bench="attn", key="ok1", params={"S": 1}, timing=timing())
    assert store.done_keys(env_id, "gemm") == {"ok1", "ok2"}
    assert store.failed_keys(env_id, "gemm") == {"bad"}
    assert store.done_keys(env_id, "attn") == {"ok1"}
    assert store.done_keys(other_env, "gemm") == set()
    assert store.summary()["benches"] == {"attn": {"ok": 1, "failed": 0}, "gemm": {"ok": 2, "failed": 1}}


def test_record_replaces_same_key(store):
    env_id = store.environment_id(ENV)
    store.record(env_id=env_id, bench="gemm", key="k", params={"M": 1}, error="boom")
    store.record(env_id=env_id, bench="gemm", key="k", params={"M": 1}, timing=timing(2.0, 2.0, 2.0))
    rows = store.rows()
    assert len(rows) == 1
    assert rows[0]["error"] is None and rows[0]["median_ms"] == 2.0
    assert store.done_keys(env_id, "gemm") == {"k"} and store.failed_keys(env_id, "gemm") == set()


def test_record_unknown_env_id(store):
    with pytest.raises(ShapewiseError, match="env_id"):
        store.record(env_id=99, bench="gemm", key="k", params={}, timing=timing())


def test_rows_decode_and_derive(store):
    env_id = store.environment_id(ENV)
    t = timing(1.0, 2.0, 3.0, 4.0, 5.0)
    params = {"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16"}
    store.record(env_id=env_id, bench="gemm", key=case_key(params), params=params, timing=t,
                 flops=2e12, bytes=3e9, metrics={"max_abs_err": 0.01, "kernel": "sm90_xmma"})
    store.record(env_id=env_id, bench="gemm", key="failed", params={"M": 1}, error="OOM")
    ok, failed = store.rows()
    assert ok["params"] == params and list(ok["params"]) == list(params)  # order kept
    assert ok["metrics"] == {"max_abs_err": 0.01, "kernel": "sm90_xmma"}
    assert ok["samples_ms"] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert (ok["median_ms"], ok["q25_ms"], ok["q75_ms"], ok["iqr_ms"], ok["num_reps"]) == \
        (t.median_ms, t.q25_ms, t.q75_ms, t.iqr_ms, 5)
    assert ok["tflops"] == pytest.approx(2e12 / 3e-3 / 1e12)
    assert ok["gbps"] == pytest.approx(3e9 / 3e-3 / 1e9)
    assert (ok["gpu_name"], ok["driver"], ok["torch"], ok["cuda"], ok["cublas"]) == \
        ("NVIDIA H200", "550.54.15", "2.5.1+cu124", "12.4", "12.4.5")
    assert failed["error"] == "OOM" and failed["median_ms"] is None and failed["samples_ms"] is None
    assert failed["metrics"] is None and failed["tflops"] is None
    assert [r["key"] for r in store.rows(include_errors=False)] == [ok["key"]]
    assert store.rows(bench="attn") == []
    assert len(store.rows(env_id=env_id)) == 2


# ---- export ---------------------------------------------------------------------------------

def _fill(store):
    env_id = store.environment_id(ENV)
    store.record(env_id=env_id, bench="gemm", key="a", params={"M": 128, "dtype": "bf16"},
                 timing=timing(0.1, 0.2, 0.3), flops=1e9, bytes=1e6, metrics={"x": 1})
    store.record(env_id=env_id, bench="gemm", key="b", params={"M": 256, "trans": True, "key": "clash"},
                 error="bad shape")
    store.record(env_id=env_id, bench="attn", key="c", params={"S": 1024}, timing=timing(1 / 3))
    return env_id


def test_export_csv_round_trip(store, tmp_path):
    _fill(store)
    out = tmp_path / "out.csv"
    assert store.export(out, fmt="csv") == 3
    with open(out, newline="") as f:
        read = list(csv.DictReader(f))
    header = list(read[0])
    assert header[:2] == ["bench", "key"]
    assert header[2:7] == ["p_M", "p_dtype", "p_trans", "p_key", "p_S"]  # first-appearance order
    assert header[7:] == ["median_ms", "q25_ms", "q75_ms", "iqr_ms", "num_reps", "flops", "bytes", "tflops", "gbps", "error",
                          "gpu_name", "driver", "torch", "cuda", "cublas", "created_utc"]
    for got, want in zip(read, store.rows()):
        assert (got["bench"], got["key"]) == (want["bench"], want["key"])
        for col in ("median_ms", "q25_ms", "q75_ms", "iqr_ms", "tflops", "gbps"):
            assert got[col] == ("" if want[col] is None else repr(want[col]))
            if want[col] is not None:
                assert float(got[col]) == want[col]  # exact: floats are written with repr()
        assert got["error"] == (want["error"] or "")
        assert got["gpu_name"] == "NVIDIA H200" and got["created_utc"] == want["created_utc"]
    assert (read[0]["p_M"], read[0]["p_dtype"], read[0]["p_trans"]) == ("128", "bf16", "")
    assert (read[1]["p_trans"], read[1]["p_key"], read[1]["key"]) == ("true", "clash", "b")
    assert read[2]["median_ms"] == repr(1 / 3)
    assert store.export(tmp_path / "attn.csv", bench="attn") == 1


def test_export_json_round_trip(store, tmp_path):
    _fill(store)
    out = tmp_path / "out.json"
    assert store.export(out, fmt="json", bench="gemm") == 2
    read = json.loads(out.read_text())
    assert read == store.rows(bench="gemm")
    assert read[0]["samples_ms"] == [0.1, 0.2, 0.3] and read[0]["metrics"] == {"x": 1}


def test_export_errors(store, tmp_path):
    _fill(store)
    with pytest.raises(ShapewiseError, match="format"):
        store.export(tmp_path / "out.xlsx", fmt="xlsx")
    with pytest.raises(ShapewiseError, match="cannot write"):
        store.export(tmp_path / "missing" / "out.csv")


# ---- durability -----------------------------------------------------------------------------

def test_interrupt_keeps_recorded_rows(tmp_path):
    path = tmp_path / "results.db"
    recorded = []
    with pytest.raises(KeyboardInterrupt):
        with Store(path) as s:
            env_id = s.environment_id(ENV)
            for i in range(20):
                if i == 12:
                    raise KeyboardInterrupt
                s.record(env_id=env_id, bench="gemm", key=f"k{i}", params={"i": i}, timing=timing())
                recorded.append(f"k{i}")
    with Store(path) as s:
        assert s.done_keys(s.environment_id(ENV), "gemm") == set(recorded)


def test_rows_durable_without_close(tmp_path):
    """Each record commits: another connection sees it while the writer is still open, and a
    process killed without closing the store leaves its rows behind."""
    path = tmp_path / "results.db"
    writer = Store(path)
    env_id = writer.environment_id(ENV)
    writer.record(env_id=env_id, bench="gemm", key="k0", params={}, timing=timing())
    with Store(path) as reader:
        assert reader.done_keys(env_id, "gemm") == {"k0"}
    writer.close()

    crashed = tmp_path / "crashed.db"
    script = (
        "import os, sys; from shapewise.store import Store; from shapewise.measure import Timing\n"
        f"s = Store({str(crashed)!r}); e = s.environment_id({ENV!r})\n"
        "for i in range(5): s.record(env_id=e, bench='gemm', key=f'k{i}', params={}, timing=Timing((1.0,)))\n"
        "os._exit(1)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], env={"PYTHONPATH": str(SRC)},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    with Store(crashed) as s:
        assert s.done_keys(s.environment_id(ENV), "gemm") == {f"k{i}" for i in range(5)}


# ---- bad files ------------------------------------------------------------------------------

def test_corrupt_file(tmp_path):
    path = tmp_path / "results.db"
    path.write_bytes(b"this is not a database\x00\xff" * 100)
    with pytest.raises(ShapewiseError, match="results.db"):
        Store(path)


def test_future_schema_version(tmp_path):
    path = tmp_path / "results.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    with pytest.raises(ShapewiseError, match="version 7"):
        Store(path)


def test_foreign_sqlite_file(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE things (x)")
    conn.commit()
    conn.close()
    with pytest.raises(ShapewiseError, match="not a shapewise results store"):
        Store(path)


def test_uncreatable_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ShapewiseError, match="is a file, not a folder"):
        Store(blocker / "sub" / "results.db")
