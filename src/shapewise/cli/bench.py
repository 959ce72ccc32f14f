"""`shapewise bench`: measure GEMMs, attention, collectives, a layer or a model's ops, each beside its
prediction."""

from __future__ import annotations

import json
from functools import partial

from ..errors import ShapewiseError, warn
from .common import (
    CAVEATS,
    Parser,
    Repeated,
    Switch,
    add_db_arg,
    add_device_arg,
    add_measure_args,
    add_model_args,
    console,
    known_gpu,
    model_and_workload,
    open_store,
    rank0_only,
)


def add_bench(sub) -> None:
    bench = sub.add_parser("bench", help="measure ops on a GPU (or the CPU) and store the results")
    kinds = bench.add_subparsers(dest="bench", required=True, parser_class=Parser)
    for add in (add_gemm, add_comm, add_attention, add_layer, add_ops):
        add(kinds)


def _timing(args) -> dict:
    return dict(device=args.device, warmup_ms=args.warmup_ms, budget_ms=args.budget_ms, force=args.force,
                cuda_graph=args.cuda_graph)


def _render_sweep(args, bench, extra=None) -> int:
    """One row per case: measured median and spread, rate, and the prediction beside it (and, where
    the bench named them, the kernels the case ran). extra: fields of each row's JSON, in the rows' order."""
    from rich.table import Table

    from ..cases import kernel_label

    kernels = bench.kernels
    if args.json:
        print(json.dumps([{**row, "label": case.label, "predicted_ms": predicted, **(kernels or {}).get(case.key, {}),
                           **more}
                          for (case, row, predicted), more in zip(bench.rows, extra or [{}] * len(bench.rows))],
                         indent=2, default=str))
    else:
        table = Table(show_edge=False, pad_edge=False, header_style="bold")
        columns = ("case", "measured ms", "IQR", "TFLOP/s", "GB/s", "predicted ms", "error") + (("kernels",) if kernels else ())
        for col in columns:
            table.add_column(col, justify="left" if col in ("case", "error", "kernels") else "right")
        for case, row, predicted in bench.rows:
            ok = row.get("error") is None
            predicted = predicted if ok else None
            error = f"{predicted / row['median_ms'] - 1:+.1%}" if predicted and ok else (row.get("error") or "")
            named = (kernel_label(kernels.get(case.key, {}).get("kernels", [])),) if kernels else ()
            table.add_row(case.label, f"{row['median_ms']:.4f}" if ok else "—",
                          f"{row['iqr_ms'] / row['median_ms']:.1%}" if ok else "",
                          f"{row['tflops']:,.1f}" if ok and row.get("tflops") else "",
                          f"{row['gbps']:,.0f}" if ok and row.get("gbps") else "",
                          f"{predicted:.4f}" if predicted else "", error, *named)
        out = console()
        out.print(table)
        env = bench.sweep.environment
        out.print(f"{env.get('gpu_name') or env.get('processor') or args.device}, torch {env.get('torch_version')}: "
                  + bench.sweep.summary())
    _warn_wide(row for _, row, _ in bench.rows)
    if args.json and bench.sweep.interrupted:  # the table's summary line says it; the JSON holds rows only
        warn(bench.sweep.interrupted_text())
    return 130 if bench.sweep.interrupted else 0


def _warn_wide(rows) -> None:
    """One warning line for the measured rows whose spread (IQR over median) is past measure.WIDE_REL_IQR:
    their medians are not to be trusted to that share."""
    from ..bench import MAX_REPS
    from ..measure import WIDE_REL_IQR

    timed = [r for r in rows if r.get("error") is None and r.get("median_ms")]
    wide = [r for r in timed if r.get("iqr_ms") is not None and r["iqr_ms"] > WIDE_REL_IQR * r["median_ms"]]
    if wide:
        worst = max(r["iqr_ms"] / r["median_ms"] for r in wide)
        # A case already at the most repetitions a case runs gains none from a longer budget: say so, not "too short".
        why = ("too short a --budget-ms" if any((r.get("num_reps") or 0) < MAX_REPS for r in wide) else
               f"not the budget: {'it' if len(wide) == 1 else 'each'} ran the most repetitions a case runs "
               f"({MAX_REPS:,}), which a longer --budget-ms does not raise")
        warn(f"{len(wide)} of {len(timed)} cases measured with a spread (IQR) over {WIDE_REL_IQR:.0%} of their "
             f"median (up to {worst:.0%}): those medians are not to be trusted to {WIDE_REL_IQR:.0%}; a busy or "
             f"throttling device, or {why} (each row's IQR is in the table and the store)")


def add_gemm(kinds) -> None:
    from ..shapes import DTYPE_BYTES

    for name in ("gemm", "bmm"):
        p = kinds.add_parser(name, help=f"time torch.matmul over ranges of dims ({name})")
        if name == "bmm":
            p.add_argument("-b", "--batch", dest="b", nargs="+", action=Repeated, required=True,
                           help="batch sizes, or START:STOP:STEP ranges (--batch as bench attention, layer and ops "
                                "name it)")
        for dim in ("m", "n", "k"):
            p.add_argument(f"-{dim}", nargs="+", action=Repeated, required=True, help=f"{dim} values or START:STOP:STEP ranges")
        p.add_argument("--layout", nargs="+", action=Repeated, choices=("nn", "nt", "tn"), default=["nn"],
                       help="nn: x @ W; nt: x @ W.T (a linear layer); tn: a weight gradient")
        p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bf16", help="the data type of A, B and C")
        p.add_argument("--kernels", action="store_true",
                       help="also name the kernels cuBLAS runs for each shape (one more call each, under torch.profiler)")
        add_measure_args(p, mkdir=True)
        p.set_defaults(run=run_bench_gemm)


def run_bench_gemm(args) -> int:
    from ..bench import bench_cases
    from ..cases import gemm_cases, parse_dims
    from ..dtypes import refuse_fp8_layout

    known_gpu(args)
    batches = parse_dims(args.b, name="-b") if getattr(args, "b", None) else [1]
    cases = gemm_cases(parse_dims(args.m, name="-m"), parse_dims(args.n, name="-n"), parse_dims(args.k, name="-k"),
                       batches=batches, layouts=args.layout, dtype=args.dtype)
    if args.kernels and not args.device.startswith("cuda"):
        raise ShapewiseError("--kernels names GPU kernels: measure on a CUDA device")
    if args.dtype == "fp8":
        refuse_fp8_layout(args.layout, batches, hint=": give --layout nt" + (  # bmm's -b is required: 1, not none
            " and -b 1 (or `shapewise bench gemm`)" if getattr(args, "b", None) else ""))
    with open_store(args) as store:
        bench = bench_cases(cases, store=store, gpu=args.gpu, kernels=args.kernels, **_timing(args))
    rank0_only(bench.sweep)
    return _render_sweep(args, bench)


def add_attention(kinds) -> None:
    from ..cases import ATTENTION_BACKENDS, PASSES

    p = kinds.add_parser("attention", help="time fused and unfused attention, forward and forward+backward")
    p.add_argument("--heads", nargs="+", action=Repeated, required=True, help="query heads, values or START:STOP:STEP ranges")
    p.add_argument("--kv-heads", nargs="+", action=Repeated, help="kv heads (grouped-query attention; default: as many as heads)")
    p.add_argument("--head-dim", nargs="+", action=Repeated, required=True, help="head dims, values or ranges")
    p.add_argument("--seq", nargs="+", action=Repeated, required=True, help="sequence lengths, values or ranges")
    p.add_argument("--batch", "-b", nargs="+", action=Repeated, default=["4"], help="batch sizes, values or ranges")
    p.add_argument("--causal", action=Switch, default=True, help="causal mask")
    p.add_argument("--backend", nargs="+", action=Repeated, choices=ATTENTION_BACKENDS, default=["default", "unfused"],
                   help="SDPA backends (flash, efficient, cudnn, math, default) and the unfused path")
    p.add_argument("--pass", dest="passes", nargs="+", action=Repeated, choices=PASSES, default=list(PASSES),
                   help="forward alone, and forward and backward")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16", help="the data type of q, k and v")
    add_measure_args(p, mkdir=True)
    p.set_defaults(run=run_bench_attention)


def run_bench_attention(args) -> int:
    from ..bench import bench_cases
    from ..cases import attention_cases, parse_dims

    known_gpu(args)
    cases = attention_cases(batches=parse_dims(args.batch, name="--batch"), heads=parse_dims(args.heads, name="--heads"),
                            kv_heads=parse_dims(args.kv_heads, name="--kv-heads") if args.kv_heads else None,
                            head_dims=parse_dims(args.head_dim, name="--head-dim"), seqs=parse_dims(args.seq, name="--seq"),
                            causal=args.causal, backends=args.backend, passes=args.passes, dtype=args.dtype)
    cuda_only = sorted(set(args.backend) & {"flash", "efficient", "cudnn"})
    if cuda_only and not args.device.startswith("cuda"):
        raise ShapewiseError(f"the {', '.join(cuda_only)} SDPA backend{'s run' if len(cuda_only) > 1 else ' runs'} only on "
                             "CUDA devices: on the CPU measure --backend default math unfused")
    predicted = sorted(set(args.backend) & {"default", "cudnn"})  # the backends predict_case prices
    if predicted and (args.gpu or args.device != "cpu"):  # said once priced, as check and the figures say them
        from ..hardware import get_gpu
        from ..rules import fused_caveats, gpu_caveats
        from ..shapes import Workload

        CAVEATS.extend(fused_caveats({case.params["head_dim"] for case in cases}, args.dtype))
        CAVEATS.extend(gpu_caveats(get_gpu(args.gpu), Workload(dtype=args.dtype)) if args.gpu else [])
    with open_store(args) as store:
        bench = bench_cases(cases, store=store, gpu=args.gpu, **_timing(args))
    rank0_only(bench.sweep)
    return _render_sweep(args, bench)


def add_comm(kinds) -> None:
    from ..cases import COLLECTIVES
    from ..limits import CALLS

    p = kinds.add_parser("comm", help="time collectives across the ranks torchrun started (NCCL on GPUs, gloo on CPUs)")
    p.add_argument("--sizes", nargs="+", action=Repeated, default=["1M:1G"], help="bytes: 4096, 64K, 16M, 1G, or doubling ranges such as 1M:1G")
    p.add_argument("--ops", nargs="+", action=Repeated, choices=tuple(COLLECTIVES), default=list(COLLECTIVES), help="the collectives")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16", help="the data type of the buffers")
    p.add_argument("--warmup", type=CALLS.arg, default=5, help="untimed calls per case")
    p.add_argument("--iters", type=CALLS.arg, default=20, help="timed calls per case")
    add_device_arg(p, "cuda (one GPU per rank) or cpu (gloo)")
    add_db_arg(p, mkdir=True)
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    p.set_defaults(run=run_bench_comm)


def run_bench_comm(args) -> int:
    from rich.markup import escape
    from rich.table import Table

    from ..cases import parse_sizes
    from ..distributed import bench_comm
    from ..ops import size_text

    size = partial(size_text, largest="GiB", digits=",.4g")  # a collective's size as people write it: 4 KiB, 2 GiB
    with open_store(args) as store:
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
        if r.get("error"):
            table.add_row(r["op"], size(r["bytes"]), escape(f"failed: {r['error']}"), "", "")
            continue
        table.add_row(r["op"], size(r["bytes"]), f"{r['median_ms']:.4f}", f"{r['algbw_gbs']:,.2f}",
                      f"{r['busbw_gbs']:,.2f}")
    console().print(table)
    asked = set(parse_sizes(args.sizes))
    moved = sorted({r["bytes"] for r in rows} - asked)
    if moved:
        warn(f"sizes made whole elements of {args.dtype} divisible among the ranks: "
             f"{', '.join(size(b) for b in moved)} measured")
    return 0


def add_layer(kinds) -> None:
    p = kinds.add_parser("layer", help="time one transformer layer and each of its ops alone")
    add_model_args(p, measuring=True)
    add_measure_args(p, gpu=False, mkdir=True)
    p.set_defaults(run=run_bench_layer)


def run_bench_layer(args) -> int:
    from ..bench import bench_layer

    shape, workload = model_and_workload(args)
    timing = {} if workload.tp > 1 else _timing(args)  # a tensor-parallel layer is timed by call counts
    with open_store(args) as store:
        layer = bench_layer(shape, workload, store=store, gpu=args.gpu, **{"device": args.device, **timing})
    if layer.sweep is not None:
        rank0_only(layer.sweep)
    elif layer.rank != 0:
        return 0
    return _render_tp_layer(args, shape, workload, layer) if workload.tp > 1 else _render_layer(args, shape, workload, layer)


def _render_layer(args, shape, workload, layer) -> int:
    from rich.table import Table

    result = layer.sweep
    rows = {row["id"]: (case, row) for case, row in result.rows}.values()  # an op of both passes: one row
    if args.json:
        # each row beside its prediction, as bench gemm's and bench ops' rows are: the table's predicted ms
        print(json.dumps([{**row, "label": case.label, "predicted_ms": layer.predicted.get(case.key)}
                          for case, row in rows], indent=2, default=str))
        _warn_wide(row for _, row in rows)
        if result.interrupted:  # as _render_sweep: the JSON holds rows only
            warn(result.interrupted_text())
        return 130 if result.interrupted else 0
    table = Table(show_edge=False, pad_edge=False, header_style="bold",
                  title=f"one {shape.name} layer, b={workload.batch} s={workload.seq} {workload.dtype}", title_justify="left")
    for col in ("pass", "layer ms", "sum of its ops ms", "ops/layer", "predicted ms", "predicted/layer", "ops failed"):
        table.add_column(col, justify="left" if col == "pass" else "right")
    for p in layer.passes:
        layer_ms, predicted = p.measured_ms, p.predicted_ms
        whole_ops = layer_ms and not p.ops_missing  # a sum over some of the ops is no layer's
        table.add_row(p.pass_, f"{layer_ms:.3f}" if layer_ms else p.error, f"{p.ops_ms:.3f}",
                      f"{p.ops_ms / layer_ms:.2f}" if whole_ops else "", f"{predicted:.3f}" if predicted else "",
                      f"{predicted / layer_ms:.2f}" if predicted and layer_ms else "",
                      str(p.ops_failed) + (f", {p.ops_missing} not measured" if p.ops_missing else ""))
    out = console()
    out.print(table)
    out.print(result.summary())
    _warn_wide(row for _, row in rows)  # the layer's and its ops' spreads, which the table does not show
    return 130 if result.interrupted else 0


def _render_tp_layer(args, shape, workload, layer) -> int:
    """A tensor-parallel layer across the ranks torchrun started, beside its prediction (collectives included)."""
    from rich.table import Table

    if args.json:
        print(json.dumps([{"pass": p.pass_, "measured_ms": p.measured_ms, "predicted_ms": p.predicted_ms}
                          for p in layer.passes], indent=2))
        return 0
    table = Table(show_edge=False, pad_edge=False, header_style="bold", title_justify="left",
                  title=f"one {shape.name} layer at t={workload.tp}, b={workload.batch} s={workload.seq}: the slowest rank")
    for col in ("pass", "measured ms", "predicted ms", "predicted/measured"):
        table.add_column(col, justify="left" if col == "pass" else "right")
    for r in layer.passes:
        p = r.predicted_ms
        table.add_row(r.pass_, f"{r.measured_ms:.3f}", f"{p:.3f}" if p else "—", f"{p / r.measured_ms:.2f}" if p else "")
    console().print(table)
    return 0


def add_ops(kinds) -> None:
    p = kinds.add_parser("ops", help="time every op that `shapewise check` lists, beside its prediction")
    add_model_args(p, measuring=True)
    add_measure_args(p, gpu=False, mkdir=True)
    p.set_defaults(run=run_bench_ops)


def run_bench_ops(args) -> int:
    from ..bench import bench_ops

    shape, workload = model_and_workload(args)
    with open_store(args) as store:
        bench = bench_ops(shape, workload, store=store, gpu=args.gpu, **_timing(args))
    rank0_only(bench.sweep)
    # each op's calls a step, which the step line multiplies by and the case (one call) does not hold
    status = _render_sweep(args, bench, [{"count": op.count} for op in bench.ops])
    if not args.json:
        measured_ms, predicted_ms = bench.step_ms()
        failed = sum(row.get("error") is not None for _, row, _ in bench.rows)
        missing = bench.num_ops - len(bench.rows)  # not reached: the sweep was interrupted
        if failed == len(bench.rows):
            console().print(f"step: none of its {bench.num_ops} ops measured without error, no total")
            return status
        line = f"step, measured op by op: {measured_ms:,.2f} ms"
        if failed or missing:
            why = ", ".join(([f"{failed} failed"] if failed else []) + ([f"{missing} not measured"] if missing else []))
            line = (f"step over the {len(bench.rows) - failed} of {bench.num_ops} ops measured without error "
                    f"({why}: not the whole step): {measured_ms:,.2f} ms")
        if predicted_ms is not None:
            line += f"; predicted {predicted_ms:,.2f} ms for the same ops"
        console().print(line)
    return status
