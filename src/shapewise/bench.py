"""Benchmarks: the cases a sweep measures, the torch callables that run them, and the sweep itself.

A sweep is resumable: each case has a canonical key, and a case the results store already holds for
this environment (same GPU, driver, torch, CUDA, cuBLAS) is skipped unless forced. Each result is
committed as soon as it is measured, so Ctrl-C keeps everything finished; a case that fails (out of
memory, an unsupported dtype or kernel) is stored with its reason and the sweep goes on.

torch is imported only inside functions: this module loads without it.
"""

from __future__ import annotations

import atexit
import contextlib
import time
from dataclasses import dataclass, field

from .errors import ShapewiseError
from .ops import BMM, FLASH, GEMM, MEMORY, Op

TORCH_DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16",
                "fp8": "float8_e4m3fn"}
ATTENTION_BACKENDS = ("flash", "efficient", "cudnn", "math", "unfused", "default")
SDPA_BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                 "math": "MATH"}
PASSES = ("fwd", "fwdbwd")
MIN_REPS = 10  # samples per case at the least, however slow the op: a median of fewer is not worth keeping


def parse_dims(values: list[str], *, name: str) -> list[int]:
    """Dims from the command line: numbers and inclusive ranges START:STOP:STEP (or START:STOP, step 1)."""
    dims: list[int] = []
    for value in values:
        parts = value.split(":")
        try:
            numbers = [int(p) for p in parts]
        except ValueError:
            raise ShapewiseError(f"{name}: {value!r} is not a number or a START:STOP:STEP range") from None
        if len(numbers) == 1:
            dims.append(numbers[0])
        elif len(numbers) in (2, 3):
            start, stop, step = (*numbers, 1) if len(numbers) == 2 else numbers
            if step <= 0 or stop < start:
                raise ShapewiseError(f"{name}: range {value!r} needs START <= STOP and a positive STEP")
            dims.extend(range(start, stop + 1, step))
        else:
            raise ShapewiseError(f"{name}: {value!r} is not a number or a START:STOP:STEP range")
    if not dims or any(d <= 0 for d in dims):
        raise ShapewiseError(f"{name}: dims must be positive, got {' '.join(values)}")
    return list(dict.fromkeys(dims))  # keep order, drop repeats


@dataclass(frozen=True)
class Case:
    """One measurement: what to build (`bench` and `params`), and the work it does."""

    bench: str  # gemm, bmm, attention, layer or op
    params: dict = field(hash=False)
    flops: float | None = None
    bytes: float | None = None

    @property
    def key(self) -> str:
        """The results store's key of this case: its bench and parameters, canonical."""
        from .store import case_key

        return case_key({"bench": self.bench, **self.params})

    @property
    def label(self) -> str:
        p = self.params
        if self.bench in ("gemm", "bmm"):
            batch = f"{p['batch']}×" if self.bench == "bmm" else ""
            return f"{self.bench} {batch}{p['m']}×{p['n']}×{p['k']} {p['layout']} {p['dtype']}"
        if self.bench == "attention":
            return (f"attention b{p['batch']} h{p['heads']}/{p['kv_heads']} d{p['head_dim']} s{p['seq']} "
                    f"{p['backend']} {p['pass']}")
        if self.bench == "layer":
            return f"layer {p['model']} b{p['batch']} s{p['seq']} {p['attention']} {p['pass']}"
        return f"op {p['label']} {p.get('shape', '')}"


# ---- cases ----------------------------------------------------------------------------------

def gemm_cases(ms, ns, ks, *, batches=(1,), layouts=("nn",), dtype="bf16") -> list[Case]:
    from .shapes import DTYPE_BYTES

    size = DTYPE_BYTES[dtype]
    bench = "bmm" if any(b > 1 for b in batches) else "gemm"
    return [Case(bench, dict(m=m, n=n, k=k, batch=b, layout=layout, dtype=dtype),
                 flops=2.0 * m * n * k * b, bytes=float((m * k + k * n + m * n) * b * size))
            for b in batches for layout in layouts for m in ms for n in ns for k in ks]


def attention_flops(batch: int, heads: int, seq: int, head_dim: int, *, causal: bool, pass_: str) -> float:
    """QKᵀ and PV forward (half the square when causal); backward is 2.5× the forward."""
    fwd = 4.0 * batch * heads * seq * seq * head_dim * (0.5 if causal else 1.0)
    return fwd if pass_ == "fwd" else 3.5 * fwd


def attention_cases(*, batches, heads, kv_heads, head_dims, seqs, causal=True, backends=("default",),
                    passes=PASSES, dtype="bf16") -> list[Case]:
    cases = []
    for b in batches:
        for h in heads:
            for kv in kv_heads or [h]:
                if h % kv:
                    raise ShapewiseError(f"--kv-heads {kv} does not divide --heads {h}")
                for d in head_dims:
                    for s in seqs:
                        for backend in backends:
                            for pass_ in passes:
                                params = dict(batch=b, heads=h, kv_heads=kv, head_dim=d, seq=s, causal=causal,
                                              backend=backend, dtype=dtype, **{"pass": pass_})
                                cases.append(Case("attention", params,
                                                  flops=attention_flops(b, h, s, d, causal=causal, pass_=pass_)))
    return cases


def op_case(op: Op, dtype: str) -> Case:
    """A case that runs one op of a model's step alone."""
    params = dict(label=op.label, kind=op.kind, m=op.m, n=op.n, k=op.k, batch=op.batch, layout=op.layout,
                  causal=op.causal, groups=op.groups, family=op.family, pass_=op.pass_, dtype=dtype,
                  shape=op.shape_text)
    return Case("op", params, flops=float(op.flops) or None, bytes=float(op.bytes))


def op_from_case(params: dict, *, flops: float | None, nbytes: float) -> Op:
    """The op an `op_case` was made from, one call of it, from the case's parameters and work."""
    return Op(params["label"].split(".")[0], params["pass_"], params["kind"], 1, round(flops or 0), round(nbytes),
              m=params["m"], n=params["n"], k=params["k"], batch=params["batch"], layout=params["layout"],
              causal=params["causal"], groups=params["groups"], family=params.get("family", ""))


# ---- builders: inputs and the function to time -----------------------------------------------

def _torch():
    try:
        import torch
    except ImportError:
        raise ShapewiseError("measuring needs torch: pip install 'shapewise[gpu]'") from None
    return torch


def _randn(torch, device, *shape, dtype="bf16", requires_grad=False):
    # Random normal data: zeros let kernels skip work and hide wrong results.
    x = torch.randn(*shape, device=device, dtype=torch.float32 if dtype == "fp8" else getattr(torch, TORCH_DTYPES[dtype]))
    if dtype == "fp8":
        x = x.to(torch.float8_e4m3fn)
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
        if layout != "nt" or batch > 1:
            raise ShapewiseError("fp8 GEMMs run only unbatched in the nt layout (torch._scaled_mm needs a "
                                 "column-major second operand)")
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
               dtype):
    import torch.nn.functional as F

    train = pass_ != "fwd"
    q = _randn(torch, device, batch, heads, q_len, head_dim, dtype=dtype, requires_grad=train)
    k = _randn(torch, device, batch, kv_heads, kv_len, head_dim, dtype=dtype, requires_grad=train)
    v = _randn(torch, device, batch, kv_heads, kv_len, head_dim, dtype=dtype, requires_grad=train)
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
    dout = _randn(torch, device, batch, heads, q_len, head_dim, dtype=dtype)
    with context():  # backend choice happens at call time; build the backward-only graph inside it too
        fn = {"fwd": lambda: forward, "fwdbwd": lambda: _fwd_bwd(torch, forward, (q, k, v), dout),
              "bwd": lambda: _backward_only(torch, forward, (q, k, v), dout)}[pass_]()
    return fn, context()


def _memory_op(torch, device, op_params: dict, dtype: str):
    """The torch kernel behind a memory-bound op of the model, forward or backward."""
    import torch.nn.functional as F

    rows, width, family, pass_ = op_params["m"], op_params["n"], op_params["family"], op_params["pass_"]
    train = pass_ != "fwd"
    x = _randn(torch, device, rows, width, dtype=dtype, requires_grad=train)
    if family == "copy":
        dst = torch.empty_like(x)
        return lambda: dst.copy_(x)
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
    torch = _torch()
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
            return _attention(torch, device, batch=1, heads=p["batch"], kv_heads=p["batch"] // p["groups"],
                              q_len=p["m"], kv_len=p["n"], head_dim=p["k"], causal=p["causal"], backend="default",
                              pass_=p["pass_"], dtype=p["dtype"])
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

    def summary(self) -> str:
        text = f"{self.measured} measured, {self.skipped} already in the store, {self.failed} failed"
        if self.world > 1:
            text += f", on {self.world} ranks"
        if self.lost:
            text += f"; {len(self.lost)} lost ({'; '.join(self.lost[:5])}{' …' if len(self.lost) > 5 else ''})"
        return text + (" — interrupted: the rows above were kept" if self.interrupted else "")


def _error_text(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    if "out of memory" in first.lower():
        return "out of memory"
    return f"{type(exc).__name__}: {first}"[:300]


def distributed(device: str) -> tuple[int, int, str] | None:
    """(rank, world size, this rank's device) under torchrun (WORLD_SIZE > 1), with the process
    group set up once: gloo on the CPU, NCCL on GPUs, one GPU per rank. None in a plain process."""
    import os
    from datetime import timedelta

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    torch = _torch()
    import torch.distributed as dist

    if device.startswith("cuda") and device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(torch.device(device))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(minutes=30))
        # Leaving with the group alive aborts the process (its threads are torn down mid-flight).
        atexit.register(lambda: dist.is_initialized() and dist.destroy_process_group())
    return dist.get_rank(), dist.get_world_size(), device


def sweep(cases: list[Case], *, store, device: str = "cuda", warmup_ms: float = 3, budget_ms: float = 10,
          force: bool = False, progress: bool = True, env: dict | None = None, cuda_graph: bool = False) -> SweepResult:
    """Measure every case not yet in the store for this environment; keep what is done on Ctrl-C.

    Under torchrun the cases are split across the ranks (one GPU each); each rank measures its
    share, rank 0 gathers the results and writes them to its store, and a rank that stops early
    reports which cases it lost (run again to measure them)."""
    from .measure import environment, time_fn
    from .store import case_key

    torch = _torch()
    ranks = distributed(device)
    rank, world, device = ranks if ranks else (0, 1, device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ShapewiseError("no CUDA GPU here: pass --device cpu to measure on the CPU")
    if cuda_graph and not device.startswith("cuda"):
        raise ShapewiseError("--cuda-graph needs a CUDA device")
    env = env or environment(device)
    env_id = store.environment_id(env) if rank == 0 else None
    mode = {"cuda_graph": True} if cuda_graph else {}  # graph timings are other results: their own keys
    keys = {id(c): case_key({"bench": c.bench, **c.params, **mode}) if mode else c.key for c in cases}
    if force:
        done = set()
    else:  # every rank reads the same store, so every rank computes the same list of cases to do
        reader_env = store.environment_id(env) if env_id is None else env_id
        done = set().union(*(store.done_keys(reader_env, b) for b in {c.bench for c in cases}))
    todo = [c for c in cases if keys[id(c)] not in done]
    mine = todo[rank::world]
    result = SweepResult([], skipped=len(cases) - len(todo), environment=env, rank=rank, world=world)
    timing = dict(warmup_ms=warmup_ms, budget_ms=budget_ms, min_reps=MIN_REPS, cuda_graph=cuda_graph)
    records, lost = [], []
    try:
        with _progress(progress and rank == 0, len(mine)) as advance:
            for i, case in enumerate(mine):
                record = _measure_one(torch, case, keys[id(case)], device=device, timing=timing, time_fn=time_fn)
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
        _gather(records, lost, env, store=store, rank=rank, world=world, result=result)
    if rank == 0:
        stored = {row["key"]: row for row in store.rows(env_id=env_id)}
        result.rows = [(c, stored[keys[id(c)]]) for c in cases if keys[id(c)] in stored]
    return result


def _gather(records, lost, env, *, store, rank, world, result) -> None:
    """Every rank's results to rank 0, which writes them, each under its own rank's environment."""
    import torch.distributed as dist

    payload = {"rank": rank, "records": records, "lost": lost, "env": env, "measured": result.measured,
               "failed": result.failed, "interrupted": result.interrupted}
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(payload, gathered, dst=0)
    if rank != 0:
        return
    result.measured = result.failed = 0
    for part in gathered:
        env_id = store.environment_id(part["env"])
        for record in part["records"]:
            store.record(env_id=env_id, **record)
        result.measured += part["measured"]
        result.failed += part["failed"]
        result.interrupted |= part["interrupted"]
        result.lost += [f"rank {part['rank']}: {label}" for label in part["lost"]]


def _measure_one(torch, case, key, *, device, timing, time_fn) -> dict:
    """One case measured: the keyword arguments of Store.record, with an error where it failed."""
    record = dict(bench=case.bench, key=key, params=case.params, flops=case.flops, bytes=case.bytes)
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
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return record


@contextlib.contextmanager
def _progress(enabled: bool, total: int, doing: str = "measuring"):
    """A rich progress bar with ETA on stderr; `advance(label)` after each case."""
    if not enabled or total == 0:
        yield lambda label: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = (TextColumn(doing), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.description}"))
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("", total=total)
        yield lambda label: bar.update(task, advance=1, description=label)


# ---- which kernels run ----------------------------------------------------------------------

KERNELS = "kernels"  # the results store's bench of the kernel census


def census_key(case: Case) -> str:
    """The store key of a case's kernel census (its own key: never mistaken for the case's timing)."""
    from .store import case_key

    return case_key({"bench": KERNELS, "of": case.key})


def is_gemm(case: Case) -> bool:
    return case.bench in ("gemm", "bmm") or (case.bench == "op" and case.params.get("kind") in (GEMM, BMM))


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

    torch = _torch()
    env_id = store.environment_id(env or environment(device))
    done = store.done_keys(env_id, KERNELS)
    todo = [c for c in cases if is_gemm(c) and census_key(c) not in done]
    named = 0
    with _progress(progress, len(todo), "naming kernels") as advance:
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
    import os
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
    torch.cuda.empty_cache()
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


def kernel_label(names: list[str]) -> str:
    """Kernel names as a table shows them: each one's template name (cutlass_75_tensorop_…_align1,
    nvjet_sm90_…, splitKreduce_kernel) without its signature, joined by " + "."""
    short = []
    for name in names:
        inner = name[name.index("<") + 1:] if name.startswith("void cutlass::Kernel2<") else name
        inner = inner.split("(")[0].split("<")[0].removeprefix("void ").split("::")[-1].rstrip(">")
        short.append(inner)
    return " + ".join(short)


def census_rows(store, env_id: int | None = None) -> dict[str, dict]:
    """The kernel census in the store: case key -> {"kernels": names, "grids": grids}."""
    return {row["metrics"]["case"]: {"kernels": row["metrics"]["kernels"], "grids": row["metrics"]["grids"]}
            for row in store.rows(bench=KERNELS, env_id=env_id, include_errors=False) if row.get("metrics")}


# ---- collectives ----------------------------------------------------------------------------

# nccl-tests' bus bandwidth: algorithm bandwidth (size / time) times the share of the data each
# rank must send over its link in a ring: 2(n-1)/n for an all-reduce, (n-1)/n for the others. The
# size is the whole buffer: all-reduce's, all-gather's output, reduce-scatter's input.
COLLECTIVES = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0}
SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_sizes(values: list[str]) -> list[int]:
    """Bytes from the command line: 4096, 64K, 1M, and START:STOP ranges that double (1K:1G)."""
    def one(text: str) -> int:
        text = text.strip().upper().removesuffix("B")
        unit = text[-1] if text and text[-1] in SIZE_UNITS else ""
        try:
            number = float(text[: len(text) - len(unit)]) * SIZE_UNITS[unit]
        except ValueError:
            raise ShapewiseError(f"--sizes: {text!r} is not a size such as 4096, 64K, 16M or 1G") from None
        if number < 1:
            raise ShapewiseError(f"--sizes: sizes must be at least one byte, got {text!r}")
        return int(number)

    sizes: list[int] = []
    for value in values:
        if ":" in value:
            low, high = (one(part) for part in value.split(":", 1))
            while low <= high:
                sizes.append(low)
                low *= 2
        else:
            sizes.append(one(value))
    return list(dict.fromkeys(sizes))


def bench_comm(sizes: list[int], ops: list[str], *, store, device: str = "cuda", dtype: str = "bf16",
               warmup: int = 5, iters: int = 20) -> tuple[int, list[dict]]:
    """Time collectives across the ranks torchrun started; rank 0 stores and returns one row per case.

    Every rank runs the same fixed number of calls (a time budget would let ranks disagree and
    hang); each call starts after a barrier, and the slowest rank's median is the result."""
    from .measure import Timing, environment
    from .store import case_key

    torch = _torch()
    import torch.distributed as dist

    ranks = distributed(device)
    if ranks is None:
        raise ShapewiseError("bench comm needs several ranks: run it under torchrun, e.g. "
                             "torchrun --nproc-per-node 2 -m shapewise bench comm …")
    rank, world, device = ranks
    unknown = sorted(set(ops) - set(COLLECTIVES))
    if unknown:
        raise ShapewiseError(f"unknown collective {', '.join(unknown)}; use {', '.join(COLLECTIVES)}")
    env = environment(device)
    env_id = store.environment_id(env) if rank == 0 else None
    dt = getattr(torch, TORCH_DTYPES[dtype])
    size_of = torch.tensor([], dtype=dt).element_size()
    rows = []
    for op in ops:
        for size in sizes:
            elements = max(world, size // size_of // world * world)  # divisible among the ranks
            whole = torch.randn(elements, device=device).to(dt)
            part = torch.empty(elements // world, device=device, dtype=dt)
            # torch renamed the single-tensor collectives (2.13: *_single); older releases have the old names.
            gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
            scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
            call = {"all_reduce": lambda: dist.all_reduce(whole),
                    "all_gather": lambda: gather(whole, part),
                    "reduce_scatter": lambda: scatter(part, whole)}[op]
            for _ in range(warmup):
                call()
            samples = []
            for _ in range(iters):
                dist.barrier()
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                start = time.perf_counter()
                call()
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                samples.append((time.perf_counter() - start) * 1e3)
            slowest = torch.tensor([Timing(tuple(samples)).median_ms], dtype=torch.float64,
                                   device=device if device.startswith("cuda") else "cpu")
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            if rank == 0:
                nbytes = elements * size_of
                timing = Timing(tuple(samples))
                ms = float(slowest.item())
                algbw = nbytes / (ms * 1e-3) / 1e9
                busbw = algbw * COLLECTIVES[op] * (world - 1) / world
                params = dict(op=op, bytes=nbytes, world=world, dtype=dtype, backend=dist.get_backend())
                store.record(env_id=env_id, bench="comm", key=case_key({"bench": "comm", **params}), params=params,
                             timing=timing, bytes=nbytes,
                             metrics={"slowest_rank_median_ms": ms, "algbw_gbs": algbw, "busbw_gbs": busbw})
                rows.append(dict(op=op, bytes=nbytes, median_ms=ms, algbw_gbs=algbw, busbw_gbs=busbw))
            call = whole = part = None  # free this size's buffers before the next
    dist.barrier()
    return rank, rows


def bench_tp_layer(shape, workload, *, store, device: str = "cuda", warmup: int = 3, reps: int = 10,
                   seed: int = 0) -> tuple[int, list[dict], dict]:
    """One tensor-parallel layer (shapewise.layers.build_tp_layer) on the ranks torchrun started, one
    per tensor-parallel rank, forward+backward and forward; rank 0 stores and returns the slowest rank's
    medians. Fixed call counts: every rank must run its collectives equally often."""
    from .layers import build_tp_layer
    from .measure import Timing, environment, time_fn
    from .shapes import shape_record
    from .store import case_key

    torch = _torch()
    import torch.distributed as dist

    ranks = distributed(device)
    if ranks is None or ranks[1] != workload.tp:
        raise ShapewiseError(f"a t={workload.tp} layer runs on {workload.tp} ranks: "
                             f"torchrun --nproc-per-node {workload.tp} -m shapewise bench layer … --tp {workload.tp}")
    rank, world, device = ranks
    if workload.seq % world:
        raise ShapewiseError(f"sequence parallelism splits the sequence: --seq must divide by t={world}")
    layer = build_tp_layer(shape, tp=world, rank=rank, device=device, dtype=workload.dtype,
                           attention=workload.attention, seed=seed)
    dt = next(layer.parameters()).dtype
    generator = torch.Generator(device="cpu").manual_seed(seed + rank)
    local = (workload.batch, workload.seq // world, shape.hidden)
    x = torch.randn(*local, generator=generator).to(device, dt).requires_grad_(True)
    dy = torch.randn(*local, generator=generator).to(device, dt)

    def fwd_bwd():
        x.grad = None
        for p in layer.parameters():
            p.grad = None
        torch.autograd.backward(layer(x), dy)

    def fwd():
        with torch.no_grad():
            layer(x)

    env = environment(device)
    env_id = store.environment_id(env) if rank == 0 else None
    rows = []
    passes = (("fwdbwd", fwd_bwd), ("fwd", fwd)) if workload.mode == "train" else (("fwd", fwd),)
    for pass_, fn in passes:
        timing = time_fn(fn, device=device, warmup_calls=warmup, reps=reps, flush_l2=False, cushion=False)
        slowest = torch.tensor([timing.median_ms], dtype=torch.float64,
                               device=device if device.startswith("cuda") else "cpu")
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if rank == 0:
            params = dict(model=shape.name, shape=shape_record(shape), batch=workload.batch, seq=workload.seq,
                          tp=world, attention=workload.attention, dtype=workload.dtype, **{"pass": pass_})
            store.record(env_id=env_id, bench="layer", key=case_key({"bench": "layer", **params}), params=params,
                         timing=Timing(timing.samples_ms), metrics={"slowest_rank_median_ms": float(slowest.item())})
            rows.append({"pass": pass_, "measured_ms": float(slowest.item())})
    dist.barrier()
    return rank, rows, env
