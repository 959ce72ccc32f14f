"""A new user's pass over the command line: input that was taken silently, or refused with the wrong
cause, is now said in one line (a warning, or an error with exit code 2)."""

from pathlib import Path

import pytest

from helpers import run
from shapewise.measure import Timing
from shapewise.store import Store

VERIFY = Path(__file__).parent.parent / "benchmarks" / "results" / "h200-verify" / "verify-gpt3-2.7b.json"


def one_error(err: str) -> bool:
    return err.count("\n") == 1 and err.startswith("shapewise: error: ")


def test_a_verify_run_of_another_model_is_refused(capsys, tmp_path):
    code, _, err = run(capsys, "plot", "suggestions", "gpt2", "--verified", str(VERIFY), "--out", str(tmp_path / "v.png"))
    assert code == 2 and one_error(err) and "another model" in err and "heads 32" in err
    assert not (tmp_path / "v.png").exists()


def test_tensor_parallelism_past_a_node_and_an_idle_overlap_are_said(capsys):
    code, _, err = run(capsys, "check", "gpt2", "--tp", "12")
    assert code == 0 and "warning" in err and "NVLink" in err and "8 GPUs" in err
    code, _, err = run(capsys, "check", "gpt2", "--tp", "4", "--overlap-comm", "--seq", "1024")
    assert code == 0 and err == ""
    code, _, err = run(capsys, "check", "gpt2", "--overlap-comm")
    assert code == 0 and "warning: --overlap-comm has no effect at --tp 1" in err


def test_plan_says_when_no_layout_exists_at_all(capsys):
    for gpus in ("296", "100000000"):  # 8·37: every data-parallel degree keeps the factor 37
        code, out, err = run(capsys, "plan", "llama3-8b", "--gpus", gpus, "--global-batch", "1048576", "--seq", "4096")
        assert code == 2 and one_error(err) and "no layout of" in err and "divides" in err, err
        assert "memory" not in err.replace("whatever the memory", "") and out == ""
    code, out, err = run(capsys, "plan", "llama3-70b", "--gpus", "8", "--global-batch", "1048576", "--seq", "4096")
    assert code == 0 and "fits in memory" in out  # layouts exist, none fits: memory is the cause


def test_plan_help_names_every_kind_of_model(capsys):
    code, out, _ = run(capsys, "plan", "--help")
    assert code == 0 and "config.json path" in " ".join(out.split()) and "hub id" in " ".join(out.split())


def test_plan_marks_a_peak_at_the_optimizer_step(capsys):
    code, out, _ = run(capsys, "plan", "llama3-70b", "--gpus", "512", "--gpu", "h200", "--global-batch", "65536",
                       "--seq", "128", "--top", "12")
    assert code == 0 and "/–/–" in out and "the peak is at the optimizer step" in out


def test_check_says_a_peak_is_at_the_optimizer_step(capsys):
    code, out, _ = run(capsys, "check", "llama3-70b", "--tp", "8")
    assert code == 0 and "at the optimizer step" in " ".join(out.split())
    code, out, _ = run(capsys, "check", "gpt2")
    assert code == 0 and "optimizer step" not in out and "activations" in out


@pytest.fixture
def store(tmp_path):
    db = tmp_path / "r.db"
    with Store(db) as s:
        env = s.environment_id({"device": "cpu", "processor": "test"})
        s.record(env_id=env, bench="gemm", key="k", params={"m": 1}, timing=Timing(samples_ms=(1.0,)))
        s.record(env_id=env, bench="bmm", key="b", params={"m": 1}, timing=Timing(samples_ms=(1.0,)))
    return str(db)


def test_results_bench_is_checked_and_filters_the_table(capsys, store, tmp_path):
    code, _, err = run(capsys, "results", "--db", store, "--bench", "foo")
    assert code == 2 and one_error(err) and "no such bench" in err and "it holds bmm, gemm" in err
    code, _, err = run(capsys, "results", "--db", store, "--bench", "kernels", "--export", str(tmp_path / "k.json"))
    # a bench this store has none of: nothing to export, refused (an export of no rows is a file --import refuses)
    assert code == 2 and one_error(err) and "no rows of that bench" in err and not (tmp_path / "k.json").exists()
    code, _, err = run(capsys, "results", "--db", store, "--bench", "foo", "--export", str(tmp_path / "x.csv"))
    assert code == 2 and not (tmp_path / "x.csv").exists()
    code, out, _ = run(capsys, "results", "--db", store, "--bench", "gemm")
    assert code == 0 and "gemm" in out and "bmm" not in out
    assert out.splitlines()[0] == f"{store}: 1 environment"  # the title on one line


def test_results_names_the_missing_store_given(capsys, tmp_path):
    code, _, err = run(capsys, "results", "--db", str(tmp_path / "none" / "x.db"))
    assert code == 2 and one_error(err) and "(--db)" in err and "give --db" not in err


def test_an_unknown_flag_points_to_the_commands_help(capsys):
    code, _, err = run(capsys, "check", "gpt2", "--bogus")
    assert code == 2 and one_error(err) and "`shapewise check --help`" in err


def _validation_store(tmp_path, *, seed: int, keep) -> str:
    """A store holding the quick default set's cases drawn with `seed` that `keep` keeps, as if measured."""
    from shapewise.judges import judge_set_cases

    db = tmp_path / "v.db"
    with Store(db) as s:
        env = s.environment_id({"device": "cuda", "gpu_name": "NVIDIA H200"})
        for case in filter(keep, judge_set_cases("default", seed=seed, quick=True).cases):
            s.record(env_id=env, bench=case.bench, key=case.key, params=case.params, timing=Timing(samples_ms=(1.0,)))
    return str(db)


def test_validate_from_the_store_says_which_cases_it_lacks(capsys, tmp_path):
    from shapewise.judges import judge_set_cases

    shared = {c.key for c in judge_set_cases("default", seed=3, quick=True).cases}
    db = _validation_store(tmp_path, seed=2, keep=lambda case: case.key in shared)
    args = ("validate", "--from-db", "--quick", "--db", db, "--gpu", "h200", "--json")
    code, _, err = run(capsys, *args, "--seed", "2")
    assert code == 2 and one_error(err) and "none of the" in err and "--seed 2" in err
    (tmp_path / "v.db").unlink()
    seeded = sorted({c.key for c in judge_set_cases("default", seed=2, quick=True).cases} - shared)
    db = _validation_store(tmp_path, seed=2, keep=lambda case: case.key != seeded[0])
    code, _, err = run(capsys, *args, "--seed", "2")
    assert code == 0 and "warning" in err and "lacks 1 of" in err, err


class Stop(Exception):
    pass


def test_long_cpu_runs_are_said_before_they_start(capsys, tmp_path, monkeypatch):
    import shapewise.calibrate

    def stop(**_):
        raise Stop

    monkeypatch.setattr(shapewise.calibrate, "calibrate", stop)
    monkeypatch.setattr(shapewise.calibrate, "validate", stop)
    db = str(tmp_path / "c.db")
    with pytest.raises(Stop):
        run(capsys, "calibrate", "--device", "cpu", "--db", db)
    err = capsys.readouterr().err
    assert "warning" in err and "2,980 cases" in err and "--quick" in err and "never installed" in err
    with pytest.raises(Stop):
        run(capsys, "validate", "--device", "cpu", "--db", db)
    err = capsys.readouterr().err
    assert "warning" in err and "454 held-out cases" in err and "--quick" in err
    with pytest.raises(Stop):
        run(capsys, "calibrate", "--quick", "--device", "cpu", "--db", db)
    assert capsys.readouterr().err == ""
