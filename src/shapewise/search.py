"""Faster shapes of about the same size: the neighbourhood of a model (`suggest`), and design from a
parameter budget (`search`).

A step's time is L × (one layer's time) + (everything outside the layers), so each distinct layer
shape is predicted once and every layer count comes for free. Candidates are ranked by GPU time
per token (step time × t / tokens), which compares shapes across micro-batch and t too.

suggest keeps the shape apart from the run settings (micro-batch and t): shapes are ranked at the
user's settings; changed settings, alone and with the best shapes, form a table of their own, each
with its memory per GPU, unless `vary` lets them into the ranking. Nothing that does not fit in the
GPU's memory is proposed, and nothing predicted slower than the original; each speedup carries the
interval of the ops it changes (uncertainty.py), and where no shape is faster beyond it, suggest
says so and shows the nearest shapes apart.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from .cost import layers_priced, predict_layer_and_outside, predict_step
from .errors import ShapewiseError, argument, check_name, listed, warn
from .hardware import GPU
from .limits import ASPECT, ASPECT_BAND, PARAMS, PARAMS_TOL, TOP, VOCAB, flag
from .memory import GIB, assumption_text, capacity_bytes, estimate
from .profile import CostModel, cost_model
from .rules import ALIGN, GOOD_HEAD_DIMS, find, keep_rotary, price_caveats, round_up
from .shapes import ATTENTION_KINDS, MLP_KINDS, ModelShape, Workload, check_parallel
from .uncertainty import OpErrors, op_errors, speedup_interval

RUN_FIELDS = ("batch", "tp")  # how the model is run, not its shape
# search's vocabulary: one token leaves a model nothing to predict (its loss is 0 whatever it does), and
# padded to 64·t it would be priced as a vocabulary of 64 that no one asked for.
SEARCH_VOCAB = replace(VOCAB, low=2)
SEARCH_ATTENTION = ("mha", "gqa", "mqa")  # search's kv heads: as many as the heads, an eighth of them (gqa), or one
KEEPABLE = ("hidden", "layers", "heads", "kv_heads", "head_dim", "ffn", "vocab", *RUN_FIELDS)


@dataclass(frozen=True)
class Candidate:
    shape: ModelShape
    workload: Workload
    gpu_ms_per_token: float
    step_ms: float

    @property
    def params(self) -> int:
        return self.shape.params

    @cached_property
    def memory_bytes(self) -> int:
        """Per GPU, memory.estimate's (Adam in training, as memory.adam_text says): what suggest and search fit by."""
        return round(estimate(self.shape, self.workload).total_bytes)

    def fits(self, capacity_bytes: int) -> bool:
        return self.memory_bytes <= capacity_bytes


@dataclass(frozen=True)
class Suggestion:
    candidate: Candidate
    speedup: float  # original GPU time per token over this one's
    params_delta: float  # relative to the original
    changes: dict  # field -> (old, new)
    fixes: tuple[str, ...]  # rules of the original's findings that no longer fire
    interval: tuple[float, float]  # the speedup's 90% interval (uncertainty.speedup_interval)
    memory_bytes: int  # per GPU, memory.estimate's
    # Rules that still fire, each with its cost before and after as a share of the original's step (where it changed: BitNet's
    # head dim 100 → 112 leaves the padded-copy kernel, 11.7% → 1.5%, yet is no multiple of 64), and rules the
    # original did not break that this one does, with their shares: what "fixes" alone does not say.
    eased: tuple[tuple[str, float, float], ...] = ()
    adds: tuple[tuple[str, float], ...] = ()

    @property
    def fixes_text(self) -> str:
        """What the candidate fixes, eases, worsens and breaks, in the words of suggest's table."""
        out = list(self.fixes)
        out += [f"{rule} {before:.1%} → {after:.1%} of the original's step" for rule, before, after in self.eased]
        out += [f"adds {rule} ({share:.1%})" for rule, share in self.adds]
        return ", ".join(out)

    @property
    def within_error(self) -> bool:
        """The interval holds 1.0: the model cannot tell it from the original; measure it."""
        return self.interval[0] <= 1 <= self.interval[1]


@dataclass(frozen=True)
class Suggestions:
    original: Candidate
    findings: tuple  # the original's
    suggestions: tuple[Suggestion, ...]  # faster than the original, fastest first; empty when none is beyond error
    considered: int
    seconds: float
    model: CostModel  # the cost model that ranked them
    run_changes: tuple[Suggestion, ...]  # changed micro-batch or t, alone and with the best shape, that fit
    alternatives: tuple[Suggestion, ...]  # no faster shape: the nearest ones, when no shape is beyond error
    original_memory_bytes: int  # per GPU, memory.estimate's (Adam in training, as memory.adam_text says)
    gpu_memory_bytes: int
    errors: OpErrors  # the measured errors the intervals come from
    vary: tuple[str, ...]  # run settings ranked with the shapes
    caveats: tuple[str, ...] = ()  # what the original's price assumes that the model does not give, as check's
    params_tol: float = 0.02  # the tolerance the neighbourhood was drawn with, as its messages say it

    def to_json(self) -> dict:
        """What `suggest --json` prints of it (less the warnings said): plain data for json.dumps."""
        return suggestions_json(self)

    def __repr__(self) -> str:  # each suggestion is a whole shape: their changes say what a reader looks for
        def listed_changes(rows):
            return [change_text(s.changes) for s in rows]

        return (f"Suggestions(original={self.original.shape.name!r}, considered={self.considered}, "
                f"suggestions={listed_changes(self.suggestions)!r}, alternatives={listed_changes(self.alternatives)!r}, "
                f"run_changes={listed_changes(self.run_changes)!r}, model={self.model!r})")

    @property
    def original_fits(self) -> bool:
        return bool(self.original_memory_bytes <= self.gpu_memory_bytes)

    @property
    def no_faster_shape(self) -> bool:
        """No candidate is predicted faster than the original by more than the model's error."""
        return not self.suggestions


class _Evaluator:
    """Predicts candidates, one layer shape at a time."""

    def __init__(self, model: CostModel):
        # Shapes are compared as check prices them, each GEMM paying the power cap's onset of a call timed
        # alone; pricing them without it (CostModel.in_a_run) ranked the blind variants seed 12 worse
        # (benchmarks/RESULTS.md, "the variants seed 12").
        self.model = model
        self.cache: dict = {}

    def __call__(self, shape: ModelShape, workload: Workload) -> Candidate | None:
        # Shapes whose layers are alike share one block's price whatever their layer count.
        key = (layers_priced(shape)[0].replace(name="", source="", published_params=None), workload)
        if key not in self.cache:
            try:
                check_parallel(shape, workload)
                layer, outside = predict_layer_and_outside(shape, workload, gpu=self.model)
                self.cache[key] = layer, sum(c.total_ms for c in outside)
            except ShapewiseError:
                self.cache[key] = None
        if self.cache[key] is None:
            return None
        layer, rest = self.cache[key]
        step = float(shape.num_layers * layer + rest)
        return Candidate(shape, workload, step * workload.tp / workload.tokens, step)


def _near_multiples(x: int, spread: float) -> list[int]:
    """x itself, and the multiples of 64 … 512 nearest to it, within ±spread."""
    out = {x}
    for m in (64, 128, 256, 512):
        for v in (math.floor(x / m) * m, math.ceil(x / m) * m):
            if v > 0 and abs(v - x) <= spread * x:
                out.add(v)
    return sorted(out)


def _attention_options(base: ModelShape, hidden: int, keep: set) -> list[tuple[int, int | None, int | None]]:
    """(heads, kv heads, explicit head dim) for a hidden size: the original's, and head dims of 64,
    128 and 256 with the GQA ratio kept."""
    ratio = base.num_heads // base.kv_heads
    mqa = base.kv_heads == 1 and base.num_heads > 1
    options = []
    if "heads" in keep or "head_dim" in keep or "kv_heads" in keep:
        if base.head_dim is not None or hidden % base.num_heads == 0:
            options.append((base.num_heads, base.num_kv_heads, base.head_dim))
        return options
    if base.head_dim is not None or hidden % base.num_heads == 0:
        options.append((base.num_heads, base.num_kv_heads, base.head_dim))
    for d in GOOD_HEAD_DIMS:
        if hidden % d:
            continue
        heads = hidden // d
        if mqa:
            kv = 1
        elif heads % ratio:
            continue
        else:
            kv = heads // ratio
        options.append((heads, None if kv == heads else kv, None))
    return list(dict.fromkeys(options))


def neighbourhood(base: ModelShape, workload: Workload, *, keep: set, spread: float = 0.125):
    """Every (shape without its layer count, workload) near the original, with other micro-batches and
    smaller tensor-parallel degrees (less communication per token)."""
    t = workload.tp
    hiddens = [base.hidden] if "hidden" in keep else _near_multiples(base.hidden, spread)
    vocabs = [base.vocab] if "vocab" in keep else sorted({base.vocab, round_up(base.vocab, ALIGN * t),
                                                          round_up(base.vocab, 2 * ALIGN * t)})
    # Half and twice the micro-batch, and one sequence: where the original does not fit, the way out. A decode
    # step keeps its own (suggest says so of --vary batch).
    batches = [workload.batch] if "batch" in keep or workload.mode == "decode" else \
        sorted({1, max(1, workload.batch // 2), workload.batch, 2 * workload.batch})
    tps = [t] if "tp" in keep else [d for d in range(1, t + 1) if t % d == 0]
    width = base.mlp_width
    for hidden in hiddens:
        if "ffn" in keep:
            widths = [width]
        else:  # the width scaled with the hidden size, and its rounded neighbours
            scaled = round(width * hidden / base.hidden)
            widths = sorted(set(_near_multiples(scaled, 0.03)) | ({width} if hidden == base.hidden else set()))
        for heads, kv, head_dim in _attention_options(base, hidden, keep):
            for ffn in widths:
                # experts of a width of their own (DeepSeek's moe_intermediate_size), else the one MLP width
                # they follow (gpt-oss, Mixtral: intermediate_size), as the config can say it
                field = "expert_ffn" if base.is_moe and base.expert_ffn is not None else "ffn"
                for vocab in vocabs:
                    try:
                        shape = keep_rotary(base, base.replace(hidden=hidden, num_heads=heads, num_kv_heads=kv,
                                                               head_dim=head_dim, vocab=vocab, **{field: ffn}))
                    except ShapewiseError:
                        continue
                    if shape is None:  # a partial rotary width no config can say at this head dim
                        continue
                    for batch in batches:
                        for tp in tps:
                            yield shape, workload.replace(batch=batch, tp=tp)


def layer_period(shape: ModelShape) -> int:
    """The length of the pattern a model's layers repeat (gpt-oss: sliding, full), where its layer count
    holds the pattern whole; 1 where it has none or does not (Gemma-3-1B: 26 layers, a pattern of 6)."""
    every = shape.global_every if shape.window else 0
    return every if every > 1 and shape.num_layers % every == 0 else 1


def _layer_counts(shape: ModelShape, target_params: int, base_layers: int, keep: set, period: int = 1) -> list[int]:
    """The layer counts that bring shape nearest target_params: whole repeats of the layer pattern."""
    if "layers" in keep:
        return [base_layers]
    per_layer = shape.layer_params
    rest = shape.params - shape.num_layers * per_layer
    ideal = (target_params - rest) / per_layer / period
    return sorted({period * max(1, math.floor(ideal)), period * max(1, math.ceil(ideal))})


def change_text(changes: dict) -> str:
    """"heads 32→20, head dim 80→128": a suggestion's changes, as tables and figures print them."""
    names = {"kv_heads": "kv heads", "head_dim": "head dim"}
    return ", ".join(f"{names.get(k, k)} {a}→{b}" for k, (a, b) in changes.items())


def _changes(old: Candidate, new: Candidate) -> dict:
    a, b = old.shape, new.shape
    pairs = {"hidden": (a.hidden, b.hidden), "layers": (a.num_layers, b.num_layers), "heads": (a.num_heads, b.num_heads),
             "kv_heads": (a.kv_heads, b.kv_heads), "head_dim": (a.d_head, b.d_head),
             "ffn": (a.mlp_width, b.mlp_width),
             "vocab": (a.vocab, b.vocab), "batch": (old.workload.batch, new.workload.batch),
             "tp": (old.workload.tp, new.workload.tp)}
    if a.kv_heads == a.num_heads and b.kv_heads == b.num_heads:
        del pairs["kv_heads"]  # multi-head attention before and after: the heads say it all
    return {name: pair for name, pair in pairs.items() if pair[0] != pair[1]}


def field_names(text: tuple[str, ...], allowed: tuple[str, ...], name: str) -> set:
    """The fields `text` names, each one of `allowed`, or a ShapewiseError naming the argument as the caller
    wrote it: suggest's keyword (keep), the command's flag (--keep)."""
    if isinstance(text, str):  # keep="heads": a name, not its letters
        text = (text,)
    if not isinstance(text, (tuple, list, set, frozenset)) or not all(isinstance(t, str) for t in text):
        raise ShapewiseError(f"{name}: give field names (a tuple of them, () for none), got {text!r}")
    unknown = sorted(set(text) - set(allowed))
    if unknown:
        raise ShapewiseError(f"{name}: unknown field{'s' if len(unknown) > 1 else ''} {listed(unknown, 'and')}; "
                             f"the fields are {listed(allowed, 'and')}")
    return set(text)


def ranked_neighbours(shape: ModelShape, workload: Workload, *, model: CostModel, keep: set, params_tol: float,
                      aspect_band: float) -> tuple[Candidate, list[Candidate], int]:
    """The original and every other shape of its neighbourhood (parameters within params_tol, hidden/layers
    within aspect_band of the original's), fastest per token first; and how many of those there are."""
    evaluate = _Evaluator(model)
    original = evaluate(shape, workload)
    if original is None:  # the original itself cannot be priced (a GPU without the dtype): say why
        predict_step(shape, workload, gpu=model)
        raise ShapewiseError(f"{shape.name} cannot be priced at these settings")
    target = shape.params
    aspect = shape.hidden / shape.num_layers
    best: dict = {}
    period = layer_period(shape)
    for candidate_shape, w in neighbourhood(shape, workload, keep=keep):
        for layers in _layer_counts(candidate_shape, target, shape.num_layers, keep, period):
            s = candidate_shape.replace(num_layers=layers)
            if abs(s.params / target - 1) > params_tol:
                continue
            if not 1 / aspect_band <= (s.hidden / layers) / aspect <= aspect_band:
                continue
            c = evaluate(s, w)
            if c is None:
                continue
            key = (s.hidden, s.num_layers, s.num_heads, s.kv_heads, s.d_head, s.ffn_width, s.expert_width, s.vocab,
                   w.batch, w.tp)
            if key not in best or c.gpu_ms_per_token < best[key].gpu_ms_per_token:
                best[key] = c
    ranked = sorted((c for c in best.values() if _changes(original, c)), key=lambda c: c.gpu_ms_per_token)
    # considered: the other shapes priced, each once, as "N considered" reads (the original, and its neighbourhood's
    # copy of it, are not among them)
    return original, ranked, len(ranked)


def suggest(shape: ModelShape, workload: Workload, *, gpu: GPU | str | CostModel, params_tol: float = 0.02,
            keep: tuple[str, ...] = (), vary: tuple[str, ...] = (), aspect_band: float = 1.5,
            top: int = 5, require_fit: bool = True) -> Suggestions:
    """Shapes near `shape` with parameters within params_tol, ranked by predicted GPU time per token
    at the workload's micro-batch and t; changed micro-batches and t apart (run_changes) unless named
    in `vary`. gpu: a CostModel, or a GPU (or its name) whose default cost model is used. The defaults
    are suggest's flags' (params_tol 0.02, aspect_band 1.5, top 5): the two list the same shapes.
    require_fit=False ranks shape changes whether they fit on one GPU or not (plan spreads them)."""
    start = time.perf_counter()
    model = cost_model(gpu)
    keep, vary = field_names(keep, KEEPABLE, "keep"), field_names(vary, RUN_FIELDS, "vary")
    if keep & vary:
        raise ShapewiseError(f"{argument('keep')} and {argument('vary')} both name {', '.join(sorted(keep & vary))}: "
                             "name each in one")
    if "batch" in vary and workload.mode == "decode":  # neighbourhood keeps it: a server's concurrency, not a shape's
        batch = argument("batch")  # --batch on the command line; the workload's field in the library
        another = f"{batch} N" if batch.startswith("-") else f"Workload({batch}=N)"
        warn(f"{argument('vary')} batch has no effect in decode: its batch (the sequences served at once) is kept, as "
             f"a latency choice, not the shape's; price another batch with {another}")
    params_tol = PARAMS_TOL.keyword(params_tol, "params_tol")
    aspect_band = ASPECT_BAND.keyword(aspect_band, "aspect_band")
    top = TOP.keyword(top, "top")
    require_fit = flag(require_fit, "require_fit")
    check_parallel(shape, workload)
    original, ranked, _ = ranked_neighbours(shape, workload, model=model, keep=keep, params_tol=params_tol,
                                            aspect_band=aspect_band)
    # considered: the other shapes, as "N considered" and "of N shapes" read: the original at another micro-batch or t
    # is a run setting (the second table), not a shape, unless `vary` ranks it with the shapes
    considered = len({_shape_key(c, vary) for c in ranked} - {_shape_key(original, vary)})
    judge = _Judge(original, model)
    ranked_here = [c for c in ranked if _run_changes(original, c) <= vary]
    # A shape change at the user's settings must not push a fitting step out of memory; a changed run
    # setting must fit, whatever the original does (where it does not, the run table is the way out).
    fitting = [c for c in ranked_here if c.fits(judge.capacity) or
               not (require_fit and judge.original_fits or _run_changes(original, c))]
    faster = [judge(c) for c in fitting if c.gpu_ms_per_token < original.gpu_ms_per_token]
    beyond_error = any(not s.within_error for s in faster)
    suggestions = tuple(faster[:top]) if beyond_error else ()
    alternatives = () if beyond_error else tuple(judge(c) for c in fitting[:top])
    run_changes = _run_table(original, [c for c in ranked if not _run_changes(original, c) <= vary], judge, top)
    return Suggestions(original, judge.findings, suggestions, considered, time.perf_counter() - start, model,
                       run_changes, alternatives, judge.original_memory, judge.capacity, judge.errors,
                       tuple(f for f in RUN_FIELDS if f in vary), price_caveats(shape, workload, model.gpu), params_tol)


def training_memory_text(workload) -> str:
    """What memory.estimate assumes of a training step, as check says it: said wherever its figure is printed."""
    if workload.mode != "train":
        return ""
    return f" ({assumption_text(workload.dtype)})"


def tolerance_text(tol: float) -> str:
    """A relative tolerance as a percentage to the digit given: 0.02 as 2%, 0.001 as 0.1% (not "0%")."""
    return f"{tol * 100:.4g}%"


def widen_text() -> str:
    """What brings other shapes within reach: the search's three bounds, named as the caller gave them (suggest's and
    verify's flags, or suggest()'s keywords)."""
    return f"widen {argument('params_tol')} or {argument('aspect_band')}, or {argument('keep')} fewer fields"


def nothing_faster_text(result) -> str:
    """The one line said when no shape beats the original by more than the model's error; the nearest are
    listed below it where there are any."""
    then = ", or measure the nearest below" if result.alternatives else f" (no other shape is within reach: {widen_text()})"
    return (f"No shape within {tolerance_text(result.params_tol)} of the parameters is predicted faster than the original by "
            f"more than the model's error ({result.considered} considered): keep the shape{then}.")


def not_fitting_text(result, workload) -> str:
    """The one line said when the original does not fit in the GPU's memory."""
    what = training_memory_text(workload)
    return (f"The original does not fit: it needs {result.original_memory_bytes / GIB:,.1f} GiB per GPU at "
            f"b={workload.batch} t={workload.tp}{what}, the GPU has {result.gpu_memory_bytes / GIB:,.1f} GiB; "
            f"shapes are ranked at these settings all the same, and only settings that fit are proposed.")


def _row(i: int, s) -> dict:
    return {"rank": i, "changes": {k: list(v) for k, v in s.changes.items()}, "params": s.candidate.params,
            "params_delta": s.params_delta, "predicted_speedup": s.speedup, "interval": list(s.interval),
            "within_error": s.within_error, "fixes": list(s.fixes),
            "eased": [{"rule": r, "share_before": a, "share_after": b} for r, a, b in s.eased],
            "adds": [{"rule": r, "share": a} for r, a in s.adds], "batch": s.candidate.workload.batch,
            "tp": s.candidate.workload.tp, "memory_bytes": s.memory_bytes}


def suggestions_json(result: Suggestions) -> dict:
    """Suggestions.to_json: the three tables, the memory and the intervals' source."""
    errors = result.errors
    shape, workload = result.original.shape, result.original.workload
    return {"model": shape.name, "params": shape.params, "gpu": result.model.gpu.key, "cost_model": result.model.source,
            # what the original was priced at, as check --json and search --json say theirs
            "workload": workload.to_json(),
            "original_ms_per_token": result.original.gpu_ms_per_token,
            "original_memory_bytes": result.original_memory_bytes, "gpu_memory_bytes": result.gpu_memory_bytes,
            "original_fits": result.original_fits, "vary": list(result.vary),
            "findings": [f.rule for f in result.findings], "considered": result.considered,
            "no_faster_shape": result.no_faster_shape,
            "message": nothing_faster_text(result) if result.no_faster_shape else None,
            "memory_message": None if result.original_fits else not_fitting_text(result, workload),
            "uncertainty": {"interval": "90%", "source": errors.source, "q90_abs_log_error": errors.by_class},
            "suggestions": [_row(i, s) for i, s in enumerate(result.suggestions, 1)],
            "alternatives": [_row(i, s) for i, s in enumerate(result.alternatives, 1)],
            "run_changes": [_row(i, s) for i, s in enumerate(result.run_changes, 1)]}


def _shape_key(c: Candidate, vary: set) -> tuple:
    s = c.shape
    return (s.hidden, s.num_layers, s.num_heads, s.kv_heads, s.d_head, s.ffn_width, s.expert_width, s.vocab,
            *(getattr(c.workload, f) for f in sorted(vary)))


def _run_changes(original: Candidate, c: Candidate) -> set:
    return {f for f in RUN_FIELDS if getattr(original.workload, f) != getattr(c.workload, f)}


def _run_table(original: Candidate, ranked: list[Candidate], judge: _Judge, top: int) -> tuple[Suggestion, ...]:
    """Per changed run setting, the original shape with it and the fastest shape with it: the setting's
    own effect, and the shape's on top. A setting is shown where the original shape runs faster with
    it, or, when the original does not fit, where it fits; only what fits."""
    settings: dict = {}
    for c in ranked:  # fastest first: the first shape change of a setting is its best
        alone = not set(_changes(original, c)) - set(RUN_FIELDS)
        if c.fits(judge.capacity):
            settings.setdefault((c.workload.batch, c.workload.tp), {}).setdefault("alone" if alone else "shape", c)
    rows = []
    for pair in settings.values():
        alone = pair.get("alone")
        if judge.original_fits and (alone is None or alone.gpu_ms_per_token >= original.gpu_ms_per_token):
            continue
        rows += pair.values()
    return tuple(judge(c) for c in sorted(rows, key=lambda c: c.gpu_ms_per_token)[:top])


def _shares(findings, step, original_ms_per_token: float) -> dict[str, float]:
    """Each rule's cost as a share of the original's step, per token (a candidate's own step may be faster, or hold
    another batch: gpt2 at t=2 padding its vocab, tp's share of its own step rose 47% → 61% at the same cost), its
    findings summed (misaligned names one op a finding); notes that cost nothing (the window's) left out."""
    out: dict[str, float] = {}
    w = step.workload
    for f in findings:
        if f.cost_ms > 0:
            out[f.rule] = out.get(f.rule, 0.0) + f.cost_ms * w.tp / w.tokens / original_ms_per_token
    return out


class _Judge:
    """A candidate made a Suggestion: its speedup's interval, the findings it fixes, its memory."""

    def __init__(self, original: Candidate, model: CostModel):
        self.original, self.model = original, model
        self.step = predict_step(original.shape, original.workload, gpu=model)
        self.findings = tuple(find(self.step))
        self.errors = op_errors(model)
        self.capacity = capacity_bytes(model.gpu)
        self.original_memory = original.memory_bytes
        self.original_fits = original.fits(self.capacity)
        self.made: dict = {}

    def __call__(self, c: Candidate) -> Suggestion:
        if id(c) not in self.made:
            step = predict_step(c.shape, c.workload, gpu=self.model)
            speedup = self.original.gpu_ms_per_token / c.gpu_ms_per_token
            per_token = self.step.gpu_ms_per_token
            before, after = _shares(self.findings, self.step, per_token), _shares(find(step), step, per_token)
            # a change of a tenth of the share or less is the step's other ops moving (a larger batch), not the rule
            eased = tuple((rule, share, after[rule]) for rule, share in before.items()
                          if rule in after and abs(after[rule] - share) >= max(0.001, 0.1 * share))
            adds = tuple((rule, share) for rule, share in after.items() if rule not in before and share >= 0.001)
            self.made[id(c)] = Suggestion(c, float(speedup), c.params / self.original.params - 1,
                                          _changes(self.original, c), tuple(r for r in before if r not in after),
                                          speedup_interval(self.step, step, speedup, self.errors), c.memory_bytes,
                                          eased, adds)
        return self.made[id(c)]


# ---- design from a parameter budget ---------------------------------------------------------

@dataclass(frozen=True)
class SearchResult:
    screened: int  # shapes enumerated and checked against the budget and the aspect band
    predicted: int  # of which predicted
    seconds: float
    screen_rate: float  # shapes screened per second
    pareto: tuple[Candidate, ...]  # smallest first; no other shape has more params and more tokens/s
    top: tuple[Candidate, ...]
    model: CostModel  # the cost model that predicted them
    gpu_memory_bytes: int
    caveats: tuple[str, ...] = ()  # what every price assumes that the GPU does not run (rules.price_caveats)
    workload: Workload | None = None  # what every shape was priced at

    def to_json(self) -> dict:
        """What `search --json` prints of it (less the warnings said): plain data for json.dumps."""
        return {"screened": self.screened, "predicted": self.predicted, "seconds": self.seconds,
                "workload": self.workload.to_json(),
                "pareto": [self.row(c) for c in self.pareto], "top": [self.row(c) for c in self.top],
                "cost_model": self.model.source, "gpu_memory_bytes": self.gpu_memory_bytes}

    def __repr__(self) -> str:  # the shapes listed by name (row() gives each whole)
        return (f"SearchResult(screened={self.screened}, predicted={self.predicted}, "
                f"pareto={[c.shape.name for c in self.pareto]!r}, top={[c.shape.name for c in self.top]!r}, "
                f"model={self.model!r})")

    @property
    def memory_bytes(self) -> dict:
        """Per GPU, memory.estimate's, of each shape listed (pareto and top), by its name."""
        return {c.shape.name: c.memory_bytes for c in (*self.pareto, *self.top)}

    def fits(self, c: Candidate) -> bool:
        return c.fits(self.gpu_memory_bytes)

    def row(self, c: Candidate) -> dict:
        """A listed shape as search --json gives it: what ModelShape needs to build it again, norm, bias and
        tied embeddings too (search fixes them, and ModelShape's defaults differ), then its size, speed and
        memory."""
        s = c.shape
        return {"name": s.name, "params": c.params, "hidden": s.hidden, "layers": s.num_layers,
                "heads": s.num_heads, "kv_heads": s.kv_heads, "head_dim": s.d_head, "ffn": s.ffn_width,
                "vocab": s.vocab, "mlp": s.mlp, "norm": s.norm, "bias": s.bias,
                "tied_embeddings": s.tied_embeddings, "tokens_per_s_per_gpu": 1000 / c.gpu_ms_per_token,
                "memory_bytes": c.memory_bytes, "fits": self.fits(c)}


def search(*, params_target: float, gpu: GPU | str | CostModel, workload: Workload, vocab: int = 32000,
           mlp: str = "swiglu", attention: str = "gqa", params_tol: float = 0.05,
           aspect: tuple[float, float] = (32.0, 256.0), top: int = 10) -> SearchResult:
    """Shapes from scratch within params_tol of params_target: hidden (multiples of 256), head dim
    (64, 128), kv heads (per `attention`: mha, gqa with heads // 8 of them, at least 1, or mqa), FFN
    width (4h, or 8h/3 for gated MLPs, rounded to 256 and two neighbours), and the layer count that meets
    the budget. gpu: as suggest's."""
    model = cost_model(gpu)  # (reading a profile is not screening: it is done before the clock starts)
    start = time.perf_counter()
    # The flags' own checks, for the library's callers (the command line refuses these first).
    params_target = PARAMS.keyword(params_target, "params_target")
    vocab = SEARCH_VOCAB.keyword(vocab, "vocab")
    params_tol = PARAMS_TOL.keyword(params_tol, "params_tol")
    top = TOP.keyword(top, "top")
    if _length(aspect) != 2:  # a tuple, a list or numpy's array of two
        raise ShapewiseError(f"aspect must be two numbers, the lowest and highest hidden/layers, got {aspect!r}")
    aspect = tuple(ASPECT.keyword(a, "aspect") for a in aspect)
    if aspect[0] > aspect[1]:
        raise ShapewiseError(f"aspect: the lowest hidden/layers comes first, got {aspect[0]:g} > {aspect[1]:g}")
    if not isinstance(workload, Workload):
        raise ShapewiseError(f"the workload must be a shapewise.Workload, got {workload!r}")
    if workload.mode != "train":  # as the command, whose grid and budget design a model to be trained
        raise ShapewiseError(f"search designs a model for training: the workload's mode must be train, got "
                             f"{workload.mode} (suggest and check price {workload.mode} for a given model)")
    model.gpu.peak_tflops(workload.dtype)  # a GPU without the dtype is said as that, not as no shape priced
    if isinstance(attention, str) and attention in ATTENTION_KINDS:  # Workload's attention, not search's kv heads
        raise ShapewiseError(f"attention: search's attention is the kv heads' kind (mha, gqa or mqa; the command's "
                             f"--attention-kind); {attention} attention is the workload's: "
                             f"Workload(attention={attention!r})")
    check_name(attention, SEARCH_ATTENTION, "attention kind", owner="attention")
    check_name(mlp, MLP_KINDS, "MLP kind", owner="mlp")  # named as attention's is: the keyword, then the kinds
    gated = mlp in ("swiglu", "geglu")
    t = workload.tp
    vocab = round_up(vocab, ALIGN * t)
    # Screening, vectorized: every (hidden, head dim, FFN multiplier, layers) against the budget.
    hidden = np.arange(256, 32768 + 1, 256)
    head_dim = np.array([64, 128])
    ffn_mult = np.array([-256, 0, 256])
    layers = np.arange(1, 257)
    H, D, F, L = np.meshgrid(hidden, head_dim, ffn_mult, layers, indexing="ij")
    heads = H // D
    kv = {"mha": heads, "gqa": np.maximum(1, heads // 8), "mqa": np.ones_like(heads)}[attention]
    base_ffn = np.round((8 * H / 3 if gated else 4 * H) / 256) * 256
    ffn = (base_ffn + F).astype(np.int64)
    mats = 3 if gated else 2
    per_layer = H * (heads + 2 * kv) * D + heads * D * H + mats * H * ffn + 2 * H
    total = L * per_layer + 2 * vocab * H + H
    ratio = H / L
    ok = ((np.abs(total / params_target - 1) <= params_tol) & (ratio >= aspect[0]) & (ratio <= aspect[1])
          & (heads % kv == 0) & (heads % t == 0) & (ffn % t == 0) & ((kv % t == 0) | (t % kv == 0)) & (ffn > 0))
    screened = H.size
    screen_seconds = time.perf_counter() - start
    evaluate = _Evaluator(model)
    candidates = []
    for h, d, f, l_, a, k in zip(H[ok], D[ok], ffn[ok], L[ok], heads[ok], kv[ok]):
        shape = ModelShape(f"h{h}-L{l_}-a{a}-kv{k}-ffn{f}", hidden=int(h), num_layers=int(l_), num_heads=int(a),
                           num_kv_heads=None if k == a else int(k), ffn=int(f), mlp=mlp, vocab=int(vocab),
                           tied_embeddings=False, norm="rmsnorm", bias=False)
        c = evaluate(shape, workload)
        if c is not None:
            candidates.append(c)
    if not candidates:
        grid = (f"no shape of the grid (hidden {hidden[0]}-{hidden[-1]} in steps of 256, {layers[0]}-{layers[-1]} "
                f"layers, hidden/layers {aspect[0]:g}-{aspect[1]:g})")
        smallest = 2 * vocab * hidden[0]  # the embedding and output tables at the narrowest hidden
        if smallest > params_target * (1 + params_tol):
            raise ShapewiseError(f"{grid} fits {params_target:g} parameters: a vocabulary of {vocab:,} alone takes "
                                 f"{smallest:,.0f} at hidden {hidden[0]} (input and output tables); give a smaller "
                                 f"{argument('vocab')} or a larger {argument('params_target')}")
        budget = np.abs(total / params_target - 1) <= params_tol
        within = budget & (ratio >= aspect[0]) & (ratio <= aspect[1])
        tables = (f"; a vocabulary of {vocab:,} takes {smallest:,.0f} of them at hidden {hidden[0]}: give a smaller "
                  f"{argument('vocab')}" if smallest > params_target / 2 else "")
        in_band = total[(ratio >= aspect[0]) & (ratio <= aspect[1])]
        largest = float(in_band.max()) if in_band.size else math.inf  # no --params-tol reaches past it
        past = params_target * (1 - PARAMS_TOL.high) > largest
        budget_name, tol_name = argument("params_target"), argument("params_tol")
        advice = tables or (f": its largest has {largest:.3g} parameters; give a smaller {budget_name}" if past
                            else f": widen {tol_name} or change {budget_name}")
        if budget.any() and not within.any():
            raise ShapewiseError(f"{grid} is within {params_tol:g} of {params_target:g} parameters: those that are "
                                 f"have hidden/layers outside {aspect[0]:g}-{aspect[1]:g}{advice}")
        if t > 1 and within.any() and not ok.any():
            raise ShapewiseError(f"{grid} within {params_tol:g} of {params_target:g} parameters splits its heads, kv "
                                 f"heads and FFN width {t} ways ({argument('tp')} {t}): give a smaller "
                                 f"{argument('tp')}")
        raise ShapewiseError(f"{grid} is within {params_tol:g} of {params_target:g} parameters{advice}")
    # The front of parameters (more is a larger model) against speed: most parameters first, keep each
    # shape that is faster than every larger one.
    by_params = sorted(candidates, key=lambda c: (-c.params, c.gpu_ms_per_token))
    pareto, best = [], math.inf
    for c in by_params:
        if c.gpu_ms_per_token < best:
            pareto.append(c)
            best = c.gpu_ms_per_token
    pareto.reverse()
    top_shapes = sorted(candidates, key=lambda c: c.gpu_ms_per_token)[:top]
    return SearchResult(screened, len(candidates), time.perf_counter() - start,
                        screened / max(screen_seconds, 1e-9), tuple(pareto), tuple(top_shapes), model,
                        capacity_bytes(model.gpu), price_caveats(None, workload, model.gpu), workload)


def _length(value) -> int | None:
    """How many items a sequence holds (numpy's arrays among them: np.array([32, 256]) is two numbers), else None."""
    try:
        return len(value) if np.ndim(value) == 1 else None
    except (TypeError, ValueError):  # no length, or ragged
        return None


# What to use where Megatron-LM's flags fall short: plan has no --emit-config, so it is named by its command.
WRITE_CONFIG = "`shapewise suggest --emit-config`"


def check_megatron(shape: ModelShape) -> None:
    """Refuses a model Megatron-LM's flags cannot describe; commands call it before their search, not after."""
    if not shape.learned_positions and not shape.rotary_fraction:
        raise ShapewiseError(f"{shape.name} has neither rotary nor learned positions (ALiBi), and Megatron-LM's "
                             f"--position-embedding-type has no ALiBi: --emit megatron cannot describe it; write its "
                             f"config instead ({WRITE_CONFIG})")


def megatron_args(shape: ModelShape, workload: Workload) -> list[str]:
    """The Megatron-LM / GPT-NeoX arguments of a shape and workload, a flag and its value an item."""
    check_megatron(shape)
    if shape.kv_heads % workload.tp:  # Megatron-core splits the query groups over t ranks and asserts t divides them
        raise ShapewiseError(f"t={workload.tp} does not divide {shape.name}'s {shape.kv_heads} kv heads: Megatron-LM "
                             f"splits --num-query-groups over the tensor-parallel ranks and replicates none; use a t "
                             f"that divides {shape.kv_heads}, or write the config ({WRITE_CONFIG})")
    args = [f"--num-layers {shape.num_layers}", f"--hidden-size {shape.hidden}",
            f"--num-attention-heads {shape.num_heads}", f"--ffn-hidden-size {shape.ffn_width}",
            f"--seq-length {workload.seq}", f"--micro-batch-size {workload.batch}",
            f"--tensor-model-parallel-size {workload.tp}"]
    if workload.tp > 1:
        args.append("--sequence-parallel")
    if shape.kv_heads != shape.num_heads:
        args += ["--group-query-attention", f"--num-query-groups {shape.kv_heads}"]
    if shape.head_dim is not None and shape.head_dim * shape.num_heads != shape.hidden:
        args.append(f"--kv-channels {shape.head_dim}")
    # Megatron-LM's activations: GELU by default, --swiglu, and --quick-geglu (a GLU gated by x·σ(1.702x)); it has
    # no exact-GELU GLU and no plain ReLU, so a GEGLU model gets the nearest GLU and a ReLU one GELU, each said below.
    if shape.gated:
        args.append("--swiglu" if shape.mlp == "swiglu" else "--quick-geglu")
    if shape.norm == "rmsnorm":
        args.append("--normalization RMSNorm")
    if not shape.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    # --disable-bias-linear drops every linear's bias and --add-qkv-bias puts back q, k and v's: attention's biases
    # alone (PhiMoE) are these less the output projection's; the MLP's alone (GPT-J) keep them all, as the nearest.
    if not shape.bias or shape.bias_scope == "attention":
        args.append("--disable-bias-linear")
    if shape.qkv_bias or shape.bias_scope == "attention":
        args.append("--add-qkv-bias")
    args.append("--position-embedding-type " + ("learned_absolute" if shape.learned_positions else "rope"))
    if shape.learned_positions:
        args.append(f"--max-position-embeddings {shape.learned_positions}")
    elif shape.rotary_fraction < 1:
        args.append(f"--rotary-percent {shape.rotary_fraction:g}")
    # Megatron's --qk-layernorm is one norm of --normalization's kind, head_dim wide, shared by the heads (LayerNorm's
    # weight and bias, RMSNorm's weight); --qk-l2-norm has no weight
    if shape.qk_norm:
        args.append("--qk-l2-norm" if shape.qk_norm_weights == "none" else "--qk-layernorm")
    if shape.is_moe:
        args += [f"--num-experts {shape.num_experts}", f"--moe-router-topk {shape.top_k}",
                 f"--moe-ffn-hidden-size {shape.expert_width}"]
        if shape.num_shared_experts:
            args.append(f"--moe-shared-expert-intermediate-size {shape.num_shared_experts * shape.expert_width}")
        if shape.shared_expert_gate:  # Megatron-core's SharedExpertMLP: output × sigmoid(x · w), w hidden wide
            args.append("--moe-shared-expert-gate")
    # Megatron pads the vocabulary itself, to a multiple of this times t.
    multiple = math.gcd(shape.vocab, 1 << 20)
    args.append(f"--make-vocab-size-divisible-by {max(1, multiple // workload.tp)}")
    nope_qk = ", which skip the QK-norm" if shape.qk_norm and not shape.qk_norm_nope else ""
    left_out = [what for what, present in (
        ("multi-head latent attention (its ranks)", shape.is_mla),
        (f"which {shape.num_dense_layers} layers are dense, not MoE (--moe-layer-freq)", shape.num_dense_layers),
        ("sliding-window layers", shape.window),
        (f"layers without rotary embeddings (1 in {shape.nope_every}{nope_qk})", shape.mixed_rope),
        (f"parallel attention and MLP ({'one norm' if shape.norms_per_layer == 1 else 'a norm each'})",
         shape.parallel_attn),
        ("GEGLU (its exact GELU: --quick-geglu gates with x·σ(1.702x))", shape.mlp == "geglu"),
        ("ReLU MLP (Megatron-LM has GELU, not ReLU)", shape.mlp == "relu"),
        ("bias-free attention (--disable-bias-linear is all or nothing: the flags keep attention's biases)",
         shape.bias and shape.bias_scope == "mlp"),
        ("attention's output bias (--add-qkv-bias puts back q, k and v's alone)",
         shape.bias and shape.bias_scope == "attention"),
        ("QK-norm weights over the whole projection, not one head (--qk-layernorm)",
         shape.qk_norm and shape.qk_norm_weights == "projection"),
        ("QK-norm weights of each head its own, without a bias (--qk-layernorm shares one head's norm across heads)",
         shape.qk_norm and shape.qk_norm_weights == "per_head"),
        (f"a QK-norm {'without' if shape.norm == 'layernorm' else 'with'} a bias (--qk-layernorm's "
         f"{'LayerNorm has one' if shape.norm == 'layernorm' else 'RMSNorm has none'})",
         shape.qk_norm and shape.qk_norm_weights in ("head", "head_bias")
         and (shape.qk_norm_weights == "head_bias") != (shape.norm == "layernorm")),
        ("bias on the output head", shape.lm_head_bias),
        ("post-norms", shape.norms_per_layer == 4),
        ("the norm over the embeddings", shape.embed_norm),
        ("logits' soft-capping", shape.logit_softcap),
    ) if present]
    if left_out:  # priced, but not said by these flags: the user must add them, or the run differs
        warn(f"--emit megatron: the flags do not describe {shape.name}'s {listed(left_out, 'and')}, which the "
             f"prices count; add them by hand or write the config ({WRITE_CONFIG})")
    return args


def flags_text(flags: list[str]) -> str:
    """Flags as a command line to paste: one a line, each line continued."""
    return " \\\n  ".join(flags)

