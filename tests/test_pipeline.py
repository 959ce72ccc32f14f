"""The pipeline schedules: their order and bubble by counting (pure), and a real run over gloo on the
CPU whose gradients equal one process's and whose idle slots, counted from the messages, are the
formula's."""

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shapewise import ModelShape
from shapewise.errors import ShapewiseError
from shapewise.pipeline import (
    BACKWARD,
    FORWARD,
    SLOT_COSTS,
    Action,
    Layout,
    check_exchanges,
    exchanges,
    schedule,
    simulate,
)

layouts = st.builds(lambda p, k, v, extra: Layout(p, p * k if v > 1 else k + extra, v),
                    st.integers(2, 8), st.integers(1, 4), st.integers(1, 4), st.integers(0, 5))


def actions(steps):
    return [a for step in steps for a in step]


@settings(max_examples=80, deadline=None)
@given(layouts)
def test_every_micro_batch_runs_forward_then_backward_once_per_chunk(layout):
    for r, steps in enumerate(schedule(layout)):
        order = actions(steps)
        assert Counter(order) == Counter(Action(kind, i, c) for kind in (FORWARD, BACKWARD)
                                         for i in range(layout.micro_batches) for c in range(layout.virtual))
        for a in order:
            if a.kind == BACKWARD:
                assert order.index(Action(FORWARD, a.micro_batch, a.chunk)) < order.index(a)


@settings(max_examples=80, deadline=None)
@given(layouts)
def test_idle_slots_are_the_formulas_bubble_and_the_exchanges_cannot_deadlock(layout):
    timeline = simulate(layout)
    p, m = layout.stages, layout.micro_batches
    # Each rank works m micro-batches of v chunks and idles (p−1)/v of a stage's micro-batch time.
    assert set(timeline.busy) == {m * layout.virtual * sum(SLOT_COSTS)}
    assert {timeline.idle(r) for r in range(p)} == {layout.bubble_slots} == {(p - 1) * sum(SLOT_COSTS)}
    check_exchanges(exchanges(layout))


@pytest.mark.parametrize("p, m", [(2, 1), (4, 4), (4, 9), (3, 7)])
def test_1f1b_warms_up_then_alternates(p, m):
    for r, steps in enumerate(schedule(Layout(p, m))):
        kinds = "".join(a.kind for a in actions(steps))
        warm = min(p - r - 1, m)
        assert kinds == FORWARD * warm + (FORWARD + BACKWARD) * (m - warm) + BACKWARD * warm
        assert all(len(step) == 1 for step in steps)


def test_interleaved_takes_micro_batches_in_groups_of_the_stages():
    first = actions(schedule(Layout(2, 4, 2))[0])
    assert [str(a) for a in first[:6]] == ["F0", "F1", "F0.1", "F1.1", "F2", "B0.1"]
    with pytest.raises(ShapewiseError, match="multiple of 4"):
        Layout(4, 6, 2)


def _moved(batches, rank, find, to):
    """The exchanges with rank's first item matching `find` moved into its batch `to`."""
    rows = [list(b) for b in batches[rank]]
    k, item = next((k, item) for k, b in enumerate(rows) for item in b if find(item))
    rows[k].remove(item)
    rows[to].append(item)
    return tuple(tuple(map(tuple, rows)) if r == rank else b for r, b in enumerate(batches))


def test_exchanges_that_cross_or_wait_on_each_other_are_refused():
    layout = Layout(2, 2)  # rank 0: F0 | F1 | B0 | B1, rank 1: F0 | B0 | F1 | B1
    batches = exchanges(layout)
    check_exchanges(batches)
    sends_f0 = lambda item: item[0] == "send" and item[1].kind == FORWARD and item[1].micro_batch == 0
    with pytest.raises(ShapewiseError, match="from rank 0 to rank 1 do not match in order"):
        check_exchanges(_moved(batches, 0, sends_f0, 3))  # F0's activation now leaves after F1's
    recvs_b0 = lambda item: item[0] == "recv" and item[1].kind == BACKWARD
    with pytest.raises(ShapewiseError, match="deadlock: rank 0"):
        check_exchanges(_moved(batches, 0, recvs_b0, 0))  # waits for B0's gradient before sending F0


@pytest.mark.parametrize("bad", [{"stages": 0, "micro_batches": 1}, {"stages": 2, "micro_batches": True}])
def test_layout_refuses_nonsense(bad):
    with pytest.raises(ShapewiseError):
        Layout(**bad)


# ---- a real run over gloo ----

torch_needed = pytest.mark.skipif(not __import__("importlib").util.find_spec("torch"), reason="needs torch")
TINY = ModelShape(name="tiny", hidden=32, num_layers=12, num_heads=4, num_kv_heads=2, ffn=64, vocab=96,
                  mlp="swiglu", norm="rmsnorm", bias=False, tied_embeddings=False)
BATCH, SEQ = 2, 8
WORLD = 4
CONFIGS = [(2, 3, 1), (4, 5, 1), (3, 2, 1), (2, 4, 2), (4, 4, 3)]  # (stages, micro-batches, chunks per rank)


def _worker(rank, world, init, out):
    import torch
    import torch.distributed as dist

    from shapewise.pipeline import build_chunk, micro_batch_loss, run

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    results = []
    for p, m, v in CONFIGS:
        layout = Layout(p, m, v)
        gen = torch.Generator().manual_seed(7)
        tokens = [torch.randint(0, TINY.vocab, (BATCH, SEQ), generator=gen) for _ in range(m)]
        targets = [torch.randint(0, TINY.vocab, (BATCH, SEQ), generator=gen) for _ in range(m)]
        if rank < p:
            mine = [build_chunk(TINY, layout, layout.virtual_stage(rank, c), seed=3) for c in range(v)]
            trace = run(mine, layout, rank=rank, tokens=tokens, targets=targets, act_shape=(BATCH, SEQ, TINY.hidden))
            # One process, the whole model, the same micro-batches: the gradients to match.
            whole = [build_chunk(TINY, layout, j, seed=3) for j in range(layout.chunks)]
            loss = 0
            for x, y in zip(tokens, targets):
                for chunk in whole:
                    x = chunk(x)
                loss = loss + micro_batch_loss(x, y, m)
            loss.backward()
            error = max(float((a.grad - b.grad).abs().max() / b.grad.abs().max().clamp_min(1e-12))
                        for c in range(v) for a, b in zip(mine[c].parameters(),
                                                          whole[layout.virtual_stage(rank, c)].parameters()))
            results.append({"config": [p, m, v], "actions": [str(a) for a in trace.actions], "slot_busy": trace.slot_busy,
                                "slot_end": trace.slot_end, "loss": trace.loss, "reference_loss": float(loss),
                                "grad_error": error, "busy_s": trace.busy_s, "wall_s": trace.wall_s})
        dist.barrier()
    with open(f"{out}/rank{rank}.json", "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def gloo_runs(tmp_path_factory):
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("torch.distributed with gloo is not available")
    out = tmp_path_factory.mktemp("pipeline")
    mp.spawn(_worker, args=(WORLD, f"file://{out / 'init'}", str(out)), nprocs=WORLD)
    del torch
    by_config = {}
    for rank in range(WORLD):
        for row in json.loads((out / f"rank{rank}.json").read_text()):
            by_config.setdefault(tuple(row["config"]), {})[rank] = row
    return by_config


@pytest.mark.slow
@torch_needed
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "p{}-m{}-v{}".format(*c))
def test_a_gloo_run_matches_one_process_and_idles_the_formulas_slots(gloo_runs, config):
    layout = Layout(*config)
    rows = gloo_runs[config]
    assert sorted(rows) == list(range(layout.stages))
    makespan = max(row["slot_end"] for row in rows.values())
    for rank, row in rows.items():
        assert row["grad_error"] < 1e-4, row
        assert row["actions"] == [str(a) for a in actions(schedule(layout)[rank])]
        assert makespan - row["slot_busy"] == layout.bubble_slots
    last = rows[layout.rank_of(layout.chunks - 1)]
    assert last["loss"] == pytest.approx(last["reference_loss"], rel=1e-5)


@torch_needed
def test_a_first_chunk_runs_a_sequence_past_its_position_table():
    # GPT-2's 1,024 learned positions at 2,048 tokens: rules warn the model cannot run it; the measured
    # chunk still runs the same work (rows wrap) instead of stopping on an index past the table.
    import torch

    from shapewise.pipeline import build_chunk

    shape = TINY.replace(learned_positions=4)
    chunk = build_chunk(shape, Layout(2, 1, 1), 0, seed=3)
    out = chunk(torch.randint(0, shape.vocab, (BATCH, SEQ)))
    assert out.shape == (BATCH, SEQ, shape.hidden)
