"""`shapewise calibrate` and `validate`: fit this GPU's profile from a designed set, and judge it on a
held-out one."""

from __future__ import annotations

import json
import math
import sys

from ..errors import ShapewiseError, listed, warn
from .common import (
    Repeated,
    add_cost_args,
    add_measure_args,
    add_mkdir_arg,
    check_store_folder,
    console,
    known_gpu,
    open_store,
    rank0_only,
)

# Where calibrate installs a profile, as profile.profile_dir() finds it.
VARIANT_ROUNDS = 20  # the variants set's target is judged on at least 20 interleaved rounds
PROFILE_FOLDER = ("$SHAPEWISE_PROFILES, else $XDG_DATA_HOME/shapewise/profiles, else "
                  "~/.local/share/shapewise/profiles")


# The random draws beside the designed set (draws.DRAWS), each a flag taking its seed.
DRAW_HELP = {
    "extended": "and 3600 random GEMMs and batched GEMMs more, drawn with SEED (1 when not given), for a profile that "
                "tells better which kernel cuBLAS runs for a misaligned shape (90 to 135 s more on an H200 when last "
                "timed, before each case was followed by an idle pause, which makes it longer now)",
    "edges": "and 3000 random GEMMs and batched GEMMs more at the edges of the designed dims (a side of 1 to 31, or over "
             "16,384), drawn with SEED (1 when not given): decode rows, gemv and long reductions (about 90 s more on an "
             "H200: 91 s measured)",
    "batched": "and 1500 random batched GEMMs in every layout (half shaped as attention's products) and 160 decoding "
               "attention calls over head dims 64 to 256 and groups of 1 to 71 query heads per key head, drawn with SEED "
               "(1 when not given) (about 70 s more on an H200: 64 and 76 s measured)",
    "large": "and 1500 GEMMs shaped as transformers' (large and aligned as models align: layers, heads and tensor-parallel "
             "shards, in the three passes' layouts), drawn with SEED (1 when not given) (about 70 s more on an H200)",
    "skinny": "and 2000 GEMMs and batched GEMMs with one side of 1 to 64 and the others up to 65,536 (decoding's rows, in "
              "every layout and alignment), drawn with SEED (1 when not given) (about 75 s more on an H200)",
    "streams": "and 1200 GEMMs streaming a decoding step's weights (1 to 256 rows against 4 MB to 4 GB of weights, "
               "vocabularies included), drawn with SEED (1 when not given) (about 60 s more on an H200)",
    "heads": "and 120 fused attention calls, forward and backward, over 1 to 16 sequences × heads (a tensor-parallel "
             "rank's few heads) at lengths of 512 to 16,384 and head dims 64 to 256, drawn with SEED (1 when not given) "
             "(about 45 s more on an H200)",
    "rows": "and the memory-bound ops (norms, activations, RoPE, residual adds), forward and backward, of 40 layers on "
            "16 to 2048 tokens, drawn with SEED (1 when not given) (about 15 s more on an H200)",
    "shards": "and about 790 GEMMs (800 drawn, a repeat measured once: 790 for seed 1, 786 for seed 2) of 1 to 16 "
              "rows against small weights (128 KB to 64 MB at transformers' dims: a tensor-parallel rank's shards and "
              "MoE experts), drawn with SEED (1 when not given) (about 22 s more on an H200)",
    "prefill": "and 800 GEMMs of prefills and training steps as a tensor-parallel rank or an MoE expert runs them "
               "(sequences that are multiples of 8 but seldom of 64, experts' routed tokens), drawn with SEED (1 when "
               "not given) (about 33 s more on an H200)",
}


def _add_set_args(p) -> None:
    """calibrate's and validate's designed sets: their dtype, and a toy-sized one for smoke tests."""
    p.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16", help="the data type of the set")
    p.add_argument("--quick", action="store_true",
                   help="calibrate: on a GPU, refit this machine's factors on top of its profile (38 s on an H200, "
                        "44 s on an H100); on the CPU, and for validate, a toy-sized set (a smoke test)")


def _measured_on_cpu(args, out, what: str, count: int) -> None:
    """Say where a CPU smoke test's measurements went, and that CPU times are fitted or judged only
    against a GPU that --gpu names."""
    from ..store import default_path

    out.print(f"{count} {what} measured on the CPU into the results store {args.db or default_path()}; CPU times "
              f"are no GPU's, so nothing is {'fitted' if what.startswith('cal') else 'judged'} without --gpu "
              f"(a smoke test of the command)")


def _install_profile(profile, args, out, measured: dict) -> None:
    """Write a fitted profile to the user's profile folder (unless --no-install, or unless it was
    measured on another device than its GPU: a CPU's or another GPU's times are never that GPU's
    profile) and to --out, and say where."""
    from ..calibrate import install
    from ..measure import gpu_of

    name = measured.get("gpu_name")
    on = gpu_of(measured)
    user = not args.no_install
    if user and (on.key if on else None) != profile.gpu:
        out.print(f"measured on {name or 'the CPU'}, not on the {profile.gpu} it is for: not installed as its "
                  f"profile" + (", written to --out only" if args.out else " (--out PATH writes it to a file)")
                  + f"; it says where it was measured, and no command prices the {profile.gpu} with it")
        user = False
    for path in install(profile, user=user, out=args.out):
        out.print(f"profile for {profile.gpu} written to {path}")


def add_calibrate(sub) -> None:
    from ..limits import SEED

    p = sub.add_parser("calibrate", help="measure a designed set on this GPU and fit its profile (about 5 minutes on an H200)",
                       description="Measure a designed set of GEMMs, attention and memory-bound ops on this GPU, fit the "
                                   f"cost model's parameters and install the profile in the profile folder ({PROFILE_FOLDER}); "
                                   "predictions for this GPU use it from then on. On the CPU (--device cpu) the set is "
                                   "measured and stored only: a smoke test.")
    p.add_argument("--out", metavar="PATH", help="also write the profile here (a .json file)")
    add_mkdir_arg(p, "make the folder of --out, or of a new results store (--db), if it does not exist")
    for draw, help_ in DRAW_HELP.items():
        p.add_argument(f"--{draw}", type=SEED.arg, nargs="?", const=1, metavar="SEED", help=help_)
    p.add_argument("--no-install", action="store_true", help=f"do not write it to the profile folder ({PROFILE_FOLDER})")
    _add_set_args(p)
    p.add_argument("--comm", action="store_true",
                   help="under torchrun: time the collectives and fit the GPU link's parameters into the profile")
    # No --cuda-graph: a profile prices calls as the timer times each one; no --json: calibrate prints no rows.
    add_measure_args(p, gpu="the GPU to fit the profile for (default: the one measured; on the CPU, none: the "
                            "set is measured and stored only)", graph=False, rows=False)
    p.set_defaults(run=run_calibrate)


def run_calibrate(args) -> int:
    from ..calibrate import SET_DTYPES, calibrate

    known_gpu(args, among=SET_DTYPES)
    drawn = [f"--{draw}" for draw in DRAW_HELP if getattr(args, draw) is not None]
    machine = args.quick and args.device.startswith("cuda")
    if drawn and (args.comm or machine):  # neither measures a draw: refused, not dropped without a word
        raise ShapewiseError(f"{listed(drawn, 'and')}: " + ("--comm times the collectives alone" if args.comm else
                             "--quick on a GPU refits this machine's factors alone") + "; the draws are measured by a "
                             f"full calibrate: leave out {'--comm' if args.comm else '--quick'} or the draws")
    _refuse_before_measuring(args, machine=machine)
    if args.no_install and not args.out and (args.gpu or args.device != "cpu"):  # said now, not after the fit
        warn("--no-install without --out: the profile this run fits is written nowhere (--out PATH keeps it)")
    if args.comm:
        return _calibrate_comm(args)
    if machine:
        return _calibrate_machine(args)
    draws = {draw: getattr(args, draw) for draw in DRAW_HELP}
    if args.device == "cpu" and not args.quick:
        from ..draws import calibration_cases

        warn(f"--device cpu without --quick measures the whole calibration set, "
             f"{len(calibration_cases(dtype=args.dtype, **draws)):,} cases: hours on a CPU, and a profile fitted on "
             "CPU times is never installed as a GPU's; `--quick` is the smoke test")
    out = console()
    with open_store(args) as store:
        done = calibrate(store=store, gpu=args.gpu, device=args.device, dtype=args.dtype, quick=args.quick,
                         draws=draws,
                         warmup_ms=args.warmup_ms, budget_ms=args.budget_ms, force=args.force)
    rank0_only(done.sweep)
    out.print(f"{done.cases} calibration cases: {done.sweep.summary()}")
    if done.interrupted:  # the same command: another device or store would start over
        out.print(f"interrupted: run the same command again to finish ({done.interrupted} are kept in the results "
                  f"store {store.path})")
        return 130
    if done.named:
        out.print(f"named the kernels of {done.named} GEMMs")
    if done.profile is None:  # the CPU smoke test without --gpu: measured, nothing to fit for
        _measured_on_cpu(args, out, "calibration cases", done.cases)
        return 0
    fit = done.profile.fit
    said = (f"fitted on {fit['gemm_cases']} GEMMs, {fit['flash_cases']} attention and {fit['memory_cases']} memory-bound "
            f"ops: median |log error| on the GEMMs it was fitted on {fit['median_abs_log_error_spec']:.3f} (spec model)")
    after = fit["median_abs_log_error_fitted"]
    if args.quick:  # the CPU's toy set: the trees learn each of its few GEMMs, so an in-sample 0.000 judges nothing
        said += (f"; no held-out error for the profile: a CPU smoke test holds no case out, and its trees learn each of "
                 f"the {fit['gemm_cases']} GEMMs it was fitted on (in-sample {after:.3f}, which judges nothing; "
                 f"`shapewise validate` judges a GPU's profile on held-out cases)")
    else:
        said += f" -> {after:.3f} (profile; `shapewise validate` judges it on held-out cases)"
    out.print(said)
    if fit["cutlass_kernels"]:
        out.print(f"misaligned GEMMs: {fit['cutlass_kernels']} CUTLASS kernel configurations fitted, "
                  f"{fit['cutlass_choices']} shapes to choose them by")
    if "kept_from" in fit.get("one_row_walk", {}):
        params = done.profile.params
        out.print(f"one-row walk: {params.walk_fixed_ms * 1e3:.2f} µs + {params.walk_per_k_ms * 1e6:.2f} ns × k / ways, "
                  f"kept from the {fit['one_row_walk']['kept_from']} (the calibration draws none of its calls)")
    _install_profile(done.profile, args, out, done.sweep.environment)
    return 0


def _refuse_before_measuring(args, *, machine: bool) -> None:
    """Every refusal of calibrate's inputs that needs no measurement, made before anything is said or measured: a
    refused command says its one line alone, not after a warning of what the run would have done."""
    from .. import measure
    from ..calibrate import refit_base
    from ..hardware import get_gpu
    from ..outputs import output_file

    if args.gpu and machine:  # as calibrate_machine refuses it
        refit_base(get_gpu(args.gpu))
    if args.comm and not args.gpu:
        raise ShapewiseError("name the GPU whose profile gets the link's parameters: --gpu")
    if args.out and args.device == "cpu" and not args.gpu:  # no profile to write: refused now, not after measuring
        raise ShapewiseError(f"--out {args.out}: on the CPU without --gpu nothing is fitted, so there is no profile to "
                             "write; name the GPU to fit the CPU's times for (--gpu, a smoke test), or leave --out out")
    check_store_folder(args)
    if args.out is not None:  # said now, not after minutes of measuring ("" too: it names no file)
        output_file(args.out, formats={".json": "json"}, mkdir=args.mkdir, what="profile")
    if args.device != "cpu":  # a GPU that is not here, refused before a warning of what its run would write
        measure.check_device(args.device)


def _calibrate_comm(args) -> int:
    """Collectives on the ranks torchrun started, fitted into this GPU's profile (rank 0 writes it)."""
    from ..calibrate import calibrate_comm
    from ..measure import environment

    with open_store(args) as store:
        profile, num_cases = calibrate_comm(store=store, gpu=args.gpu, device=args.device, quick=args.quick)
    if profile is None:
        return 0
    params, out = profile.params, console()
    out.print(f"{num_cases} collectives on {profile.fit['comm_ranks']} ranks: the link reaches "
              f"{params.comm_bandwidth:.0%} of its datasheet bandwidth, {params.comm_latency_ms * 1000:.1f} µs "
              f"fixed cost per collective")
    _install_profile(profile, args, out, environment(args.device))
    return 0


def _calibrate_machine(args) -> int:
    """`calibrate --quick` on a GPU: this machine's factors by op family on top of the GPU's profile."""
    from ..calibrate import calibrate_machine
    from ..machine import SHORT_MS

    out = console()
    with open_store(args) as store:
        done = calibrate_machine(store=store, gpu=args.gpu, device=args.device, dtype=args.dtype,
                                 warmup_ms=args.warmup_ms, budget_ms=args.budget_ms, force=args.force)
    rank0_only(done.sweep)
    out.print(f"{done.cases} cases of this machine: {done.sweep.summary()}")
    if done.profile is None:
        return 130
    if "launch" not in done.factors:
        out.print("launch: too few of its calls of a few µs ran that short here to tell this machine's time per call; "
                  "none added")
    for name, f in done.factors.items():
        if name == "launch":
            out.print(f"launch: this machine's calls take {f['ms'] * 1e3:+.2f} µs each against the profile "
                      f"({f['cases']} calls measured under {SHORT_MS * 1e3:.0f} µs, interquartile range "
                      f"{f['iqr'] * 1e3:.2f} µs); was {done.base.params.machine_launch_ms * 1e3:+.2f} µs")
            continue
        out.print(f"{name}: this machine runs {f['factor'] - 1:+.1%} against the profile ({f['cases']} cases, "
                  f"interquartile range {f['iqr']:.1%}); was {getattr(done.base.params, 'machine_' + name) - 1:+.1%}"
                  + ("" if f.get("applied", True) else
                     f"; not applied: on a GPU that borrows the {done.base.gpu}'s profile, this factor put more whole "
                     "steps off than it mended (eleven H100s)"), soft_wrap=True)
    _install_profile(done.profile, args, out, done.sweep.environment)
    return 0


def add_validate(sub) -> None:
    from ..judges import SETS
    from ..limits import BATCH, ROUNDS, SEED, SEQ

    p = sub.add_parser("validate", help="measure a held-out set and compare calibrated, spec-only and roofline models")
    add_cost_args(p, judged=True)
    p.add_argument("--from-db", action="store_true", help="use measurements already in the store; no GPU needed")
    p.add_argument("--seed", type=SEED.arg,
                   help=f"draw the held-out set with this seed (default: {VALIDATE_SEED}); no case of the "
                        "calibration set is ever drawn")
    p.add_argument("--set", choices=SETS, default="default",
                   help="which held-out set: default (drawn as calibration draws), wide (a generator of its own), "
                        "attention (fused attention, MHA and GQA), models (the ops and steps of --configs) or "
                        "variants (the suggest neighbourhoods of --configs, measured interleaved)")
    p.add_argument("--configs", nargs="+", action=Repeated, metavar="PATH",
                   help="the models and variants sets' config.json files or folders")
    p.add_argument("--batch", "-b", type=BATCH.arg, help="variants: the models' micro-batch (default 4)")
    p.add_argument("--seq", "-s", type=SEQ.arg, help="variants: the sequence length (default 2048)")
    p.add_argument("--rounds", type=ROUNDS.arg, help=f"variants: interleaved rounds (default {VARIANT_ROUNDS}); "
                                                      "--budget-ms is then each part's timed share of a round")
    _add_set_args(p)
    add_measure_args(p, mkdir=True, gpu="the GPU whose models are judged (default: the one measured; on the CPU, "
                                        "none: the set is measured and stored only)")
    p.set_defaults(run=run_validate)


VALIDATE_SEED = 2
# validate's flags that only some sets take: each with those sets. The results store's are every set's but
# variants', and a set that refuses flags for a reason of its own says it (SET_REFUSES).
_STORED = ("default", "wide", "attention", "models")
SET_FLAGS = {"configs": ("models", "variants"), "batch": ("variants",), "seq": ("variants",), "rounds": ("variants",),
             "from_db": _STORED, "db": _STORED, "force": _STORED, "cuda_graph": _STORED, "mkdir": _STORED}
SET_REFUSES = {"variants": "the variants set is measured interleaved, model by model, and not stored"}


def _refuse_unused_set_flags(args) -> None:
    """Refuse, in one line, every flag the chosen set does not use (SET_FLAGS; --seed where the set is drawn
    with none: the models set's --quick toy steps are fixed), those the same sets take named together."""
    refused: dict[tuple, list[str]] = {}  # the sets that take them: the flags
    for flag, sets in SET_FLAGS.items():
        if getattr(args, flag) not in (None, False) and args.set not in sets:
            refused.setdefault(sets, []).append("--" + flag.replace("_", "-"))
    why = [f"{', '.join(flags)}: {SET_REFUSES.get(args.set) or _only(sets, flags)}" for sets, flags in refused.items()]
    count = sum(map(len, refused.values()))
    if args.seed is not None and args.set == "models" and args.quick:
        why.append("--seed: the models set's --quick toy steps are drawn with none")
        count += 1
    if why:
        raise ShapewiseError(f"{'; '.join(why)}; leave {'it' if count == 1 else 'them'} out of --set {args.set}")


def _only(sets: tuple, flags: list) -> str:
    return f"only the {listed(sets, 'and')} set{'s' * (len(sets) > 1)} take{'s' * (len(sets) == 1)} " \
           f"{'it' if len(flags) == 1 else 'them'}"


def run_validate(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..calibrate import SET_DTYPES, summarize, validate
    from ..profile import load

    _refuse_unused_set_flags(args)
    known_gpu(args, among=SET_DTYPES)
    measuring = [flag for flag, given in (("--force", args.force), ("--cuda-graph", args.cuda_graph),
                                          ("--mkdir", args.mkdir)) if given]
    if args.from_db and measuring:  # it reads what was measured: how to measure is refused, not ignored
        raise ShapewiseError(f"{listed(measuring, 'and')}: --from-db measures nothing, it reads the store; leave "
                             f"{'it' if len(measuring) == 1 else 'them'} out, or --from-db to measure")
    args.seed = VALIDATE_SEED if args.seed is None else args.seed
    if args.borrow_profile and not args.profile:
        raise ShapewiseError("--borrow-profile lends the profile at --profile to another GPU: give --profile PATH "
                             "too, or leave --borrow-profile out")
    if args.set == "variants":
        return _validate_variants(args)
    # refused before the warning of a long run, as calibrate's are (_refuse_before_measuring): an unreadable
    # --profile, or a --db in a folder that is not there (open_store's refusal), is the run's one line
    profile = load(args.profile) if args.profile else None
    from ..store import Store

    # another GPU's profile is refused by validate before it measures, and a store made for the run is then taken
    # back (Store.__exit__); --from-db only reads: a path that names no store is refused, not made an empty one
    with Store(args.db, read_only=True) if args.from_db else open_store(args) as store:
        if args.device == "cpu" and not args.quick and not args.from_db:
            from ..judges import judge_set_cases

            num_cases = len(judge_set_cases(args.set, seed=args.seed, dtype=args.dtype, configs=args.configs).cases)
            warn(f"--device cpu without --quick measures the {args.set} set's {num_cases:,} held-out cases: hours on "
                 "a CPU, and CPU times judge no GPU's profile; `--quick` is the smoke test")
        done = validate(store=store, gpu=args.gpu, profile=profile,
                        judge_set=args.set, configs=args.configs, device=args.device, dtype=args.dtype,
                        quick=args.quick, seed=args.seed, from_store=args.from_db, warmup_ms=args.warmup_ms,
                        budget_ms=args.budget_ms, force=args.force, cuda_graph=args.cuda_graph,
                        borrow_profile=args.borrow_profile)
    if done.sweep is not None:
        rank0_only(done.sweep)
    if done.interrupted:  # judged on nothing: a part of the set is no verdict on it
        line = (f"interrupted: {done.num_cases} of {done.num_drawn} held-out cases measured, kept in the results "
                f"store {store.path}; run the same command again to measure the rest and judge them")
        if args.json:
            print(line, file=sys.stderr)
        else:
            console().print(line)
        return 130
    if done.gpu is None and args.device == "cpu":  # no verdict: under --json said on stderr, as an interruption is
        _measured_on_cpu(args, Console(stderr=True, highlight=False, soft_wrap=True) if args.json else console(),
                         "held-out cases", done.num_cases)
        return 0
    if args.json:
        print(json.dumps(done.to_json(), indent=2))
        return 0
    gpu, profile, judged = done.gpu, done.profile, done.judged
    where = f"on {gpu.name}" if done.measured_on != "the CPU" else f"measured on the CPU, judged as {gpu.name}'s"
    table = Table(show_edge=False, pad_edge=False, header_style="bold",
                  title=f"{done.num_cases} held-out cases ({args.set} set) {where}; profile: "
                        f"{profile.describe() if profile else 'none (spec-only)'}", title_justify="left")
    for col in ("cases", "n", "model", "median error", "p90 error", "max error", "Spearman"):
        table.add_column(col, justify="left" if col in ("cases", "model") else "right")
    for row in summarize(judged):
        rho = "–" if math.isnan(row["spearman"]) else f"{row['spearman']:.3f}"  # under 3 cases, or all tied
        table.add_row(row["category"], str(row["n"]), row["model"], f"{row['median_ape']:.1%}", f"{row['p90_ape']:.1%}",
                      f"{row['max_ape']:.1%}", rho)
    out = console()
    out.print(table)
    layers = [j for j in judged if j.category in ("layer", "variants")]
    if layers and profile:
        out.print("layers, calibrated: " + ", ".join(
            f"{j.label.split()[1]} {j.predicted_ms['calibrated'] / j.measured_ms - 1:+.1%}" for j in layers))
    return 0


def _validate_variants(args) -> int:
    """Real models' suggest neighbourhoods measured interleaved: predicted against measured speedups."""
    from ..hardware import get_gpu
    from ..judges import read_configs
    from ..measure import check_device, environment, measured_gpu
    from ..profile import cost_model, for_gpu, load
    from ..shapes import Workload
    from ..variants import draw, measure, toy
    from .common import check_tokens

    check_device(args.device)
    profile = load(args.profile) if args.profile else None
    if args.gpu:
        gpu = get_gpu(args.gpu)
    elif profile is not None and args.device == "cpu":  # no GPU measured: judged as the GPU the profile is for
        gpu = get_gpu(profile.gpu)
    else:
        gpu = measured_gpu(environment(args.device), device=args.device)
    if profile is not None:
        profile = for_gpu(profile, gpu.key, borrow=args.borrow_profile, device=args.device,
                          gpu_times=args.device != "cpu")
    model = cost_model(gpu, profile=profile, device=args.device)
    shapes = read_configs(args.configs)
    batch, seq = args.batch or (2 if args.quick else 4), args.seq or (32 if args.quick else 2048)
    check_tokens(batch, seq)
    workload = Workload(batch=batch, seq=seq, dtype=args.dtype, mode="train")
    drawn = draw([toy(shapes)] if args.quick else shapes, seed=args.seed, workload=workload, model=model)
    run = measure(drawn, model=model, device=args.device, rounds=args.rounds or VARIANT_ROUNDS,
                  budget_ms=args.budget_ms, warmup_ms=args.warmup_ms)
    if args.json:
        print(json.dumps(run.to_json(), indent=2))
    else:
        _print_variants(run, gpu.name)
    return 130 if run.interrupted else 0


def _print_variants(run, gpu_name: str) -> None:
    """Each model's candidates, then per model the share within 3% and Spearman's rho, then the whole."""
    from rich.table import Table

    from ..variants import WITHIN

    out = console()
    candidates = Table(show_edge=False, pad_edge=False, header_style="bold", title_justify="left",
                       title=f"variants set on {gpu_name}: speedup per token against the original, layers × layer + "
                             f"head, {run.rounds} interleaved rounds; cost model: {run.model.source}")
    for col in ("model", "picked", "candidate", "predicted", "measured", "95% interval", "pred/meas"):
        candidates.add_column(col, justify="left" if col in ("model", "picked", "candidate") else "right")
    for m in run.models:
        for i, v in enumerate(m.variants):
            name = m.name if i == 0 else ""
            if v.error:
                candidates.add_row(name, v.picked, v.label, f"{v.predicted_speedup:.3f}×", "failed", "", v.error)
                continue
            candidates.add_row(name, v.picked, v.label, f"{v.predicted_speedup:.3f}×", f"{v.measured_speedup:.3f}×",
                               f"{v.ci[0]:.3f}–{v.ci[1]:.3f}" if math.isfinite(v.ci[0]) else "–", f"{v.predicted_speedup / v.measured_speedup - 1:+.1%}")
    summary = Table(show_edge=False, pad_edge=False, header_style="bold", title_justify="left",
                    title=f"per model: predicted within {WITHIN:.0%} of measured (target 90% of candidates) and "
                          "Spearman's rho with the original (target ≥ 0.9)")
    for col in ("model", "b × s", "neighbourhood", "measured", f"within {WITHIN:.0%}", "Spearman", "note"):
        summary.add_column(col, justify="left" if col in ("model", "note") else "right")
    for m in run.models:
        done = m.measured
        summary.add_row(m.name, f"{m.workload.batch} × {m.workload.seq}", str(m.size), f"{len(done)} of {len(m.variants)}",
                        f"{m.within_share:.0%}" if done else "–", f"{m.spearman:.3f}" if done else "–", m.error)
    out.print(candidates)
    out.print(summary)
    done = run.candidates
    ranked = [m for m in run.models if m.measured]
    if done:
        out.print(f"predicted within {WITHIN:.0%} of measured: {sum(v.within for v in done)} of {len(done)} candidates "
                  f"({sum(v.within for v in done) / len(done):.0%}); Spearman ≥ 0.9: "
                  f"{sum(m.spearman >= 0.9 for m in ranked)} of {len(ranked)} models")
    if run.interrupted:
        out.print("interrupted: the models above were finished; the others were not measured")


COMMANDS = (add_calibrate, add_validate)
