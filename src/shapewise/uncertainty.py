"""How far a predicted speedup can be trusted: an interval from the measured error of the ops it changes.

The cost model's error on one op, log(predicted / measured), was measured per op class on held-out
sets (benchmarks/op_errors.py): GEMMs, batched GEMMs, fused attention (forward, backward, decoding)
and memory-bound ops. A profile keeps the 90th percentile of each class's |error| in its fit record
(`fit["op_errors"]`, with how it was made); a GPU whose cost model has none uses DEFAULT.

A speedup is T_original / T_candidate (per token). An op that both steps run at the same shape errs
alike in both, so only the difference of its share of each step's time counts:
log(predicted speedup) − log(true speedup) = Σ_ops (share in the original − share in the candidate) · error_op.
Taking the ops' errors as independent, with each class's 90th percentile of |error| standing for
1.645 σ, the 90% interval's half-width on the log scale is √(Σ Δshare² · q90²). Unchanged ops
cancel; a suggestion that changes only the FFN width is as uncertain as its FFN GEMMs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .cost import StepCost
from .errors import ShapewiseError
from .ops import COMM, FLASH, MEMORY, Op
from .profile import CostModel

CLASSES = ("gemm", "bmm", "attention fwd", "attention bwd", "attention decode", "memory")
QUANTILE = 0.9  # the quantile of |log(predicted / measured)| a profile keeps per class


@dataclass(frozen=True)
class OpErrors:
    """The 90th percentile of |log(predicted / measured)| per op class, and where it comes from."""

    by_class: dict = field(hash=False)  # class -> q90 of |log error|
    source: str  # in words
    cases: dict = field(default_factory=dict, hash=False)  # class -> how many measured ops it comes from

    def of(self, op: Op) -> float:
        return self.by_class[op_class(op)]


# For a cost model without measured errors: the spec model's error on the H200's held-out sets
# (`python benchmarks/op_errors.py` prints it beside the calibrated profile's), the error of a cost
# model that was never fitted to the GPU it predicts. Communication is not measured per op; it
# takes the memory-bound class's (bandwidth-bound transfers).
DEFAULT = OpErrors({"gemm": 0.3247, "bmm": 0.4384, "attention fwd": 0.1219, "attention bwd": 0.0898,
                    "attention decode": 0.6059, "memory": 0.9475},
                   "default (the spec model's error on the H200's held-out sets): no measured errors for this cost model")


def op_class(op: Op) -> str:
    """The class whose measured error an op takes: its kind, and for fused attention its pass."""
    if op.kind in (MEMORY, COMM):
        return "memory"
    if op.kind == FLASH:
        return "attention decode" if op.m == 1 else f"attention {'fwd' if op.pass_ == 'fwd' else 'bwd'}"
    return op.kind  # gemm, bmm


def op_errors(model: CostModel) -> OpErrors:
    """The measured errors kept with the cost model's profile, else DEFAULT."""
    profile = model.profile
    data = profile.fit.get("op_errors") if profile is not None else None
    if data is None:
        return DEFAULT
    where = f"{profile.path or 'profile'}: fit.op_errors"
    quantiles = data.get("q90_abs_log_error") if isinstance(data, dict) else None
    if not isinstance(quantiles, dict) or set(quantiles) != set(CLASSES) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 5 for v in quantiles.values()):
        raise ShapewiseError(f"{where} must give q90_abs_log_error for each of {', '.join(CLASSES)} "
                             f"(numbers from 0 to 5): calibrate again or remove it")
    cases = data.get("cases", {})
    return OpErrors(dict(quantiles), f"measured errors of {profile.describe()} ({data.get('from', 'source unstated')})",
                    cases if isinstance(cases, dict) else {})


def _shares(step: StepCost) -> dict:
    """Each distinct op's share of the step's time: ops of the same shape run the same kernel."""
    total = step.time_ms
    out: dict = {}
    for c in step.costs:
        op = c.op
        key = (op.kind, op.pass_, op.m, op.n, op.k, op.batch, op.layout, op.causal, op.groups, op.family, op.bytes)
        share, _ = out.get(key, (0.0, op))
        out[key] = share + c.total_ms / total, op
    return out


def speedup_interval(original: StepCost, candidate: StepCost, speedup: float, errors: OpErrors) -> tuple[float, float]:
    """The predicted speedup's 90% interval from the errors of the ops whose share of the step changes."""
    a, b = _shares(original), _shares(candidate)
    variance = 0.0
    for key in a.keys() | b.keys():
        share_a, op = a.get(key, (0.0, None))
        share_b, op_b = b.get(key, (0.0, None))
        variance += ((share_a - share_b) * errors.of(op or op_b)) ** 2
    half = math.sqrt(variance)
    return float(speedup * math.exp(-half)), float(speedup * math.exp(half))  # plain floats: they go to JSON
