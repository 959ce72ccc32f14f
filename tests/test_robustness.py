"""Every bad input the robustness report listed, as a table: one line and exit 2 each, or a working
command where the input is valid. The fuzz suites (test_fuzz_*.py) cover the space around them."""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

import pytest

from fuzzing import run_explained
from shapewise.cli import build_parser
from shapewise.cli.common import default_text
from shapewise.measure import Timing
from shapewise.profile import load, save
from shapewise.store import Store

SHIPPED = Path(__file__).resolve().parents[1] / "src" / "shapewise" / "data" / "profiles" / "h200.json"
# No user can write here, root included: /proc takes no new files.
UNWRITABLE = "/proc/shapewise-test.json"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The broken and valid inputs of the table, made once."""
    root = tmp_path_factory.mktemp("inputs")
    gpt2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}
    for name, changes in {"ffn-1e26": {"n_inner": 10**26}, "ffn-float": {"n_inner": 1e26},
                          "hidden-1e12": {"n_embd": 10**12, "n_head": 1}, "ok": {}}.items():
        (root / f"{name}.json").write_text(json.dumps({**gpt2, **changes}))
    profile = load(SHIPPED)
    text = SHIPPED.read_text()
    data = json.loads(text)
    broken = {
        "binary": bytes(range(256)) * 8,
        "zeros": bytes(4096),
        "table": json.dumps({**data, "params": {**data["params"], "gemm_residuals": [[1, 2], [3]]}}).encode(),
        "nan": json.dumps({**data, "params": {**data["params"], "gemm_ceiling": float("nan")}}).encode(),
        "inf": json.dumps({**data, "params": {**data["params"], "gemm_ceiling": float("inf")}}).encode(),
        "negative": json.dumps({**data, "params": {**data["params"], "launch_ms": -5.0}}).encode(),
        "version-true": json.dumps({**data, "version": True}).encode(),
    }
    for name, content in broken.items():
        (root / f"profile-{name}.json").write_bytes(content)
    save(profile.__class__(**{**profile.__dict__, "gpu": "a100", "path": ""}), root / "profile-a100.json")
    store = root / "damaged.db"
    with Store(store) as s:
        env = s.environment_id({"device": "cpu", "processor": "test"})
        for i in range(300):
            s.record(env_id=env, bench="gemm", key=f"k{i}", params={"m": i, "pad": "x" * 200},
                     timing=Timing(samples_ms=(1.0, 1.2)))
    conn = sqlite3.connect(store)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    raw = bytearray(store.read_bytes())
    raw[4096 * 5: 4096 * 6] = b"\xab" * 4096  # a page of garbage behind a valid header
    store.write_bytes(bytes(raw))
    (root / "a-file").write_text("")
    return root


def p(files, name):
    return str(files / name)


# (argv with {} for the inputs folder, what the one error line must say)
REFUSED = [
    # unbounded sizes
    (["check", "gpt2", "--seq", "100000000000"], "sequence length"),
    (["search", "--params", "7e9", "--seq", "10000000000"], "sequence length"),
    (["plot", "gemm", "--values", "1:100000000:1", "--out", "{}/g.png"], "values"),
    (["check", "gpt2", "--batch", "99999999999999999999999999"], "batch"),
    (["check", "--config", "{}/ffn-1e26.json"], "ffn"),
    (["check", "--config", "{}/ffn-float.json"], "n_inner"),
    (["check", "--config", "{}/hidden-1e12.json"], "hidden"),
    (["check", "gpt2", "--mode", "decode", "--seq", "100000000000000000000000000"], "sequence length"),
    # profiles
    (["check", "gpt2", "--profile", "{}/profile-binary.json"], "profile"),
    (["check", "gpt2", "--profile", "{}/profile-zeros.json"], "profile"),
    (["check", "gpt2", "--profile", "{}/profile-table.json"], "gemm_residuals"),
    (["check", "gpt2", "--profile", "{}/profile-nan.json"], "gemm_ceiling"),
    (["check", "gpt2", "--profile", "{}/profile-inf.json"], "gemm_ceiling"),
    (["check", "gpt2", "--profile", "{}/profile-negative.json"], "launch_ms"),
    (["check", "gpt2", "--profile", "{}/profile-version-true.json"], "version"),
    (["check", "gpt2", "--gpu", "h200", "--profile", "{}/profile-a100.json"], "--borrow-profile"),
    # stores
    (["results", "--db", "{}/damaged.db"], "damaged"),
    (["plot", "gemm", "--values", "4096", "--db", "{}/damaged.db", "--out", "{}/d.png"], "damaged"),
    (["report", "gpt2", "--db", "{}/damaged.db", "--out", "{}/d.html"], "damaged"),
    (["validate", "--from-db", "--db", "{}/damaged.db", "--gpu", "h200"], "damaged"),
    (["bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--device", "cpu", "--db", "{}/damaged.db"], "damaged"),
    # paths
    (["suggest", "gpt2", "--emit-config", "{}"], "folder"),
    (["suggest", "gpt2", "--emit-config", "{}/a-file/config.json"], "a-file"),
    (["suggest", "gpt2", "--emit-config", UNWRITABLE], "/proc"),
    (["report", "gpt2", "--out", "{}/r.txt"], ".txt"),
    (["results", "--db", "{}/damaged.db", "--export", "{}/x.txt"], ".txt"),
    (["report", "gpt2", "--out", "{}/missing/dir/r.html"], "--mkdir"),
    # devices and numbers
    (["verify", "gpt2", "--device", "foo"], "foo"),
    (["bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--device", "foo"], "foo"),
    (["suggest", "gpt2", "--params-tol", "nan"], "tolerance"),
    (["suggest", "gpt2", "--aspect-band", "nan"], "aspect"),
    (["bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--device", "cpu", "--budget-ms", "-1"], "budget"),
    (["bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--device", "cpu", "--budget-ms", "inf"], "budget"),
    (["bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--device", "cpu", "--warmup-ms", "nan"], "warm-up"),
    (["bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--device", "cpu", "--warmup-ms", "-5"], "warm-up"),
    (["gpus", ""], "GPU"),
]


@pytest.mark.parametrize("argv, needle", REFUSED, ids=[" ".join(a)[:60] for a, _ in REFUSED])
def test_refused_in_one_line(files, argv, needle):
    argv = [a.replace("{}", str(files)) for a in argv]
    code, out, err = run_explained(*argv)
    assert code == 2, f"exit {code}: {out[-300:]}"
    assert needle in err, err
    assert not list(files.glob("g.png")) and not (files / "missing").exists(), "wrote output on an error"


def test_a_damaged_store_exports_what_it_still_reads(files, tmp_path):
    out = tmp_path / "rows.csv"
    code, text, err = run_explained("results", "--db", p(files, "damaged.db"), "--export", str(out))
    assert code == 0 and out.is_file()
    rows = out.read_text().splitlines()
    assert 200 < len(rows) - 1 < 300, "neither all the rows nor most of them"
    assert "could not be read" in text + err
    code, _, err = run_explained("results", "--db", p(files, "damaged.db"), "--check")
    assert code == 2 and "malformed" in err


def test_a_broken_profile_in_the_profile_folder_is_set_aside(tmp_path, monkeypatch):
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "h200.json").write_bytes(bytes(range(256)))
    monkeypatch.setenv("SHAPEWISE_PROFILES", str(folder))
    code, out, err = run_explained("check", "gpt2", "--gpu", "h200")
    assert code == 0 and "warning" in err and "h200.json" in err
    assert not (folder / "h200.json").exists() and list(folder.glob("h200.json.broken*"))
    code, out, err = run_explained("check", "gpt2", "--gpu", "h200", "--seq", "1024")
    assert code == 0 and err == "", "set aside once, not warned about on every command"


def test_a_foreign_profile_is_used_when_asked_and_said_so(files):
    code, out, err = run_explained("check", "gpt2", "--gpu", "h200", "--profile", p(files, "profile-a100.json"),
                                   "--borrow-profile")
    assert code == 0 and "borrowed for h200" in out


def test_report_writes_into_a_new_folder_when_asked(files):
    target = files / "new" / "folder" / "r.md"
    code, out, _ = run_explained("report", "gpt2", "--out", str(target), "--mkdir")
    assert code == 0 and target.is_file() and str(target) in out


def test_a_refused_command_takes_back_the_folders_mkdir_made_for_it(tmp_path):
    """--mkdir made the output's folders while the flags were read; a command refused after that (here a --verified
    file that is not there) left them behind, empty. They are taken back, the folder that was already there kept,
    and a folder the command wrote into before its refusal stays."""
    (tmp_path / "kept").mkdir()
    target = tmp_path / "kept" / "new" / "deeper" / "x.png"
    code, out, err = run_explained("plot", "suggestions", "gpt2", "--verified", str(tmp_path / "none.json"),
                                   "--out", str(target), "--mkdir")
    assert code == 2 and "no such file" in err, err
    assert (tmp_path / "kept").is_dir() and not (tmp_path / "kept" / "new").exists()
    from shapewise.outputs import MADE, take_back_folders, writable_folder

    folder = writable_folder(tmp_path / "a" / "b", mkdir=True)
    (folder / "written.txt").write_text("kept")
    take_back_folders()
    assert (folder / "written.txt").is_file() and not MADE


def test_version_and_results_as_a_table(files, tmp_path):
    code, out, _ = run_explained("--version")
    assert code == 0 and out.startswith("shapewise ")
    db = tmp_path / "r.db"
    with Store(db) as s:
        env = s.environment_id({"device": "cpu", "processor": "test"})
        s.record(env_id=env, bench="gemm", key="k", params={"m": 1}, timing=Timing(samples_ms=(1.0,)))
    code, out, _ = run_explained("results", "--db", str(db))
    assert code == 0 and "gemm" in out and not out.lstrip().startswith("{")
    code, out, _ = run_explained("results", "--db", str(db), "--json")
    assert json.loads(out)["benches"]["gemm"]["ok"] == 1


def test_search_says_which_flags_widen_it():
    code, _, err = run_explained("search", "--params", "7e9", "--params-tol", "0.000001")
    assert code == 2 and "--params-tol" in err and "--aspect " not in err and "--aspect\n" not in err


def _parsers(parser, path="shapewise"):
    """Every parser of the command line, with its command path."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_help_describes_every_flag_with_its_default():
    undescribed, no_default = [], []
    for path, parser in _parsers(build_parser()):
        text = " ".join(parser.format_help().split())  # as one line: a long default wraps
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                continue
            name = "/".join(action.option_strings) or action.dest
            if not action.help or action.help == argparse.SUPPRESS:
                undescribed.append(f"{path} {name}")
            shown = action.default not in (None, False, argparse.SUPPRESS) and not isinstance(action, argparse._StoreConstAction)
            if shown and f"default: {default_text(action.default)}" not in text:
                no_default.append(f"{path} {name} ({action.default!r})")
    assert not undescribed, f"flags without a description: {undescribed}"
    assert not no_default, f"defaults --help does not show: {no_default}"


def test_help_names_defaults_and_where_profiles_go():
    _, out, _ = run_explained("calibrate", "--help")
    assert "XDG_DATA_HOME" in out and "SHAPEWISE_PROFILES" in out
    _, out, _ = run_explained("search", "--help")
    assert "4096" in out and "check" in out  # its seq default, and that check's differs


def test_calibrate_and_validate_quick_on_the_cpu_are_smoke_tests(tmp_path, monkeypatch):
    """Documented as CPU smoke tests: they measure, say where the measurements went, install nothing."""
    pytest.importorskip("torch")
    folder = tmp_path / "profiles"
    monkeypatch.setenv("SHAPEWISE_PROFILES", str(folder))
    db = str(tmp_path / "r.db")
    fast = ["--quick", "--device", "cpu", "--db", db, "--warmup-ms", "0", "--budget-ms", "1"]
    for command in ("calibrate", "validate"):
        code, out, err = run_explained(command, *fast)
        assert code == 0 and db in " ".join(out.split()) and "smoke test" in out, (command, out, err)
    assert not folder.exists() or not list(folder.iterdir()), "a CPU's times installed as a GPU's profile"
