"""A real training step with torch's DDP and FSDP over gloo on the CPU equals one process's step on the
whole batch (the ranks' gradients averaged)."""

import json

import pytest

from shapewise import ModelShape
from shapewise.errors import ShapewiseError

pytestmark = pytest.mark.slow
TINY = ModelShape(name="tiny", hidden=32, num_layers=2, num_heads=4, ffn=64, vocab=96, mlp="gelu",
                  norm="layernorm", bias=True, learned_positions=16, tied_embeddings=False)
WORLD, BATCH, SEQ = 2, 2, 8


def _worker(rank, world, init, out):
    import torch
    import torch.distributed as dist

    from shapewise.dataparallel import build_model, train_step, wrap

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    gen = torch.Generator().manual_seed(5)
    tokens, targets = (torch.randint(0, TINY.vocab, (world * BATCH, SEQ), generator=gen) for _ in range(2))
    mine = slice(rank * BATCH, (rank + 1) * BATCH)
    # One process on the whole batch: the mean loss's gradients are the mean of the ranks'.
    whole = build_model(TINY, seed=1)
    reference = torch.optim.SGD(whole.parameters(), lr=0.5)
    train_step(whole, None, tokens, targets)
    grads = [p.grad.clone() for p in whole.parameters()]
    reference.step()
    result = {}
    for kind in ("ddp", "fsdp"):
        model = wrap(build_model(TINY, seed=1), kind)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        train_step(model, None, tokens[mine], targets[mine])
        full = lambda t: t.full_tensor() if hasattr(t, "full_tensor") else t
        grad_error = max(float((full(p.grad) - g).abs().max() / g.abs().max().clamp_min(1e-12))
                         for p, g in zip(model.parameters(), grads))
        optimizer.step()
        weight_error = max(float((full(p.detach()) - q.detach()).abs().max())
                           for p, q in zip(model.parameters(), whole.parameters()))
        result[kind] = {"grad_error": grad_error, "weight_error": weight_error,
                        "sharded": any(hasattr(p, "full_tensor") for p in model.parameters())}
    with open(f"{out}/rank{rank}.json", "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def gloo_steps(tmp_path_factory):
    pytest.importorskip("torch")
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("torch.distributed with gloo is not available")
    # On a loaded 2-core machine torch's gloo now and then aborts a worker from its own threads ("terminate
    # called without an active exception"; 3 of about 10 full runs here, never alone). Such a run is
    # tried once more from scratch; a run whose every rank wrote its results before the abort keeps them.
    for attempt in range(2):
        out = tmp_path_factory.mktemp("dp")
        try:
            mp.spawn(_worker, args=(WORLD, f"file://{out / 'init'}", str(out)), nprocs=WORLD)
        except mp.ProcessExitedException as exc:
            if exc.signal_name != "SIGABRT" or (attempt and not _all_written(out)):
                raise
            if not _all_written(out):
                continue
        return [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]


def _all_written(out) -> bool:
    return all((out / f"rank{r}.json").exists() for r in range(WORLD))


@pytest.mark.parametrize("kind", ["ddp", "fsdp"])
def test_a_data_parallel_step_equals_one_process_on_the_whole_batch(gloo_steps, kind):
    for rank in gloo_steps:
        row = rank[kind]
        assert row["grad_error"] < 1e-5 and row["weight_error"] < 1e-6, row
        assert row["sharded"] == (kind == "fsdp")


def test_unknown_kinds_are_refused():
    pytest.importorskip("torch")
    from shapewise.dataparallel import wrap

    with pytest.raises(ShapewiseError, match="ddp or fsdp"):
        wrap(None, "zero9")
