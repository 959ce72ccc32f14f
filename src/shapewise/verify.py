"""Proof on the GPU: the original shape and its alternatives measured interleaved, their measured
speedup per token with a confidence interval, beside the predicted one.

What is timed for each shape: where every shape's whole model fits in memory at once, a whole
training step's forward+backward (embedding, every layer, final norm, output head and loss);
otherwise one transformer layer forward+backward (the layer builders of shapewise.layers) and the
output head forward+backward (logit GEMM, cross-entropy, and the two backward GEMMs), the step then
estimated as layers × layer + head. Either way speedups are per token, so that shapes with other
layer counts or micro-batches compare fairly. Shapes whose layer is the same (they differ in layer
count or vocabulary only) time one layer, and shapes with the same hidden size and vocabulary one
head: the same op timed twice would only add noise. Every part of every shape runs once per round,
so clock drift hits all alike, in an order that changes from round to round (measure.round_orders)
and with the GPU settled after each, so that no part always runs right after the one that heats the
GPU most; the speedup of each round is computed from that round's medians, and its median and
bootstrap interval over rounds are reported (no interval under MIN_INTERVAL_ROUNDS rounds).
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace

from .cost import predict_layer_and_outside, predict_step
from .dtypes import torch_dtype
from .errors import ShapewiseError, argument, warn
from .hardware import GPU
from .limits import BUDGET_MS, ROUNDS, SEED, WARMUP_MS, flag
from .measure import device_text, free_memory, needs_text
from .profile import CostModel, cost_model
from .shapes import ModelShape, Workload, check_parallel
from .uncertainty import op_errors, speedup_interval

# The head's ops that layer mode times (_head_fn: the logit GEMM and the loss), of ops.HEAD_OPS, which
# holds every once-a-step op past the layers (the final norm, a soft-cap, tensor-parallel gathers too).
TIMED_HEAD_OPS = ("logits", "loss")
VERIFY_SEED = replace(SEED, low=0)  # 0 by default: the seed of the weights and inputs each shape is built with
MIN_INTERVAL_ROUNDS = 3  # a bootstrap over fewer rounds gives an interval of no width, not a 95% one


@dataclass(frozen=True)
class Verification:
    mode: str  # "model": whole steps measured; "layer": layers × layer + head
    label: str
    shape: ModelShape
    workload: Workload
    predicted_speedup: float
    measured_speedup: float
    ci_low: float  # the measured speedup's bootstrap interval; NaN, none, under MIN_INTERVAL_ROUNDS rounds
    ci_high: float
    layer_ms: float  # measured medians of one layer and of the head in "layer" mode; NaN in "model" mode
    head_ms: float
    predicted_interval: tuple[float, float] = (math.nan, math.nan)  # 90%, from the ops it changes (uncertainty.py)
    error: str = ""  # why it was not measured (keep_going); its measured fields are then NaN
    # The step, as the mode times it (a whole step, or layers × layer + head), measured (medians) and
    # predicted, of this shape and of the original it is measured against.
    measured_step_ms: float = math.nan
    predicted_step_ms: float = math.nan
    original_measured_step_ms: float = math.nan
    original_predicted_step_ms: float = math.nan
    # Where: the GPU whose cost model predicted (its key, "h200"), and the device that measured (its name, or
    # "CPU"): a plot of the run is drawn for the one and says the other.
    predicted_for: str = ""
    measured_on: str = ""

    def to_json(self, what: str, changes: dict | None, *, original: Workload) -> dict:
        """One candidate of verify --json: what the search said of it and its changes beside the speedups.
        The step times are the step as the mode timed it (a whole step, or layers × layer + head), the
        original's beside the candidate's; a layer run adds its two medians. Files written before these
        fields gave "layer_ms" alone, the whole step's in "model" mode. batch, seq and dtype are the original's,
        the run's (a candidate that changes the batch says so in its changes); gpu is the GPU predicted for and
        measured_on the device timed; older files lack them."""
        parts = {"layer_ms": self.layer_ms, "head_ms": self.head_ms} if self.mode == "layer" else {}
        return {"candidate": self.label, "what": what, "changes": changes, "mode": self.mode,
                "batch": original.batch, "seq": original.seq, "dtype": original.dtype,
                "gpu": self.predicted_for or None, "measured_on": self.measured_on or None,
                "predicted_speedup": self.predicted_speedup, "predicted_interval": list(self.predicted_interval),
                "measured_speedup": self.measured_speedup, "ci": [self.ci_low, self.ci_high],
                "predicted_step_ms": self.predicted_step_ms, "measured_step_ms": self.measured_step_ms,
                "original_predicted_step_ms": self.original_predicted_step_ms,
                "original_measured_step_ms": self.original_measured_step_ms, **parts, "error": self.error or None}


def predicted_step_ms(shape: ModelShape, workload: Workload, *, gpu: GPU | str | CostModel) -> float:
    """The cost model's layers × layer + head, the same parts verify measures."""
    layer, outside = predict_layer_and_outside(shape, workload, gpu=gpu, one_block=True)
    return shape.num_layers * layer + sum(c.total_ms for c in outside if c.op.name in TIMED_HEAD_OPS)


def _layer_fn(shape: ModelShape, workload: Workload, device: str, seed: int):
    """One transformer layer forward+backward."""
    from .layers import build_layer, fwd_bwd_call, layer_inputs

    layer = build_layer(shape, device=device, dtype=workload.dtype, attention=workload.attention, seed=seed)
    x = layer_inputs(shape, batch=workload.batch, seq=workload.seq, device=device, dtype=workload.dtype,
                     requires_grad=True, seed=seed)
    return fwd_bwd_call(layer, x)


def _head_fn(shape: ModelShape, workload: Workload, device: str, seed: int):
    """The output head forward+backward: logit GEMM, cross-entropy and the two backward GEMMs."""
    import torch
    import torch.nn.functional as F

    # Drawn on the device: a large vocabulary's weight (256,000 × 3,072) takes seconds on a CPU.
    generator = torch.Generator(device=device).manual_seed(seed)
    dtype = torch_dtype(workload.dtype)
    tokens = workload.batch * workload.seq
    hidden = torch.randn(tokens, shape.hidden, generator=generator, device=device).to(dtype).requires_grad_(True)
    weight = (torch.randn(shape.vocab, shape.hidden, generator=generator, device=device) * shape.hidden ** -0.5)
    weight = weight.to(dtype).requires_grad_(True)
    target = torch.randint(0, shape.vocab, (tokens,), generator=generator, device=device)

    def head_fn():
        hidden.grad = weight.grad = None
        F.cross_entropy(F.linear(hidden, weight), target).backward()

    return head_fn


def part_names(shape: ModelShape, workload: Workload) -> tuple[str, str]:
    """The names of a shape's layer and head as layer mode times them: equal for shapes that share one."""
    layer = shape.one_layer().replace(name="", source="", published_params=None, vocab=1)
    return f"layer {layer} {workload}", f"head {shape.hidden}×{shape.vocab} {workload}"


def _part_names(fns: dict, shape: ModelShape, workload: Workload, *, whole: bool, device: str,
                seed: int) -> tuple[str, ...]:
    """The names in `fns` of what times one shape, each built unless an earlier shape's is the same:
    ("model",) for a whole step, else (layer, head)."""
    if whole:
        wanted = {f"model {len(fns)}": lambda: _model_fn(shape, workload, device, seed)}
    else:
        layer, head = part_names(shape, workload)
        wanted = {layer: lambda: _layer_fn(shape, workload, device, seed),
                  head: lambda: _head_fn(shape, workload, device, seed)}
    built = {name: make() for name, make in wanted.items() if name not in fns}  # all or none, on an error
    fns.update(built)
    return tuple(wanted)


def model_block(shape: ModelShape, index: int) -> ModelShape:
    """Layer `index` (from 0) of a whole model as verify builds it: the block of shape.one_layer(), rotating
    nothing where it is a NoPE layer (every nope_every-th: SmolLM3's and Llama 4's, EXAONE 4's global layers)
    and attending within the window where it is a sliding-window one (all but every global_every-th: Gemma-2's
    and Gemma-3's local layers, EXAONE 4's), as the step it is measured against prices it."""
    block = shape.one_layer()  # a global block where windows alternate with global layers
    nope = shape.nope_every and (index + 1) % shape.nope_every == 0
    windowed = shape.window and not (shape.global_every and (index + 1) % shape.global_every == 0)
    if windowed:
        block = block.replace(global_every=0)  # its one layer slides
    return block.replace(nope_every=1) if nope else block


def _model_fn(shape: ModelShape, workload: Workload, device: str, seed: int):
    """A whole training step's forward+backward: embedding (and learned positions), every layer, final norm, head
    and loss."""
    import torch
    import torch.nn.functional as F

    from .layers import build_layer, make_norm

    dtype = torch_dtype(workload.dtype)
    layers = [build_layer(model_block(shape, i), device=device, dtype=workload.dtype,
                          attention=workload.attention, seed=seed + i) for i in range(shape.num_layers)]
    generator = torch.Generator(device="cpu").manual_seed(seed)
    table = (torch.randn(shape.vocab, shape.hidden, generator=generator) * 0.02).to(device, dtype).requires_grad_(True)
    head = table if shape.tied_embeddings else \
        (torch.randn(shape.vocab, shape.hidden, generator=generator) * shape.hidden ** -0.5).to(device, dtype).requires_grad_(True)
    # GPT-2's and OPT's learned positions: a table of learned_positions rows, added to the token embeddings. OPT's
    # rows hold its offset of 2 (it reads rows 2 … s+1); reading rows 0 … s-1 is the same gather from the same
    # table. A sequence past the table (priced as asked, with a warning: rules.py) reads its rows again.
    positions = (torch.randn(shape.learned_positions, shape.hidden, generator=generator) * 0.01).to(device, dtype) \
        .requires_grad_(True) if shape.learned_positions else None
    position_ids = torch.arange(workload.seq, device=device) % max(shape.learned_positions, 1)
    norm = make_norm(shape, device=device, dtype=dtype)  # the layers' own norm, weight (and bias)
    embed_norm = make_norm(shape, device=device, dtype=dtype) if shape.embed_norm else None  # BLOOM's
    bias = torch.zeros(shape.vocab, device=device, dtype=dtype, requires_grad=True) if shape.lm_head_bias else None
    ids = torch.randint(0, shape.vocab, (workload.batch, workload.seq), generator=generator).to(device)
    target = torch.randint(0, shape.vocab, (workload.batch * workload.seq,), generator=generator).to(device)
    norms = [p for n in (norm, embed_norm) if n is not None for p in n.parameters()]
    tables = [table] if head is table else [table, head]  # a tied head is the embedding table, counted once
    weights = [*tables, *norms, *(p for layer in layers for p in layer.parameters())]
    if positions is not None:
        weights.append(positions)
    if bias is not None:  # Phi's output head adds one
        weights.append(bias)

    def step():
        for w in weights:
            w.grad = None
        x = F.embedding(ids, table)
        if positions is not None:
            x = x + F.embedding(position_ids, positions)
        if embed_norm is not None:
            x = embed_norm(x)
        for layer in layers:
            x = layer(x)
        x = norm(x)
        F.cross_entropy(F.linear(x, head, bias).view(-1, shape.vocab), target).backward()

    step.weights, step.layers = weights, layers  # for tests: every weight has a gradient after a step
    return step


@functools.lru_cache(maxsize=256)  # asked of each shape by the fit check, the refusal and its message
def _need_bytes(shape: ModelShape, workload: Workload, *, whole: bool) -> float:
    """About the bytes one shape's parts take while timed, as memory.estimate counts a forward+backward
    without an optimizer (weights, grads, activations, and the logits' buffers of a loss in the model's
    own dtype): the whole model's, or one layer's with the output head's."""
    from .memory import estimate, training_precision

    one = shape if whole else shape.one_layer()
    # An fp32 model's weights and gradients are 4 bytes, and its loss keeps fp32 logits, log-softmax and
    # gradient (the torch framework's 12 bytes a logit); a 16-bit one's 2, and 6 bytes a logit.
    wide = training_precision(workload.dtype) == "fp32"
    return estimate(one, workload, precision="no-optimizer-fp32" if wide else "no-optimizer",
                    framework="torch" if wide else "torch-bf16-loss").allocated_bytes


def _whole_models_fit(shapes, memory: int | None, headroom: float = 0.6) -> bool:
    """Every shape's whole model at once (_need_bytes) within `memory` bytes, with headroom."""
    total = sum(_need_bytes(shape, w, whole=True) for _, shape, w in shapes)
    if memory is None:  # no sysconf (Windows): the models a test builds
        return total <= 2e9
    return total <= memory * headroom


def _no_fit_text(shape: ModelShape, workload: Workload, *, whole: bool, device: str, memory: int | None,
                 ran_out: bool) -> str:
    """Why `shape` cannot be verified on `device`: its parts need more than its memory, or ran out of it
    whatever the estimate said, with the sizes and what to do instead."""
    what = "a whole training step" if whole else "one layer and the output head"
    need = needs_text(_need_bytes(shape, workload, whole=whole), memory, about=True)
    sizes = f"{what} (weights, gradients and activations) {need}"
    layer_fits = memory is None or _need_bytes(shape, workload, whole=False) <= memory
    measure = argument("mode", flag="--measure")
    instead = (f"time one layer and the head instead: {measure} layer" if whole and layer_fits
               else f"verify it on a GPU with more memory, or at a smaller {argument('batch')} and "
                    f"{argument('seq')}")
    return (f"{shape.name} does not fit the memory of {device_text(device)}: "
            + (f"it ran out of memory; {sizes}" if ran_out else sizes) + f"; {instead}")


def _say_layer_mode(shape: ModelShape) -> None:
    """Layer mode times one block (ModelShape.one_layer: a global, rotary one) for every layer, as its prediction
    prices them: where a model's layers are not alike, say in one line that its steps are not the model's."""
    L = shape.num_layers
    windowed = L - shape.num_global_layers if shape.global_every > 1 else 0
    counts = ((f"attend within a {shape.window:,}-token window", windowed),
              ("have no rotary embedding", L // shape.nope_every if shape.nope_every > 1 else 0))
    unlike = [f"{count} of them {what}" for what, count in counts if count]
    if unlike:
        warn(f"{shape.name}: layer mode times one global rotary layer for each of its {L} layers, and prices it so, "
             f"where {' and '.join(unlike)}; `{argument('mode', flag='--measure')} model` times whole steps as the "
             "model runs them")


def _checked_shapes(original, candidates, mode: str) -> list[tuple[str, ModelShape, Workload]]:
    """verify's shapes, ("original", shape, workload) first, each a training step of one GPU; or a
    ShapewiseError saying what is wrong with the arguments, before anything is built."""
    if mode not in ("auto", "model", "layer"):
        raise ShapewiseError(f"unknown verify mode {mode!r}: use auto, model or layer")
    if not isinstance(original, (tuple, list)) or len(original) != 2:
        raise ShapewiseError(f"the original must be a (ModelShape, Workload) pair, got {original!r:.200}")
    if isinstance(candidates, (str, dict)) or not isinstance(candidates, Iterable):
        raise ShapewiseError(f"candidates must be a list of (label, ModelShape, Workload) triples, got {candidates!r:.200}")
    candidates = list(candidates)  # a generator is read once: checked here, then measured (it was measured empty)
    if not candidates:
        raise ShapewiseError("nothing to verify: give at least one (label, ModelShape, Workload) candidate")
    for candidate in candidates:
        if not isinstance(candidate, (tuple, list)) or len(candidate) != 3 or not isinstance(candidate[0], str):
            raise ShapewiseError(f"a candidate must be a (label, ModelShape, Workload) triple, got {candidate!r:.200}")
    shapes = [("original", *original), *candidates]
    for _, shape, workload in shapes:
        check_parallel(shape, workload)
        if workload.tp != 1:
            tp = argument("tp")
            raise ShapewiseError(f"verify measures one GPU's training step, without tensor parallelism: give {tp} 1 "
                                 f"(got {tp} {workload.tp})")
        if workload.mode != "train":
            raise ShapewiseError(f"verify measures training steps, not {workload.mode}")
    return shapes


def verify(original: tuple[ModelShape, Workload], candidates: list[tuple[str, ModelShape, Workload]], *,
           gpu: GPU | str | CostModel, device: str = "cuda", rounds: int = 15, budget_ms: float = 300,
           warmup_ms: float = 25, seed: int = 0, mode: str = "auto", keep_going: bool = False,
           on_round=None) -> list[Verification]:
    """Measure the original and every candidate interleaved; one Verification per candidate.

    gpu: the cost model of the predicted speedups (a GPU name: its default, profile.cost_model);
    mode "model" measures whole steps, "layer" layers × layer + head, "auto" whole steps where
    they all fit in memory at once. An original that does not fit the device's memory is refused
    with the sizes, before anything is allocated where the estimate (_need_bytes) says so.
    keep_going: a candidate that cannot be built or run (out of memory among the reasons) is
    reported with its error (the others are measured) instead of stopping everything. on_round:
    called after each interleaved round with the rounds done (a progress bar)."""
    from .bench import _error_text, out_of_memory
    from .measure import (
        bootstrap_median_ci,
        check_device,
        device_memory_bytes,
        environment,
        import_torch,
        interleave,
        warn_measured_elsewhere,
    )

    # The arguments before anything is built: a bad count or mode was found only after every shape had run once.
    rounds, budget_ms, warmup_ms = ROUNDS.keyword(rounds, "rounds"), BUDGET_MS.keyword(budget_ms, "budget_ms"), \
        WARMUP_MS.keyword(warmup_ms, "warmup_ms")
    keep_going = flag(keep_going, "keep_going")
    seed = VERIFY_SEED.keyword(seed, "seed")  # None or 1.5 failed inside torch, after the first shape was built
    if on_round is not None and not callable(on_round):
        raise ShapewiseError(f"on_round must be a function of the rounds done, or None, got {on_round!r:.100}")
    shapes = _checked_shapes(original, candidates, mode)
    model = cost_model(gpu)  # an unknown GPU was refused once every shape had been measured
    import_torch()  # a clear error before any work when torch is missing
    check_device(device)
    memory = device_memory_bytes(device)
    whole = mode == "model" or (mode == "auto" and _whole_models_fit(shapes, memory))
    if not whole:
        _say_layer_mode(shapes[0][1])
    fns, parts, failed = {}, [], {}

    def fail(i: int, exc: BaseException | None) -> None:
        """Shape i does not fit (exc None: by the estimate) or failed to build or run: the original, or any
        shape without keep_going, stops everything in one line; a candidate is recorded with its reason."""
        _, shape, workload = shapes[i]
        too_big = exc is None or out_of_memory(exc)
        if i == 0 or not keep_going:
            if not too_big:
                raise exc
            raise ShapewiseError(_no_fit_text(shape, workload, whole=whole, device=device, memory=memory,
                                              ran_out=exc is not None)) from None
        sizes = needs_text(_need_bytes(shape, workload, whole=whole), memory, about=True)
        failed[i] = (f"does not fit: it {sizes}" if exc is None else
                     f"out of memory beside the shapes timed with it (it {sizes})") if too_big else _error_text(exc)
        parts[i] = ()

    for i, (_, shape, workload) in enumerate(shapes):
        parts.append(())
        if memory is not None and _need_bytes(shape, workload, whole=whole) > memory:
            fail(i, None)  # refused before anything is allocated
            continue
        try:
            parts[i] = _part_names(fns, shape, workload, whole=whole, device=device, seed=seed)
        except (ShapewiseError, RuntimeError, MemoryError) as e:  # RuntimeError: torch's, out of memory among them
            free_memory(device)
            fail(i, e)
    # Each part run once before timing: its gradients and activations are allocated only when it runs, and
    # one that runs out of memory then fails the shapes it times alone, not the interleaved run of them all.
    for name in list(fns):
        try:
            fns[name]()
        except (RuntimeError, MemoryError) as e:
            del fns[name]
            free_memory(device)
            for i in [i for i, names in enumerate(parts) if name in names]:
                fail(i, e)
    fns = {name: fn for name, fn in fns.items() if any(name in names for names in parts)}  # a failed shape's others
    try:
        result = interleave(fns, device=device, rounds=rounds, budget_ms=budget_ms, warmup_ms=warmup_ms,
                            on_round=on_round)
    except (RuntimeError, MemoryError) as e:
        if not out_of_memory(e):
            raise
        raise ShapewiseError(f"the {len(fns)} parts of the {len(shapes)} shapes ran out of the memory of "
                             f"{device_text(device)} when timed together: verify fewer at once "
                             f"({argument('candidates', flag='--suggestion N')})"
                             + (f", or {argument('mode', flag='--measure')} layer" if whole else "")) from None
    # Round by round, each shape's step per token in units of the first part's round median.
    per_token = []
    for (_, shape, workload), names in zip(shapes, parts):
        if not names:
            per_token.append([])
        elif whole:
            per_token.append([r / workload.tokens for r in result[names[0]].round_ratios])
        else:
            layer, head = result[names[0]].round_ratios, result[names[1]].round_ratios
            per_token.append([(shape.num_layers * a + b) / workload.tokens for a, b in zip(layer, head)])
    # The predicted speedups are the model's GPU's (h200 unless named): said where the measured ones are not.
    env = environment(device)
    warn_measured_elsewhere(env, model.gpu, what="these measured speedups")
    # A whole model's predicted time is its step's; a layer run's, its layers and head (predicted_step_ms).
    timed = (lambda s, w, step: step.time_ms) if whole else (lambda s, w, step: predicted_step_ms(s, w, gpu=model))

    def measured_ms(i: int) -> float:
        """Shape i's step from its parts' medians, as it was timed: whole, or layers × layer + head."""
        times = [result[name].timing.median_ms for name in parts[i]]
        return times[0] if whole else shapes[i][1].num_layers * times[0] + times[1]

    errors, base_step = op_errors(model), predict_step(*original, gpu=model)
    base_ms = timed(*original, base_step)
    originals = {"original_measured_step_ms": measured_ms(0), "original_predicted_step_ms": base_ms,
                 "predicted_for": model.gpu.key, "measured_on": env.get("gpu_name") or "CPU"}
    kind = "model" if whole else "layer"
    rng = random.Random(seed)
    out = []
    for i, (label, shape, workload) in enumerate(shapes[1:], start=1):
        step = predict_step(shape, workload, gpu=model)
        step_ms = timed(shape, workload, step)
        predicted = (base_ms / original[1].tokens) / (step_ms / workload.tokens)
        interval = speedup_interval(base_step, step, predicted, errors)
        if i in failed:
            out.append(Verification(kind, label, shape, workload, predicted, *[math.nan] * 5, interval, failed[i],
                                    predicted_step_ms=step_ms, **originals))
            continue
        speedups = [o / c for o, c in zip(per_token[0], per_token[i])]
        lo, hi = bootstrap_median_ci(speedups, rng=rng) if len(speedups) >= MIN_INTERVAL_ROUNDS else (math.nan,) * 2
        layer_ms, head_ms = (math.nan, math.nan) if whole else (result[name].timing.median_ms for name in parts[i])
        out.append(Verification(kind, label, shape, workload, predicted, statistics.median(speedups), lo, hi,
                                layer_ms, head_ms, interval, measured_step_ms=measured_ms(i),
                                predicted_step_ms=step_ms, **originals))
    return out
