"""Judges independent of the fit: sets `validate --set NAME` measures, drawn apart from calibration.

`validate`'s default set is drawn as calibration draws its own shapes, so it tells how well the
model interpolates the calibration's distribution, not how well it does on what a user brings.
These sets are built otherwise:

- `wide`: a generator of its own, wider than calibration's: m from 1 to 65,536 with any value
  (odd, even, multiples of 8 or of 64), n and k up to 65,536, every layout; skinny GEMMs, very large
  K, aligned shapes; batched GEMMs shaped like attention (b·heads × s × s over d, and × V) at
  sequence lengths that are not powers of two, and batched GEMMs with small K or small n.
- `attention`: fused attention forward and backward, MHA and GQA, head dims 64 to 256, lengths
  that are not powers of two.
- `models`: every GEMM, fused attention and memory-bound op of real model configs at several
  micro-batches, lengths, TP degrees and the three modes, judged per op and as whole steps.
- `variants`: real models' suggest neighbourhoods, measured interleaved as verify measures, their
  predicted against their measured speedups (variants.py: not cases of the store, groups of shapes).

Each set's draws come from a random stream of its own (the seed beside the set's stream number,
which neither calibration nor the default set draws from), and no case of the designed
calibration set is ever judged.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .calibrate import Judged, judge
from .cases import Case, gemm_cases, op_case
from .draws import calibration_cases, drawn_beside, validation_cases
from .errors import ShapewiseError, warn
from .ops import COMM, FLASH, MEMORY, attention_op, model_ops
from .shapes import DTYPE_BYTES, ModelShape, Workload, check_parallel

SETS = ("default", "wide", "attention", "models", "variants")
# Each set's own random stream, beside the seed (draws.EXTENDED_STREAM is 4099).
STREAMS = {"wide": 5003, "attention": 5009, "models": 5011, "variants": 5021}

# One case measured stays well under ~50 ms on an H200: a GEMM's work and memory are bounded
# (2 TFLOP is 2.6 ms aligned, ~17 ms with odd dims; 4 GB is ~1 ms of traffic).
MAX_FLOPS, MAX_BYTES = 2e12, 4e9
WIDE_DIMS = (1, 65536)
HEAD_DIMS = (32, 48, 64, 80, 96, 112, 128, 160, 192, 256)
ATTENTION_HEAD_DIMS = (64, 80, 96, 112, 128, 160, 192, 256)


@dataclass(frozen=True)
class Step:
    """One step of a real model whose ops the models set measures one by one: the step's time is the
    sum over its ops of count × measured time per call (collectives left out: one GPU)."""

    name: str
    mode: str
    ops: tuple  # (case key, count) of every op of the step


@dataclass(frozen=True)
class JudgeSet:
    """A named set's cases, each case's group (its regime), and for `models` the steps they make up."""

    name: str
    cases: list[Case]
    groups: dict = field(default_factory=dict)  # case key -> regime
    steps: tuple = ()
    fitted: frozenset = frozenset()  # keys of cases measured for a step but fitted on: not judged alone


# ---- drawing -----------------------------------------------------------------------------------

def _log_uniform(rng: np.random.Generator, low: float, high: float) -> int:
    return round(float(2 ** rng.uniform(np.log2(low), np.log2(high))))


def _aligned(rng: np.random.Generator, d: int) -> int:
    """d moved into an alignment class drawn uniformly: as drawn, odd, even (not a multiple of 8),
    a multiple of 8, a multiple of 64."""
    cls = rng.integers(5)
    if cls == 1:
        return d | 1
    if cls == 2:
        return max(2, d - d % 8 + 2 * int(rng.integers(1, 4)))
    if cls == 3:
        return max(8, d - d % 8)
    if cls == 4:
        return max(64, d - d % 64)
    return d


def _fits(m: int, n: int, k: int, batch: int = 1) -> bool:
    return 2.0 * m * n * k * batch <= MAX_FLOPS and (m * k + k * n + m * n) * batch * 2 <= MAX_BYTES


def _not_pow2(rng, low: int, high: int) -> int:
    while True:
        s = _log_uniform(rng, low, high)
        if s & (s - 1):
            return s


def _wide_gemm(rng, regime: str) -> tuple[int, int, int, int]:
    """(m, n, k, batch) of one unbatched GEMM of a regime."""
    lo, hi = WIDE_DIMS
    if regime == "skinny":  # decode-like and skinny: one side of 1 to 64 rows
        m, n, k = _log_uniform(rng, 1, 64), _aligned(rng, _log_uniform(rng, 64, hi)), _aligned(rng, _log_uniform(rng, 64, hi))
        if rng.integers(2):
            m, n = n, m
    elif regime == "large-k":  # a small output over a long reduction: split-K territory
        m, n = (_aligned(rng, _log_uniform(rng, 16, 2048)) for _ in range(2))
        k = _aligned(rng, _log_uniform(rng, 8192, hi))
    elif regime == "aligned":  # every dim a multiple of 64: the tail of the fast kernels
        m, n, k = (64 * max(1, _log_uniform(rng, 256, hi) // 64) for _ in range(3))
    else:
        m, n, k = (_aligned(rng, _log_uniform(rng, lo, hi)) for _ in range(3))
    return m, n, k, 1


def _wide_bmm(rng, regime: str) -> tuple[int, int, int, int, str]:
    """(m, n, k, batch, layout) of one batched GEMM of a regime."""
    if regime in ("attention score", "attention ×V", "attention grad"):
        bh, s, d = _log_uniform(rng, 4, 512), _not_pow2(rng, 96, 8192), int(rng.choice(HEAD_DIMS))
        if regime == "attention score":  # Q·Kᵀ (and dO·Vᵀ): s × s over d
            return s, s, d, bh, "nt"
        if regime == "attention ×V":  # P·V (and dS·K): s × d over s
            return s, d, s, bh, "nn"
        return s, d, s, bh, "tn"  # Pᵀ·dO and dSᵀ·Q
    if regime == "small-k":
        return (_aligned(rng, _log_uniform(rng, 16, 16384)), _aligned(rng, _log_uniform(rng, 16, 16384)),
                _log_uniform(rng, 1, 64), _log_uniform(rng, 2, 4096), str(rng.choice(["nn", "nt", "tn"])))
    if regime == "small-n":
        return (_aligned(rng, _log_uniform(rng, 16, 16384)), _log_uniform(rng, 1, 64),
                _aligned(rng, _log_uniform(rng, 16, 16384)), _log_uniform(rng, 2, 4096), str(rng.choice(["nn", "nt", "tn"])))
    m, n, k = (_aligned(rng, _log_uniform(rng, 1, 16384)) for _ in range(3))
    return m, n, k, _log_uniform(rng, 2, 1024), str(rng.choice(["nn", "nt", "tn"]))


WIDE_GEMMS = {"any": 250, "skinny": 100, "large-k": 75, "aligned": 75}
WIDE_BMMS = {"attention score": 50, "attention ×V": 40, "attention grad": 35, "small-k": 40, "small-n": 35,
             "random": 50}


def wide_set(*, seed: int, dtype: str = "bf16", quick: bool = False) -> JudgeSet:
    """About 500 GEMMs and 250 batched GEMMs (a handful of toy ones with `quick`)."""
    rng = np.random.default_rng([seed, STREAMS["wide"]])
    drawn: list[tuple[Case, str]] = []
    scale = 0.02 if quick else 1.0
    for regime, count in WIDE_GEMMS.items():
        made = 0
        while made < max(1, round(count * scale)):
            m, n, k, _ = _wide_gemm(rng, regime)
            if quick:
                m, n, k = (1 + d % 97 for d in (m, n, k))
            if _fits(m, n, k):
                layout = str(rng.choice(["nn", "nt", "tn"]))
                drawn += [(c, f"gemm {regime}") for c in gemm_cases([m], [n], [k], layouts=(layout,), dtype=dtype)]
                made += 1
    for regime, count in WIDE_BMMS.items():
        made = 0
        while made < max(1, round(count * scale)):
            m, n, k, b, layout = _wide_bmm(rng, regime)
            if quick:
                m, n, k, b = 1 + m % 61, 1 + n % 61, 1 + k % 61, 2
            if b > 1 and _fits(m, n, k, b):
                drawn += [(c, f"bmm {regime}") for c in gemm_cases([m], [n], [k], batches=(b,), layouts=(layout,),
                                                                    dtype=dtype)]
                made += 1
    return _held_out("wide", drawn, dtype=dtype)


# The random draws beside the designed set that the shipped H200 profile was fitted on (its fit's
# "refitted_from": calibrate --extended 1, 2, 3, --edges 1 to 4, --batched 1, 2, 3, --large 1, 2,
# --skinny 1, 2, 3, --streams 1, 2, --heads 1, 2 and --rows 1, 2): never judged either.
FITTED_DRAWS = {"extended": (1, 2, 3), "edges": (1, 2, 3, 4), "batched": (1, 2, 3), "large": (1, 2),
                "skinny": (1, 2, 3), "streams": (1, 2), "heads": (1, 2), "rows": (1, 2)}


@functools.lru_cache(maxsize=4)
def fitted_keys(dtype: str) -> frozenset:
    """The keys of every case a shipped profile was fitted on: the designed set and FITTED_DRAWS."""
    keys = {c.key for c in calibration_cases(dtype=dtype)}
    for kind, seeds in FITTED_DRAWS.items():
        for seed in seeds:
            keys |= {c.key for c in drawn_beside(dtype=dtype, **{kind: seed})}
    return frozenset(keys)


def _held_out(name: str, drawn: list[tuple[Case, str]], *, dtype: str, steps: tuple = ()) -> JudgeSet:
    """The drawn cases without repeats and, where no step needs them, without any case a shipped
    profile was fitted on (a real model's step can run a calibration shape: measured for the step,
    never judged alone)."""
    designed = fitted_keys(dtype)
    needed = {key for step in steps for key, _ in step.ops}
    groups: dict[str, str] = {}
    cases = []
    for case, group in drawn:
        if case.key not in groups and (case.key not in designed or case.key in needed):
            groups[case.key] = group
            cases.append(case)
    return JudgeSet(name, cases, groups, steps, frozenset(designed & set(groups)))


def attention_set(*, seed: int, dtype: str = "bf16", quick: bool = False) -> JudgeSet:
    """Causal fused attention, forward and backward: MHA and GQA, head dims 64 to 256."""
    rng = np.random.default_rng([seed, STREAMS["attention"]])
    drawn = []
    while len(drawn) < (4 if quick else 160):
        heads = int(rng.choice([8, 12, 16, 20, 24, 32, 40, 48, 64]))
        groups = int(rng.choice([g for g in (1, 1, 2, 4, 8) if heads % g == 0]))
        d = int(rng.choice(ATTENTION_HEAD_DIMS))
        s = _not_pow2(rng, 32, 96) if quick else _not_pow2(rng, 256, 16384)
        seqs = 1 if quick else _log_uniform(rng, 1, 16)
        if quick:
            heads, groups, d = 4, int(rng.choice([1, 2])), 64
        # The backward is 2.5× the forward's work: keep it within ~20 ms.
        if 2.0 * seqs * heads * s * s * d > 4e12:
            continue
        for pass_ in ("fwd", "bwd"):
            op = attention_op(pass_, seqs=seqs, heads=heads, kv_heads=heads // groups, q_len=s, kv_len=s,
                              head_dim=d, causal=True, dtype_bytes=DTYPE_BYTES[dtype])
            drawn.append((op_case(op, dtype), f"{'MHA' if groups == 1 else 'GQA'} {pass_} d{d}"))
    return _held_out("attention", drawn, dtype=dtype)


# ---- real models -------------------------------------------------------------------------------

TRAIN = ((1, 2048), (2, 2048), (4, 2048), (1, 4096), (2, 4096), (1, 8192))  # (micro-batch, seq)
PREFILL = ((1, 2048), (4, 2048), (1, 8192), (8, 1024), (2, 4096), (1, 3000))
DECODE = ((1, 4096), (8, 2048), (32, 4096), (64, 1024), (16, 16384), (128, 2048), (4, 32768))
TP = (1, 2, 4, 8)
MAX_CACHE_BYTES = 8e9  # one decoding attention call's K and V: what one op measured may hold


def read_configs(paths) -> list[ModelShape]:
    """Model shapes from config.json files or folders of them (searched recursively), by the
    library's config reader; sorted by name, repeats dropped."""
    from .hf import NotATransformer, load_config

    files: list[tuple[Path, bool]] = []  # (file, found in a folder)
    for path in paths or ():
        p = Path(path)
        if p.is_dir():
            files += [(f, True) for f in sorted(p.rglob("*.json"))]
        elif p.is_file():
            files.append((p, False))
        else:
            raise ShapewiseError(f"{p}: no such file or folder; give config.json files or folders of them")
    shapes, skipped, unread = {}, [], []
    for file, in_folder in files:
        try:
            shape = load_config(file)
        except NotATransformer:
            if not in_folder:
                raise
            skipped.append(file.name)  # a folder of real configs may hold models shapewise refuses
            continue
        except ShapewiseError:
            if not in_folder:
                raise
            unread.append(file.name)  # refused for a key it does not read (Gemma 4, Hunyuan): said by name
            continue
        shapes.setdefault(shape.name, shape)
    if skipped:
        warn(f"left out {len(skipped)} configs that are not attention transformers: {', '.join(skipped)}")
    if unread:
        warn(f"left out {len(unread)} configs shapewise cannot read (`shapewise check --config FILE` says why): "
             f"{', '.join(unread)}")
    if not shapes:
        raise ShapewiseError("the models and variants sets need real model configs: --configs FILE_OR_FOLDER "
                             "(config.json files)")
    return [shapes[name] for name in sorted(shapes)]


def _workloads(shape: ModelShape, rng, *, quick: bool) -> list[Workload]:
    """One training, one prefill and one decoding step of a model, each at a micro-batch, length and
    TP degree drawn from real ones (a TP degree the model can split)."""
    if quick:
        return [Workload(batch=1, seq=16, mode=mode) for mode in ("train", "prefill", "decode")]
    out = []
    for mode, grid in (("train", TRAIN), ("prefill", PREFILL), ("decode", DECODE)):
        for _ in range(20):
            batch, seq = grid[int(rng.integers(len(grid)))]
            w = Workload(batch=batch, seq=seq, mode=mode, tp=int(rng.choice(TP)))
            try:
                check_parallel(shape, w)
            except ShapewiseError:
                continue
            cache = 4 * batch * math.ceil(shape.kv_heads / w.tp) * seq * shape.d_head
            if mode != "decode" or cache <= MAX_CACHE_BYTES:
                out.append(w)
                break
    return out


def _kind(case: Case) -> str:
    """A case's kind as the sets report it: gemm, bmm, attention fwd/bwd/decode or memory."""
    p = case.params
    kind = p.get("kind", case.bench)
    if kind == FLASH:
        return "attention decode" if p["m"] == 1 else f"attention {p['pass_']}"
    return kind


def _op_group(op) -> str:
    return f"memory {op.family}" if op.kind == MEMORY else f"{op.kind} {op.name}"


def models_set(shapes: list[ModelShape], *, seed: int, dtype: str = "bf16", quick: bool = False) -> JudgeSet:
    """Every op of three steps (train, prefill, decode) of each model, and the steps themselves."""
    rng = np.random.default_rng([seed, STREAMS["models"]])
    if quick:  # the smallest model's kinds (MLP, norm, grouping) at toy widths: a CPU smoke test
        small = min(shapes, key=lambda s: s.params)
        shapes = [small.replace(name=f"{small.name} (toy)", hidden=64, num_heads=4, head_dim=None, vocab=256,
                                num_kv_heads=None if small.kv_heads == small.num_heads else 2, ffn=128,
                                expert_ffn=None)]
    drawn, steps = [], []
    for shape in shapes:
        for w in _workloads(shape, rng, quick=quick):
            w = w.replace(dtype=dtype)
            ops = [op for op in model_ops(shape, w) if op.kind != COMM]
            cases = [op_case(op, dtype) for op in ops]
            drawn += [(c, _op_group(op)) for c, op in zip(cases, ops)]
            name = f"{shape.name} {w.mode} b{w.batch} s{w.seq} tp{w.tp}"
            steps.append(Step(name, w.mode, tuple((c.key, op.count) for c, op in zip(cases, ops))))
    return _held_out("models", drawn, dtype=dtype, steps=tuple(steps))


def judge_set_cases(name: str, *, seed: int, dtype: str = "bf16", quick: bool = False, configs=None) -> JudgeSet:
    """The named set drawn with `seed` (validate's default set: `validation_cases`)."""
    if name == "default":
        return JudgeSet("default", validation_cases(dtype=dtype, quick=quick, seed=seed))
    if name == "wide":
        return wide_set(seed=seed, dtype=dtype, quick=quick)
    if name == "attention":
        return attention_set(seed=seed, dtype=dtype, quick=quick)
    if name == "models":
        return models_set(read_configs(configs), seed=seed, dtype=dtype, quick=quick)
    if name == "variants":
        raise ShapewiseError("the variants set is no set of stored cases but models measured one by one: "
                             "run `shapewise validate --set variants` (variants.draw and variants.measure)")
    raise ShapewiseError(f"unknown validation set {name!r}; use one of {', '.join(SETS)}")


# ---- judging -----------------------------------------------------------------------------------

def judge_sets(judge_set: JudgeSet, rows: list[tuple[Case, dict]], *, gpu, profile=None) -> list[Judged]:
    """Each measured case against the models (gpu and profile: as calibrate.judge takes them), by its set's
    groups: every case in its kind's group (gemm, bmm, attention fwd/bwd/decode, memory) and again in its
    regime's; for `models`, each step whose ops were all measured, as the sum of count × time per call."""
    if judge_set.name == "default":
        return judge(rows, gpu=gpu, profile=profile)
    ok = [(c, r) for c, r in rows if r.get("error") is None]
    judged = judge(ok, gpu=gpu, profile=profile)
    out, by_key = [], {}
    for (case, _), j in zip(ok, judged):
        j = dataclasses.replace(j, category=_kind(case))
        by_key[case.key] = j
        if case.key in judge_set.fitted:
            continue
        out.append(j)
        group = judge_set.groups.get(case.key)
        if group and group != j.category:
            out.append(dataclasses.replace(j, category=group))
    for step in judge_set.steps:
        if all(key in by_key for key, _ in step.ops):
            parts = [(by_key[key], count) for key, count in step.ops]
            out.append(Judged(f"step {step.mode}", step.name, sum(j.measured_ms * c for j, c in parts),
                              {model: sum(j.predicted_ms[model] * c for j, c in parts) for model in parts[0][0].predicted_ms}))
    return out


def time_weighted(judged: list[Judged], model: str = "calibrated") -> dict:
    """Per category: the error of all its cases' total time, each case weighted by its time."""
    out = {}
    for category in dict.fromkeys(j.category for j in judged):
        items = [j for j in judged if j.category == category]
        measured = sum(j.measured_ms for j in items)
        out[category] = sum(abs(j.predicted_ms[model] - j.measured_ms) for j in items) / measured
    return out
