"""What a new user's twentieth pass over plan, search, report, plot, results, suggest --json, check's findings and the
Python API found: an inference step that did not fit was told to use recomputation, ZeRO and `plan`, which shed and plan
training. plan's Adam update and data-parallel reduction left out GPT-2's learned position table, so check's "as plan
prices a step" was 0.01 ms off. The HTML or Markdown report left out what its prices assume (a sequence past the
learned positions), which check --json carries; the attention and layer figures said nothing of padded head dims,
fp32 and tf32 or a V100, of which check warns, and plan and search said nothing of a V100. `plot gemm -n 5 --dim n`
dropped -n; `plot suggestions --verified` dropped --top, --tp, --mode and the cost flags; `plan --tokens --emit
megatron` dropped --tokens; `suggest --mode decode --vary batch` took --vary batch and varied nothing. search on a
V100 was told to use fp32, which its --dtype does not take. plan printed gpt2's 6 ms step as 0.01 s and a run of
0.76 s as 0.0 h."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run


def test_an_inference_step_that_does_not_fit_is_told_inference_remedies(capsys):
    """`check llama3-70b --mode decode -b 1 --gpu h100` (147 GiB of weights and cache on a 75 GiB card) was told to
    "use more tensor parallelism, recomputation or ZeRO (`shapewise plan` searches them)": recomputation and ZeRO
    shed training state an inference step does not keep, and plan plans training. It is told what shrinks an
    inference step, and fp8 only where the GPU runs it. The tp finding's "data parallelism for the other 4× GPUs"
    (of t=4 → 1) said the four GPUs were others; it names the ranks on the same GPUs, replicas when inferring."""
    fixes = {}
    for gpu in ("h100", "a100-80gb"):
        code, out, err = run(capsys, "check", "llama3-70b", "--mode", "decode", "-b", "1", "--gpu", gpu, "--json")
        assert code == 0, err
        memory = json.loads(out)["findings"][0]
        assert memory["rule"] == "memory", memory
        fixes[gpu] = memory["fix"]
    for fix in fixes.values():
        assert "recomputation" not in fix and "ZeRO" not in fix and "plan" not in fix, fix
        assert "tensor parallelism" in fix and "KV cache" in fix, fix
    assert "--dtype fp8" in fixes["h100"] and "fp8" not in fixes["a100-80gb"], fixes
    code, out, err = run(capsys, "check", "llama3-8b", "--gpu", "h200", "--json")
    assert "recomputation or ZeRO" in json.loads(out)["findings"][0]["fix"]  # training keeps its advice
    for mode, ranks in (("train", "4 data-parallel ranks on the 4 GPUs"), ("decode", "4 replicas on the 4 GPUs")):
        code, out, err = run(capsys, "check", "gpt2", "--tp", "4", "-s", "1024", "--mode", mode, "--json")
        tp = [f for f in json.loads(out)["findings"] if f["rule"] == "tp"]
        assert tp and tp[0]["fix"] == f"use t=1 (and {ranks})", tp


def _plan_row(capsys, model, *, gpus, batch, seq, tp):
    code, out, err = run(capsys, "plan", model, "--gpus", str(gpus), "--global-batch", str(batch * seq), "--seq",
                         str(seq), "--top", "400", "--json")
    assert code == 0, err
    return next(p for p in json.loads(out)["plans"] if p["tp"] == tp and p["pp"] == 1 and p["micro_batch"] == batch
                and p["recompute"] == "none" and p["zero"] == 0)


def test_plan_counts_a_learned_position_table_in_adams_update(capsys):
    """`check gpt2 --gpu h100 -b 8 -s 1024` said "Adam's update adds 1.27 ms (31.83 ms in all, as `shapewise plan`
    prices a step)"; plan's one-GPU row priced 31.82 ms: its optimizer and data-parallel reduction counted the
    parameters of the layers, the vocabulary and the norms, and left out GPT-2's 1,024 × 768 position table, which
    its memory held. Both now update the same parameters, at t=1 and t=4."""
    for tp in (1, 4):
        code, out, err = run(capsys, "check", "gpt2", "--gpu", "h100", "-b", "8", "-s", "1024", "--tp", str(tp), "--json")
        assert code == 0, err
        totals = json.loads(out)["totals"]
        row = _plan_row(capsys, "gpt2", gpus=tp, batch=8, seq=1024, tp=tp)
        assert abs(row["times_ms"]["optimizer_ms"] / totals["optimizer_ms"] - 1) < 1e-9, (row, totals)
        # the whole step too, at t=4 the replicas' gradients all-reduced as check prices them, launch included
        assert abs(row["step_ms"] / totals["with_optimizer_ms"] - 1) < 1e-9, (tp, row["step_ms"], totals)


def test_the_report_says_what_its_prices_assume(capsys, tmp_path):
    """`report gpt2 --out r.md` priced a sequence of 2,048 on a model of 1,024 learned positions and said so on the
    terminal alone: the file, made to be read by others, said nothing, where `check gpt2 --json` carries the line.
    The report now carries every warning check --json does (what reading guessed and what the prices assume), built
    by the command or by the API's build_report and write_report."""
    pytest.importorskip("matplotlib")
    code, out, err = run(capsys, "check", "gpt2", "--json")
    said = json.loads(out)["warnings"]
    assert any("learned positions" in line for line in said), said
    code, out, err = run(capsys, "report", "gpt2", "--out", str(tmp_path / "r.md"))
    assert code == 0, err
    text = (tmp_path / "r.md").read_text()
    for line in said:
        assert f"Warning: {line}" in text, line
    from shapewise import Workload, get_model
    from shapewise.document import build_report

    text = build_report(get_model("gpt2"), Workload(batch=4, seq=2048), gpu="h200", fmt="md")  # the API's too
    assert "Warning: sequence 2,048 is longer than the model's 1,024 learned positions" in text


def test_the_attention_figures_say_what_check_says_of_fused_attention(capsys, tmp_path):
    """`plot attention-heads --head-dim 100`, `plot layer --hiddens 2000 --head-counts 20` (head dim 100), `plot
    attention --dtype fp32` and `plot layer --gpu v100 --dtype fp16` drew fused attention where its kernels do not
    run as priced (padded copies, torch's memory-efficient kernel) without a word; check warns of each, and the
    figures said only of head dims past 256. They say what check says, from one rule (rules.fused_caveats)."""
    pytest.importorskip("matplotlib")
    out = ["--out", str(tmp_path / "f.png")]
    for argv, said in ((["attention-heads", "--head-dim", "100", "--head-counts", "8", "16"], "head dim 100 is not"),
                       (["layer", "--hiddens", "2000", "--head-counts", "20"], "head dim 100 is not"),
                       (["attention", "--hiddens", "1024", "--heads", "16", "--dtype", "fp32"], "--dtype fp32: Flash"),
                       (["layer", "--hiddens", "2048", "--head-counts", "16", "--gpu", "v100", "--dtype", "fp16"],
                        "v100: FlashAttention and cuDNN's attention need Ampere")):
        code, _, err = run(capsys, "plot", *argv, *out)
        assert code == 0 and said in err, (argv, err)
    code, _, err = run(capsys, "plot", "attention", "--hiddens", "1024", "--heads", "16", "--dtype", "fp32", "--kind",
                       "bmm", *out)
    assert code == 0 and "warning" not in err, err  # the score BMM runs no fused kernel


def test_plot_gemm_refuses_a_size_for_the_dim_it_sweeps(capsys, tmp_path):
    """`plot gemm --dim n --values 64:1024:64 -m 1024 -k 1024 -n 5` drew the sweep and dropped -n 5 without a word
    (its help: "n, where it is not the swept dim"). A size given for the swept dim is refused in one line, before
    --mkdir makes a folder; the other two keep their default of 8192."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "new" / "g.png"
    code, _, err = run(capsys, "plot", "gemm", "--dim", "n", "--values", "64:1024:64", "-m", "1024", "-k", "1024",
                       "-n", "5", "--out", str(out), "--mkdir")
    assert code == 2 and len(err.splitlines()) == 1 and "-n 5 gives the swept dim (--dim n)" in err, err
    assert not out.parent.exists()
    code, _, err = run(capsys, "plot", "gemm", "--dim", "k", "--values", "64", "128", "-n", "5", "--out", str(out),
                       "--mkdir")
    assert code == 0 and out.exists(), err


def test_a_drawn_verify_run_says_which_flags_it_does_not_use(capsys, tmp_path):
    """`plot suggestions gpt3-2.7b --verified RUN.json --top 2 --tp 4 --mode decode` drew the very figure it drew
    without them, without a word: a verify run is drawn whole (every candidate it measured, with the predictions it
    made), and verify measures one GPU's training step alone. One warning names what had no effect."""
    pytest.importorskip("matplotlib")
    measured = Path(__file__).parents[1] / "benchmarks/results/h200-verify/verify-gpt3-2.7b.json"
    run_json = tmp_path / "run.json"  # as verify --json writes it now: with the GPU its speedups were predicted for
    run_json.write_text(json.dumps([{**row, "gpu": "h200"} for row in json.loads(measured.read_text())]))
    argv = ["plot", "suggestions", "gpt3-2.7b", "--verified", str(run_json), "--out", str(tmp_path / "v.png")]
    code, _, err = run(capsys, *argv, "--top", "2", "--tp", "4", "--mode", "decode", "--spec-only")
    assert code == 0, err
    assert err.splitlines() == ["shapewise: warning: --top 2, --tp 4, --mode decode, --spec-only have no effect with "
                                "--verified: the figure draws every candidate the verify run measured, with the "
                                "predictions it made, of one GPU's training step"], err
    code, _, err = run(capsys, *argv)
    assert code == 0 and err == "", err


def test_a_dtype_the_gpu_lacks_is_refused_naming_one_the_command_takes(capsys):
    """`search --params 1e8 --gpu v100` (bf16 by default) was told "use one of fp32, fp16", and `search --gpu
    a100-80gb --dtype fp8` "use one of fp32, tf32, bf16, fp16": search's --dtype takes bf16, fp16 and fp8, so the
    advice led to argparse's refusal. The refusal names the dtypes of the GPU that the command takes (every one since
    search's --dtype takes fp32 and tf32, as the library's search() does)."""
    code, out, err = run(capsys, "search", "--params", "1e8", "--gpu", "v100")
    assert code == 2 and err.strip().endswith("has no bf16 support in its datasheet; use one of fp32, fp16"), err
    code, out, err = run(capsys, "search", "--params", "1e8", "--gpu", "a100-80gb", "--dtype", "fp8")
    assert code == 2 and err.strip().endswith("has no fp8 support in its datasheet; use one of fp32, tf32, bf16, "
                                              "fp16"), err
    code, out, err = run(capsys, "search", "--params", "1e8", "--gpu", "v100", "--dtype", "fp32", "--top", "1")
    assert code == 0, err
    code, out, err = run(capsys, "check", "gpt2", "--gpu", "v100")  # check takes all four of the V100's
    assert code == 2 and err.strip().endswith("use one of fp32, fp16"), err


def test_plan_and_search_say_that_a_volta_gpu_runs_no_fused_attention(capsys):
    """`check gpt2 --gpu v100 --dtype fp16` warns that FlashAttention and cuDNN's attention need Ampere, so that
    fused attention there is priced by kernels the V100 does not run; `plan ... --gpu v100 --dtype fp16` and `search
    --gpu v100 --dtype fp16` priced the same attention without a word (plan said a sequence past the positions and
    the dtype's caveat, not the GPU's). Both say it, in their --json's warnings too."""
    volta = "v100: FlashAttention and cuDNN's attention need Ampere or newer"
    for argv in (["plan", "gpt2", "--gpu", "v100", "--dtype", "fp16", "--gpus", "8", "--global-batch", "65536",
                  "--seq", "1024", "--top", "1", "--json"],
                 ["search", "--params", "1e8", "--gpu", "v100", "--dtype", "fp16", "--top", "1", "--json"]):
        code, out, err = run(capsys, *argv)
        assert code == 0 and volta in err, (argv, err)
        assert any(line.startswith(volta) for line in json.loads(out)["warnings"]), argv
    code, out, err = run(capsys, "search", "--params", "1e8", "--top", "1", "--json")
    assert code == 0 and err == "" and json.loads(out)["warnings"] == [], err


def test_vary_batch_in_decode_says_it_has_no_effect(capsys):
    """`suggest llama3-8b --mode decode -b 1 --vary batch,tp` took --vary batch, put it in its JSON's "vary" and
    ranked no other batch: a decode step keeps the sequences it serves at once, by design. It says so in one warning,
    from the API too; prefill still varies it."""
    argv = ["suggest", "llama3-8b", "-b", "1", "--vary", "batch,tp", "--top", "3", "--json"]
    code, out, err = run(capsys, *argv, "--mode", "decode")
    assert code == 0 and "--vary batch has no effect in decode" in err, err
    assert "--vary batch has no effect in decode" in json.loads(out)["warnings"][0]
    code, out, err = run(capsys, *argv, "--mode", "prefill", "-s", "1")
    assert code == 0 and "--vary batch" not in err, err
    assert any("batch" in s["changes"] for s in json.loads(out)["suggestions"]), out


def test_plan_says_tokens_to_train_have_no_effect_on_its_flags(capsys):
    """`plan gpt2 ... --tokens 1e9 --emit megatron` printed the flags and dropped the time to train it was asked for
    without a word (--json and --emit together are refused; the network flags that cannot act are said)."""
    argv = ["plan", "gpt2", "--gpus", "8", "--global-batch", "65536", "--seq", "1024", "--top", "1", "--emit",
            "megatron"]
    code, out, err = run(capsys, *argv, "--tokens", "1e9")
    assert code == 0 and out.startswith("--num-layers 12"), out
    assert err == ("shapewise: warning: --tokens has no effect with --emit megatron: the flags say no time to train "
                   "(leave out --emit)\n"), err
    code, out, err = run(capsys, *argv)
    assert code == 0 and err == "", err


def test_plan_prints_a_short_step_and_a_short_run_in_figures_that_say_something(capsys):
    """`plan gpt2 --gpus 8 --global-batch 8192 --seq 1024 --tokens 1e6` printed a step of "0.01" s (6.26 ms) and a
    run of "0.0 h" (0.76 s); at one token a step, "0.00". A step under a second keeps three figures, and a run
    under an hour is said in minutes or seconds; the long ones read as before."""
    code, out, err = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", "8192", "--seq", "1024", "--top", "1",
                         "--tokens", "1e6")
    row = out.splitlines()[-1]
    # its data-parallel all-reduce launched; the run takes whole steps (123 of 8,192 tokens: the twenty-seventh pass)
    assert code == 0 and "│ 0.00626 │" in row and row.endswith("│   0.77 s"), row
    from shapewise.plan import _duration

    assert [_duration(s) for s in (0.5, 90, 5400, 9e6)] == ["0.5 s", "1.5 min", "1.5 h", "104.2 days"]


def test_what_the_pass_noticed_and_left_is_mended(capsys, tmp_path):
    """Left by the pass, mended after it: plan's advice where nothing fits named a smaller global batch, which
    changes no layout's memory (one sequence a micro-batch is among those tried); search wrote "1472 within 5%";
    `results --mkdir` without a file to write or read was taken silently; the report said "1 sequences"."""
    code, out, err = run(capsys, "plan", "llama3-70b", "--gpus", "1", "--global-batch", "1048576", "--seq", "8192")
    assert code == 0 and "one sequence a micro-batch among them" in out and "smaller global" not in out, out
    code, out, err = run(capsys, "search", "--params", "7e9", "--params-tol", "0.5", "--gpu", "h200")
    assert code == 0, err
    predicted = out.split(" per second), ")[1].split(" within")[0]
    assert int(predicted.replace(",", "")) >= 1000 and "," in predicted, out.splitlines()[0]
    code, out, err = run(capsys, "results", "--db", str(tmp_path / "r.db"), "--mkdir")
    assert "--mkdir has no effect without --export or --import" in err, err
    report = tmp_path / "r.md"
    code, out, err = run(capsys, "report", "gpt2", "--batch", "1", "--seq", "512", "--out", str(report))
    assert code == 0 and "1 sequence" in report.read_text() and "1 sequences" not in report.read_text()
