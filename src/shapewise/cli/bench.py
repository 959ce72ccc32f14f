"""`shapewise bench`: measure GEMMs, attention, collectives, a layer or a model's ops, each beside its
prediction."""

from __future__ import annotations

import argparse
import json

from ..errors import ShapewiseError
from .common import (Parser, add_db_arg, add_measure_args, add_model_args, console, cost_model, gpu_for,
                     model_and_workload, positive_int, rank0_only)


def add_bench(sub) -> None:
    bench = sub.add_parser("bench", help="measure ops on a GPU (or the CPU) and store the results")
    kinds = bench.add_subparsers(dest="bench", required=True, parser_class=Parser)
    for add in (add_gemm, add_comm, add_attention, add_layer, add_ops):
        add(kinds)


def _sweep(args, cases):
    from ..bench import sweep
    from ..store import Store

    with Store(args.db) as store:
        result = sweep(cases, store=store, device=args.device, warmup_ms=args.warmup_ms, budget_ms=args.budget_ms,
                       force=args.force, cuda_graph=args.cuda_graph)
    return rank0_only(result)


def _render_sweep(args, result, predict, kernels: dict | None = None) -> int:
    """One row per case: measured median and spread, rate, and the prediction beside it (and, where
    `kernels` names them, the kernels the case ran)."""
    from rich.table import Table

    from ..bench import kernel_label

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
        out = console()
        out.print(table)
        env = result.environment
        out.print(f"{env.get('gpu_name') or env.get('cpu_model') or args.device}, torch {env.get('torch_version')}: "
                      + result.summary())
    return 130 if result.interrupted else 0


def add_gemm(kinds) -> None:
    from ..shapes import DTYPE_BYTES

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
        add_measure_args(p)
        p.set_defaults(run=run_bench_gemm)


def run_bench_gemm(args) -> int:
    from ..bench import gemm_cases, parse_dims

    batches = parse_dims(args.b, name="-b") if getattr(args, "b", None) else [1]
    cases = gemm_cases(parse_dims(args.m, name="-m"), parse_dims(args.n, name="-n"), parse_dims(args.k, name="-k"),
                       batches=batches, layouts=args.layout, dtype=args.dtype)
    if args.kernels and not args.device.startswith("cuda"):
        raise ShapewiseError("--kernels names GPU kernels: measure on a CUDA device")
    result = _sweep(args, cases)
    kernels = None
    if args.kernels:
        from ..bench import census_rows, kernel_census
        from ..store import Store

        with Store(args.db) as store:
            kernel_census(cases, store=store, device=args.device, env=result.environment)
            kernels = census_rows(store, env_id=store.environment_id(result.environment))
    gpu = gpu_for(args, result.environment)
    params = cost_model(args, gpu).params

    def predict(case):
        from ..cost import predict_gemm

        p = case.params
        if gpu is None or p["dtype"] not in gpu.tflops:
            return None
        return float(predict_gemm(p["m"], p["n"], p["k"], batch=p["batch"], layout=p["layout"], gpu=gpu,
                                  dtype=p["dtype"], params=params).time_ms)

    return _render_sweep(args, result, predict, kernels)


def add_attention(kinds) -> None:
    from ..bench import ATTENTION_BACKENDS, PASSES

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
    add_measure_args(p)
    p.set_defaults(run=run_bench_attention)


def run_bench_attention(args) -> int:
    from ..bench import attention_cases, parse_dims

    cases = attention_cases(batches=parse_dims(args.batch, name="--batch"), heads=parse_dims(args.heads, name="--heads"),
                            kv_heads=parse_dims(args.kv_heads, name="--kv-heads") if args.kv_heads else None,
                            head_dims=parse_dims(args.head_dim, name="--head-dim"), seqs=parse_dims(args.seq, name="--seq"),
                            causal=args.causal, backends=args.backend, passes=args.passes, dtype=args.dtype)
    result = _sweep(args, cases)
    gpu = gpu_for(args, result.environment)
    params = cost_model(args, gpu).params

    def predict(case):
        from ..cost import predict_attention

        p = case.params
        if gpu is None or p["backend"] not in ("default", "cudnn"):
            return None  # the cost model describes SDPA's default kernel (cuDNN on Hopper with torch 2.11)
        return predict_attention(batch=p["batch"], heads=p["heads"], kv_heads=p["kv_heads"], seq=p["seq"],
                                 head_dim=p["head_dim"], causal=p["causal"], pass_=p["pass"], gpu=gpu, dtype=p["dtype"],
                                 params=params)

    return _render_sweep(args, result, predict)


def add_comm(kinds) -> None:
    from ..bench import COLLECTIVES

    p = kinds.add_parser("comm", help="time collectives across the ranks torchrun started (NCCL on GPUs, gloo on CPUs)")
    p.add_argument("--sizes", nargs="+", default=["1M:1G"], help="bytes: 4096, 64K, 16M, 1G, or doubling ranges (1M:1G)")
    p.add_argument("--ops", nargs="+", choices=tuple(COLLECTIVES), default=list(COLLECTIVES))
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    p.add_argument("--warmup", type=positive_int, default=5, help="untimed calls per case (5)")
    p.add_argument("--iters", type=positive_int, default=20, help="timed calls per case (20)")
    p.add_argument("--device", default="cuda", help="cuda (one GPU per rank) or cpu (gloo)")
    add_db_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_bench_comm)


def run_bench_comm(args) -> int:
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
    console().print(table)
    return 0


def add_layer(kinds) -> None:
    p = kinds.add_parser("layer", help="time one transformer layer and each of its ops alone")
    add_model_args(p, measuring=True)
    add_measure_args(p, gpu=False)
    p.set_defaults(run=run_bench_layer)


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
                                                                  params=cost_model(args, gpu).params)) if gpu else None
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
    console().print(table)
    return 0


def run_bench_layer(args) -> int:
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
    result = _sweep(args, layer_cases + list(op_cases.values()))
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
                                                        params=cost_model(args, gpu).params)) if gpu else None
        layer_ms = row["median_ms"] if row and row.get("error") is None else None
        table.add_row(pass_, f"{layer_ms:.3f}" if layer_ms else (row or {}).get("error", "—"), f"{op_sum:.3f}",
                      f"{op_sum / layer_ms:.2f}" if layer_ms else "", f"{predicted:.3f}" if predicted else "",
                      f"{predicted / layer_ms:.2f}" if predicted and layer_ms else "", str(len(op_rows) - len(ok)))
    out = console()
    out.print(table)
    out.print(result.summary())
    return 130 if result.interrupted else 0


def add_ops(kinds) -> None:
    p = kinds.add_parser("ops", help="time every op that `shapewise check` lists, beside its prediction")
    add_model_args(p, measuring=True)
    add_measure_args(p, gpu=False)
    p.set_defaults(run=run_bench_ops)


def run_bench_ops(args) -> int:
    from ..bench import op_case
    from ..cost import predict_ops
    from ..ops import model_ops

    shape, workload = model_and_workload(args)
    ops = model_ops(shape, workload)
    cases = [op_case(op, workload.dtype) for op in ops]
    result = _sweep(args, cases)
    gpu = gpu_for(args, result.environment)
    predicted = {id(c): cost.time_ms for c, cost in
                 zip(cases, predict_ops(ops, gpu=gpu, dtype=workload.dtype, params=cost_model(args, gpu).params))} if gpu else {}
    status = _render_sweep(args, result, lambda case: predicted.get(id(case)))
    if not args.json:
        rows = {id(case): row for case, row in result.rows}
        pairs = [(op, rows[id(c)]["median_ms"], predicted.get(id(c))) for op, c in zip(ops, cases)
                 if id(c) in rows and rows[id(c)].get("error") is None]
        measured_ms = sum(op.count * ms for op, ms, _ in pairs)
        line = f"step, measured op by op: {measured_ms:,.2f} ms"
        if predicted:
            line += f"; predicted {sum(op.count * p for op, _, p in pairs):,.2f} ms for the same ops"
        console().print(line)
    return status


