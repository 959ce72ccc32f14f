"""The `variants` set of `validate`: real models' neighbourhoods, predicted against measured speedups.

A user asks suggest which nearby shape runs faster and trusts the ranking; this set judges that
ranking where it is used. For each real model: its neighbourhood as suggest searches it
(search.ranked_neighbours: parameters within 2%, hidden/layers within 1.5× of the model's, at its
micro-batch and at 1, half and twice it, one GPU), the 10 shapes predicted fastest per token and 5
more drawn at random from the rest (memory per GPU is no filter here: only a layer and the head
are built); each measured as verify measures (one layer forward+backward
× the layer count + the output head, interleaved with the original, round by round). Judged: each
candidate's predicted speedup against its measured one, the share within 3%, and per model
Spearman's rho of the predicted against the measured speedups.

The random draw comes from the set's own stream beside the seed and the model's name, so a model
draws the same neighbours whichever other models are judged with it. What is ranked depends on
the cost model: the draw is the same for one seed and one profile.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from .calibrate import spearman
from .exports import finite_json
from .judges import STREAMS
from .profile import CostModel
from .search import _changes, change_text, ranked_neighbours
from .shapes import ModelShape, Workload

TOP, RANDOM = 10, 5
WITHIN = 0.03  # the target: predicted speedup within 3% of the measured one
PARAMS_TOL, ASPECT_BAND = 0.02, 1.5  # suggest's defaults


@dataclass(frozen=True)
class Neighbourhood:
    """A model, its workload, and the candidates drawn from its neighbourhood: (label, picked, shape,
    workload), picked "top N" (its rank by predicted time per token) or "random"."""

    shape: ModelShape
    workload: Workload
    candidates: tuple
    size: int  # shapes in the whole neighbourhood


@dataclass(frozen=True)
class Variant:
    label: str
    picked: str
    predicted_speedup: float  # the original's time per token over this one's
    measured_speedup: float  # NaN where it failed
    ci: tuple[float, float]
    error: str = ""

    @property
    def within(self) -> bool:
        return abs(self.predicted_speedup / self.measured_speedup - 1) <= WITHIN


@dataclass(frozen=True)
class ModelVariants:
    name: str
    workload: Workload
    size: int
    variants: tuple[Variant, ...] = ()
    error: str = ""  # why the model was not measured at all

    @property
    def measured(self) -> list[Variant]:
        return [v for v in self.variants if not v.error]

    @property
    def within_share(self) -> float:
        done = self.measured
        return sum(v.within for v in done) / len(done) if done else math.nan

    @property
    def spearman(self) -> float:
        """Rho of predicted against measured speedups, the original among them (1 and 1): NaN below 3."""
        done = self.measured
        return spearman([1.0, *(v.predicted_speedup for v in done)], [1.0, *(v.measured_speedup for v in done)])

    def to_json(self) -> dict:
        return {"model": self.name, "batch": self.workload.batch, "seq": self.workload.seq, "neighbourhood": self.size,
                "error": self.error or None, "within_3pct": self.within_share, "spearman": self.spearman,
                "candidates": [{"candidate": v.label, "picked": v.picked, "predicted_speedup": v.predicted_speedup,
                                "measured_speedup": v.measured_speedup, "ci": list(v.ci), "error": v.error or None}
                               for v in self.variants]}


@dataclass(frozen=True)
class VariantsRun:
    models: tuple[ModelVariants, ...]
    rounds: int
    model: CostModel
    interrupted: bool = False

    @property
    def candidates(self) -> list[Variant]:
        return [v for m in self.models for v in m.measured]

    def to_json(self) -> dict:
        done = self.candidates
        return finite_json({"set": "variants", "rounds": self.rounds, "cost_model": self.model.source,
                            "interrupted": self.interrupted, "candidates_measured": len(done),
                            # a parallel layer whose config shares one norm was built and priced with one
                            # (runs without this key built every layer with two: variants_repriced.py)
                            "shared_norms": True,
                            # a partial rotary embedding's rotated dims kept where its fraction gives none whole at
                            # a new head dim (rules.keep_rotary; runs without this key kept the fraction)
                            "rotary_kept": True,
                            "within_3pct": sum(v.within for v in done) / len(done) if done else None,
                            "models": [m.to_json() for m in self.models]})  # no NaN: JSON has none


def toy(shapes: list[ModelShape]) -> ModelShape:
    """The smallest model at toy widths (4 layers of 128 in 2 heads, FFN 344, vocabulary 250): a CPU
    smoke test whose neighbourhood still changes heads, vocabulary and micro-batch."""
    small = min(shapes, key=lambda s: s.params)
    return small.replace(name=f"{small.name} (toy)", hidden=128, num_layers=4, num_heads=2, head_dim=None, vocab=250,
                         num_kv_heads=None, ffn=344, expert_ffn=None)


def draw(shapes: list[ModelShape], *, seed: int, workload: Workload, model: CostModel, top: int = TOP,
         random: int = RANDOM) -> list[Neighbourhood]:
    """Each model's top candidates by predicted time per token and `random` more from the rest."""
    out = []
    for shape in shapes:
        original, ranked, _ = ranked_neighbours(shape, workload, model=model, keep={"tp"}, params_tol=PARAMS_TOL,
                                                aspect_band=ASPECT_BAND)
        rng = np.random.default_rng([seed, STREAMS["variants"], zlib.crc32(shape.name.encode())])
        rest = ranked[top:]
        drawn = sorted(rng.choice(len(rest), size=min(random, len(rest)), replace=False)) if rest else []
        picked = [(f"top {i}", c) for i, c in enumerate(ranked[:top], 1)] + [("random", rest[i]) for i in drawn]
        out.append(Neighbourhood(shape, workload, tuple((change_text(_changes(original, c)), how, c.shape, c.workload)
                                                        for how, c in picked), len(ranked)))
    return out


def measure(neighbourhoods: list[Neighbourhood], *, model: CostModel, device: str = "cuda", rounds: int = 20,
            budget_ms: float = 10, warmup_ms: float = 25, progress: bool = True) -> VariantsRun:
    """Each model's candidates measured against it, interleaved (verify in layer mode), model after
    model; budget_ms is each part's timed share of a round. A model that fails is kept with its
    reason and the next one goes on; Ctrl-C returns the models finished."""
    from .bench import _error_text, progress_bar
    from .measure import free_memory, import_torch
    from .verify import verify

    import_torch()  # a clear error before any work when torch is missing
    done = []
    with progress_bar(progress, len(neighbourhoods), "variants") as advance:
        for n in neighbourhoods:
            base = ModelVariants(n.shape.name, n.workload, n.size)
            try:
                checked = verify((n.shape, n.workload), [(label, s, w) for label, _, s, w in n.candidates], gpu=model,
                                 device=device, rounds=rounds, budget_ms=budget_ms * rounds, warmup_ms=warmup_ms,
                                 mode="layer", keep_going=True)
                done.append(ModelVariants(base.name, base.workload, base.size, tuple(
                    Variant(v.label, picked, v.predicted_speedup, v.measured_speedup, (v.ci_low, v.ci_high), v.error)
                    for v, (_, picked, _, _) in zip(checked, n.candidates))))
            except KeyboardInterrupt:
                return VariantsRun(tuple(done), rounds, model, interrupted=True)
            except Exception as exc:  # out of memory, a shape torch cannot run: say so and go on
                done.append(ModelVariants(base.name, base.workload, base.size, error=_error_text(exc)))
            finally:
                free_memory(device)
            advance(n.shape.name)
    return VariantsRun(tuple(done), rounds, model)
