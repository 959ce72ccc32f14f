"""The command line: each command parses its flags, calls one library function and renders the result.

The commands live by what they need: `design` (no GPU) and `measure` (a GPU, or the CPU);
`common` holds what they share. This module builds the parser and runs a command."""

from __future__ import annotations

import argparse
import sys

from ..errors import ShapewiseError
from .common import (
    add_measure_args,
    add_model_args,
    add_shape_search_args,
    leave_process_group,
    positive_int,
)
from .design import (
    cmd_check,
    cmd_gpus,
    cmd_models,
    cmd_plot,
    cmd_report,
    cmd_search,
    cmd_suggest,
)
from .measure import (
    cmd_bench_attention,
    cmd_bench_comm,
    cmd_bench_gemm,
    cmd_bench_layer,
    cmd_bench_ops,
    cmd_calibrate,
    cmd_results,
    cmd_validate,
    cmd_verify,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit code 2, as for every other bad input
        self.exit(2, f"shapewise: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="shapewise", description="Is this transformer's shape fast on this GPU?")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("check", help="predict every op of a step and list the rules the shape breaks")
    add_model_args(p)
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
        add_measure_args(p)
        p.set_defaults(run=cmd_bench_gemm)
    from ..bench import ATTENTION_BACKENDS, COLLECTIVES, PASSES

    p = kinds.add_parser("comm", help="time collectives across the ranks torchrun started (NCCL on GPUs, gloo on CPUs)")
    p.add_argument("--sizes", nargs="+", default=["1M:1G"], help="bytes: 4096, 64K, 16M, 1G, or doubling ranges (1M:1G)")
    p.add_argument("--ops", nargs="+", choices=tuple(COLLECTIVES), default=list(COLLECTIVES))
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    p.add_argument("--warmup", type=positive_int, default=5, help="untimed calls per case (5)")
    p.add_argument("--iters", type=positive_int, default=20, help="timed calls per case (20)")
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
    add_measure_args(p)
    p.set_defaults(run=cmd_bench_attention)
    for name, fn, text in (("layer", cmd_bench_layer, "time one transformer layer and each of its ops alone"),
                           ("ops", cmd_bench_ops, "time every op that `shapewise check` lists, beside its prediction")):
        p = kinds.add_parser(name, help=text)
        add_model_args(p, measuring=True)
        add_measure_args(p, gpu=False)
        p.set_defaults(run=fn)

    p = sub.add_parser("calibrate", help="measure a designed set on this GPU and fit its profile (about 2 minutes)")
    p.add_argument("--out", metavar="PATH", help="also write the profile here")
    p.add_argument("--no-install", action="store_true", help="do not write it to the user's profile folder")
    p.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    p.add_argument("--quick", action="store_true", help="a toy-sized set (a smoke test, e.g. on the CPU)")
    p.add_argument("--comm", action="store_true",
                   help="under torchrun: time the collectives and fit the GPU link's parameters into the profile")
    add_measure_args(p)
    p.set_defaults(run=cmd_calibrate)
    p = sub.add_parser("validate", help="measure a held-out set and compare calibrated, spec-only and roofline models")
    p.add_argument("--profile", metavar="PATH", help="the profile to judge (default: the one predictions use)")
    p.add_argument("--from-db", action="store_true", help="use measurements already in the store; no GPU needed")
    p.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    p.add_argument("--quick", action="store_true", help="a toy-sized set (a smoke test, e.g. on the CPU)")
    add_measure_args(p)
    p.set_defaults(run=cmd_validate)

    p = sub.add_parser("suggest", help="faster shapes of about the same size, ranked by predicted time per token")
    add_model_args(p)
    add_shape_search_args(p)
    p.add_argument("--keep", metavar="FIELDS", help="fields not to change: hidden,layers,heads,kv_heads,head_dim,ffn,vocab,batch")
    p.add_argument("--aspect-band", type=float, default=1.5,
                   help="hidden/layers may differ from the original's by at most this factor (1.5)")
    p.add_argument("--emit-config", metavar="PATH", help="write suggestion --pick as a Hugging Face config.json")
    p.add_argument("--emit", choices=("megatron",), help="print suggestion --pick as Megatron-LM / GPT-NeoX arguments")
    p.add_argument("--pick", type=positive_int, default=1, help="which suggestion to emit (1)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_suggest)

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
    p.add_argument("--profile", metavar="PATH")
    p.add_argument("--spec-only", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_search)

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
    add_shape_search_args(p)
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
                q.add_argument(f"-{dim}", type=positive_int, default=8192, help="the fixed dims (8192)")
            q.add_argument("--layout", choices=("nn", "nt", "tn"), default="nn")
        else:
            q.add_argument("--seq", type=positive_int, default=2048)
            q.add_argument("--batch", type=positive_int, default=4)
        if name == "attention":
            q.add_argument("--hiddens", nargs="+", required=True)
            q.add_argument("--heads", type=positive_int, required=True)
            q.add_argument("--kind", dest="attention_kind", choices=("flash", "bmm"), default="flash",
                           help="fused attention, or the score BMM of unfused attention (flash)")
        if name == "attention-heads":
            q.add_argument("--head-dim", type=positive_int, required=True)
            q.add_argument("--head-counts", nargs="+", required=True)
        if name == "layer":
            q.add_argument("--hiddens", nargs="+", required=True)
            q.add_argument("--head-counts", nargs="+", required=True)
            q.add_argument("--mlp", choices=("gelu", "relu", "swiglu", "geglu"), default="gelu")
        q.set_defaults(run=cmd_plot)
    for name, text in (("breakdown", "a model's step time by op: train, prefill and decode side by side"),
                       ("suggestions", "a model against its top suggestions: predicted speedups")):
        q = kinds.add_parser(name, help=text)
        add_model_args(q)
        q.add_argument("--out", required=True, metavar="FILE", help=".png or .svg")
        q.add_argument("--top", type=positive_int, default=5)
        if name == "suggestions":
            q.add_argument("--verified", metavar="JSON", help="draw a `shapewise verify --json` run: measured beside predicted")
        q.add_argument("--profile", metavar="PATH")
        q.add_argument("--spec-only", action="store_true")
        q.set_defaults(run=cmd_plot)

    p = sub.add_parser("report", help="a shareable self-contained HTML (or Markdown) report of a model on a GPU")
    add_model_args(p)
    p.add_argument("--out", required=True, metavar="FILE", help="report.html, or report.md with figures beside it")
    p.add_argument("--format", choices=("html", "md"), help="default: from the file name")
    p.add_argument("--db", metavar="PATH", help="include measured-vs-predicted from this results store")
    p.add_argument("--top", type=positive_int, default=5, help="suggestions to include (5)")
    p.add_argument("--profile", metavar="PATH")
    p.add_argument("--spec-only", action="store_true")
    p.set_defaults(run=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return leave_process_group(args.run(args))
    except ShapewiseError as err:
        print(f"shapewise: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("shapewise: interrupted", file=sys.stderr)
        return 130
