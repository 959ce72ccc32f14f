"""What a new user's twenty-second pass found, on the CPU: text the commands and the Python API share named the
command's flags where the API raised it (search's advice where no shape fits, suggest's keep/vary conflict and its
decode warning, check's caveats, verify, plan, the figures, the measuring code); calibrate, validate and bench measured
for a GPU that lacks the dtype before refusing it (or left every prediction blank); a prefill was told that padding its
prompts saves time it does not, and an overlapped collective was rated at 27 times its link; the report said no
shape is predicted faster where suggest lists one, `gpus` hid the V100's fp16, and --emit-config, bench attention
and verify left unsaid what their output assumes or is read against."""

from __future__ import annotations

import json
import re
import warnings

import pytest

import shapewise
from helpers import run
from shapewise import ShapewiseError, ShapewiseWarning, Workload, get_model

GPT2 = get_model("gpt2")


@pytest.mark.parametrize("call, said", [
    (lambda: shapewise.search(params_target=1e5, gpu="h200", workload=Workload()),
     "give a smaller vocab or a larger params_target"),
    (lambda: shapewise.search(params_target=4e12, gpu="h200", workload=Workload()),
     "widen params_tol or change params_target"),
    (lambda: shapewise.search(params_target=7e9, gpu="h200", workload=Workload(tp=1000)),
     "(tp 1000): give a smaller tp"),
    (lambda: shapewise.suggest(GPT2, Workload(seq=1024), gpu="h200", keep=("batch",), vary=("batch",)),
     "keep and vary both name batch"),
    (lambda: shapewise.verify((GPT2, Workload(seq=64)), [("t2", GPT2, Workload(seq=64, tp=2))], gpu="h200",
                              device="cpu"),
     "give tp 1 (got tp 2)"),
])
def test_the_apis_shared_refusals_name_its_arguments_not_the_flags(call, said):
    """search(params_target=1e5) advised "give a smaller --vocab or a larger --params", suggest(keep=..., vary=...)
    "--keep and --vary both name batch", verify(a t=2 workload) "give --tp 1": flags a Python caller never typed."""
    with pytest.raises(ShapewiseError) as err:
        call()
    assert said in str(err.value) and "--" not in str(err.value), str(err.value)


def test_the_apis_caveats_and_warnings_name_its_arguments_not_the_flags():
    """check(a t=16 workload).caveats began "--tp 16: ...", an fp32 check's "--dtype fp32: ...", and suggest's decode
    warning said "--vary batch has no effect"; the API's words are its own, the commands' stay theirs."""
    llama = get_model("llama-2-70b")
    assert shapewise.check(llama, Workload(seq=1024, tp=16), gpu="h200").caveats[0].startswith("tp 16: tensor")
    assert shapewise.check(GPT2, Workload(seq=1024, dtype="fp32"), gpu="h200").caveats[0].startswith("dtype fp32: ")
    said = shapewise.check(GPT2, Workload(seq=1024, overlap_comm=True), gpu="h200").caveats
    assert said == ("overlap_comm has no effect at tp 1: there is no tensor-parallel collective to overlap",), said
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ShapewiseWarning)
        shapewise.suggest(GPT2, Workload(seq=1024, mode="decode"), gpu="h200", vary=("batch",), top=1)
    assert [str(w.message) for w in caught][0].startswith("vary batch has no effect in decode"), caught
    assert not any("--" in str(w.message) for w in caught), caught


def test_the_commands_still_name_their_flags(capsys):
    code, out, err = run(capsys, "search", "--params", "1e5")
    assert code == 2 and "give a smaller --vocab or a larger --params" in err, err
    code, out, err = run(capsys, "suggest", "gpt2", "--keep", "batch", "--vary", "batch")
    assert code == 2 and "--keep and --vary both name batch" in err, err
    code, out, err = run(capsys, "check", "llama-2-70b", "--seq", "1024", "--tp", "16", "--json")
    assert code == 0 and json.loads(out)["caveats"][0].startswith("--tp 16: tensor"), out
    # and a call of the library after a command names its keywords again
    with pytest.raises(ShapewiseError, match=re.escape("widen params_tol or change params_target")):
        shapewise.search(params_target=4e12, gpu="h200", workload=Workload())


def _no_sweep(monkeypatch):
    import shapewise.bench

    def sweep(*args, **kwargs):
        raise AssertionError("the arguments are refused before anything is measured")
    monkeypatch.setattr(shapewise.bench, "sweep", sweep)


@pytest.mark.parametrize("argv", [
    ("calibrate", "--device", "cpu", "--quick", "--gpu", "v100", "--no-install"),
    ("validate", "--device", "cpu", "--quick", "--gpu", "v100"),
])
def test_a_dtype_the_gpu_lacks_is_refused_before_the_set_is_measured(argv, capsys, monkeypatch, tmp_path):
    """`calibrate --device cpu --quick --gpu v100` (bf16 by default) measured its whole set, then refused the V100's
    bf16 in a line offering fp32, which calibrate's --dtype does not take, after a warning that --no-install writes the
    profile nowhere; validate measured and warned that the CPU's times judge nothing, then refused. One line, first."""
    _no_sweep(monkeypatch)
    db = tmp_path / "r.db"
    code, out, err = run(capsys, *argv, "--db", str(db))
    assert code == 2 and err == ("shapewise: error: NVIDIA Tesla V100 SXM2 32GB has no bf16 support in its datasheet; "
                                 "use fp16\n"), err
    assert not db.exists()


def test_calibrate_says_its_refusal_alone_not_after_a_warning(capsys):
    """`calibrate --no-install --comm` warned that the profile would be written nowhere, then refused for want of
    --gpu: a refused command says its one line alone."""
    code, out, err = run(capsys, "calibrate", "--no-install", "--comm")
    assert code == 2 and err == "shapewise: error: name the GPU whose profile gets the link's parameters: --gpu\n", err


def test_the_library_refuses_a_gpu_without_a_profile_to_refit_before_measuring(monkeypatch):
    """calibrate_machine(gpu="a100-80gb") (calibrate --quick on a GPU) measured its 260 calls, then said there is no
    A100 profile to refit."""
    from shapewise.calibrate import calibrate, calibrate_machine

    _no_sweep(monkeypatch)
    with pytest.raises(ShapewiseError, match="no profile for NVIDIA A100 SXM4 80GB to refit"):
        calibrate_machine(store=None, gpu="a100-80gb", device="cpu")
    with pytest.raises(ShapewiseError, match="has no bf16 support in its datasheet; use fp16$"):
        calibrate(store=None, gpu="v100", device="cpu", quick=True)


@pytest.mark.parametrize("argv", [
    ("bench", "gemm", "-m", "64", "-n", "64", "-k", "64"),  # measured, and every prediction left blank
    ("bench", "attention", "--heads", "2", "--head-dim", "64", "--seq", "32", "--backend", "unfused"),
    ("bench", "ops", "gpt2", "--batch", "1", "--seq", "16"),  # measured, warned, then refused
])
def test_bench_refuses_a_dtype_the_gpu_it_predicts_for_lacks_before_measuring(argv, capsys, monkeypatch, tmp_path):
    """`bench gemm ... --gpu v100` (bf16) measured every case and printed an empty prediction column without a word;
    `bench ops ... --gpu v100` and `bench attention` measured, warned that CPU times judge nothing, then refused."""
    _no_sweep(monkeypatch)
    code, out, err = run(capsys, *argv, "--device", "cpu", "--gpu", "v100", "--db", str(tmp_path / "r.db"))
    assert code == 2 and err.startswith("shapewise: error: NVIDIA Tesla V100 SXM2 32GB has no bf16 support"), err
    assert err.count("\n") == 1, err


def test_gpus_shows_the_v100s_tensor_core_peak(capsys):
    """`shapewise gpus` showed fp32, tf32, bf16 and fp8: the V100's row read "16 — — —", as if it ran nothing but
    fp32, where its datasheet's 125 TFLOP/s of fp16 is what check, plan and search price it by."""
    code, out, err = run(capsys, "gpus")
    header = out.splitlines()[0].split("┃")
    v100 = next(line for line in out.splitlines() if line.startswith("v100 ")).split("│")
    assert code == 0 and v100[[h.strip() for h in header].index("fp16")].strip() == "125", out


def test_the_report_says_what_suggest_lists_where_no_shape_is_beyond_the_error(tmp_path):
    """`shapewise report llama2-7b --seq 1024` said "None of the 61 shapes within 2% of the parameters is predicted
    faster", where `suggest` printed layers 32→31, ffn 11008→11264 predicted 1.022× (within the model's error); and
    of llama3-8b at t=2 it said nothing of the micro-batch of 8 that suggest predicts 1.10× faster."""
    from shapewise.document import write_report

    out = tmp_path / "r.md"
    write_report(get_model("llama2-7b"), Workload(seq=1024), gpu="h200", out=str(out))
    text = out.read_text()
    sugg = shapewise.suggest(get_model("llama2-7b"), Workload(seq=1024), gpu="h200", top=5)
    near = sugg.alternatives[0]
    assert not sugg.suggestions and near.speedup > 1
    assert "is predicted faster." not in text
    assert f"the nearest, layers 32→31, ffn 11008→11264, is predicted {near.speedup:.3f}×" in text, text
    out = tmp_path / "t2.md"
    write_report(get_model("llama3-8b"), Workload(seq=1024, tp=2), gpu="h200", out=str(out))
    assert "the fastest that fits, batch 4→8, is predicted 1.102×" in out.read_text()


def test_plan_and_the_figures_name_their_keywords_from_the_api():
    """plan(..., inter_gbs=100) on one node warned "--inter-node-gbs 100 has no effect: ... (--gpus-per-node 8)", and
    layer_data(hiddens=[2048], head_counts=[7]) refused "no hidden size of --hiddens ... of --head-counts"."""
    from shapewise.plan import plan
    from shapewise.plots import attention_data, layer_data

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ShapewiseWarning)
        plan(get_model("llama3-8b"), gpus=8, gpu="h100", global_batch_tokens=2**20, seq=4096, top=1, inter_gbs=100)
    said = [str(w.message) for w in caught]
    assert "inter_gbs 100 has no effect: the 8 GPUs are one node (gpus_per_node 8)" in said, said
    with pytest.raises(ShapewiseError, match="^no hidden size of hiddens is a multiple of any head count of "
                                             "head_counts$"):
        layer_data(gpu="h200", hiddens=[2048], head_counts=[7])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ShapewiseWarning)
        attention_data(gpu="h200", hiddens=[1000, 2048], heads=32)
    assert any(str(w.message).startswith("hiddens 1000: not a multiple of 32 heads") for w in caught), caught


def test_emit_config_says_a_run_setting_it_cannot_write(capsys, tmp_path):
    """`suggest gpt3-2.7b --vary batch --emit-config out.json` wrote suggestion 1 (heads 32→20, ..., batch 4→8,
    1.278×) as a config of the heads and vocab alone and said "suggestion 1 written": the micro-batch, part of the
    speedup, was dropped without a word. It is said; a suggestion of the shape alone is written as before, quietly."""
    out = tmp_path / "s.json"
    argv = ["suggest", "gpt3-2.7b", "--vary", "batch", "--top", "3", "--emit-config", str(out)]
    code, text, err = run(capsys, *argv, "--pick", "1")
    assert code == 0 and "suggestion 1 written" in text
    assert ("warning: --emit-config: suggestion 1's batch 4→8 is how it runs, which a config does not hold: the file "
            "has its shape alone, and its predicted 1.278× is at b=8") in err, err
    code, text, err = run(capsys, *argv, "--pick", "2")
    assert code == 0 and "--emit-config" not in err, err


def test_the_measuring_apis_name_their_keywords(monkeypatch):
    """attention_cases(heads=[4], kv_heads=[3]) refused "--kv-heads 3 does not divide --heads 4", and check_device
    ("cuda") on a machine without a GPU told a Python caller to "measure on the CPU with --device cpu"."""
    import torch

    from shapewise.cases import attention_cases
    from shapewise.measure import check_device

    with pytest.raises(ShapewiseError, match="^kv_heads 3 does not divide heads 4$"):
        attention_cases(batches=[1], heads=[4], kv_heads=[3], head_dims=[64], seqs=[128])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ShapewiseError, match=r"measure on the CPU with device cpu$"):
        check_device("cuda")


def test_the_bench_command_still_names_its_flags(capsys):
    code, out, err = run(capsys, "bench", "attention", "--heads", "4", "--kv-heads", "3", "--head-dim", "64",
                         "--seq", "128", "--device", "cpu")
    assert code == 2 and "--kv-heads 3 does not divide --heads 4" in err, err


def test_a_prefill_is_not_told_to_pad_its_prompts_where_padding_saves_nothing():
    """`check llama3-8b --mode prefill --seq 1000 -b 1` found "b·s = 1·1000 = 1,000 tokens is not a multiple of 64"
    costing 0.52 ms (2.0%), "use a sequence length of 1024": a prompt of 1,000 tokens padded to 1,024 runs 25.89 ms
    against its 25.81, the same real tokens; priced per token of the padded step, it read as a saving (at one token:
    98.4% of the step). A prefill's fix is priced by the step's own time; training's by the token, as before."""
    llama = get_model("llama3-8b")
    prefill = Workload(batch=1, seq=1000, mode="prefill")
    padded = shapewise.predict_step(llama, prefill.replace(seq=1024), gpu="h200").time_ms
    assert padded > shapewise.predict_step(llama, prefill, gpu="h200").time_ms
    for seq in (1000, 1):
        rules = [f.rule for f in shapewise.check(llama, prefill.replace(seq=seq), gpu="h200").findings]
        assert "tokens" not in rules, (seq, rules)
    train = shapewise.check(GPT2, Workload(batch=1, seq=1000), gpu="h200").findings
    assert [f.fix for f in train if f.rule == "tokens"] == [
        "use a sequence length of 1024 (or a batch that makes b·s a multiple of 64)"]


def test_an_overlapped_collective_is_rated_by_its_transfer_not_its_launch(capsys):
    """`check llama3-8b --tp 2 --overlap-comm` printed each hidden collective at "12,179 GB/s │ 2706%" of the link: its
    64 MiB over the 5.5 µs launch left on the critical path. Its time is that launch; its rate is its transfer's, as
    without --overlap-comm (322 GB/s, 72%)."""
    llama = get_model("llama3-8b")
    hidden = shapewise.predict_step(llama, Workload(tp=2, overlap_comm=True), gpu="h200")
    shown = shapewise.predict_step(llama, Workload(tp=2), gpu="h200")
    rate = {c.op.label: (c.gbps, c.fraction_of_peak) for c in shown.costs}
    collectives = [c for c in hidden.costs if c.op.kind == "comm" and c.hidden_ms is not None]
    assert collectives
    for c in collectives:
        assert c.time_ms < 0.01 and c.fraction_of_peak < 1 and c.gbps == pytest.approx(rate[c.op.label][0]), c
    code, out, err = run(capsys, "check", "llama3-8b", "--tp", "2", "--overlap-comm")
    row = next(line for line in out.splitlines() if line.startswith("tp/all_gather "))
    assert "322 GB/s │     72% │ launch overhead 100%" in row, row


def test_verify_names_its_mode_keyword_not_the_measure_flag(monkeypatch):
    """verify(..., mode="model") of a step too big for the device said "time one layer and the head instead:
    --measure layer", the command's flag; the library's keyword is mode."""
    import importlib

    measure = importlib.import_module("shapewise.measure")
    monkeypatch.setattr(measure, "device_memory_bytes", lambda device: int(0.3e9))
    workload = Workload(batch=1, seq=64)
    with pytest.raises(ShapewiseError) as err:
        shapewise.verify((GPT2, workload), [("same", GPT2, workload)], gpu="h200", device="cpu", mode="model")
    assert str(err.value).endswith("time one layer and the head instead: mode layer"), str(err.value)


@pytest.mark.parametrize("extra, said", [
    (("--head-dim", "100"), "head dim 100 is not a multiple of 8: cuDNN's attention"),
    (("--head-dim", "64", "--dtype", "fp32"), "--dtype fp32: FlashAttention and cuDNN take only fp16 and bf16"),
    (("--head-dim", "64", "--dtype", "fp16", "--gpu", "v100"), "v100: FlashAttention and cuDNN's attention need Ampere"),
])
def test_bench_attention_says_what_its_predictions_assume(extra, said, capsys, tmp_path):
    """`bench attention --head-dim 100 --gpu h200` set a prediction of cuDNN's kernel beside each default-backend call,
    where torch runs FlashAttention-2 on padded copies, and said nothing; so at fp32 and on a V100. check, bench ops
    and the figures say each of these (rules.fused_caveats, gpu_caveats); bench attention says them too."""
    argv = ["bench", "attention", "--heads", "2", "--seq", "32", "--pass", "fwd", "--device", "cpu", "--budget-ms", "1",
            "--warmup-ms", "0", "--db", str(tmp_path / "r.db"), *extra]
    code, out, err = run(capsys, *(argv if "--gpu" in extra else [*argv, "--gpu", "h200"]))
    assert code == 0 and said in err, err


def test_verify_prints_the_original_step_its_candidates_are_read_against(capsys, tmp_path):
    """`verify MODEL` printed each candidate's step in ms beside its speedup, and the original's nowhere (the JSON had
    it): the column had no baseline to be read against."""
    pytest.importorskip("torch")
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 344,
                                  "vocab_size": 1001, "max_position_embeddings": 512}))
    code, out, err = run(capsys, "verify", str(config), "--device", "cpu", "--batch", "1", "--seq", "64",
                         "--rounds", "2", "--top", "1")
    assert code == 0 and re.search(r"^the original: [\d.]+ ms a step measured, [\d.]+ ms predicted$", out, re.M), out
