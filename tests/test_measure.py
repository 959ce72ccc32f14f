"""shapewise.measure: statistics, the budget logic under a fake clock, real CPU timings, and the
probe script's smoke run. GPU tests run only where CUDA is (pytest -m gpu)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shapewise.measure import (
    Timing,
    _HostTimer,
    device_text,
    free_memory,
    interleave,
    needs_text,
    plan_reps,
    round_orders,
    time_fn,
    warm_up,
)

REPO = Path(__file__).resolve().parents[1]


def _torch():
    return pytest.importorskip("torch")


def _cuda_torch():
    torch = _torch()
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return torch


class FakeClock:
    """A clock that moves only when a fake op says so: budget logic without real time."""

    def __init__(self):
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s

    def op(self, cost_ms: float, calls: list | None = None):
        def fn():
            self.now_s += cost_ms / 1e3
            if calls is not None:
                calls.append(1)
        return fn


# ---- Timing -----------------------------------------------------------------------------------

def test_timing_statistics_on_known_samples():
    t = Timing((4.0, 1.0, 3.0, 2.0))  # order must not matter
    assert t.num_reps == 4
    assert t.median_ms == pytest.approx(2.5)
    assert t.q25_ms == pytest.approx(1.75)  # numpy's default linear interpolation
    assert t.q75_ms == pytest.approx(3.25)
    assert t.iqr_ms == pytest.approx(1.5)
    assert t.rel_iqr == pytest.approx(0.6)
    assert t.wide
    assert t.min_ms == 1.0
    assert t.samples_ms == (4.0, 1.0, 3.0, 2.0)  # raw samples kept, in order


def test_timing_matches_numpy_percentiles():
    np = pytest.importorskip("numpy")
    samples = tuple(float(x) for x in np.random.default_rng(1).lognormal(size=37))
    t = Timing(samples)
    assert t.median_ms == pytest.approx(np.median(samples))
    assert t.q25_ms == pytest.approx(np.percentile(samples, 25))
    assert t.q75_ms == pytest.approx(np.percentile(samples, 75))


def test_timing_narrow_and_degenerate():
    assert not Timing((1.0, 1.01, 0.99, 1.0, 1.02)).wide
    one = Timing((2.0,))
    assert (one.median_ms, one.iqr_ms, one.rel_iqr, one.wide) == (2.0, 0.0, 0.0, False)
    assert Timing((0.0, 0.0)).rel_iqr == 0.0
    with pytest.raises(ValueError):
        Timing(())


def test_timing_is_frozen_and_not_stored_twice():
    t = Timing((1.0, 2.0))
    with pytest.raises(AttributeError):
        t.samples_ms = (3.0,)
    assert [f for f in Timing.__dataclass_fields__] == ["samples_ms"]


# ---- the budget logic, with a fake clock ------------------------------------------------------

def test_plan_reps_clamps():
    assert plan_reps(2.0, 100, 5, 1000) == 50
    assert plan_reps(50.0, 100, 5, 1000) == 5  # slow op: min_reps
    assert plan_reps(0.01, 100, 5, 1000) == 1000  # fast op: max_reps
    assert plan_reps(0.0, 100, 5, 1000) == 1000  # a clock too coarse to see it
    with pytest.raises(ValueError):
        plan_reps(1.0, 100, 0, 10)
    with pytest.raises(ValueError):
        plan_reps(1.0, 100, 10, 5)


def test_warm_up_fills_its_budget_without_overshoot():
    clock = FakeClock()
    calls, per_call_ms = warm_up(_HostTimer(clock), clock.op(2.0), warmup_ms=10)
    assert calls == 5 and per_call_ms == pytest.approx(2.0)
    assert clock() * 1e3 == pytest.approx(10.0)


def test_warm_up_of_a_slow_op_makes_one_call():
    clock = FakeClock()
    calls, per_call_ms = warm_up(_HostTimer(clock), clock.op(40.0), warmup_ms=25)
    assert (calls, per_call_ms) == (1, pytest.approx(40.0))


def test_warm_up_grows_batches_geometrically():
    clock = FakeClock()
    syncs = []
    timer = _HostTimer(clock)
    timer.sync = lambda: syncs.append(1)
    calls, _ = warm_up(timer, clock.op(0.001), warmup_ms=25)  # 25,000 calls
    assert calls == pytest.approx(25_000, rel=0.01)
    assert len(syncs) < 60  # batches doubled: a few dozen syncs, not one per call


@pytest.mark.parametrize("cost_ms, budget_ms, expected_reps", [
    (2.0, 100, 50),  # budget / per-call time
    (50.0, 100, 5),  # min_reps wins
    (1 / 64, 100, 1000),  # max_reps wins (1/64 ms: exact in binary, so the fake clock adds up exactly)
])
def test_time_fn_budgets_with_fake_clock(cost_ms, budget_ms, expected_reps):
    clock = FakeClock()
    calls = []
    timing = time_fn(clock.op(cost_ms, calls), device="cpu", warmup_ms=10, budget_ms=budget_ms,
                     min_reps=5, max_reps=1000, clock=clock)
    assert timing.num_reps == expected_reps
    assert timing.median_ms == pytest.approx(cost_ms)
    assert timing.iqr_ms == pytest.approx(0.0, abs=1e-9)
    warmup_calls = max(1, round(10 / cost_ms)) if cost_ms <= 10 else 1
    assert len(calls) == 1 + warmup_calls + expected_reps  # cold call, warm-up, timed reps


def test_time_fn_keeps_raw_samples_from_a_fake_clock():
    clock = FakeClock()
    costs = iter([1.0] * 11 + [1.0, 3.0, 2.0, 5.0, 4.0])  # cold call + 10 warm-up calls of 1 ms

    def fn():
        clock.now_s += next(costs) / 1e3

    timing = time_fn(fn, device="cpu", warmup_ms=10, budget_ms=5, min_reps=5, max_reps=5, clock=clock)
    assert timing.samples_ms == pytest.approx((1.0, 3.0, 2.0, 5.0, 4.0))
    assert timing.median_ms == pytest.approx(3.0)


def test_cuda_graph_needs_cuda():
    with pytest.raises(ValueError):
        time_fn(lambda: None, device="cpu", cuda_graph=True)


def test_refusals_word_the_device_and_its_memory_one_way():
    """bench's and verify's refusals of a shape too big for the device share these words."""
    assert (device_text("cpu"), device_text("cuda:1")) == ("the CPU", "the GPU (cuda:1)")
    assert needs_text(2.4e9, 2 * 10**9) == "needs 2.4 GB, the device has 2.0 GB"
    assert needs_text(1234.5e9, None, about=True, what=" for its weights") == \
        "needs about 1,234.5 GB for its weights, the device's memory unknown"


def test_free_memory_empties_cuda_cache_only_and_never_hides_the_failure_it_follows(monkeypatch):
    import types

    import shapewise.measure as measure

    calls = []

    def empty_cache():  # as after an illegal memory access: every CUDA call fails from then on
        calls.append(1)
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(measure, "import_torch", lambda: types.SimpleNamespace(cuda=types.SimpleNamespace(
        empty_cache=empty_cache)))
    free_memory("cpu")
    assert calls == []
    free_memory("cuda:1")
    assert calls == [1]


def test_importing_measure_does_not_import_torch():
    code = "import sys, shapewise, shapewise.measure; assert 'torch' not in sys.modules, 'torch imported'"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_interleave_with_fake_clock_gives_exact_ratios():
    clock = FakeClock()
    result = interleave({"a": clock.op(1.0), "b": clock.op(2.0), "c": clock.op(0.5)}, device="cpu",
                        rounds=6, budget_ms=30, warmup_ms=3, clock=clock)
    assert list(result) == ["a", "b", "c"]
    assert result["a"].ratio == 1.0 and (result["a"].ci_low, result["a"].ci_high) == (1.0, 1.0)
    assert result["b"].ratio == pytest.approx(2.0) and result["c"].ratio == pytest.approx(0.5)
    assert result["b"].timing.num_reps == 6 * 2  # 30 ms over 6 rounds at 2 ms a call
    assert len(result["b"].round_ratios) == 6


def test_interleave_rotates_the_first_place_and_shuffles_the_rest():
    clock = FakeClock()
    order = []

    def variant(name):
        def fn():
            order.append(name)
            clock.now_s += 1e-3
        return fn

    names = ["a", "b", "c", "d"]
    interleave({n: variant(n) for n in names}, device="cpu", rounds=12, budget_ms=12, warmup_ms=1, clock=clock)
    timed = [order[-48:][i:i + 4] for i in range(0, 48, 4)]  # after the warm-ups: one call per variant per round
    assert timed == round_orders(names, 12) == round_orders(names, 12, seed=0)
    assert [r[0] for r in timed] == names * 3 and all(sorted(r) == names for r in timed)
    after = {(r[i], r[i + 1]) for r in timed for i in range(3)}
    assert all(len({x for x, y in after if y == n}) >= 2 for n in names)  # none always follows the same one
    assert round_orders(names, 12, seed=1) != timed


def test_interleave_keeps_a_heavy_variant_from_slowing_the_one_always_after_it():
    """On a clock that runs a call 10% slow right after "hot" (a candidate that heats the GPU), rotated
    rounds in a fixed order put "a" after it in almost every round; shuffled, "a" follows it in a
    third of them, and its median ratio stays that of its own speed."""
    clock = FakeClock()
    last = []

    def variant(name, ms):
        def fn():
            clock.now_s += 1e-3 * ms * (1.1 if last and last[-1] == "hot" else 1.0)
            last.append(name)
        return fn

    fns = {"base": variant("base", 1.0), "hot": variant("hot", 2.0), "a": variant("a", 1.0), "b": variant("b", 1.0)}
    result = interleave(fns, device="cpu", rounds=15, budget_ms=15, warmup_ms=1, clock=clock)
    assert result["a"].ratio == pytest.approx(1.0) and result["b"].ratio == pytest.approx(1.0)


def test_interleave_settles_after_each_variant_for_its_busy_time():
    clock = FakeClock()
    slept = []
    interleave({"a": clock.op(1.0), "b": clock.op(2.0)}, device="cpu", rounds=3, budget_ms=6, warmup_ms=1,
               clock=clock, settle=1.5, sleep=slept.append)
    assert slept == pytest.approx([1.5 * 2e-3] * 6)  # seconds: a round's share of the budget (2 ms) each
    quiet = []
    interleave({"a": clock.op(1.0)}, device="cpu", rounds=2, budget_ms=2, warmup_ms=1, clock=clock, sleep=quiet.append)
    assert quiet == []  # the CPU's clock is not the GPU's: no settling by default


def test_interleave_spreads_the_first_place_of_a_round_over_every_variant():
    """Three equal variants on a clock that runs the first call of each round 5% fast (a GPU
    boosting after the host's gap): in a fixed order the first variant would seem 5% faster than
    the others in every round; rotated, the bias lands on each in turn and the medians agree."""
    names = ("a", "b", "c")

    def run(fast_from: int) -> tuple[dict, list]:
        clock, timed = FakeClock(), []

        def variant(name):
            def fn():
                timed.append(name)
                first = len(timed) > fast_from and (len(timed) - fast_from) % 3 == 1
                clock.now_s += 1e-3 * (0.95 if first else 1.0)
            return fn

        return interleave({n: variant(n) for n in names}, device="cpu", rounds=9, budget_ms=9, warmup_ms=1,
                          clock=clock), timed

    warm_ups = len(run(10**9)[1]) - 9 * 3  # the calls before the rounds (their count does not depend on the 5%)
    result, timed = run(warm_ups)
    assert [timed[warm_ups + 3 * r] for r in range(9)] == list(names) * 3  # the fast calls: each round's first
    assert all(result[n].ratio == pytest.approx(1.0) for n in names)


# ---- real timings on the CPU ------------------------------------------------------------------

def test_time_fn_cpu_matmul_is_positive():
    torch = _torch()
    a = torch.randn(64, 64)
    timing = time_fn(lambda: a @ a, device="cpu", warmup_ms=2, budget_ms=10)
    assert timing.median_ms > 0 and 5 <= timing.num_reps <= 1000
    assert all(s > 0 for s in timing.samples_ms)


def test_interleave_cpu_double_work_is_slower():
    torch = _torch()
    a = torch.randn(192, 192)

    def once():
        a @ a

    def twice():
        a @ a
        a @ a

    result = interleave({"once": once, "twice": twice}, device="cpu", rounds=9, budget_ms=60, warmup_ms=5)
    assert set(result) == {"once", "twice"}
    assert result["once"].ratio == 1.0
    # Twice the work: ~2x. Bounds are loose so a busy CI machine does not flake.
    assert 1.2 < result["twice"].ratio < 4
    assert result["twice"].ci_low <= result["twice"].ratio <= result["twice"].ci_high


def test_environment_cpu_keys():
    torch = _torch()
    from shapewise.measure import environment

    env = environment("cpu")
    assert {"device", "processor", "torch_version", "timestamp_utc", "python_version"} <= set(env)
    assert env["device"] == "cpu" and env["torch_version"] == torch.__version__
    assert env["timestamp_utc"].endswith("+00:00")


# ---- on a GPU ---------------------------------------------------------------------------------

@pytest.mark.gpu
def test_time_fn_cuda_matmul_with_flush():
    torch = _cuda_torch()
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    timing = time_fn(lambda: a @ a, device="cuda", warmup_ms=10, budget_ms=50)
    tflops = 2 * 4096**3 / (timing.median_ms * 1e-3) / 1e12
    assert 10 < tflops < 2000, tflops  # a real GPU rate: not launch overhead, not impossible
    assert not timing.wide, timing


@pytest.mark.gpu
def test_flush_makes_cache_resident_op_slower():
    torch = _cuda_torch()
    x = torch.randn(4 * 2**20, device="cuda", dtype=torch.bfloat16)  # 8 MB: fits in any recent L2
    hot = time_fn(lambda: x * 2, device="cuda", flush_l2=False, warmup_ms=10, budget_ms=50)
    cold = time_fn(lambda: x * 2, device="cuda", flush_l2=True, warmup_ms=10, budget_ms=50)
    assert cold.median_ms > hot.median_ms


@pytest.mark.gpu
def test_flush_buffer_is_twice_the_l2():
    torch = _cuda_torch()
    from shapewise.measure import flush_bytes

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    assert flush_bytes("cuda") == 2 * l2 if l2 else flush_bytes("cuda") == 256 * 2**20
    assert flush_bytes("cuda", l2_bytes=10**6) == 2 * 10**6


@pytest.mark.gpu
def test_cushion_keeps_launch_overhead_out():
    """Twenty tiny kernels: a few us of GPU work each, but more host time to launch. Without the
    cushion the events also time the host; with it, only the GPU work."""
    torch = _cuda_torch()
    x = torch.randn(1024, device="cuda")

    def many_tiny():
        for _ in range(20):
            x.add_(1)

    with_cushion = time_fn(many_tiny, device="cuda", warmup_ms=5, budget_ms=30)
    without = time_fn(many_tiny, device="cuda", warmup_ms=5, budget_ms=30, cushion=False)
    graphed = time_fn(many_tiny, device="cuda", warmup_ms=5, budget_ms=30, cuda_graph=True, graph_calls=1)
    assert with_cushion.median_ms < without.median_ms
    assert with_cushion.median_ms < 2 * graphed.median_ms  # graph replay: no launch gaps at all


@pytest.mark.gpu
def test_cuda_graph_per_call_time():
    torch = _cuda_torch()
    x = torch.randn(1024, device="cuda")
    plain = time_fn(lambda: x.add_(1), device="cuda", warmup_ms=5, budget_ms=20, flush_l2=False)
    graphed = time_fn(lambda: x.add_(1), device="cuda", warmup_ms=5, budget_ms=20, flush_l2=False,
                      cuda_graph=True, graph_calls=50)
    assert 0 < graphed.median_ms <= plain.median_ms * 1.5  # a tiny op: graphs cut its launch cost


@pytest.mark.gpu
def test_environment_cuda_keys():
    _cuda_torch()
    from shapewise.measure import environment

    env = environment("cuda")
    for key in ("gpu_name", "driver_version", "cuda_version", "cublas_version", "sm_clock_mhz",
                "sm_clock_max_mhz", "l2_bytes", "timestamp_utc", "torch_version"):
        assert key in env
    assert env["gpu_name"]


@pytest.mark.gpu
def test_interleave_cuda_double_work():
    torch = _cuda_torch()
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)

    def twice():
        a @ a
        a @ a

    result = interleave({"once": lambda: a @ a, "twice": twice}, device="cuda", rounds=10, budget_ms=50)
    assert 1.6 < result["twice"].ratio < 2.4


def test_a_sweep_settles_for_longer_after_a_case_that_kept_the_gpu_busy_longer():
    """The pause after a case is SETTLE times its busy time (its samples and its warm-up): a case
    of ten 2 ms calls leaves a pause a hundred times a case of ten 0.02 ms calls' samples."""
    from shapewise.measure import SETTLE, Timing, settle_ms

    long, short = Timing((2.0,) * 10), Timing((0.02,) * 10)
    assert settle_ms(long, 3) == pytest.approx(SETTLE * 23) and settle_ms(short, 0) == pytest.approx(SETTLE * 0.2)
    assert SETTLE >= 1  # at most half the time busy: the mean power stays where the clock holds


def test_a_sweep_pauses_after_a_gpu_case_only():
    from shapewise.bench import settle
    from shapewise.measure import SETTLE, Timing

    pauses = []
    measured = {"timing": Timing((1.0,) * 10)}
    settle(measured, device="cuda:1", warmup_ms=3, sleep=pauses.append)
    assert pauses == [pytest.approx(SETTLE * 13 / 1e3)]  # seconds
    settle(measured, device="cpu", warmup_ms=3, sleep=pauses.append)
    settle({"error": "out of memory"}, device="cuda", warmup_ms=3, sleep=pauses.append)
    assert len(pauses) == 1
