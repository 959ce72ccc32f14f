"""A profile fitted on CPU times describes the CPU: validate's variants set judges it in a run on the CPU,
and refuses it, in one exact line, for a run on a GPU (whose times it does not price)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from helpers import run
from shapewise.errors import ShapewiseError
from shapewise.profile import _shipped, check_measured_on, cost_model, load, save

CONFIG = "tests/data/hf/llama-2-7b.json"
QUICK = ("--quick", "--rounds", "2", "--warmup-ms", "1", "--budget-ms", "1")


@pytest.fixture
def cpu_fitted(tmp_path):
    """A profile for the h100 as `calibrate --device cpu --gpu h100` writes one: its environment the CPU's."""
    shipped = _shipped("h200")
    env = {"device": "cpu", "processor": "AMD EPYC 9654", "torch_version": "2.11.0+cpu"}
    return save(dataclasses.replace(shipped, gpu="h100", environment=env, path=""), tmp_path / "cpu-h100.json")


def _refusal(path, device: str, device_arg: str = "device") -> str:  # the library names its keyword, the command --device
    return (f"{path}: its times were measured on the CPU, so it prices no h100: judge it in a run on the CPU "
            f"({device_arg} cpu), not on {device}, or run `shapewise calibrate` on the h100 itself for its profile")


def test_a_cpu_fitted_profile_is_accepted_for_a_run_on_the_cpu_alone(cpu_fitted):
    profile = load(cpu_fitted)
    check_measured_on(profile, "h100", str(cpu_fitted), device="cpu")
    assert cost_model("h100", profile=profile, device="cpu").profile is profile
    for device in ("cuda", "cuda:1"):
        with pytest.raises(ShapewiseError) as refused:
            cost_model("h100", profile=profile, device=device)
        assert str(refused.value) == _refusal(cpu_fitted, device)
    with pytest.raises(ShapewiseError) as refused:  # a prediction, no run: the advice of old
        cost_model("h100", profile=profile)
    assert str(refused.value) == (f"{cpu_fitted}: its times were measured on the CPU, so it prices no h100: run "
                                  "`shapewise calibrate` on the h100 itself for its profile")


def test_a_profile_of_another_gpu_is_refused_on_the_cpu_too(tmp_path):
    shipped = _shipped("h200")  # measured on an H200, written as the h100's
    path = save(dataclasses.replace(shipped, gpu="h100", path=""), tmp_path / "h200-as-h100.json")
    with pytest.raises(ShapewiseError, match="measured on NVIDIA H200, not on the h100"):
        cost_model("h100", profile=load(path), device="cpu")


def test_cpu_times_refitted_on_another_gpu_are_refused_on_the_cpu_too(tmp_path, cpu_fitted):
    """A CPU run takes CPU times as the GPU's, not a machine refit's times measured on another GPU: the
    refusal once stopped at the CPU's environment and let the A100's through."""
    profile = load(cpu_fitted)
    fit = {**profile.fit, "machine": {"factors": {}, "environment": {"gpu_name": "NVIDIA A100-SXM4-80GB"}}}
    path = save(dataclasses.replace(profile, fit=fit, path=""), tmp_path / "cpu-then-a100.json")
    for device in ("cpu", "cuda"):
        with pytest.raises(ShapewiseError) as refused:
            cost_model("h100", profile=load(path), device=device)
        assert "not on cuda" not in str(refused.value)  # a run on the CPU would refuse it too: not advised
    assert str(refused.value).startswith(f"{path}: its times were measured on the CPU, so it prices no h100: run ")
    with pytest.raises(ShapewiseError, match="measured on NVIDIA A100-SXM4-80GB, not on the h100"):
        check_measured_on(load(path), "h100", str(path), device="cpu")


def test_a_refusal_reads_where_the_profile_was_measured_once(tmp_path, cpu_fitted, monkeypatch):
    """check_measured_on asked measured_elsewhere twice, for the run's device and for the CPU: every GPU
    name the profile records was looked up twice."""
    import shapewise.profile as profiles

    looked_up, find = [], profiles.find_gpu
    monkeypatch.setattr(profiles, "find_gpu", lambda name: looked_up.append(name) or find(name))
    profile = load(cpu_fitted)
    fit = {**profile.fit, "machine": {"factors": {}, "environment": {"gpu_name": "NVIDIA A100-SXM4-80GB"}}}
    for device, said in (("cuda", "measured on the CPU"), ("cpu", "measured on NVIDIA A100-SXM4-80GB")):
        looked_up.clear()
        with pytest.raises(ShapewiseError, match=said):
            check_measured_on(dataclasses.replace(profile, fit=fit), "h100", "p.json", device=device)
        assert looked_up == ["NVIDIA A100-SXM4-80GB"]


@pytest.mark.parametrize("gpu", [(), ("--gpu", "h100")])
def test_validate_variants_on_the_cpu_judges_a_cpu_fitted_profile(capsys, cpu_fitted, gpu):
    pytest.importorskip("torch")
    code, out, err = run(capsys, "validate", "--set", "variants", "--configs", CONFIG, "--device", "cpu", *gpu,
                         "--profile", str(cpu_fitted), *QUICK, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["cost_model"].startswith("profile for h100 fitted on CPU times") and doc["candidates_measured"] > 0


def test_validate_variants_on_a_gpu_refuses_a_cpu_fitted_profile_in_one_exact_line(capsys, monkeypatch, cpu_fitted):
    import shapewise.measure

    monkeypatch.setattr(shapewise.measure, "check_device", lambda device, **kw: device)  # as if a GPU were here
    code, out, err = run(capsys, "validate", "--set", "variants", "--configs", CONFIG, "--gpu", "h100",
                         "--profile", str(cpu_fitted), *QUICK)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.rstrip("\n").endswith(_refusal(cpu_fitted, "cuda", "--device")), err
