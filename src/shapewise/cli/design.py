"""The commands that need no GPU: check, gpus, models, suggest, search, plot and report."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ShapewiseError
from .common import (
    config_text,
    cost_params,
    measured_rows,
    model_and_workload,
    rich_console,
)

STRICT_SHARE = 0.01  # --strict fails on a finding that costs more than 1% of the step


def cmd_check(args) -> int:
    from ..cost import SPEC
    from ..profile import load
    from ..report import check, render, to_json

    shape, workload = model_and_workload(args)
    if args.spec_only and args.profile:
        raise ShapewiseError("give --profile or --spec-only, not both")
    result = check(shape, workload, gpu=args.gpu, params=SPEC if args.spec_only else None,
                   profile=load(args.profile) if args.profile else None)
    if args.json:
        print(json.dumps(to_json(result), indent=2))
    else:
        render(result, rich_console())
    return 1 if args.strict and any(f.share > STRICT_SHARE for f in result.findings) else 0


def cmd_gpus(args) -> int:
    from rich.table import Table

    from ..hardware import GPUS, NUMERIC_FIELDS, get_gpu

    console = rich_console()
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

    from ..shapes import PRESETS

    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for col in ("name", "params", "hidden", "layers", "heads", "kv", "head dim", "ffn", "mlp", "vocab"):
        table.add_column(col, justify="left" if col in ("name", "mlp") else "right")
    for name, s in PRESETS.items():
        experts = f" ×{s.num_experts}" if s.is_moe else ""
        table.add_row(name, f"{s.params / 1e9:.2f}B", str(s.hidden), str(s.num_layers), str(s.num_heads),
                      str(s.kv_heads), str(s.d_head), f"{s.ffn_width if not s.is_moe else s.expert_width}{experts}",
                      s.mlp, str(s.vocab))
    rich_console().print(table)
    return 0


def _suggestions(args):
    from ..hardware import get_gpu
    from ..search import suggest

    shape, workload = model_and_workload(args)
    gpu = get_gpu(args.gpu)
    params, source = cost_params(gpu, args)
    keep = tuple(k.strip() for k in args.keep.split(",") if k.strip()) if args.keep else ()
    result = suggest(shape, workload, gpu=gpu, params=params, params_tol=args.params_tol, keep=keep,
                     aspect_band=args.aspect_band, top=args.top)
    return shape, workload, gpu, source, result


def cmd_suggest(args) -> int:
    from rich.table import Table

    from ..search import change_text, megatron_args
    from ..shapes import load_config, to_hf_config

    shape, workload, gpu, source, result = _suggestions(args)
    chosen = None
    if args.emit_config or args.emit:
        if not result.suggestions:
            raise ShapewiseError("no suggestion to emit: the neighbourhood holds no faster shape")
        if not 1 <= args.pick <= len(result.suggestions):
            raise ShapewiseError(f"--pick must be between 1 and {len(result.suggestions)}")
        chosen = result.suggestions[args.pick - 1].candidate
    if args.emit_config:
        base = json.loads(config_text(args.config)) if args.config else None
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
    console = rich_console()
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


def cmd_search(args) -> int:
    from rich.table import Table

    from ..hardware import get_gpu
    from ..search import search
    from ..shapes import Workload

    gpu = get_gpu(args.gpu)
    params, source = cost_params(gpu, args)
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
    console = rich_console()
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


def cmd_plot(args) -> int:
    from .. import plots
    from ..bench import parse_dims
    from ..hardware import get_gpu

    gpu = get_gpu(args.gpu)
    params, _ = cost_params(gpu, args)
    if args.kind == "gemm":
        data = plots.gemm_data(gpu=gpu, params=params, dim=args.dim, values=parse_dims(args.values, name="--values"),
                               m=args.m, n=args.n, k=args.k, layout=args.layout, dtype=args.dtype,
                               measured=measured_rows(args.db))
        fig = plots.gemm_figure(data)
    elif args.kind == "attention":
        data = plots.attention_data(gpu=gpu, params=params, hiddens=parse_dims(args.hiddens, name="--hiddens"),
                                    heads=args.heads, seq=args.seq, batch=args.batch, kind=args.attention_kind,
                                    dtype=args.dtype, measured=measured_rows(args.db))
        fig = plots.attention_figure(data)
    elif args.kind == "attention-heads":
        data = plots.attention_heads_data(gpu=gpu, params=params, head_dim=args.head_dim,
                                          head_counts=parse_dims(args.head_counts, name="--head-counts"), seq=args.seq,
                                          batch=args.batch, dtype=args.dtype, measured=measured_rows(args.db))
        fig = plots.attention_figure(data)
    elif args.kind == "layer":
        data = plots.layer_data(gpu=gpu, params=params, hiddens=parse_dims(args.hiddens, name="--hiddens"),
                                head_counts=parse_dims(args.head_counts, name="--head-counts"), seq=args.seq,
                                batch=args.batch, mlp=args.mlp, dtype=args.dtype, measured=measured_rows(args.db))
        fig = plots.layer_figure(data)
    else:
        shape, workload = model_and_workload(args)
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
            from ..search import suggest

            result = suggest(shape, workload, gpu=gpu, params=params, top=args.top)
            fig = plots.suggestions_figure(plots.suggestions_data(result, gpu=gpu))
    path = plots.save(fig, args.out)
    print(f"wrote {path}")
    return 0


def cmd_report(args) -> int:
    from ..cost import SPEC
    from ..document import write_report
    from ..profile import load
    from ..store import Store, default_path

    shape, workload = model_and_workload(args)
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
