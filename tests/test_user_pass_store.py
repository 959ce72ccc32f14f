"""What a new user met with the results store: nonsense rows refused on import and found by --check,
damaged stores told apart (not a store, damaged beyond reading, damaged pages), measurements of
another device said when a figure or report leaves them out, JSON exports read back, and wording."""

from __future__ import annotations

import csv
import json
import sqlite3

import pytest

from helpers import run
from shapewise.measure import Timing
from shapewise.store import Store, case_key

CPU = {"device": "cpu", "processor": "AMD EPYC 9654", "torch_version": "2.13.0+cpu"}
H200 = {"device": "cuda:0", "gpu_name": "NVIDIA H200", "driver_version": "570.1", "torch_version": "2.11.0+cu130"}
GEMM = {"m": 256, "k": 256, "layout": "nn", "dtype": "bf16", "batch": 1}


def one_error(err: str) -> bool:
    return err.count("\n") == 1 and err.startswith("shapewise: error:") and "Traceback" not in err


def _gemms(store, env, ns=(64, 128, 192)):
    for n in ns:
        params = {**GEMM, "n": n}
        store.record(env_id=store.environment_id(env), bench="gemm", key=case_key({"bench": "gemm", **params}),
                     params=params, timing=Timing(samples_ms=(0.02, 0.021, 0.022)), flops=2 * 256 * n * 256,
                     bytes=2 * (256 * 256 + 256 * n + 256 * n))


@pytest.fixture
def export(tmp_path):
    """A CSV export of three CPU GEMMs: (path, header, rows of cells)."""
    with Store(tmp_path / "m.db") as store:
        _gemms(store, CPU)
        store.export(tmp_path / "m.csv")
    with open(tmp_path / "m.csv", newline="", encoding="utf-8") as f:
        lines = list(csv.reader(f))
    return tmp_path / "m.csv", lines[0], lines[1:]


def _edited(tmp_path, export, **cells) -> str:
    """The export with the second row's cells changed: a hand-edited file."""
    _, header, rows = export
    rows = [list(r) for r in rows]
    for column, value in cells.items():
        rows[1][header.index(column)] = value
    path = tmp_path / "edited.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])
    return str(path)


@pytest.mark.parametrize("cells, says", [
    ({"median_ms": "-1"}, "median_ms is -1: a time must be positive"),
    ({"median_ms": "0"}, "median_ms is 0"),
    ({"median_ms": "nan"}, "median_ms is 'nan', not a finite number"),
    ({"median_ms": "inf"}, "median_ms is 'inf', not a finite number"),
    ({"q25_ms": "10", "q75_ms": "1"}, "not between its quartiles"),
    ({"num_reps": "-5"}, "num_reps is -5"),
    ({"num_reps": "0"}, "num_reps is 0"),
    ({"key": "{not json"}, "is not the JSON object"),
    ({"bench": "warp"}, "bench 'warp' is none of shapewise's"),
    ({"p_m": "999"}, "p_m is '999' but the key says m is 256"),
    ({"tflops": "5000000"}, "tflops is 5e+06, but flops / median_ms"),
])
def test_an_import_with_a_nonsense_row_is_refused_and_imports_nothing(capsys, tmp_path, export, cells, says):
    db = tmp_path / "new.db"
    code, out, err = run(capsys, "results", "--db", str(db), "--import", _edited(tmp_path, export, **cells))
    assert code == 2 and one_error(err) and "line 3:" in err and says in err and "nothing imported" in err, err
    assert not db.exists()  # a refused file leaves no store behind


def test_a_rate_past_the_gpus_peak_is_refused_where_the_gpu_is_known(capsys, tmp_path, export):
    # Consistent numbers (the rate is flops / median) but 16,777 TFLOP/s on an H200: no measurement.
    fast = _edited(tmp_path, export, median_ms="1e-06", q25_ms="1e-06", q75_ms="1e-06", tflops="", gbps="",
                   gpu_name="NVIDIA H200")
    code, _, err = run(capsys, "results", "--db", str(tmp_path / "f.db"), "--import", fast)
    assert code == 2 and one_error(err) and "datasheet peak" in err and "line 3" in err
    # The same row from a CPU (no datasheet to hold it to) imports: only a known GPU's peak refuses.
    cpu = _edited(tmp_path, export, median_ms="1e-06", q25_ms="1e-06", q75_ms="1e-06", tflops="", gbps="")
    code, out, _ = run(capsys, "results", "--db", str(tmp_path / "c.db"), "--import", cpu)
    assert code == 0 and "imported 3 rows" in out


def test_check_does_not_call_nonsense_rows_sound(capsys, tmp_path, export):
    db = tmp_path / "m.db"
    code, out, _ = run(capsys, "results", "--db", str(db), "--check")
    assert code == 0 and "sound" in out
    conn = sqlite3.connect(db)  # a row that got in before imports were checked
    conn.execute("UPDATE results SET median_ms = -1 WHERE id = 2")
    conn.commit()
    conn.close()
    code, out, err = run(capsys, "results", "--db", str(db), "--check")
    assert code == 2 and one_error(err) and "sound" not in out and "result 2 (gemm): median_ms is -1" in err
    assert "1 row no measurement can have" in err


def test_a_json_export_writes_no_infinity_and_reads_back(capsys, tmp_path, export):
    db = tmp_path / "m.db"
    conn = sqlite3.connect(db)
    conn.execute("UPDATE results SET median_ms = 9e999 WHERE id = 1")  # infinity, as an older store could hold
    conn.commit()
    conn.close()
    code, _, _ = run(capsys, "results", "--db", str(db), "--export", str(tmp_path / "m.json"))
    text = (tmp_path / "m.json").read_text()
    assert code == 0 and "Infinity" not in text and "NaN" not in text
    rows = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in a JSON export"))
    assert rows[0]["median_ms"] is None
    # The JSON export imports (samples kept); the infinite row, now null with quartiles, is refused by name.
    code, _, err = run(capsys, "results", "--db", str(tmp_path / "j.db"), "--import", str(tmp_path / "m.json"))
    assert code == 2 and one_error(err) and "row 1: median_ms is missing" in err
    assert not (tmp_path / "j.db").exists()
    good = [r for r in rows if r["median_ms"] is not None]
    (tmp_path / "good.json").write_text(json.dumps(good))
    code, out, _ = run(capsys, "results", "--db", str(tmp_path / "j.db"), "--import", str(tmp_path / "good.json"))
    assert code == 0 and "imported 2 rows" in out
    with Store(tmp_path / "j.db", read_only=True) as store:
        assert [r["samples_ms"] for r in store.rows()] == [r["samples_ms"] for r in good]


def test_importing_again_says_how_many_rows_were_new(capsys, tmp_path, export):
    path = str(export[0])
    db = str(tmp_path / "i.db")
    code, out, _ = run(capsys, "results", "--db", db, "--import", path)
    assert code == 0 and out.startswith("imported 3 rows") and "new" not in out
    code, out, _ = run(capsys, "results", "--db", db, "--import", path)
    assert code == 0 and "0 new, 3 already there" in out


def test_one_row_is_one_row(capsys, tmp_path, export):
    code, out, _ = run(capsys, "results", "--db", str(tmp_path / "m.db"), "--bench", "gemm", "--export",
                       str(tmp_path / "x.csv"))
    assert "wrote 3 rows" in out
    with open(tmp_path / "x.csv", encoding="utf-8") as f:
        (tmp_path / "one.csv").write_text("".join(f.readlines()[:2]), encoding="utf-8")
    code, out, _ = run(capsys, "results", "--db", str(tmp_path / "o.db"), "--import", str(tmp_path / "one.csv"))
    assert code == 0 and "imported 1 row from" in out
    code, out, _ = run(capsys, "results", "--db", str(tmp_path / "o.db"), "--export", str(tmp_path / "o.csv"))
    assert code == 0 and "wrote 1 row to" in out


def test_a_truncated_store_does_not_advise_the_export_that_fails(capsys, tmp_path, export):
    raw = (tmp_path / "m.db").read_bytes()
    trunc = tmp_path / "trunc.db"
    trunc.write_bytes(raw[: len(raw) // 3 + 7])  # not a whole number of pages: nothing reads
    code, _, err = run(capsys, "results", "--db", str(trunc), "--export", str(tmp_path / "t.csv"))
    assert code == 2 and one_error(err) and "beyond reading" in err and "--export" not in err


@pytest.mark.parametrize("content, says", [(b'{"model_type": "llama"}', "JSON"), (b"hello, not sqlite\n", "text")])
def test_a_file_that_is_no_store_is_not_called_damaged(capsys, tmp_path, content, says):
    path = tmp_path / "config.json"
    path.write_bytes(content)
    code, _, err = run(capsys, "results", "--db", str(path))
    assert code == 2 and one_error(err) and "is not a results store" in err and says in err
    assert "damaged" not in err and "move the file away" not in err


def test_report_and_plot_on_a_damaged_page_give_the_recovery_steps(capsys, tmp_path, export):
    db = tmp_path / "m.db"
    conn = sqlite3.connect(db)
    # A damaged page's bytes in one row (not UTF-8), of bench op so that the report reads it too.
    conn.execute("UPDATE results SET bench = 'op', samples_json = CAST(X'5b302e30313235ff' AS TEXT) WHERE id = 2")
    conn.commit()
    conn.close()
    pytest.importorskip("matplotlib")
    for argv in (["plot", "gemm", "--dim", "n", "--values", "64", "-m", "256", "-k", "256", "--out",
                  str(tmp_path / "g.png")],
                 ["report", "gpt2", "--out", str(tmp_path / "r.md")]):
        code, _, err = run(capsys, *argv, "--db", str(db))
        assert code == 2 and one_error(err) and "is damaged" in err and "--export rows.csv" in err, err
        assert "0.0125" not in err  # no raw sample text
    code, out, err = run(capsys, "results", "--db", str(db), "--export", str(tmp_path / "saved.csv"))
    assert code == 0 and "wrote 2 rows" in out and "1 row of the damaged store" in err  # the advice works


def test_a_plot_says_which_devices_measurements_it_left_out(capsys, tmp_path, export):
    pytest.importorskip("matplotlib")
    code, _, err = run(capsys, "plot", "gemm", "--dim", "n", "--values", "64:192:64", "-m", "256", "-k", "256",
                       "--db", str(tmp_path / "m.db"), "--out", str(tmp_path / "g.png"))
    assert code == 0 and err.count("warning") == 1 and "3 measurements on AMD EPYC 9654" in err
    assert "NVIDIA H200" in err and "left out" in err


def test_plot_data_counts_only_the_figures_cases_left_out():
    from shapewise import plots

    def row(n, gpu_name):
        return {"bench": "gemm", "params": {**GEMM, "n": n}, "median_ms": 0.02, "tflops": 1.0, "gpu_name": gpu_name}

    rows = [row(64, "AMD EPYC"), row(64, "NVIDIA H100 80GB HBM3"), row(128, "NVIDIA H200"), row(64, "AMD EPYC")]
    rows[-1]["params"]["m"] = 999  # another case: not one the figure would draw
    data = plots.gemm_data(gpu="h200", dim="n", values=[64, 128], m=256, k=256, measured=rows)
    assert data["left_out"] == {"AMD EPYC": 1, "NVIDIA H100 80GB HBM3": 1} and len(data["measured_x"]) == 1


def test_a_report_says_which_devices_measurements_it_left_out(capsys, tmp_path):
    from shapewise.cases import op_case
    from shapewise.presets import get_model
    from shapewise.report import check
    from shapewise.shapes import Workload

    op = check(get_model("gpt2"), Workload(batch=4, seq=1024), gpu="h200").step.costs[3].op
    case = op_case(op, "bf16")
    with Store(tmp_path / "ops.db") as store:
        store.record(env_id=store.environment_id(CPU), bench="op", key=case_key({"bench": "op", **case.params}),
                     params=case.params, timing=Timing(samples_ms=(1.0, 1.1)), flops=case.flops, bytes=case.bytes)
    code, _, err = run(capsys, "report", "gpt2", "--seq", "1024", "--out", str(tmp_path / "r.md"), "--db",
                       str(tmp_path / "ops.db"))
    assert code == 0 and "warning" in err and "1 on AMD EPYC 9654" in err and "left out" in err


def test_the_op_tables_loss_share_never_passes_100_percent(tmp_path):
    from shapewise.hf import load_config
    from shapewise.report import check, op_table
    from shapewise.shapes import Workload

    config = {"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 256, "vocab_size": 1000, "max_position_embeddings": 512}
    (tmp_path / "tiny.json").write_text(json.dumps(config))
    step = check(load_config(tmp_path / "tiny.json"), Workload(batch=1, seq=64), gpu="h200").step
    shares = [int(row[-1].rsplit(" ", 1)[1].rstrip("%")) for row in op_table(step).rows if row[-1]]
    assert shares and max(shares) <= 100
