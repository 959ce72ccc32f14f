"""Measure the matrix, attention and elementwise ops of a transformer on one GPU, to set and check
shapewise's cost model.

    PYTHONPATH=src python3 benchmarks/probe.py --out DIR            # full run, ~2-5 min on an H200
    PYTHONPATH=src python3 benchmarks/probe.py --device cpu --quick --out DIR   # smoke test

Writes DIR/probe.csv, one row per measurement, flushed row by row (Ctrl-C keeps what was done),
and DIR/env.json (device, driver, library versions, clocks; rewritten at the end).

Row conventions:
  gemm         C (m x n) = A (m x k) @ B (k x n). layout nn: both row-major; nt: B is an (n x k)
               tensor transposed (F.linear forward); tn: A is a (k x m) tensor transposed (weight
               gradient). tflops = 2mnk / time; gbps = (mk + kn + mn) * 2 bytes / time.
  bmm          the same per batch entry; batch = b * heads.
  sdpa         causal attention; batch = b * heads, m = n = seq, k = head dim. Flops: forward
               4*b*h*s^2*d / 2 (two matmuls, half the square under the causal mask), forward +
               backward 3.5 x that (2 matmuls forward, 5 backward); extra names it.
  elementwise  m = tokens, n = width (or vocab); gbps counts the fewest bytes: inputs read once
               and outputs written once (forward+backward: x and dy in, y and dx out).
  copy         device-to-device copy; gbps = (read + write) bytes / time.
extra holds key=value pairs separated by ';' (set=..., op=..., pass=..., backend=...).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import random
import re
import sys
import time
import warnings
from dataclasses import dataclass, field, replace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
from shapewise.measure import environment, time_fn  # noqa: E402

COLUMNS = ("kind", "layout", "batch", "m", "n", "k", "dtype", "extra", "time_ms", "iqr_ms", "tflops",
           "gbps", "num_reps", "error")
BF16_BYTES = 2
SQUARES = (256, 512, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
VOCABS = (50257, 50304, 50400, 50432, 32000, 32001, 151643, 151936)
HEAD_DIMS = (64, 80, 96, 128, 160, 192, 256)
SEQS = (1024, 2048, 4096)
TOKENS = (4096, 8192, 16384)
WIDTHS = (2048, 4096, 8192, 14336)
CE_VOCABS = (32000, 50304, 128256)
MAX_SCORE_BYTES = 4 * 2**30  # bmm: keep the (batch, s, s) score tensor under 4 GiB
MAX_RANDOM_FLOPS = 2e12


@dataclass(frozen=True)
class Case:
    """One measurement. m, n, k, batch and layout follow the row conventions above; `extra`
    carries the labels and the op-specific settings the builder reads (op, pass, backend...)."""

    kind: str
    m: int | None = None
    n: int | None = None
    k: int | None = None
    batch: int = 1
    layout: str = ""
    extra: dict = field(default_factory=dict)

    def label(self) -> str:
        dims = "x".join(str(d) for d in (self.m, self.n, self.k) if d is not None)
        return f"{self.kind} {self.layout} {dims} {self.extra_text()}".replace("  ", " ")

    def extra_text(self) -> str:
        return ";".join(f"{key}={value}" for key, value in self.extra.items())


# ---- the measurement set ----------------------------------------------------------------------

def gemm(m, n, k, layout="nn", **extra) -> Case:
    return Case("gemm", m, n, k, 1, layout, {**extra, "flops": "2mnk"})


def gemm_cases() -> dict[str, list[Case]]:
    families = {
        "squares": [gemm(s, s, s, set="squares") for s in SQUARES],
        "nsweep": [gemm(8192, n, 8192, set="nsweep") for n in sorted({64, *range(128, 8193, 128)})],
        "align": alignment_cases(),
        "decode": [gemm(m, n, k, "nt", set="decode") for (n, k) in
                   ((4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096))
                   for m in (1, 2, 4, 8, 16, 32, 64, 128, 256)],
        "smallk": [gemm(8192, 8192, k, set="smallk") for k in (32, 64, 128, 256, 512, 1024, 2048)],
        "vocab": vocab_cases(),
        "random": random_cases(250, seed=0),
    }
    return families


def alignment_cases(base=4096) -> list[Case]:
    """Perturb one dim of a 4096 cube by a few elements: +1, +2, +4 break 16-byte alignment of
    bf16 rows, +8 keeps it (the control)."""
    cases = []
    for layout in ("nn", "nt", "tn"):
        cases.append(gemm(base, base, base, layout, set="align", dim="none", delta=0))
        for dim in ("m", "n", "k"):
            for delta in (1, 2, 4, 8):
                mnk = {"m": base, "n": base, "k": base, dim: base + delta}
                cases.append(gemm(mnk["m"], mnk["n"], mnk["k"], layout, set="align", dim=dim, delta=delta))
    return cases


def vocab_cases(tokens=8192) -> list[Case]:
    """The output layer: logits forward (nt), weight gradient (tn), input gradient (nn)."""
    cases = []
    for hidden in (2560, 4096):
        for vocab in VOCABS:
            cases.append(gemm(tokens, vocab, hidden, "nt", **{"set": "vocab", "pass": "fwd"}))
            cases.append(gemm(vocab, hidden, tokens, "tn", **{"set": "vocab", "pass": "wgrad"}))
            cases.append(gemm(tokens, hidden, vocab, "nn", **{"set": "vocab", "pass": "dgrad"}))
    return cases


def random_cases(count: int, seed: int, low=16, high=16384) -> list[Case]:
    """Log-uniform m, n, k in [low, high]; each dim, with probability 0.5, rounded to a multiple
    of 8; layout uniform; shapes over 2 TFLOP redrawn (they would dominate the run time)."""
    rng = random.Random(seed)

    def dim() -> int:
        x = round(math.exp(rng.uniform(math.log(low), math.log(high))))
        return max(8, round(x / 8) * 8) if rng.random() < 0.5 else x

    cases = []
    while len(cases) < count:
        m, n, k = dim(), dim(), dim()
        layout = rng.choice(("nn", "nt", "tn"))
        if 2 * m * n * k <= MAX_RANDOM_FLOPS:
            cases.append(gemm(m, n, k, layout, set="random", seed=seed))
    return cases


def bmm_cases(b=4) -> list[Case]:
    """Unfused attention's two batched products: scores Q K^T (nt) and probabilities times V (nn)."""
    cases = []
    for s in SEQS:
        for d in (64, 80, 96, 128, 160, 256):
            heads = 4096 // d
            while b * heads * s * s * BF16_BYTES >= MAX_SCORE_BYTES:
                heads -= 1
            extra = {"b": b, "heads": heads}
            cases.append(Case("bmm", s, s, d, b * heads, "nt", {"set": "score", **extra, "flops": "2mnk"}))
            cases.append(Case("bmm", s, d, s, b * heads, "nn", {"set": "overv", **extra, "flops": "2mnk"}))
    return cases


def sdpa_cases(backends, b=4) -> list[Case]:
    configs = []  # (heads, kv_heads, d)
    for d in HEAD_DIMS:
        for hidden in (2560, 4096):
            if hidden % d == 0:
                configs.append((hidden // d, hidden // d, d))
        configs.append((32, 32, d))
    for d in (64, 128):  # grouped-query attention: a quarter as many kv heads
        configs.append((4096 // d, 4096 // d // 4, d))
    configs = list(dict.fromkeys(configs))  # drop repeats, keep order
    cases = []
    for heads, kv_heads, d in configs:
        for s in SEQS:
            for pass_ in ("fwd", "fwdbwd"):
                for backend in backends:
                    extra = {"set": "gqa" if kv_heads != heads else "mha", "b": b, "heads": heads,
                             "kv_heads": kv_heads, "pass": pass_, "backend": backend,
                             "flops": "causal_4bhs2d_half" + ("_x3.5" if pass_ == "fwdbwd" else "")}
                    cases.append(Case("sdpa", s, s, d, b * heads, "bhsd", extra))
    return cases


def elementwise_cases() -> list[Case]:
    cases = []
    for t in TOKENS:
        for w in WIDTHS:
            for op in ("layer_norm", "rms_norm", "gelu", "swiglu", "add", "softmax"):
                cases.append(Case("elementwise", t, w, None, extra={"op": op, "pass": "fwd", "bytes": "min_io"}))
                if op in ("layer_norm", "gelu", "softmax"):
                    cases.append(Case("elementwise", t, w, None,
                                      extra={"op": op, "pass": "fwdbwd", "bytes": "min_io"}))
        for vocab in CE_VOCABS:
            cases.append(Case("elementwise", t, vocab, None,
                              extra={"op": "cross_entropy", "pass": "fwd", "bytes": "min_io"}))
    return cases


def copy_case(nbytes=2 * 2**30) -> Case:
    return Case("copy", extra={"set": "copy", "bytes": nbytes})


def drift_case(when: str) -> Case:
    return gemm(8192, 8192, 8192, set="drift", when=when)


def all_cases(device: str, quick: bool) -> list[Case]:
    families = gemm_cases()
    backends = ("flash", "efficient", "cudnn") if device.startswith("cuda") else ("default",)
    families.update(bmm=bmm_cases(), sdpa=sdpa_cases(backends), elementwise=elementwise_cases(),
                    copy=[copy_case()])
    if quick:
        families = {name: shrink_family(cases) for name, cases in families.items()}
    body = [case for cases in families.values() for case in cases]
    middle = len(body) // 2
    drift = [shrink(drift_case(w)) if quick else drift_case(w) for w in ("start", "middle", "end")]
    return [drift[0], *body[:middle], drift[1], *body[middle:], drift[2]]


# ---- quick mode: the same ops at toy sizes ----------------------------------------------------

QUICK_DIM = 256
QUICK_PER_FAMILY = 4


def shrink(case: Case) -> Case:
    """The same op with every dimension capped, so that a CPU runs it in milliseconds."""
    def cap(x, limit=QUICK_DIM):
        return None if x is None else min(x, limit)

    extra = dict(case.extra)
    if case.kind == "sdpa":
        extra.update(b=1, heads=min(extra["heads"], 4))
        extra["kv_heads"] = extra["heads"] // (case.extra["heads"] // case.extra["kv_heads"])
        return replace(case, m=cap(case.m, 128), n=cap(case.n, 128), batch=extra["heads"], extra=extra)
    if case.kind == "copy":
        extra["bytes"] = 2**20
        return replace(case, extra=extra)
    if case.kind == "bmm":
        extra.update(b=1, heads=2)
        return replace(case, m=cap(case.m), n=cap(case.n), k=cap(case.k), batch=2, extra=extra)
    return replace(case, m=cap(case.m), n=cap(case.n), k=cap(case.k))


def shrink_family(cases: list[Case]) -> list[Case]:
    """Shrunk cases without repeats; ops with variants (elementwise, sdpa) keep one of each."""
    unique = list({(c.kind, c.layout, c.batch, c.m, c.n, c.k, c.extra_text()): c
                   for c in map(shrink, cases)}.values())
    if cases and cases[0].kind in ("elementwise", "sdpa"):
        return unique
    return unique[:QUICK_PER_FAMILY]


# ---- builders: inputs and the function to time ------------------------------------------------

@dataclass
class Work:
    fn: object
    flops: float | None  # None: not counted (elementwise, copy)
    nbytes: float  # fewest bytes moved
    context: object = field(default_factory=contextlib.nullcontext)


def _randn(torch, device, *shape, requires_grad=False):
    # Random normal data: zeros would let kernels skip work and hide wrong results.
    return torch.randn(*shape, device=device, dtype=torch.bfloat16, requires_grad=requires_grad)


def build_gemm(torch, case: Case, device) -> Work:
    m, n, k, batch = case.m, case.n, case.k, case.batch
    lead = (batch,) if case.kind == "bmm" else ()
    a = _randn(torch, device, *lead, k, m).transpose(-1, -2) if case.layout == "tn" else _randn(torch, device, *lead, m, k)
    b = _randn(torch, device, *lead, n, k).transpose(-1, -2) if case.layout == "nt" else _randn(torch, device, *lead, k, n)
    op = torch.bmm if case.kind == "bmm" else torch.matmul
    return Work(lambda: op(a, b), 2.0 * m * n * k * batch, (m * k + k * n + m * n) * batch * BF16_BYTES)


def _fwd_bwd(torch, forward, leaves, dout):
    """forward, then backward with a fixed upstream gradient. Grads are cleared first so backward
    writes them fresh instead of adding to the last call's (an extra kernel a training step lacks)."""
    def fn():
        for leaf in leaves:
            leaf.grad = None
        torch.autograd.backward(forward(), dout)
    return fn


SDPA_BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION"}


def build_sdpa(torch, case: Case, device) -> Work:
    import torch.nn.functional as F

    x = case.extra
    b, heads, kv_heads, s, d = x["b"], x["heads"], x["kv_heads"], case.m, case.k
    bwd = x["pass"] == "fwdbwd"
    q = _randn(torch, device, b, heads, s, d, requires_grad=bwd)
    k = _randn(torch, device, b, kv_heads, s, d, requires_grad=bwd)
    v = _randn(torch, device, b, kv_heads, s, d, requires_grad=bwd)
    gqa = {"enable_gqa": True} if kv_heads != heads else {}

    def forward():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)

    fwd_flops = 4.0 * b * heads * s * s * d / 2
    q_elems, kv_elems = b * heads * s * d, b * kv_heads * s * d
    if bwd:
        fn = _fwd_bwd(torch, forward, (q, k, v), _randn(torch, device, b, heads, s, d))
        flops, elems = 3.5 * fwd_flops, 4 * q_elems + 4 * kv_elems  # q o dO dq; k v dk dv
    else:
        fn, flops, elems = forward, fwd_flops, 2 * q_elems + 2 * kv_elems  # q o; k v
    context = contextlib.nullcontext()
    if x["backend"] in SDPA_BACKENDS:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        context = sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[x["backend"]]))
    return Work(fn, flops, elems * BF16_BYTES, context)


def _rms_norm(torch, x, weight, eps=1e-6):
    F = torch.nn.functional
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(variance + eps)).to(x.dtype) * weight


def build_elementwise(torch, case: Case, device) -> Work:
    import torch.nn.functional as F

    t, w, op = case.m, case.n, case.extra["op"]
    bwd = case.extra["pass"] == "fwdbwd"
    x = _randn(torch, device, t, w, requires_grad=bwd)
    leaves = [x]
    if op == "layer_norm":
        weight = _randn(torch, device, w, requires_grad=bwd)
        bias = _randn(torch, device, w, requires_grad=bwd)
        leaves += [weight, bias]
        forward, tensors_in = (lambda: F.layer_norm(x, (w,), weight, bias)), 1
    elif op == "rms_norm":
        weight = _randn(torch, device, w)
        forward, tensors_in = (lambda: _rms_norm(torch, x, weight)), 1
    elif op == "gelu":
        forward, tensors_in = (lambda: F.gelu(x, approximate="tanh")), 1
    elif op == "swiglu":
        gate = _randn(torch, device, t, w)
        forward, tensors_in = (lambda: F.silu(gate) * x), 2
    elif op == "add":
        residual = _randn(torch, device, t, w)
        forward, tensors_in = (lambda: x + residual), 2
    elif op == "softmax":
        forward, tensors_in = (lambda: torch.softmax(x, dim=-1)), 1
    elif op == "cross_entropy":
        target = torch.randint(0, w, (t,), device=device)
        loss = lambda: F.cross_entropy(x, target)  # noqa: E731
        return Work(loss, None, t * w * BF16_BYTES + t * 8)  # logits and int64 targets in
    else:
        raise ValueError(f"unknown elementwise op {op!r}")
    elems = t * w
    if bwd:  # inputs x, dy; outputs y, dx (weights and their grads: negligible)
        return Work(_fwd_bwd(torch, forward, leaves, _randn(torch, device, t, w)), None, 4 * elems * BF16_BYTES)
    return Work(forward, None, (tensors_in + 1) * elems * BF16_BYTES)


def build_copy(torch, case: Case, device) -> Work:
    elems = case.extra["bytes"] // BF16_BYTES
    src = _randn(torch, device, elems)
    dst = torch.empty_like(src)
    return Work(lambda: dst.copy_(src), None, 2 * elems * BF16_BYTES)


BUILDERS = {"gemm": build_gemm, "bmm": build_gemm, "sdpa": build_sdpa, "elementwise": build_elementwise,
            "copy": build_copy}


# ---- running ----------------------------------------------------------------------------------

def _fmt(x, digits=6):
    return "" if x is None else f"{x:.{digits}g}"


def _error_text(exc: BaseException, caught) -> str:
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    # torch's warnings end in "(Triggered internally at file:line.)": noise in a CSV cell.
    messages = (re.sub(r"\s*\(Triggered internally at [^)]*\)\s*", " ", str(w.message)).strip() for w in caught)
    reasons = [m.splitlines()[0] for m in messages if m]
    if reasons:  # sdpa says why a backend refused in warnings, then raises "No available kernel"
        text += " | " + " | ".join(dict.fromkeys(reasons))
    return text[:400]


def measure(torch, case: Case, device, timing: dict) -> dict:
    row = {"kind": case.kind, "layout": case.layout, "batch": case.batch, "m": case.m or "",
           "n": case.n or "", "k": case.k or "", "dtype": "bf16", "extra": case.extra_text()}
    work = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            work = BUILDERS[case.kind](torch, case, device)
            with work.context:
                result = time_fn(work.fn, device=device, **timing)
        except Exception as exc:  # OOM, unsupported shape or backend: record it and go on
            work = None
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
            row["error"] = _error_text(exc, caught)
            return row
    seconds = result.median_ms * 1e-3
    row.update(time_ms=_fmt(result.median_ms), iqr_ms=_fmt(result.iqr_ms, 4), num_reps=result.num_reps,
               tflops=_fmt(work.flops / seconds / 1e12 if work.flops else None, 5),
               gbps=_fmt(work.nbytes / seconds / 1e9, 5), error="")
    return row


def _duration(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def run(cases, device, timing, writer, out_file, progress_every) -> list[dict]:
    import torch

    rows, start = [], time.perf_counter()
    try:
        for i, case in enumerate(cases, 1):
            row = measure(torch, case, device, timing)
            writer.writerow(row)
            out_file.flush()  # Ctrl-C or a crash keeps every finished row
            rows.append(row)
            if device.startswith("cuda") and torch.cuda.memory_reserved() > 60 * 2**30:
                torch.cuda.empty_cache()  # varied large shapes would otherwise fragment the cache
            if i % progress_every == 0 or i == len(cases):
                elapsed = time.perf_counter() - start
                rate = f"{row['tflops']} TFLOP/s" if row.get("tflops") else f"{row.get('gbps')} GB/s"
                result = row["error"] or f"{row['time_ms']} ms, {rate}"
                print(f"[{i:4d}/{len(cases)}] {_duration(elapsed)} elapsed, ETA "
                      f"{_duration(elapsed / i * (len(cases) - i))} | {case.label()}: {result}", flush=True)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {len(rows)} of {len(cases)} rows kept", flush=True)
    return rows


# ---- summary ----------------------------------------------------------------------------------

def _group(row) -> str:
    labels = dict(part.split("=", 1) for part in row["extra"].split(";") if "=" in part)
    parts = [row["kind"], labels.get("set", ""), labels.get("op", ""), labels.get("pass", "")]
    if row["kind"] == "sdpa":
        parts.append(labels.get("backend", ""))
    return " ".join(p for p in parts if p)


def _num(text):
    return float(text) if text not in ("", None) else None


def summary(rows) -> str:
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(_group(row), []).append(row)
    lines = [f"{'group':34} {'rows':>5} {'err':>4} {'wide':>4} {'med ms':>9} {'med TF/s':>9} "
             f"{'max TF/s':>9} {'med GB/s':>9} {'max GB/s':>9}"]

    def stat(values, fn):
        values = [v for v in values if v is not None]
        return f"{fn(values):.4g}" if values else "-"

    for name, group in groups.items():
        ok = [r for r in group if not r["error"]]
        times = [_num(r["time_ms"]) for r in ok]
        wide = sum(1 for r in ok if _num(r["iqr_ms"]) > 0.1 * _num(r["time_ms"]))
        tflops = [_num(r["tflops"]) for r in ok]
        gbps = [_num(r["gbps"]) for r in ok]
        lines.append(f"{name[:34]:34} {len(group):5d} {len(group) - len(ok):4d} {wide:4d} "
                     f"{stat(times, _middle):>9} {stat(tflops, _middle):>9} {stat(tflops, max):>9} "
                     f"{stat(gbps, _middle):>9} {stat(gbps, max):>9}")
    drift = [r for r in rows if "set=drift" in r["extra"] and not r["error"]]
    if len(drift) >= 2:
        times = [_num(r["time_ms"]) for r in drift]
        lines.append("drift, 8192^3 GEMM: " + ", ".join(f"{t:.4g} ms" for t in times)
                     + f"  (spread {100 * (max(times) - min(times)) / min(times):.1f}%)")
    return "\n".join(lines)


def _middle(values):
    ordered = sorted(values)
    half = len(ordered) // 2
    return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2


# ---- main -------------------------------------------------------------------------------------

def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for probe.csv and env.json")
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--quick", action="store_true", help="a few toy-sized cases per family (smoke test)")
    parser.add_argument("--only", default="", help="comma-separated kinds to run (gemm,bmm,sdpa,elementwise,copy)")
    parser.add_argument("--warmup-ms", type=float, default=None, help="default 10 (quick: 2)")
    parser.add_argument("--budget-ms", type=float, default=None, help="default 40 (quick: 5)")
    parser.add_argument("--progress-every", type=int, default=50)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: pass --device cpu", file=sys.stderr)
        return 2
    timing = {"warmup_ms": args.warmup_ms if args.warmup_ms is not None else (2 if args.quick else 10),
              "budget_ms": args.budget_ms if args.budget_ms is not None else (5 if args.quick else 40)}
    cases = all_cases(args.device, args.quick)
    if args.only:
        kinds = set(args.only.split(","))
        cases = [c for c in cases if c.kind in kinds]
    os.makedirs(args.out, exist_ok=True)
    env = {**environment(args.device), "probe_args": vars(args), "timing": timing, "num_cases": len(cases)}
    env_path = os.path.join(args.out, "env.json")
    with open(env_path, "w") as f:  # written first, so an interrupted run still has it
        json.dump(env, f, indent=2)
    print(f"{env.get('gpu_name') or env.get('processor')}, torch {env['torch_version']}: "
          f"{len(cases)} cases -> {args.out}", flush=True)

    with open(os.path.join(args.out, "probe.csv"), "w", newline="") as out_file:
        writer = csv.DictWriter(out_file, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        rows = run(cases, args.device, timing, writer, out_file, args.progress_every)

    env_end = environment(args.device)  # clocks and temperature again, after the load
    env.update(finished_utc=env_end["timestamp_utc"], rows=len(rows),
               error_rows=sum(1 for r in rows if r["error"]),
               end_state={key: env_end.get(key) for key in
                          ("sm_clock_mhz", "temperature_c", "power_draw_w", "pstate") if key in env_end})
    with open(env_path, "w") as f:
        json.dump(env, f, indent=2)
    print(summary(rows))
    return 0 if len(rows) == len(cases) else 130


if __name__ == "__main__":
    sys.exit(main())
