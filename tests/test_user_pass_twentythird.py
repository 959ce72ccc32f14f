"""What a new user's twenty-third pass found, on the CPU: a prefill at tensor parallelism gathered every token for an
output head that scores the last one alone; the analytic side priced fp8 GEMMs in layouts torch._scaled_mm does not
run, which bench refuses; `results --import` took any text for a timestamp; profile refusals named the command's flags
to a Python caller; and suggest's decode warning read awkwardly."""

from __future__ import annotations

import csv
import io
import json
import warnings

import numpy as np
import pytest

import shapewise
from helpers import run
from shapewise import ShapewiseError, ShapewiseWarning, Workload, get_model
from shapewise.ops import model_ops


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_a_served_steps_head_gathers_the_rows_it_scores(mode):
    """A prefill of b=4, s=2048 at t=2 gathered all 8192 tokens (64 MiB, 0.208 ms on an H200) before its output
    head, which scores each sequence's last token: 4 rows. Training still gathers every token."""
    llama = get_model("llama3-8b")
    w = Workload(batch=4, seq=2048, tp=2, mode=mode)
    ops = {(op.name, op.pass_): op for op in model_ops(llama, w)}
    assert ops[("tp/logits", "fwd")].m == ops[("logits", "fwd")].m == 4
    assert ops[("tp/logits", "fwd")].bytes == 4 * llama.hidden * 2
    train = {(op.name, op.pass_): op for op in model_ops(llama, w.replace(mode="train"))}
    assert train[("tp/logits", "fwd")].m == train[("logits", "fwd")].m == 8192


@pytest.mark.parametrize("options, said", [
    (dict(layout="nn"), "give layout nt"),
    (dict(layout="tn"), "give layout nt"),
    (dict(layout="nt", batch=8), "give layout nt and batch 1"),
    (dict(layout=np.array(["nt", "tn"])), "give layout nt"),
])
def test_predict_gemm_refuses_the_fp8_gemms_torch_does_not_run(options, said):
    """predict_gemm(..., dtype="fp8", layout="tn") gave a time for an fp8 GEMM torch._scaled_mm never runs, which
    bench refuses to measure; now it refuses it as bench does, in the caller's own words."""
    with pytest.raises(ShapewiseError, match="fp8 GEMMs run only unbatched in the nt layout") as err:
        shapewise.predict_gemm(4096, 4096, 4096, dtype="fp8", **options)
    assert str(err.value).endswith(said), str(err.value)
    assert shapewise.predict_gemm(4096, 4096, 4096, dtype="fp8", layout="nt").time_ms > 0
    with pytest.raises(ShapewiseError, match="A100 SXM4 80GB has no fp8 support"):  # the GPU first: no layout runs
        shapewise.predict_gemm(4096, 4096, 4096, dtype="fp8", gpu="a100-80gb", **options)


def test_the_figures_refuse_the_fp8_gemms_torch_does_not_run(capsys, tmp_path):
    """`plot gemm --dtype fp8` (layout nn by default) and `plot attention --kind bmm --dtype fp8` (a batched score
    product) drew curves of fp8 GEMMs that never run, and the fused attention figures drew bf16 attention under an fp8
    title; a case read from a store is left unpriced, not refused."""
    code, _, err = run(capsys, "plot", "gemm", "--dtype", "fp8", "--values", "64", "128", "--out", str(tmp_path / "g.png"))
    assert code == 2 and err.strip().endswith("give --layout nt"), err
    code, _, err = run(capsys, "plot", "attention", "--hiddens", "2048", "--heads", "16", "--kind", "bmm", "--dtype",
                       "fp8", "--out", str(tmp_path / "a.png"))
    assert code == 2 and "no score BMM runs in fp8" in err and err.strip().endswith("give --dtype bf16"), err
    code, _, err = run(capsys, "plot", "attention-heads", "--head-counts", "16", "32", "--head-dim", "128", "--dtype",
                       "fp8", "--out", str(tmp_path / "h.png"))  # was drawn in bf16 under an fp8 title
    assert code == 2 and "no fused attention runs in fp8" in err and err.strip().endswith("give --dtype bf16"), err
    code, _, err = run(capsys, "plot", "gemm", "--dtype", "fp8", "--layout", "nt", "--values", "64", "128", "--out",
                       str(tmp_path / "g.png"))
    assert code == 0, err
    from shapewise.cases import gemm_cases, predict_cases
    assert predict_cases(gemm_cases([64], [64], [64], layouts=("nn", "nt"), dtype="fp8"), gpu="h200")[0] is None



def _exported(tmp_path, fmt: str, when: str):
    """One measured GEMM exported as `fmt`, its created_utc rewritten to `when`."""
    from shapewise.measure import Timing
    from shapewise.store import Store, case_key

    params = {"m": 128, "n": 256, "k": 64, "batch": 1, "layout": "nt", "dtype": "bf16"}
    path = tmp_path / f"rows.{fmt}"
    with Store(tmp_path / "source.db") as s:
        s.record(env_id=s.environment_id({"gpu_name": "NVIDIA H200"}), bench="gemm",
                 key=case_key({"bench": "gemm", **params}), params=params, timing=Timing(samples_ms=(1.0, 1.1, 1.2)))
        s.export(path, fmt=fmt)
    if fmt == "json":
        rows = json.loads(path.read_text())
        rows[0]["created_utc"] = when
        path.write_text(json.dumps(rows))
    else:
        lines = path.read_text().splitlines()
        head, row = lines[0].split(","), next(csv.reader([lines[1]]))
        row[head.index("created_utc")] = when
        out = io.StringIO()
        csv.writer(out).writerows([head, row])
        path.write_text(out.getvalue())
    return path


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_an_import_refuses_a_timestamp_that_is_no_time(capsys, tmp_path, fmt):
    """`results --import` stored 'yesterday' as a row's created_utc, which the report then compares as text to pick
    a case's latest measurement; now it is refused in one line, and a time with another offset or none is kept as
    the UTC time it is."""
    db = str(tmp_path / "target.db")
    code, _, err = run(capsys, "results", "--db", db, "--import", str(_exported(tmp_path, fmt, "yesterday")))
    assert code == 2 and "created_utc is 'yesterday', not an ISO 8601 time" in err and "nothing imported" in err, err
    assert len(err.strip().splitlines()) == 1, err
    for given, kept in (("2026-12-06 07:47:07+02:00", "2026-12-06T05:47:07+00:00"),
                        ("2026-12-06T05:47:07", "2026-12-06T05:47:07+00:00")):
        code, _, err = run(capsys, "results", "--db", db, "--import", str(_exported(tmp_path, fmt, given)))
        assert code == 0, err
        from shapewise.store import Store
        with Store(db) as store:
            assert [row["created_utc"] for row in store.rows()] == [kept]


@pytest.mark.parametrize("device, said", [
    ("cpu", "give gpu h200, or pass borrow_profile=True to price h100 with it"),
    ("cuda", "pass borrow_profile=True to judge it as the h100's"),
])
def test_a_profile_of_another_gpu_is_refused_in_the_callers_words(tmp_path, device, said):
    """validate(gpu="h100", profile=<the H200's>) said "give --gpu h200, or add --borrow-profile": flags a Python
    caller never typed; the command still names them."""
    from shapewise.calibrate import validate
    from shapewise.profile import find
    from shapewise.store import Store

    with Store(tmp_path / "v.db") as store, pytest.raises(ShapewiseError) as err:
        validate(store=store, gpu="h100", profile=find("h200"), device=device)
    assert said in str(err.value) and "--" not in str(err.value), str(err.value)


def test_the_command_still_names_the_profile_flags(capsys, tmp_path):
    from shapewise.profile import find, save

    path = save(find("h200"), tmp_path / "h200.json")
    code, _, err = run(capsys, "validate", "--gpu", "h100", "--profile", str(path), "--device", "cpu",
                       "--db", str(tmp_path / "v.db"))
    assert code == 2 and "give --gpu h200, or add --borrow-profile to price h100 with it" in err, err


def test_suggests_decode_warning_reads_well_in_the_api_and_the_command(capsys):
    """suggest(vary=("batch",)) in decode ended "give batch to price another"; now it says how to price another batch
    in each caller's terms."""
    gpt2 = get_model("gpt2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ShapewiseWarning)
        shapewise.suggest(gpt2, Workload(seq=1024, mode="decode"), gpu="h200", vary=("batch",), top=1)
    said = [str(w.message) for w in caught if "vary batch" in str(w.message)]
    assert len(said) == 1 and said[0].endswith("; price another batch with Workload(batch=N)"), said
    code, _, err = run(capsys, "suggest", "gpt2", "--seq", "1024", "--mode", "decode", "--vary", "batch", "--top", "1")
    assert code == 0 and "; price another batch with --batch N\n" in err, err


def test_calibrate_without_a_gpu_is_refused_before_it_warns(capsys, monkeypatch, tmp_path):
    """`calibrate --no-install` on a machine without a GPU warned that the profile it fits is written nowhere, then
    was refused: no GPU. The device is now checked first, and the refusal is the one line said."""
    import shapewise.measure

    def no_gpu(device, *, present=True):  # the name is good; no GPU is here to measure on
        if present and device != "cpu":
            raise ShapewiseError(f"no CUDA GPU is visible here ({device}); measure on the CPU with --device cpu")
        return device
    monkeypatch.setattr(shapewise.measure, "check_device", no_gpu)
    code, out, err = run(capsys, "calibrate", "--no-install", "--db", str(tmp_path / "c.db"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "no CUDA GPU is visible here" in err, err
