"""`shapewise suggest`, `search` and `verify`: faster shapes of about the same size, shapes for a
parameter budget, and a model measured against its suggestions."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ShapewiseError
from .common import add_cost_args, add_model_args, console, cost_model, model_and_workload, positive_int


def _add_shape_search_args(p) -> None:
    p.add_argument("--params-tol", type=float, default=0.02, help="relative tolerance on the parameter count (0.02)")
    p.add_argument("--top", type=positive_int, default=5, help="how many suggestions (5)")


def add_suggest(sub) -> None:
    p = sub.add_parser("suggest", help="faster shapes of about the same size, ranked by predicted time per token")
    add_model_args(p)
    _add_shape_search_args(p)
    add_cost_args(p)
    p.add_argument("--keep", metavar="FIELDS", help="fields not to change: hidden,layers,heads,kv_heads,head_dim,ffn,vocab,batch")
    p.add_argument("--aspect-band", type=float, default=1.5,
                   help="hidden/layers may differ from the original's by at most this factor (1.5)")
    p.add_argument("--emit-config", metavar="PATH", help="write suggestion --pick as a Hugging Face config.json")
    p.add_argument("--emit", choices=("megatron",), help="print suggestion --pick as Megatron-LM / GPT-NeoX arguments")
    p.add_argument("--pick", type=positive_int, default=1, help="which suggestion to emit (1)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_suggest)


def _suggestions(args):
    from ..hardware import get_gpu
    from ..search import suggest

    shape, workload = model_and_workload(args)
    gpu = get_gpu(args.gpu)
    model = cost_model(args, gpu)
    source = model.source
    keep = tuple(k.strip() for k in args.keep.split(",") if k.strip()) if args.keep else ()
    result = suggest(shape, workload, gpu=model, params_tol=args.params_tol, keep=keep,
                     aspect_band=args.aspect_band, top=args.top)
    return shape, workload, gpu, source, result


def run_suggest(args) -> int:
    from ..hf import load_config, to_hf_config
    from ..report import rich_table, suggestion_table
    from ..search import megatron_args

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
    out = console()
    o = result.original
    out.print(f"[bold]{shape.name}[/bold]: {shape.params / 1e9:.3f}B params, predicted "
                  f"{1000 / o.gpu_ms_per_token:,.0f} tokens/s per GPU on {gpu.name} ({workload.mode}, b={workload.batch} "
                  f"s={workload.seq} t={workload.tp}); cost model: {source}")
    if result.findings:
        out.print("findings: " + "; ".join(f"{f.title} ({f.share:.1%})" for f in result.findings))
    if not result.suggestions:
        out.print(f"[green]No faster shape within {args.params_tol:.0%} of the parameters "
                      f"({result.considered} considered).[/green]")
        return 0
    out.print(rich_table(suggestion_table(result.suggestions), title_justify="left",
                         title=f"{len(result.suggestions)} fastest of {result.considered} shapes within "
                               f"{args.params_tol:.0%} of the parameters ({result.seconds:.2f} s)"))
    if args.emit_config:
        out.print(f"suggestion {args.pick} written to {args.emit_config}")
    return 0


def _config_text(path: str) -> str:
    target = Path(path)
    return (target / "config.json" if target.is_dir() else target).read_text()


def add_search(sub) -> None:
    p = sub.add_parser("search", help="design from a parameter budget: the Pareto front of size against speed")
    p.add_argument("--params", type=float, required=True, help="parameter budget, e.g. 7e9")
    p.add_argument("--gpu", default="h200")
    p.add_argument("--seq", "-s", type=positive_int, default=4096)
    p.add_argument("--batch", "-b", type=positive_int, default=1)
    p.add_argument("--tp", "-t", type=positive_int, default=1)
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp8"), default="bf16")
    p.add_argument("--vocab", type=positive_int, default=32000, help="padded to a multiple of 64·t (32000)")
    p.add_argument("--mlp", choices=("swiglu", "geglu", "gelu", "relu"), default="swiglu")
    p.add_argument("--attention-kind", choices=("mha", "gqa", "mqa"), default="gqa", help="gqa: 8 query heads per kv head")
    p.add_argument("--params-tol", type=float, default=0.05, help="relative tolerance on the budget (0.05)")
    p.add_argument("--top", type=positive_int, default=10)
    add_cost_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_search)


def run_search(args) -> int:
    from rich.table import Table

    from ..hardware import get_gpu
    from ..search import search
    from ..shapes import Workload

    gpu = get_gpu(args.gpu)
    model = cost_model(args, gpu)
    source = model.source
    workload = Workload(batch=args.batch, seq=args.seq, tp=args.tp, dtype=args.dtype)
    result = search(params_target=args.params, gpu=model, workload=workload, vocab=args.vocab, mlp=args.mlp,
                    attention=args.attention_kind, params_tol=args.params_tol, top=args.top)
    rows = lambda cands: [{"name": c.shape.name, "params": c.params, "hidden": c.shape.hidden,  # noqa: E731
                           "layers": c.shape.num_layers, "heads": c.shape.num_heads, "kv_heads": c.shape.kv_heads,
                           "ffn": c.shape.ffn_width, "tokens_per_s_per_gpu": 1000 / c.gpu_ms_per_token} for c in cands]
    if args.json:
        print(json.dumps({"screened": result.screened, "predicted": result.predicted, "seconds": result.seconds,
                          "pareto": rows(result.pareto), "top": rows(result.top), "cost_model": source}, indent=2))
        return 0
    out = console()
    out.print(f"{result.screened:,} shapes screened ({result.screen_rate:,.0f} per second), {result.predicted} "
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
        out.print(table)
    return 0


def add_verify(sub) -> None:
    p = sub.add_parser("verify", help="measure a model against its suggestions (or another config) on the GPU")
    p.add_argument("model", help="a preset name or a config.json")
    p.add_argument("--config", metavar="OTHER", help="verify against this config.json instead of the suggestions")
    p.add_argument("--suggestion", type=positive_int, help="verify only suggestion N (default: all of --top)")
    p.add_argument("--gpu", default="h200", help="GPU whose cost model gives the predicted speedups (h200)")
    p.add_argument("--batch", "-b", type=positive_int, default=4)
    p.add_argument("--seq", "-s", type=positive_int, default=2048)
    p.add_argument("--tp", "-t", type=positive_int, default=1)
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    p.add_argument("--attention", choices=("flash", "unfused"), default="flash")
    p.add_argument("--device", default="cuda")
    p.add_argument("--rounds", type=positive_int, default=15, help="interleaved rounds (15)")
    p.add_argument("--measure", choices=("auto", "model", "layer"), default="auto",
                   help="whole training steps, or layers × layer + head (auto: whole steps where all fit at once)")
    _add_shape_search_args(p)
    add_cost_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_verify)


def run_verify(args) -> int:
    from rich.table import Table

    from ..hardware import get_gpu
    from ..hf import load_config
    from ..hub import resolve_model
    from ..shapes import Workload
    from ..verify import verify

    source = args.model
    shape = resolve_model(source)
    workload = Workload(batch=args.batch, seq=args.seq, tp=args.tp, dtype=args.dtype, mode="train",
                        attention=args.attention)
    gpu = get_gpu(args.gpu)
    model = cost_model(args, gpu)
    model_source = model.source
    if args.config:
        other = load_config(args.config)
        candidates = [(f"config {Path(args.config).name}", other, workload)]
    else:
        from ..search import change_text, suggest

        result = suggest(shape, workload, gpu=model, params_tol=args.params_tol, top=args.top)
        picked = list(enumerate(result.suggestions, 1))
        if args.suggestion:
            if not 1 <= args.suggestion <= len(picked):
                raise ShapewiseError(f"--suggestion must be between 1 and {len(picked)}")
            picked = [picked[args.suggestion - 1]]
        if not picked:
            raise ShapewiseError("no suggestion to verify: the neighbourhood holds no faster shape")
        candidates = [(f"#{i} " + change_text(s.changes), s.candidate.shape, s.candidate.workload) for i, s in picked]
    results = verify((shape, workload), candidates, gpu=model, device=args.device, rounds=args.rounds,
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
    console().print(table)
    return 0


COMMANDS = (add_suggest, add_search, add_verify)
