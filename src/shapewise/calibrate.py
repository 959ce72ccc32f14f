"""Calibration and validation: what to measure, how to fit a profile from it, how to judge it.

`calibration_cases` is a designed set: every alignment class in every layout, small and large dims,
tile and wave regimes, tall-skinny and decode-like GEMMs, batched GEMMs, fused attention over head
dims, lengths and numbers of sequences × heads, the memory-bound kernels of a layer, and about 1800
random GEMMs and 900 batched GEMMs for the residual and kernel tables; extended, 3600 random GEMMs and
batched GEMMs more, drawn as the held-out set draws its own. `validation_cases` is drawn
differently (another seed, explicit alignment classes, batched and attention shapes, and whole
layers of presets), so that a profile is never judged on what it was fitted to.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from .cases import Case, gemm_cases, op_case, op_from_case, predict_case
from .cost import SPEC
from .errors import ShapewiseError
from .fit import (
    GemmSamples,
    fit_bandwidth,
    fit_cutlass,
    fit_flash,
    fit_flash_memory,
    fit_flash_window,
    fit_gemm,
    residual_kernel,
    residual_rows,
)
from .hardware import GPU
from .ops import FLASH, MEMORY, attention_op, layer_ops, model_ops
from .presets import get_model
from .profile import CostModel, Profile, cost_model
from .shapes import DTYPE_BYTES, ModelShape, Workload, shape_record

LAYER_PRESETS = ("gpt2-medium", "gpt2-xl", "pythia-1b", "pythia-2.8b", "gpt3-2.7b", "gpt3-6.7b", "opt-1.3b",
                 "phi-2", "llama2-7b", "llama3-8b", "mistral-7b", "qwen2-7b", "gemma-7b", "falcon-7b")


def _rng_dims(rng: np.random.Generator, low: float, high: float, count: int) -> np.ndarray:
    return np.round(2 ** rng.uniform(np.log2(low), np.log2(high), count)).astype(int)


def _random_gemms(rng, count: int, *, low: int, high: int, max_flops: float, classes: bool, dtype: str) -> list[Case]:
    """Log-uniform GEMMs; with `classes`, each dim's alignment (multiple of 8, even, odd) drawn uniformly."""
    cases = []
    while len(cases) < count:
        m, n, k = (int(d) for d in _rng_dims(rng, low, high, 3))
        if classes:
            m, n, k = (max(1, d - d % 8 + int(rng.choice([0, 2, 1]))) for d in (m, n, k))
        if 2.0 * m * n * k <= max_flops:
            cases += gemm_cases([m], [n], [k], layouts=(str(rng.choice(["nn", "nt", "tn"])),), dtype=dtype)
    return cases


def _random_bmms(rng, count: int, *, high: int = 4096, classes: bool = True, dtype: str) -> list[Case]:
    """Batched GEMMs: batch 8…512, dims 32…`high` log-uniform, within 1 TFLOP and 4 GB; with `classes`,
    each dim's alignment (multiple of 8, even, odd) drawn uniformly."""
    cases = []
    while len(cases) < count:
        b = int(_rng_dims(rng, 8, 512, 1)[0])
        m, n, k = (int(d) for d in _rng_dims(rng, 32, high, 3))
        if classes:
            m, n, k = (max(1, d - d % 8 + int(rng.choice([0, 2, 1]))) for d in (m, n, k))
        if 2.0 * b * m * n * k <= 1e12 and b * (m * k + k * n + m * n) * 2 <= 4e9:
            cases += gemm_cases([m], [n], [k], batches=(b,), layouts=(str(rng.choice(["nn", "nt"])),), dtype=dtype)
    return cases


def _attention(pass_: str, *, seqs: int, heads: int, seq: int, head_dim: int, dtype: str, kv_heads: int | None = None,
               kv_len: int | None = None) -> Case:
    """A fused attention call as a case: causal over `seq` tokens, or one query token (seq=1) against
    a cache of kv_len."""
    return op_case(attention_op(pass_, seqs=seqs, heads=heads, kv_heads=kv_heads or heads, q_len=seq,
                                kv_len=kv_len or seq, head_dim=head_dim, causal=kv_len is None,
                                dtype_bytes=DTYPE_BYTES[dtype]), dtype)


def _memory_ops(shapes, tokens: int, families: tuple[str, ...] | None = None) -> list:
    """The memory-bound ops (of `families`, or all) of one-layer models of `shapes` on `tokens` rows,
    forward and backward, each distinct op once."""
    unique = {}
    for shape in shapes:
        for op in model_ops(shape, Workload(batch=1, seq=tokens)):
            if op.kind == MEMORY and (families is None or op.family in families):
                unique.setdefault((op.family, op.pass_, op.m, op.n, op.k), op)
    return list(unique.values())


def _layer_memory_ops(tokens: int) -> list:
    """The memory-bound ops of real layers (both norm kinds, plain and gated MLPs), forward and backward."""
    return _memory_ops((ModelShape("gelu", 4096, 1, 32, 50304),
                        ModelShape("glu", 4096, 1, 32, 32000, ffn=11008, mlp="swiglu", norm="rmsnorm", bias=False)),
                       tokens)


# `calibrate --extended [SEED]`: this many more random GEMMs and batched GEMMs, drawn as the held-out
# set draws its own but from streams of their own (EXTENDED_STREAM beside the seed, which no
# `validate --seed` draws from). Runs of several seeds, refitted together, know more shapes.
EXTENDED_GEMMS, EXTENDED_BMMS = 2400, 1200
EXTENDED_STREAM = 4099


def calibration_cases(*, dtype: str = "bf16", quick: bool = False, seed: int = 1, extended: int | None = None,
                      edges: int | None = None, batched: int | None = None) -> list[Case]:
    """The designed set; with `extended` (a seed), that seed's extended draws too; with `edges` (a
    seed), that seed's edge draws (_edge_cases); with `batched` (a seed), its batched draws
    (_batched_cases)."""
    rng = np.random.default_rng(seed)
    if quick:  # toy sizes, for a CPU smoke test
        return _unique(gemm_cases([32, 64], [64, 65], [32], layouts=("nn", "nt", "tn"), dtype=dtype)
                       + _random_gemms(rng, 6, low=16, high=128, max_flops=1e7, classes=False, dtype=dtype)
                       + [_attention(p, seqs=1, heads=4, seq=s, head_dim=64, dtype=dtype) for p in ("fwd", "bwd")
                          for s in (32, 64)]
                       + [op_case(op, dtype) for op in _layer_memory_ops(64)]
                       + _extended_cases(extended, quick=True, dtype=dtype)
                       + _edge_cases(edges, quick=True, dtype=dtype)
                       + _batched_cases(batched, quick=True, dtype=dtype))
    cases = [c for d in (256, 512, 1024, 2048, 4096, 8192, 12288) for c in gemm_cases([d], [d], [d], dtype=dtype)]
    cases += gemm_cases([8192], list(range(64, 8193, 256)), [8192], dtype=dtype)  # tile and wave regimes
    for layout in ("nn", "nt", "tn"):  # every alignment class of every leading dim
        for delta in (1, 2, 8):
            for dims in ((4096 + delta, 4096, 4096), (4096, 4096 + delta, 4096), (4096, 4096, 4096 + delta)):
                cases += gemm_cases([dims[0]], [dims[1]], [dims[2]], layouts=(layout,), dtype=dtype)
    cases += gemm_cases([1, 4, 16, 64, 256], [4096, 14336], [4096], layouts=("nt",), dtype=dtype)  # decode-like
    cases += gemm_cases([8192], [8192], [32, 64, 128, 256, 512], dtype=dtype)  # small k
    cases += gemm_cases([8192], [32000, 50257, 128256], [4096], layouts=("nt", "tn"), dtype=dtype)
    for shape, w in ((get_model("llama3-8b"), Workload(batch=1, seq=4096)), (get_model("gpt2"), Workload())):
        cases += [op_case(op, dtype) for op in model_ops(shape, w) if op.kind == "gemm"]
    cases += [c for d in (64, 128, 256) for s in (1024, 4096) for c in
              gemm_cases([s], [s], [d], batches=(64,), layouts=("nt",), dtype=dtype)
              + gemm_cases([s], [d], [s], batches=(64,), dtype=dtype)]
    cases += _random_gemms(rng, 300, low=16, high=16384, max_flops=1e12, classes=False, dtype=dtype)
    # As many again with each dim's alignment class drawn explicitly, and batched GEMMs of every class:
    # the residual table needs every layout × alignment group populated.
    cases += _random_gemms(rng, 300, low=32, high=16384, max_flops=1e12, classes=True, dtype=dtype)
    cases += _random_bmms(rng, 60, dtype=dtype)
    for d in (64, 128, 192, 256):  # fused attention: each head-dim bucket at three lengths
        for s in (1024, 2048, 4096):
            for pass_ in ("fwd", "bwd"):
                cases.append(_attention(pass_, seqs=4, heads=32, seq=s, head_dim=d, dtype=dtype))
    cases += [op_case(op, dtype) for tokens in (4096, 16384) for op in _layer_memory_ops(tokens)]
    # Fused attention across the grid a model can land on: few to many sequences × heads (so few to
    # many waves), short to long sequences, every head dim a preset uses (96 and 160 are padded).
    for seqs, heads in ((1, 16), (2, 32), (4, 64)):
        for s in (512, 1024, 2048, 4096, 8192):
            for d in (64, 96, 128, 160, 192, 256):
                for pass_ in ("fwd", "bwd"):
                    cases.append(_attention(pass_, seqs=seqs, heads=heads, seq=s, head_dim=d, dtype=dtype))
    # Sliding-window attention (FlexAttention's kernel, bench._window_attention): its rate against
    # cuDNN's causal kernel, forward and backward, over head dims, windows and the work per SM.
    for seqs, heads in ((1, 32), (4, 16)):
        for d in (64, 128, 256):
            for s, window in ((4096, 1024), (8192, 4096)):
                for pass_ in ("fwd", "bwd"):
                    cases.append(op_case(attention_op(pass_, seqs=seqs, heads=heads, kv_heads=heads, q_len=s, kv_len=s,
                                                      head_dim=d, causal=True, dtype_bytes=DTYPE_BYTES[dtype],
                                                      window=window, name="attn/window"), dtype))
    # Decoding: the same memory-bound kernels on a few tokens' rows (their fixed cost), and one query
    # token's attention against caches of many lengths, batches and head groupings.
    cases += [op_case(op, dtype) for tokens in (1, 16, 128) for op in _layer_memory_ops(tokens)
              if op.pass_ == "fwd"]
    for seqs, heads, kv_heads in ((1, 32, 8), (8, 32, 32), (16, 32, 8), (64, 32, 8), (4, 64, 64)):
        for kv_len in (1024, 4096, 16384):
            for d in (64, 128):
                cases.append(_attention("fwd", seqs=seqs, heads=heads, kv_heads=kv_heads, seq=1, kv_len=kv_len,
                                        head_dim=d, dtype=dtype))
    # A denser residual table: every layout × alignment group with tens of shapes, batched ones too.
    cases += _random_gemms(rng, 600, low=32, high=16384, max_flops=1e12, classes=True, dtype=dtype)
    cases += _random_bmms(rng, 240, dtype=dtype)
    # And denser again where the kernel cuBLAS runs for a misaligned shape is hardest to tell from its
    # nearest calibration shapes: batched GEMMs above all (benchmarks/RESULTS.md, the learning curve).
    cases += _random_bmms(rng, 600, dtype=dtype)
    cases += _random_gemms(rng, 300, low=32, high=16384, max_flops=1e12, classes=True, dtype=dtype)
    # The norms on rows of many widths: a norm's fixed time grows with its rows' width (one row's
    # reduction), which rows of 4096 alone cannot tell. Few rows for the fixed time, many for a check.
    cases += [op_case(op, dtype) for width in NORM_WIDTHS for tokens in (1, 16, 2048) for op in _norm_ops(width, tokens)]
    # An MoE layer's token copies (dispatch and combine, forward and backward): a gather and a scatter
    # of whole rows, which no dense layer runs, at hidden sizes of 2048 to 7168.
    moe = get_model("mixtral-8x7b")
    cases += [op_case(op, dtype) for hidden in (2048, 4096, 7168) for tokens in (1, 16, 512, 4096, 16384)
              for op in _memory_ops((dataclasses.replace(moe, hidden=hidden, num_heads=hidden // 128),), tokens,
                                    families=("copy",))]
    cases += _extended_cases(extended, quick=False, dtype=dtype)
    cases += _edge_cases(edges, quick=False, dtype=dtype)
    cases += _batched_cases(batched, quick=False, dtype=dtype)
    return _unique(cases)


def drawn_beside(*, dtype: str = "bf16", extended: int | None = None, edges: int | None = None,
                 batched: int | None = None) -> list[Case]:
    """The random draws of `calibrate --extended SEED`, `--edges SEED` and `--batched SEED` alone,
    without the designed set they are measured beside."""
    return (_extended_cases(extended, quick=False, dtype=dtype) + _edge_cases(edges, quick=False, dtype=dtype)
            + _batched_cases(batched, quick=False, dtype=dtype))


def _extended_cases(extended: int | None, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --extended SEED`'s draws (none without a seed): which kernel cuBLAS runs for a
    misaligned shape is learned from many shapes' choices."""
    if extended is None:
        return []
    more = np.random.default_rng([extended, EXTENDED_STREAM])
    if quick:
        return (_random_gemms(more, 4, low=16, high=128, max_flops=1e7, classes=True, dtype=dtype)
                + _random_bmms(more, 2, high=64, classes=False, dtype=dtype))
    return (_random_gemms(more, EXTENDED_GEMMS, low=32, high=16384, max_flops=1e12, classes=True, dtype=dtype)
            + _random_bmms(more, EXTENDED_BMMS, classes=False, dtype=dtype))


# `calibrate --edges SEED`: GEMMs and batched GEMMs at the edges of the designed set's dims (32 to
# 16,384), where a model sees decode rows, gemv, narrow heads and long reductions: each dim is drawn
# small (1 to 31), large (16,385 to 65,536) or in between, at least one of them at an edge, each in an
# alignment class drawn uniformly (a multiple of 8, even, odd), from a stream of its own (EDGE_STREAM
# beside the seed). The residual and kernel tables know only the shapes they were fitted on: without
# these, a shape beyond the designed range was corrected as its nearest designed shape.
EDGE_GEMMS, EDGE_BMMS = 2000, 1000
EDGE_STREAM = 8209
EDGE_SMALL, EDGE_LARGE = (1, 31), (16385, 65536)
EDGE_MAX_FLOPS, EDGE_MAX_BYTES = 1e12, 4e9


def _edge_dims(rng, count: int, *, batched: bool, dtype: str) -> list[tuple[int, int, int, int, str]]:
    """(m, n, k, batch, layout) of `count` edge shapes (see EDGE_GEMMS)."""
    out: list[tuple[int, int, int, int, str]] = []
    size = DTYPE_BYTES[dtype]
    while len(out) < count:
        where = rng.choice(3, size=3, p=(0.45, 0.2, 0.35))  # 0 small, 1 large, 2 in between
        if np.all(where == 2):
            continue
        bounds = [EDGE_SMALL, EDGE_LARGE, (32, 16384)]
        m, n, k = (int(_rng_dims(rng, *bounds[w], 1)[0]) for w in where)
        m, n, k = (max(1, d - d % 8 + int(rng.choice([0, 2, 1]))) if d > 8 else d for d in (m, n, k))
        batch = int(_rng_dims(rng, 2, 1024, 1)[0]) if batched else 1
        layout = str(rng.choice(["nn", "nt", "tn"]))
        if 2.0 * batch * m * n * k <= EDGE_MAX_FLOPS and batch * (m * k + k * n + m * n) * size <= EDGE_MAX_BYTES:
            out.append((m, n, k, batch, layout))
    return out


def _edge_cases(edges: int | None, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --edges SEED`'s draws (none without a seed)."""
    if edges is None:
        return []
    rng = np.random.default_rng([edges, EDGE_STREAM])
    counts = (4, 2) if quick else (EDGE_GEMMS, EDGE_BMMS)
    cases = []
    for batched, count in zip((False, True), counts):
        for m, n, k, batch, layout in _edge_dims(rng, count, batched=batched, dtype=dtype):
            if quick:
                m, n, k = (1 + d % 61 for d in (m, n, k))
            cases += gemm_cases([m], [n], [k], batches=(batch,), layouts=(layout,), dtype=dtype)
    return cases


# `calibrate --batched SEED`: batched GEMMs in every layout, and one query token's attention against
# caches of every head grouping, from a stream of their own (BATCHED_STREAM beside the seed). The
# designed set's batched GEMMs are "nn" and "nt" only, over dims of 32 to 4096, and its decoding
# attention has head dims 64 and 128 and groups of 1 to 4: the batched "tn" GEMMs of attention's
# backward, the score and value products of sequences that are no power of two, and the decoding of
# head dims to 256 and of one key head shared by tens of query heads were corrected as their nearest
# other shapes (benchmarks/RESULTS.md).
BATCHED_GEMMS, BATCHED_DECODES = 1500, 160
BATCHED_STREAM = 6113
BATCHED_HEAD_DIMS = (32, 64, 80, 96, 112, 128, 160, 192, 256)
# Attention's products by their operands as torch lays them out (batch × seq × head dim, row-major):
# (m, n, k, layout) over query length q, key length s and head dim d.
ATTENTION_PRODUCTS = (
    lambda q, s, d: (q, s, d, "nt"),  # Q Kᵀ, and dO Vᵀ
    lambda q, s, d: (q, d, s, "nn"),  # P V, and dS K
    lambda q, s, d: (s, d, q, "tn"),  # Pᵀ dO and dSᵀ Q
)
DECODE_GROUPS = (1, 1, 2, 4, 5, 7, 8, 16, 32, 71)
MAX_DECODE_BYTES = 8e9  # one call's K and V


def _batched_dims(rng, count: int, *, dtype: str) -> list[tuple[int, int, int, int, str]]:
    """(m, n, k, batch, layout) of `count` batched GEMMs (see BATCHED_GEMMS): half attention's
    products over query and key lengths of any value (decode and chunked prefill too: a query
    shorter than its keys), half any dims of 1 to 16,384 in any layout and alignment class."""
    out: list[tuple[int, int, int, int, str]] = []
    size = DTYPE_BYTES[dtype]
    while len(out) < count:
        batch = int(_rng_dims(rng, 2, 2048, 1)[0])
        if rng.random() < 0.5:
            s = int(_rng_dims(rng, 64, 16384, 1)[0])
            q = s if rng.random() < 0.7 else int(_rng_dims(rng, 1, s, 1)[0])
            d = int(rng.choice(BATCHED_HEAD_DIMS))
            m, n, k, layout = ATTENTION_PRODUCTS[int(rng.integers(len(ATTENTION_PRODUCTS)))](q, s, d)
        else:
            m, n, k = (int(d) for d in _rng_dims(rng, 1, 16384, 3))
            m, n, k = (max(1, d - d % 8 + int(rng.choice([0, 2, 1]))) if d > 8 else d for d in (m, n, k))
            layout = str(rng.choice(["nn", "nt", "tn"]))
        if 2.0 * batch * m * n * k <= EDGE_MAX_FLOPS and batch * (m * k + k * n + m * n) * size <= EDGE_MAX_BYTES:
            out.append((m, n, k, batch, layout))
    return out


def _decode_draws(rng, count: int, *, dtype: str) -> list[Case]:
    """One query token's fused attention: query heads 8 to 128 in groups of 1 to 71 per key head,
    head dims 64 to 256, caches of 256 to 32,768 tokens (any length), 1 to 128 sequences; caches
    within MAX_DECODE_BYTES."""
    cases: list[Case] = []
    while len(cases) < count:
        groups = int(rng.choice(DECODE_GROUPS))
        kv_heads = max(1, int(_rng_dims(rng, 1, 128, 1)[0]) // groups)
        heads = kv_heads * groups
        d = int(rng.choice(BATCHED_HEAD_DIMS[1:]))
        kv_len = int(_rng_dims(rng, 256, 32768, 1)[0])
        seqs = int(_rng_dims(rng, 1, 128, 1)[0])
        if heads <= 256 and 2 * seqs * kv_heads * kv_len * d * DTYPE_BYTES[dtype] <= MAX_DECODE_BYTES:
            cases.append(_attention("fwd", seqs=seqs, heads=heads, kv_heads=kv_heads, seq=1, kv_len=kv_len,
                                    head_dim=d, dtype=dtype))
    return cases


def _batched_cases(batched: int | None, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --batched SEED`'s draws (none without a seed)."""
    if batched is None:
        return []
    rng = np.random.default_rng([batched, BATCHED_STREAM])
    count, decodes = (3, 2) if quick else (BATCHED_GEMMS, BATCHED_DECODES)
    cases = []
    for m, n, k, batch, layout in _batched_dims(rng, count, dtype=dtype):
        if quick:
            m, n, k, batch = (1 + d % 61 for d in (m, n, k, batch))
        cases += gemm_cases([m], [n], [k], batches=(batch,), layouts=(layout,), dtype=dtype)
    if quick:
        return cases + [_attention("fwd", seqs=1, heads=4, kv_heads=k, seq=1, kv_len=64, head_dim=64, dtype=dtype)
                        for k in (1, 4)][:decodes]
    return cases + _decode_draws(rng, decodes, dtype=dtype)


NORM_WIDTHS = (768, 1024, 1280, 2048, 3072, 5120, 6144, 8192)  # not the held-out set's presets' (1600, 2560, 4096)


def _norm_ops(width: int, tokens: int) -> list:
    """LayerNorm and RMSNorm, forward and backward, on `tokens` rows of `width`."""
    norms = ("layernorm", "rmsnorm")
    return _memory_ops([ModelShape(f"{n}-{width}", width, 1, width // 64, 32000, norm=n) for n in norms], tokens, norms)


def _unique(cases: list[Case]) -> list[Case]:
    """The cases without repeats (random draws can land on a designed shape), first one kept."""
    unique: dict[str, Case] = {}
    for case in cases:
        unique.setdefault(case.key, case)
    return list(unique.values())


def _layer_case(shape: ModelShape, *, batch: int, seq: int, dtype: str, group: str) -> Case:
    return Case("layer", dict(model=shape.name, shape=shape_record(shape), batch=batch, seq=seq,
                              attention="flash", dtype=dtype, group=group, **{"pass": "fwdbwd"}))


def validation_cases(*, dtype: str = "bf16", quick: bool = False, seed: int = 2) -> list[Case]:
    rng = np.random.default_rng(seed)
    if quick:
        tiny = ModelShape("tiny", 64, 1, 4, 256, num_kv_heads=2, ffn=128, mlp="swiglu", norm="rmsnorm", bias=False)
        return (_random_gemms(rng, 6, low=16, high=128, max_flops=1e7, classes=True, dtype=dtype)
                + [_attention("fwd", seqs=1, heads=4, seq=48, head_dim=64, dtype=dtype)]
                + [_layer_case(tiny, batch=1, seq=32, dtype=dtype, group="layer"),
                   _layer_case(tiny.replace(num_heads=8, num_kv_heads=4, head_dim=None), batch=1, seq=32, dtype=dtype,
                               group="variants"),
                   _layer_case(tiny, batch=1, seq=32, dtype=dtype, group="variants")])
    cases = _random_gemms(rng, 240, low=32, high=16384, max_flops=1e12, classes=True, dtype=dtype)
    cases += _random_bmms(rng, 40, classes=False, dtype=dtype)
    for _ in range(20):  # fused attention at random sizes, forward and backward
        heads = int(rng.choice([8, 16, 32, 64]))
        d = int(rng.choice([64, 80, 96, 128, 160, 192, 256]))
        s = int(_rng_dims(rng, 512, 8192, 1)[0])
        seqs = int(rng.choice([1, 2, 4]))
        for pass_ in ("fwd", "bwd"):
            cases.append(_attention(pass_, seqs=seqs, heads=heads, seq=s, head_dim=d, dtype=dtype))
    for _ in range(12):  # decoding's attention: one query token against caches of random lengths
        heads = int(rng.choice([16, 32, 64]))
        kv_heads = heads // int(rng.choice([1, 4, 8]))
        seqs = int(rng.choice([1, 2, 4, 8, 16, 32]))
        kv_len = int(_rng_dims(rng, 512, 32768, 1)[0])
        cases.append(_attention("fwd", seqs=seqs, heads=heads, kv_heads=kv_heads, seq=1, kv_len=kv_len,
                                head_dim=int(rng.choice([64, 128])), dtype=dtype))
    for name in ("llama3-8b", "gpt2-xl", "phi-2"):  # and the memory-bound ops of a decoding step
        step = model_ops(get_model(name), Workload(batch=int(rng.integers(1, 33)), seq=2048, mode="decode"))
        cases += [op_case(op, dtype) for op in step if op.kind == MEMORY]
    cases += [_layer_case(get_model(name), batch=1, seq=2048, dtype=dtype, group="layer") for name in LAYER_PRESETS]
    # Variants of one model's shape: what `suggest` will rank. Heads and FFN width of GPT-3 2.7B.
    base = get_model("gpt3-2.7b")
    variants = [base.replace(name=f"gpt3-2.7b-a{a}", num_heads=a) for a in (20, 32, 40, 64)]
    variants += [base.replace(name=f"gpt3-2.7b-ffn{f}", ffn=f) for f in (10240, 10922, 10944, 11008)]
    cases += [_layer_case(v, batch=4, seq=2048, dtype=dtype, group="variants") for v in variants]
    # More batched GEMMs, drawn last so that the cases above stay as they were: with 40 of them the
    # 90th percentile rested on four cases.
    cases += _random_bmms(rng, 80, classes=False, dtype=dtype)
    fitted = {c.key for c in calibration_cases(dtype=dtype)}  # the extended draws' own streams never meet these
    return [c for c in cases if c.key not in fitted]  # held out whatever the seed


# ---- fitting a profile from stored rows ------------------------------------------------------

def _gemm_rows(rows: list[tuple[Case, dict]]) -> list[dict]:
    out = []
    for case, row in rows:
        p = case.params
        if row.get("error") is None and (case.bench in ("gemm", "bmm") or (case.bench == "op" and p["kind"] in ("gemm", "bmm"))):
            out.append(dict(m=p["m"], n=p["n"], k=p["k"], batch=p["batch"], layout=p["layout"], time_ms=row["median_ms"],
                            key=case.key))
    return out


def fit_profile(rows: list[tuple[Case, dict]], *, gpu: GPU, dtype: str, environment: dict,
                kernels: dict | None = None) -> Profile:
    """A profile from measured calibration cases (pairs of case and stored row), and where given the
    kernels each GEMM ran (case key -> {"kernels": names, "grids": grids}, from kernel_census)."""
    gemms = _gemm_rows(rows)
    if len(gemms) < 10:
        raise ShapewiseError(f"only {len(gemms)} GEMM measurements: calibration needs its whole set (run it again)")
    samples = GemmSamples.from_rows(gemms)
    before = float(np.median(np.abs(samples.log_error(SPEC, gpu, dtype))))
    params, history = fit_gemm(samples, gpu=gpu, dtype=dtype)
    attention = [(c, r) for c, r in rows if c.bench == "op" and c.params["kind"] == FLASH and r.get("error") is None]
    flash = [dict(batch=c.params["batch"], seq=c.params["m"], head_dim=c.params["k"], **{"pass": c.params["pass_"]},
                  time_ms=r["median_ms"]) for c, r in attention if c.params["causal"] and not c.params.get("window")]
    if flash:
        params = fit_flash(flash, gpu=gpu, dtype=dtype, params=params)
    decoding = [dict(bytes=c.bytes, kv_len=c.params["n"], head_dim=c.params["k"], batch=c.params["batch"], time_ms=r["median_ms"])
                for c, r in attention if c.params["m"] == 1]
    params = fit_flash_memory(decoding, gpu=gpu, params=params)
    params = fit_flash_window([(op_from_case(c.params, flops=c.flops, nbytes=c.bytes), r["median_ms"])
                               for c, r in attention if c.params.get("window")], gpu=gpu, dtype=dtype, params=params)
    memory = [dict(family=c.params["family"], **{"pass": c.params["pass_"]}, bytes=c.bytes, time_ms=r["median_ms"],
                   width=c.params["n"], rows=c.params["m"], table=c.params.get("k", 0)) for c, r in rows
              if c.bench == "op" and c.params["kind"] == MEMORY and r.get("error") is None]
    if memory:
        params = fit_bandwidth(memory, gpu=gpu, params=params)
    octaves, prior = residual_kernel(samples, params, gpu=gpu, dtype=dtype)
    params = dataclasses.replace(params, gemm_residuals=residual_rows(samples, params, gpu=gpu, dtype=dtype),
                                 residual_octaves=octaves, residual_prior=prior)
    named = [dict(r, **kernels[r["key"]]) for r in gemms if r["key"] in (kernels or {})]
    cutlass = {}
    if named:
        params = fit_cutlass(named, params, gpu=gpu, dtype=dtype, report=cutlass)
    after = float(np.median(np.abs(samples.log_error(params, gpu, dtype))))
    fit = dict(gemm_cases=len(samples), flash_cases=len(flash), decode_attention_cases=len(decoding),
               memory_cases=len(memory), dtype=dtype, kernel_census=len(named),
               cutlass_kernels=len(params.cutlass_kernels), cutlass_choices=len(params.cutlass_choices),
               cutlass_chooser=cutlass or None,
               residual_kernel=dict(octaves=octaves, prior=prior, chosen_by="5-fold cross-validation"),
               median_abs_log_error_spec=round(before, 4), median_abs_log_error_fitted=round(after, 4),
               mean_abs_log_error_by_round=[round(h, 4) for h in history])
    return Profile(gpu=gpu.key, params=params, environment=environment,
                   created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"), fit=fit)


# ---- validation ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Judged:
    category: str
    label: str
    measured_ms: float
    predicted_ms: dict  # model name -> ms


def _roofline_ms(flops: float, nbytes: float, gpu: GPU, dtype: str, efficiency: float = 0.5) -> float:
    """The flat roofline llm-analysis-style tools assume: 50% of peak FLOP/s and of bandwidth."""
    return max(flops / (gpu.peak_tflops(dtype) * 1e12 * efficiency), nbytes / (gpu.bytes_per_s * efficiency)) * 1e3


def _predict_case(case: Case, model: CostModel) -> tuple[float, float]:
    """(cost-model ms, flat-roofline ms) for one validation case: a GEMM, a fused attention op or a layer."""
    dtype, gpu = case.params["dtype"], model.gpu
    if case.bench == "layer":
        p = case.params
        ops = layer_ops(ModelShape(**p["shape"]), Workload(batch=p["batch"], seq=p["seq"], dtype=dtype))
        roofline = sum(_roofline_ms(op.flops, op.bytes, gpu, dtype) * op.count for op in ops)
    elif case.bench == "op":  # as the op it was made from holds its work: whole FLOPs and bytes
        roofline = _roofline_ms(round(case.flops or 0), round(case.bytes), gpu, dtype)
    else:
        roofline = _roofline_ms(case.flops, case.bytes, gpu, dtype)
    return predict_case(case, gpu=model), roofline


def _category(case: Case) -> str:
    if case.bench == "layer":
        return case.params.get("group", "layer")
    if case.bench == "op":
        if case.params["kind"] == MEMORY:
            return "memory, decoding"
        return "attention decode" if case.params["m"] == 1 else f"attention {case.params['pass_']}"
    return case.bench


def judge(rows: list[tuple[Case, dict]], *, gpu: GPU, profile: Profile | None) -> list[Judged]:
    """Every measured validation case against the calibrated model, the spec model and a flat roofline."""
    judged = []
    spec, calibrated = cost_model(gpu, spec_only=True), cost_model(gpu, profile=profile) if profile else None
    for case, row in rows:
        if row.get("error") is not None:
            continue
        spec_ms, roofline_ms = _predict_case(case, spec)
        predicted = {"calibrated": _predict_case(case, calibrated)[0] if calibrated else math.nan,
                     "spec-only": spec_ms, "roofline 50%": roofline_ms}
        judged.append(Judged(_category(case), case.label, row["median_ms"], predicted))
    return judged


def _ranks(x) -> np.ndarray:
    """Ranks from 0, tied values sharing the mean of the ranks they span."""
    x = np.asarray(x, dtype=float)
    ranks = np.empty(len(x))
    ranks[np.argsort(x, kind="stable")] = np.arange(len(x))
    _, tie, count = np.unique(x, return_inverse=True, return_counts=True)
    return (np.bincount(tie, weights=ranks) / count)[tie]


def spearman(a, b) -> float:
    """Spearman's rho: Pearson's r of the ranks (ties averaged); NaN below 3 pairs or when a side is all ties."""
    if len(a) < 3:
        return math.nan
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


def _attention_steps(judged: list[Judged]) -> list[Judged]:
    """Each fused attention shape's forward and backward together: what a training step runs."""
    halves: dict = {}
    for j in judged:
        if j.category in ("attention fwd", "attention bwd"):
            halves.setdefault(j.label.replace("attn/flash.bwd", "attn/flash"), []).append(j)
    return [Judged("attention fwd+bwd", label, pair[0].measured_ms + pair[1].measured_ms,
                   {m: pair[0].predicted_ms[m] + pair[1].predicted_ms[m] for m in pair[0].predicted_ms})
            for label, pair in halves.items() if len(pair) == 2]


def summarize(judged: list[Judged]) -> list[dict]:
    """Per category and model: median and 90th-percentile absolute percentage error, Spearman rho."""
    out = []
    judged = judged + _attention_steps(judged)
    for category in dict.fromkeys(j.category for j in judged):
        items = [j for j in judged if j.category == category]
        measured = np.array([j.measured_ms for j in items])
        for model in items[0].predicted_ms:
            pred = np.array([j.predicted_ms[model] for j in items])
            if np.isnan(pred).all():
                continue
            ape = np.abs(pred / measured - 1)
            out.append(dict(category=category, model=model, n=len(items), median_ape=float(np.median(ape)),
                            p90_ape=float(np.percentile(ape, 90)), max_ape=float(ape.max()),
                            spearman=spearman(pred, measured)))
    return out


def report_json(judged: list[Judged]) -> dict:
    return {"summary": summarize(judged),
            "cases": [dict(category=j.category, label=j.label, measured_ms=j.measured_ms, predicted_ms=j.predicted_ms)
                      for j in judged]}



# ---- the whole of a calibration or a validation, as the command line runs it ----------------------

PROFILE_ENVIRONMENT = ("gpu_name", "driver_version", "torch_version", "cuda_version", "cublas_version", "cudnn_version",
                       "sm_clock_max_mhz", "timestamp_utc")  # what a profile records of where it was measured


@dataclass(frozen=True)
class Calibration:
    cases: int
    sweep: object  # bench.SweepResult: the calibration set's rows
    profile: Profile | None  # None when interrupted (or on a rank other than 0, or on the CPU with no GPU named)
    named: int = 0  # GEMMs whose kernels were named now
    interrupted: str = ""  # what an interruption kept: "measured cases" or "named kernels"


def calibrate(*, store, gpu: GPU | str | None = None, device: str = "cuda", dtype: str = "bf16", quick: bool = False,
              extended: int | None = None, edges: int | None = None, batched: int | None = None,
              warmup_ms: float = 3, budget_ms: float = 10,
              force: bool = False, progress: bool = True) -> Calibration:
    """Measure the designed set on `device` (what the store holds for this environment is kept), name
    the kernels cuBLAS ran for its GEMMs, and fit a profile for `gpu` (default: the GPU measured).
    Ctrl-C returns what was kept, with no profile: run it again to finish."""
    from .bench import census_rows, kernel_census, sweep
    from .measure import measured_gpu

    cases = calibration_cases(dtype=dtype, quick=quick, extended=extended, edges=edges, batched=batched)
    result = sweep(cases, store=store, device=device, warmup_ms=warmup_ms, budget_ms=budget_ms, force=force,
                   progress=progress)
    if result.interrupted or result.rank != 0:
        return Calibration(len(cases), result, None, interrupted="measured cases" if result.interrupted else "")
    try:  # which kernels cuBLAS ran: the misaligned GEMMs' time model needs them
        named = kernel_census(cases, store=store, device=device, env=result.environment, progress=progress)
    except KeyboardInterrupt:
        return Calibration(len(cases), result, None, interrupted="named kernels")
    kernels = census_rows(store, env_id=store.environment_id(result.environment))
    if gpu is None and device == "cpu":  # the smoke test: CPU times are no GPU's, and none was named to fit for
        return Calibration(len(cases), result, None, named)
    gpu = measured_gpu(result.environment, gpu=gpu, device=device)
    environment = {k: result.environment[k] for k in PROFILE_ENVIRONMENT if result.environment.get(k) is not None}
    profile = fit_profile(result.rows, gpu=gpu, dtype=dtype, environment=environment, kernels=kernels)
    return Calibration(len(cases), result, profile, named)


COMM_SIZES, COMM_SIZES_QUICK = ["1M:1G"], ["1M:16M"]


def calibrate_comm(*, store, gpu: GPU | str, device: str = "cuda", quick: bool = False) -> tuple[Profile | None, int]:
    """Under torchrun: time the collectives across the ranks and fit the GPU link's parameters into
    this GPU's own profile (the spec model's where it has none of its own). Returns the profile (None
    on ranks other than 0) and how many collectives it was fitted on."""
    from .cases import parse_sizes
    from .distributed import bench_comm
    from .fit import fit_comm
    from .hardware import get_gpu
    from .profile import find

    gpu = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    rank, rows = bench_comm(parse_sizes(COMM_SIZES_QUICK if quick else COMM_SIZES),
                            ["all_reduce", "all_gather", "reduce_scatter"], store=store, device=device)
    if rank != 0:
        return None, 0
    world = int(os.environ.get("WORLD_SIZE", "1"))
    old = find(gpu)
    base = old if old is not None and not old.borrowed_for else Profile(gpu=gpu.key, params=SPEC)
    params = fit_comm([{**r, "world": world} for r in rows], gpu=gpu, params=base.params)
    profile = dataclasses.replace(base, params=params, fit={**base.fit, "comm_cases": len(rows), "comm_ranks": world},
                                  borrowed_for="", path="")
    return profile, len(rows)


def install(profile: Profile, *, user: bool = True, out: str | None = None) -> list:
    """Write a fitted profile to the user's profile folder (where predictions find it; unless `user`
    is False) and to `out`; returns the paths written."""
    from .profile import profile_dir, save

    paths = [save(profile, profile_dir() / f"{profile.gpu}.json")] if user else []
    if out:
        paths.append(save(profile, out))
    return paths


@dataclass(frozen=True)
class Validation:
    gpu: GPU
    profile: Profile | None  # the profile judged (None: the GPU has none)
    judged: list  # of Judged
    num_cases: int = 0  # held-out cases measured (or found in the store)
    sweep: object = None  # bench.SweepResult when measured now; None when read from the store

    def to_json(self) -> dict:
        return {**report_json(self.judged), "gpu": self.gpu.key,
                "profile": self.profile.describe() if self.profile else None}


def validate(*, store, gpu: GPU | str | None = None, profile: Profile | None = None, judge_set: str = "default",
             configs=None, device: str = "cuda", dtype: str = "bf16", quick: bool = False, seed: int = 2,
             from_store: bool = False, warmup_ms: float = 3, budget_ms: float = 10, force: bool = False,
             progress: bool = True) -> Validation:
    """Measure a held-out set (judges.SETS: `judge_set` drawn with `seed`; or, `from_store`, read its
    newest measurements from the store: no GPU needed) and judge `profile` (default: the one
    predictions for the GPU use) against the spec model and a flat roofline."""
    from .bench import stored_rows, sweep
    from .judges import judge_set_cases, judge_sets
    from .measure import measured_gpu
    from .profile import find

    drawn = judge_set_cases(judge_set, seed=seed, dtype=dtype, quick=quick, configs=configs)
    result = None
    if from_store:
        rows = stored_rows(drawn.cases, store=store)
        if not rows:
            raise ShapewiseError("the store holds no validation measurements: run `shapewise validate` on a GPU first")
        env = {"gpu_name": rows[0][1].get("gpu_name")}
    else:
        result = sweep(drawn.cases, store=store, device=device, warmup_ms=warmup_ms, budget_ms=budget_ms, force=force,
                       progress=progress)
        if result.rank != 0:
            return Validation(None, None, [], sweep=result)
        rows, env = result.rows, result.environment
        if gpu is None and device == "cpu":  # the smoke test: nothing to judge CPU times against
            return Validation(None, None, [], len(rows), result)
    gpu = measured_gpu(env, gpu=gpu, device=device)
    profile = profile or find(gpu)
    return Validation(gpu, profile, judge_sets(drawn, rows, gpu=gpu, profile=profile), len(rows), result)


@dataclass(frozen=True)
class MachineFit:
    cases: int
    sweep: object  # bench.SweepResult
    base: Profile | None = None  # the GPU's profile the factors were fitted on top of
    factors: dict = dataclasses.field(default_factory=dict)  # op family -> {"factor", "cases", "iqr"}
    profile: Profile | None = None  # base with this machine's factors; None when interrupted


def calibrate_machine(*, store, gpu: GPU | str | None = None, device: str = "cuda", dtype: str = "bf16",
                      warmup_ms: float = 3, budget_ms: float = 10, force: bool = False,
                      progress: bool = True) -> MachineFit:
    """`calibrate --quick` on a GPU: this machine's factors by op family (machine.py), measured on a
    small set and fitted on top of the GPU's own profile."""
    from .bench import sweep
    from .machine import LIMITS, machine_cases, machine_factors, with_factors
    from .measure import measured_gpu
    from .profile import find

    cases = machine_cases(dtype=dtype)
    result = sweep(cases, store=store, device=device, warmup_ms=warmup_ms, budget_ms=budget_ms, force=force,
                   progress=progress)
    if result.interrupted or result.rank != 0:
        return MachineFit(len(cases), result)
    gpu = measured_gpu(result.environment, gpu=gpu, device=device)
    base = find(gpu)
    if base is None or base.borrowed_for:
        raise ShapewiseError(f"no profile of {gpu.name}'s own to refit for this machine: run `shapewise calibrate` "
                             f"(without --quick) for a whole one")
    factors = machine_factors(result.rows, gpu=gpu, params=base.params)
    off = [name for name, f in factors.items() if not LIMITS[0] <= f["factor"] <= LIMITS[1]]
    if off:
        raise ShapewiseError(f"this machine's {off[0]} times are {factors[off[0]]['factor']:.2f}x the profile's: not "
                             f"the same kind of GPU or software; run `shapewise calibrate` for a whole profile")
    machine = {"factors": factors,
               "environment": {k: v for k, v in result.environment.items() if isinstance(v, (str, int, float))}}
    profile = dataclasses.replace(base, params=with_factors(base.params, factors), fit={**base.fit, "machine": machine},
                                  path="")
    return MachineFit(len(cases), result, base, factors, profile)
