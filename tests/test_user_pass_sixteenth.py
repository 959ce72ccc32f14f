"""What a new user's sixteenth pass found: plan --params's refusals named flags only search has, and a CPU-fitted
profile given for another GPU was first refused for its GPU, sending the user to a --gpu refused in turn."""

from __future__ import annotations

import dataclasses

from helpers import run
from shapewise.profile import _shipped, save


def _one_line_error(capsys, *argv) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (code, out, err)
    return err


def test_plan_params_refusals_say_whose_flags_they_name(capsys):
    """The user ran `plan --params 1000 --gpus 8 ...` and was told to "give a smaller --vocab", and for
    --params 1e14 to "widen --params-tol": plan has neither flag, and giving one was refused as unrecognized."""
    layout = ("--gpus", "8", "--global-batch", "8192", "--seq", "4096")
    for params in ("1000", "1e14"):
        err = _one_line_error(capsys, "plan", "--params", params, *layout)
        assert "`shapewise search`'s" in err and "a vocab of 32,000 and 5%" in err, err
    code, _, err = run(capsys, "plan", "--params", "1000", "--vocab", "500", *layout)
    assert code == 2 and "unrecognized arguments" in err  # the flag the advice names is search's alone


def test_a_cpu_fitted_profile_for_another_gpu_is_refused_for_its_cpu_times_first(capsys, tmp_path):
    """The user gave `check gpt2 --profile p.json`, p.json fitted on CPU times for the h100: told "give --gpu
    h100", they did, and were refused again, now because the profile's times were the CPU's."""
    shipped = _shipped("h200")
    cpu = save(dataclasses.replace(shipped, gpu="h100", path="", environment={**shipped.environment, "device": "cpu"}),
               tmp_path / "cpu-h100.json")
    for gpu in ("h200", "h100"):
        err = _one_line_error(capsys, "check", "gpt2", "--seq", "1024", "--gpu", gpu, "--profile", str(cpu))
        assert "measured on the CPU" in err and "give --gpu" not in err, err
    h100 = {**shipped.environment, "gpu_name": "NVIDIA H100 80GB HBM3"}  # an H100's own: refused as before
    foreign = save(dataclasses.replace(shipped, gpu="h100", path="", environment=h100), tmp_path / "h100.json")
    err = _one_line_error(capsys, "check", "gpt2", "--seq", "1024", "--profile", str(foreign))
    assert "give --gpu h100, or add --borrow-profile" in err, err
