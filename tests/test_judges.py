"""validate's independent sets: deterministic per seed, apart from calibration's draws, and run end
to end on the CPU."""

import json
from pathlib import Path

import pytest

from shapewise.draws import calibration_cases, drawn_beside, validation_cases
from shapewise.errors import ShapewiseError, ShapewiseWarning
from shapewise.judges import (
    attention_set,
    judge_set_cases,
    models_set,
    read_configs,
    wide_set,
)

CONFIGS = "tests/data/hf"


def _keys(judge_set):
    return [c.key for c in judge_set.cases]


@pytest.mark.parametrize("make", [wide_set, attention_set])
def test_a_set_is_the_same_for_a_seed_and_another_for_another(make):
    assert _keys(make(seed=3)) == _keys(make(seed=3))
    assert not set(_keys(make(seed=3))) & set(_keys(make(seed=4)))


def test_the_models_set_is_the_same_for_a_seed():
    shapes = read_configs([CONFIGS])
    one, again, other = (models_set(shapes, seed=s) for s in (1, 1, 2))
    assert _keys(one) == _keys(again) and [s.name for s in one.steps] == [s.name for s in again.steps]
    assert [s.name for s in one.steps] != [s.name for s in other.steps]
    assert {s.mode for s in one.steps} == {"train", "prefill", "decode"} and len(one.steps) == 3 * len(shapes)


def test_the_sets_never_judge_what_calibration_measured():
    """Disjoint from the designed set and from every random draw the shipped profile was fitted on
    (extended 1-3, edges 1-4, batched 1-3, large 1-2, skinny 1-3, streams 1-2, heads 1-2, rows 1-2);
    the models set may measure a designed shape for a step, never judges it alone."""
    seeds = {"extended": 3, "edges": 4, "batched": 3, "large": 2, "skinny": 3, "streams": 2, "heads": 2, "rows": 2}
    fitted = {c.key for c in calibration_cases()} | {c.key for kind, last in seeds.items() for s in range(1, last + 1)
                                                     for c in drawn_beside(**{kind: s})}
    for seed in (1, 2, 11):
        for drawn in (wide_set(seed=seed), attention_set(seed=seed)):
            assert not set(_keys(drawn)) & fitted and not drawn.fitted
    models = models_set(read_configs([CONFIGS]), seed=1)
    assert set(_keys(models)) & fitted == models.fitted  # the designed shapes of its steps, and only those


def test_the_wide_set_reaches_what_calibration_does_not():
    cases = wide_set(seed=1).cases
    dims = [(c.params["m"], c.params["n"], c.params["k"]) for c in cases]
    assert min(m for m, _, _ in dims) == 1 and max(max(d) for d in dims) > 16384
    assert {c.params["layout"] for c in cases} == {"nn", "nt", "tn"}
    assert {d % 2 for d, _, _ in dims} == {0, 1} and any(all(x % 64 == 0 for x in d) for d in dims)
    scores = [c for c in cases if c.bench == "bmm" and c.params["m"] == c.params["n"] and c.params["layout"] == "nt"]
    assert scores and any(c.params["m"] & (c.params["m"] - 1) for c in scores)  # lengths not powers of two
    assert all(c.flops <= 2e12 for c in cases)  # one case stays well under ~50 ms on an H200


def test_the_default_set_is_validates_own():
    assert _keys(judge_set_cases("default", seed=2)) == [c.key for c in validation_cases(seed=2)]


def test_the_models_set_needs_configs():
    with pytest.raises(ShapewiseError, match="--configs"):
        judge_set_cases("models", seed=1)


@pytest.mark.parametrize("name", ["wide", "attention", "models"])
def test_each_set_runs_end_to_end_on_the_cpu(name, tmp_path, capsys):
    pytest.importorskip("torch")
    from shapewise.cli import main

    db = str(tmp_path / "r.db")
    configs = ["--configs", CONFIGS] if name == "models" else []  # the other sets refuse it: they read none
    args = ["validate", "--set", name, "--quick", "--device", "cpu", "--gpu", "h200", "--db", db,
            "--warmup-ms", "1", "--budget-ms", "2", *configs, "--json"]
    assert main(args) == 0
    measured = json.loads(capsys.readouterr().out)
    categories = {row["category"] for row in measured["summary"]}
    assert {"wide": "gemm", "attention": "attention fwd", "models": "step train"}[name] in categories
    if name == "models":
        assert {"step prefill", "step decode", "memory"} <= categories
    assert main([*args[:-1], "--from-db", "--json"]) == 0  # judged again from the store alone
    assert json.loads(capsys.readouterr().out)["summary"] == measured["summary"]


def test_machine_factors_are_the_median_ratio_per_family_and_refit_from_scratch():
    import dataclasses

    from shapewise.cases import predict_case
    from shapewise.hardware import get_gpu
    from shapewise.machine import (
        FAMILIES,
        LAUNCH_SAMPLE,
        family,
        machine_cases,
        machine_factors,
        with_factors,
    )
    from shapewise.profile import CostModel, find

    gpu = get_gpu("h200")
    params = find(gpu).params
    cases = machine_cases()
    assert {family(c) for c in cases} == set(FAMILIES) and [c.key for c in cases] == [c.key for c in machine_cases()]
    assert not any(c.params.get("window") for c in cases)  # FlexAttention compiles each window: seconds apiece
    scale = {"gemm": 1.04, "bmm": 0.97, "flash": 1.1, "memory": 1.0, "stream": 1.06}
    # Each call 0.3 µs slower beyond its family's factor; the calls of a few µs tell that alone.
    predicted = {c.key: predict_case(c, gpu=CostModel(gpu, params)) for c in cases}
    short = cases[-LAUNCH_SAMPLE:]  # drawn last, so that the families' sample stays the one measured before
    assert all(family(c) for c in short) and sum(predicted[c.key] < 0.015 for c in short) >= 25
    rows = [(c, {"median_ms": predicted[c.key] * (1.0 if c in short else scale[family(c)]) + 0.0003}) for c in cases]
    factors = machine_factors(rows, gpu=gpu, params=params)
    assert factors.pop("launch")["ms"] == pytest.approx(0.0003)
    assert {name: round(f["factor"], 6) for name, f in factors.items()} == scale
    refitted = with_factors(params, {**factors, "launch": {"ms": 0.0003}})
    assert (refitted.machine_gemm, refitted.machine_flash, refitted.machine_launch_ms) == (1.04, 1.1, 0.0003)
    # Fitted again on a profile that has factors already: the same factors, not their product.
    assert machine_factors(rows, gpu=gpu, params=refitted)["gemm"]["factor"] == pytest.approx(1.04)
    # And the predictions move by them, losses still adding up to the time over the ideal.
    case = next(c for c in cases if family(c) == "gemm")
    assert predict_case(case, gpu=CostModel(gpu, refitted)) == pytest.approx(1.04 * predicted[case.key] + 0.0003)
    assert dataclasses.replace(refitted, machine_gemm=1.0).machine_bmm == 0.97
    # A GEMM of a few rows streams its weights: priced by the stream factor, not the GEMMs'.
    stream = next(c for c in cases if family(c) == "stream")
    assert min(stream.params["m"], stream.params["n"]) <= 16 and stream.params["batch"] == 1
    assert predict_case(stream, gpu=CostModel(gpu, refitted)) == pytest.approx(1.06 * predicted[stream.key] + 0.0003)


def test_a_machines_memory_factor_scales_the_stream_and_not_the_launch():
    # An H100 borrowing the H200's profile streams 11% faster than that profile says but launches no
    # faster: scaling the whole time (the factor before 2026-12-06) priced its small norms and ropes 10-20%
    # fast and put 16 of 69 real models' steps over 5% (benchmarks/RESULTS.md, "an H100 measured").
    import dataclasses

    from shapewise.cases import predict_case
    from shapewise.hardware import get_gpu
    from shapewise.machine import family, machine_cases, machine_factors
    from shapewise.profile import CostModel, find

    gpu = get_gpu("h100")
    params = find(gpu).params
    memory = [c for c in machine_cases() if family(c) == "memory"]
    at = lambda factor, case: predict_case(case, gpu=CostModel(gpu, dataclasses.replace(params, machine_memory=factor)))
    launch = {c.key: 2 * at(1.0, c) - at(2.0, c) for c in memory}
    assert all(0 < launch[c.key] < at(1.0, c) for c in memory)
    for case in memory:  # the factor moves the streaming part alone
        assert at(0.9, case) == pytest.approx(launch[case.key] + 0.9 * (at(1.0, case) - launch[case.key]))
    rows = [(c, {"median_ms": launch[c.key] + 0.89 * (at(1.0, c) - launch[c.key])}) for c in memory]
    assert machine_factors(rows, gpu=gpu, params=params)["memory"]["factor"] == pytest.approx(0.89)


def test_calibrate_quick_says_and_writes_this_machines_factors_and_time_per_call(tmp_path, monkeypatch, capsys):
    # The whole --quick path on the CPU, its sweep standing in for an H100 whose calls take 0.3 µs more
    # and whose GEMMs run 3% slower than the profile it borrows.
    import json

    import shapewise.bench
    import shapewise.measure
    from shapewise.bench import SweepResult
    from shapewise.cases import predict_case
    from shapewise.cli import main
    from shapewise.hardware import get_gpu
    from shapewise.machine import LAUNCH_SAMPLE, family
    from shapewise.profile import CostModel, find

    monkeypatch.setenv("SHAPEWISE_PROFILES", str(tmp_path / "profiles"))
    gpu = get_gpu("h100")
    model = CostModel(gpu, find(gpu).params)

    def sweep(cases, **_):
        short = cases[-LAUNCH_SAMPLE:] if lost is None else []
        rows = [(c, {"median_ms": predict_case(c, gpu=model) * (1.0 if c in short or family(c) != "gemm" else 1.03)
                     + 0.0003}) for c in cases if c not in (lost or [])]
        return SweepResult(rows, measured=len(rows), environment={"gpu_name": "NVIDIA H100 80GB HBM3"})

    monkeypatch.setattr(shapewise.bench, "sweep", sweep)
    monkeypatch.setattr(shapewise.measure, "check_device", lambda device, **kw: device)  # as if a GPU were here
    for lost in (None, "short"):
        if lost:  # none of the calls of a few µs came back: said, and none added
            from shapewise.machine import machine_cases

            lost = machine_cases()[-LAUNCH_SAMPLE:]
        out = tmp_path / f"machine-{bool(lost)}.json"
        assert main(["calibrate", "--quick", "--device", "cuda", "--db", str(tmp_path / "s.db"), "--no-install",
                     "--out", str(out)]) == 0
        said = capsys.readouterr().out
        written = json.loads(out.read_text())
        params, gemm = written["params"], written["fit"]["machine"]["factors"]["gemm"]
        # An H100 borrows the H200's profile: its GEMMs' factor is measured and said, not applied
        assert "gemm: this machine runs +3.0% against the profile" in said or lost
        assert "not applied: on a GPU that borrows the h200's profile" in said
        assert gemm["applied"] is False and params.get("machine_gemm", 1.0) == 1.0
        if not lost:
            assert "launch: this machine's calls take +0.30 µs each against the profile (29 calls measured under 15 µs" in said  # one of the 30 is 21 µs on an H100
            assert params["machine_launch_ms"] == pytest.approx(0.0003, abs=2e-6)
            assert gemm["factor"] == pytest.approx(1.03, abs=1e-4)
        else:  # the GEMMs' factor then takes in what the calls add
            assert "launch: too few of its calls of a few µs" in said and params.get("machine_launch_ms", 0.0) == 0.0
            assert gemm["factor"] > 1.031
    # On the GPU the profile was fitted on (an H200), the GEMMs' factor is applied
    gpu, lost = get_gpu("h200"), None
    model = CostModel(gpu, find(gpu).params)
    monkeypatch.setattr(shapewise.bench, "sweep", lambda cases, **kw: SweepResult(
        sweep(cases, **kw).rows, measured=len(cases), environment={"gpu_name": "NVIDIA H200"}))
    out = tmp_path / "machine-h200.json"
    assert main(["calibrate", "--quick", "--device", "cuda", "--db", str(tmp_path / "s2.db"), "--no-install",
                 "--out", str(out)]) == 0
    assert "not applied" not in capsys.readouterr().out
    assert json.loads(out.read_text())["params"]["machine_gemm"] == pytest.approx(1.03, abs=1e-4)


def test_a_profile_measured_elsewhere_is_never_installed_as_a_gpus(tmp_path, monkeypatch, capsys):
    import argparse

    from shapewise.cli.calibrate import _install_profile
    from shapewise.cli.common import console as _console
    from shapewise.profile import find

    monkeypatch.setenv("SHAPEWISE_PROFILES", str(tmp_path / "profiles"))
    profile = find("h200")
    for measured in ({"cpu_model": "AMD EPYC"}, {"gpu_name": "NVIDIA A100-SXM4-80GB"}):
        args = argparse.Namespace(no_install=False, out=str(tmp_path / "p.json"))
        _install_profile(profile, args, _console(), measured)
        assert "not installed" in capsys.readouterr().out
        assert not (tmp_path / "profiles" / "h200.json").exists() and (tmp_path / "p.json").exists()
    _install_profile(profile, argparse.Namespace(no_install=False, out=None), _console(), {"gpu_name": "NVIDIA H200"})
    assert (tmp_path / "profiles" / "h200.json").exists()


def test_predict_cases_prices_each_case_as_predict_case_does():
    """The vectorized pricing of a list of cases (GEMMs of two dtypes, batched GEMMs, fused attention,
    memory-bound ops, a dtype the GPU has no peak for) gives each case predict_case's own time."""
    from shapewise.cases import attention_cases, gemm_cases, predict_case, predict_cases
    from shapewise.draws import calibration_cases
    from shapewise.profile import cost_model

    model = cost_model("h200")
    designed = calibration_cases(dtype="bf16")
    mixed = designed[::97] + gemm_cases([1, 4097], [8192], [333], layouts=("tn",), dtype="fp32")
    mixed += gemm_cases([64], [64], [64], dtype="fp8")
    mixed += attention_cases(batches=[2], heads=[16], kv_heads=[4], head_dims=[128], seqs=[1000], backends=("default", "math"))
    assert {c.bench for c in mixed} == {"gemm", "bmm", "attention", "op"}
    one_by_one = [predict_case(c, gpu=model) for c in mixed]
    together = predict_cases(mixed, gpu=model)
    assert [t is None for t in together] == [t is None for t in one_by_one]
    assert [t for t in together if t is not None] == pytest.approx([t for t in one_by_one if t is not None], rel=1e-9)
    assert None in one_by_one  # the math backend is not priced: kept as None, in its place


def test_a_folder_of_configs_leaves_out_the_ones_it_cannot_read_by_name(tmp_path):
    later = Path("tests/data/hf-later")
    for name in ("gpt-oss-20b.json", "gemma-4-26b-a4b.json", "qwen3.5-27b.json"):
        (tmp_path / name).write_text((later / name).read_text())
    with pytest.warns(ShapewiseWarning) as record:
        shapes = read_configs([tmp_path])
    assert [s.name for s in shapes] == ["gpt-oss-20b"]
    err = "\n".join(str(w.message) for w in record)
    assert "not attention transformers: qwen3.5-27b.json" in err and "cannot read" in err and "gemma-4" in err
    with pytest.raises(ShapewiseError, match="global_head_dim"):  # named alone, it is an error
        read_configs([tmp_path / "gemma-4-26b-a4b.json"])


def test_a_models_matrix_is_judged_as_a_matrix_not_as_attention():
    # calibrate.judge named every op that was not memory-bound "attention …": a models set's GEMMs among them.
    from shapewise.calibrate import judge
    from shapewise.hardware import get_gpu
    from shapewise.judges import judge_set_cases

    drawn = judge_set_cases("models", seed=1, configs=["tests/data/hf/gpt2.json"])
    gemm = next(c for c in drawn.cases if c.bench == "op" and c.params["kind"] == "gemm")
    assert judge([(gemm, {"median_ms": 1.0})], gpu=get_gpu("h200"))[0].category == "gemm"
