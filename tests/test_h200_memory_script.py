"""The H200 memory benchmark's model building and steps, on the CPU with tiny shapes."""

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

spec = importlib.util.spec_from_file_location("h200_memory", Path(__file__).parents[1] / "benchmarks" / "h200_memory.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


@pytest.mark.parametrize("label", [c[0] for c in bench.CONFIGS])
def test_every_config_builds_and_steps_on_the_cpu(label):
    _, shape, _, _, attention, recompute, precision = next(c for c in bench.CONFIGS if c[0] == label)
    tiny = shape.replace(hidden=64, num_heads=4, num_kv_heads=None if shape.kv_heads == shape.num_heads else 2,
                         ffn=None if shape.ffn is None else 96, expert_ffn=None if shape.expert_ffn is None else 32,
                         vocab=101, num_layers=2, learned_positions=16 if shape.learned_positions else 0)
    _, params = bench.build_model(tiny, device="cpu", attention=attention, recompute=recompute)
    assert sum(p.numel() for p in params) == tiny.params  # the whole model, each weight once
    before = [p.detach().clone() for p in params]
    got = bench.measure(tiny, 2, 16, attention, recompute, precision, device="cpu", steps=2)
    assert got["loss"] == got["loss"]  # finite, not NaN
    _, params2 = bench.build_model(tiny, device="cpu", attention=attention, recompute=recompute)
    assert all(torch.equal(a, b) for a, b in zip(before, params2))  # seeded: the same model again
    est = bench.predicted(tiny, 2, 16, attention, recompute, precision)
    assert est.allocated_bytes > 0


def test_the_steps_train():
    shape = bench.BASE.replace(hidden=64, num_heads=4, ffn=96, vocab=101, num_layers=2)
    for precision in ("bf16", "mixed"):
        loss_fn, params = bench.build_model(shape, device="cpu", attention="flash", recompute="none")
        step = bench.make_step(params, precision)
        ids = torch.randint(0, 101, (2, 16), generator=torch.Generator().manual_seed(0))
        first = None
        for _ in range(5):
            loss = loss_fn(ids, ids)
            loss.backward()
            step()
            first = first if first is not None else float(loss.detach())
        assert float(loss.detach()) < first
        assert all(p.grad is not None and not p.grad.any() for p in params)  # persistent, zeroed
