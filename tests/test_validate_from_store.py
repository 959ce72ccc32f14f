"""validate --from-db draws its set once and checks in validate itself which of its cases the store holds;
the profile judged is chosen by profile.cost_model, whose measured-on check is the only one run."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from helpers import run
from shapewise.calibrate import judge, validate
from shapewise.draws import validation_cases
from shapewise.errors import ShapewiseError
from shapewise.hardware import get_gpu
from shapewise.measure import Timing
from shapewise.profile import _shipped, cost_model, find, save
from shapewise.store import Store

H200_ENV = {"device": "cuda:0", "gpu_name": "NVIDIA H200", "cuda_version": "13.0", "torch_version": "2.11.0+cu130"}
CPU_ENV = {"device": "cpu", "processor": "AMD EPYC 9654", "torch_version": "2.11.0+cpu"}


def _store(path, env: dict, *, keep=lambda i: True) -> str:
    """A store holding the quick default set drawn with seed 2 (the cases `keep` keeps, by index) as if
    measured in `env`."""
    with Store(path) as store:
        env_id = store.environment_id(env)
        for i, case in enumerate(validation_cases(quick=True, seed=2)):
            if keep(i):
                store.record(env_id=env_id, bench=case.bench, key=case.key, params=case.params, flops=case.flops,
                             bytes=case.bytes, timing=Timing(samples_ms=(0.01, 0.011)))
    return str(path)


@pytest.fixture
def draws(monkeypatch):
    """The seeds of every held-out set drawn, in order."""
    import shapewise.judges

    drawn, draw = [], shapewise.judges.judge_set_cases

    def counted(name, *, seed, **kwargs):
        drawn.append(seed)
        return draw(name, seed=seed, **kwargs)

    monkeypatch.setattr(shapewise.judges, "judge_set_cases", counted)
    return drawn


def test_a_store_holding_the_whole_set_draws_it_once(tmp_path, capsys, draws):
    db = _store(tmp_path / "v.db", H200_ENV)
    code, out, err = run(capsys, "validate", "--from-db", "--quick", "--seed", "2", "--db", db, "--gpu", "h200",
                         "--json")
    assert code == 0 and err == "" and json.loads(out)["measured_on"] == "NVIDIA H200"
    assert draws == [2]  # was [2, 3, 2]: the CLI's check drew the set and another seed's, validate drew it again


def test_a_store_lacking_cases_says_so_once_drawing_another_seed_only_for_that(tmp_path, capsys, draws):
    db = _store(tmp_path / "v.db", H200_ENV, keep=lambda i: i % 2)
    code, _, err = run(capsys, "validate", "--from-db", "--quick", "--seed", "2", "--db", db, "--gpu", "h200",
                       "--json")
    num_cases = len(validation_cases(quick=True, seed=2))
    assert code == 0 and err.count("lacks") == 1, err
    assert f"lacks {num_cases - num_cases // 2} of the default set's {num_cases} cases drawn with --seed 2" in err
    assert draws == [2, 3]


def test_validate_itself_refuses_a_store_of_another_seeds_cases(tmp_path):
    """The check lives in validate's from-store branch: the Python API refuses as the command does."""
    with Store(_store(tmp_path / "v.db", H200_ENV)) as store:
        with pytest.raises(ShapewiseError, match=r"holds none of the \d+ random cases of the default set's \d+ cases "
                                                 r"drawn with seed 5 \(only \d+ that every seed draws\)"):
            validate(store=store, gpu="h200", quick=True, seed=5, from_store=True)


def test_judge_takes_the_cost_model_validate_chose():
    case = validation_cases(quick=True, seed=2)[0]
    rows = [(case, {"median_ms": 0.01})]
    by_model = judge(rows, gpu=cost_model("h200"))
    assert by_model == judge(rows, gpu=get_gpu("h200"), profile=find("h200"))
    assert by_model[0].predicted_ms["calibrated"] != by_model[0].predicted_ms["spec-only"]
    spec = judge(rows, gpu=cost_model("h200", spec_only=True))[0].predicted_ms
    assert math.isnan(spec["calibrated"]) and spec["spec-only"] == by_model[0].predicted_ms["spec-only"]


def test_the_measured_on_check_runs_once(tmp_path, capsys, monkeypatch):
    import shapewise.profile

    checked, check = [], shapewise.profile.check_measured_on
    monkeypatch.setattr(shapewise.profile, "check_measured_on", lambda *a, **kw: checked.append(a) or check(*a, **kw))
    db = _store(tmp_path / "v.db", H200_ENV)
    shipped = str(tmp_path / "h200.json")
    save(_shipped("h200"), shipped)
    code, out, err = run(capsys, "validate", "--from-db", "--quick", "--db", db, "--gpu", "h200", "--profile",
                         shipped, "--json")
    assert code == 0 and err == "" and json.loads(out)["profile"].startswith("calibrated profile of NVIDIA H200")
    assert [a[1] for a in checked] == ["h200"]


@pytest.fixture
def h200_as_h100(tmp_path):
    """The shipped H200 profile written as the h100's: measured on another GPU than the one it names."""
    return str(save(dataclasses.replace(_shipped("h200"), gpu="h100", path=""), tmp_path / "h200-as-h100.json"))


def test_cpu_times_smoke_test_a_cpu_fitted_profile_but_not_another_gpus(tmp_path, capsys, h200_as_h100):
    """CPU times from the store judge a profile as a run on the CPU does (profile.cost_model's check with
    device "cpu"): one fitted on CPU times, yes; one measured on another GPU than --gpu, refused, as the
    variants set refuses it."""
    db = _store(tmp_path / "v.db", CPU_ENV)
    cpu_fitted = save(dataclasses.replace(_shipped("h200"), gpu="h100", environment=CPU_ENV, path=""),
                      tmp_path / "cpu-h100.json")
    args = ("validate", "--from-db", "--quick", "--db", db, "--gpu", "h100", "--json")
    code, out, err = run(capsys, *args, "--profile", str(cpu_fitted))
    assert code == 0 and "measured on the CPU" in err and json.loads(out)["measured_on"] == "the CPU", err
    code, out, err = run(capsys, *args, "--profile", h200_as_h100)
    assert code == 2 and out == "" and err.count("shapewise: error") == 1, err
    assert "its times were measured on NVIDIA H200, not on the h100, so it prices no h100" in err
