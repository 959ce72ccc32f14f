"""What a new user's pass fed the results store, its exports and profiles: numbers too long for Python to
read, cells of the wrong kind put in by hand, flags given together, files of the wrong kind, and a --db
under a folder that does not exist. Each is one line and exit 2 (or done, and said), never a traceback,
a truncated file or a silently wrong answer."""

from __future__ import annotations

import csv
import json
import sqlite3

import pytest

from helpers import run
from shapewise import store as store_module
from shapewise.errors import ShapewiseError
from shapewise.measure import Timing
from shapewise.profile import from_text
from shapewise.store import Store, case_key

CPU = {"device": "cpu", "processor": "AMD EPYC 9654", "torch_version": "2.13.0+cpu"}
GEMM = {"m": 64, "n": 64, "k": 64, "batch": 1, "layout": "nn", "dtype": "bf16"}
LONG = "1" * 5000  # past Python's 4,300 digits for reading an int
PROFILE = {"format": "shapewise-profile", "version": 5, "gpu": "h200"}


def one_error(err: str) -> bool:
    return err.count("\n") == 1 and err.startswith("shapewise: error:") and "Traceback" not in err


@pytest.fixture
def db(tmp_path):
    """A store of two CPU GEMMs, as `shapewise bench gemm --device cpu` writes them."""
    path = tmp_path / "st.db"
    with Store(path) as store:
        env_id = store.environment_id(CPU)
        for n in (64, 128):
            params = {**GEMM, "n": n}
            store.record(env_id=env_id, bench="gemm", key=case_key({"bench": "gemm", **params}), params=params,
                         timing=Timing(samples_ms=(0.02, 0.021, 0.022)), flops=2.0 * 64 * n * 64,
                         bytes=2.0 * (64 * 64 + 64 * n + 64 * n))
    return path


def corrupt(path, *statements):
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


# ---- 1. profiles holding a number too long to read ---------------------------------------------------

def _long_profile(tmp_path, name="prof.json"):
    path = tmp_path / name
    path.write_text(json.dumps({**PROFILE, "params": {"launch_ms": 0}}).replace('"launch_ms": 0', f'"launch_ms": {LONG}'))
    return path


def test_a_profile_with_a_number_too_long_is_one_line(capsys, tmp_path, db):
    prof = _long_profile(tmp_path)
    code, _, err = run(capsys, "check", "gpt2", "--profile", str(prof))
    assert code == 2 and one_error(err) and "5,000 digits" in err and "set_int_max_str_digits" not in err
    code, _, err = run(capsys, "validate", "--from-db", "--db", str(db), "--gpu", "h200", "--profile", str(prof))
    assert code == 2 and one_error(err) and "5,000 digits" in err


def test_a_profile_with_a_number_too_long_in_the_profile_folder_is_set_aside(capsys, tmp_path, monkeypatch):
    folder = tmp_path / "profiles"
    folder.mkdir()
    monkeypatch.setenv("SHAPEWISE_PROFILES", str(folder))
    _long_profile(folder, "h200.json")
    code, out, err = run(capsys, "check", "gpt2", "--gpu", "h200")
    assert code == 0 and "Traceback" not in err and "moved to h200.json.broken" in err and "5,000 digits" in err
    assert (folder / "h200.json.broken").exists() and not (folder / "h200.json").exists()


@pytest.mark.parametrize("params, fit", [
    ({"flash_block_bwd": 10**20}, {}),  # a huge whole number: past a C long, an OverflowError
    ({"misaligned_odd_a": [10**200]}, {}),
    ({"flash_block_q": 1.5}, {}),  # a count that is not whole
    ({"splits": [10**200]}, {}),
    ({"flash_memory_fill_ms": 1e300}, {}),
    ({}, {"machine": 5}),  # where a machine's refit measured: read by measured_elsewhere
    ({}, {"machine": {"environment": {"device": ["cpu"]}}}),
])
def test_ill_formed_profiles_are_refused_in_words(params, fit):
    with pytest.raises(ShapewiseError):
        from_text(json.dumps({**PROFILE, "params": params, "fit": fit}), where="p.json")


# ---- 2. rows of the wrong kinds -----------------------------------------------------------------------

@pytest.mark.parametrize("damage, said", [
    ("UPDATE results SET median_ms = 'abc' WHERE id = 1", "median_ms is 'abc', not a number"),
    ("UPDATE results SET params_json = '[1,2]' WHERE id = 1", "params_json is not the JSON object"),
    ("UPDATE results SET num_reps = 2.5 WHERE id = 1", "num_reps is 2.5, not a whole number"),
    ("UPDATE results SET env_id = 7 WHERE id = 1", "env_id 7 names no environment"),
])
def test_a_row_of_the_wrong_kind_is_refused_by_the_plot_and_found_by_check(capsys, tmp_path, db, damage, said):
    corrupt(db, damage)
    code, _, err = run(capsys, "plot", "gemm", "--values", "64", "-m", "64", "-k", "64", "--gpu", "h200",
                       "--db", str(db), "--out", str(tmp_path / "g.png"))
    assert code == 2 and one_error(err) and said in err and "result 1" in err
    code, out, err = run(capsys, "results", "--check", "--db", str(db))
    assert code == 2 and one_error(err) and said in err and "sound" not in out


def test_rows_of_no_environment_are_not_dropped_silently(db):
    corrupt(db, "UPDATE results SET env_id = 7 WHERE id = 1")
    with Store(db, read_only=True) as store, pytest.raises(ShapewiseError, match="names no environment"):
        store.rows()


def test_check_reads_every_environment(capsys, db):
    corrupt(db, "UPDATE environments SET env_json = 'nope'")
    code, out, err = run(capsys, "results", "--check", "--db", str(db))
    assert code == 2 and one_error(err) and "environment 1: env_json" in err


def test_a_store_lacking_a_column_is_refused(capsys, tmp_path, db):
    corrupt(db, "ALTER TABLE results DROP COLUMN flops")
    for command in (("results", "--check"), ("results", "--export", str(tmp_path / "o.csv")), ("results",)):
        code, out, err = run(capsys, *command, "--db", str(db))
        assert code == 2 and one_error(err) and "lacks the column flops" in err, command
    assert not (tmp_path / "o.csv").exists()


def test_a_gemm_of_a_size_no_gemm_has_is_found_and_refused(capsys, tmp_path, db):
    huge = {**GEMM, "m": 1e300}
    corrupt(db, f"UPDATE results SET params_json = '{json.dumps(huge)}', "
                f"key = '{case_key({'bench': 'gemm', **huge})}' WHERE id = 1")
    code, out, err = run(capsys, "results", "--check", "--db", str(db))
    assert code == 2 and one_error(err) and "parameter m is 1e+300" in err
    # imported: refused, as a file of such rows was before --check could see them
    rows = [r for r in json.loads(_export(capsys, tmp_path, db, "all.json").read_text()) if r["params"]["m"] != 64]
    (tmp_path / "huge.json").write_text(json.dumps(rows))
    code, _, err = run(capsys, "results", "--db", str(tmp_path / "new.db"), "--import", str(tmp_path / "huge.json"))
    assert code == 2 and one_error(err) and "parameter m is 1e+300" in err


def _export(capsys, tmp_path, db, name):
    code, _, err = run(capsys, "results", "--db", str(db), "--export", str(tmp_path / name))
    assert code == 0, err
    return tmp_path / name


# ---- 3. an export of a store with a BLOB key -----------------------------------------------------------

def test_an_export_leaves_out_a_row_of_the_wrong_kind_and_says_so(capsys, tmp_path, db):
    corrupt(db, "UPDATE results SET key = x'ff00' WHERE id = 1")
    for name in ("o.json", "o.csv"):
        code, out, err = run(capsys, "results", "--db", str(db), "--export", str(tmp_path / name))
        assert code == 0 and "wrote 1 row" in out and "1 row of the damaged store" in err and "Traceback" not in err
    assert [r["id"] for r in json.loads((tmp_path / "o.json").read_text())] == [2]
    assert "\\xff" not in (tmp_path / "o.csv").read_text()


def test_an_export_that_fails_leaves_no_partial_file(tmp_path, db, monkeypatch):
    (tmp_path / "kept.csv").write_text("what was there\n")

    def fails(rows, out):
        out.write("bench,key\n")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_module, "_write_csv", fails)
    with Store(db, read_only=True) as store:
        for name in ("new.csv", "kept.csv"):
            with pytest.raises(ShapewiseError, match="No space left"):
                store.export(tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("st.db")) == ["kept.csv"]
    assert (tmp_path / "kept.csv").read_text() == "what was there\n"


# ---- 4. flags given together ----------------------------------------------------------------------------

def test_import_then_export_does_both(capsys, tmp_path, db):
    export = _export(capsys, tmp_path, db, "in.csv")
    code, out, err = run(capsys, "results", "--db", str(tmp_path / "new.db"), "--import", str(export),
                         "--export", str(tmp_path / "out.json"))
    assert code == 0 and "imported 2 rows" in out and "wrote 2 rows" in out
    assert len(json.loads((tmp_path / "out.json").read_text())) == 2


def test_import_then_check_does_both(capsys, tmp_path, db):
    export = _export(capsys, tmp_path, db, "in.csv")
    code, out, err = run(capsys, "results", "--db", str(tmp_path / "new.db"), "--import", str(export), "--check")
    assert code == 0 and "imported 2 rows" in out and "sound" in out


@pytest.mark.parametrize("flags, said", [
    (("--check", "--export", "X.csv"), "--check and --export"),
    (("--check", "--json"), "--json"),
    (("--import", "in.csv", "--json"), "--json"),
    (("--check", "--bench", "gemm"), "--bench"),
])
def test_flags_that_do_nothing_together_are_refused(capsys, tmp_path, db, flags, said, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _export(capsys, tmp_path, db, "in.csv")
    code, out, err = run(capsys, "results", "--db", str(db), *flags)
    assert code == 2 and one_error(err) and said in err and out == ""
    assert not (tmp_path / "X.csv").exists()


# ---- 5. messages --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, kind", [("null", "null"), ("5", "a number"), ('"rows"', "a string")])
def test_json_of_the_wrong_kind_is_said_to_be_json(capsys, tmp_path, text, kind):
    (tmp_path / "x.json").write_text(text)
    code, _, err = run(capsys, "results", "--db", str(tmp_path / "n.db"), "--import", str(tmp_path / "x.json"))
    assert code == 2 and one_error(err) and f"is JSON ({kind}) but not a shapewise export" in err and "CSV" not in err


def test_a_file_repeating_a_row_says_so(capsys, tmp_path, db):
    export = _export(capsys, tmp_path, db, "in.csv")
    lines = export.read_text().splitlines(keepends=True)
    (tmp_path / "twice.csv").write_text("".join(lines + lines[1:2]))
    code, out, _ = run(capsys, "results", "--db", str(tmp_path / "new.db"), "--import", str(tmp_path / "twice.csv"))
    assert code == 0 and out.startswith("imported 2 rows") and "the file repeats 1 row" in out
    assert "already there" not in out


def test_a_store_under_a_file_and_an_empty_path(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "ok.json").write_text("{}")
    with pytest.raises(ShapewiseError, match="cfg/ok.json is a file, not a folder"):
        Store("cfg/ok.json/x.db")
    code, _, err = run(capsys, "results", "--db", "")
    assert code == 2 and one_error(err) and "path of the results store is empty" in err
    code, _, err = run(capsys, "plot", "gemm", "--values", "64", "--db", "", "--out", "g.png")
    assert code == 2 and one_error(err) and "path of the results store is empty" in err


def test_verified_files_are_said_in_words(capsys, tmp_path):
    out = str(tmp_path / "s.png")
    code, _, err = run(capsys, "plot", "suggestions", "gpt2", "--verified", str(tmp_path / "missing.json"), "--out", out)
    assert code == 2 and one_error(err) and "no such file" in err and "Errno" not in err
    (tmp_path / "v.json").write_text('[{"candidate": "x"}]')
    code, _, err = run(capsys, "plot", "suggestions", "gpt2", "--verified", str(tmp_path / "v.json"), "--out", out)
    assert code == 2 and one_error(err) and "candidate 1 lacks the fields predicted_speedup" in err
    (tmp_path / "long.json").write_text(f'[{{"candidate": "x", "predicted_speedup": {LONG}}}]')
    code, _, err = run(capsys, "plot", "suggestions", "gpt2", "--verified", str(tmp_path / "long.json"), "--out", out)
    assert code == 2 and one_error(err) and "5,000 digits" in err and "set_int_max_str_digits" not in err
    (tmp_path / "c.json").write_text('[{"candidate": "x", "predicted_speedup": 1, "measured_speedup": 1, '
                                     '"ci": [1, 1], "changes": 5}]')
    code, _, err = run(capsys, "plot", "suggestions", "gpt2", "--verified", str(tmp_path / "c.json"), "--out", out)
    assert code == 2 and one_error(err) and "changes" in err


@pytest.mark.parametrize("column", ["median_ms", "num_reps"])
def test_a_csv_cell_too_long_is_cut_short_in_the_message(capsys, tmp_path, db, column):
    export = _export(capsys, tmp_path, db, "in.csv")
    with open(export, newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    rows[0][header.index(column)] = LONG
    with open(tmp_path / "long.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])
    code, _, err = run(capsys, "results", "--db", str(tmp_path / "n.db"), "--import", str(tmp_path / "long.csv"))
    assert code == 2 and one_error(err) and len(err) < 300 and "5,000 characters" in err


@pytest.mark.parametrize("field, value, said", [
    ("num_reps", LONG, "5,000 digits"),  # past Python's limit: its advice is for programmers
    ("flops", "1" + "0" * 400, "401 digits"),  # no float holds it: an OverflowError
    ("num_reps", str(2**70), "num_reps is 1.181e+21"),  # no SQLite integer holds it: an OverflowError
])
def test_json_numbers_too_long_are_said_in_words(capsys, tmp_path, db, field, value, said):
    rows = json.loads(_export(capsys, tmp_path, db, "in.json").read_text())
    text = json.dumps(rows[:1]).replace(f'"{field}": {json.dumps(rows[0][field])}', f'"{field}": {value}')
    assert value in text
    (tmp_path / "long.json").write_text(text)
    code, _, err = run(capsys, "results", "--db", str(tmp_path / "n.db"), "--import", str(tmp_path / "long.json"))
    assert code == 2 and one_error(err) and said in err and "set_int_max_str_digits" not in err


# ---- 6. --db in a folder that does not exist ------------------------------------------------------------

def test_a_new_store_needs_its_folder(capsys, tmp_path, db):
    missing = tmp_path / "new" / "none" / "c.db"
    with pytest.raises(ShapewiseError, match="does not exist"):
        Store(missing)
    assert not (tmp_path / "new").exists()
    export = _export(capsys, tmp_path, db, "in.csv")
    code, _, err = run(capsys, "results", "--db", str(missing), "--import", str(export))
    assert code == 2 and one_error(err) and "--mkdir" in err and not (tmp_path / "new").exists()
    code, out, err = run(capsys, "results", "--db", str(missing), "--import", str(export), "--mkdir")
    assert code == 0 and missing.exists()


@pytest.mark.parametrize("command", [
    ("bench", "gemm", "-m", "64", "-n", "64", "-k", "64"),
    ("bench", "attention", "--heads", "2", "--head-dim", "64", "--seq", "64", "--backend", "math"),
    ("bench", "comm", "--sizes", "4K"),
    ("bench", "layer", "gpt2", "--batch", "1", "--seq", "64"),
    ("bench", "ops", "gpt2", "--batch", "1", "--seq", "64"),
    ("calibrate", "--quick"),
    ("validate", "--quick"),
])
def test_commands_that_write_a_store_refuse_a_missing_folder_as_every_output_does(capsys, tmp_path, command):
    """As results --import and every --out: the folder named, and --mkdir offered (a mistyped --db would
    start a new store unnoticed); nothing made, nothing measured."""
    missing = tmp_path / "typo" / "c.db"
    code, out, err = run(capsys, *command, "--device", "cpu", "--db", str(missing))
    assert code == 2 and out == "" and one_error(err), err
    assert f"the folder {missing.parent} does not exist: create it, or add --mkdir to have it made" in err
    assert not (tmp_path / "typo").exists()


def test_bench_mkdir_makes_a_new_store_s_folder(capsys, tmp_path):
    pytest.importorskip("torch")
    made = tmp_path / "new" / "deep" / "c.db"
    code, out, err = run(capsys, "bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--device", "cpu",
                         "--warmup-ms", "0.1", "--budget-ms", "0.5", "--db", str(made), "--mkdir")
    assert code == 0 and "1 measured" in out, err
    with Store(made, read_only=True) as store:
        assert len(store.rows()) == 1


def test_the_default_store_makes_its_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPEWISE_DB", str(tmp_path / "cache" / "shapewise" / "results.db"))
    with Store() as store:
        assert store.path.exists()
    monkeypatch.delenv("SHAPEWISE_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with Store() as store:
        assert store.path == tmp_path / "xdg" / "shapewise" / "results.db" and store.path.exists()


def test_validate_mkdir_makes_a_new_store_s_folder_and_the_variants_set_refuses_it(capsys, tmp_path):
    made = tmp_path / "new" / "v.db"
    code, out, err = run(capsys, "validate", "--quick", "--device", "cpu", "--db", str(made), "--mkdir", "--warmup-ms", "0",
                         "--budget-ms", "0.1")
    assert code == 0 and made.exists(), err  # --from-db only reads a store: it makes none, nor its folder
    code, out, err = run(capsys, "validate", "--set", "variants", "--configs", "x.json", "--mkdir")
    assert code == 2 and one_error(err) and "--mkdir: the variants set is measured interleaved" in err


@pytest.mark.parametrize("name", ["out.csv.gz", "out.json.gz"])
def test_an_export_gzipped_by_its_name_imports_back(capsys, tmp_path, db, name):
    # --import read NAME.csv.gz; --export refused to write one
    import gzip

    code, out, err = run(capsys, "results", "--db", str(db), "--export", str(tmp_path / name))
    assert code == 0 and "wrote 2 rows" in out, err
    with gzip.open(tmp_path / name, "rt") as f:
        assert f.read(1) in "[b"  # JSON's list, or the CSV's header "bench,…"
    code, out, err = run(capsys, "results", "--db", str(tmp_path / "back.db"), "--import", str(tmp_path / name))
    assert code == 0 and "imported 2 rows" in out, err
    code, out, err = run(capsys, "results", "--db", str(db), "--export", str(tmp_path / "x.csv.gz"), "--format", "json")
    assert code == 2 and "x.csv.gz names a csv file but --format is json" in err
