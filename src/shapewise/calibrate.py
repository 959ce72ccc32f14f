"""Calibration and validation: how to fit a profile from what draws.py measures, how to judge it,
and the whole of a calibration or a validation as the command line runs it."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from . import trees
from .cases import Case, op_from_case, predict_cases
from .corrections import TREE_FEATURES
from .cost import SPEC
from .draws import calibration_cases
from .errors import ShapewiseError, argument, switched_on, warn
from .exports import finite_json
from .fit import (
    TREE_RATE,
    GemmSamples,
    fit_bandwidth,
    fit_cutlass,
    fit_flash,
    fit_flash_memory,
    fit_flash_window,
    fit_gemm,
    fit_power,
    fit_trees,
    residual_kernel,
    residual_rows,
)
from .hardware import GPU, get_gpu
from .ops import BMM, FLASH, GEMM, MEMORY, layer_ops
from .profile import CostModel, Profile, cost_model, for_gpu
from .shapes import ModelShape, Workload

# ---- fitting a profile from stored rows ------------------------------------------------------

# The dtypes a calibration or validation set is measured in (calibrate's and validate's --dtype).
SET_DTYPES = ("bf16", "fp16")


def _named_gpu(gpu: GPU | str | None, dtype: str) -> GPU | None:
    """The GPU named to fit or judge for, its dtype checked before anything is measured (a V100 asked for bf16
    measured the whole set and was refused at the end); None where the GPU measured is meant."""
    if gpu is None:
        return None
    gpu = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    gpu.check_dtype(dtype, among=SET_DTYPES)
    return gpu


def _gemm_rows(rows: list[tuple[Case, dict]]) -> list[dict]:
    out = []
    for case, row in rows:
        p = case.params
        if row.get("error") is None and (case.bench in ("gemm", "bmm") or (case.bench == "op" and p["kind"] in ("gemm", "bmm"))):
            out.append(dict(m=p["m"], n=p["n"], k=p["k"], batch=p["batch"], layout=p["layout"], time_ms=row["median_ms"],
                            key=case.key))
    return out


def decoding_samples(rows: list[tuple[Case, dict]]) -> list[dict]:
    """The measured decoding attention calls (one query token) of calibration cases, as
    fit.fit_flash_memory takes them."""
    return [dict(bytes=c.bytes, kv_len=c.params["n"], head_dim=c.params["k"], batch=c.params["batch"],
                 groups=c.params.get("groups", 1), time_ms=r["median_ms"])
            for c, r in rows if c.bench == "op" and c.params["kind"] == FLASH and r.get("error") is None
            and c.params["m"] == 1]


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
    params = fit_power(samples, params, gpu=gpu, dtype=dtype)
    attention = [(c, r) for c, r in rows if c.bench == "op" and c.params["kind"] == FLASH and r.get("error") is None]
    flash = [dict(batch=c.params["batch"], seq=c.params["m"], head_dim=c.params["k"], **{"pass": c.params["pass_"]},
                  groups=c.params.get("groups", 1), time_ms=r["median_ms"]) for c, r in attention if c.params["causal"] and not c.params.get("window")]
    if flash:
        params = fit_flash(flash, gpu=gpu, dtype=dtype, params=params)
    decoding = decoding_samples(rows)
    params = fit_flash_memory(decoding, gpu=gpu, params=params)
    params = fit_flash_window([(op_from_case(c.params, flops=c.flops, nbytes=c.bytes), r["median_ms"])
                               for c, r in attention if c.params.get("window")], gpu=gpu, dtype=dtype, params=params)
    memory = [dict(family=c.params["family"], **{"pass": c.params["pass_"]}, bytes=c.bytes, time_ms=r["median_ms"],
                   width=c.params["n"], rows=c.params["m"], table=c.params.get("k", 0)) for c, r in rows
              if c.bench == "op" and c.params["kind"] == MEMORY and r.get("error") is None]
    if memory:
        params = fit_bandwidth(memory, gpu=gpu, params=params)
    # The residual table's neighbourhood (its width and prior, by cross-validation) is what the CUTLASS
    # kernel chooser weighs its neighbours by; the table itself is replaced by the trees at the end.
    octaves, prior = residual_kernel(samples, params, gpu=gpu, dtype=dtype)
    params = dataclasses.replace(params, gemm_residuals=residual_rows(samples, params, gpu=gpu, dtype=dtype),
                                 residual_octaves=octaves, residual_prior=prior)
    named = [dict(r, **kernels[r["key"]]) for r in gemms if r["key"] in (kernels or {})]
    cutlass = {}
    if named:
        params = fit_cutlass(named, params, gpu=gpu, dtype=dtype, report=cutlass)
    params = fit_trees(samples, params, gpu=gpu, dtype=dtype)
    after = float(np.median(np.abs(samples.log_error(params, gpu, dtype))))
    fit = dict(gemm_cases=len(samples), flash_cases=len(flash), decode_attention_cases=len(decoding),
               memory_cases=len(memory), dtype=dtype, kernel_census=len(named),
               cutlass_kernels=len(params.cutlass_kernels), cutlass_choices=len(params.cutlass_choices),
               cutlass_chooser=cutlass or None,
               residual_kernel=dict(octaves=octaves, prior=prior, chosen_by="5-fold cross-validation"),
               gemm_trees=dict(trees=len(params.gemm_trees), depth=trees.DEPTH, rate=TREE_RATE, features=list(TREE_FEATURES)),
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


def _roofline_case_ms(case: Case, gpu: GPU) -> float:
    """The flat roofline's time of one validation case: a GEMM, a fused attention op or a layer."""
    dtype = case.params["dtype"]
    if case.bench == "layer":
        p = case.params
        ops = layer_ops(ModelShape(**p["shape"]), Workload(batch=p["batch"], seq=p["seq"], dtype=dtype))
        return sum(_roofline_ms(op.flops, op.bytes, gpu, dtype) * op.count for op in ops)
    if case.bench == "op":  # as the op it was made from holds its work: whole FLOPs and bytes
        return _roofline_ms(round(case.flops or 0), round(case.bytes), gpu, dtype)
    return _roofline_ms(case.flops, case.bytes, gpu, dtype)


def _category(case: Case) -> str:
    if case.bench == "layer":
        return case.params.get("group", "layer")
    if case.bench == "op":
        if case.params["kind"] == MEMORY:
            return "memory, decoding"
        if case.params["kind"] in (GEMM, BMM):  # a model's own matrices (the models set), not attention
            return case.params["kind"]
        return "attention decode" if case.params["m"] == 1 else f"attention {case.params['pass_']}"
    return case.bench


def judge(rows: list[tuple[Case, dict]], *, gpu: GPU | CostModel, profile: Profile | None = None) -> list[Judged]:
    """Every measured validation case against the calibrated model, the spec model and a flat roofline.
    gpu: the cost model judged (validate's), or a GPU judged by `profile` (default: the GPU's own), chosen
    as profile.cost_model chooses; "calibrated" is NaN where that is the spec model, no profile found."""
    model = cost_model(gpu, profile=profile)
    rows = [(case, row) for case, row in rows if row.get("error") is None]
    cases = [case for case, _ in rows]
    spec = predict_cases(cases, gpu=cost_model(model, spec_only=True))
    calibrated = predict_cases(cases, gpu=model) if model.calibrated else [math.nan] * len(cases)
    return [Judged(_category(case), case.label, row["median_ms"],
                   {"calibrated": calibrated_ms, "spec-only": spec_ms, "roofline 50%": _roofline_case_ms(case, model.gpu)})
            for (case, row), spec_ms, calibrated_ms in zip(rows, spec, calibrated)]


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
    """The summary and every case, with null where a number is NaN (a Spearman's rho of under 3 cases, a
    model with no profile): JSON has no NaN."""
    return finite_json({"summary": summarize(judged),
                      "cases": [dict(category=j.category, label=j.label, measured_ms=j.measured_ms,
                                     predicted_ms=j.predicted_ms) for j in judged]})



# ---- the whole of a calibration or a validation, as the command line runs it ----------------------

# What a profile records of where it was measured: the device ("cpu" marks a CPU's times, which price no
# GPU: profile.measured_elsewhere) and the GPU, its driver, software and clock.
PROFILE_ENVIRONMENT = ("device", "processor", "gpu_name", "driver_version", "torch_version", "cuda_version",
                       "cublas_version", "cudnn_version", "sm_clock_max_mhz", "timestamp_utc")


@dataclass(frozen=True)
class Calibration:
    cases: int
    sweep: object  # bench.SweepResult: the calibration set's rows
    profile: Profile | None  # None when interrupted (or on a rank other than 0, or on the CPU with no GPU named)
    named: int = 0  # GEMMs whose kernels were named now
    interrupted: str = ""  # what an interruption kept: "measured cases" or "named kernels"


def calibrate(*, store, gpu: GPU | str | None = None, device: str = "cuda", dtype: str = "bf16", quick: bool = False,
              draws: dict[str, int | None] | None = None, warmup_ms: float = 3, budget_ms: float = 10,
              force: bool = False, progress: bool = True) -> Calibration:
    """Measure the designed set (and beside it `draws`: draws.DRAWS' names, each with its seed) on
    `device` (what the store holds for this environment is kept), name
    the kernels cuBLAS ran for its GEMMs, and fit a profile for `gpu` (default: the GPU measured).
    Ctrl-C returns what was kept, with no profile: run it again to finish."""
    from .bench import census_rows, kernel_census, sweep
    from .measure import measured_gpu

    gpu = _named_gpu(gpu, dtype)
    cases = calibration_cases(dtype=dtype, quick=quick, **(draws or {}))
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
    profile = keep_the_walk(fit_profile(result.rows, gpu=gpu, dtype=dtype, environment=environment, kernels=kernels))
    return Calibration(len(cases), result, profile, named)


def keep_the_walk(profile: Profile) -> Profile:
    """The profile with its GPU's shipped one-row walk (params.WALK_*) where it has none: the calibration
    draws none of the walk's calls (benchmarks/one_row_walk.py fits it from measured decoding calls), so a
    new fit keeps the shipped line and says so in its fit record rather than drop it."""
    from .profile import _shipped

    shipped = _shipped(profile.gpu)
    if shipped is None or not shipped.params.walk_per_k_ms or profile.params.walk_per_k_ms:
        return profile
    walk = {"walk_fixed_ms": shipped.params.walk_fixed_ms, "walk_per_k_ms": shipped.params.walk_per_k_ms}
    return dataclasses.replace(profile, params=dataclasses.replace(profile.params, **walk), fit={
        **profile.fit, "one_row_walk": {**shipped.fit.get("one_row_walk", {}), "kept_from": f"shipped {profile.gpu}.json"}})


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
                            ["all_reduce", "all_gather", "reduce_scatter"], store=store, device=device, command="calibrate --comm")
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


def measured_on_cpu(row: dict) -> bool:
    """Whether a stored row's times are a CPU's: its environment's device says so. Rows imported from an
    export (whose device is unknown) are a CPU's where they have no CUDA version, as no CPU records one."""
    device = row.get("device")
    return device == "cpu" if device is not None else row.get("cuda") is None


@dataclass(frozen=True)
class Validation:
    gpu: GPU
    profile: Profile | None  # the profile judged (None: the GPU has none)
    judged: list  # of Judged
    num_cases: int = 0  # held-out cases measured (or found in the store)
    sweep: object = None  # bench.SweepResult when measured now; None when read from the store
    num_drawn: int = 0  # held-out cases the set holds
    measured_on: str = ""  # "the CPU", or the name of the GPU the times come from

    @property
    def interrupted(self) -> bool:
        return bool(self.sweep is not None and self.sweep.interrupted)

    def to_json(self) -> dict:
        return {**report_json(self.judged), "gpu": self.gpu.key, "measured_on": self.measured_on,
                "profile": self.profile.describe() if self.profile else None}


def validate(*, store, gpu: GPU | str | None = None, profile: Profile | None = None, judge_set: str = "default",
             configs=None, device: str = "cuda", dtype: str = "bf16", quick: bool = False, seed: int = 2,
             from_store: bool = False, warmup_ms: float = 3, budget_ms: float = 10, force: bool = False,
             cuda_graph: bool = False, progress: bool = True, borrow_profile: bool = False) -> Validation:
    """Measure a held-out set (judges.SETS: `judge_set` drawn with `seed`; or, `from_store`, read its
    newest measurements from the store: no GPU needed) and judge `profile` (default: the one
    predictions for the GPU use) against the spec model and a flat roofline; `cuda_graph` times replays of
    a CUDA graph of each case, as bench's --cuda-graph does. Ctrl-C returns what was
    measured (kept in the store), judged on nothing. CPU times are judged as `gpu`'s only as a smoke
    test, said in a warning; a GPU's by a profile measured elsewhere only where borrow_profile lends it, as
    check's --borrow-profile prices with it (the profile then says it is borrowed); else refused. From the store,
    the cases it lacks are said, and a store holding none of those `seed` draws (only those every seed draws) is
    refused."""
    from .bench import stored_rows, sweep
    from .judges import judge_set_cases, judge_sets
    from .measure import measured_gpu, warn_measured_elsewhere

    gpu = _named_gpu(gpu, dtype)
    drawn = judge_set_cases(judge_set, seed=seed, dtype=dtype, quick=quick, configs=configs)
    checked = None  # the GPU the profile was taken for (profile.for_gpu) before measuring, not asked again after
    if profile is not None and gpu is not None and not from_store:  # refused before the set is measured, not after
        profile, checked = for_gpu(profile, gpu.key, borrow=borrow_profile, device=device,
                                   gpu_times=device != "cpu"), gpu.key
    result = None
    if from_store:
        rows = stored_rows(drawn.cases, store=store)
        if not rows:
            quick_held = not quick and stored_rows(judge_set_cases(judge_set, seed=seed, dtype=dtype, quick=True,
                                                                   configs=configs).cases, store=store)
            raise ShapewiseError("the store holds no validation measurements" + (
                f" of the whole {judge_set} set, only of its {argument('quick')} set: {switched_on('quick')}" if quick_held
                else ": run `shapewise validate` on a GPU first"))
        _check_stored(drawn, rows, store=store, seed=seed, dtype=dtype, quick=quick, configs=configs)
        # Any CPU's rows among them (their gpu_name is the processor's) make the set a CPU's smoke test.
        env = {"gpu_name": None if any(measured_on_cpu(row) for _, row in rows) else rows[0][1].get("gpu_name")}
    else:
        result = sweep(drawn.cases, store=store, device=device, warmup_ms=warmup_ms, budget_ms=budget_ms, force=force,
                       cuda_graph=cuda_graph, progress=progress)
        if result.rank != 0:
            return Validation(None, None, [], sweep=result)
        rows, env = result.rows, result.environment
        if result.interrupted or (gpu is None and device == "cpu"):  # nothing to judge: cut short, or CPU times alone
            return Validation(None, None, [], len(rows), result, len(drawn.cases), env.get("gpu_name") or "the CPU")
    measured_on = env.get("gpu_name") or "the CPU"
    if env.get("gpu_name") is None and gpu is None:
        raise ShapewiseError("these held-out cases were measured on the CPU: name the GPU whose models they "
                             f"smoke-test with {argument('gpu')}")
    gpu = measured_gpu(env, gpu=gpu, device=device)
    # The one check of where a given profile was measured (check_measured_on, in cost_model): CPU times may
    # smoke-test a profile fitted on CPU times or on the GPU itself; a GPU's times judge only that GPU's own.
    run_on = "cpu" if env.get("gpu_name") is None else None if from_store else device
    if profile is not None and gpu.key != checked:
        profile = for_gpu(profile, gpu.key, borrow=borrow_profile, device=run_on,
                          gpu_times=env.get("gpu_name") is not None)
    model = cost_model(gpu, profile=profile, device=run_on)
    warn_measured_elsewhere(env, gpu, what=f"these {len(rows)} held-out cases")  # once the profile may judge them
    return Validation(gpu, model.profile, judge_sets(drawn, rows, gpu=model), len(rows), result, len(drawn.cases),
                      measured_on)


def _check_stored(drawn, rows: list[tuple[Case, dict]], *, store, seed: int, **draw) -> None:
    """validate from the store: say how many of the set's cases drawn with `seed` (drawn: judges.JudgeSet) the
    store lacks (rows: those it holds), and refuse when it holds none of those the seed draws (only the ones
    every seed shares). draw: the set's dtype, quick and configs, to draw it with another seed."""
    from .judges import judge_set_cases

    held = {case.key for case, _ in rows}
    if len(held) >= len(drawn.cases):  # the whole set: nothing to say, nor another seed's set to draw
        return
    shared = {case.key for case in judge_set_cases(drawn.name, seed=seed ^ 1, **draw).cases}  # what every seed draws
    seeded = {case.key for case in drawn.cases} - shared
    what = f"the {drawn.name} set's {len(drawn.cases):,} cases drawn with {argument('seed')} {seed}"
    if seeded and not held & seeded:
        raise ShapewiseError(f"the results store {store.path} holds none of the {len(seeded):,} random cases of {what} "
                             f"(only {len(held):,} that every seed draws): give the {argument('seed')} it was measured with, or "
                             f"measure them with `shapewise validate --seed {seed}` on the GPU")
    warn(f"the results store {store.path} lacks {len(drawn.cases) - len(held):,} of {what}: they are not judged")


@dataclass(frozen=True)
class MachineFit:
    cases: int
    sweep: object  # bench.SweepResult
    base: Profile | None = None  # the GPU's profile the factors were fitted on top of
    factors: dict = dataclasses.field(default_factory=dict)  # op family -> {"factor", "cases", "iqr"}
    profile: Profile | None = None  # base with this machine's factors; None when interrupted


def refit_base(gpu: GPU) -> Profile:
    """The profile `calibrate --quick` refits for `gpu`'s machine, or a ShapewiseError where it has none."""
    from .profile import find

    base = find(gpu)
    if base is None:
        raise ShapewiseError(f"no profile for {gpu.name} to refit for this machine: run `shapewise calibrate` "
                             f"(without --quick) for a whole one")
    return base


def calibrate_machine(*, store, gpu: GPU | str | None = None, device: str = "cuda", dtype: str = "bf16",
                      warmup_ms: float = 3, budget_ms: float = 10, force: bool = False,
                      progress: bool = True) -> MachineFit:
    """`calibrate --quick` on a GPU: this machine's factors by op family (machine.py), measured on a
    small set and fitted on top of the GPU's own profile."""
    from .bench import sweep
    from .machine import LAUNCH_LIMIT_MS, LIMITS, machine_cases, machine_factors, machine_profile
    from .measure import measured_gpu

    gpu = _named_gpu(gpu, dtype)
    if gpu is not None:  # refused now, not after the set is measured
        refit_base(gpu)
    cases = machine_cases(dtype=dtype)
    result = sweep(cases, store=store, device=device, warmup_ms=warmup_ms, budget_ms=budget_ms, force=force,
                   progress=progress)
    if result.interrupted or result.rank != 0:
        return MachineFit(len(cases), result)
    gpu = measured_gpu(result.environment, gpu=gpu, device=device)
    base = refit_base(gpu)
    factors = machine_factors(result.rows, gpu=gpu, params=base.params)
    if abs(factors.get("launch", {}).get("ms", 0.0)) > LAUNCH_LIMIT_MS:
        raise ShapewiseError(f"this machine's calls take {factors['launch']['ms'] * 1e3:+.1f} µs each against the "
                             f"profile's: not the same kind of GPU or software; run `shapewise calibrate` for a whole profile")
    off = [name for name, f in factors.items() if name != "launch" and not LIMITS[0] <= f["factor"] <= LIMITS[1]]
    if off:
        raise ShapewiseError(f"this machine's {off[0]} times are {factors[off[0]]['factor']:.2f}x the profile's: not "
                             f"the same kind of GPU or software; run `shapewise calibrate` for a whole profile")
    if base.borrowed_for and "gemm" in factors:  # measured and kept, not applied (why: machine.py, LIMITS)
        factors["gemm"] = {**factors["gemm"], "applied": False}
    return MachineFit(len(cases), result, base, factors, machine_profile(base, gpu, factors, result.environment))

