"""A trustworthy timer for one GPU (or CPU) operation, in the manner of triton.testing.do_bench
and torch.utils.benchmark: warm up, flush the L2 cache, time each call with CUDA events, keep
every sample, and report the median with its spread.

torch is optional for shapewise: this module imports it only inside functions that need it, so
`import shapewise.measure` works without torch, and the CPU timing logic runs anywhere.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

WIDE_REL_IQR = 0.1  # a spread (IQR / median) above this says the timing is not to be trusted
DEFAULT_FLUSH_BYTES = 256 * 2**20  # flush buffer when the L2 size cannot be read
MAX_WARMUP_CALLS = 100_000  # guards the warm-up loop against a clock that never advances


def import_torch():
    """torch, or an error that says how to install it: measuring needs it, nothing else does."""
    try:
        import torch
    except ImportError:
        from .errors import ShapewiseError

        raise ShapewiseError("measuring needs torch: pip install 'shapewise[gpu]'") from None
    return torch


# ---- statistics -------------------------------------------------------------------------------

def _quantile(sorted_xs, q: float) -> float:
    """Quantile by linear interpolation between closest ranks (numpy's default method)."""
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def _median(xs) -> float:
    return _quantile(sorted(xs), 0.5)


@dataclass(frozen=True)
class Timing:
    """Per-call times of one operation. Only the samples are stored; every statistic derives
    from them, so they can never disagree."""

    samples_ms: tuple[float, ...]

    def __post_init__(self):
        samples = tuple(float(s) for s in self.samples_ms)
        if not samples:
            raise ValueError("Timing needs at least one sample")
        object.__setattr__(self, "samples_ms", samples)

    @functools.cached_property
    def _sorted(self) -> tuple[float, ...]:
        return tuple(sorted(self.samples_ms))

    @property
    def num_reps(self) -> int:
        return len(self.samples_ms)

    @property
    def median_ms(self) -> float:
        return _quantile(self._sorted, 0.5)

    @property
    def min_ms(self) -> float:
        return self._sorted[0]

    @property
    def q25_ms(self) -> float:
        return _quantile(self._sorted, 0.25)

    @property
    def q75_ms(self) -> float:
        return _quantile(self._sorted, 0.75)

    @property
    def iqr_ms(self) -> float:
        return self.q75_ms - self.q25_ms

    @property
    def rel_iqr(self) -> float:
        """IQR over median: the spread as a fraction of the typical time."""
        if self.median_ms > 0:
            return self.iqr_ms / self.median_ms
        return 0.0 if self.iqr_ms == 0 else math.inf

    @property
    def wide(self) -> bool:
        """True when the spread is too large for the median to be trusted to 10%."""
        return self.rel_iqr > WIDE_REL_IQR

    def __str__(self) -> str:
        flag = " WIDE" if self.wide else ""
        return (f"{self.median_ms:.4g} ms (IQR {self.iqr_ms:.3g} ms, {100 * self.rel_iqr:.1f}%, "
                f"n={self.num_reps}){flag}")


# ---- timers: how one batch of calls is timed on each device ----------------------------------

def check_device(device: str, *, present: bool = True) -> str:
    """`device` if shapewise can measure on it ("cpu", "cuda" or "cuda:N" of a GPU torch sees),
    else a ShapewiseError that says which devices there are. torch is asked only about CUDA, and
    only when `present` (False: the name alone is checked, as when the command line is read)."""
    from .errors import ShapewiseError, argument

    text = str(device).strip().lower()
    kind, _, index = text.partition(":")
    if text == "cpu":
        return text
    if kind != "cuda" or (index and not index.isdigit()) or text.endswith(":"):
        raise ShapewiseError(f"unknown device {device!r}: measure on cpu, cuda or cuda:N (N a GPU's index)")
    if not present:
        return text
    try:
        import torch
    except ImportError:
        raise ShapewiseError("measuring on a GPU needs torch: pip install \"shapewise[gpu]\"") from None
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise ShapewiseError(f"no CUDA GPU is visible here ({device}); measure on the CPU with {argument('device')} cpu")
    if index and int(index) >= count:
        raise ShapewiseError(f"{device}: there {'is one GPU' if count == 1 else f'are {count} GPUs'} here, "
                             f"cuda:0 to cuda:{count - 1}")
    return text


def _is_cuda(device) -> bool:
    # String test, so the CPU path never needs torch; accepts "cuda", "cuda:1" or a torch.device.
    return str(device).startswith("cuda")


class _HostTimer:
    """Times calls with a host clock. Used on the CPU, and in tests with a fake clock."""

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock  # seconds, like time.perf_counter

    def sync(self) -> None:
        pass

    def time_calls(self, fn, prep, n: int) -> list[float]:
        samples_ms = []
        for _ in range(n):
            prep()  # outside the timed region
            t0 = self.clock()
            fn()
            samples_ms.append((self.clock() - t0) * 1e3)
        return samples_ms


class _CudaTimer:
    """Times calls with CUDA events recorded on the current stream. Events measure GPU time
    between them, without a host round trip per call; one synchronize at the end of a batch."""

    def __init__(self, device, clock: Callable[[], float]):
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.clock = clock  # host clock, used only for the warm-up budget

    def sync(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def sleep_fn(self, ms: float) -> Callable[[], None] | None:
        """A call that queues about `ms` of GPU spinning (torch.cuda._sleep counts clock cycles);
        None where this torch has no _sleep."""
        if not hasattr(self.torch.cuda, "_sleep"):
            return None
        cycles = round(ms * _sleep_cycles_per_ms(str(self.device)))
        return lambda: self.torch.cuda._sleep(cycles)

    def time_calls(self, fn, prep, n: int) -> list[float]:
        Event = self.torch.cuda.Event
        starts = [Event(enable_timing=True) for _ in range(n)]
        ends = [Event(enable_timing=True) for _ in range(n)]
        stream = self.torch.cuda.current_stream(self.device)
        for start, end in zip(starts, ends):
            prep()  # flush and cushion are queued before the start event: outside the timed region
            start.record(stream)
            fn()
            end.record(stream)
        self.sync()
        return [start.elapsed_time(end) for start, end in zip(starts, ends)]


@functools.lru_cache(maxsize=None)
def _sleep_cycles_per_ms(device: str) -> float:
    """Cycles of torch.cuda._sleep per millisecond on this GPU. Measured twice, keeping the second:
    the first may run at idle clocks, which would make every later cushion too short."""
    import torch

    cycles = 5_000_000  # about 2.5 ms at the H200's 1980 MHz
    with torch.cuda.device(torch.device(device)):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(2):
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            torch.cuda.synchronize()
        return cycles / start.elapsed_time(end)


def _make_timer(device, clock):
    clock = clock or time.perf_counter
    return _CudaTimer(device, clock) if _is_cuda(device) else _HostTimer(clock)


# ---- the L2 flush -----------------------------------------------------------------------------

@functools.lru_cache(maxsize=4)
def _flush_buffer(device: str, nbytes: int):
    import torch

    return torch.empty(nbytes, dtype=torch.int8, device=device)


def flush_bytes(device, l2_bytes: int | None = None) -> int:
    """Size of the flush buffer: twice the L2, so that writing it evicts everything else."""
    if l2_bytes is None:
        import torch

        l2_bytes = getattr(torch.cuda.get_device_properties(torch.device(device)), "L2_cache_size", 0)
    return 2 * l2_bytes if l2_bytes else DEFAULT_FLUSH_BYTES


def _make_flush(device, flush_l2: bool, l2_bytes: int | None) -> Callable[[], None]:
    """Overwrite a buffer twice the L2's size before each timed call, so every call reads its
    inputs from device memory, as a layer in a real model does (the layers between evicted them);
    otherwise a memory-bound op whose inputs fit in the H200's 50-60 MB L2 measures the cache, not
    HBM. The CPU has no flush: a no-op."""
    if not (flush_l2 and _is_cuda(device)):
        return lambda: None
    import torch

    buffer = _flush_buffer(str(torch.device(device)), flush_bytes(device, l2_bytes))
    return buffer.zero_


CUSHION_MARGIN_MS = 0.01


def _host_ms(timer, fn, flush, calls: int = 5) -> float:
    """Median host time to issue fn (its launches, not its GPU work)."""
    samples = []
    for _ in range(calls):
        flush()  # keeps the GPU busy, as in the timed loop
        t0 = timer.clock()
        fn()
        samples.append((timer.clock() - t0) * 1e3)
        timer.sync()
    return _median(samples)


def _make_prep(timer, fn, device, flush_l2: bool, l2_bytes: int | None, cushion: bool) -> Callable[[], None]:
    """What runs before each timed call: the L2 flush, then on a GPU a "cushion": a spin kernel
    that lasts longer than the host takes to issue fn. The start event, fn's kernels and the end
    event are then all queued before the start event runs, so the GPU never idles between them
    waiting for the host, and a timing never includes launch overhead. Without it, ops shorter
    than their launch (small elementwise ops, multi-kernel forward+backward) measure the host.
    The idea is nvbench's blocking kernel; torch.cuda._sleep is the spin."""
    flush = _make_flush(device, flush_l2, l2_bytes)
    if not (cushion and _is_cuda(device)):
        return flush
    # Twice the host's issue time, plus a margin: host jitter must not outlast the spin.
    sleep = timer.sleep_fn(2 * _host_ms(timer, fn, flush) + CUSHION_MARGIN_MS)
    if sleep is None:
        return flush

    def prep():
        flush()
        sleep()

    return prep


# ---- settling: each case measured from the same state of the GPU's clocks ----------------------

# An H200 lowers its SM clock as its power draw nears the cap, within a fraction of a second: a GEMM
# measured right after other large GEMMs ran 2% slower (6% over 1 ms, 14% at the 90th percentile)
# than after an idle pause, and 23% slower after 0.1 s at the cap, while after an idle pause the same
# GEMMs repeat within 0.5% (benchmarks/RESULTS.md, "measured from a settled GPU"). A sweep therefore
# leaves the GPU idle after each case for SETTLE times the time the case kept it busy: the mean
# power stays where the clock holds, whatever the cases around it.
SETTLE = 1.5


def settle_ms(timing: Timing, warmup_ms: float, factor: float = SETTLE) -> float:
    """The idle pause after a case measured as `timing` (after about warmup_ms of warm-up calls)."""
    return factor * (sum(timing.samples_ms) + warmup_ms)


# ---- the budget logic: warm-up, then as many repetitions as the budget holds ----------------

def warm_up(timer, call, warmup_ms: float) -> tuple[int, float]:
    """Run call() for about warmup_ms of wall time; return (calls made, per-call ms estimate).

    Calls run in batches that grow geometrically but never much past the remaining budget, with
    a synchronize only between batches; the estimate is the last (most warmed-up) batch's."""
    calls, spent_ms, batch = 0, 0.0, 1
    while True:
        timer.sync()
        t0 = timer.clock()
        for _ in range(batch):
            call()
        timer.sync()
        batch_ms = (timer.clock() - t0) * 1e3
        calls += batch
        spent_ms += batch_ms
        per_call_ms = batch_ms / batch
        remaining_ms = warmup_ms - spent_ms
        if remaining_ms <= 0 or calls >= MAX_WARMUP_CALLS:
            return calls, per_call_ms
        fits = math.ceil(remaining_ms / per_call_ms) if per_call_ms > 0 else 2 * batch
        batch = max(1, min(2 * batch, fits))


def plan_reps(per_call_ms: float, budget_ms: float, min_reps: int, max_reps: int) -> int:
    """Repetitions that fill budget_ms at per_call_ms each, within [min_reps, max_reps]."""
    if min_reps < 1 or max_reps < min_reps:
        raise ValueError(f"need 1 <= min_reps <= max_reps, got {min_reps}, {max_reps}")
    wanted = round(budget_ms / per_call_ms) if per_call_ms > 0 else max_reps
    return max(min_reps, min(max_reps, wanted))


def _graph_replay(fn, calls: int):
    """Capture `calls` calls of fn in one CUDA graph; return its replay. Replaying removes the
    host's launch overhead, which otherwise dominates ops of a few microseconds."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up before capture, as torch.cuda.graphs requires
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph.replay


def time_fn(fn: Callable[[], object], *, device="cuda", warmup_ms: float = 25, budget_ms: float = 100,
            min_reps: int = 5, max_reps: int = 1000, flush_l2: bool = True, l2_bytes: int | None = None,
            cuda_graph: bool = False, graph_calls: int = 20, cushion: bool = True,
            clock: Callable[[], float] | None = None, warmup_calls: int | None = None,
            reps: int | None = None) -> Timing:
    """Time fn() on `device` ("cuda", "cuda:N" or "cpu"); return every per-call sample.

    1. One untimed cold call (lazy init, library heuristics, allocator growth).
    2. Warm-up for warmup_ms of wall time; it also estimates the time per call, flush included.
    3. budget_ms / estimate repetitions, clamped to [min_reps, max_reps], each timed alone
       (CUDA events on a GPU, `clock` on the CPU) after an L2 flush outside the timed region.

    On a GPU, cushion=True also queues a short spin before each timed call so that launch
    overhead stays out of the timing (see _make_prep); it costs wall time, not accuracy.
    Pass cushion=False (and flush_l2=False) to time what a tight host loop would see.

    cuda_graph=True (GPU only) captures graph_calls calls in a CUDA graph and times its replays,
    for ops so small that launch overhead would dominate; each sample is replay time / graph_calls.
    The flush then precedes each replay only, so all but the first call of a replay find a warm L2.
    clock (seconds) replaces time.perf_counter: tests pass a fake one. warmup_calls and reps, given
    together, replace the budgets with fixed counts (for functions that run collectives across ranks).
    """
    timer = _make_timer(device, clock)
    calls_per_sample = 1
    if cuda_graph:
        if not _is_cuda(device):
            raise ValueError("cuda_graph=True needs a CUDA device")
        fn, calls_per_sample = _graph_replay(fn, graph_calls), graph_calls

    fn()  # cold call: lazy init, library heuristics, allocator growth
    timer.sync()
    prep = _make_prep(timer, fn, device, flush_l2, l2_bytes, cushion)

    def call():
        prep()
        fn()

    if warmup_calls is not None and reps is not None:
        # Fixed counts: ranks that call collectives inside fn must all call it equally often, which
        # time budgets (each rank's own clock) cannot promise.
        for _ in range(warmup_calls):
            call()
        timer.sync()
    else:
        _, per_call_ms = warm_up(timer, call, warmup_ms)
        reps = plan_reps(per_call_ms, budget_ms, min_reps, max_reps)
    samples_ms = timer.time_calls(fn, prep, reps)
    return Timing(tuple(s / calls_per_sample for s in samples_ms))


def device_memory_bytes(device: str) -> int | None:
    """The memory a case's tensors must fit in: the GPU's own, or on the CPU the machine's; None where
    it cannot be read (no sysconf: Windows)."""
    if device.startswith("cuda"):
        torch = import_torch()
        return torch.cuda.get_device_properties(torch.device(device)).total_memory
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return min(memory, _address_space_limit() or memory)


def free_memory(device) -> None:
    """Give the memory of tensors just dropped back to the device: CUDA's caching allocator keeps it
    otherwise, and the next case or shape would find less. Nothing to do on the CPU. Best effort: after
    a failure that leaves the GPU unusable (a sticky CUDA error) this raises too, and the failure, not
    this, is what the caller reports."""
    if _is_cuda(device):
        with contextlib.suppress(Exception):
            import_torch().cuda.empty_cache()


def device_text(device: str) -> str:
    """A device as a refusal names it: "the CPU", or "the GPU (cuda:1)"."""
    return "the CPU" if device == "cpu" else f"the GPU ({device})"


def needs_text(need_bytes: float, memory: int | None, *, about: bool = False, what: str = "") -> str:
    """What a shape needs beside what the device has, as every refusal of one too big for its device says it:
    "needs 2.4 GB, the device has 2.0 GB". about: the need is an estimate (a model's); what: what the bytes
    are ("for its tensors"); memory None: not known (no sysconf)."""
    have = f"the device has {_gb(memory)}" if memory is not None else "the device's memory unknown"
    return f"needs {'about ' if about else ''}{_gb(need_bytes)}{what}, {have}"


def _gb(num_bytes: float) -> str:
    return f"{num_bytes / 1e9:,.1f} GB"


def _address_space_limit() -> int | None:
    """The process's address-space limit (ulimit -v, prlimit --as), None where it has none: below the
    machine's memory, it is what the process can allocate."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


# ---- interleaved comparison -------------------------------------------------------------------

@dataclass(frozen=True)
class Comparison:
    """One variant of an interleaved run, against the first variant (the baseline)."""

    timing: Timing
    ratio: float  # median over rounds of (this variant's round median / baseline's round median)
    ci_low: float  # bootstrap confidence interval of that median ratio
    ci_high: float
    round_ratios: tuple[float, ...]

    @property
    def significant(self) -> bool:
        """The interval excludes 1: the variant differs from the baseline."""
        return self.ci_low > 1 or self.ci_high < 1


def bootstrap_median_ci(xs, *, confidence: float = 0.95, resamples: int = 2000,
                        rng: random.Random | None = None) -> tuple[float, float]:
    """Bootstrap confidence interval of the median of xs (seeded by default: repeatable)."""
    return _bootstrap_median_ci(list(xs), confidence, resamples, rng or random.Random(0))


def _bootstrap_median_ci(xs, confidence: float, resamples: int, rng: random.Random) -> tuple[float, float]:
    n = len(xs)
    medians = sorted(_median([xs[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    alpha = (1 - confidence) / 2
    return _quantile(medians, alpha), _quantile(medians, 1 - alpha)


# The first of a round runs after the host's gap between rounds, at a clock the others do not see: in a
# fixed order a power-bound H200 timed verify's original up to 5% fast against all the rest. And a
# variant run right after one that heats the GPU runs slow: on an H200 the variants timed right after a
# candidate of twice the micro-batch came out 3.7% slow at the median, the rest 1.5%, when each round
# kept one order rotated (benchmarks/RESULTS.md). So the first place rotates and the rest are shuffled.
def round_orders(names: list[str], rounds: int, seed: int = 0) -> list[list[str]]:
    """Each round's order for interleave: the first place rotating over the variants, the others in a
    seeded shuffle."""
    rng = random.Random(seed)
    orders = []
    for r in range(rounds):
        first = names[r % len(names)]
        rest = [name for name in names if name != first]
        rng.shuffle(rest)
        orders.append([first, *rest])
    return orders


def interleave(fns: dict[str, Callable[[], object]], *, device="cuda", rounds: int = 15,
               budget_ms: float = 200, warmup_ms: float = 25, max_reps_per_round: int = 200,
               flush_l2: bool = True, l2_bytes: int | None = None, confidence: float = 0.95,
               resamples: int = 2000, seed: int = 0, cushion: bool = True,
               clock: Callable[[], float] | None = None, settle: float | None = None,
               sleep: Callable[[float], None] = time.sleep,
               on_round: Callable[[int], None] | None = None) -> dict[str, Comparison]:
    """Time several variants round by round (round_orders: A C B, B A C, C B A, …), so that drift
    (clocks, temperature, other tenants) hits all of them alike; compare each with the first through
    paired per-round ratios.

    budget_ms is each variant's total, split evenly over the rounds. The ratio is the median of
    the per-round ratios of medians; its interval is a bootstrap over rounds (seeded: repeatable).
    settle: after each variant's calls in a round, the GPU is left idle this many times as long as
    they kept it busy (default SETTLE on a GPU, none on the CPU), as a sweep settles after each case.
    on_round: called with the rounds done after each round (a progress bar).
    """
    names = list(fns)
    if not names:
        raise ValueError("interleave needs at least one variant")
    if rounds < 1:
        raise ValueError(f"rounds must be positive, got {rounds}")
    timer = _make_timer(device, clock)

    # Warm every variant up front, so that no round pays for a variant's cold start.
    reps, preps = {}, {}
    for name in names:
        fn = fns[name]
        fn()
        timer.sync()
        preps[name] = prep = _make_prep(timer, fn, device, flush_l2, l2_bytes, cushion)

        def call(fn=fn, prep=prep):
            prep()
            fn()

        _, per_call_ms = warm_up(timer, call, warmup_ms)
        reps[name] = plan_reps(per_call_ms, budget_ms / rounds, 1, max_reps_per_round)

    if settle is None:
        settle = SETTLE if _is_cuda(device) else 0.0
    per_round = {name: [] for name in names}
    for done, order in enumerate(round_orders(names, rounds, seed), start=1):
        for name in order:
            samples = timer.time_calls(fns[name], preps[name], reps[name])
            per_round[name].append(samples)
            if settle > 0:
                sleep(settle_ms(Timing(tuple(samples)), 0.0, settle) / 1e3)
        if on_round is not None:
            on_round(done)

    rng = random.Random(seed)
    base = [_median(s) for s in per_round[names[0]]]
    result = {}
    for name in names:
        ratios = tuple(_median(s) / b if b > 0 else math.inf for s, b in zip(per_round[name], base))
        lo, hi = _bootstrap_median_ci(ratios, confidence, resamples, rng)
        samples = tuple(x for round_samples in per_round[name] for x in round_samples)
        result[name] = Comparison(Timing(samples), _median(ratios), lo, hi, ratios)
    return result


# ---- environment ------------------------------------------------------------------------------

NVIDIA_SMI_FIELDS = ("driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem", "temperature.gpu",
                     "power.draw", "power.limit", "pstate")


def _nvidia_smi(gpu_id: str | None, fields=NVIDIA_SMI_FIELDS) -> dict[str, str] | None:
    """One nvidia-smi query; None when nvidia-smi is absent or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    cmd = [exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    if gpu_id is not None:
        cmd.append(f"--id={gpu_id}")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=15, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line for line in out.splitlines() if line.strip()]
    if not lines:
        return None
    values = [v.strip() for v in lines[0].split(",")]
    return dict(zip(fields, values)) if len(values) == len(fields) else None


def _number(text: str | None):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None  # "[N/A]" and the like


def _cublas_version() -> str | None:
    """cuBLAS(Lt) version of the library this process loaded (torch loads it on first matmul)."""
    import ctypes

    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libcublasLt" in line}
        for path in sorted(paths):
            lib = ctypes.CDLL(path)
            lib.cublasLtGetVersion.restype = ctypes.c_size_t
            v = lib.cublasLtGetVersion()  # major * 10000 + minor * 100 + patch
            return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    except (OSError, AttributeError, IndexError):
        pass
    return None


def _package_version(prefix: str) -> str | None:
    """Version of an installed pip package whose name starts with prefix (nvidia-cublas-cu12 ...)."""
    from importlib import metadata

    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith(prefix):
            return f"{name}=={dist.version}"
    return None


def _cpu_model() -> str:
    """The CPU's marketing name where Linux says it; platform.processor() is often just 'x86_64'."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_environment() -> dict:
    env = {"device": "cpu", "processor": _cpu_model(), "cpu_count": os.cpu_count()}
    try:
        import torch

        env["torch_num_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    return env


def _cuda_environment(device) -> dict:
    import torch

    dev = torch.device(device)
    props = torch.cuda.get_device_properties(dev)
    torch.ones(8, 8, device=dev) @ torch.ones(8, 8, device=dev)  # loads cuBLAS, so its version can be read
    torch.cuda.synchronize(dev)
    uuid = getattr(props, "uuid", None)
    smi = _nvidia_smi(f"GPU-{uuid}" if uuid is not None else str(dev.index or 0)) or {}
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "device": str(dev),
        "gpu_name": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "memory_bytes": props.total_memory,
        "driver_version": smi.get("driver_version"),
        "cuda_version": torch.version.cuda,
        "cublas_version": _cublas_version(),
        "cublas_package": _package_version("nvidia-cublas"),
        "cudnn_version": cudnn,
        "sm_clock_mhz": _number(smi.get("clocks.sm")),
        "sm_clock_max_mhz": _number(smi.get("clocks.max.sm")),
        "mem_clock_mhz": _number(smi.get("clocks.mem")),
        "temperature_c": _number(smi.get("temperature.gpu")),
        "power_draw_w": _number(smi.get("power.draw")),
        "power_limit_w": _number(smi.get("power.limit")),
        "pstate": smi.get("pstate"),
        # Settings that change which GEMM kernels run, hence the timings.
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "matmul_allow_bf16_reduced_precision": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    }


def environment(device="cuda") -> dict:
    """What the timings depend on: the device, its clocks and the software that drives it."""
    env = {"timestamp_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "python_version": platform.python_version(), "platform": platform.platform()}
    try:
        import torch

        env["torch_version"] = torch.__version__
    except ImportError:
        env["torch_version"] = None
    env.update(_cuda_environment(device) if _is_cuda(device) else _cpu_environment())
    return env


def gpu_of(env: dict, *, gpu=None):
    """The GPU (hardware.GPU) to predict for beside measurements taken in `env`: `gpu` if named, else
    the measured one if the GPU table knows it; None on a CPU or an unknown GPU."""
    from .hardware import find_gpu, get_gpu

    if gpu:
        return get_gpu(gpu) if isinstance(gpu, str) else gpu
    return find_gpu(env.get("gpu_name"))


def warn_measured_elsewhere(env: dict, gpu, *, what: str) -> None:
    """One warning where times measured in `env` (`what`: "these 12 cases") are set beside `gpu`'s
    predictions though they are not that GPU's: the CPU's, or another GPU's. gpu: a hardware.GPU, or a
    cost model (profile.CostModel) of one, as bench_ops and bench_cases take it."""
    from .errors import warn

    gpu = getattr(gpu, "gpu", gpu)  # a CostModel's GPU: it has no key of its own
    name = env.get("gpu_name")
    on = gpu_of(env)
    if name is None:
        warn(f"{what} were measured on the CPU: set beside the {gpu.key}'s predictions only to test the command, "
             f"their errors say nothing of the {gpu.key} or its profile")
    elif on is None or on.key != gpu.key:
        warn(f"{what} were measured on {name}, not on the {gpu.key}: set beside its predictions all the same")


def measured_gpu(env: dict, *, gpu=None, device: str = ""):
    """gpu_of, where a GPU is needed: an unknown one is an error that says to name it."""
    from .errors import ShapewiseError, argument

    found = gpu_of(env, gpu=gpu)
    if found is None:
        raise ShapewiseError(f"{env.get('gpu_name') or device} is not in the GPU table: name the GPU with "
                             f"{argument('gpu')}")
    return found


if __name__ == "__main__":  # quick look: python -m shapewise.measure [device]
    import json

    print(json.dumps(environment(sys.argv[1] if len(sys.argv) > 1 else "cuda"), indent=2))
