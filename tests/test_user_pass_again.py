"""Another new user's pass over the command line: a slip of the user's said in one line (an error with exit
code 2, or a warning), nothing left behind, and no number priced on a rule the model does not follow."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import run


def one_error(err: str) -> bool:
    return err.count("\n") == 1 and err.startswith("shapewise: error: ")


def test_validate_from_a_store_that_is_not_there_says_so_and_makes_none(capsys, tmp_path):
    missing = tmp_path / "typo.db"
    code, _, err = run(capsys, "validate", "--from-db", "--db", str(missing))
    assert code == 2 and one_error(err) and "no results store at" in err
    assert not missing.exists()


def test_a_figures_values_it_cannot_draw_are_said(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    out = str(tmp_path / "f.png")
    code, _, err = run(capsys, "plot", "attention", "--hiddens", "768", "1000", "--heads", "12", "--out", out)
    assert code == 0 and "warning: --hiddens 1000: not a multiple of 12 heads; left out of the figure (1 of 2)" in err
    code, _, err = run(capsys, "plot", "layer", "--hiddens", "768", "--head-counts", "12", "5", "--out", out)
    assert code == 0 and "warning: --head-counts 5:" in err and "(1 of 2)" in err
    code, _, err = run(capsys, "plot", "layer", "--hiddens", "768", "1000", "--head-counts", "12", "--out", out)
    assert code == 0 and "warning: --hiddens 1000:" in err
    code, _, err = run(capsys, "plot", "layer", "--hiddens", "768", "--head-counts", "12", "6", "--out", out)
    assert code == 0 and err == ""


def test_a_flag_is_read_only_by_its_full_name(capsys):
    # search's and plan's --params, given to suggest, was read as its --params-tol without a word
    code, _, err = run(capsys, "suggest", "gpt2", "--params", "0.3", "--top", "1")
    assert code == 2 and one_error(err) and "unrecognized arguments: --params 0.3" in err
    code, _, err = run(capsys, "check", "gpt2", "--se", "1024")
    assert code == 2 and one_error(err) and "--se" in err
    code, out, _ = run(capsys, "check", "gpt2", "-b8", "--seq=1024")
    assert code == 0 and "b=8 s=1024" in out


@pytest.mark.parametrize("name", ["gpt2", "llama3-8b", "mixtral-8x7b", "tests/data/hf/deepseek-v3.json"])
@pytest.mark.parametrize("mode", ["train", "decode"])
@pytest.mark.parametrize("attention", ["flash", "unfused"])
def test_an_fp8_step_runs_only_its_gemms_in_fp8(name, mode, attention):
    # Its norms, activations, loss and attention run in bf16 (dtypes.activation_dtype), as its memory
    # estimate has it: they were priced at one byte an element and attention at fp8's peak, twice as fast.
    from shapewise.cost import predict_step
    from shapewise.hub import resolve_model
    from shapewise.ops import COMM, GEMM
    from shapewise.shapes import Workload

    shape = resolve_model(name)
    steps = [predict_step(shape, Workload(batch=2, seq=1024, mode=mode, attention=attention, dtype=d), gpu="h100")
             for d in ("fp8", "bf16")]
    pairs = list(zip(*(step.costs for step in steps)))
    assert [a.op.name for a, _ in pairs] == [b.op.name for _, b in pairs]
    for fp8, bf16 in pairs:
        if fp8.op.kind not in (GEMM, COMM):
            assert (fp8.op.name, fp8.op.bytes, fp8.time_ms) == (bf16.op.name, bf16.op.bytes, bf16.time_ms)
            assert fp8.fraction_of_peak == bf16.fraction_of_peak
    assert steps[0].time_ms < steps[1].time_ms


@pytest.mark.parametrize("argv", [("suggest", "gpt2", "--top", "1"),
                                  ("plan", "gpt2", "--gpus", "8", "--global-batch", "8192", "--seq", "1024")])
def test_emit_and_json_together_are_refused(capsys, argv):
    # suggest printed the JSON and plan the flags, each dropping the other flag without a word
    code, out, err = run(capsys, *argv, "--emit", "megatron", "--json")
    assert code == 2 and out == "" and one_error(err) and "give one of them" in err


def test_bench_ops_at_t2_leaves_its_collectives_out_and_says_so(capsys, tmp_path):
    # each collective was measured "alone" and recorded as failed: ShapewiseError: unknown benchmark 'op'
    pytest.importorskip("torch")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
                                  "vocab_size": 256, "hidden_act": "silu"}))
    code, out, err = run(capsys, "bench", "ops", "--config", str(config), "--batch", "1", "--seq", "16", "--tp", "2",
                         "--mode", "prefill", "--db", str(tmp_path / "r.db"), "--device", "cpu", "--warmup-ms", "0",
                         "--budget-ms", "1")
    assert code == 0 and " 0 failed" in out and "unknown benchmark" not in out and "tp/all_gather" not in out
    assert "warning: t=2: the tensor-parallel collectives (tp/all_gather" in err and "bench comm" in err


@given(batch=st.integers(1, 64), name=st.sampled_from(["mixtral-8x7b", "tests/data/hf/deepseek-v3.json"]))
@settings(max_examples=40, deadline=None)
def test_a_decoding_step_runs_only_the_experts_its_tokens_are_routed_to(batch, name):
    # b=1 of Mixtral (top 2 of 8) priced all 8 experts a row each: 4x the experts' weights streamed, 37.6 ms
    # for a step of 12.3; the routed rows' work is what the experts' GEMMs hold, at least one row an expert
    from shapewise.hub import resolve_model
    from shapewise.ops import model_ops
    from shapewise.shapes import Workload

    shape = resolve_model(name)
    ups = [op for op in model_ops(shape, Workload(batch=batch, seq=512, mode="decode")) if op.name == "moe/experts/up"]
    assert 1 <= len(ups) <= 2 and all(op.count % shape.num_moe_layers == 0 for op in ups)
    routed, experts = batch * shape.top_k, shape.num_experts
    reached = experts * (1 - (1 - shape.top_k / experts) ** batch)  # uniform routing's expected experts
    active = sum(op.count for op in ups) // shape.num_moe_layers
    assert abs(active - reached) <= 0.5
    assert shape.top_k <= active <= min(experts, routed) and (batch > 1 or active == shape.top_k)
    assert sum(op.m * op.count for op in ups) == routed * shape.num_moe_layers  # every routed row, once
    assert max(op.m for op in ups) - min(op.m for op in ups) <= 1  # as even as whole rows go


def test_plan_says_a_sequence_past_the_models_positions_as_check_does(capsys):
    code, _, err = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", "32768", "--seq", "4096", "--top", "1")
    assert code == 0 and "warning: sequence 4,096 is longer than the model's 1,024 learned positions" in err
    code, _, err = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", "8192", "--seq", "1024", "--top", "1")
    assert code == 0 and err == ""


@pytest.mark.parametrize("dtype", ["fp32", "tf32"])
def test_fused_attention_in_a_dtype_the_fused_kernels_do_not_take_is_said(capsys, dtype):
    code, _, err = run(capsys, "check", "gpt2", "--seq", "1024", "--dtype", dtype)
    assert code == 0 and f"warning: --dtype {dtype}: FlashAttention and cuDNN take only fp16 and bf16" in err
    code, _, err = run(capsys, "check", "gpt2", "--seq", "1024", "--dtype", dtype, "--attention", "unfused")
    assert code == 0 and err == ""


def test_a_reading_command_given_a_file_that_is_no_store_is_not_told_to_start_one(capsys, tmp_path):
    # results, report and plot only read a store: "or a new path to start a store" then led to another error
    text = tmp_path / "notes.db"
    text.write_text("not a database\n")
    code, _, err = run(capsys, "results", "--db", str(text))
    assert code == 2 and one_error(err) and "is not a results store" in err and "new path" not in err
    code, _, err = run(capsys, "bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "cpu", "--db", str(text))
    assert code == 2 and one_error(err) and "or a new path to start a store" in err


@pytest.mark.parametrize("tokens", ["0.5", "1e-3", "2.5"])
def test_plan_refuses_a_fraction_of_a_token_to_train_on(capsys, tokens):
    # --tokens 0.5 planned "0.0 h" of training: a count of tokens is whole and at least one
    code, _, err = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", "65536", "--seq", "1024", "--tokens", tokens)
    assert code == 2 and one_error(err) and "the tokens to train on must be a whole number" in err


def test_plan_reads_a_token_count_written_with_an_exponent(capsys):
    code, out, _ = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", "65536", "--seq", "1024", "--tokens", "2e9")
    assert code == 0 and " h" in out


def test_calibrate_comm_without_torchrun_names_itself(capsys, tmp_path):
    # it said "bench comm needs several ranks", a command the user had not typed
    code, _, err = run(capsys, "calibrate", "--comm", "--device", "cpu", "--gpu", "h200", "--db", str(tmp_path / "c.db"))
    assert code == 2 and one_error(err) and "calibrate --comm needs several ranks" in err
    assert "-m shapewise calibrate --comm" in err


def test_fused_attention_on_a_v100_is_said_to_run_another_kernel(capsys):
    # torch's FlashAttention and cuDNN kernels need Ampere or newer: a V100 runs the memory-efficient one
    code, out, err = run(capsys, "check", "gpt2", "--gpu", "v100", "--dtype", "fp16", "--seq", "1024")
    assert code == 0 and "warning: v100: FlashAttention and cuDNN's attention need Ampere or newer" in err
    code, out, err = run(capsys, "check", "gpt2", "--gpu", "v100", "--dtype", "fp16", "--seq", "1024", "--json")
    assert code == 0 and any("Ampere or newer" in line for line in json.loads(out)["caveats"])
    for argv in (("--gpu", "v100", "--dtype", "fp16", "--attention", "unfused"), ("--gpu", "a100-80gb")):
        code, _, err = run(capsys, "check", "gpt2", "--seq", "1024", *argv)
        assert code == 0 and "Ampere" not in err


def test_a_config_json_that_is_a_folder_is_said_to_be_one(capsys, tmp_path):
    # it said "…/config.json: folder has no config.json", which reads as nonsense
    folder = tmp_path / "snapshot" / "config.json"
    folder.mkdir(parents=True)
    code, _, err = run(capsys, "check", "--config", str(folder))
    assert code == 2 and one_error(err) and "config.json: a folder, not a file" in err
