"""The command line: each command parses its flags, calls one library function and renders the result."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from .errors import ShapewiseError

STRICT_SHARE = 0.01  # --strict fails on a finding that costs more than 1% of the step


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit code 2, as for every other bad input
        self.exit(2, f"shapewise: error: {message} (see `{self.prog} --help`)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


GPU_TO_PREDICT = "GPU to predict for beside each measurement (default: the one measured)"


def _add_model_args(p: argparse.ArgumentParser, *, measuring: bool = False) -> None:
    from .shapes import ATTENTION_KINDS, DTYPE_BYTES, MODES

    p.add_argument("model", nargs="?", help="a preset name (`shapewise models` lists them)")
    p.add_argument("--config", metavar="PATH", help="a Hugging Face config.json (or a folder holding one)")
    if measuring:
        p.add_argument("--gpu", help=GPU_TO_PREDICT)
    else:
        p.add_argument("--gpu", default="h200", help="GPU name (`shapewise gpus` lists them; default h200)")
    p.add_argument("--batch", "-b", type=_positive_int, default=4, help="micro-batch, sequences per step (4)")
    p.add_argument("--seq", "-s", type=_positive_int, default=2048, help="sequence length, or KV-cache length in decode (2048)")
    p.add_argument("--tp", "-t", type=_positive_int, default=1, help="tensor-parallel degree (1)")
    p.add_argument("--mode", choices=MODES, default="train", help="train (fwd+bwd), prefill or decode (train)")
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bf16", help="(bf16)")
    p.add_argument("--attention", choices=ATTENTION_KINDS, default="flash", help="fused or unfused attention (flash)")
    p.add_argument("--overlap-comm", action="store_true",
                   help="tensor-parallel collectives hidden behind compute (an upper bound on overlap)")


def _add_shape_search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params-tol", type=float, default=0.02, help="relative tolerance on the parameter count (0.02)")
    p.add_argument("--top", type=_positive_int, default=5, help="how many suggestions (5)")
    if not any(a.dest == "profile" for a in p._actions):
        p.add_argument("--profile", metavar="PATH", help="use this calibrated profile")
        p.add_argument("--spec-only", action="store_true", help="ignore profiles: the spec model alone")


def _model_and_workload(args):
    from .shapes import Workload, get_model, load_config

    if args.model and args.config:
        raise ShapewiseError("give a preset name or --config, not both")
    if not args.model and not args.config:
        raise ShapewiseError("name a model (`shapewise models` lists them) or give --config PATH")
    shape = load_config(args.config) if args.config else get_model(args.model)
    workload = Workload(batch=args.batch, seq=args.seq, tp=args.tp, dtype=args.dtype, mode=args.mode,
                        attention=args.attention, overlap_comm=args.overlap_comm)
    return shape, workload


def _console():
    from rich.console import Console

    console = Console(highlight=False)
    # Piped output has no terminal width: keep table rows whole rather than wrap them at 80 columns.
    return console if console.is_terminal else Console(highlight=False, width=180)


def cmd_check(args) -> int:
    from .report import check, render, to_json

    from .cost import SPEC
    from .profile import load

    shape, workload = _model_and_workload(args)
    if args.spec_only and args.profile:
        raise ShapewiseError("give --profile or --spec-only, not both")
    result = check(shape, workload, gpu=args.gpu, params=SPEC if args.spec_only else None,
                   profile=load(args.profile) if args.profile else None)
    if args.json:
        print(json.dumps(to_json(result), indent=2))
    else:
        render(result, _console())
    return 1 if args.strict and any(f.share > STRICT_SHARE for f in result.findings) else 0


def cmd_gpus(args) -> int:
    from rich.table import Table

    from .hardware import GPUS, NUMERIC_FIELDS, get_gpu

    console = _console()
    if args.gpu:  # one GPU, every number with its source
        gpu = get_gpu(args.gpu)
        table = Table(title=gpu.name, show_edge=False, pad_edge=False, header_style="bold", title_justify="left")
        for col in ("field", "value", "source"):
            table.add_column(col)
        for name in NUMERIC_FIELDS:
            value = getattr(gpu, name)
            text = ", ".join(f"{d} {v:g}" for d, v in value.items()) if isinstance(value, dict) else f"{value:g}"
            table.add_row(name, text, gpu.sources.get(name, ""))
        console.print(table)
        return 0
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for col in ("key", "name", "SMs", "boost MHz", "fp32", "tf32", "bf16", "fp8", "TB/s", "L2 MB", "GB"):
        table.add_column(col, justify="left" if col in ("key", "name") else "right")
    for g in GPUS:
        peaks = (f"{g.tflops[d]:,.0f}" if d in g.tflops else "—" for d in ("fp32", "tf32", "bf16", "fp8"))
        table.add_row(g.key, g.name, str(g.num_sms), str(g.boost_clock_mhz), *peaks,
                      f"{g.mem_bandwidth_gbs / 1000:.2f}", f"{g.l2_mb:g}", f"{g.memory_gb:g}")
    console.print(table)
    console.print("Dense peak TFLOP/s. `shapewise gpus NAME` shows one GPU with the source of every number.")
    return 0


def cmd_models(args) -> int:
    from rich.table import Table

    from .shapes import PRESETS

    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for col in ("name", "params", "hidden", "layers", "heads", "kv", "head dim", "ffn", "mlp", "vocab"):
        table.add_column(col, justify="left" if col in ("name", "mlp") else "right")
    for name, s in PRESETS.items():
        experts = f" ×{s.num_experts}" if s.is_moe else ""
        table.add_row(name, f"{s.params / 1e9:.2f}B", str(s.hidden), str(s.num_layers), str(s.num_heads),
                      str(s.kv_heads), str(s.d_head), f"{s.ffn_width if not s.is_moe else s.expert_width}{experts}",
                      s.mlp, str(s.vocab))
    _console().print(table)
    return 0


# ---- measuring: bench and results ------------------------------------------------------------

def _add_measure_args(p: argparse.ArgumentParser, *, gpu: bool = True) -> None:
    if gpu:
        p.add_argument("--gpu", help=GPU_TO_PREDICT)
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default cuda)")
    p.add_argument("--db", metavar="PATH", help="results store (default: $SHAPEWISE_DB or ~/.cache/shapewise/results.db)")
    p.add_argument("--force", action="store_true", help="measure again cases the store already holds")
    # 3 ms + 10 ms (and at least 10 repetitions) measured 5× faster than the co-design paper's
    # harness and repeated within 0.7% on an H200 (benchmarks/RESULTS.md).
    p.add_argument("--warmup-ms", type=float, default=3.0, help="warm-up time per case (3)")
    p.add_argument("--budget-ms", type=float, default=10.0, help="timed repetitions per case, at least 10 (10)")
    p.add_argument("--cuda-graph", action="store_true",
                   help="time replays of a CUDA graph of 20 calls: for ops of a few microseconds")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")


def _sweep(args, cases):
    from .bench import sweep
    from .store import Store

    with Store(args.db) as store:
        result = sweep(cases, store=store, device=args.device, warmup_ms=args.warmup_ms, budget_ms=args.budget_ms,
                       force=args.force, cuda_graph=args.cuda_graph)
    return _rank0_only(result)


def _rank0_only(result):
    """Under torchrun every rank measures, rank 0 alone reports: the others leave quietly here."""
    if result.rank != 0:
        _leave_process_group(130 if result.interrupted else 0)
    return result


def _params_for(gpu):
    """The cost model's parameters for a GPU: its calibrated profile's, else the spec model's."""
    from .cost import SPEC
    from .profile import choose

    return choose(gpu)[0] if gpu else SPEC


def _gpu_for(args, env):
    """The GPU to predict for: --gpu, else the measured one if the table knows it; None on a CPU."""
    from .hardware import get_gpu

    if args.gpu:
        return get_gpu(args.gpu)
    try:
        return get_gpu(env["gpu_name"]) if env.get("gpu_name") else None
    except ShapewiseError:
        return None


def _render_sweep(args, result, predict, kernels: dict | None = None) -> int:
    """One row per case: measured median and spread, rate, and the prediction beside it (and, where
    `kernels` names them, the kernels the case ran)."""
    from rich.table import Table

    from .bench import kernel_label

    if args.json:
        print(json.dumps([{**row, "predicted_ms": predict(case), **(kernels or {}).get(case.key, {})}
                          for case, row in result.rows], indent=2, default=str))
    else:
        table = Table(show_edge=False, pad_edge=False, header_style="bold")
        columns = ("case", "measured ms", "IQR", "TFLOP/s", "GB/s", "predicted ms", "error") + (("kernels",) if kernels else ())
        for col in columns:
            table.add_column(col, justify="left" if col in ("case", "error", "kernels") else "right")
        for case, row in result.rows:
            ok = row.get("error") is None
            predicted = predict(case) if ok else None
            error = f"{predicted / row['median_ms'] - 1:+.1%}" if predicted and ok else (row.get("error") or "")
            named = (kernel_label(kernels.get(case.key, {}).get("kernels", [])),) if kernels else ()
            table.add_row(case.label, f"{row['median_ms']:.4f}" if ok else "—",
                          f"{row['iqr_ms'] / row['median_ms']:.1%}" if ok else "",
                          f"{row['tflops']:,.1f}" if ok and row.get("tflops") else "",
                          f"{row['gbps']:,.0f}" if ok and row.get("gbps") else "",
                          f"{predicted:.4f}" if predicted else "", error, *named)
        console = _console()
        console.print(table)
        env = result.environment
        console.print(f"{env.get('gpu_name') or env.get('cpu_model') or args.device}, torch {env.get('torch_version')}: "
                      + result.summary())
    return 130 if result.interrupted else 0


def cmd_bench_gemm(args) -> int:
    from .bench import gemm_cases, parse_dims

    batches = parse_dims(args.b, name="-b") if getattr(args, "b", None) else [1]
    cases = gemm_cases(parse_dims(args.m, name="-m"), parse_dims(args.n, name="-n"), parse_dims(args.k, name="-k"),
                       batches=batches, layouts=args.layout, dtype=args.dtype)
    if args.kernels and not args.device.startswith("cuda"):
        raise ShapewiseError("--kernels names GPU kernels: measure on a CUDA device")
    result = _sweep(args, cases)
    kernels = None
    if args.kernels:
        from .bench import census_rows, kernel_census
        from .store import Store

        with Store(args.db) as store:
            kernel_census(cases, store=store, device=args.device, env=result.environment)
            kernels = census_rows(store, env_id=store.environment_id(result.environment))
    gpu = _gpu_for(args, result.environment)
    params = _params_for(gpu)

    def predict(case):
        from .cost import predict_gemm

        p = case.params
        if gpu is None or p["dtype"] not in gpu.tflops:
            return None
        return float(predict_gemm(p["m"], p["n"], p["k"], batch=p["batch"], layout=p["layout"], gpu=gpu,
                                  dtype=p["dtype"], params=params).time_ms)

    return _render_sweep(args, result, predict, kernels)


def cmd_bench_attention(args) -> int:
    from .bench import attention_cases, parse_dims

    cases = attention_cases(batches=parse_dims(args.batch, name="--batch"), heads=parse_dims(args.heads, name="--heads"),
                            kv_heads=parse_dims(args.kv_heads, name="--kv-heads") if args.kv_heads else None,
                            head_dims=parse_dims(args.head_dim, name="--head-dim"), seqs=parse_dims(args.seq, name="--seq"),
                            causal=args.causal, backends=args.backend, passes=args.passes, dtype=args.dtype)
    result = _sweep(args, cases)
    gpu = _gpu_for(args, result.environment)
    params = _params_for(gpu)

    def predict(case):
        from .cost import predict_attention

        p = case.params
        if gpu is None or p["backend"] not in ("default", "cudnn"):
            return None  # the cost model describes SDPA's default kernel (cuDNN on Hopper with torch 2.11)
        return predict_attention(batch=p["batch"], heads=p["heads"], kv_heads=p["kv_heads"], seq=p["seq"],
                                 head_dim=p["head_dim"], causal=p["causal"], pass_=p["pass"], gpu=gpu, dtype=p["dtype"],
                                 params=params)

    return _render_sweep(args, result, predict)


def cmd_bench_comm(args) -> int:
    from rich.table import Table

    from .bench import bench_comm, parse_sizes
    from .store import Store

    with Store(args.db) as store:
        rank, rows = bench_comm(parse_sizes(args.sizes), args.ops, store=store, device=args.device, dtype=args.dtype,
                                warmup=args.warmup, iters=args.iters)
    if rank != 0:
        return 0
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table(show_edge=False, pad_edge=False, header_style="bold",
                  title="collectives (the slowest rank's median; bus bandwidth as nccl-tests defines it)",
                  title_justify="left")
    for col in ("op", "size", "time ms", "algbw GB/s", "busbw GB/s"):
        table.add_column(col, justify="left" if col == "op" else "right")
    for r in rows:
        table.add_row(r["op"], f"{r['bytes'] / 2**20:,.2f} MiB", f"{r['median_ms']:.4f}", f"{r['algbw_gbs']:,.2f}",
                      f"{r['busbw_gbs']:,.2f}")
    _console().print(table)
    return 0


def _bench_tp_layer(args, shape, workload) -> int:
    """A tensor-parallel layer across the ranks torchrun started, beside its prediction (collectives included)."""
    from .bench import bench_tp_layer
    from .cost import predict_ops
    from .ops import layer_ops
    from .store import Store

    with Store(args.db) as store:
        rank, rows, env = bench_tp_layer(shape, workload, store=store, device=args.device)
    if rank != 0:
        return 0
    gpu = _gpu_for(args, env)
    for row in rows:
        mode = "train" if row["pass"] == "fwdbwd" else "prefill"
        ops = layer_ops(shape, workload.replace(mode=mode))
        row["predicted_ms"] = sum(c.total_ms for c in predict_ops(ops, gpu=gpu, dtype=workload.dtype,
                                                                  params=_params_for(gpu))) if gpu else None
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False, header_style="bold", title_justify="left",
                  title=f"one {shape.name} layer at t={workload.tp}, b={workload.batch} s={workload.seq}: the slowest rank")
    for col in ("pass", "measured ms", "predicted ms", "predicted/measured"):
        table.add_column(col, justify="left" if col == "pass" else "right")
    for r in rows:
        p = r["predicted_ms"]
        table.add_row(r["pass"], f"{r['measured_ms']:.3f}", f"{p:.3f}" if p else "—",
                      f"{p / r['measured_ms']:.2f}" if p else "")
    _console().print(table)
    return 0


def cmd_bench_layer(args) -> int:
    import dataclasses

    from .bench import Case, op_case
    from .cost import predict_ops

    shape, workload = _model_and_workload(args)
    if workload.mode == "decode":
        raise ShapewiseError("bench layer measures a layer in train or prefill mode, not decode")
    if workload.tp > 1:
        return _bench_tp_layer(args, shape, workload)
    passes = ("fwdbwd", "fwd") if workload.mode == "train" else ("fwd",)
    layer_cases = [Case("layer", dict(model=shape.name, shape=dataclasses.asdict(shape), batch=workload.batch,
                                      seq=workload.seq, attention=workload.attention, dtype=workload.dtype,
                                      **{"pass": pass_})) for pass_ in passes]
    from .ops import layer_ops

    ops = {pass_: layer_ops(shape, workload.replace(mode="train" if pass_ == "fwdbwd" else "prefill"))
           for pass_ in passes}
    op_cases = {op.label + "|" + pass_: op_case(op, workload.dtype) for pass_ in passes for op in ops[pass_]}
    result = _sweep(args, layer_cases + list(op_cases.values()))
    measured = {id(case): row for case, row in result.rows}
    gpu = _gpu_for(args, result.environment)
    if args.json:
        print(json.dumps([{**row, "label": case.label} for case, row in result.rows], indent=2, default=str))
        return 130 if result.interrupted else 0
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False, header_style="bold",
                  title=f"one {shape.name} layer, b={workload.batch} s={workload.seq} {workload.dtype}", title_justify="left")
    for col in ("pass", "layer ms", "sum of its ops ms", "ops/layer", "predicted ms", "predicted/layer", "ops failed"):
        table.add_column(col, justify="left" if col == "pass" else "right")
    for case in layer_cases:
        pass_ = case.params["pass"]
        row = measured.get(id(case))
        op_rows = [(op, measured.get(id(op_cases[op.label + "|" + pass_]))) for op in ops[pass_]]
        ok = [(op, r) for op, r in op_rows if r and r.get("error") is None]
        op_sum = sum(r["median_ms"] * op.count for op, r in ok)
        predicted = sum(c.total_ms for c in predict_ops(ops[pass_], gpu=gpu, dtype=workload.dtype,
                                                        params=_params_for(gpu))) if gpu else None
        layer_ms = row["median_ms"] if row and row.get("error") is None else None
        table.add_row(pass_, f"{layer_ms:.3f}" if layer_ms else (row or {}).get("error", "—"), f"{op_sum:.3f}",
                      f"{op_sum / layer_ms:.2f}" if layer_ms else "", f"{predicted:.3f}" if predicted else "",
                      f"{predicted / layer_ms:.2f}" if predicted and layer_ms else "", str(len(op_rows) - len(ok)))
    console = _console()
    console.print(table)
    console.print(result.summary())
    return 130 if result.interrupted else 0


def cmd_bench_ops(args) -> int:
    from .bench import op_case
    from .cost import predict_ops
    from .ops import model_ops

    shape, workload = _model_and_workload(args)
    ops = model_ops(shape, workload)
    cases = [op_case(op, workload.dtype) for op in ops]
    result = _sweep(args, cases)
    gpu = _gpu_for(args, result.environment)
    predicted = {id(c): cost.time_ms for c, cost in
                 zip(cases, predict_ops(ops, gpu=gpu, dtype=workload.dtype, params=_params_for(gpu)))} if gpu else {}
    status = _render_sweep(args, result, lambda case: predicted.get(id(case)))
    if not args.json:
        rows = {id(case): row for case, row in result.rows}
        pairs = [(op, rows[id(c)]["median_ms"], predicted.get(id(c))) for op, c in zip(ops, cases)
                 if id(c) in rows and rows[id(c)].get("error") is None]
        measured_ms = sum(op.count * ms for op, ms, _ in pairs)
        line = f"step, measured op by op: {measured_ms:,.2f} ms"
        if predicted:
            line += f"; predicted {sum(op.count * p for op, _, p in pairs):,.2f} ms for the same ops"
        _console().print(line)
    return status


def cmd_results(args) -> int:
    from .store import Store

    with Store(args.db) as store:
        if args.import_csv:
            count = store.import_csv(args.import_csv)
            print(f"imported {count} rows from {args.import_csv}")
            return 0
        if args.export:
            fmt = args.format or ("json" if args.export.endswith(".json") else "csv")
            count = store.export(args.export, fmt=fmt, bench=args.bench)
            print(f"wrote {count} rows to {args.export}")
            return 0
        summary = store.summary()
    print(json.dumps(summary, indent=2, default=str))
    return 0


# ---- calibration and validation ------------------------------------------------------------

def _measured_gpu(args, env):
    gpu = _gpu_for(args, env)
    if gpu is None:
        name = env.get("gpu_name") or args.device
        raise ShapewiseError(f"{name} is not in the GPU table: name the GPU to calibrate with --gpu")
    return gpu


def _calibrate_comm(args) -> int:
    """Collectives on the ranks torchrun started, fitted into this GPU's profile (rank 0 writes it)."""
    from .bench import bench_comm, parse_sizes
    from .cost import SPEC
    from .fit import fit_comm
    from .hardware import get_gpu
    from .profile import Profile, find
    from .store import Store

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
    console = _console()
    console.print(f"{len(rows)} collectives on {world} ranks: the link reaches {params.comm_bandwidth:.0%} of its "
                  f"datasheet bandwidth, {params.comm_latency_ms * 1000:.1f} µs fixed cost per collective")
    _install_profile(profile, args, console)
    return 0


def _install_profile(profile, args, console) -> None:
    """Write a fitted profile to the user's profile folder (unless --no-install) and to --out, and say where."""
    from .profile import profile_dir, save

    paths = [save(profile, profile_dir() / f"{profile.gpu}.json")] if not args.no_install else []
    if args.out:
        paths.append(save(profile, args.out))
    for path in paths:
        console.print(f"profile for {profile.gpu} written to {path}")


def cmd_calibrate(args) -> int:
    if args.comm:
        return _calibrate_comm(args)
    from .bench import census_rows, kernel_census, sweep
    from .calibrate import calibration_cases, fit_profile
    from .store import Store

    cases = calibration_cases(dtype=args.dtype, quick=args.quick, extended=args.extended)
    console = _console()
    with Store(args.db) as store:
        result = _rank0_only(sweep(cases, store=store, device=args.device, warmup_ms=args.warmup_ms,
                                   budget_ms=args.budget_ms, force=args.force))
        console.print(f"{len(cases)} calibration cases: {result.summary()}")
        if result.interrupted:
            console.print("interrupted: run `shapewise calibrate` again to finish (measured cases are kept)")
            return 130
        try:  # which kernels cuBLAS ran: the misaligned GEMMs' time model needs them
            named = kernel_census(cases, store=store, device=args.device, env=result.environment)
        except KeyboardInterrupt:
            console.print("interrupted: run `shapewise calibrate` again to finish (named kernels are kept)")
            return 130
        kernels = census_rows(store, env_id=store.environment_id(result.environment))
    if named:
        console.print(f"named the kernels of {named} GEMMs")
    gpu = _measured_gpu(args, result.environment)
    environment = {k: result.environment.get(k) for k in ("gpu_name", "driver_version", "torch_version", "cuda_version",
                                                          "cublas_version", "cudnn_version", "sm_clock_max_mhz",
                                                          "timestamp_utc") if result.environment.get(k) is not None}
    profile = fit_profile(result.rows, gpu=gpu, dtype=args.dtype, environment=environment, kernels=kernels)
    fit = profile.fit
    console.print(f"fitted on {fit['gemm_cases']} GEMMs, {fit['flash_cases']} attention and {fit['memory_cases']} "
                  f"memory-bound ops: median |log error| of the GEMMs {fit['median_abs_log_error_spec']:.3f} "
                  f"(spec model) -> {fit['median_abs_log_error_fitted']:.3f} (profile)")
    if fit["cutlass_kernels"]:
        console.print(f"misaligned GEMMs: {fit['cutlass_kernels']} CUTLASS kernel configurations fitted, "
                      f"{fit['cutlass_choices']} shapes to choose them by")
    _install_profile(profile, args, console)
    return 0


def cmd_validate(args) -> int:
    from rich.table import Table

    from .bench import sweep
    from .calibrate import judge, report_json, summarize, validation_cases
    from .profile import find, load
    from .store import Store

    cases = validation_cases(dtype=args.dtype, quick=args.quick, seed=args.seed)
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
            result = _rank0_only(sweep(cases, store=store, device=args.device, warmup_ms=args.warmup_ms,
                                       budget_ms=args.budget_ms, force=args.force))
            rows, env = result.rows, result.environment
    gpu = _measured_gpu(args, env)
    profile = load(args.profile) if args.profile else find(gpu)
    judged = judge(rows, gpu=gpu, profile=profile)
    if args.json:
        print(json.dumps({**report_json(judged), "gpu": gpu.key,
                          "profile": profile.describe() if profile else None}, indent=2))
        return 0
    table = Table(show_edge=False, pad_edge=False, header_style="bold",
                  title=f"{len(judged)} held-out cases on {gpu.name}; profile: "
                        f"{profile.describe() if profile else 'none (spec-only)'}", title_justify="left")
    for col in ("cases", "n", "model", "median error", "p90 error", "max error", "Spearman"):
        table.add_column(col, justify="left" if col in ("cases", "model") else "right")
    for row in summarize(judged):
        table.add_row(row["category"], str(row["n"]), row["model"], f"{row['median_ape']:.1%}", f"{row['p90_ape']:.1%}",
                      f"{row['max_ape']:.1%}", f"{row['spearman']:.3f}")
    console = _console()
    console.print(table)
    layers = [j for j in judged if j.category in ("layer", "variants")]
    if layers and profile:
        console.print("layers, calibrated: " + ", ".join(
            f"{j.label.split()[1]} {j.predicted_ms['calibrated'] / j.measured_ms - 1:+.1%}" for j in layers))
    return 0


# ---- faster shapes: suggest, search, verify ---------------------------------------------------


def _cost_params(gpu, args):
    from .profile import choose

    return choose(gpu, path=getattr(args, "profile", None), spec_only=getattr(args, "spec_only", False))


def _suggestions(args):
    from .hardware import get_gpu
    from .search import suggest

    shape, workload = _model_and_workload(args)
    gpu = get_gpu(args.gpu)
    params, source = _cost_params(gpu, args)
    keep = tuple(k.strip() for k in args.keep.split(",") if k.strip()) if args.keep else ()
    result = suggest(shape, workload, gpu=gpu, params=params, params_tol=args.params_tol, keep=keep,
                     aspect_band=args.aspect_band, top=args.top)
    return shape, workload, gpu, source, result


def cmd_suggest(args) -> int:
    from rich.table import Table

    from .search import change_text, megatron_args
    from .shapes import load_config, to_hf_config

    shape, workload, gpu, source, result = _suggestions(args)
    chosen = None
    if args.emit_config or args.emit:
        if not result.suggestions:
            raise ShapewiseError("no suggestion to emit: the neighbourhood holds no faster shape")
        if not 1 <= args.pick <= len(result.suggestions):
            raise ShapewiseError(f"--pick must be between 1 and {len(result.suggestions)}")
        chosen = result.suggestions[args.pick - 1].candidate
    if args.emit_config:
        base = json.loads(_config_text(args.config)) if args.config else None
        Path(args.emit_config).write_text(json.dumps(to_hf_config(chosen.shape, base=base), indent=2) + "\n")
        load_config(args.emit_config)  # what we write must read back
    if args.json:
        print(json.dumps({"model": shape.name, "params": shape.params, "gpu": gpu.key, "cost_model": source,
                          "original_ms_per_token": result.original.gpu_ms_per_token,
                          "findings": [f.rule for f in result.findings], "considered": result.considered,
                          "suggestions": [{"rank": i, "changes": {k: list(v) for k, v in s.changes.items()},
                                           "params": s.candidate.params, "params_delta": s.params_delta,
                                           "predicted_speedup": s.speedup, "fixes": list(s.fixes),
                                           "batch": s.candidate.workload.batch}
                                          for i, s in enumerate(result.suggestions, 1)]}, indent=2))
        return 0
    if args.emit == "megatron":
        print(megatron_args(chosen.shape, chosen.workload))
        return 0
    console = _console()
    o = result.original
    console.print(f"[bold]{shape.name}[/bold]: {shape.params / 1e9:.3f}B params, predicted "
                  f"{1000 / o.gpu_ms_per_token:,.0f} tokens/s per GPU on {gpu.name} ({workload.mode}, b={workload.batch} "
                  f"s={workload.seq} t={workload.tp}); cost model: {source}")
    if result.findings:
        console.print("findings: " + "; ".join(f"{f.title} ({f.share:.1%})" for f in result.findings))
    if not result.suggestions:
        console.print(f"[green]No faster shape within {args.params_tol:.0%} of the parameters "
                      f"({result.considered} considered).[/green]")
        return 0
    table = Table(show_edge=False, pad_edge=False, header_style="bold",
                  title=f"{len(result.suggestions)} fastest of {result.considered} shapes within "
                        f"{args.params_tol:.0%} of the parameters ({result.seconds:.2f} s)", title_justify="left")
    for col in ("#", "changes", "params", "Δ params", "predicted speedup", "fixes"):
        table.add_column(col, justify="left" if col in ("changes", "fixes") else "right")
    for i, sug in enumerate(result.suggestions, 1):
        table.add_row(str(i), change_text(sug.changes), f"{sug.candidate.params / 1e9:.3f}B", f"{sug.params_delta:+.2%}",
                      f"{sug.speedup:.3f}×", ", ".join(sug.fixes))
    console.print(table)
    if args.emit_config:
        console.print(f"suggestion {args.pick} written to {args.emit_config}")
    return 0


def _config_text(path: str) -> str:
    target = Path(path)
    return (target / "config.json" if target.is_dir() else target).read_text()


def cmd_search(args) -> int:
    from rich.table import Table

    from .hardware import get_gpu
    from .search import search
    from .shapes import Workload

    gpu = get_gpu(args.gpu)
    params, source = _cost_params(gpu, args)
    workload = Workload(batch=args.batch, seq=args.seq, tp=args.tp, dtype=args.dtype)
    result = search(params_target=args.params, gpu=gpu, workload=workload, vocab=args.vocab, mlp=args.mlp,
                    attention=args.attention_kind, params_tol=args.params_tol, top=args.top, cost_params=params)
    rows = lambda cands: [{"name": c.shape.name, "params": c.params, "hidden": c.shape.hidden,  # noqa: E731
                           "layers": c.shape.num_layers, "heads": c.shape.num_heads, "kv_heads": c.shape.kv_heads,
                           "ffn": c.shape.ffn_width, "tokens_per_s_per_gpu": 1000 / c.gpu_ms_per_token} for c in cands]
    if args.json:
        print(json.dumps({"screened": result.screened, "predicted": result.predicted, "seconds": result.seconds,
                          "pareto": rows(result.pareto), "top": rows(result.top), "cost_model": source}, indent=2))
        return 0
    console = _console()
    console.print(f"{result.screened:,} shapes screened ({result.screen_rate:,.0f} per second), {result.predicted} "
                  f"within {args.params_tol:.0%} of {args.params / 1e9:g}B params predicted on {gpu.name} in "
                  f"{result.seconds:.2f} s; cost model: {source}")
    for title, cands in (("Pareto front: more parameters cost speed", result.pareto), ("fastest", result.top)):
        table = Table(title=title, show_edge=False, pad_edge=False, header_style="bold", title_justify="left")
        for col in ("params", "hidden", "layers", "heads", "kv", "head dim", "ffn", "tokens/s per GPU"):
            table.add_column(col, justify="right")
        for c in cands:
            s = c.shape
            table.add_row(f"{c.params / 1e9:.3f}B", str(s.hidden), str(s.num_layers), str(s.num_heads),
                          str(s.kv_heads), str(s.d_head), str(s.ffn_width), f"{1000 / c.gpu_ms_per_token:,.0f}")
        console.print(table)
    return 0


def cmd_verify(args) -> int:
    from rich.table import Table

    from .hardware import get_gpu
    from .shapes import Workload, get_model, load_config
    from .verify import verify

    source = args.model
    shape = load_config(source) if (source.endswith(".json") or Path(source).is_dir()) else get_model(source)
    workload = Workload(batch=args.batch, seq=args.seq, tp=args.tp, dtype=args.dtype, mode="train",
                        attention=args.attention)
    gpu = get_gpu(args.gpu)
    params, model_source = _cost_params(gpu, args)
    if args.config:
        other = load_config(args.config)
        candidates = [(f"config {Path(args.config).name}", other, workload)]
    else:
        from .search import change_text, suggest

        result = suggest(shape, workload, gpu=gpu, params=params, params_tol=args.params_tol, top=args.top)
        picked = list(enumerate(result.suggestions, 1))
        if args.suggestion:
            if not 1 <= args.suggestion <= len(picked):
                raise ShapewiseError(f"--suggestion must be between 1 and {len(picked)}")
            picked = [picked[args.suggestion - 1]]
        if not picked:
            raise ShapewiseError("no suggestion to verify: the neighbourhood holds no faster shape")
        candidates = [(f"#{i} " + change_text(s.changes), s.candidate.shape, s.candidate.workload) for i, s in picked]
    results = verify((shape, workload), candidates, gpu=gpu, params=params, device=args.device, rounds=args.rounds,
                     mode=args.measure)
    if args.json:
        print(json.dumps([{"candidate": v.label, "mode": v.mode, "predicted_speedup": v.predicted_speedup,
                           "measured_speedup": v.measured_speedup, "ci": [v.ci_low, v.ci_high],
                           "layer_ms": v.layer_ms, "head_ms": v.head_ms} for v in results], indent=2))
        return 0
    whole = results[0].mode == "model"
    what = "whole training steps" if whole else "layers × layer + head (the whole models do not fit at once)"
    table = Table(show_edge=False, pad_edge=False, header_style="bold", title_justify="left",
                  title=f"{shape.name} on {args.device}: {what}, per token, measured interleaved "
                        f"({args.rounds} rounds); cost model: {model_source}")
    columns = ("candidate", "predicted speedup", "measured speedup", "95% interval",
               *(("step ms",) if whole else ("layer ms", "head ms")))
    for col in columns:
        table.add_column(col, justify="left" if col == "candidate" else "right")
    for v in results:
        times = (f"{v.layer_ms:.3f}",) if whole else (f"{v.layer_ms:.3f}", f"{v.head_ms:.3f}")
        table.add_row(v.label, f"{v.predicted_speedup:.3f}×", f"{v.measured_speedup:.3f}×",
                      f"{v.ci_low:.3f}–{v.ci_high:.3f}", *times)
    _console().print(table)
    return 0


# ---- figures and reports ------------------------------------------------------------------

def _measured_rows(db):
    from .store import Store

    if not db:
        return None
    with Store(db) as store:
        return store.rows()


def cmd_plot(args) -> int:
    from . import plots
    from .bench import parse_dims
    from .hardware import get_gpu

    gpu = get_gpu(args.gpu)
    params, _ = _cost_params(gpu, args)
    if args.kind == "gemm":
        data = plots.gemm_data(gpu=gpu, params=params, dim=args.dim, values=parse_dims(args.values, name="--values"),
                               m=args.m, n=args.n, k=args.k, layout=args.layout, dtype=args.dtype,
                               measured=_measured_rows(args.db))
        fig = plots.gemm_figure(data)
    elif args.kind == "attention":
        data = plots.attention_data(gpu=gpu, params=params, hiddens=parse_dims(args.hiddens, name="--hiddens"),
                                    heads=args.heads, seq=args.seq, batch=args.batch, kind=args.attention_kind,
                                    dtype=args.dtype, measured=_measured_rows(args.db))
        fig = plots.attention_figure(data)
    elif args.kind == "attention-heads":
        data = plots.attention_heads_data(gpu=gpu, params=params, head_dim=args.head_dim,
                                          head_counts=parse_dims(args.head_counts, name="--head-counts"), seq=args.seq,
                                          batch=args.batch, dtype=args.dtype, measured=_measured_rows(args.db))
        fig = plots.attention_figure(data)
    elif args.kind == "layer":
        data = plots.layer_data(gpu=gpu, params=params, hiddens=parse_dims(args.hiddens, name="--hiddens"),
                                head_counts=parse_dims(args.head_counts, name="--head-counts"), seq=args.seq,
                                batch=args.batch, mlp=args.mlp, dtype=args.dtype, measured=_measured_rows(args.db))
        fig = plots.layer_figure(data)
    else:
        shape, workload = _model_and_workload(args)
        if args.kind == "breakdown":
            modes = {mode: workload.replace(mode=mode) for mode in ("train", "prefill", "decode")}
            fig = plots.breakdown_figure(plots.breakdown_data(shape, gpu=gpu, params=params, workloads=modes))
        elif args.verified:  # a `shapewise verify --json` run: its predictions and measurements as they were
            try:
                rows = json.loads(Path(args.verified).read_text())
                data = plots.verified_data(rows, model=shape.name, gpu=gpu, dtype=workload.dtype)
            except (OSError, ValueError, KeyError, TypeError) as err:
                raise ShapewiseError(f"{args.verified} is not the output of `shapewise verify --json` ({err})") from None
            fig = plots.suggestions_figure(data)
        else:
            from .search import suggest

            result = suggest(shape, workload, gpu=gpu, params=params, top=args.top)
            fig = plots.suggestions_figure(plots.suggestions_data(result, gpu=gpu))
    path = plots.save(fig, args.out)
    print(f"wrote {path}")
    return 0


def cmd_report(args) -> int:
    from .cost import SPEC
    from .document import write_report
    from .profile import load
    from .store import Store, default_path

    shape, workload = _model_and_workload(args)
    if args.spec_only and args.profile:
        raise ShapewiseError("give --profile or --spec-only, not both")
    db = args.db or (default_path() if default_path().exists() else None)  # never create a store just to read it
    store = Store(db) if db else None
    try:
        written = write_report(shape, workload, out=args.out, gpu=args.gpu, fmt=args.format, top=args.top,
                               params=SPEC if args.spec_only else None,
                               profile=load(args.profile) if args.profile else None, store=store,
                               model_arg=args.model or ["--config", args.config])
    finally:
        if store:
            store.close()
    print("wrote " + ", ".join(map(str, written)))
    return 0


def _add_set_args(p: argparse.ArgumentParser) -> None:
    """calibrate's and validate's designed sets: their dtype, and a toy-sized one for smoke tests."""
    p.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    p.add_argument("--quick", action="store_true", help="a toy-sized set (a smoke test, e.g. on the CPU)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="shapewise", description="Is this transformer's shape fast on this GPU?")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("check", help="predict every op of a step and list the rules the shape breaks")
    _add_model_args(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--strict", action="store_true", help="exit 1 when a finding costs more than 1%% of the step")
    p.add_argument("--profile", metavar="PATH", help="use this calibrated profile (default: the GPU's own or the shipped one)")
    p.add_argument("--spec-only", action="store_true", help="ignore profiles: the spec model alone")
    p.set_defaults(run=cmd_check)
    p = sub.add_parser("gpus", help="list the GPUs and their datasheet numbers")
    p.add_argument("gpu", nargs="?", help="show one GPU with the source of every number")
    p.set_defaults(run=cmd_gpus)
    sub.add_parser("models", help="list the model presets").set_defaults(run=cmd_models)

    bench = sub.add_parser("bench", help="measure ops on a GPU (or the CPU) and store the results")
    kinds = bench.add_subparsers(dest="bench", required=True, parser_class=_Parser)
    from .shapes import DTYPE_BYTES

    for name in ("gemm", "bmm"):
        p = kinds.add_parser(name, help=f"time torch.matmul over ranges of dims ({name})")
        if name == "bmm":
            p.add_argument("-b", nargs="+", required=True, help="batch sizes")
        for dim in ("m", "n", "k"):
            p.add_argument(f"-{dim}", nargs="+", required=True, help=f"{dim} values or START:STOP:STEP ranges")
        p.add_argument("--layout", nargs="+", choices=("nn", "nt", "tn"), default=["nn"],
                       help="nn: x @ W; nt: x @ W.T (a linear layer); tn: a weight gradient (default nn)")
        p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bf16")
        p.add_argument("--kernels", action="store_true",
                       help="also name the kernels cuBLAS runs for each shape (one more call each, under torch.profiler)")
        _add_measure_args(p)
        p.set_defaults(run=cmd_bench_gemm)
    from .bench import ATTENTION_BACKENDS, PASSES

    from .bench import COLLECTIVES

    p = kinds.add_parser("comm", help="time collectives across the ranks torchrun started (NCCL on GPUs, gloo on CPUs)")
    p.add_argument("--sizes", nargs="+", default=["1M:1G"], help="bytes: 4096, 64K, 16M, 1G, or doubling ranges (1M:1G)")
    p.add_argument("--ops", nargs="+", choices=tuple(COLLECTIVES), default=list(COLLECTIVES))
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    p.add_argument("--warmup", type=_positive_int, default=5, help="untimed calls per case (5)")
    p.add_argument("--iters", type=_positive_int, default=20, help="timed calls per case (20)")
    p.add_argument("--device", default="cuda", help="cuda (one GPU per rank) or cpu (gloo)")
    p.add_argument("--db", metavar="PATH")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_bench_comm)

    p = kinds.add_parser("attention", help="time fused and unfused attention, forward and forward+backward")
    p.add_argument("--heads", nargs="+", required=True)
    p.add_argument("--kv-heads", nargs="+", help="kv heads (grouped-query attention; default: as many as heads)")
    p.add_argument("--head-dim", nargs="+", required=True)
    p.add_argument("--seq", nargs="+", required=True)
    p.add_argument("--batch", nargs="+", default=["4"])
    p.add_argument("--causal", action=argparse.BooleanOptionalAction, default=True, help="causal mask (default on)")
    p.add_argument("--backend", nargs="+", choices=ATTENTION_BACKENDS, default=["default", "unfused"],
                   help="SDPA backends (flash, efficient, cudnn, math, default) and the unfused path")
    p.add_argument("--pass", dest="passes", nargs="+", choices=PASSES, default=list(PASSES))
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    _add_measure_args(p)
    p.set_defaults(run=cmd_bench_attention)
    for name, fn, text in (("layer", cmd_bench_layer, "time one transformer layer and each of its ops alone"),
                           ("ops", cmd_bench_ops, "time every op that `shapewise check` lists, beside its prediction")):
        p = kinds.add_parser(name, help=text)
        _add_model_args(p, measuring=True)
        _add_measure_args(p, gpu=False)
        p.set_defaults(run=fn)

    p = sub.add_parser("calibrate", help="measure a designed set on this GPU and fit its profile (about 2 minutes on an H200)")
    p.add_argument("--out", metavar="PATH", help="also write the profile here")
    p.add_argument("--extended", type=_positive_int, nargs="?", const=1, metavar="SEED",
                   help="and 3600 random GEMMs and batched GEMMs more, drawn with SEED (1), for a profile that tells "
                        "better which kernel cuBLAS runs for a misaligned shape (about 2 minutes more on an H200)")
    p.add_argument("--no-install", action="store_true", help="do not write it to the user's profile folder")
    _add_set_args(p)
    p.add_argument("--comm", action="store_true",
                   help="under torchrun: time the collectives and fit the GPU link's parameters into the profile")
    _add_measure_args(p)
    p.set_defaults(run=cmd_calibrate)
    p = sub.add_parser("validate", help="measure a held-out set and compare calibrated, spec-only and roofline models")
    p.add_argument("--profile", metavar="PATH", help="the profile to judge (default: the one predictions use)")
    p.add_argument("--from-db", action="store_true", help="use measurements already in the store; no GPU needed")
    p.add_argument("--seed", type=_positive_int, default=2,
                   help="draw the held-out set with this seed (2); no case of the calibration set is ever drawn")
    _add_set_args(p)
    _add_measure_args(p)
    p.set_defaults(run=cmd_validate)

    p = sub.add_parser("suggest", help="faster shapes of about the same size, ranked by predicted time per token")
    _add_model_args(p)
    _add_shape_search_args(p)
    p.add_argument("--keep", metavar="FIELDS", help="fields not to change: hidden,layers,heads,kv_heads,head_dim,ffn,vocab,batch")
    p.add_argument("--aspect-band", type=float, default=1.5,
                   help="hidden/layers may differ from the original's by at most this factor (1.5)")
    p.add_argument("--emit-config", metavar="PATH", help="write suggestion --pick as a Hugging Face config.json")
    p.add_argument("--emit", choices=("megatron",), help="print suggestion --pick as Megatron-LM / GPT-NeoX arguments")
    p.add_argument("--pick", type=_positive_int, default=1, help="which suggestion to emit (1)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_suggest)

    p = sub.add_parser("search", help="design from a parameter budget: the Pareto front of size against speed")
    p.add_argument("--params", type=float, required=True, help="parameter budget, e.g. 7e9")
    p.add_argument("--gpu", default="h200")
    p.add_argument("--seq", "-s", type=_positive_int, default=4096)
    p.add_argument("--batch", "-b", type=_positive_int, default=1)
    p.add_argument("--tp", "-t", type=_positive_int, default=1)
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp8"), default="bf16")
    p.add_argument("--vocab", type=_positive_int, default=32000, help="padded to a multiple of 64·t (32000)")
    p.add_argument("--mlp", choices=("swiglu", "geglu", "gelu", "relu"), default="swiglu")
    p.add_argument("--attention-kind", choices=("mha", "gqa", "mqa"), default="gqa", help="gqa: 8 query heads per kv head")
    p.add_argument("--params-tol", type=float, default=0.05, help="relative tolerance on the budget (0.05)")
    p.add_argument("--top", type=_positive_int, default=10)
    p.add_argument("--profile", metavar="PATH")
    p.add_argument("--spec-only", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_search)

    p = sub.add_parser("verify", help="measure a model against its suggestions (or another config) on the GPU")
    p.add_argument("model", help="a preset name or a config.json")
    p.add_argument("--config", metavar="OTHER", help="verify against this config.json instead of the suggestions")
    p.add_argument("--suggestion", type=_positive_int, help="verify only suggestion N (default: all of --top)")
    p.add_argument("--gpu", default="h200", help="GPU whose cost model gives the predicted speedups (h200)")
    p.add_argument("--batch", "-b", type=_positive_int, default=4)
    p.add_argument("--seq", "-s", type=_positive_int, default=2048)
    p.add_argument("--tp", "-t", type=_positive_int, default=1)
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    p.add_argument("--attention", choices=("flash", "unfused"), default="flash")
    p.add_argument("--device", default="cuda")
    p.add_argument("--rounds", type=_positive_int, default=15, help="interleaved rounds (15)")
    p.add_argument("--measure", choices=("auto", "model", "layer"), default="auto",
                   help="whole training steps, or layers × layer + head (auto: whole steps where all fit at once)")
    _add_shape_search_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_verify)

    p = sub.add_parser("results", help="summarize the results store, or export it to CSV or JSON")
    p.add_argument("--db", metavar="PATH", help="results store (default: $SHAPEWISE_DB or ~/.cache/shapewise/results.db)")
    p.add_argument("--export", metavar="PATH", help="write the rows to PATH (.csv or .json)")
    p.add_argument("--format", choices=("csv", "json"), help="export format (default: from the file name)")
    p.add_argument("--bench", help="only this benchmark (gemm, bmm, attention, layer, op)")
    p.add_argument("--import", dest="import_csv", metavar="FILE.csv",
                   help="read a CSV export (another machine's, say) into the store")
    p.set_defaults(run=cmd_results)

    p = sub.add_parser("plot", help="the co-design paper's figures, predicted and measured (PNG or SVG)")
    kinds = p.add_subparsers(dest="kind", required=True, parser_class=_Parser)
    for name, text in (("gemm", "GEMM throughput against one swept dim, tile and wave boundaries marked"),
                       ("attention", "attention throughput against hidden size, by the power of two dividing h/a"),
                       ("attention-heads", "attention throughput at fixed head dim, by head count"),
                       ("layer", "layer throughput against hidden size, one series per head count")):
        q = kinds.add_parser(name, help=text)
        q.add_argument("--gpu", default="h200")
        q.add_argument("--dtype", choices=("bf16", "fp16", "fp32", "tf32", "fp8"), default="bf16")
        q.add_argument("--db", metavar="PATH", help="overlay the measurements of this results store")
        q.add_argument("--out", required=True, metavar="FILE", help=".png or .svg")
        q.add_argument("--profile", metavar="PATH")
        q.add_argument("--spec-only", action="store_true")
        if name == "gemm":
            q.add_argument("--dim", choices=("m", "n", "k"), default="n", help="the swept dim (n)")
            q.add_argument("--values", nargs="+", required=True, help="its values or START:STOP:STEP ranges")
            for dim in ("m", "n", "k"):
                q.add_argument(f"-{dim}", type=_positive_int, default=8192, help="the fixed dims (8192)")
            q.add_argument("--layout", choices=("nn", "nt", "tn"), default="nn")
        else:
            q.add_argument("--seq", type=_positive_int, default=2048)
            q.add_argument("--batch", type=_positive_int, default=4)
        if name == "attention":
            q.add_argument("--hiddens", nargs="+", required=True)
            q.add_argument("--heads", type=_positive_int, required=True)
            q.add_argument("--kind", dest="attention_kind", choices=("flash", "bmm"), default="flash",
                           help="fused attention, or the score BMM of unfused attention (flash)")
        if name == "attention-heads":
            q.add_argument("--head-dim", type=_positive_int, required=True)
            q.add_argument("--head-counts", nargs="+", required=True)
        if name == "layer":
            q.add_argument("--hiddens", nargs="+", required=True)
            q.add_argument("--head-counts", nargs="+", required=True)
            q.add_argument("--mlp", choices=("gelu", "relu", "swiglu", "geglu"), default="gelu")
        q.set_defaults(run=cmd_plot)
    for name, text in (("breakdown", "a model's step time by op: train, prefill and decode side by side"),
                       ("suggestions", "a model against its top suggestions: predicted speedups")):
        q = kinds.add_parser(name, help=text)
        _add_model_args(q)
        q.add_argument("--out", required=True, metavar="FILE", help=".png or .svg")
        q.add_argument("--top", type=_positive_int, default=5)
        if name == "suggestions":
            q.add_argument("--verified", metavar="JSON", help="draw a `shapewise verify --json` run: measured beside predicted")
        q.add_argument("--profile", metavar="PATH")
        q.add_argument("--spec-only", action="store_true")
        q.set_defaults(run=cmd_plot)

    p = sub.add_parser("report", help="a shareable self-contained HTML (or Markdown) report of a model on a GPU")
    _add_model_args(p)
    p.add_argument("--out", required=True, metavar="FILE", help="report.html, or report.md with figures beside it")
    p.add_argument("--format", choices=("html", "md"), help="default: from the file name")
    p.add_argument("--db", metavar="PATH", help="include measured-vs-predicted from this results store")
    p.add_argument("--top", type=_positive_int, default=5, help="suggestions to include (5)")
    p.add_argument("--profile", metavar="PATH")
    p.add_argument("--spec-only", action="store_true")
    p.set_defaults(run=cmd_report)
    return parser


def _leave_process_group(code: int) -> int:
    """Under torchrun: part from the other ranks and end the process here. Left to interpreter
    shutdown, torch's collective threads can abort it ("terminate called without an active
    exception"), turning a finished sweep into a failed rank."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return code
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _leave_process_group(args.run(args))
    except ShapewiseError as err:
        print(f"shapewise: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("shapewise: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
