"""What calibration and validation measure: the designed set, the random draws beside it, and the
held-out set.

`calibration_cases` is a designed set: every alignment class in every layout, small and large dims,
tile and wave regimes, tall-skinny and decode-like GEMMs, batched GEMMs, fused attention over head
dims, lengths and numbers of sequences × heads, sliding windows, the memory-bound kernels of a layer
and an MoE layer's copies, and about 1800 random GEMMs and 900 batched GEMMs for the residual and
kernel tables. Beside it, from streams of their own: `--extended` (3600 random GEMMs and batched GEMMs
more, drawn as the held-out set draws its own), `--edges` (sides of 1 to 31 or over 16,384) and
`--batched` (batched GEMMs in every layout, decoding attention over head dims and groupings) and
`--large` (a transformer's GEMMs: large, aligned as models align, in the three passes' layouts) and
`--skinny` (a side of 1 to 64, the other two up to 65,536: decoding's rows and the kernels cuBLAS
runs for them) and `--streams` (a decoding step's weights streamed: 1 to 256 rows against weights of
4 MB to 4 GB, vocabularies included). DRAWS names them all.
`validation_cases` is drawn differently (another seed, explicit alignment classes, batched and
attention shapes, and whole layers of presets), so that a profile is never judged on what it was
fitted to.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .cases import Case, gemm_cases, op_case
from .ops import MEMORY, attention_op, model_ops
from .presets import get_model
from .shapes import DTYPE_BYTES, ModelShape, Workload, shape_record

LAYER_PRESETS = ("gpt2-medium", "gpt2-xl", "pythia-1b", "pythia-2.8b", "gpt3-2.7b", "gpt3-6.7b", "opt-1.3b",
                 "phi-2", "llama2-7b", "llama3-8b", "mistral-7b", "qwen2-7b", "gemma-7b", "falcon-7b")


def measured_preset(name: str) -> ModelShape:
    """A preset as calibration's draws have always measured it: every head dim rotated, no window, two norms
    a layer, none over the embeddings, no biases on q, k and v alone. (The presets of Pythia, GPT-NeoX-20B and
    Phi-2 rotate part of each head, BLOOM's none (and it normalizes its embeddings), Mistral 7B's slides a
    window, Falcon 7B's and Phi-2's share one norm and Qwen2-7B's biases its q, k and v, as their checkpoints
    do; the drawn cases keep the shapes, and so the keys, their stored measurements were taken at.)"""
    preset = get_model(name)
    shape = preset.replace(window=0, norms_per_layer=max(preset.norms_per_layer, 2), embed_norm=False,
                           qkv_bias=False)
    return shape if shape.learned_positions else shape.replace(rotary_fraction=1.0)


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


def calibration_cases(*, dtype: str = "bf16", quick: bool = False, seed: int = 1, **draws: int | None) -> list[Case]:
    """The designed set, and beside it the draws named in `draws` (DRAWS' names, each with its seed
    or None), e.g. calibration_cases(extended=2, skinny=1)."""
    rng = np.random.default_rng(seed)
    if quick:  # toy sizes, for a CPU smoke test
        return _unique(gemm_cases([32, 64], [64, 65], [32], layouts=("nn", "nt", "tn"), dtype=dtype)
                       + _random_gemms(rng, 6, low=16, high=128, max_flops=1e7, classes=False, dtype=dtype)
                       + [_attention(p, seqs=1, heads=4, seq=s, head_dim=64, dtype=dtype) for p in ("fwd", "bwd")
                          for s in (32, 64)]
                       + [op_case(op, dtype) for op in _layer_memory_ops(64)]
                       + drawn_beside(dtype=dtype, quick=True, **draws))
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
    cases += drawn_beside(dtype=dtype, **draws)
    return _unique(cases)


def drawn_beside(*, dtype: str = "bf16", quick: bool = False, **draws: int | None) -> list[Case]:
    """The random draws named in `draws` (`calibrate --extended SEED`, `--edges SEED`, … : DRAWS'
    names, each with its seed, or None for none) alone, without the designed set they are measured
    beside; with `quick`, their toy sizes."""
    unknown = sorted(set(draws) - set(DRAWS))
    if unknown:
        raise TypeError(f"no draw named {', '.join(unknown)} (the draws: {', '.join(DRAWS)})")
    return [c for name, draw in DRAWS.items() if draws.get(name) is not None
            for c in draw(draws[name], quick=quick, dtype=dtype)]


def _extended_cases(extended: int, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --extended SEED`'s draws: which kernel cuBLAS runs for a
    misaligned shape is learned from many shapes' choices."""
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


def _drawn_gemms(shapes, *, quick: bool, dtype: str) -> list[Case]:
    """GEMM and batched GEMM cases of drawn (m, n, k, batch, layout) shapes; with `quick`, their sides
    cut to toy sizes (1 to 61)."""
    cases = []
    for m, n, k, batch, layout in shapes:
        if quick:
            m, n, k = (1 + d % 61 for d in (m, n, k))
        cases += gemm_cases([m], [n], [k], batches=(batch,), layouts=(layout,), dtype=dtype)
    return cases


def _gemms_then_bmms(dims, rng, counts: tuple[int, int], *, quick: bool, dtype: str) -> list[Case]:
    """The cases of counts[0] GEMMs, then counts[1] batched GEMMs, drawn by dims(rng, count, batched=…,
    dtype=…) from one stream (with `quick`, 4 and 2 of toy sizes)."""
    counts = (4, 2) if quick else counts
    return [c for batched, count in zip((False, True), counts)
            for c in _drawn_gemms(dims(rng, count, batched=batched, dtype=dtype), quick=quick, dtype=dtype)]


def _edge_cases(edges: int, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --edges SEED`'s draws."""
    return _gemms_then_bmms(_edge_dims, np.random.default_rng([edges, EDGE_STREAM]), (EDGE_GEMMS, EDGE_BMMS),
                            quick=quick, dtype=dtype)


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


def _batched_cases(batched: int, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --batched SEED`'s draws."""
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


# `calibrate --large SEED`: the GEMMs of transformer layers and output heads as models shape them, from
# a stream of their own (LARGE_STREAM beside the seed): hidden sizes of 1024 to 16,384 in multiples of
# 64 to 512, heads of 64 to 256, grouped keys and values, FFN widths of 2.5 to 5.5 hidden sizes rounded
# as models round them, vocabularies, tensor-parallel shards, and tokens of 256 to 65,536, each matrix
# in one of its three passes' layouts (forward "nt", input gradient "nn", weight gradient "tn"). Every
# other draw is log-uniform over all three dims, so that few land where all three are large and
# aligned: real models' GEMMs, whose rate is 700-830 TFLOP/s on an H200, were predicted 3-5% slow
# (benchmarks/RESULTS.md) with about 120 such shapes among 11,000 fitted.
LARGE_GEMMS = 1500
LARGE_STREAM = 9151
LARGE_MAX_FLOPS = 4e12  # about 5 ms on an H200: longer calls are priced by the same rate
LARGE_HEAD_DIMS = (64, 80, 96, 128, 128, 128, 256)
LARGE_MATRICES = ("qkv", "out", "up", "gate_up", "down", "logits")
LARGE_VOCABS = (32000, 32768, 50257, 50304, 65024, 100352, 128256, 151936, 152064, 256000)


def _round_to(value: float, unit: int) -> int:
    return max(unit, int(round(value / unit)) * unit)


def _large_matrix(rng) -> tuple[int, int, bool]:
    """One matrix of a drawn transformer: (outputs, inputs, whether tensor parallelism splits its outputs)."""
    hidden = _round_to(float(_rng_dims(rng, 1024, 16384, 1)[0]), int(rng.choice([64, 128, 256, 512])))
    head_dim = int(rng.choice(LARGE_HEAD_DIMS))
    heads = max(1, hidden // head_dim)
    kv_heads = max(1, heads // int(rng.choice([1, 1, 2, 4, 8])))
    ffn = _round_to(hidden * rng.uniform(2.5, 5.5), int(rng.choice([64, 128, 256, 512])))
    vocab = int(rng.choice(LARGE_VOCABS))
    return {"qkv": ((heads + 2 * kv_heads) * head_dim, hidden, True), "out": (hidden, heads * head_dim, False),
            "up": (ffn, hidden, True), "gate_up": (2 * ffn, hidden, True), "down": (hidden, ffn, False),
            "logits": (vocab, hidden, True)}[str(rng.choice(LARGE_MATRICES))]


def _expert_matrix(rng, widths: tuple[int, int]) -> tuple[int, int, bool]:
    """An MoE expert's projection, up (its width as outputs, which tensor parallelism splits) or down."""
    hidden = _round_to(float(_rng_dims(rng, 1024, 8192, 1)[0]), 256)
    width = _round_to(float(_rng_dims(rng, *widths, 1)[0]), int(rng.choice([64, 128])))
    return (width, hidden, True) if rng.random() < 0.5 else (hidden, width, False)


def _split(rng, matrix: tuple[int, int, bool], degrees: tuple[int, ...]) -> tuple[int, int] | None:
    """(outputs, inputs) of one rank's shard of `matrix` over a degree drawn from `degrees`, or None
    where that degree does not divide the dim it splits."""
    outputs, inputs, column = matrix
    tp = int(rng.choice(degrees))
    if (outputs if column else inputs) % tp:
        return None
    return (outputs // tp, inputs) if column else (outputs, inputs // tp)


def _one_pass(rng, tokens: int, outputs: int, inputs: int, *, dtype: str) -> tuple[int, int, int, str] | None:
    """(m, n, k, layout) of one of a weight's three passes over `tokens` (forward "nt", input gradient
    "nn", weight gradient "tn"), or None past the large draws' FLOPs or bytes."""
    m, n, k, layout = [(tokens, outputs, inputs, "nt"), (tokens, inputs, outputs, "nn"),
                       (outputs, inputs, tokens, "tn")][int(rng.integers(3))]
    if 2.0 * m * n * k <= LARGE_MAX_FLOPS and (m * k + k * n + m * n) * DTYPE_BYTES[dtype] <= EDGE_MAX_BYTES:
        return m, n, k, layout
    return None


def _passes(rng, count: int, draw, *, dtype: str) -> list[tuple[int, int, int, str]]:
    """(m, n, k, layout) of `count` GEMMs, each one pass (_one_pass) of the (tokens, outputs, inputs)
    that draw(rng) gives; draw returns None, and a pass too large is left out, to draw again."""
    out: list[tuple[int, int, int, str]] = []
    while len(out) < count:
        drawn = draw(rng)
        dims = drawn and _one_pass(rng, *drawn, dtype=dtype)
        if dims:
            out.append(dims)
    return out


def _seeded_gemms(seed: int, stream: int, dims, count: int, *, quick: bool, dtype: str) -> list[Case]:
    """A draw's GEMM cases: dims(rng, count, dtype=…)'s shapes from the seed's stream beside `stream`
    (4 of them with `quick`)."""
    shapes = dims(np.random.default_rng([seed, stream]), 4 if quick else count, dtype=dtype)
    return _drawn_gemms(((m, n, k, 1, layout) for m, n, k, layout in shapes), quick=quick, dtype=dtype)


def _large_pass(rng) -> tuple[int, int, int] | None:
    """A transformer matrix on 1-8 GPUs and the tokens of a step (see LARGE_GEMMS)."""
    shard = _split(rng, _large_matrix(rng), (1, 1, 2, 4, 8))
    if shard is None:
        return None
    seq = int(_rng_dims(rng, 256, 16384, 1)[0])
    seq = _round_to(seq, int(rng.choice([256, 128, 64, 1], p=(0.5, 0.2, 0.2, 0.1))))
    tokens = int(rng.choice([1, 1, 2, 4, 8, 16])) * seq
    return (tokens, *shard) if tokens <= 65536 else None


def _large_dims(rng, count: int, *, dtype: str) -> list[tuple[int, int, int, str]]:
    """(m, n, k, layout) of `count` transformer GEMMs (see LARGE_GEMMS)."""
    return _passes(rng, count, _large_pass, dtype=dtype)


def _large_cases(large: int, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --large SEED`'s draws."""
    return _seeded_gemms(large, LARGE_STREAM, _large_dims, LARGE_GEMMS, quick=quick, dtype=dtype)


# `calibrate --skinny SEED`: GEMMs and batched GEMMs with one side of 1 to 64 (torch's m, the rows a
# decoding step feeds its weights, or n) and the other two of 64 to 65,536, from a stream of their own
# (SKINNY_STREAM beside the seed). cuBLAS runs a dozen kernel families there (nvjet, gemv, cuBLAS's
# few-row SIMT kernels, MAGMA's, CUTLASS's) and the time follows how many blocks stream the large
# matrix, not its bytes: the edges draws hold such shapes with their other sides small too, so the
# fresh wide sets' skinny GEMMs missed by 28-30% at p90 and real models' decoding GEMMs by up to 54%
# (benchmarks/RESULTS.md). The large sides are aligned as models align them (multiples of 64) or not
# (multiples of 8, even, odd).
SKINNY_GEMMS, SKINNY_BMMS = 1600, 400
SKINNY_STREAM = 7331
SKINNY_THIN, SKINNY_WIDE = (1, 64), (64, 65536)
SKINNY_MAX_BYTES = 1e9  # about 0.3 ms streamed on an H200
SKINNY_CLASSES = (64, 8, 2, 1)  # rounded to a multiple of 64, of 8 or of 2 (a quarter of those land on 8), or odd
SKINNY_CLASS_P = (0.4, 0.2, 0.2, 0.2)


def _skinny_side(rng, low: int, high: int) -> int:
    """One large side, rounded to the unit drawn by SKINNY_CLASS_P (1: made odd)."""
    d = int(_rng_dims(rng, low, high, 1)[0])
    unit = int(rng.choice(SKINNY_CLASSES, p=SKINNY_CLASS_P))
    if unit >= 8:
        return _round_to(d, unit)
    return max(2, d - d % 2) + (1 if unit == 1 else 0)


def _skinny_dims(rng, count: int, *, batched: bool, dtype: str) -> list[tuple[int, int, int, int, str]]:
    """(m, n, k, batch, layout) of `count` skinny shapes (see SKINNY_GEMMS)."""
    out: list[tuple[int, int, int, int, str]] = []
    while len(out) < count:
        thin = int(_rng_dims(rng, *SKINNY_THIN, 1)[0])
        high = 16384 if batched else SKINNY_WIDE[1]
        wide, k = _skinny_side(rng, SKINNY_WIDE[0], high), _skinny_side(rng, SKINNY_WIDE[0], high)
        m, n = (thin, wide) if rng.random() < 0.7 else (wide, thin)
        batch = int(_rng_dims(rng, 2, 512, 1)[0]) if batched else 1
        layout = str(rng.choice(["nn", "nt", "tn"]))
        if batch * (m * k + k * n + m * n) * DTYPE_BYTES[dtype] <= SKINNY_MAX_BYTES:
            out.append((m, n, k, batch, layout))
    return out


def _skinny_cases(skinny: int, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --skinny SEED`'s draws."""
    return _gemms_then_bmms(_skinny_dims, np.random.default_rng([skinny, SKINNY_STREAM]), (SKINNY_GEMMS, SKINNY_BMMS),
                            quick=quick, dtype=dtype)


# `calibrate --streams SEED`: a decoding step's weights streamed past a few rows, from a stream of its
# own (STREAMS_STREAM beside the seed): 1 to 256 rows (the sequences decoded at once) against weights
# of 1024 to 262,144 outputs (vocabularies) and 512 to 65,536 inputs, 4 MB to 4 GB, aligned as models
# align them (most), or not; forward ("nt", F.linear) or a weight held as inputs × outputs ("nn").
# Such a GEMM is bound by memory, and its rate climbs from 1.2-1.6 TB/s at 10-30 MB to 4.1-4.2 TB/s
# past a gigabyte on an H200: the other draws hold a few hundred (of 30,780 fitted), most under 1 GB
# and 65,536 outputs, and real models' decoding GEMMs were priced 6-12% slow at 10-30 MB and
# past 300 MB (benchmarks/RESULTS.md).
STREAMS_GEMMS = 1200
STREAMS_STREAM = 5417
STREAMS_ROWS, STREAMS_OUTPUTS, STREAMS_INPUTS = (1, 256), (1024, 262144), (512, 65536)
STREAMS_BYTES = (4e6, 4e9)
STREAMS_UNITS, STREAMS_UNIT_P = (128, 64, 8, 1), (0.5, 0.2, 0.15, 0.15)  # each weight side rounded to one (1: as drawn)


def _streams_dims(rng, count: int, *, dtype: str) -> list[tuple[int, int, int, int, str]]:
    """(m, n, k, batch, layout) of `count` weight streams (see STREAMS_GEMMS)."""
    out: list[tuple[int, int, int, int, str]] = []
    while len(out) < count:
        m = int(_rng_dims(rng, *STREAMS_ROWS, 1)[0])
        n, k = (_round_to(float(_rng_dims(rng, *bounds, 1)[0]), int(rng.choice(STREAMS_UNITS, p=STREAMS_UNIT_P)))
                for bounds in (STREAMS_OUTPUTS, STREAMS_INPUTS))
        layout = "nt" if rng.random() < 0.7 else "nn"
        if STREAMS_BYTES[0] <= (m * k + k * n + m * n) * DTYPE_BYTES[dtype] <= STREAMS_BYTES[1]:
            out.append((m, n, k, 1, layout))
    return out


def _streams_cases(streams: int, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --streams SEED`'s draws."""
    rng = np.random.default_rng([streams, STREAMS_STREAM])
    return _drawn_gemms(_streams_dims(rng, 4 if quick else STREAMS_GEMMS, dtype=dtype), quick=quick, dtype=dtype)


# `calibrate --heads SEED`: fused attention over few sequences × heads, as a tensor-parallel rank of a
# training run holds them (1 to 16 blocks of query rows a position, where the designed set starts at
# 16), forward and backward, causal, at sequence lengths of any value from 512 to 16,384, every head
# dim a model uses and query heads grouped 1 to 8 per key head; from a stream of its own (HEADS_STREAM
# beside the seed). The models sets' 87 backward calls under 8 sequences × heads came out 10-14% fast
# at the median (one 50%, seen data: benchmarks/few_blocks.py), where the profile knew no such call.
HEADS_STREAM = 3467
HEADS_CALLS = 120  # each measured forward and backward
HEADS_BLOCKS = 16  # sequences × query heads at most
HEADS_HEAD_DIMS = (64, 80, 96, 128, 160, 192, 256)
HEADS_GROUPS = (1, 1, 2, 4, 8)


def _heads_cases(heads_seed: int, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --heads SEED`'s draws."""
    rng = np.random.default_rng([heads_seed, HEADS_STREAM])
    cases: list[Case] = []
    while len(cases) < (4 if quick else 2 * HEADS_CALLS):
        seqs = int(rng.choice((1, 1, 1, 2, 4)))
        heads = int(rng.integers(1, HEADS_BLOCKS // seqs + 1))
        kv_heads = heads // int(next(g for g in rng.permutation(HEADS_GROUPS) if heads % g == 0))
        seq = 64 if quick else int(_rng_dims(rng, 512, 16384, 1)[0])
        d = int(rng.choice(HEADS_HEAD_DIMS))
        cases += [_attention(pass_, seqs=seqs, heads=heads, kv_heads=kv_heads, seq=seq, head_dim=d, dtype=dtype)
                  for pass_ in ("fwd", "bwd")]
    return cases


# `calibrate --rows SEED`: the memory-bound ops of one layer, forward and backward, on few rows (16 to
# 2048 tokens, as a rank's MoE experts or a short prefill hold them) over hidden sizes of 1024 to 8192,
# plain and gated MLPs, both norms; from a stream of its own (ROWS_STREAM beside the seed). The designed
# set times a layer's ops at 4096 and 16,384 tokens only: on the models sets the gated MLP's backward
# under 2 MB came out 44% fast at the median (19 calls, seen data: benchmarks/few_blocks.py), with no fixed
# time of its own fitted.
ROWS_STREAM = 2851
ROWS_LAYERS = 40  # layers drawn, each with all its memory-bound ops


def _rows_cases(rows_seed: int, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --rows SEED`'s draws."""
    rng = np.random.default_rng([rows_seed, ROWS_STREAM])
    cases: list[Case] = []
    for _ in range(2 if quick else ROWS_LAYERS):
        hidden = int(rng.choice((1024, 1536, 2048, 3072, 5120, 6144, 7168, 8192)))
        tokens = 16 if quick else int(_rng_dims(rng, 16, 2048, 1)[0])
        gated = bool(rng.random() < 0.6)
        ffn = _round_to(hidden * (8 / 3 if gated else 4) * float(rng.uniform(0.75, 1.25)), 128)
        shape = ModelShape(f"rows-{hidden}", hidden, 1, hidden // 128, 32000, ffn=ffn, mlp="swiglu" if gated else "gelu",
                           norm="rmsnorm" if gated else "layernorm", bias=not gated)
        cases += [op_case(op, dtype) for op in _memory_ops((shape,), tokens) if op.family not in ("embed", "loss")]
    return _unique(cases)


# `calibrate --shards SEED`: the small weights a decoding step streams past a few rows, as a
# tensor-parallel rank or an MoE expert holds them: 1 to 16 rows against weights of 128 KB to 64 MB
# at transformers' dims (_large_matrix's matrices split over 1 to 8 GPUs, and experts' up and down
# projections of 128 to 4096), forward ("nt", F.linear) or held as inputs × outputs ("nn"); from a
# stream of its own (SHARDS_STREAM beside the seed). The streams draw starts at 4 MB and draws its
# dims at random: on the models sets one-row GEMMs onto 960-2048 outputs came out 18-45% over the
# model (seen data, benchmarks/RESULTS.md), where the calibration held no such weight.
SHARDS_GEMMS = 800
SHARDS_STREAM = 7573
SHARDS_ROWS = (1, 1, 1, 2, 3, 4, 6, 8, 12, 16)
SHARDS_BYTES = (128e3, 64e6)
SHARDS_EXPERT_FFN = (128, 4096)


def _shards_dims(rng, count: int, *, dtype: str) -> list[tuple[int, int, int, str]]:
    """(m, n, k, layout) of `count` weight shards (see SHARDS_GEMMS)."""
    out: list[tuple[int, int, int, str]] = []
    while len(out) < count:
        if rng.random() < 0.3:  # an MoE expert's projection, whole
            outputs, inputs, _ = _expert_matrix(rng, SHARDS_EXPERT_FFN)
        else:
            shard = _split(rng, _large_matrix(rng), (1, 2, 4, 8, 8))
            if shard is None:
                continue
            outputs, inputs = shard
        m = int(rng.choice(SHARDS_ROWS))
        if SHARDS_BYTES[0] <= outputs * inputs * DTYPE_BYTES[dtype] <= SHARDS_BYTES[1]:
            out.append((m, outputs, inputs, "nt" if rng.random() < 0.7 else "nn"))
    return out


def _shards_cases(shards: int, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --shards SEED`'s draws."""
    return _unique(_seeded_gemms(shards, SHARDS_STREAM, _shards_dims, SHARDS_GEMMS, quick=quick, dtype=dtype))


# `calibrate --prefill SEED`: a prefill's or a training step's GEMMs as a tensor-parallel rank or an
# MoE expert runs them: _large_matrix's matrices split over 1 to 8 GPUs, or experts' projections
# (widths of 512 to 14,336 split over 1 to 8), at the token counts users bring: sequences of 256 to
# 8192 that are multiples of 8 but seldom of 64 (3000, 1000, 4100), a few odd, and the tokens an
# expert is routed (any count from 64 to 8192), each matrix in one of its three passes' layouts; from
# a stream of its own (PREFILL_STREAM beside the seed). The large draw rounds its sequences to 64 or
# more nine times in ten, so the models sets' prefills at TP 8 over 3000 tokens (3000 × 768-1792 ×
# 4096, 1.1-2.5 waves of 128×128 tiles) and an expert's 512 × 5376 × 6144 were priced 9-19%
# slow (benchmarks/RESULTS.md), with few fitted shapes near them.
PREFILL_GEMMS = 800
PREFILL_STREAM = 6607
PREFILL_SEQ = (256, 8192)
PREFILL_SEQ_UNITS, PREFILL_SEQ_P = (8, 1, 64), (0.7, 0.15, 0.15)
PREFILL_EXPERT_FFN = (512, 14336)


def _prefill_pass(rng) -> tuple[int, int, int] | None:
    """A layer's, the head's or an MoE expert's matrix on 1-8 GPUs and the tokens of a prefill (see
    PREFILL_GEMMS)."""
    expert = rng.random() < 0.3  # an MoE expert's projection, else a layer's or the head's
    shard = _split(rng, _expert_matrix(rng, PREFILL_EXPERT_FFN) if expert else _large_matrix(rng), (1, 2, 4, 8, 8))
    if shard is None:
        return None
    if expert:  # routing sends an expert any number of tokens
        return int(_rng_dims(rng, 64, 8192, 1)[0]), *shard
    seq = int(_rng_dims(rng, *PREFILL_SEQ, 1)[0])
    return int(rng.choice([1, 1, 1, 2, 4])) * _round_to(seq, int(rng.choice(PREFILL_SEQ_UNITS, p=PREFILL_SEQ_P))), *shard


def _prefill_dims(rng, count: int, *, dtype: str) -> list[tuple[int, int, int, str]]:
    """(m, n, k, layout) of `count` prefill GEMMs (see PREFILL_GEMMS)."""
    return _passes(rng, count, _prefill_pass, dtype=dtype)


def _prefill_cases(prefill: int, *, quick: bool, dtype: str) -> list[Case]:
    """`calibrate --prefill SEED`'s draws."""
    return _unique(_seeded_gemms(prefill, PREFILL_STREAM, _prefill_dims, PREFILL_GEMMS, quick=quick, dtype=dtype))


# The draws beside the designed set, by the name of calibrate's flag: each a function of its seed.
DRAWS = {"extended": _extended_cases, "edges": _edge_cases, "batched": _batched_cases, "large": _large_cases,
         "skinny": _skinny_cases, "streams": _streams_cases, "heads": _heads_cases, "rows": _rows_cases,
         "shards": _shards_cases, "prefill": _prefill_cases}


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
        # the variants named by their heads, as the full set's are: three cases named "tiny" could not be told apart
        return (_random_gemms(rng, 6, low=16, high=128, max_flops=1e7, classes=True, dtype=dtype)
                + [_attention("fwd", seqs=1, heads=4, seq=48, head_dim=64, dtype=dtype)]
                + [_layer_case(tiny, batch=1, seq=32, dtype=dtype, group="layer"),
                   _layer_case(tiny.replace(name="tiny-a8", num_heads=8, num_kv_heads=4, head_dim=None), batch=1,
                               seq=32, dtype=dtype, group="variants"),
                   _layer_case(tiny.replace(name="tiny-a4"), batch=1, seq=32, dtype=dtype, group="variants")])
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
        step = model_ops(measured_preset(name), Workload(batch=int(rng.integers(1, 33)), seq=2048, mode="decode"))
        cases += [op_case(op, dtype) for op in step if op.kind == MEMORY]
    cases += [_layer_case(measured_preset(name), batch=1, seq=2048, dtype=dtype, group="layer") for name in LAYER_PRESETS]
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
