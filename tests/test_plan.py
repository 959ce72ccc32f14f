"""Parallel step time (bubbles, overlap), the plan's enumeration and its command."""

import json

import numpy as np
import pytest

from helpers import run
from shapewise.cost import SPEC
from shapewise.errors import ShapewiseError
from shapewise.hardware import get_gpu
from shapewise.memory import PRECISIONS
from shapewise.parallel import LayerTimes, Network, network_for, ring_ms, step_arrays
from shapewise.plan import layouts, megatron_flags, plan
from shapewise.presets import get_model
from shapewise.shapes import ModelShape, Workload

SHAPE = ModelShape(name="m", hidden=4096, num_layers=32, num_heads=32, num_kv_heads=8, ffn=14336, vocab=128256,
                   mlp="swiglu", norm="rmsnorm", bias=False, tied_embeddings=False)
TIMES = LayerTimes(fwd_ms=1.0, bwd_ms=2.0, core_fwd_ms=0.25, tp_comm_ms=0.1, embed_ms=0.0, head_ms=0.0,
                   layer_flops=1e12, outside_flops=0.0, bytes_per_s=4.8e12)
NET = Network(intra_gbs=450, inter_gbs=50)


def steps(shape=SHAPE, **layout):
    base = dict(pp=1, vp=1, dp=1, ep=1, zero=0, recompute=0, micro_batches=8)
    w = Workload(batch=1, seq=4096, tp=1)
    out = step_arrays(TIMES, shape, w, network=NET, params=SPEC, precision=PRECISIONS["mixed"], **(base | layout))
    return {k: float(v) for k, v in out.items()}


@pytest.mark.parametrize("pp,vp,m", [(4, 1, 8), (4, 2, 8), (8, 4, 32), (2, 1, 1)])
def test_pipeline_bubble_is_p_minus_1_over_v_m_of_compute(pp, vp, m):
    got = steps(pp=pp, vp=vp, micro_batches=m)
    assert got["bubble_ms"] / got["compute_ms"] == pytest.approx((pp - 1) / (vp * m))
    stage = 32 / pp * (1.0 + 2.0)  # layers per stage × (fwd + bwd), no embedding or head here
    assert got["compute_ms"] == pytest.approx(m * stage)


def test_uneven_stages_run_at_the_slowest_ranks_pace():
    """30 layers on 4 ranks as 7, 8, 8, 7: the middle ranks' 8 layers set the stage time, bubble and
    recomputation, as 32 layers on 4 do."""
    uneven = steps(SHAPE.replace(num_layers=30), pp=4, micro_batches=8, recompute=2)
    assert uneven["compute_ms"] == pytest.approx(8 * 8 * (1.0 + 2.0 + 1.0))
    assert uneven["bubble_ms"] == pytest.approx(3 * 8 * (1.0 + 2.0 + 1.0))
    assert uneven["recompute_ms"] == pytest.approx(8 * 8 * 1.0)
    assert {k: uneven[k] for k in ("compute_ms", "bubble_ms", "recompute_ms")} \
        == {k: v for k, v in steps(pp=4, micro_batches=8, recompute=2).items() if k in ("compute_ms", "bubble_ms", "recompute_ms")}


def test_recompute_repeats_forward_work():
    none, selective, full = (steps(recompute=r) for r in (0, 1, 2))
    assert selective["compute_ms"] - none["compute_ms"] == pytest.approx(8 * 32 * 0.25)
    assert full["compute_ms"] - none["compute_ms"] == pytest.approx(8 * 32 * 1.0)
    assert full["recompute_ms"] == pytest.approx(8 * 32 * 1.0)


def test_data_parallel_reduction_overlaps_the_last_backward():
    """The all-reduce hides behind the last micro-batch's backward; what is longer is exposed, and
    never less than one layer's bucket."""
    slow = Network(intra_gbs=450, inter_gbs=0.5)
    w = Workload(batch=1, seq=4096, tp=1)
    kw = dict(pp=1, vp=1, ep=1, recompute=0, micro_batches=8, params=SPEC, precision=PRECISIONS["mixed"])
    dp = np.array([16])
    for net in (NET, slow):
        over = step_arrays(TIMES, SHAPE, w, dp=dp, zero=0, network=net, overlap_dp=True, **kw)
        plain = step_arrays(TIMES, SHAPE, w, dp=dp, zero=0, network=net, overlap_dp=False, **kw)
        comm = float(plain["dp_comm_ms"][0])
        backward = 32 * TIMES.bwd_ms
        assert float(over["dp_comm_ms"][0]) == pytest.approx(max(comm - backward, comm / 32))
        assert float(over["dp_comm_ms"][0] + over["dp_hidden_ms"][0]) == pytest.approx(comm)
    # bf16, the one stage's: the embedding and, untied, the output layer (plan had left the second out)
    grads = (SHAPE.layer_params * 32 + (1 if SHAPE.tied_embeddings else 2) * SHAPE.vocab * SHAPE.hidden) * 2
    assert not SHAPE.tied_embeddings
    assert comm == pytest.approx(float(ring_ms(grads, 16, 0.5, SPEC, passes=2)))
    assert float(ring_ms(grads, 1, 0.5, SPEC)) == 0.0  # one replica: nothing to reduce


def test_fsdp_gathers_every_micro_batch():
    zero1, zero3 = steps(dp=8, zero=1), steps(dp=8, zero=3)
    assert zero3["dp_comm_ms"] + zero3["dp_hidden_ms"] > 4 * (zero1["dp_comm_ms"] + zero1["dp_hidden_ms"])


def test_layouts_keep_the_constraints():
    shape = get_model("llama2-13b")  # 40 heads, 40 layers
    lay = layouts(shape, gpus=64, global_batch=256, gpus_per_node=8)
    assert len(lay["tp"]) > 100
    t, p, d, v, b, m = (lay[k] for k in ("tp", "pp", "dp", "vp", "batch", "micro_batches"))
    assert np.all(shape.num_heads % t == 0) and np.all(shape.kv_heads % t == 0) and np.all(t <= 8)
    assert np.all(p <= shape.num_layers) and np.all((v == 1) | (shape.num_layers % (p * v) == 0))  # uneven p: v = 1
    assert np.all(t * p * d == 64)
    assert np.all(m * b * d == 256)
    assert np.all((v == 1) | (m % p == 0))
    assert set(np.unique(t)) == {1, 2, 4, 8}
    assert not np.any((d == 1) & (lay["zero"] > 0))


def test_plan_ranks_fitting_layouts_fast():
    result = plan(get_model("llama2-70b"), gpus=256, gpu="h100", global_batch_tokens=2**22, seq=4096, top=3)
    assert result.considered > 1000 and 0 < result.fitting < result.considered
    times = [p.step_ms for p in result.plans]
    assert times == sorted(times)
    best = result.plans[0]
    assert best.memory.fits(get_gpu("h100"))
    assert best.tokens_per_s == pytest.approx(2**22 / (best.step_ms / 1e3))
    assert 0.2 < best.mfu < 0.8
    flags = megatron_flags(best, seq=4096, global_batch_tokens=2**22)
    assert f"--tensor-model-parallel-size {best.tp}" in flags and "--global-batch-size 1024" in flags


def test_plan_refuses_bad_input():
    with pytest.raises(ShapewiseError, match="sequences"):
        plan(SHAPE, gpus=8, gpu="h100", global_batch_tokens=1000, seq=4096)
    with pytest.raises(ShapewiseError, match="nodes"):
        plan(SHAPE, gpus=12, gpu="h100", global_batch_tokens=4096 * 12, seq=4096)
    with pytest.raises(ShapewiseError, match="give inter_gbs"):
        network_for(get_gpu("l4"))


@pytest.mark.parametrize("kwargs, said", [
    # beyond limits.SEQ: planned, no layout found, and nothing said
    (dict(seq=2**30, global_batch_tokens=2**30), "seq: the sequence length must be a positive whole number"),
    (dict(gpus=2**40), "gpus: the count must be a positive whole number from 1 to 2,147,483,647"),
    (dict(top=0), "top: the count must be a positive whole number"),
    (dict(intra_gbs=0), "intra_gbs: the rate must be a number above 0"),  # a warning of 0 GB/s first
    (dict(precision="fp8-adam"), "unknown precision 'fp8-adam'; use one of mixed"),  # a KeyError
    (dict(framework="deepspeed"), "unknown framework 'deepspeed'; use one of torch"),  # a KeyError
    (dict(overlap_dp="no"), "overlap_dp must be True or False, got 'no'"),  # taken for yes
    (dict(shapes=[1]), "shapes must be ModelShapes, got 1"),  # an AttributeError
])
def test_plan_checks_its_arguments_as_the_command_checks_its_flags(kwargs, said):
    import warnings

    args = dict(gpus=16, gpu="h100", global_batch_tokens=2**20, seq=4096) | kwargs
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused before anything is said of them
        with pytest.raises(ShapewiseError) as err:
            plan(SHAPE, **args)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_cli_plan_writes_a_long_sequence_as_every_number_is(capsys):
    code, _, err = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", "524288", "--seq", "1048576")
    assert code == 2 and "of 524,288 tokens is not a whole number of sequences of 1,048,576; give a multiple of " \
                          "1,048,576" in err


def test_cli_plan_table_json_and_flags(capsys):
    args = ("plan", "llama2-7b", "--gpus", "64", "--gpu", "h100", "--global-batch", "1048576", "--seq", "4096")
    code, out, _ = run(capsys, *args, "--tokens", "1e12", "--spec-only")
    assert code == 0 and "tokens/s" in out and "days" in out
    code, out, _ = run(capsys, *args, "--json", "--spec-only", "--top", "2")
    doc = json.loads(out)
    assert code == 0 and len(doc["plans"]) == 2 and doc["plans"][0]["step_ms"] <= doc["plans"][1]["step_ms"]
    code, out, _ = run(capsys, *args, "--emit", "megatron", "--spec-only")
    assert code == 0 and out.startswith("--num-layers") and "--tensor-model-parallel-size" in out  # the shape, then the layout


@pytest.mark.parametrize("extra,message", [
    (("--global-batch", "1000"), "sequences"),
    (("--gpu", "nope"), "unknown GPU"),
    (("--config", "x.json"), "one of"),
    (("--gpus", "0"), "positive"),
])
def test_cli_plan_bad_input_is_one_line_exit_2(capsys, extra, message):
    args = ["plan", "llama2-7b", "--gpus", "64", "--global-batch", "1048576", "--seq", "4096"]
    for i in range(0, len(extra), 2):
        if extra[i] in args:
            args[args.index(extra[i]) + 1] = extra[i + 1]
        else:
            args += extra[i:i + 2]
    code, _, err = run(capsys, *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_cli_plan_gives_intra_node_gbs_to_a_gpu_without_a_link_in_the_table(capsys):
    """--intra-node-gbs is the link tensor parallelism's collectives travel too: a GPU the table has no link
    for (MI250X) plans with it, and without it is refused in one line."""
    from shapewise.hardware import GPUS, link

    gpu = next(g for g in GPUS if link(g) is None)
    args = ("plan", "llama2-7b", "--gpus", "16", "--gpu", gpu.key, "--global-batch", "1048576", "--seq", "4096",
            "--inter-node-gbs", "25", "--json", "--top", "200")
    code, out, err = run(capsys, *args, "--intra-node-gbs", "100")
    assert code == 0, err
    doc = json.loads(out)
    assert "within a node 100 GB/s (given)" in doc["network"]
    assert any(p["tp"] > 1 and p["times_ms"]["tp_comm_ms"] > 0 for p in doc["plans"])  # collectives priced
    code, _, err = run(capsys, *args)
    assert code == 2 and "no GPU-to-GPU link in the table; give --intra-node-gbs" in err
    assert len(err.strip().splitlines()) == 1


def test_cli_plan_refuses_megatron_flags_for_alibi_before_planning(capsys, monkeypatch):
    import shapewise.plan

    def planner(*args, **kwargs):
        raise AssertionError("planned a model whose flags cannot be emitted")

    monkeypatch.setattr(shapewise.plan, "plan", planner)
    code, _, err = run(capsys, "plan", "--config", "tests/data/hf/bloom-7b1.json", "--gpus", "16", "--global-batch",
                       "1048576", "--seq", "2048", "--emit", "megatron")
    assert code == 2 and "ALiBi" in err and "--emit megatron cannot describe it" in err
    assert len(err.strip().splitlines()) == 1


def test_cli_plan_shapes_plans_the_neighbourhood_too(capsys):
    code, out, _ = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", "524288", "--seq", "1024",
                       "--shapes", "--json", "--spec-only", "--top", "3")
    names = [p["model"] for p in json.loads(out)["plans"]]
    assert code == 0 and any("vocab 50257→50304" in n for n in names)  # a padded vocab outruns GPT-2's own


def test_plan_prices_with_the_same_default_cost_model_as_every_other_function():
    from shapewise.profile import cost_model

    kw = dict(gpus=8, global_batch_tokens=2**20, seq=4096, top=1)
    default = plan(get_model("llama2-7b"), gpu="h200", **kw)
    assert default.cost_source == cost_model("h200").source and default.cost_source.startswith("calibrated profile")
    spec = plan(get_model("llama2-7b"), gpu=cost_model("h200", spec_only=True), **kw)
    assert spec.cost_source == "spec-only"
    assert default.plans[0].step_ms != spec.plans[0].step_ms  # the profile is what priced the default


@pytest.mark.parametrize("m", [1, 4, 16])
def test_zero2_reduces_each_micro_batchs_gradients_zero1_once_a_step(m):
    """ZeRO-2 keeps only its shard of the gradients, so every micro-batch's are reduce-scattered as they are
    made; ZeRO-1 accumulates them whole and reduces once. The parameters' all-gather is once a step in both."""
    def traffic(zero, micro_batches):  # all data-parallel time, exposed and hidden behind the backward
        got = steps(dp=8, zero=zero, micro_batches=micro_batches)
        return got["dp_comm_ms"] + got["dp_hidden_ms"]

    if m == 1:
        assert traffic(2, 1) == pytest.approx(traffic(1, 1))
        return
    reduction = (traffic(2, m) - traffic(1, m)) / (m - 1)  # one more reduce-scatter of the gradients
    assert reduction > 0
    assert traffic(2, 2 * m) - traffic(2, m) == pytest.approx(m * reduction)
    assert traffic(1, 2 * m) == pytest.approx(traffic(1, m))


@pytest.mark.parametrize("config", ["llama-3-8b.json", "gemma-7b.json", "gpt-j-6b.json"])
def test_check_and_plan_give_one_step_and_one_memory_for_one_layout(capsys, config):
    """check prices the forward and backward in PyTorch eager and says what plan adds: Adam's update and
    Megatron-LM's memory. The two commands meet on one layout (t=4, one stage, one replica); plan had
    left an untied model's output layer out of its optimizer's update (Llama-3-8B 259.19 ms for check's
    260.13)."""
    from shapewise.hf import load_config
    path = f"tests/data/hf/{config}"
    code, out, _ = run(capsys, "check", path, "--tp", "4", "--batch", "2", "--seq", "4096", "--json")
    assert code == 0
    checked = json.loads(out)
    result = plan(load_config(path), gpus=4, gpu="h200", global_batch_tokens=8192, seq=4096, top=10**6)
    same = [p for p in result.plans if (p.tp, p.pp, p.dp, p.batch, p.recompute, p.zero) == (4, 1, 1, 2, "none", 0)]
    assert len(same) == 1
    # one parameter count: the final norm whole on each rank, GPT-J's output bias split with the vocabulary;
    # plan's ring of the replicas' gradients leaves out the kernel's launch (5 µs): 3e-5 of a step
    assert checked["totals"]["with_optimizer_ms"] == pytest.approx(same[0].step_ms, rel=5e-5)
    assert checked["totals"]["optimizer_ms"] == pytest.approx(same[0].times_ms["optimizer_ms"], rel=1e-9)
    assert checked["memory"]["megatron_per_gpu_bytes"] == pytest.approx(same[0].memory.total_bytes, abs=1)
    code, out, _ = run(capsys, "check", path, "--tp", "4", "--batch", "2", "--seq", "4096")
    assert f"{checked['totals']['with_optimizer_ms']:,.2f} ms in all" in out
    said = f"{same[0].memory.total_bytes / 2**30:,.1f} GiB"
    megatron_less = said != f"{checked['memory']['per_gpu_bytes'] / 2**30:,.1f} GiB"  # a peak at the optimizer: one
    assert (f"{said}, as `plan`" in out) == megatron_less
