"""What a new user's twenty-fourth pass found, on the CPU: predict_attention priced fp8 attention, which SDPA never
runs, at its bf16 time without a word, and took any pass, head counts and numbers (the profile check itself asked it
for a "bwd" pass, read as forward and backward); plan paired ZeRO-3 (FSDP) with pipeline stages, which Megatron-LM
does not run; a ModelShape's source took any value, and the report crashed on one that is not text; validate took
the given profile for its GPU twice; the memory finding advised a smaller micro-batch at a micro-batch of one and
at a peak the activations are gone from; the memory estimate dropped a training layout given for a serving step;
Gemma 2's windowed layers, at a sequence within their window, were two rows alike beside the global ones; and the
report said nothing of a results store whose measurements of the step were all another device's."""

from __future__ import annotations

import dataclasses

import pytest

from helpers import run
from shapewise import ShapewiseError, ShapewiseWarning, Workload, get_model, load_config
from shapewise.cost import predict_attention

ATTENTION = dict(batch=1, heads=16, kv_heads=16, seq=1024, head_dim=64, gpu="h200")


def test_predict_attention_refuses_fp8_which_sdpa_does_not_run():
    """predict_attention(..., dtype="fp8") returned 0.0166 ms, the bf16 time, as fp8's; predict_gemm and bench refuse
    the fp8 GEMMs torch does not run, and the attention figures refused fp8 already."""
    assert predict_attention(**ATTENTION, dtype="bf16") > 0
    with pytest.raises(ShapewiseError, match=r"no fused attention runs in fp8 .*: give dtype bf16$"):
        predict_attention(**ATTENTION, dtype="fp8")


@pytest.mark.parametrize("given, said", [
    (dict(pass_="bwd"), "unknown pass_ 'bwd'; use one of fwd, fwdbwd"),  # was priced as forward and backward
    (dict(kv_heads=3), "3 kv_heads do not divide 16 heads"),  # was priced
    (dict(batch=0), "batch: the batch must be a positive whole number"),  # ZeroDivisionError
    (dict(seq=-5), "seq: the sequence length must be a positive whole number"),  # ZeroDivisionError
    (dict(batch=1.5), "batch: the batch must be a whole number"),  # TypeError
    (dict(dtype="bf17"), "unknown dtype 'bf17'"),  # KeyError
    (dict(causal="no"), "causal must be True or False"),  # a truthy "no", read as causal
])
def test_predict_attention_refuses_what_it_cannot_price_in_one_line(given, said):
    with pytest.raises(ShapewiseError, match=said):
        predict_attention(**{**ATTENTION, **given})


def test_the_profile_check_prices_the_passes_predict_attention_takes():
    """profile._check_predicts asked for pass_ "bwd", which meant forward and backward only because any pass but
    "fwd" did: the shipped profile still loads, its attention checked in the passes there are."""
    from shapewise.profile import _shipped

    assert _shipped("h200").gpu == "h200"


def test_plan_pairs_no_fsdp_with_pipeline_stages():
    """plan llama2-70b on 64 H100s ranked t=2 p=8 d=4 zero=3 second (322 of 996 fitting layouts paired ZeRO-3 with
    p > 1), and --emit megatron would have printed --use-megatron-fsdp beside --pipeline-model-parallel-size 8."""
    from shapewise.parallel import Parallelism
    from shapewise.plan import layouts, megatron_flags, plan

    shape = get_model("llama2-70b")
    lay = layouts(shape, gpus=64, global_batch=256, gpus_per_node=8)
    assert not ((lay["zero"] == 3) & (lay["pp"] > 1)).any()
    assert ((lay["zero"] == 3) & (lay["pp"] == 1)).any() and ((lay["zero"] == 2) & (lay["pp"] > 1)).any()
    result = plan(shape, gpus=64, gpu="h100", global_batch_tokens=1048576, seq=4096, top=10_000)
    assert result.plans and not [p for p in result.plans if p.zero == 3 and p.pp > 1]
    by_hand = dataclasses.replace(next(p for p in result.plans if p.pp > 1), zero=3)  # a Plan made in code
    with pytest.raises(ShapewiseError, match="ZeRO-3 \\(FSDP\\) with pipeline stages"):
        megatron_flags(by_hand, seq=4096, global_batch_tokens=1048576)
    with pytest.raises(ShapewiseError, match="parallelism: ZeRO-3 \\(FSDP\\) with pipeline stages.*give zero 2 or less"):
        Parallelism(pp=2, dp=4, zero=3)


@pytest.mark.parametrize("source", [None, 123, ["config.json"]])
def test_a_shapes_source_is_text(source):
    """ModelShape(source=123) was accepted, and the report then crashed on it (TypeError in pathlib)."""
    with pytest.raises(ShapewiseError, match="source must be text"):
        get_model("gpt2").replace(source=source)


def test_a_source_given_as_a_path_is_its_text(tmp_path):
    from pathlib import Path

    shape = get_model("gpt2").replace(name="mine", source=Path("models") / "config.json")
    assert shape.source == str(Path("models") / "config.json")
    assert load_config("tests/data/hf/gpt2.json").source == "tests/data/hf/gpt2.json"


def test_validate_takes_a_given_profile_for_its_gpu_once(tmp_path, monkeypatch):
    """validate asked profile.for_gpu twice of one profile and GPU: before measuring (to refuse early) and again
    after; a borrowed profile was lent twice over. Once now, and the set is judged by the profile as lent."""
    import shapewise.calibrate as calibrate
    from shapewise.profile import find
    from shapewise.store import Store

    asked = []
    for_gpu = calibrate.for_gpu

    def counted(profile, gpu, **kwargs):
        asked.append(gpu)
        return for_gpu(profile, gpu, **kwargs)

    monkeypatch.setattr(calibrate, "for_gpu", counted)
    with Store(tmp_path / "v.db") as store, pytest.warns(ShapewiseWarning, match="measured on the CPU"):
        result = calibrate.validate(store=store, gpu="h100", profile=find("h200"), borrow_profile=True, device="cpu",
                                    quick=True, warmup_ms=0, budget_ms=0.1, progress=False)
    assert asked == ["h100"]
    assert result.profile.borrowed_for == "h100" and result.judged


def test_the_memory_finding_advises_what_can_shed_memory(capsys):
    """check llama3-8b --batch 1 --seq 1 (166.8 GiB at the optimizer step, the activations freed by then) advised
    recomputation and a smaller micro-batch, which free nothing there; a decode of one sequence, fewer sequences."""
    from shapewise import check

    one = check(get_model("llama3-8b"), Workload(batch=1, seq=1), gpu="h200").findings[0]
    assert one.rule == "memory" and one.fix == ("use more tensor parallelism or ZeRO (`shapewise plan` searches "
                                                "them): the peak is at the optimizer step, where recomputation and "
                                                "a smaller micro-batch free nothing")
    four = check(get_model("llama3-8b"), Workload(batch=4), gpu="h200").findings[0]
    assert four.rule == "memory" and four.fix.endswith("recomputation or ZeRO (`shapewise plan` searches them), or "
                                                       "a smaller micro-batch")
    deepseek = load_config("tests/data/hf/deepseek-v3.json")
    served = check(deepseek, Workload(batch=1, tp=8, mode="decode"), gpu="h200").findings[0]
    assert served.rule == "memory" and "fewer sequences" not in served.fix
    assert "fewer sequences" in check(deepseek, Workload(batch=4, tp=8, mode="decode"), gpu="h200").findings[0].fix


def test_the_memory_estimate_refuses_a_training_layout_for_a_serving_step():
    """estimate(llama3-8b, decode, Parallelism(pp=4)) gave 18.5 GiB, every weight on one GPU, the layout dropped."""
    from shapewise.memory import estimate
    from shapewise.parallel import Parallelism

    shape = get_model("llama3-8b")
    assert estimate(shape, Workload(mode="decode")).total_bytes > 0
    for mode in ("decode", "prefill"):
        with pytest.raises(ShapewiseError, match=f"a {mode} step is priced on one tensor-parallel group"):
            estimate(shape, Workload(mode=mode), Parallelism(pp=4))
    assert estimate(shape, Workload(), Parallelism(pp=4)).total_bytes < estimate(shape, Workload()).total_bytes


def test_windowed_layers_within_their_window_are_one_row_with_the_global_ones(capsys):
    """Gemma 2 at s=2048, its window 4096: attn/flash and attn/flash.bwd were each two rows alike (21 layers and 21
    layers); one row of 42 now, the step's time the same. Past the window they are apart, as before."""
    from shapewise.ops import model_ops

    gemma = load_config("tests/data/hf/gemma-2-9b-it.json")
    for mode in ("train", "prefill", "decode"):
        names = [(op.name, op.pass_) for op in model_ops(gemma, Workload(mode=mode))]
        assert len(names) == len(set(names)), names
    ops = {(op.name, op.pass_): op for op in model_ops(gemma, Workload())}
    assert ops[("attn/flash", "fwd")].count == 42 and ("attn/window", "fwd") not in ops
    apart = {(op.name, op.pass_): op for op in model_ops(gemma, Workload(seq=8192))}
    assert apart[("attn/flash", "fwd")].count == apart[("attn/window", "fwd")].count == 21
    code, out, _ = run(capsys, "check", "tests/data/hf/gemma-2-9b-it.json")
    assert code == 0 and sum(line.startswith("attn/flash ") for line in out.splitlines()) == 1


def test_the_report_says_why_a_store_of_another_devices_times_gave_no_table(tmp_path):
    """report gpt2 --db STORE, the store holding this step's ops measured on a CPU alone, warned on the terminal and
    wrote a report that said nothing of the store: its reader could not tell the measurements were left out."""
    from shapewise import check
    from shapewise.cases import op_case
    from shapewise.document import build_report
    from shapewise.measure import Timing
    from shapewise.store import Store, case_key

    shape, workload = get_model("gpt2"), Workload(seq=1024)
    op = check(shape, workload, gpu="h200").step.costs[3].op
    case = op_case(op, "bf16")
    with Store(tmp_path / "cpu.db") as store:
        store.record(env_id=store.environment_id({"device": "cpu", "gpu_name": None, "processor": "AMD EPYC"}),
                     bench="op", key=case_key({"bench": "op", **case.params}), params=case.params,
                     timing=Timing(samples_ms=(1.0, 1.1, 1.2)), flops=case.flops, bytes=case.bytes)
        with pytest.warns(ShapewiseWarning, match="not on the NVIDIA H200"):
            md = build_report(shape, workload, gpu="h200", store=store, fmt="md", top=1)
    said = f"{tmp_path / 'cpu.db'} holds 1 measurement of this step's ops, none on the NVIDIA H200 SXM 141GB (1 on AMD EPYC)"
    assert "## Measured against predicted" in md and said in md and "| op | shape | count | measured ms" not in md
