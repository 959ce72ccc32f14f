"""`shapewise check`, `gpus` and `models`: a model's step on a GPU, and the tables they come from."""

from __future__ import annotations

import json

from ..errors import ShapewiseError
from .common import add_cost_args, add_model_args, console, cost_model, model_and_workload, with_warnings

STRICT_SHARE = 0.01  # --strict fails on a finding that costs more than 1% of the step


def add_check(sub) -> None:
    p = sub.add_parser("check", help="predict every op of a step and list the rules the shape breaks")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when a finding costs more than 1%% of the step, or when the model's config can only be "
                        "read by guessing fields (a model type shapewise does not know, or none)")
    add_cost_args(p)
    p.set_defaults(run=run_check)


def run_check(args) -> int:
    from ..hardware import get_gpu
    from ..report import check, render, to_json

    shape, workload = model_and_workload(args)
    gpu = get_gpu(args.gpu)
    result = check(shape, workload, gpu=cost_model(args, gpu))
    if args.json:
        print(json.dumps(with_warnings(to_json(result)), indent=2))
    else:
        render(result, console())
    costly = [f for f in result.findings if f.share > STRICT_SHARE] if args.strict else []
    if costly:  # exit 1 said, after the output: under --json there was no word of why
        raise StrictFailure(f"--strict: {len(costly)} finding{'s' * (len(costly) > 1)} cost{'s' * (len(costly) == 1)} "
                            f"more than {STRICT_SHARE:.0%} of the step: "
                            + ", ".join(f"{f.rule} {f.share:.1%}" for f in costly))
    return 0


class StrictFailure(ShapewiseError):
    """check --strict's findings: exit 1 (a finding, as a config read only by guessing is), not 2 (bad input)."""

    exit_code = 1


def add_gpus(sub) -> None:
    p = sub.add_parser("gpus", help="list the GPUs and their datasheet numbers")
    p.add_argument("gpu", nargs="?", help="show one GPU with the source of every number")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables: every GPU's numbers, or one's")
    p.set_defaults(run=run_gpus)


def run_gpus(args) -> int:
    from rich.table import Table

    from ..hardware import GPUS, NUMERIC_FIELDS, get_gpu

    if args.json:  # every number of each GPU with its sources, the one named ("" too: it names none) or all
        print(json.dumps(get_gpu(args.gpu).to_json() if args.gpu is not None else
                         {"gpus": [g.to_json() for g in GPUS]}, indent=2))
        return 0
    out = console()
    if args.gpu is not None:  # one GPU, every number with its source ("" too: it names none)
        gpu = get_gpu(args.gpu)
        table = Table(title=gpu.name, show_edge=False, pad_edge=False, header_style="bold", title_justify="left")
        for col in ("field", "value", "source"):
            table.add_column(col)
        for name in NUMERIC_FIELDS:
            value = getattr(gpu, name)
            text = ", ".join(f"{d} {v:g}" for d, v in value.items()) if isinstance(value, dict) else f"{value:g}"
            table.add_row(name, text, gpu.sources.get(name, ""))
        out.print(table)
        return 0
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    peak_dtypes = ("fp32", "tf32", "bf16", "fp16", "fp8")  # fp16 too: the V100's only tensor-core dtype
    for col in ("key", "name", "SMs", "boost MHz", *peak_dtypes, "TB/s", "L2 MB", "GB"):
        table.add_column(col, justify="left" if col in ("key", "name") else "right")
    for g in GPUS:
        peaks = (f"{g.tflops[d]:,.0f}" if d in g.tflops else "—" for d in peak_dtypes)
        table.add_row(g.key, g.name, str(g.num_sms), str(g.boost_clock_mhz), *peaks,
                      f"{g.mem_bandwidth_gbs / 1000:.2f}", f"{g.l2_mb:g}", f"{g.memory_gb:g}")
    out.print(table)
    out.print("Dense peak TFLOP/s. `shapewise gpus NAME` shows one GPU with the source of every number.")
    return 0


def add_models(sub) -> None:
    p = sub.add_parser("models", help="list the model presets")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table: each preset as check --json "
                                                       "gives its model")
    p.set_defaults(run=run_models)


def run_models(args) -> int:
    from rich.table import Table

    from ..families import families_text
    from ..presets import PRESETS

    if args.json:
        print(json.dumps({"presets": [s.to_json() for s in PRESETS.values()], "config_json": families_text()},
                         indent=2))
        return 0
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for col in ("name", "params", "hidden", "layers", "heads", "kv", "head dim", "ffn", "mlp", "vocab"):
        table.add_column(col, justify="left" if col in ("name", "mlp") else "right")
    for name, s in PRESETS.items():
        experts = f" ×{s.num_experts}" if s.is_moe else ""
        table.add_row(name, f"{s.params / 1e9:.2f}B", str(s.hidden), str(s.num_layers), str(s.num_heads),
                      str(s.kv_heads), str(s.d_head), f"{s.mlp_width}{experts}",
                      s.mlp, str(s.vocab))
    out = console()
    out.print(table)
    out.print(families_text())
    return 0


COMMANDS = (add_check, add_gpus, add_models)
