"""The commands that measure on a GPU (or the CPU): bench, results, calibrate, validate and verify."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from ..errors import ShapewiseError
from .common import (
    cost_params,
    gpu_for,
    measure_cases,
    measured_gpu,
    model_and_workload,
    params_for,
    rank0_only,
    render_sweep,
    rich_console,
)


def cmd_bench_gemm(args) -> int:
    from ..bench import gemm_cases, parse_dims

    batches = parse_dims(args.b, name="-b") if getattr(args, "b", None) else [1]
    cases = gemm_cases(parse_dims(args.m, name="-m"), parse_dims(args.n, name="-n"), parse_dims(args.k, name="-k"),
                       batches=batches, layouts=args.layout, dtype=args.dtype)
    result = measure_cases(args, cases)
    gpu = gpu_for(args, result.environment)
    params = params_for(gpu)

    def predict(case):
        from ..cost import predict_gemm

        p = case.params
        if gpu is None or p["dtype"] not in gpu.tflops:
            return None
        return float(predict_gemm(p["m"], p["n"], p["k"], batch=p["batch"], layout=p["layout"], gpu=gpu,
                                  dtype=p["dtype"], params=params).time_ms)

    return render_sweep(args, result, predict)


def cmd_bench_attention(args) -> int:
    from ..bench import attention_cases, parse_dims

    cases = attention_cases(batches=parse_dims(args.batch, name="--batch"), heads=parse_dims(args.heads, name="--heads"),
                            kv_heads=parse_dims(args.kv_heads, name="--kv-heads") if args.kv_heads else None,
                            head_dims=parse_dims(args.head_dim, name="--head-dim"), seqs=parse_dims(args.seq, name="--seq"),
                            causal=args.causal, backends=args.backend, passes=args.passes, dtype=args.dtype)
    result = measure_cases(args, cases)
    gpu = gpu_for(args, result.environment)
    params = params_for(gpu)

    def predict(case):
        from ..cost import predict_attention

        p = case.params
        if gpu is None or p["backend"] not in ("default", "cudnn"):
            return None  # the cost model describes SDPA's default kernel (cuDNN on Hopper with torch 2.11)
        return predict_attention(batch=p["batch"], heads=p["heads"], kv_heads=p["kv_heads"], seq=p["seq"],
                                 head_dim=p["head_dim"], causal=p["causal"], pass_=p["pass"], gpu=gpu, dtype=p["dtype"],
                                 params=params)

    return render_sweep(args, result, predict)


def cmd_bench_comm(args) -> int:
    from rich.table import Table

    from ..bench import bench_comm, parse_sizes
    from ..store import Store

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
    rich_console().print(table)
    return 0


def _bench_tp_layer(args, shape, workload) -> int:
    """A tensor-parallel layer across the ranks torchrun started, beside its prediction (collectives included)."""
    from ..bench import bench_tp_layer
    from ..cost import predict_ops
    from ..ops import layer_ops
    from ..store import Store

    with Store(args.db) as store:
        rank, rows, env = bench_tp_layer(shape, workload, store=store, device=args.device)
    if rank != 0:
        return 0
    gpu = gpu_for(args, env)
    for row in rows:
        mode = "train" if row["pass"] == "fwdbwd" else "prefill"
        ops = layer_ops(shape, workload.replace(mode=mode))
        row["predicted_ms"] = sum(c.total_ms for c in predict_ops(ops, gpu=gpu, dtype=workload.dtype,
                                                                  params=params_for(gpu))) if gpu else None
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
    rich_console().print(table)
    return 0


def cmd_bench_layer(args) -> int:
    import dataclasses

    from ..bench import Case, op_case
    from ..cost import predict_ops

    shape, workload = model_and_workload(args)
    if workload.mode == "decode":
        raise ShapewiseError("bench layer measures a layer in train or prefill mode, not decode")
    if workload.tp > 1:
        return _bench_tp_layer(args, shape, workload)
    passes = ("fwdbwd", "fwd") if workload.mode == "train" else ("fwd",)
    layer_cases = [Case("layer", dict(model=shape.name, shape=dataclasses.asdict(shape), batch=workload.batch,
                                      seq=workload.seq, attention=workload.attention, dtype=workload.dtype,
                                      **{"pass": pass_})) for pass_ in passes]
    from ..ops import layer_ops

    ops = {pass_: layer_ops(shape, workload.replace(mode="train" if pass_ == "fwdbwd" else "prefill"))
           for pass_ in passes}
    op_cases = {op.label + "|" + pass_: op_case(op, workload.dtype) for pass_ in passes for op in ops[pass_]}
    result = measure_cases(args, layer_cases + list(op_cases.values()))
    measured = {id(case): row for case, row in result.rows}
    gpu = gpu_for(args, result.environment)
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
                                                        params=params_for(gpu))) if gpu else None
        layer_ms = row["median_ms"] if row and row.get("error") is None else None
        table.add_row(pass_, f"{layer_ms:.3f}" if layer_ms else (row or {}).get("error", "—"), f"{op_sum:.3f}",
                      f"{op_sum / layer_ms:.2f}" if layer_ms else "", f"{predicted:.3f}" if predicted else "",
                      f"{predicted / layer_ms:.2f}" if predicted and layer_ms else "", str(len(op_rows) - len(ok)))
    console = rich_console()
    console.print(table)
    console.print(result.summary())
    return 130 if result.interrupted else 0


def cmd_bench_ops(args) -> int:
    from ..bench import op_case
    from ..cost import predict_ops
    from ..ops import model_ops

    shape, workload = model_and_workload(args)
    ops = model_ops(shape, workload)
    cases = [op_case(op, workload.dtype) for op in ops]
    result = measure_cases(args, cases)
    gpu = gpu_for(args, result.environment)
    predicted = {id(c): cost.time_ms for c, cost in
                 zip(cases, predict_ops(ops, gpu=gpu, dtype=workload.dtype, params=params_for(gpu)))} if gpu else {}
    status = render_sweep(args, result, lambda case: predicted.get(id(case)))
    if not args.json:
        rows = {id(case): row for case, row in result.rows}
        pairs = [(op, rows[id(c)]["median_ms"], predicted.get(id(c))) for op, c in zip(ops, cases)
                 if id(c) in rows and rows[id(c)].get("error") is None]
        measured_ms = sum(op.count * ms for op, ms, _ in pairs)
        line = f"step, measured op by op: {measured_ms:,.2f} ms"
        if predicted:
            line += f"; predicted {sum(op.count * p for op, _, p in pairs):,.2f} ms for the same ops"
        rich_console().print(line)
    return status


def cmd_results(args) -> int:
    from ..store import Store

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


def _calibrate_comm(args) -> int:
    """Collectives on the ranks torchrun started, fitted into this GPU's profile (rank 0 writes it)."""
    from ..bench import bench_comm, parse_sizes
    from ..cost import SPEC
    from ..fit import fit_comm
    from ..hardware import get_gpu
    from ..profile import Profile, find, profile_dir, save
    from ..store import Store

    if not args.gpu:
        raise ShapewiseError("name the GPU whose profile gets the link's parameters: --gpu")
    gpu = get_gpu(args.gpu)
    with Store(args.db) as store:
        rank, rows = bench_comm(parse_sizes(["1M:1G"] if not args.quick else ["64K:1M"]),
                                ["all_reduce", "all_gather", "reduce_scatter"], store=store, device=args.device)
    if rank != 0:
        return 0
    world = int(os.environ.get("WORLD_SIZE", "1"))
    old = find(gpu)
    base = old if old is not None and not old.borrowed_for else Profile(gpu=gpu.key, params=SPEC)
    params = fit_comm([{**r, "world": world} for r in rows], gpu=gpu, params=base.params)
    profile = dataclasses.replace(base, params=params, fit={**base.fit, "comm_cases": len(rows), "comm_ranks": world},
                                  borrowed_for="", path="")
    paths = [save(profile, profile_dir() / f"{gpu.key}.json")] if not args.no_install else []
    if args.out:
        paths.append(save(profile, args.out))
    console = rich_console()
    console.print(f"{len(rows)} collectives on {world} ranks: the link reaches {params.comm_bandwidth:.0%} of its "
                  f"datasheet bandwidth, {params.comm_latency_ms * 1000:.1f} µs fixed cost per collective")
    for path in paths:
        console.print(f"profile for {gpu.key} written to {path}")
    return 0


def cmd_calibrate(args) -> int:
    if args.comm:
        return _calibrate_comm(args)
    from ..bench import sweep
    from ..calibrate import calibration_cases, fit_profile
    from ..profile import profile_dir, save
    from ..store import Store

    cases = calibration_cases(dtype=args.dtype, quick=args.quick)
    with Store(args.db) as store:
        result = rank0_only(sweep(cases, store=store, device=args.device, warmup_ms=args.warmup_ms,
                                   budget_ms=args.budget_ms, force=args.force))
    console = rich_console()
    console.print(f"{len(cases)} calibration cases: {result.summary()}")
    if result.interrupted:
        console.print("interrupted: run `shapewise calibrate` again to finish (measured cases are kept)")
        return 130
    gpu = measured_gpu(args, result.environment)
    environment = {k: result.environment.get(k) for k in ("gpu_name", "driver_version", "torch_version", "cuda_version",
                                                          "cublas_version", "cudnn_version", "sm_clock_max_mhz",
                                                          "timestamp_utc") if result.environment.get(k) is not None}
    profile = fit_profile(result.rows, gpu=gpu, dtype=args.dtype, environment=environment)
    paths = [save(profile, profile_dir() / f"{gpu.key}.json")] if not args.no_install else []
    if args.out:
        paths.append(save(profile, args.out))
    fit = profile.fit
    console.print(f"fitted on {fit['gemm_cases']} GEMMs, {fit['flash_cases']} attention and {fit['memory_cases']} "
                  f"memory-bound ops: median |log error| of the GEMMs {fit['median_abs_log_error_spec']:.3f} "
                  f"(spec model) -> {fit['median_abs_log_error_fitted']:.3f} (profile)")
    for path in paths:
        console.print(f"profile for {gpu.key} written to {path}")
    return 0


def cmd_validate(args) -> int:
    from rich.table import Table

    from ..bench import sweep
    from ..calibrate import judge, report_json, summarize, validation_cases
    from ..profile import find, load
    from ..store import Store, case_key

    cases = validation_cases(dtype=args.dtype, quick=args.quick)
    with Store(args.db) as store:
        if args.from_db:
            by_key = {case_key({"bench": c.bench, **c.params}): c for c in cases}
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
    gpu = measured_gpu(args, env)
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
    console = rich_console()
    console.print(table)
    layers = [j for j in judged if j.category in ("layer", "variants")]
    if layers and profile:
        console.print("layers, calibrated: " + ", ".join(
            f"{j.label.split()[1]} {j.predicted_ms['calibrated'] / j.measured_ms - 1:+.1%}" for j in layers))
    return 0


def cmd_verify(args) -> int:
    from rich.table import Table

    from ..hardware import get_gpu
    from ..shapes import Workload, get_model, load_config
    from ..verify import verify

    source = args.model
    shape = load_config(source) if (source.endswith(".json") or Path(source).is_dir()) else get_model(source)
    workload = Workload(batch=args.batch, seq=args.seq, tp=args.tp, dtype=args.dtype, mode="train",
                        attention=args.attention)
    gpu = get_gpu(args.gpu)
    params, model_source = cost_params(gpu, args)
    if args.config:
        other = load_config(args.config)
        candidates = [(f"config {Path(args.config).name}", other, workload)]
    else:
        from ..search import change_text, suggest

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
    rich_console().print(table)
    return 0
