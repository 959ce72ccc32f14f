"""Proof on the GPU: the original shape and its alternatives measured interleaved, their measured
speedup per token with a confidence interval, beside the predicted one.

What is timed for each shape: one transformer layer forward+backward (the layer builders of
shapewise.layers) and the output head forward+backward (logit GEMM, cross-entropy, and the two
backward GEMMs). A step is estimated as layers × layer + head, per token, so that shapes with other
layer counts or micro-batches compare fairly. Every part of every shape runs in one interleaved
sequence (A B C … A B C …), so clock drift hits all alike; the speedup of each round is computed from
that round's medians, and its median and bootstrap interval over rounds are reported.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

from .cost import SPEC, CostParams, predict_step
from .errors import ShapewiseError
from .hardware import GPU
from .shapes import ModelShape, Workload, check_parallel

HEAD_OPS = ("logits", "loss")
LAYER_OUTSIDE = ("embed", "final/norm", "logits", "loss")


@dataclass(frozen=True)
class Verification:
    label: str
    shape: ModelShape
    workload: Workload
    predicted_speedup: float
    measured_speedup: float
    ci_low: float
    ci_high: float
    layer_ms: float  # measured medians
    head_ms: float


def predicted_step_ms(shape: ModelShape, workload: Workload, *, gpu: GPU, params: CostParams) -> float:
    """The cost model's layers × layer + head, the same parts verify measures."""
    step = predict_step(shape.replace(num_layers=1), workload, gpu=gpu, params=params)
    layer = sum(c.total_ms for c in step.costs if c.op.name not in LAYER_OUTSIDE)
    head = sum(c.total_ms for c in step.costs if c.op.name in HEAD_OPS)
    return shape.num_layers * layer + head


def _parts(shape: ModelShape, workload: Workload, device: str, seed: int):
    """Callables for one layer forward+backward and for the output head forward+backward."""
    import torch
    import torch.nn.functional as F

    from .layers import build_layer, fwd_bwd_call, layer_inputs

    layer = build_layer(shape, device=device, dtype=workload.dtype, attention=workload.attention, seed=seed)
    x = layer_inputs(shape, batch=workload.batch, seq=workload.seq, device=device, dtype=workload.dtype,
                     requires_grad=True, seed=seed)
    layer_fn = fwd_bwd_call(layer, x)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(workload.dtype, torch.float32)
    tokens = workload.batch * workload.seq
    hidden = torch.randn(tokens, shape.hidden, generator=generator).to(device, dtype).requires_grad_(True)
    weight = (torch.randn(shape.vocab, shape.hidden, generator=generator) * shape.hidden ** -0.5).to(device, dtype)
    weight.requires_grad_(True)
    target = torch.randint(0, shape.vocab, (tokens,), generator=generator).to(device)

    def head_fn():
        hidden.grad = weight.grad = None
        F.cross_entropy(F.linear(hidden, weight), target).backward()

    return layer_fn, head_fn


def verify(original: tuple[ModelShape, Workload], candidates: list[tuple[str, ModelShape, Workload]], *, gpu: GPU,
           params: CostParams = SPEC, device: str = "cuda", rounds: int = 15, budget_ms: float = 300,
           seed: int = 0) -> list[Verification]:
    """Measure the original and every candidate interleaved; one Verification per candidate."""
    from .measure import bootstrap_median_ci, interleave

    try:
        import torch
    except ImportError:
        raise ShapewiseError("verify measures on a GPU and needs torch: pip install 'shapewise[gpu]'") from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ShapewiseError("verify measures on a GPU, and there is none here (--device cpu only tests the command)")
    shapes = [("original", *original), *candidates]
    for _, shape, workload in shapes:
        check_parallel(shape, workload)
        if workload.tp != 1 or workload.mode != "train":
            raise ShapewiseError("verify measures one GPU's training step: use --tp 1 and --mode train")
    fns = {}
    for i, (_, shape, workload) in enumerate(shapes):
        fns[f"{i}/layer"], fns[f"{i}/head"] = _parts(shape, workload, device, seed)
    result = interleave(fns, device=device, rounds=rounds, budget_ms=budget_ms)
    # Round by round, each shape's step per token in units of the first variant's round median.
    per_token = []
    for i, (_, shape, workload) in enumerate(shapes):
        layer, head = result[f"{i}/layer"].round_ratios, result[f"{i}/head"].round_ratios
        per_token.append([(shape.num_layers * a + b) / workload.tokens for a, b in zip(layer, head)])
    base_pred = predicted_step_ms(*original, gpu=gpu, params=params) / original[1].tokens
    rng = random.Random(seed)
    out = []
    for i, (label, shape, workload) in enumerate(shapes[1:], start=1):
        speedups = [o / c for o, c in zip(per_token[0], per_token[i])]
        lo, hi = bootstrap_median_ci(speedups, rng=rng)
        predicted = base_pred / (predicted_step_ms(shape, workload, gpu=gpu, params=params) / workload.tokens)
        out.append(Verification(label, shape, workload, predicted, statistics.median(speedups), lo, hi,
                                result[f"{i}/layer"].timing.median_ms, result[f"{i}/head"].timing.median_ms))
    return out
