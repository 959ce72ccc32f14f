"""The command line: each command parses its flags, calls one library function and renders the result."""

from __future__ import annotations

import argparse
import json
import sys

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


def _add_model_args(p: argparse.ArgumentParser) -> None:
    from .shapes import ATTENTION_KINDS, DTYPE_BYTES, MODES

    p.add_argument("model", nargs="?", help="a preset name (`shapewise models` lists them)")
    p.add_argument("--config", metavar="PATH", help="a Hugging Face config.json (or a folder holding one)")
    p.add_argument("--gpu", default="h200", help="GPU name (`shapewise gpus` lists them; default h200)")
    p.add_argument("--batch", "-b", type=_positive_int, default=4, help="micro-batch, sequences per step (4)")
    p.add_argument("--seq", "-s", type=_positive_int, default=2048, help="sequence length, or KV-cache length in decode (2048)")
    p.add_argument("--tp", "-t", type=_positive_int, default=1, help="tensor-parallel degree (1)")
    p.add_argument("--mode", choices=MODES, default="train", help="train (fwd+bwd), prefill or decode (train)")
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bf16", help="(bf16)")
    p.add_argument("--attention", choices=ATTENTION_KINDS, default="flash", help="fused or unfused attention (flash)")


def _model_and_workload(args):
    from .shapes import Workload, get_model, load_config

    if args.model and args.config:
        raise ShapewiseError("give a preset name or --config, not both")
    if not args.model and not args.config:
        raise ShapewiseError("name a model (`shapewise models` lists them) or give --config PATH")
    shape = load_config(args.config) if args.config else get_model(args.model)
    workload = Workload(batch=args.batch, seq=args.seq, tp=args.tp, dtype=args.dtype, mode=args.mode,
                        attention=args.attention)
    return shape, workload


def _console():
    from rich.console import Console

    console = Console(highlight=False)
    # Piped output has no terminal width: keep table rows whole rather than wrap them at 80 columns.
    return console if console.is_terminal else Console(highlight=False, width=180)


def cmd_check(args) -> int:
    from .report import check, render, to_json

    shape, workload = _model_and_workload(args)
    result = check(shape, workload, gpu=args.gpu)
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="shapewise", description="Is this transformer's shape fast on this GPU?")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("check", help="predict every op of a step and list the rules the shape breaks")
    _add_model_args(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--strict", action="store_true", help="exit 1 when a finding costs more than 1%% of the step")
    p.set_defaults(run=cmd_check)
    p = sub.add_parser("gpus", help="list the GPUs and their datasheet numbers")
    p.add_argument("gpu", nargs="?", help="show one GPU with the source of every number")
    p.set_defaults(run=cmd_gpus)
    sub.add_parser("models", help="list the model presets").set_defaults(run=cmd_models)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except ShapewiseError as err:
        print(f"shapewise: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("shapewise: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
