"""The machine at hand: `calibrate --quick` refits a few time factors, by op family, on top of the
GPU's profile, so that a user's GPU lands where the one the profile was fitted on did.

GPUs of one model differ by a few percent (clocks, power, memory); the shapes a profile was fitted
on are where it is right on its own machine, so a sample of them, measured here, tells this
machine's factor for each family: GEMMs, batched GEMMs, fused attention, memory-bound ops and the GEMMs
of a few rows that stream their weights (cost.streams_weights), bound by memory where the others are not.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .cases import Case
from .cost import CostParams, streams_weights
from .hardware import GPU
from .profile import Profile

FAMILIES = ("gemm", "bmm", "flash", "memory", "stream")
MACHINE_STREAM = 5021  # the sample's own random stream
# Per family, how many of the calibration cases are measured: about 20 s on an H200. A family's factor
# is the median of its cases' ratios, which spread by 4-9% (interquartile): 100 GEMMs pinned it within
# about 0.5%, as 120 did within 0.45% (120 GEMMs and 60 batched made the whole command take 38-43 s on
# four H200s, over the 40 s it is meant to take); 80, within about 0.55%, leave the time for 20 streams.
SAMPLE = {"gemm": 80, "bmm": 50, "flash": 40, "memory": 40, "stream": 20}
# The streams are drawn from `calibrate --streams 1`'s GEMMs (the designed set holds 6 of a few rows), which
# the shipped H200 profile was fitted on.
STREAMS_SEED = 1
MIN_MS = 0.03  # shorter calls repeat within ~1% only at the median of many runs: left out of the factors
# Calls this short are mostly launch: a sample of them (any family) gives the time this machine adds to
# every call (CostParams.machine_launch_ms), the median of measured minus predicted.
LAUNCH_SAMPLE, LAUNCH_BOUND_MS = 30, 0.01
SHORT_MS = 1.5 * LAUNCH_BOUND_MS  # measured under this, a sampled call is taken as mostly launch
LAUNCH_LIMIT_MS = 0.004  # more than this per call says the profile is not this machine's: refused
LIMITS = (0.7, 1.4)  # a factor past these says the profile is not this machine's: refused, not fitted
# On a GPU that borrows another's profile (an H100 pricing with the H200's), the GEMMs' factor is measured
# and said but not applied: the designed GEMMs' ratio does not carry to a model's (the H100's memory is
# slower, its compute the same), and on eleven H100s, the last judged blind by a rule written before it,
# the factor put more whole steps off than it mended (benchmarks/quick_gemm_factor.py, benchmarks/RESULTS.md).
# On the GPU the profile was fitted on it is applied: there it mended steps (one H200, seen).


def family(case: Case) -> str | None:
    kind = case.params.get("kind", case.bench) if case.bench == "op" else case.bench
    if kind == "gemm" and streams_weights(case.params["m"], case.params["n"], case.params["batch"]):
        return "stream"  # as cost.py prices it: by machine_stream
    return kind if kind in FAMILIES else None


def machine_cases(*, dtype: str = "bf16", quick: bool = False) -> list[Case]:
    """A fixed sample of the designed calibration set and the streams beside it, per family (toy sizes
    with `quick`)."""
    from .cost import SPEC
    from .draws import calibration_cases, drawn_beside
    from .hardware import get_gpu

    designed = calibration_cases(dtype=dtype, quick=quick) + drawn_beside(dtype=dtype, quick=quick, streams=STREAMS_SEED)
    rng = np.random.default_rng(MACHINE_STREAM)
    out = []
    # Long enough to repeat well (by the spec model, so the sample is every profile's). No sliding window:
    # FlexAttention compiles each shape, up to 14 s apiece on an H200 (three of them took 27 s of the 65 s a
    # --quick run took, benchmarks/RESULTS.md); the dense attention's factor prices windows too.
    unwindowed = [c for c in designed if family(c) and not c.params.get("window")]
    spec_ms = [MIN_MS] * len(unwindowed) if quick else _predicted_ms(unwindowed, get_gpu("h200"), SPEC)
    for name in FAMILIES:
        of = [c for c, ms in zip(unwindowed, spec_ms) if ms >= MIN_MS and family(c) == name]
        count = min(len(of), SAMPLE[name])
        out += [of[i] for i in sorted(rng.choice(len(of), count, replace=False))] if count else []
    if not quick:  # drawn after the families, so that their sample stays the one measured before
        short = [c for c, ms in zip(unwindowed, spec_ms) if ms < LAUNCH_BOUND_MS]
        out += [short[i] for i in sorted(rng.choice(len(short), min(len(short), LAUNCH_SAMPLE), replace=False))]
    return out


def _predicted_ms(cases: list[Case], gpu, params: CostParams) -> list[float]:
    from .cases import predict_cases
    from .profile import CostModel

    return predict_cases(cases, gpu=CostModel(gpu, params))


def machine_factors(rows: list[tuple[Case, dict]], *, gpu, params: CostParams,
                    min_ms: float = MIN_MS) -> dict[str, dict]:
    """Each family's factor: the median of measured over predicted (by `params`, its own factors
    left out) over its cases of at least `min_ms`; with the cases it rests on and the spread. And
    "launch": the median time this machine adds to a call of a few microseconds ("ms")."""
    measured = [(case, row) for case, row in rows if family(case) and row.get("error") is None]
    out = {}
    short = [(case, row) for case, row in measured if row["median_ms"] < SHORT_MS]
    if len(short) >= LAUNCH_SAMPLE // 3:  # first: it is in every call the families' factors are fitted on
        excess = np.array([row["median_ms"] for _, row in short]) - _predicted_ms(
            [case for case, _ in short], gpu, without_factors(params))
        out["launch"] = {"ms": float(np.median(excess)), "cases": len(short),
                         "iqr": float(np.subtract(*np.percentile(excess, [75, 25])))}
    launch = out.get("launch", {}).get("ms", 0.0)  # added to every call after its factor (cost.py)
    kept = [(case, row["median_ms"] - launch) for case, row in measured if row["median_ms"] >= min_ms]
    cases = [case for case, _ in kept]
    predicted = _predicted_ms(cases, gpu, without_factors(params))
    # A memory-bound op's factor scales its streaming part only, not its launch (cost.py): the streaming
    # part is what a doubled factor adds, and the factor is measured over predicted of that part.
    memory = [i for i, case in enumerate(cases) if family(case) == "memory"]
    doubled = dict(zip(memory, _predicted_ms([cases[i] for i in memory], gpu,
                                             dataclasses.replace(without_factors(params), machine_memory=2.0))))
    ratios: dict[str, list[float]] = {name: [] for name in FAMILIES}
    for i, ((case, ms_here), ms) in enumerate(zip(kept, predicted)):
        if i not in doubled:
            ratios[family(case)].append(ms_here / ms)
        elif ms_here > 2 * ms - doubled[i]:  # past its fixed part
            ratios["memory"].append((ms_here - (2 * ms - doubled[i])) / (doubled[i] - ms))
    for name, values in ratios.items():
        if values:
            logs = np.log(values)
            out[name] = {"factor": float(np.exp(np.median(logs))), "cases": len(values),
                         "iqr": float(np.subtract(*np.percentile(logs, [75, 25])))}
    return out


def without_factors(params: CostParams) -> CostParams:
    return dataclasses.replace(params, **{f"machine_{name}": 1.0 for name in FAMILIES}, machine_launch_ms=0.0)


def with_factors(params: CostParams, factors: dict[str, dict]) -> CostParams:
    """The parameters with these factors (a family without cases, or one not applied, keeps 1; no launch
    sample adds 0)."""
    launch = factors.get("launch", {}).get("ms", 0.0)
    return dataclasses.replace(without_factors(params), machine_launch_ms=round(launch, 6),
                               **{f"machine_{name}": round(f["factor"], 4) for name, f in factors.items()
                                  if name != "launch" and f.get("applied", True)})


def machine_profile(base: Profile, gpu: GPU, factors: dict, environment: dict) -> Profile:
    """`base` with this machine's factors, as this GPU's own profile. A borrowed base (an H100 pricing
    with the H200's profile: the same chip and clocks) becomes the measured GPU's, and says from whom."""
    machine = {"factors": factors, "environment": {k: v for k, v in environment.items() if isinstance(v, (str, int, float))}}
    fit = {**base.fit, "machine": machine}
    if base.borrowed_for:
        fit["borrowed_from"] = base.gpu
    return dataclasses.replace(base, gpu=gpu.key, params=with_factors(base.params, factors), fit=fit, path="",
                               borrowed_for="")
