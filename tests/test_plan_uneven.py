"""Pipelines whose stages do not divide the layers (BLOOM's 70 layers over 12 stages): plan finds them,
prices them by their slowest stage and their memory by their fullest, says they are uneven and tells
Megatron-LM the split."""

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

from helpers import run
from shapewise.memory import (
    ALLOCATOR_FRACTION,
    CONTEXT_BYTES,
    FRAMEWORKS,
    PRECISIONS,
    layer_activation_bytes,
    training_arrays,
)
from shapewise.parallel import RECOMPUTE, layer_times, network_for, replica_grads_ms, step_arrays
from shapewise.plan import layouts, megatron_flags, plan, stage_layers, stages_text
from shapewise.presets import get_model
from shapewise.profile import cost_model
from shapewise.shapes import ModelShape, Workload

README = Path(__file__).parents[1] / "README.md"
# 70 layers, as BLOOM-176B; a small vocabulary keeps the head lighter than a layer, so the 6-layer
# middle stages, not the 5-layer last one with the head, set the pace.
SHAPE = ModelShape(name="s70", hidden=1024, num_layers=70, num_heads=16, vocab=1024, mlp="gelu", norm="layernorm",
                   bias=True, tied_embeddings=True)
SPEC = cost_model("h100", spec_only=True)
KW = dict(gpus=12, gpu=SPEC, global_batch_tokens=96 * 1024, seq=1024, gpus_per_node=4, top=10**6)


def pick(result, **layout):
    return next(p for p in result.plans if all(getattr(p, k) == v for k, v in layout.items()))


def test_stages_hold_ceil_or_floor_the_lighter_at_the_ends():
    assert stage_layers(70, 12) == (5,) + (6,) * 10 + (5,)  # BLOOM's
    assert stage_layers(126, 16) == (7,) + (8,) * 14 + (7,)  # Llama 3 405B's
    assert stage_layers(80, 3) == (27, 27, 26)  # one lighter stage: the last, beside the head
    assert stage_layers(80, 12) == (6,) + (7,) * 8 + (6,) * 3
    assert stage_layers(80, 16) == (5,) * 16
    for L in range(1, 130):
        for p in range(1, L + 1):
            st = stage_layers(L, p)
            assert len(st) == p and sum(st) == L and set(st) <= {L // p, -(-L // p)}
            assert st[-1] == L // p and (st[0] == L // p or p - L % p == 1)
    assert stages_text(stage_layers(70, 12)) == "5+6×10+5" and stages_text((27, 27, 26)) == "27×2+26"


def test_uneven_layouts_are_enumerated_and_never_interleaved():
    """384 GPUs (2^7·3) and 2048 sequences: every p that divides 70 leaves a d with a factor 3 that cannot
    divide the batch, so only uneven pipelines (p = 3, 6, 12, 24, 48) have layouts."""
    lay = layouts(SHAPE.replace(num_heads=112, hidden=14336), gpus=384, global_batch=2048, gpus_per_node=8)
    p, v = lay["pp"], lay["vp"]
    assert len(p) and set(np.unique(p)) == {3, 6, 12, 24, 48}
    assert np.all(v == 1)
    assert np.all(lay["tp"] * p * lay["dp"] == 384)


def test_uneven_pipeline_runs_at_its_heaviest_stages_pace():
    result = plan(SHAPE, **KW)
    p = pick(result, tp=1, pp=12, vp=1, batch=1, recompute="none", zero=0)
    assert p.uneven and p.stages == stage_layers(70, 12)
    times = layer_times(SHAPE, Workload(batch=1, seq=1024, tp=1), gpu=SPEC.gpu, params=SPEC.params,
                        link_gbs=network_for(SPEC.gpu, gpus_per_node=4).intra_gbs)
    layer = times.fwd_ms + times.bwd_ms
    assert times.head_ms < layer and times.embed_ms < layer  # so a 6-layer middle stage is the slowest
    m = p.micro_batches
    assert p.times_ms["compute_ms"] == pytest.approx(m * 6 * layer, rel=1e-9)  # 6 layers a stage, not 70/12
    assert p.times_ms["bubble_ms"] == pytest.approx(11 * 6 * layer, rel=1e-9)
    assert p.times_ms["compute_ms"] > 1.02 * m * 70 / 12 * layer


def test_uneven_pipeline_memory_is_its_fullest_stages():
    """70 layers over 12 stages (5, 6×10, 5) take less memory than 72 over 12 (6 on the first stage,
    beside the embedding, with 12 micro-batches in flight) and more than 60 over 12."""
    layout = dict(tp=1, pp=12, vp=1, batch=1, recompute="none", zero=0)
    uneven = pick(plan(SHAPE, **KW), **layout).memory.total_bytes
    six = pick(plan(SHAPE.replace(num_layers=72), **KW), **layout).memory.total_bytes
    assert pick(plan(SHAPE.replace(num_layers=60), **KW), **layout).memory.total_bytes < uneven < six


@pytest.mark.parametrize("num_layers, pp, micro_batches", [
    (70, 12, 96), (70, 12, 4), (71, 12, 96), (72, 12, 96), (69, 12, 96), (80, 3, 8), (8, 3, 1), (9, 2, 4), (32, 1, 8)])
def test_training_memory_is_the_largest_of_every_stage_on_its_own(num_layers, pp, micro_batches):
    """Each stage with its own layers (stage_layers), micro-batches in flight (rank i of 1F1B: min(p-i, m))
    and the embedding (first) or head, final norm and loss (last): the peak per GPU is the fullest's.
    Small vocabulary, so middle stages can be the fullest; no ZeRO, no recomputation."""
    shape = ModelShape(name="u", hidden=1024, num_layers=num_layers, num_heads=16, vocab=1024, mlp="swiglu",
                       norm="rmsnorm", bias=False, tied_embeddings=False)
    seq, batch, prec, fw = 1024, 2, PRECISIONS["mixed"], FRAMEWORKS["megatron"]
    got = training_arrays(shape, seq=seq, dtype_bytes=2, attention="flash", tp=1, pp=pp, dp=1, vp=1, ep=1, zero=0,
                          recompute=0, batch=batch, micro_batches=micro_batches, precision=prec, framework=fw)
    per_layer = layer_activation_bytes(shape, seq=seq, dtype_bytes=2, attention="flash", tp=1, recompute=0,
                                       framework=fw) * batch * seq
    embed = shape.vocab * shape.hidden
    loss = batch * seq * (shape.vocab * fw.loss_bytes_per_logit + 2 * 2 * shape.hidden)
    stages = []
    for rank, layers in enumerate(stage_layers(num_layers, pp)):
        last = rank == pp - 1
        params = layers * shape.layer_params + embed * (rank == 0) + (shape.params - shape.blocks_params - embed) * last
        held = min(pp - rank, micro_batches) * layers * per_layer + loss * last
        stages.append(params * (prec.weights + prec.grads + prec.optimizer) + max(held, params * prec.step_temp))
    want = max(stages) * (1 + ALLOCATOR_FRACTION) + CONTEXT_BYTES
    assert sum(float(v) for v in got.values()) == pytest.approx(want, rel=1e-12)


def test_even_layouts_price_as_without_a_split():
    """Every even plan's time and memory are those of step_arrays and training_arrays left to L/p."""
    shape, gpus, seq, sequences = get_model("llama2-13b"), 64, 4096, 256
    result = plan(shape, gpus=gpus, gpu=SPEC, global_batch_tokens=sequences * seq, seq=seq, top=10**6)
    even = [p for p in result.plans if p.pp > 1 and not p.uneven]
    assert len(even) > 100 and any(p.vp > 1 for p in even) and len(even) < len(result.plans)
    network = network_for(SPEC.gpu, gpus_per_node=8)
    for p in even[::25]:
        w = Workload(batch=p.batch, seq=seq, tp=p.tp)
        times = layer_times(shape, w, gpu=SPEC.gpu, params=SPEC.params, link_gbs=network.intra_gbs)
        layout = dict(pp=p.pp, vp=p.vp, dp=p.dp, ep=p.ep, zero=p.zero, micro_batches=p.micro_batches)
        got = step_arrays(times, shape, w, recompute=RECOMPUTE.index(p.recompute),
                          network=network, params=SPEC.params, precision=PRECISIONS["mixed"], **layout)
        assert float(got["total_ms"]) == p.step_ms
        mem = training_arrays(shape, seq=seq, dtype_bytes=2, attention="flash", tp=p.tp, batch=p.batch,
                              recompute=RECOMPUTE.index(p.recompute), **layout,
                              precision=PRECISIONS["mixed"], framework=FRAMEWORKS["megatron"])
        assert sum(float(v) for v in mem.values()) == p.memory.total_bytes


def test_readme_plan_example_is_what_plan_prints(capsys):
    """The README's plan block is the command's real output (the seconds it took aside)."""
    block = re.search(r"```\n\$ shapewise plan (.*?)\n(.*?)```", README.read_text(), re.S)
    code, out, _ = run(capsys, "plan", *block.group(1).split())
    timing = lambda text: [re.sub(r"in \d+\.\d+ s;", "in _ s;", line.rstrip()) for line in text.strip().splitlines()]
    assert code == 0 and timing(out) == timing(block.group(2))


def megatron_stages(layout: str) -> list[str]:
    """Megatron-LM's reading of --pipeline-model-parallel-layout (PipelineParallelLayerLayout.parse_str_to_list
    in megatron/core/transformer/pipeline_parallel_layer_layout.py): ()*n and x*n unrolled, '|' between stages."""
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        layout = re.sub(pattern, lambda x: x.group(1) * int(x.group(2)), layout.replace(",", ""))
    return layout.split("|")


@pytest.mark.parametrize("num_layers,pp,want", [
    (70, 12, ["--decoder-first-pipeline-num-layers 5", "--decoder-last-pipeline-num-layers 5"]),
    (80, 3, ["--decoder-last-pipeline-num-layers 26"]),
    (80, 16, []),
])
def test_megatron_flags_say_the_split(num_layers, pp, want):
    base = plan(get_model("llama3-8b"), gpus=8, gpu=SPEC, global_batch_tokens=2**20, seq=4096, top=1).plans[0]
    p = dataclasses.replace(base, shape=base.shape.replace(num_layers=num_layers), pp=pp, vp=1, zero=1)  # no FSDP with pp
    flags = megatron_flags(p, seq=4096, global_batch_tokens=2**20)
    assert [f for f in flags.split(" \\\n  ") if "pipeline-num-layers" in f or "layout" in f] == want
    assert f"--pipeline-model-parallel-size {pp}" in flags


def test_megatron_flags_lay_out_stages_the_ends_cannot_say():
    """80 layers over 12: 6, 7×8, 6×3. Megatron's first/last counts need the middle stages alike, so the
    stages are written out one by one, the embedding first and the loss last."""
    base = plan(get_model("llama3-8b"), gpus=8, gpu=SPEC, global_batch_tokens=2**20, seq=4096, top=1).plans[0]
    p = dataclasses.replace(base, shape=base.shape.replace(num_layers=80), pp=12, vp=1, zero=1)  # no FSDP with pp
    flags = megatron_flags(p, seq=4096, global_batch_tokens=2**20)
    assert "pipeline-num-layers" not in flags
    layout = re.search(r"--pipeline-model-parallel-layout '([^']+)'", flags).group(1)
    stages = megatron_stages(layout)
    assert [s.count("t") for s in stages] == list(stage_layers(80, 12))
    assert stages[0].startswith("E") and stages[-1].endswith("L") and "".join(stages).count("E") == 1


def test_cli_marks_uneven_plans_and_emits_their_split(capsys):
    args = ("plan", "llama3-70b", "--gpus", "96", "--global-batch", "4194304", "--seq", "8192", "--spec-only")
    code, out, _ = run(capsys, *args, "--json", "--top", "5")
    assert code == 0
    best = json.loads(out)["plans"][0]
    stages = best["stage_layers"]
    assert sum(stages) == 80 and len(set(stages)) > 1  # the fastest here is uneven: 96 GPUs have a factor 3
    code, out, _ = run(capsys, *args, "--top", "5")
    assert code == 0 and f"stages={stages_text(tuple(stages))}" in out and "do not divide the 80 layers" in out
    code, out, _ = run(capsys, *args, "--top", "1", "--emit", "megatron")
    assert code == 0 and f"--pipeline-model-parallel-size {best['pp']}" in out
    assert f"--decoder-last-pipeline-num-layers {stages[-1]}" in out or "--pipeline-model-parallel-layout" in out


def test_more_stages_than_layers_are_refused_in_one_line():
    from shapewise.errors import ShapewiseError
    from shapewise.memory import estimate
    from shapewise.parallel import Parallelism

    for pp in (0, 71):
        with pytest.raises(ShapewiseError, match="give from 1 to 70 stages"):
            stage_layers(70, pp)
    with pytest.raises(ShapewiseError, match="give from 1 to 8 stages"):
        estimate(SHAPE.replace(num_layers=8), Workload(batch=1), Parallelism(pp=10, micro_batches=10))


def test_recomputation_and_collectives_are_counted_with_the_stage_that_sets_the_pace():
    # llama3-8b's 32 layers over 3 stages (11, 11, 10) and its 128k-word output layer: the lighter last stage,
    # with the output layer, is slower than a full one; what is recomputed and sent is its 10 layers'.
    shape = get_model("llama3-8b")
    model = cost_model("h100", spec_only=True)
    w = Workload(batch=1, seq=8192, tp=2)
    times = layer_times(shape, w, gpu=model.gpu, params=model.params)
    first, middle, last = (11, 11, 10)
    assert stage_layers(32, 3) == (first, middle, last)
    got = step_arrays(times, shape, w, pp=3, vp=1, dp=8, ep=1, zero=1, recompute=RECOMPUTE.index("full"),
                      micro_batches=8, network=network_for(model.gpu), params=model.params,
                      precision=PRECISIONS["mixed"])
    layer = 2 * times.fwd_ms + times.bwd_ms  # full recomputation: the forward twice
    stages = {first: first * layer + times.embed_ms, last: last * layer + times.head_ms}
    assert stages[last] > middle * layer  # the premise: the output layer's stage is the slowest
    assert float(got["compute_ms"]) == pytest.approx(8 * stages[last])
    assert float(got["recompute_ms"]) == pytest.approx(8 * last * times.fwd_ms)
    # and once a step the all-reduce of its 10 layers' replicated gradients (norms whole on each rank)
    replicas = replica_grads_ms(shape, 2, last, grad_bytes=PRECISIONS["mixed"].grads,
                                gbs=network_for(model.gpu).gbs(False), params=model.params)
    assert float(got["tp_comm_ms"]) == pytest.approx(8 * last * times.tp_comm_ms + replicas)


def test_megatron_flags_refuse_uneven_stages_with_virtual_ones():
    from shapewise.errors import ShapewiseError

    best = pick(plan(SHAPE, gpus=24, gpu="h200", global_batch_tokens=2**20, seq=4096, top=500), pp=12)
    with pytest.raises(ShapewiseError, match="uneven stages or virtual ones, not both"):
        megatron_flags(dataclasses.replace(best, vp=2), seq=4096, global_batch_tokens=2**20)


def _steps_by_layout(shape, *, gpus, seq, sequences, gpus_per_node=8) -> dict:
    """The step time (ms) of every layout plan enumerates, fitting or not, on H100s (spec model)."""
    network = network_for(SPEC.gpu, gpus=gpus, gpus_per_node=gpus_per_node)
    lay = layouts(shape, gpus=gpus, global_batch=sequences, gpus_per_node=min(gpus_per_node, gpus))
    steps = {}
    for t, b in {(int(t), int(b)) for t, b in zip(lay["tp"], lay["batch"])}:
        rows = np.flatnonzero((lay["tp"] == t) & (lay["batch"] == b))
        w = Workload(batch=b, seq=seq, tp=t)
        times = layer_times(shape, w, gpu=SPEC.gpu, params=SPEC.params, link_gbs=network.intra_gbs)
        got = step_arrays(times, shape, w, pp=lay["pp"][rows], vp=lay["vp"][rows], dp=lay["dp"][rows],
                          ep=lay["ep"][rows], zero=lay["zero"][rows], recompute=lay["recompute"][rows],
                          micro_batches=lay["micro_batches"][rows], network=network, params=SPEC.params,
                          precision=PRECISIONS["mixed"])["total_ms"]
        steps |= {tuple(int(lay[k][i]) for k in ("tp", "pp", "dp", "vp", "ep", "batch", "micro_batches", "recompute",
                                                 "zero")): float(ms) for i, ms in zip(rows, got)}
    return steps


@pytest.mark.parametrize("name, gpus, seq, sequences, num_layers", [
    ("llama3-8b", 96, 8192, 1536, (30, 32, 33, 34)),  # 33 over 32 stages: a middle one holds 2 beside the head's 1
    ("llama3-70b", 96, 8192, 512, (78, 81)),
    ("gpt2", 8, 1024, 512, (10, 12, 14)),
    ("s70", 12, 1024, 96, (59, 70)),
])
def test_a_layer_more_never_makes_a_step_faster(name, gpus, seq, sequences, num_layers):
    """The same layout with one layer more does more work: its step is never priced faster. Where the
    layer leaves the slowest stage as it was, the data-parallel reduction must not hide more behind it
    (it once did: llama3-8b, 33 layers over 32 stages, priced 4.5% faster than 32)."""
    shape = SHAPE if name == "s70" else get_model(name)
    gpus_per_node = 4 if name == "s70" else 8
    for L in num_layers:
        fewer, more = (_steps_by_layout(shape.replace(num_layers=n), gpus=gpus, seq=seq, sequences=sequences,
                                        gpus_per_node=gpus_per_node) for n in (L, L + 1))
        both = fewer.keys() & more.keys()
        faster = sorted((more[k] / fewer[k] - 1, k) for k in both if more[k] < fewer[k] * (1 - 1e-12))
        assert len(both) > 100
        assert not faster, f"{len(faster)} layouts faster with {L + 1} layers than {L}, most {faster[0]}"
