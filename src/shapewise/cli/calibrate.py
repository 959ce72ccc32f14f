"""`shapewise calibrate` and `validate`: fit this GPU's profile from a designed set, and judge it on a
held-out one."""

from __future__ import annotations

import dataclasses
import json
import os

from ..errors import ShapewiseError
from .common import add_cost_args, add_measure_args, console, gpu_for, positive_int, rank0_only


def _add_set_args(p) -> None:
    """calibrate's and validate's designed sets: their dtype, and a toy-sized one for smoke tests."""
    p.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    p.add_argument("--quick", action="store_true",
                   help="calibrate: on a GPU, refit this machine's factors on top of its profile (about 35 s); "
                        "on the CPU, and for validate, a toy-sized set (a smoke test)")


def _measured_gpu(args, env):
    gpu = gpu_for(args, env)
    if gpu is None:
        name = env.get("gpu_name") or args.device
        raise ShapewiseError(f"{name} is not in the GPU table: name the GPU to calibrate with --gpu")
    return gpu


def _calibrate_comm(args) -> int:
    """Collectives on the ranks torchrun started, fitted into this GPU's profile (rank 0 writes it)."""
    from ..bench import bench_comm, parse_sizes
    from ..cost import SPEC
    from ..fit import fit_comm
    from ..hardware import get_gpu
    from ..profile import Profile, find
    from ..store import Store

    if not args.gpu:
        raise ShapewiseError("name the GPU whose profile gets the link's parameters: --gpu")
    gpu = get_gpu(args.gpu)
    with Store(args.db) as store:
        rank, rows = bench_comm(parse_sizes(["1M:1G"] if not args.quick else ["1M:16M"]),
                                ["all_reduce", "all_gather", "reduce_scatter"], store=store, device=args.device)
    if rank != 0:
        return 0
    world = int(os.environ.get("WORLD_SIZE", "1"))
    old = find(gpu)
    base = old if old is not None and not old.borrowed_for else Profile(gpu=gpu.key, params=SPEC)
    params = fit_comm([{**r, "world": world} for r in rows], gpu=gpu, params=base.params)
    profile = dataclasses.replace(base, params=params, fit={**base.fit, "comm_cases": len(rows), "comm_ranks": world},
                                  borrowed_for="", path="")
    out = console()
    out.print(f"{len(rows)} collectives on {world} ranks: the link reaches {params.comm_bandwidth:.0%} of its "
              f"datasheet bandwidth, {params.comm_latency_ms * 1000:.1f} µs fixed cost per collective")
    from ..measure import environment

    _install_profile(profile, args, out, environment(args.device))
    return 0


def _install_profile(profile, args, out, measured: dict) -> None:
    """Write a fitted profile to the user's profile folder (unless --no-install, or unless it was
    measured on another device than its GPU: a CPU's or another GPU's times are never that GPU's
    profile) and to --out, and say where."""
    from ..hardware import get_gpu
    from ..profile import profile_dir, save

    name = measured.get("gpu_name")
    try:
        on = get_gpu(name).key if name else None
    except ShapewiseError:
        on = None
    install = not args.no_install
    if install and on != profile.gpu:
        out.print(f"measured on {name or 'the CPU'}, not on the {profile.gpu} it is for: not installed as its "
                  f"profile" + (", written to --out only" if args.out else " (--out PATH writes it to a file)"))
        install = False
    paths = [save(profile, profile_dir() / f"{profile.gpu}.json")] if install else []
    if args.out:
        paths.append(save(profile, args.out))
    for path in paths:
        out.print(f"profile for {profile.gpu} written to {path}")


def add_calibrate(sub) -> None:
    p = sub.add_parser("calibrate", help="measure a designed set on this GPU and fit its profile (about 2 minutes on an H200)")
    p.add_argument("--out", metavar="PATH", help="also write the profile here")
    p.add_argument("--extended", type=positive_int, nargs="?", const=1, metavar="SEED",
                   help="and 3600 random GEMMs and batched GEMMs more, drawn with SEED (1), for a profile that tells "
                        "better which kernel cuBLAS runs for a misaligned shape (about 2 minutes more on an H200)")
    p.add_argument("--no-install", action="store_true", help="do not write it to the user's profile folder")
    _add_set_args(p)
    p.add_argument("--comm", action="store_true",
                   help="under torchrun: time the collectives and fit the GPU link's parameters into the profile")
    add_measure_args(p)
    p.set_defaults(run=run_calibrate)


def _calibrate_machine(args) -> int:
    """`calibrate --quick` on a GPU: this machine's factors by op family on top of the GPU's profile."""
    from ..bench import sweep
    from ..machine import LIMITS, machine_cases, machine_factors, with_factors
    from ..profile import find
    from ..store import Store

    cases = machine_cases(dtype=args.dtype)
    out = console()
    with Store(args.db) as store:
        result = rank0_only(sweep(cases, store=store, device=args.device, warmup_ms=args.warmup_ms,
                                  budget_ms=args.budget_ms, force=args.force))
    out.print(f"{len(cases)} cases of this machine: {result.summary()}")
    if result.interrupted:
        return 130
    gpu = _measured_gpu(args, result.environment)
    base = find(gpu)
    if base is None or base.borrowed_for:
        raise ShapewiseError(f"no profile of {gpu.name}'s own to refit for this machine: run `shapewise calibrate` "
                             f"(without --quick) for a whole one")
    factors = machine_factors(result.rows, gpu=gpu, params=base.params)
    off = [name for name, f in factors.items() if not LIMITS[0] <= f["factor"] <= LIMITS[1]]
    if off:
        raise ShapewiseError(f"this machine's {off[0]} times are {factors[off[0]]['factor']:.2f}x the profile's: not "
                             f"the same kind of GPU or software; run `shapewise calibrate` for a whole profile")
    for name, f in factors.items():
        out.print(f"{name}: this machine runs {f['factor'] - 1:+.1%} against the profile ({f['cases']} cases, "
                  f"interquartile range {f['iqr']:.1%}); was {getattr(base.params, 'machine_' + name) - 1:+.1%}")
    machine = {"factors": factors,
               "environment": {k: v for k, v in result.environment.items() if isinstance(v, (str, int, float))}}
    profile = dataclasses.replace(base, params=with_factors(base.params, factors), fit={**base.fit, "machine": machine},
                                  path="")
    _install_profile(profile, args, out, result.environment)
    return 0


def run_calibrate(args) -> int:
    if args.comm:
        return _calibrate_comm(args)
    if args.quick and args.device.startswith("cuda"):
        return _calibrate_machine(args)
    from ..bench import census_rows, kernel_census, sweep
    from ..calibrate import calibration_cases, fit_profile
    from ..store import Store

    cases = calibration_cases(dtype=args.dtype, quick=args.quick, extended=args.extended)
    out = console()
    with Store(args.db) as store:
        result = rank0_only(sweep(cases, store=store, device=args.device, warmup_ms=args.warmup_ms,
                                   budget_ms=args.budget_ms, force=args.force))
        out.print(f"{len(cases)} calibration cases: {result.summary()}")
        if result.interrupted:
            out.print("interrupted: run `shapewise calibrate` again to finish (measured cases are kept)")
            return 130
        try:  # which kernels cuBLAS ran: the misaligned GEMMs' time model needs them
            named = kernel_census(cases, store=store, device=args.device, env=result.environment)
        except KeyboardInterrupt:
            out.print("interrupted: run `shapewise calibrate` again to finish (named kernels are kept)")
            return 130
        kernels = census_rows(store, env_id=store.environment_id(result.environment))
    if named:
        out.print(f"named the kernels of {named} GEMMs")
    gpu = _measured_gpu(args, result.environment)
    environment = {k: result.environment.get(k) for k in ("gpu_name", "driver_version", "torch_version", "cuda_version",
                                                          "cublas_version", "cudnn_version", "sm_clock_max_mhz",
                                                          "timestamp_utc") if result.environment.get(k) is not None}
    profile = fit_profile(result.rows, gpu=gpu, dtype=args.dtype, environment=environment, kernels=kernels)
    fit = profile.fit
    out.print(f"fitted on {fit['gemm_cases']} GEMMs, {fit['flash_cases']} attention and {fit['memory_cases']} "
                  f"memory-bound ops: median |log error| of the GEMMs {fit['median_abs_log_error_spec']:.3f} "
                  f"(spec model) -> {fit['median_abs_log_error_fitted']:.3f} (profile)")
    if fit["cutlass_kernels"]:
        out.print(f"misaligned GEMMs: {fit['cutlass_kernels']} CUTLASS kernel configurations fitted, "
                      f"{fit['cutlass_choices']} shapes to choose them by")
    _install_profile(profile, args, out, result.environment)
    return 0


def add_validate(sub) -> None:
    from ..judges import SETS

    p = sub.add_parser("validate", help="measure a held-out set and compare calibrated, spec-only and roofline models")
    add_cost_args(p, judged=True)
    p.add_argument("--from-db", action="store_true", help="use measurements already in the store; no GPU needed")
    p.add_argument("--seed", type=positive_int, default=2,
                   help="draw the held-out set with this seed (2); no case of the calibration set is ever drawn")
    p.add_argument("--set", choices=SETS, default="default",
                   help="which held-out set: default (drawn as calibration draws), wide (a generator of its own), "
                        "attention (fused attention, MHA and GQA) or models (the ops and steps of --configs)")
    p.add_argument("--configs", nargs="+", metavar="PATH", help="the models set's config.json files or folders")
    _add_set_args(p)
    add_measure_args(p)
    p.set_defaults(run=run_validate)


def run_validate(args) -> int:
    from rich.table import Table

    from ..bench import sweep
    from ..calibrate import report_json, summarize
    from ..judges import judge_set_cases, judge_sets
    from ..profile import find, load
    from ..store import Store

    drawn = judge_set_cases(args.set, seed=args.seed, dtype=args.dtype, quick=args.quick, configs=args.configs)
    cases = drawn.cases
    with Store(args.db) as store:
        if args.from_db:
            by_key = {c.key: c for c in cases}
            found = {}
            for row in store.rows():
                if row["key"] in by_key and row.get("error") is None:
                    found[row["key"]] = row  # the newest row of a case wins
            rows = [(by_key[key], row) for key, row in found.items()]
            env = {"gpu_name": rows[0][1].get("gpu_name")} if rows else {}
            if not rows:
                raise ShapewiseError("the store holds no validation measurements: run `shapewise validate` on a GPU first")
        else:
            result = rank0_only(sweep(cases, store=store, device=args.device, warmup_ms=args.warmup_ms,
                                       budget_ms=args.budget_ms, force=args.force))
            rows, env = result.rows, result.environment
    gpu = _measured_gpu(args, env)
    profile = load(args.profile) if args.profile else find(gpu)
    judged = judge_sets(drawn, rows, gpu=gpu, profile=profile)
    if args.json:
        print(json.dumps({**report_json(judged), "gpu": gpu.key,
                          "profile": profile.describe() if profile else None}, indent=2))
        return 0
    table = Table(show_edge=False, pad_edge=False, header_style="bold",
                  title=f"{len(rows)} held-out cases ({args.set} set) on {gpu.name}; profile: "
                        f"{profile.describe() if profile else 'none (spec-only)'}", title_justify="left")
    for col in ("cases", "n", "model", "median error", "p90 error", "max error", "Spearman"):
        table.add_column(col, justify="left" if col in ("cases", "model") else "right")
    for row in summarize(judged):
        table.add_row(row["category"], str(row["n"]), row["model"], f"{row['median_ape']:.1%}", f"{row['p90_ape']:.1%}",
                      f"{row['max_ape']:.1%}", f"{row['spearman']:.3f}")
    out = console()
    out.print(table)
    layers = [j for j in judged if j.category in ("layer", "variants")]
    if layers and profile:
        out.print("layers, calibrated: " + ", ".join(
            f"{j.label.split()[1]} {j.predicted_ms['calibrated'] / j.measured_ms - 1:+.1%}" for j in layers))
    return 0



COMMANDS = (add_calibrate, add_validate)
