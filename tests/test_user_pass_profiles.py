"""What a new user met on the measuring side (pass 2): a profile fitted on CPU times, or on another GPU,
never prices a GPU; validate says when its times are a CPU's, when it was cut short, and writes valid JSON."""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import json
from pathlib import Path

import pytest

from helpers import interrupt_after, run
from shapewise.draws import validation_cases
from shapewise.measure import Timing
from shapewise.profile import _shipped, load, measured_elsewhere, save
from shapewise.store import Store

ROOT = Path(__file__).resolve().parents[1]
FAST = ("--quick", "--device", "cpu", "--warmup-ms", "0", "--budget-ms", "1")


def _no_nan(text: str) -> dict:
    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory):
    """A profile for the h100 fitted on CPU times by `calibrate --quick --device cpu --gpu h100 --out`, and
    what calibrate said."""
    pytest.importorskip("torch")
    from shapewise.cli import main

    folder = tmp_path_factory.mktemp("cpu-fit")
    out = folder / "cpu-h100.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SHAPEWISE_PROFILES", str(folder / "profiles"))
        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            assert main(["calibrate", *FAST, "--gpu", "h100", "--db", str(folder / "cal.db"), "--out", str(out)]) == 0
    return out, said.getvalue()


@pytest.fixture
def profiles(tmp_path, monkeypatch):
    folder = tmp_path / "profiles"
    folder.mkdir()
    monkeypatch.setenv("SHAPEWISE_PROFILES", str(folder))
    return folder


def _foreign(tmp_path) -> Path:
    """The shipped H200 profile written as the h100's: a full calibrate --gpu h100 run on an H200 writes so."""
    shipped = _shipped("h200")
    return save(dataclasses.replace(shipped, gpu="h100", path=""), tmp_path / "h200-as-h100.json")


# ---- section 1: a CPU's or another GPU's times are no GPU's profile ----------------------------

def test_a_cpu_fit_records_the_cpu_and_says_its_error_is_in_sample(cpu_profile):
    out, said = cpu_profile
    profile = load(out)
    assert profile.gpu == "h100" and profile.environment["device"] == "cpu"
    assert measured_elsewhere(profile, "h100") == "its times were measured on the CPU"
    flat = " ".join(said.split())
    assert "on the GEMMs it was fitted on" in flat and "held-out" in flat, flat
    assert "no command prices the h100 with it" in flat


@pytest.mark.parametrize("extra", [(), ("--gpu", "h200", "--borrow-profile")])
def test_check_refuses_a_cpu_fitted_profile(cpu_profile, profiles, capsys, extra):
    out, _ = cpu_profile
    args = ("check", "gpt2", "--seq", "1024", *(extra or ("--gpu", "h100")), "--profile", str(out))
    code, stdout, err = run(capsys, *args)
    assert code == 2 and stdout == "" and len(err.strip().splitlines()) == 1 and "measured on the CPU" in err, err


def test_a_cpu_fitted_profile_in_the_folder_is_set_aside_with_a_warning(cpu_profile, profiles, capsys):
    out, _ = cpu_profile
    (profiles / "h100.json").write_text(out.read_text())
    code, stdout, err = run(capsys, "check", "gpt2", "--seq", "1024", "--gpu", "h100", "--json")
    assert code == 0 and "warning" in err and "measured on the CPU" in err and "h100.json" in err, err
    assert not (profiles / "h100.json").exists() and (profiles / "h100.json.broken").exists()
    # the H100 borrows the shipped H200 profile again, as with no profile of its own
    assert "borrowed for h100" in json.loads(stdout)["cost_model"]["source"]
    code, _, err = run(capsys, "suggest", "gpt2", "--seq", "1024", "--gpu", "h100", "--top", "1")
    assert code == 0 and err == "", "set aside once, not warned about on every command"


def test_a_cpu_fitted_lenders_profile_in_the_folder_is_set_aside_too(cpu_profile, profiles, capsys):
    """An H100 borrows the h200's profile: a CPU-fitted file there is no more the H200's than the H100's."""
    out, _ = cpu_profile
    data = json.loads(out.read_text())
    (profiles / "h200.json").write_text(json.dumps({**data, "gpu": "h200"}))
    code, stdout, err = run(capsys, "check", "gpt2", "--seq", "1024", "--gpu", "h100", "--json")
    assert code == 0 and "measured on the CPU" in err and (profiles / "h200.json.broken").exists()
    assert json.loads(stdout)["cost_model"]["source"].startswith("calibrated profile of NVIDIA H200")


def test_a_profile_measured_on_another_gpu_than_it_names_is_refused(tmp_path, profiles, capsys):
    path = _foreign(tmp_path)
    code, stdout, err = run(capsys, "check", "gpt2", "--seq", "1024", "--gpu", "h100", "--profile", str(path))
    assert code == 2 and stdout == "" and "measured on NVIDIA H200, not on the h100" in err, err
    # priced as the GPU it was measured on, when asked, it is that GPU's times: used and said so
    code, stdout, _ = run(capsys, "check", "gpt2", "--seq", "1024", "--gpu", "h200", "--profile", str(path), "--borrow-profile")
    assert code == 0 and "borrowed for h200" in stdout
    (profiles / "h100.json").write_text(path.read_text())
    code, _, err = run(capsys, "check", "gpt2", "--seq", "1024", "--gpu", "h100")
    assert code == 0 and "NVIDIA H200, not on the h100" in err and (profiles / "h100.json.broken").exists()


def test_gpu_profiles_without_the_field_keep_working(profiles, capsys):
    """The shipped profile, the H100's borrowing of it and the H100 machine refits of the results (which
    name the H200 they borrowed from) are all their GPU's: no field said where, and none is refused."""
    machine = ROOT / "benchmarks" / "results" / "h100-judges" / "h100-machine.json.gz"
    for args in (("--gpu", "h200"), ("--gpu", "h100"), ("--gpu", "h100", "--profile", str(machine)),
                 ("--gpu", "h100", "--borrow-profile", "--profile", str(ROOT / "src/shapewise/data/profiles/h200.json"))):
        code, _, err = run(capsys, "check", "gpt2", "--seq", "1024", *args)
        assert code == 0 and err == "", (args, err)
    assert measured_elsewhere(load(machine), "h100") == ""
    (profiles / "h100.json").write_bytes(gzip.decompress(machine.read_bytes()))
    code, stdout, err = run(capsys, "check", "gpt2", "--seq", "1024", "--gpu", "h100")
    assert code == 0 and err == "" and (profiles / "h100.json").exists() and "h100's factors" in stdout


# ---- section 2: CPU times judged as a GPU's are said so; a GPU's by a CPU's profile, refused ------

def test_validate_on_the_cpu_with_a_gpu_says_its_times_are_the_cpus(tmp_path, capsys):
    pytest.importorskip("torch")
    db = str(tmp_path / "v.db")
    code, stdout, err = run(capsys, "validate", *FAST, "--db", db, "--gpu", "h200")
    assert code == 0 and "measured on the CPU" in err and "say nothing of the h200" in err, err
    title = " ".join(stdout.split()[:20])
    assert "measured on the CPU, judged as NVIDIA H200" in title, title
    # section 6: a group of one case has no rank correlation: a dash, not "nan"
    assert "nan" not in stdout and "–" in stdout
    code, stdout, err = run(capsys, "validate", *FAST, "--db", db, "--gpu", "h200", "--json")
    doc = _no_nan(stdout)
    assert code == 0 and doc["measured_on"] == "the CPU"
    assert any(row["spearman"] is None for row in doc["summary"])
    code, stdout, err = run(capsys, "validate", "--from-db", "--quick", "--db", db, "--gpu", "h200", "--json")
    assert code == 0 and "measured on the CPU" in err and _no_nan(stdout)["measured_on"] == "the CPU"
    code, _, err = run(capsys, "validate", "--from-db", "--quick", "--db", db)
    assert code == 2 and "measured on the CPU" in err and "--gpu" in err and len(err.strip().splitlines()) == 1


def _gpu_store(path: Path) -> str:
    """A store holding the quick default set as if measured on an H200."""
    with Store(path) as store:
        env = store.environment_id({"device": "cuda:0", "gpu_name": "NVIDIA H200", "cuda_version": "13.0",
                                    "torch_version": "2.11.0+cu130"})
        for case in validation_cases(quick=True, seed=2):
            store.record(env_id=env, bench=case.bench, key=case.key, params=case.params, flops=case.flops,
                         bytes=case.bytes, timing=Timing(samples_ms=(0.01, 0.011)))
    return str(path)


def test_validate_refuses_to_judge_a_gpus_times_by_a_cpu_fitted_profile(cpu_profile, tmp_path, capsys):
    out, _ = cpu_profile
    db = _gpu_store(tmp_path / "gpu.db")
    code, stdout, err = run(capsys, "validate", "--from-db", "--quick", "--db", db, "--gpu", "h100", "--json")
    assert code == 0 and "measured on NVIDIA H200, not on the h100" in err
    assert _no_nan(stdout)["measured_on"] == "NVIDIA H200"
    code, stdout, err = run(capsys, "validate", "--from-db", "--quick", "--db", db, "--gpu", "h100", "--profile", str(out))
    assert code == 2 and stdout == "" and "measured on the CPU" in err and len(err.strip().splitlines()) == 1, err
    code, _, err = run(capsys, "validate", "--from-db", "--quick", "--db", db, "--gpu", "h200")
    assert code == 0 and err == ""


# ---- sections 3 and 12: an interruption says what it kept and how to go on --------------------

def test_an_interrupted_validate_says_so_keeps_its_rows_and_exits_130(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    db = tmp_path / "v.db"
    interrupt_after(monkeypatch, 3)
    total = len(validation_cases(quick=True, seed=2))
    code, stdout, _ = run(capsys, "validate", *FAST, "--db", str(db), "--gpu", "h200")
    flat = " ".join(stdout.split())
    assert code == 130 and f"interrupted: 3 of {total} held-out cases measured" in flat and "same command" in flat
    assert "Spearman" not in stdout, "a part of the set judged as if it were the whole"
    with Store(db) as store:
        assert len(store.rows()) == 3
    code, stdout, err = run(capsys, "validate", *FAST, "--db", str(db), "--json")
    assert code == 130 and stdout == "" and "interrupted: 3 of" in err  # already measured: 3, the next stops


def test_an_interrupted_calibrate_says_to_run_the_same_command(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    interrupt_after(monkeypatch, 2)
    code, stdout, _ = run(capsys, "calibrate", *FAST, "--db", str(tmp_path / "c.db"), "--no-install")
    flat = " ".join(stdout.split())
    assert code == 130 and "run the same command again" in flat and "`shapewise calibrate` again" not in flat
