"""What a new user's sixteenth pass found: plan --params's refusals named flags only search has; a CPU-fitted
profile given for another GPU was refused for its GPU first, sending the user to a --gpu refused in turn; an
export of a store none of whose rows could be found wrote an empty file without a word; validate --from-db
called a store holding the --quick set's measurements one holding none, and ignored --force, --cuda-graph and
--mkdir; a hub id cached in several snapshots without refs/main was said not to be cached; calibrate dropped a
draw given beside --quick on a GPU or --comm, and kept a --no-install fit nowhere, without a word; suggest said
no tensor-parallel degree fits where it had tried none larger; an fp8 bench bmm was told to give no -b, which
it requires; a Markdown report's figure that could not be written was blamed on the report; an output path
that is a folder was given an example file in another format than its name asked for. And configs read without a
word: a router over no experts priced as a dense model, a null activation as the type's default, a nested
text_config of another model ignored."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from helpers import run
from shapewise.profile import _shipped, save

HF = Path(__file__).parent / "data" / "hf"


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


def test_an_export_of_a_store_whose_rows_cannot_be_found_is_refused_not_written_empty(capsys, tmp_path):
    """`results --check` told the user to save what still reads with `results --export rows.csv`; on a store whose
    pages past the schema were overwritten the export said "wrote 0 rows" and exit 0, not a word of the damage."""
    from shapewise.measure import Timing
    from shapewise.store import Store, case_key

    db = tmp_path / "m.db"
    with Store(db) as store:
        env = store.environment_id({"device": "cpu", "gpu_name": "AMD EPYC", "torch": "2.5.1"})
        for n in (64, 128, 192):
            params = {"m": 256, "n": n, "k": 256, "batch": 1, "layout": "nn", "dtype": "bf16"}
            store.record(env_id=env, bench="gemm", key=case_key({"bench": "gemm", **params}), params=params,
                         timing=Timing(samples_ms=(0.02, 0.021, 0.022)), flops=2 * 256 * n * 256, bytes=1)
    raw = db.read_bytes()
    db.write_bytes(raw[:4096] + bytes(len(raw) - 4096))  # the schema's page kept, every table's page zeroed
    code, out, err = run(capsys, "results", "--db", str(db), "--export", str(tmp_path / "rows.csv"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "beyond reading" in err, (code, out, err)
    assert not (tmp_path / "rows.csv").exists()


def test_validate_from_the_store_says_it_holds_the_quick_set_only(capsys, tmp_path):
    """The user ran `validate --quick`, then `validate --from-db` as the README shows it, and was told the store
    held no validation measurements at all: it held the quick set's, which --from-db judges with --quick."""
    from shapewise.judges import judge_set_cases
    from shapewise.measure import Timing
    from shapewise.store import Store

    db = tmp_path / "v.db"
    with Store(db) as store:
        env = store.environment_id({"device": "cuda", "gpu_name": "NVIDIA H200"})
        for case in judge_set_cases("default", seed=2, quick=True).cases:
            store.record(env_id=env, bench=case.bench, key=case.key, params=case.params,
                         timing=Timing(samples_ms=(1.0,)))
    err = _one_line_error(capsys, "validate", "--from-db", "--db", str(db), "--gpu", "h200")
    assert "only of its --quick set: add --quick" in err and "on a GPU first" not in err, err
    code, _, err = run(capsys, "validate", "--from-db", "--quick", "--db", str(db), "--gpu", "h200")
    assert code == 0, err
    empty = tmp_path / "e.db"
    with Store(empty) as store:
        store.environment_id({"device": "cuda", "gpu_name": "NVIDIA H200"})
    err = _one_line_error(capsys, "validate", "--from-db", "--db", str(empty), "--gpu", "h200")
    assert "run `shapewise validate` on a GPU first" in err, err


def test_a_hub_id_cached_in_several_snapshots_without_refs_main_is_said_to_be_cached(capsys, tmp_path, monkeypatch):
    """The user's cache held two snapshots of acme/tiny (fetched by revision, so no refs/main): `check acme/tiny`
    said it "is not in the Hugging Face cache", which the user could see it was."""
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = (HF / "llama-3.2-1b-instruct.json").read_text()
    for revision in ("aaa111", "bbb222"):
        snapshot = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / revision
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").write_text(config)
    err = _one_line_error(capsys, "check", "acme/tiny")
    assert "not in the Hugging Face cache" not in err and "2 snapshots of it (aaa111, bbb222)" in err, err
    assert "no refs/main" in err and "give the path of the one meant" in err and "snapshots/REVISION" in err


def test_a_draw_given_to_calibrate_quick_on_a_gpu_or_to_comm_is_refused_not_dropped(capsys, monkeypatch):
    """The user ran `calibrate --quick --extended` on a GPU to have the quick refit learn more shapes: --quick there
    refits this machine's factors alone, and --extended was dropped without a word (so was a draw beside --comm)."""
    import shapewise.calibrate
    import shapewise.measure

    class Refit(Exception):
        pass

    def refit(**_):
        raise Refit

    monkeypatch.setattr(shapewise.calibrate, "calibrate_machine", refit)
    monkeypatch.setattr(shapewise.measure, "check_device", lambda device, **kw: device)  # as if a GPU were here
    err = _one_line_error(capsys, "calibrate", "--quick", "--device", "cuda", "--extended", "--edges", "2")
    assert "--extended and --edges: --quick on a GPU refits this machine's factors alone" in err, err
    err = _one_line_error(capsys, "calibrate", "--comm", "--gpu", "h100", "--skinny")
    assert "--skinny: --comm times the collectives alone" in err, err
    try:  # without a draw, --quick on a GPU goes to the machine's refit as before
        run(capsys, "calibrate", "--quick", "--device", "cuda")
        raise AssertionError("calibrate --quick on a GPU did not refit the machine's factors")
    except Refit:
        pass


def test_validate_from_the_store_refuses_the_flags_of_how_to_measure(capsys, tmp_path):
    """The user ran `validate --from-db --force` to have the store's cases measured again: --from-db measures
    nothing, and --force (like --cuda-graph and --mkdir) was ignored without a word."""
    db = str(tmp_path / "none.db")
    for flags, named in ((("--force",), "--force: "), (("--cuda-graph", "--mkdir"), "--cuda-graph and --mkdir: ")):
        err = _one_line_error(capsys, "validate", "--from-db", "--quick", "--gpu", "h200", "--db", db, *flags)
        assert named in err and "--from-db measures nothing" in err, err


def test_suggest_on_a_model_that_does_not_fit_says_it_tried_no_larger_t(capsys):
    """`suggest llama3-8b` (195 GiB at b=4 t=1 on an H200) said no tensor-parallel degree fits and pointed to plan's
    pipeline, ZeRO and recomputation; `check llama3-8b --tp 2` fits in 97.9 GiB: suggest had tried no t above 1."""
    code, out, _ = run(capsys, "suggest", "llama3-8b", "--top", "1")
    flat = " ".join(out.split())
    assert code == 0 and "(t=1 at most: suggest tries no larger)" in flat and "a larger --tp may" in flat, flat
    code, out, _ = run(capsys, "check", "llama3-8b", "--tp", "2")
    assert code == 0 and "memory per GPU 97.9 GiB" in out and "of 131.3 GiB" in out


def test_an_fp8_bmm_is_told_to_give_one_batch_not_none(capsys, tmp_path):
    """`bench bmm -b 2 ... --dtype fp8 --layout nt` said "give --layout nt and no -b"; bench bmm requires -b, and
    without it the user was refused for leaving it out. -b 1 runs (unbatched), and bench gemm has no -b at all."""
    db = ("--device", "cpu", "--db", str(tmp_path / "x.db"))
    err = _one_line_error(capsys, "bench", "bmm", "-b", "2", "-m", "64", "-n", "64", "-k", "64", "--dtype", "fp8",
                          "--layout", "nt", *db)
    assert "give --layout nt and -b 1 (or `shapewise bench gemm`)" in err and "no -b" not in err, err
    err = _one_line_error(capsys, "bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--dtype", "fp8", *db)
    assert err.rstrip().endswith("give --layout nt") and "-b" not in err, err


def test_calibrate_no_install_without_out_says_the_profile_is_kept_nowhere(capsys, monkeypatch):
    """`calibrate --no-install` (no --out) measured and fitted a profile, printed its fit and kept it nowhere: minutes
    of a GPU's time whose profile was lost without a word. Said before measuring, and not where nothing is fitted."""
    import shapewise.calibrate

    class Measured(Exception):
        pass

    def measure(**_):
        raise Measured

    monkeypatch.setattr(shapewise.calibrate, "calibrate", measure)
    for argv, said in ((("--gpu", "h200"), True), (("--gpu", "h200", "--out", "p.json"), False), ((), False)):
        try:
            run(capsys, "calibrate", "--quick", "--device", "cpu", "--no-install", *argv)
        except Measured:
            pass
        err = capsys.readouterr().err
        assert ("--no-install without --out: the profile this run fits is written nowhere" in err) == said, (argv, err)


def test_a_markdown_reports_figure_that_cannot_be_written_is_named(capsys, tmp_path):
    """`report gpt2 --out y.md` where y-breakdown.png was a folder said "cannot write the report to y.md: Is a
    directory": y.md was no folder, and the user looked for the fault in the wrong place."""
    pytest.importorskip("matplotlib")
    (tmp_path / "y-breakdown.png").mkdir()
    err = _one_line_error(capsys, "report", "gpt2", "--seq", "1024", "--out", str(tmp_path / "y.md"))
    assert f"cannot write the report's figure {tmp_path / 'y-breakdown.png'}: Is a directory" in err, err


def test_an_output_that_is_a_folder_is_given_an_example_in_the_format_asked(capsys, tmp_path):
    """`report gpt2 --out notes.md`, notes.md being a folder, was told "e.g. notes.md/out.html": the user had asked
    for Markdown. The example keeps the extension the folder's name asked for, where it is one of the formats."""
    for name, command in (("notes.md", ("report", "gpt2")), ("rows.json", ("results",))):
        (tmp_path / name).mkdir()
        flag = "--export" if command == ("results",) else "--out"
        err = _one_line_error(capsys, *command, flag, str(tmp_path / name), "--db", str(tmp_path / "none.db"))
        assert f"e.g. {tmp_path / name / ('out' + name[name.index('.'):])}" in err, err


# ---- configs it read without a word ----

def _llama(tmp_path, name: str, **changes) -> str:
    import json

    cfg = json.loads((HF / "llama-3-8b.json").read_text())
    path = tmp_path / name
    path.write_text(json.dumps({**cfg, **changes}))
    return str(path)


def test_a_router_over_no_experts_is_refused_not_priced_dense(capsys, tmp_path):
    """The user set Mixtral's num_local_experts to 0 (its num_experts_per_tok 2 left) and read a 7.24B dense model's
    step: a plausible wrong number. Now one line, naming both keys."""
    import json

    cfg = json.loads((HF / "mixtral-8x7b.json").read_text())
    path = tmp_path / "mixtral.json"
    path.write_text(json.dumps({**cfg, "num_local_experts": 0}))
    err = _one_line_error(capsys, "check", str(path))
    assert "num_local_experts 0 but num_experts_per_tok 2" in err
    code, _, err = run(capsys, "check", _llama(tmp_path, "dense.json", num_local_experts=0))  # no router: dense
    assert code == 0 and "experts" not in err


def test_a_null_activation_is_said_priced_with_the_types_default(capsys, tmp_path):
    """hidden_act null (which its model class cannot build) was read as Llama's SiLU without a word."""
    code, _, err = run(capsys, "check", _llama(tmp_path, "null.json", hidden_act=None))
    assert code == 0 and "its hidden_act is null: priced with llama's default activation, silu" in err
    code, _, err = run(capsys, "check", _llama(tmp_path, "named.json"))
    assert code == 0 and "null" not in err


def test_a_nested_text_config_that_disagrees_with_the_top_level_is_said(capsys, tmp_path):
    """A Llama file with a text_config of another model beside its whole top level: the top level was read and
    the text_config ignored without a word. Now said, naming what differs; one that agrees says nothing."""
    code, _, err = run(capsys, "check", _llama(tmp_path, "other.json", text_config={"hidden_size": 64}))
    assert code == 0 and "its text_config describes another model (hidden_size 64 where the top level says 4096)" in err
    code, _, err = run(capsys, "check", _llama(tmp_path, "same.json", text_config={"hidden_size": 4096}))
    assert code == 0 and "text_config" not in err
