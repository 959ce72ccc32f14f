"""How a training step is spread over GPUs, and what that costs in time.

Parallelism names the layout (Megatron's terms): t-way tensor parallelism with sequence parallelism
(the Workload's tp), p pipeline stages of v virtual stages each, d-way data parallelism with ZeRO
stage 0-3 (3 is FSDP), e-way expert parallelism inside d, the recompute policy and m micro-batches
per step. The memory model and the step-time model below both read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ShapewiseError

RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True)
class Parallelism:
    pp: int = 1  # pipeline stages
    dp: int = 1  # data-parallel replicas
    vp: int = 1  # virtual stages (model chunks) per pipeline rank: > 1 is the interleaved 1F1B schedule
    ep: int = 1  # expert parallelism: experts split over ep of the dp ranks
    zero: int = 0  # 0 replicated; 1 optimizer state sharded over dp; 2 and grads; 3 (FSDP) and weights
    recompute: str = "none"  # none; selective: core attention; full: each layer from its input
    micro_batches: int = 1  # m: micro-batches per step on each pipeline

    def __post_init__(self):
        for name in ("pp", "dp", "vp", "ep", "micro_batches"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ShapewiseError(f"parallelism: {name} must be a positive whole number, got {value!r}")
        if self.zero not in (0, 1, 2, 3):
            raise ShapewiseError(f"parallelism: ZeRO stage must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.recompute not in RECOMPUTE:
            raise ShapewiseError(f"parallelism: recompute must be one of {', '.join(RECOMPUTE)}, got {self.recompute!r}")
        if self.dp % self.ep:
            raise ShapewiseError(f"parallelism: expert parallelism {self.ep} must divide data parallelism {self.dp}")
        if self.vp > 1 and self.pp == 1:
            raise ShapewiseError("parallelism: virtual stages need pipeline parallelism (pp > 1)")
