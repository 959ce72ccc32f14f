"""What a benchmark measures: cases (one shape of one op, its parameters and its work), the cases of
a GEMM, attention or a model's op, and the dims and sizes of the command line. Pure: no torch.

torch builds and times a case in bench.py; collectives and tensor-parallel layers, across the ranks
torchrun starts, in distributed.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .dtypes import DTYPE_BYTES, torch_runs
from .errors import ShapewiseError, argument
from .ops import BMM, GEMM, Op, run_dtype

ATTENTION_BACKENDS = ("flash", "efficient", "cudnn", "math", "unfused", "default")
PASSES = ("fwd", "fwdbwd")
KERNELS = "kernels"  # the results store's bench of the kernel census


def parse_dims(values: list[str], *, name: str, limit=None) -> list[int]:
    """Dims from the command line: numbers and inclusive ranges START:STOP:STEP (or START:STOP, step 1),
    each a GEMM dim (or within `limit`, a limits.Limit: head counts, hidden sizes) and at most
    limits.SWEEP_VALUES in all (see limits.dims)."""
    from .limits import GEMM_DIM, dims

    return dims(values, name=name, limit=limit or GEMM_DIM)


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

def check_sweep(*values) -> None:
    """Refuse, before any is made, a sweep of more cases than limits.SWEEP_CASES: the product of its lists."""
    from math import prod

    from .limits import SWEEP_CASES

    count = prod(len(v) for v in values)
    if count > SWEEP_CASES.high:
        raise ShapewiseError(f"a sweep of {count:,} cases (each flag's values with every other's): {SWEEP_CASES.what} "
                             f"must be at most {SWEEP_CASES.high_text()} ({SWEEP_CASES.reason}); split it")


def gemm_cases(ms, ns, ks, *, batches=(1,), layouts=("nn",), dtype="bf16") -> list[Case]:
    layouts = list(dict.fromkeys(layouts))  # once each
    check_sweep(ms, ns, ks, batches, layouts)
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
    backends, passes = list(dict.fromkeys(backends)), list(dict.fromkeys(passes))  # a value given twice is one case
    check_sweep(batches, heads, kv_heads or [1], head_dims, seqs, backends, passes)
    cases = []
    for b in batches:
        for h in heads:
            for kv in kv_heads or [h]:
                if h % kv:
                    raise ShapewiseError(f"{argument('kv_heads')} {kv} does not divide {argument('heads')} {h}")
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
    """A case that runs one op of a model's step alone, in the step's dtype but where the op runs in another
    (an fp8 step's router: ops.run_dtype), so that it is measured and priced as the step prices it."""
    params = dict(label=op.label, kind=op.kind, m=op.m, n=op.n, k=op.k, batch=op.batch, layout=op.layout,
                  causal=op.causal, groups=op.groups, family=op.family, pass_=op.pass_,
                  dtype=run_dtype(op, dtype) if op.high_precision else dtype,
                  shape=op.shape_text)
    if op.window:  # only where a window bounds the work: every other op's key stays as it was
        params["window"] = op.window
    if op.v_dim:  # only where values are narrower or wider than keys (latent attention), likewise
        params["v_dim"] = op.v_dim
    return Case("op", params, flops=float(op.flops) or None, bytes=float(op.bytes))


def op_from_case(params: dict, *, flops: float | None, nbytes: float) -> Op:
    """The op an `op_case` was made from, one call of it, from the case's parameters and work."""
    return Op(params["label"].split(".")[0], params["pass_"], params["kind"], 1, round(flops or 0), round(nbytes),
              m=params["m"], n=params["n"], k=params["k"], batch=params["batch"], layout=params["layout"],
              causal=params["causal"], groups=params["groups"], family=params.get("family", ""),
              window=params.get("window", 0), v_dim=params.get("v_dim", 0))



def census_key(case: Case) -> str:
    """The store key of a case's kernel census (its own key: never mistaken for the case's timing)."""
    from .store import case_key

    return case_key({"bench": KERNELS, "of": case.key})


def is_gemm(case: Case) -> bool:
    return case.bench in ("gemm", "bmm") or (case.bench == "op" and case.params.get("kind") in (GEMM, BMM))


def kernel_label(names: list[str]) -> str:
    """Kernel names as a table shows them: each one's template name (cutlass_75_tensorop_…_align1,
    nvjet_sm90_…, splitKreduce_kernel) without its signature, joined by " + "."""
    short = []
    for name in names:
        inner = name[name.index("<") + 1:] if name.startswith("void cutlass::Kernel2<") else name
        inner = inner.split("(")[0].split("<")[0].removeprefix("void ").split("::")[-1].rstrip(">")
        short.append(inner)
    return " + ".join(short)


# ---- collectives ----------------------------------------------------------------------------

# nccl-tests' bus bandwidth: algorithm bandwidth (size / time) times the share of the data each
# rank must send over its link in a ring: 2(n-1)/n for an all-reduce, (n-1)/n for the others. The
# size is the whole buffer: all-reduce's, all-gather's output, reduce-scatter's input.
COLLECTIVES = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0}


def parse_sizes(values: list[str]) -> list[int]:
    """Bytes from the command line: 4096, 64K, 1M, and START:STOP ranges that double (1K:1G); see limits.sizes."""
    from .limits import sizes

    return sizes(values)


# ---- what the cost model says a case costs ------------------------------------------------------

def predict_cases(cases: list[Case], *, gpu) -> list[float | None]:
    """predict_case of each case, the GEMMs and batched GEMMs of a dtype priced in one vectorized call
    (what a one-by-one loop spent most of its time on: about 1 ms a GEMM)."""
    import numpy as np

    from .cost import predict_gemm
    from .profile import cost_model

    model = cost_model(gpu)
    out: list[float | None] = [None] * len(cases)
    gemms: dict[str, list[int]] = {}
    for i, case in enumerate(cases):
        if case.bench in ("gemm", "bmm") and case.params["dtype"] in model.gpu.tflops and _runs(case.params):
            gemms.setdefault(case.params["dtype"], []).append(i)
        else:
            out[i] = predict_case(case, gpu=model)
    for dtype, at in gemms.items():
        dims = {d: np.array([cases[i].params[d] for i in at]) for d in ("m", "n", "k", "batch", "layout")}
        times = predict_gemm(dims["m"], dims["n"], dims["k"], batch=dims["batch"], layout=dims["layout"], gpu=model,
                             dtype=dtype).time_ms
        for i, t in zip(at, np.ravel(times)):
            out[i] = float(t)
    return out


def _runs(p: dict) -> bool:
    return torch_runs(p["dtype"], p["layout"], p.get("batch", 1))


def predict_case(case: Case, *, gpu) -> float | None:
    """The cost model's time of one call of a case (ms) by `gpu` (a profile.CostModel, or a GPU whose
    default cost model is used), or None where it has none: a dtype the GPU has no peak for, an fp8 GEMM
    torch does not run, an attention backend it does not model."""
    from .cost import predict_attention, predict_gemm, predict_ops
    from .ops import layer_ops
    from .profile import cost_model
    from .shapes import ModelShape, Workload

    p, gpu = case.params, cost_model(gpu)
    if case.bench in ("gemm", "bmm"):
        if p["dtype"] not in gpu.gpu.tflops or not _runs(p):
            return None  # a dtype the GPU has no peak for, an fp8 GEMM torch does not run
        return float(predict_gemm(p["m"], p["n"], p["k"], batch=p["batch"], layout=p["layout"], gpu=gpu,
                                  dtype=p["dtype"]).time_ms)
    if case.bench == "attention":
        if p["backend"] not in ("default", "cudnn") or p["dtype"] == "fp8":
            return None  # the cost model describes SDPA's default kernel (cuDNN on Hopper with torch 2.11), which takes no fp8
        return predict_attention(batch=p["batch"], heads=p["heads"], kv_heads=p["kv_heads"], seq=p["seq"],
                                 head_dim=p["head_dim"], causal=p["causal"], pass_=p["pass"], gpu=gpu,
                                 dtype=p["dtype"])
    if case.bench == "op":
        op = op_from_case(p, flops=case.flops, nbytes=case.bytes)
        return predict_ops([op], gpu=gpu, dtype=p["dtype"])[0].time_ms
    if case.bench == "layer":
        workload = Workload(batch=p["batch"], seq=p["seq"], dtype=p["dtype"], attention=p["attention"],
                            mode="train" if p["pass"] == "fwdbwd" else "prefill")
        ops = layer_ops(ModelShape(**p["shape"]), workload)
        return sum(c.total_ms for c in predict_ops(ops, gpu=gpu, dtype=p["dtype"]))
    raise ShapewiseError(f"unknown benchmark {case.bench!r}")
