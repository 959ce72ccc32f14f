"""Benchmarks: the torch callables that run a case (cases.py defines them), the sweep that measures
many, and the census of the kernels cuBLAS runs for GEMMs.

A sweep is resumable: each case has a canonical key, and a case the results store already holds for
this environment (same GPU, driver, torch, CUDA, cuBLAS) is skipped unless forced. Each result is
committed as soon as it is measured, so Ctrl-C keeps everything finished; a case that fails (out of
memory, an unsupported dtype or kernel) is stored with its reason and the sweep goes on. A case whose
operands and output (Case.bytes) cannot fit the device's memory is stored so without being allocated;
a sweep none of whose cases fits is refused before anything is measured.

torch is imported only inside functions: this module loads without it.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field

from .cases import KERNELS, Case, census_key, is_gemm
from .distributed import distributed, gather
from .dtypes import DTYPE_BYTES, refuse_fp8_layout, torch_dtype
from .errors import ShapewiseError, argument, listed, warn
from .measure import device_memory_bytes, device_text, free_memory, import_torch, needs_text, settle_ms
from .ops import BMM, COMM, FLASH, GEMM, MEMORY, attention_op

SDPA_BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                 "math": "MATH"}
MIN_REPS = 10  # samples per case at the least, however slow the op: a median of fewer is not worth keeping
MAX_REPS = 1000  # and at the most, however fast: past it a longer --budget-ms adds no sample


# ---- builders: inputs and the function to time -----------------------------------------------

def _randn(torch, device, *shape, dtype="bf16", requires_grad=False):
    # Random normal data: zeros let kernels skip work and hide wrong results.
    x = torch.randn(*shape, device=device, dtype=torch.float32 if dtype == "fp8" else torch_dtype(dtype))
    if dtype == "fp8":
        x = x.to(torch_dtype(dtype))
    return x.requires_grad_(requires_grad)


@contextlib.contextmanager
def _matmul_precision(torch, dtype: str):
    """fp32 means true fp32; tf32 lets cuBLAS use the tensor cores' tf32 mode."""
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def _matmul(torch, device, m, n, k, *, batch=1, layout="nn", dtype="bf16"):
    lead = (batch,) if batch > 1 else ()
    if dtype == "fp8":
        refuse_fp8_layout([layout], [batch])
        a, b = _randn(torch, device, m, k, dtype="fp8"), _randn(torch, device, n, k, dtype="fp8").t()
        one = torch.ones((), device=device)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    a = _randn(torch, device, *lead, k, m, dtype=dtype).transpose(-1, -2) if layout == "tn" \
        else _randn(torch, device, *lead, m, k, dtype=dtype)
    b = _randn(torch, device, *lead, n, k, dtype=dtype).transpose(-1, -2) if layout == "nt" \
        else _randn(torch, device, *lead, k, n, dtype=dtype)
    return lambda: torch.matmul(a, b)


def _backward_only(torch, forward, inputs, dout):
    """Time a backward pass alone: the forward runs once here, its graph is kept and reused."""
    out = forward()
    return lambda: torch.autograd.grad(out, inputs, dout, retain_graph=True)


def _fwd_bwd(torch, forward, leaves, dout):
    def fn():
        for leaf in leaves:
            leaf.grad = None  # a training step writes fresh grads; accumulating would add a kernel
        torch.autograd.backward(forward(), dout)
    return fn


def _attention(torch, device, *, batch, heads, kv_heads, q_len, kv_len, head_dim, causal, backend, pass_,
               dtype, v_dim=0):
    """v_dim: the values' head dim where it is not the queries' and keys' (latent attention's 128 beside 192)."""
    import torch.nn.functional as F

    train = pass_ != "fwd"
    v_dim = v_dim or head_dim
    q = _randn(torch, device, batch, heads, q_len, head_dim, dtype=dtype, requires_grad=train)
    k = _randn(torch, device, batch, kv_heads, kv_len, head_dim, dtype=dtype, requires_grad=train)
    v = _randn(torch, device, batch, kv_heads, kv_len, v_dim, dtype=dtype, requires_grad=train)
    context = contextlib.nullcontext  # a factory: the sweep enters its own context around the timing
    if backend == "unfused":
        def forward():  # score BMM, mask, softmax, BMM over V: what attention costs without fusion
            kk, vv = (x.repeat_interleave(heads // kv_heads, dim=1) for x in (k, v))
            scores = torch.matmul(q, kk.transpose(-1, -2)) * head_dim ** -0.5
            if causal:
                mask = torch.ones(q_len, kv_len, device=device, dtype=torch.bool).tril(kv_len - q_len)
                scores = scores.masked_fill(~mask, float("-inf"))
            return torch.matmul(torch.softmax(scores, dim=-1), vv)
    else:
        gqa = {"enable_gqa": True} if kv_heads != heads else {}

        def forward():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)

        if backend in SDPA_BACKENDS:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            def context():
                return sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[backend]))
    dout = _randn(torch, device, batch, heads, q_len, v_dim, dtype=dtype)
    with context():  # backend choice happens at call time; build the backward-only graph inside it too
        fn = _attention_pass(torch, forward, (q, k, v), dout, pass_)
    return fn, context()


def _attention_pass(torch, forward, inputs, dout, pass_: str):
    """What one pass of an attention call times: the forward, forward and backward, or the backward alone."""
    if pass_ == "fwd":
        return forward
    return _fwd_bwd(torch, forward, inputs, dout) if pass_ == "fwdbwd" else _backward_only(torch, forward, inputs, dout)


def _window_attention(torch, device, *, heads, kv_heads, seq, head_dim, window, pass_, dtype, v_dim=0):
    """Causal attention in which each query sees only the last `window` keys (sliding-window layers),
    as a kernel that skips the blocks outside the band runs it: on a GPU torch's FlexAttention with a
    sliding-window block mask, compiled (SDPA has no window; a mask would compute the whole matrix).
    On the CPU, where FlexAttention has no backward, SDPA over the same band as a mask: a smoke test
    of the same arithmetic, not of its speed."""
    import torch.nn.functional as F

    train = pass_ != "fwd"
    v_dim = v_dim or head_dim
    q = _randn(torch, device, 1, heads, seq, head_dim, dtype=dtype, requires_grad=train)
    k = _randn(torch, device, 1, kv_heads, seq, head_dim, dtype=dtype, requires_grad=train)
    v = _randn(torch, device, 1, kv_heads, seq, v_dim, dtype=dtype, requires_grad=train)
    gqa = kv_heads != heads
    if str(device).startswith("cuda"):
        from .layers import compiled_flex, window_block_mask

        band, attend = window_block_mask(seq=seq, window=window, device=device), compiled_flex()

        def forward():
            return attend(q, k, v, block_mask=band, enable_gqa=gqa)
    else:
        rows = torch.arange(seq, device=device)
        keep = (rows[:, None] >= rows[None, :]) & (rows[:, None] - rows[None, :] < window)

        def forward():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=gqa)
    dout = _randn(torch, device, 1, heads, seq, v_dim, dtype=dtype)
    return _attention_pass(torch, forward, (q, k, v), dout, pass_), contextlib.nullcontext()


def _dispatch_combine(torch, device, rows: int, width: int, dtype: str):
    """An MoE layer's token permutation as ops.py counts it: the routed rows gathered into expert
    order (dispatch: Megatron-LM's moe_utils.permute, tokens.index_select), then put back in token
    order (combine), two kernels each reading and writing every routed row once. A real combine also
    adds each token's top-k rows together (scatter_add_, index_add_) into a target k times smaller;
    the copy back is the same traffic to within that target's writes."""
    x = _randn(torch, device, rows, width, dtype=dtype)
    order = torch.randperm(rows, device=device)  # where balanced routing sends each row
    out = torch.empty_like(x)

    def fn():
        return out.index_copy_(0, order, x.index_select(0, order))
    return fn


def _memory_op(torch, device, op_params: dict, dtype: str):
    """The torch kernel behind a memory-bound op of the model, forward or backward."""
    import torch.nn.functional as F

    rows, width, family, pass_ = op_params["m"], op_params["n"], op_params["family"], op_params["pass_"]
    train = pass_ != "fwd"
    if family == "copy":  # MoE dispatch and combine, the two copies ops.py counts (its backward: the same two)
        return _dispatch_combine(torch, device, rows, width, dtype)
    x = _randn(torch, device, rows, width, dtype=dtype, requires_grad=train)
    if family == "add":
        y = _randn(torch, device, rows, width, dtype=dtype)
        return lambda: torch.add(x, y)
    if family == "embed":  # gather token rows of a table; backward: zero the table, scatter-add rows
        table = _randn(torch, device, op_params["k"], width, dtype=dtype, requires_grad=train)
        ids = torch.randint(0, op_params["k"], (rows,), device=device)
        x, forward, inputs = table, (lambda: F.embedding(ids, table)), [table]
        if not train:
            return forward
        out = forward()
        dout = _randn(torch, device, *out.shape, dtype=dtype)
        return lambda: torch.autograd.grad(out, inputs, dout, retain_graph=True)
    inputs = [x]
    if family in ("layernorm", "rmsnorm"):
        weight = _randn(torch, device, width, dtype=dtype, requires_grad=train)
        inputs.append(weight)
        if family == "layernorm":
            bias = _randn(torch, device, width, dtype=dtype, requires_grad=train)
            inputs.append(bias)
            forward = lambda: F.layer_norm(x, (width,), weight, bias)  # noqa: E731
        else:
            forward = lambda: F.rms_norm(x, (width,), weight)  # noqa: E731
    elif family == "act":
        forward = lambda: F.gelu(x, approximate="tanh")  # noqa: E731
    elif family == "glu":
        gate = _randn(torch, device, rows, width, dtype=dtype, requires_grad=train)
        inputs.append(gate)
        forward = lambda: F.silu(gate) * x  # noqa: E731
    elif family == "rope":  # rotate-half rotary embedding, as Hugging Face's Llama applies it
        d = op_params["k"]
        xh = x.view(rows, width // d, d)
        angle = torch.arange(rows, device=device)[:, None] * 10000.0 ** (-torch.arange(0, d, 2, device=device) / d)
        cos, sin = (f(torch.cat([angle, angle], dim=-1))[:, None, :].to(xh.dtype) for f in (torch.cos, torch.sin))

        def forward():
            rotated = torch.cat([-xh[..., d // 2:], xh[..., :d // 2]], dim=-1)
            return xh * cos + rotated * sin
    elif family == "softmax":
        forward = lambda: torch.softmax(x, dim=-1)  # noqa: E731
    elif family == "loss":
        target = torch.randint(0, width, (rows,), device=device)
        forward = lambda: F.cross_entropy(x, target)  # noqa: E731
    else:
        raise ShapewiseError(f"no kernel known for memory op family {family!r}")
    if not train:
        return forward
    out = forward()
    dout = torch.ones_like(out) if out.ndim == 0 else _randn(torch, device, *out.shape, dtype=dtype)
    return lambda: torch.autograd.grad(out, inputs, dout, retain_graph=True)


def build(case: Case, device: str):
    """The callable that runs a case once, and the context to run it in."""
    torch = import_torch()
    p = case.params
    if case.bench in ("gemm", "bmm"):
        return _matmul(torch, device, p["m"], p["n"], p["k"], batch=p["batch"], layout=p["layout"],
                       dtype=p["dtype"]), _matmul_precision(torch, p["dtype"])
    if case.bench == "attention":
        return _attention(torch, device, batch=p["batch"], heads=p["heads"], kv_heads=p["kv_heads"],
                          q_len=p["seq"], kv_len=p["seq"], head_dim=p["head_dim"], causal=p["causal"],
                          backend=p["backend"], pass_=p["pass"], dtype=p["dtype"])
    if case.bench == "layer":
        return _layer(torch, device, p), contextlib.nullcontext()
    if case.bench == "op":
        if p["kind"] in (GEMM, BMM):
            return _matmul(torch, device, p["m"], p["n"], p["k"], batch=p["batch"], layout=p["layout"],
                           dtype=p["dtype"]), _matmul_precision(torch, p["dtype"])
        if p["kind"] == FLASH:  # b·h folded into the heads: the same kernel grid and work
            if p.get("window"):
                return _window_attention(torch, device, heads=p["batch"], kv_heads=p["batch"] // p["groups"],
                                         seq=p["m"], head_dim=p["k"], window=p["window"], pass_=p["pass_"],
                                         dtype=p["dtype"], v_dim=p.get("v_dim", 0))
            return _attention(torch, device, batch=1, heads=p["batch"], kv_heads=p["batch"] // p["groups"],
                              q_len=p["m"], kv_len=p["n"], head_dim=p["k"], causal=p["causal"], backend="default",
                              pass_=p["pass_"], dtype=p["dtype"], v_dim=p.get("v_dim", 0))
        if p["kind"] == MEMORY:
            return _memory_op(torch, device, p, p["dtype"]), contextlib.nullcontext()
    raise ShapewiseError(f"unknown benchmark {case.bench!r}")


def _layer(torch, device, p: dict):
    from .layers import build_layer, layer_inputs
    from .shapes import ModelShape

    shape = ModelShape(**p["shape"])
    layer = build_layer(shape, device=device, dtype=p["dtype"], attention=p["attention"])
    train = p["pass"] != "fwd"
    x = layer_inputs(shape, batch=p["batch"], seq=p["seq"], device=device, dtype=p["dtype"], requires_grad=train)
    if not train:
        def forward():
            with torch.no_grad():
                return layer(x)
        return forward
    dy = layer_inputs(shape, batch=p["batch"], seq=p["seq"], device=device, dtype=p["dtype"], seed=1)
    return _fwd_bwd(torch, lambda: layer(x), [x, *layer.parameters()], dy)


# ---- the sweep ------------------------------------------------------------------------------

@dataclass
class SweepResult:
    rows: list[tuple[Case, dict]]  # every case with its stored row (measured now or before)
    measured: int = 0
    skipped: int = 0
    failed: int = 0
    interrupted: bool = False
    environment: dict = field(default_factory=dict)
    rank: int = 0  # under torchrun: only rank 0 holds the rows and reports
    world: int = 1
    lost: list = field(default_factory=list)  # cases a rank did not finish ("rank N: label")

    def counts(self) -> str:
        text = f"{self.measured} measured, {self.skipped} already in the store, {self.failed} failed"
        if self.world > 1:
            text += f", on {self.world} ranks"
        if self.lost:
            text += f"; {len(self.lost)} lost ({'; '.join(self.lost[:5])}{' …' if len(self.lost) > 5 else ''})"
        return text

    def summary(self) -> str:
        return self.counts() + (f" — interrupted: {KEPT}" if self.interrupted else "")

    def interrupted_text(self) -> str:
        """The warning of an interrupted run whose --json holds rows only: "interrupted" said once."""
        return f"interrupted: {self.counts()}; {KEPT}"


KEPT = "what was measured is kept in the store"


def footprint(case: Case) -> float | None:
    """The bytes a case's tensors take on the device, as far as they are known: a GEMM's or an op's
    operands and output (case.bytes); an attention call's q, k, v and output, and their gradients when
    the backward runs; unfused, its score matrices too. None for a layer (its tensors depend on the model's
    build)."""
    if case.bytes is not None:
        return case.bytes
    if case.bench != "attention":
        return None
    p = case.params
    size = DTYPE_BYTES[p["dtype"]]
    qkvo = attention_op("fwd" if p["pass"] == "fwd" else "bwd", seqs=p["batch"], heads=p["heads"],
                        kv_heads=p["kv_heads"], q_len=p["seq"], kv_len=p["seq"], head_dim=p["head_dim"],
                        causal=p["causal"], dtype_bytes=size).bytes
    if p["backend"] != "unfused":
        return qkvo
    # Unfused, the scores are whole (batch × heads × seq × seq): two of them live at once going forward (the
    # scores and their softmax), and the backward keeps them and makes their gradients.
    scores = p["batch"] * p["heads"] * p["seq"] ** 2 * size
    return qkvo + scores * (2 if p["pass"] == "fwd" else 4)


def too_big(case: Case, memory: int | None) -> str | None:
    """Why a case cannot run on a device of `memory` bytes (its tensors alone, footprint, exceed it), or
    None where it may: allocating it would only fail, or swap a CPU's machine to a halt. A case whose
    bytes are unknown (a layer) is tried."""
    need = footprint(case)
    if memory is None or need is None or need <= memory:
        return None
    return needs_text(need, memory)


def _check_any_fits(cases: list[Case], memory: int | None, device: str) -> None:
    """Refuse a sweep none of whose cases fits the device: nothing to measure, a mistake in the sizes."""
    if not cases or not all(too_big(c, memory) for c in cases):
        return
    largest = max(cases, key=footprint)
    where = device_text(device)
    need = f"{needs_text(footprint(largest), memory, what=' for its tensors')}; give smaller sizes"
    if len(cases) == 1:
        raise ShapewiseError(f"{largest.label} does not fit the memory of {where}: it {need}")
    raise ShapewiseError(f"none of the {len(cases):,} cases fits the memory of {where}: the largest, {largest.label}, {need}")


def out_of_memory(exc: BaseException) -> bool:
    """torch ran out of memory: CUDA's OutOfMemoryError, or the CPU allocator's "can't allocate memory"
    (both RuntimeErrors, told apart from other failures by their words)."""
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "out of memory" in text or "can't allocate memory" in text


def _error_text(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    if "out of memory" in first.lower():
        return "out of memory"
    return f"{type(exc).__name__}: {first}"[:300]


def sweep(cases: list[Case], *, store, device: str = "cuda", warmup_ms: float = 3, budget_ms: float = 10,
          force: bool = False, progress: bool = True, env: dict | None = None, cuda_graph: bool = False) -> SweepResult:
    """Measure every case not yet in the store for this environment; keep what is done on Ctrl-C.

    Under torchrun the cases are split across the ranks (one GPU each); each rank measures its
    share, rank 0 gathers the results and writes them to its store, and a rank that stops early
    reports which cases it lost (run again to measure them)."""
    from .measure import check_device, environment, time_fn
    from .store import case_key

    torch = import_torch()
    check_device(device, present=False)  # a name torch does not know is no environment to record
    ranks = distributed(device)
    rank, world, device = ranks if ranks else (0, 1, device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ShapewiseError(f"no CUDA GPU here: pass {argument('device')} cpu to measure on the CPU")
    if cuda_graph and not device.startswith("cuda"):
        raise ShapewiseError(f"{argument('cuda_graph')} needs a CUDA device")
    memory = device_memory_bytes(device)
    _check_any_fits(cases, memory, device)
    env = env or environment(device)
    env_id = store.environment_id(env) if rank == 0 else None
    mode = {"cuda_graph": True} if cuda_graph else {}  # graph timings are other results: their own keys
    keys = {id(c): case_key({"bench": c.bench, **c.params, **mode}) if mode else c.key for c in cases}
    if force:
        done = set()
    else:  # every rank reads the same store, so every rank computes the same list of cases to do
        reader_env = store.environment_id(env) if env_id is None else env_id
        done = set().union(*(store.done_keys(reader_env, b) for b in {c.bench for c in cases}))
    # One measurement a key: a layer's forward ops are cases of both its passes, and are measured once.
    unique = list({keys[id(c)]: c for c in cases}.values())  # cases of one key are one case
    todo = [c for c in unique if keys[id(c)] not in done]
    mine = todo[rank::world]
    result = SweepResult([], skipped=len(unique) - len(todo), environment=env, rank=rank, world=world)
    timing = dict(warmup_ms=warmup_ms, budget_ms=budget_ms, min_reps=MIN_REPS, max_reps=MAX_REPS,
                  cuda_graph=cuda_graph)
    records, lost = [], []
    try:
        with progress_bar(progress and rank == 0, len(mine)) as advance:
            for i, case in enumerate(mine):
                record = _measure_one(case, keys[id(case)], device=device, timing=timing, time_fn=time_fn,
                                      memory=memory)
                settle(record, device=device, warmup_ms=warmup_ms)
                if world == 1:
                    store.record(env_id=env_id, **record)  # committed at once: Ctrl-C keeps it
                else:
                    records.append(record)
                result.failed += record.get("error") is not None
                result.measured += record.get("error") is None
                advance(case.label)
    except KeyboardInterrupt:
        result.interrupted = True
        lost = [c.label for c in mine[len(records):]] if world > 1 else []
    if world > 1:
        gather(records, lost, env, store=store, rank=rank, world=world, result=result)
    if rank == 0:
        stored = {row["key"]: row for row in store.rows(env_id=env_id)}
        result.rows = [(c, stored[keys[id(c)]]) for c in cases if keys[id(c)] in stored]
    return result


def settle(record: dict, *, device: str, warmup_ms: float, sleep=time.sleep) -> None:
    """After a case measured on a GPU, leave it idle so that the next case starts from a settled
    clock (measure.settle_ms); nothing after a failed case or on the CPU, whose clock no case moves."""
    if "timing" in record and device.startswith("cuda"):
        sleep(settle_ms(record["timing"], warmup_ms) / 1e3)


def stored_rows(cases: list[Case], *, store) -> list[tuple[Case, dict]]:
    """The cases the store holds a good measurement of (the newest, whatever the environment), each
    with its row: a sweep's rows without measuring anything."""
    by_key = {c.key: c for c in cases}
    newest = {}
    for row in store.rows():
        if row["key"] in by_key and row.get("error") is None:
            newest[row["key"]] = row  # rows come oldest first: the newest of a case wins
    return [(by_key[key], row) for key, row in newest.items()]


def _measure_one(case, key, *, device, timing, time_fn, memory: int | None = None) -> dict:
    """One case measured: the keyword arguments of Store.record, with an error where it failed, or
    where it cannot fit the device's `memory` (bytes): then nothing is allocated."""
    record = dict(bench=case.bench, key=key, params=case.params, flops=case.flops, bytes=case.bytes)
    refused = too_big(case, memory)
    if refused:
        return {**record, "error": refused}
    try:
        fn, context = build(case, device)
        with context:
            record["timing"] = time_fn(fn, device=device, **timing)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # out of memory, unsupported dtype or kernel: record it and go on
        record["error"] = _error_text(exc)
    finally:
        fn = context = None  # free the case's tensors before the next one
        free_memory(device)
    return record


@contextlib.contextmanager
def progress_bar(enabled: bool, total: int, doing: str = "measuring"):
    """A rich progress bar with ETA on stderr; `advance(label)` after each case."""
    from rich.console import Console

    console = Console(stderr=True)
    if not enabled or total == 0 or not console.is_terminal:  # piped or logged: no bar to leave lines behind
        yield lambda label: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn(doing), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.description}"))
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("", total=total)
        yield lambda label: bar.update(task, advance=1, description=label)


# ---- which kernels run ----------------------------------------------------------------------

def kernel_census(cases: list[Case], *, store, device: str = "cuda", env: dict | None = None,
                  progress: bool = True, chunk: int = 200) -> int:
    """Which GPU kernels cuBLAS runs for each GEMM case: one warm call each under torch.profiler, the
    names of the kernels it launched (in order) and their grids (x×y×z blocks: tiles, and split-K
    slices over z) recorded in the store (bench "kernels", metrics {"case", "kernels", "grids"}).
    Cases already named in this environment are skipped; returns how many were named now. On a CPU
    no GPU kernel runs, and nothing is named."""
    if not device.startswith("cuda"):
        return 0
    from .measure import environment

    torch = import_torch()
    env = env or environment(device)
    env_id = store.environment_id(env)
    done = store.done_keys(env_id, KERNELS)
    todo = [c for c in cases if is_gemm(c) and census_key(c) not in done]
    refused = {id(c): too_big(c, env.get("memory_bytes")) for c in todo}  # the GPU's memory, as env read it
    for case in [c for c in todo if refused[id(c)]]:  # not built: it cannot fit
        store.record(env_id=env_id, bench=KERNELS, key=census_key(case), params={"of": case.key},
                     metrics={"case": case.key, "kernels": [], "grids": []}, error=refused[id(case)])
    todo = [c for c in todo if not refused[id(c)]]
    named = 0
    with progress_bar(progress, len(todo), "naming kernels") as advance:
        for start in range(0, len(todo), chunk):  # one profiler run per chunk keeps each trace small
            part = todo[start:start + chunk]
            for case, (names, grids, error) in zip(part, _kernels_of(torch, part, device)):
                store.record(env_id=env_id, bench=KERNELS, key=census_key(case), params={"of": case.key},
                             metrics={"case": case.key, "kernels": names, "grids": grids},
                             error=error or (None if names else "no GPU kernel ran"))
                named += bool(names)
                advance(case.label)
    return named


def _kernels_of(torch, cases: list[Case], device: str) -> list[tuple[list[str], list[str], str | None]]:
    """(kernel names, grids, why it failed or None) of one call of each case, from a torch.profiler trace."""
    import json
    import tempfile
    import warnings

    from torch.profiler import ProfilerActivity, profile, record_function

    errors = [None] * len(cases)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's notes on itself are not the user's business
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i, case in enumerate(cases):
                fn = context = None
                try:
                    fn, context = build(case, device)
                    with context:
                        fn()  # warm, outside the case's range: cuBLAS picks and loads its kernel here
                        torch.cuda.synchronize(device)
                        with record_function(f"case:{i}"):
                            fn()
                            torch.cuda.synchronize(device)
                except KeyboardInterrupt:
                    raise
                except Exception as exc:  # out of memory or unsupported: no kernels named, the reason stored
                    errors[i] = _error_text(exc)
                finally:
                    fn = context = None
    with tempfile.TemporaryDirectory() as tmp:  # the trace holds each kernel's grid; FunctionEvents do not
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    free_memory(device)
    ranges = {int(e["name"][5:]): (e["ts"], e["ts"] + e["dur"]) for e in trace
              if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("case:")}
    kernels = sorted((e for e in trace if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    found = []
    for i in range(len(cases)):
        t0, t1 = ranges.get(i, (0, -1))
        inside = [e for e in kernels if t0 <= e["ts"] <= t1]
        found.append(([e["name"] for e in inside],
                      ["x".join(map(str, e.get("args", {}).get("grid", []))) for e in inside], errors[i]))
    return found


def census_rows(store, env_id: int | None = None) -> dict[str, dict]:
    """The kernel census in the store: case key -> {"kernels": names, "grids": grids}."""
    return {row["metrics"]["case"]: {"kernels": row["metrics"]["kernels"], "grids": row["metrics"]["grids"]}
            for row in store.rows(bench=KERNELS, env_id=env_id, include_errors=False) if row.get("metrics")}


# ---- benchmarks beside their predictions ----------------------------------------------------------

@dataclass(frozen=True)
class Bench:
    """Measured cases, each with its stored row and the cost model's time of one call (None where the
    model has none, or where no GPU was named or measured)."""

    sweep: SweepResult
    rows: list  # of (Case, row, predicted ms or None)
    kernels: dict | None = None  # case key -> {"kernels": names, "grids": grids}, where asked for


def _predicting_for(env: dict, gpu):
    """The GPU to predict for beside measurements taken in `env` (measure.gpu_of), said in one warning
    where it is named and they are not its times."""
    from .measure import gpu_of, warn_measured_elsewhere

    found = gpu_of(env, gpu=gpu)
    if gpu and found is not None:
        warn_measured_elsewhere(env, found, what="these times")
    return found


def _model(gpu, params):
    """The cost model to predict with: the given parameters on this GPU, else the GPU's own
    (profile.cost_model); None without a GPU."""
    from .profile import CostModel, cost_model

    if gpu is None:
        return None
    return cost_model(gpu) if params is None else CostModel(gpu, params)


def _measure(cases, predict, *, store, device, gpu, params, kernels=False, **timing) -> Bench:
    result = sweep(cases, store=store, device=device, **timing)
    if result.rank != 0:  # under torchrun only rank 0 holds the rows
        return Bench(result, [])
    named = None
    if kernels:
        kernel_census(cases, store=store, device=device, env=result.environment)
        named = census_rows(store, env_id=store.environment_id(result.environment))
    gpu = _predicting_for(result.environment, gpu)
    predicted = predict(_model(gpu, params)) if gpu else {}
    return Bench(result, [(case, row, predicted.get(id(case))) for case, row in result.rows], named)


def bench_cases(cases: list[Case], *, store, device: str = "cuda", gpu=None, params=None, kernels: bool = False,
                warmup_ms: float = 3, budget_ms: float = 10, force: bool = False, cuda_graph: bool = False,
                progress: bool = True) -> Bench:
    """Measure GEMM or attention cases (cases.gemm_cases, cases.attention_cases) beside the cost model's
    time of each on `gpu` (default: the GPU measured) with `params` (default: its profile); with
    `kernels`, name the kernels cuBLAS ran for each GEMM too."""
    from .cases import predict_cases

    def predict(model):
        return {id(c): t for c, t in zip(cases, predict_cases(cases, gpu=model))}

    return _measure(cases, predict, store=store, device=device, gpu=gpu, params=params, kernels=kernels,
                    warmup_ms=warmup_ms, budget_ms=budget_ms, force=force, cuda_graph=cuda_graph, progress=progress)


# The dtypes a model's layer and ops run in here: torch runs fp8 only as a scaled GEMM (torch._scaled_mm,
# unbatched, x @ W.T), not as a norm, an attention or a backward pass.
MODEL_DTYPES = ("fp32", "tf32", "bf16", "fp16")


def check_measurable(dtype: str, what: str) -> None:
    """Refuse before measuring a model's layer or ops in a dtype they cannot run in (MODEL_DTYPES)."""
    if dtype not in MODEL_DTYPES:
        raise ShapewiseError(f"{what} measures {listed(MODEL_DTYPES)}, not {dtype}: torch runs fp8 only as scaled "
                             "GEMMs (x @ W.T), not as a model's norms, attention or backward; price fp8 with "
                             "`shapewise check --dtype fp8`, or time fp8 GEMMs with `shapewise bench gemm --dtype fp8 "
                             "--layout nt`")


@dataclass(frozen=True)
class OpsBench(Bench):
    ops: list = field(default_factory=list)  # the step's ops measured, in the order of `rows`
    num_ops: int = 0  # the step's ops in all: more than `ops` where the sweep was interrupted

    def step_ms(self) -> tuple[float, float | None]:
        """The step summed op by op (each op's time × its count) over the ops measured without error:
        measured, and predicted for the same ops (None without predictions)."""
        pairs = [(op, row["median_ms"], predicted) for op, (_, row, predicted) in zip(self.ops, self.rows)
                 if row.get("error") is None]
        measured = sum(op.count * ms for op, ms, _ in pairs)
        if any(predicted is None for _, _, predicted in self.rows):
            return measured, None
        return measured, sum(op.count * p for op, _, p in pairs)


def bench_ops(shape, workload, *, store, device: str = "cuda", gpu=None, params=None, **timing) -> OpsBench:
    """Every op of a model's step (what `check` lists) measured alone, beside its prediction."""
    from .cases import op_case
    from .cost import predict_ops
    from .ops import model_ops

    check_measurable(workload.dtype, "bench ops")
    ops = model_ops(shape, workload)
    collectives = sorted({op.label for op in ops if op.kind == COMM})
    if collectives:  # no op alone: each was recorded as failed, "unknown benchmark 'op'"
        warn(f"t={workload.tp}: the tensor-parallel collectives ({', '.join(collectives)}) are not measured op by op, "
             "nor counted in the step below; `torchrun --nproc-per-node N -m shapewise bench comm` times them")
        ops = [op for op in ops if op.kind != COMM]
    cases = [op_case(op, workload.dtype) for op in ops]

    def predict(model):
        return {id(c): cost.time_ms for c, cost in zip(cases, predict_ops(ops, gpu=model, dtype=workload.dtype))}

    bench = _measure(cases, predict, store=store, device=device, gpu=gpu, params=params, **timing)
    by_case = {id(case): (case, row, p) for case, row, p in bench.rows}
    rows = [(op, by_case[id(c)]) for op, c in zip(ops, cases) if id(c) in by_case]
    return OpsBench(bench.sweep, [r for _, r in rows], bench.kernels, ops=[op for op, _ in rows], num_ops=len(ops))


@dataclass(frozen=True)
class LayerPass:
    """One pass (fwdbwd or fwd) of a layer: measured whole, its ops measured alone, and predicted."""

    pass_: str
    measured_ms: float | None  # None where it failed (see error)
    error: str | None = None
    ops_ms: float | None = None  # its ops measured alone, × their counts (not under tensor parallelism)
    ops_failed: int = 0
    predicted_ms: float | None = None
    ops_missing: int = 0  # ops not measured at all: the sweep was interrupted before them


@dataclass(frozen=True)
class LayerBench:
    passes: list  # of LayerPass
    sweep: SweepResult | None = None  # every case measured; None for a tensor-parallel layer (rank 0's rows)
    rank: int = 0
    predicted: dict = field(default_factory=dict)  # case key -> the cost model's ms of one call (the layer's, each op's)


def bench_layer(shape, workload, *, store, device: str = "cuda", gpu=None, params=None, **timing) -> LayerBench:
    """One transformer layer, forward+backward and forward (train) or forward (prefill), measured whole
    and op by op, beside its prediction. At t > 1, the tensor-parallel layer across the ranks torchrun
    started (distributed.bench_tp_layer), collectives included."""
    from .cases import op_case, predict_cases
    from .ops import layer_ops
    from .shapes import shape_record

    if workload.mode == "decode":
        raise ShapewiseError("bench layer measures a layer in train or prefill mode, not decode")
    check_measurable(workload.dtype, "bench layer")
    from .layers import check_buildable

    check_buildable(shape)  # refused here in one line, not stored as a failed case
    passes = ("fwdbwd", "fwd") if workload.mode == "train" else ("fwd",)
    layers = {pass_: Case("layer", dict(model=shape.name, shape=shape_record(shape), batch=workload.batch,
                                        seq=workload.seq, attention=workload.attention, dtype=workload.dtype,
                                        **{"pass": pass_})) for pass_ in passes}
    if workload.tp > 1:
        from .distributed import bench_tp_layer

        rank, rows, env = bench_tp_layer(shape, workload, store=store, device=device)
        gpu = _predicting_for(env, gpu)
        return LayerBench([LayerPass(r["pass"], r["measured_ms"], predicted_ms=_layer_ms(
            shape, workload.replace(mode="train" if r["pass"] == "fwdbwd" else "prefill"), gpu, params))
            for r in rows], rank=rank)
    ops = {pass_: layer_ops(shape, workload.replace(mode="train" if pass_ == "fwdbwd" else "prefill"))
           for pass_ in passes}
    op_cases = {(op.label, pass_): op_case(op, workload.dtype) for pass_ in passes for op in ops[pass_]}
    cases = list(layers.values()) + list(op_cases.values())
    result = sweep(cases, store=store, device=device, **timing)
    if result.rank != 0:
        return LayerBench([], result, rank=result.rank)
    measured = {id(case): row for case, row in result.rows}
    gpu = _predicting_for(result.environment, gpu)
    predicted = dict(zip((c.key for c in cases), predict_cases(cases, gpu=_model(gpu, params)))) if gpu else {}
    out = []
    for pass_, case in layers.items():
        row = measured.get(id(case)) or {}
        op_rows = [(op, measured.get(id(op_cases[op.label, pass_]))) for op in ops[pass_]]
        ok = [(op, r) for op, r in op_rows if r and r.get("error") is None]
        missing = sum(not r for _, r in op_rows)
        whole = row.get("median_ms") if row and row.get("error") is None else None
        out.append(LayerPass(pass_, whole, row.get("error", "not measured") if whole is None else None,
                             sum(r["median_ms"] * op.count for op, r in ok), len(op_rows) - len(ok) - missing,
                             predicted.get(case.key), missing))
    return LayerBench(out, result, predicted=predicted)


def _layer_ms(shape, workload, gpu, params) -> float | None:
    """The predicted time of one layer's ops (collectives included), None without a GPU."""
    from .cost import predict_ops
    from .ops import layer_ops

    if gpu is None:
        return None
    return sum(c.total_ms for c in predict_ops(layer_ops(shape, workload), gpu=_model(gpu, params),
                                               dtype=workload.dtype))
