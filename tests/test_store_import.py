"""Store.import_csv: a CSV written by Store.export read back into a store (results shared as CSV)."""

from __future__ import annotations

import csv
import json

import pytest

from shapewise.errors import ShapewiseError
from shapewise.measure import Timing
from shapewise.store import Store, case_key

H200 = {"device": "cuda:0", "gpu_name": "NVIDIA H200", "driver_version": "550.54.15", "torch_version": "2.5.1+cu124",
        "cuda_version": "12.4", "cublas_version": "12.4.5", "cudnn_version": 90100, "sm_clock_mhz": 1980.0}
H100 = {**H200, "gpu_name": "NVIDIA H100 80GB HBM3"}
CPU = {"device": "cpu", "processor": "AMD EPYC 9654", "torch_version": "2.13.0+cpu"}

# Compared between the original rows and the imported ones: everything a CSV carries.
CARRIED = ("bench", "key", "params", "median_ms", "q25_ms", "q75_ms", "iqr_ms", "num_reps", "flops", "bytes", "tflops",
           "gbps", "error", "gpu_name", "driver", "torch", "cuda", "cublas", "created_utc")


def _record(store, env, bench, params, *, samples=(1.0, 1.1, 1.2, 1.3, 1.5), mode=None, **kw):
    key = case_key({"bench": bench, **params, **(mode or {})})
    store.record(env_id=store.environment_id(env), bench=bench, key=key, params=params,
                 timing=Timing(samples_ms=samples) if samples else None, **kw)


@pytest.fixture
def source(tmp_path):
    """A store with GEMMs on two GPUs, a CUDA-graph timing, a failed case, a CPU case, an op case
    with None and bool parameters and one whose text needs quoting in a CSV."""
    with Store(tmp_path / "source.db") as s:
        _record(s, H200, "gemm", {"m": 128, "n": 256, "k": 64, "layout": "nt", "dtype": "bf16"}, flops=2 * 128 * 256 * 64,
                bytes=1e5, metrics={"x": 1})
        _record(s, H200, "gemm", {"m": 128, "n": 256, "k": 64, "layout": "nt", "dtype": "bf16"}, mode={"cuda_graph": True},
                samples=(0.5, 0.6, 0.7), flops=2 * 128 * 256 * 64)
        _record(s, H100, "gemm", {"m": 128, "n": 256, "k": 64, "layout": "nt", "dtype": "bf16"}, samples=(2.0, 2.5))
        _record(s, H200, "gemm", {"m": 1 << 20, "n": 1 << 20, "k": 1 << 20, "layout": "nn", "dtype": "fp8"}, samples=(),
                error="out of memory")
        _record(s, CPU, "op", {"label": "attn/qkv", "m": 8, "n": 24, "k": 8, "batch": 1, "layout": "nt", "causal": False,
                               "groups": 1, "family": "", "pass_": "fwd", "dtype": "fp32", "shape": "8×24×8",
                               "kv": None}, samples=(0.01, 0.02, 0.03))
        s.record(env_id=s.environment_id(H200), bench="op", key=case_key({"bench": "op", "name": "x|y, \"z\"", "n": 3}),
                 params={"name": "x|y, \"z\"", "n": 3}, timing=Timing(samples_ms=(1.0,)))
        yield s


def _export(store, path):
    store.export(path, fmt="csv")
    return path


def test_round_trip_keeps_everything_a_csv_carries(source, tmp_path):
    out = _export(source, tmp_path / "results.csv")
    with Store(tmp_path / "target.db") as target:
        assert target.import_csv(out) == 6
        got, want = target.rows(), source.rows()
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert {c: g[c] for c in CARRIED} == {c: w[c] for c in CARRIED}, w["key"]
            # No samples in a CSV: none claimed for a timed row, None for a failed one as record() leaves it
            assert g["samples_ms"] == ([] if w["median_ms"] is not None else None)
            assert g["metrics"] is None
        graph = [g for g in got if "cuda_graph" in g["key"]]
        assert graph and "cuda_graph" not in graph[0]["params"]  # a mode flag of the key, not a parameter
        assert next(g["params"] for g in got if g["bench"] == "op")["kv"] is None
        assert next(g["params"] for g in got if "x|y" in g["key"]) == {"name": "x|y, \"z\"", "n": 3}


def test_a_gzipped_export_imports_as_the_csv_does_and_a_broken_one_imports_nothing(source, tmp_path):
    import gzip

    out = _export(source, tmp_path / "results.csv")
    packed = tmp_path / "results.csv.gz"
    packed.write_bytes(gzip.compress(out.read_bytes()))
    with Store(tmp_path / "plain.db") as plain, Store(tmp_path / "packed.db") as target:
        assert plain.import_csv(out) == target.import_csv(packed) == 6
        assert [{c: r[c] for c in CARRIED} for r in target.rows()] == [{c: r[c] for c in CARRIED} for r in plain.rows()]
        broken = tmp_path / "broken.csv.gz"
        broken.write_bytes(gzip.compress(out.read_bytes())[:-40])  # cut short: no gzip trailer
        not_gzip = tmp_path / "plain.csv.gz"
        not_gzip.write_bytes(out.read_bytes())
        for bad in (broken, not_gzip):
            with Store(tmp_path / f"{bad.stem}.db") as other:
                with pytest.raises(ShapewiseError, match="not a CSV export"):
                    other.import_csv(bad)
                assert other.rows() == []


def test_one_environment_per_stack_without_a_device(source, tmp_path):
    out = _export(source, tmp_path / "results.csv")
    with Store(tmp_path / "target.db") as target:
        target.import_csv(out)
        envs = target._conn.execute("SELECT device, gpu_name, driver, torch, cuda, cublas, env_json FROM environments").fetchall()
        assert sorted(e["gpu_name"] for e in envs) == ["AMD EPYC 9654", "NVIDIA H100 80GB HBM3", "NVIDIA H200"]
        assert all(e["device"] is None for e in envs)  # the CSV does not say which device
        assert all(json.loads(e["env_json"])["imported_from"] == str(out) for e in envs)
        h200 = next(e for e in envs if e["gpu_name"] == "NVIDIA H200")
        assert (h200["driver"], h200["torch"], h200["cuda"], h200["cublas"]) == ("550.54.15", "2.5.1+cu124", "12.4", "12.4.5")


def test_import_twice_changes_nothing_and_never_touches_local_resume_keys(source, tmp_path):
    out = _export(source, tmp_path / "results.csv")
    # Importing into the very store it came from: its rows are the same measurements, not stored twice, and
    # the local environment's done keys are the same as before.
    local = source.environment_id(H200)
    before = source.done_keys(local, "gemm")
    assert source.import_csv(out) == 6 and source.same_rows == 6
    assert source.done_keys(local, "gemm") == before
    assert len(source.rows()) == 6
    with Store(tmp_path / "target.db") as target:  # into another store: device-less environments, twice the same
        assert target.import_csv(out) == 6 and target.same_rows == 0
        rows = target.rows()
        assert target.import_csv(out) == 6 and target.same_rows == 6
        assert target.rows() == rows


def test_filtered_export_and_blank_lines(source, tmp_path):
    out = tmp_path / "gemm.csv"
    assert source.export(out, bench="gemm") == 4
    out.write_text(out.read_text(encoding="utf-8") + "\n\n", encoding="utf-8")
    with Store(tmp_path / "target.db") as target:
        assert target.import_csv(out) == 4
        assert target.summary()["benches"] == {"gemm": {"ok": 3, "failed": 1}}


def test_derived_rates_filled_in_when_missing(tmp_path):
    path = tmp_path / "hand.csv"
    header = ["bench", "key", "p_m", "median_ms", "q25_ms", "q75_ms", "iqr_ms", "num_reps", "flops", "bytes", "tflops",
              "gbps", "error", "gpu_name", "driver", "torch", "cuda", "cublas", "created_utc"]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerow(["gemm", case_key({"bench": "gemm", "m": 4}), "4", "2.0", "1.5", "2.5", "1.0", "10", "4e9", "2e6", "", "",
                    "", "NVIDIA H200", "", "", "", "", ""])
    with Store(tmp_path / "t.db") as target:
        assert target.import_csv(path) == 1
        row = target.rows()[0]
        assert row["params"] == {"m": 4} and row["tflops"] == pytest.approx(2.0) and row["gbps"] == pytest.approx(1.0)
        assert row["driver"] is None and row["created_utc"]  # empty cells: unknown; no date: the import's


def test_bad_files_import_nothing(source, tmp_path):
    target = Store(tmp_path / "target.db")
    with pytest.raises(ShapewiseError, match="cannot read"):
        target.import_csv(tmp_path / "missing.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ShapewiseError, match="empty"):
        target.import_csv(empty)
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ShapewiseError, match="not a CSV export.*median_ms"):
        target.import_csv(other)
    good = _export(source, tmp_path / "results.csv")
    lines = good.read_text(encoding="utf-8").splitlines()
    header = next(csv.reader([lines[0]]))
    cells = next(csv.reader([lines[-1]]))
    cells[header.index("median_ms")] = "fast"
    bad = tmp_path / "bad.csv"
    with open(bad, "w", newline="", encoding="utf-8") as f:
        f.write("\n".join(lines[:-1]) + "\n")
        csv.writer(f).writerow(cells)
    with pytest.raises(ShapewiseError, match=r"line 7: median_ms is 'fast'"):
        target.import_csv(bad)
    short = tmp_path / "short.csv"
    short.write_text(lines[0] + "\ngemm,k\n", encoding="utf-8")
    with pytest.raises(ShapewiseError, match="line 2: 2 cells"):
        target.import_csv(short)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00bench")
    with pytest.raises(ShapewiseError):
        target.import_csv(binary)
    assert target.rows() == []  # every failed import left the store as it was
    target.close()


def test_a_binary_file_to_import_is_refused_in_words(tmp_path):
    from shapewise.exports import read_export

    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00bench")
    with pytest.raises(ShapewiseError, match=r"not a text file \(not UTF-8\)$") as err:
        read_export(binary)
    assert "codec" not in str(err.value)
