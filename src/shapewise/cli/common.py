"""What the commands share: model and workload flags, measurement flags, the console, the
parameters and GPU a prediction uses, and rendering a sweep beside its predictions."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..errors import ShapewiseError


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


GPU_TO_PREDICT = "GPU to predict for beside each measurement (default: the one measured)"


def add_model_args(p: argparse.ArgumentParser, *, measuring: bool = False) -> None:
    from ..shapes import ATTENTION_KINDS, DTYPE_BYTES, MODES

    p.add_argument("model", nargs="?", help="a preset name (`shapewise models` lists them)")
    p.add_argument("--config", metavar="PATH", help="a Hugging Face config.json (or a folder holding one)")
    if measuring:
        p.add_argument("--gpu", help=GPU_TO_PREDICT)
    else:
        p.add_argument("--gpu", default="h200", help="GPU name (`shapewise gpus` lists them; default h200)")
    p.add_argument("--batch", "-b", type=positive_int, default=4, help="micro-batch, sequences per step (4)")
    p.add_argument("--seq", "-s", type=positive_int, default=2048, help="sequence length, or KV-cache length in decode (2048)")
    p.add_argument("--tp", "-t", type=positive_int, default=1, help="tensor-parallel degree (1)")
    p.add_argument("--mode", choices=MODES, default="train", help="train (fwd+bwd), prefill or decode (train)")
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bf16", help="(bf16)")
    p.add_argument("--attention", choices=ATTENTION_KINDS, default="flash", help="fused or unfused attention (flash)")
    p.add_argument("--overlap-comm", action="store_true",
                   help="tensor-parallel collectives hidden behind compute (an upper bound on overlap)")


def add_shape_search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params-tol", type=float, default=0.02, help="relative tolerance on the parameter count (0.02)")
    p.add_argument("--top", type=positive_int, default=5, help="how many suggestions (5)")
    if not any(a.dest == "profile" for a in p._actions):
        p.add_argument("--profile", metavar="PATH", help="use this calibrated profile")
        p.add_argument("--spec-only", action="store_true", help="ignore profiles: the spec model alone")


def model_and_workload(args):
    from ..shapes import Workload, get_model, load_config

    if args.model and args.config:
        raise ShapewiseError("give a preset name or --config, not both")
    if not args.model and not args.config:
        raise ShapewiseError("name a model (`shapewise models` lists them) or give --config PATH")
    shape = load_config(args.config) if args.config else get_model(args.model)
    workload = Workload(batch=args.batch, seq=args.seq, tp=args.tp, dtype=args.dtype, mode=args.mode,
                        attention=args.attention, overlap_comm=args.overlap_comm)
    return shape, workload


def rich_console():
    from rich.console import Console

    console = Console(highlight=False)
    # Piped output has no terminal width: keep table rows whole rather than wrap them at 80 columns.
    return console if console.is_terminal else Console(highlight=False, width=180)


def add_measure_args(p: argparse.ArgumentParser, *, gpu: bool = True) -> None:
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


def measure_cases(args, cases):
    from ..bench import sweep
    from ..store import Store

    with Store(args.db) as store:
        result = sweep(cases, store=store, device=args.device, warmup_ms=args.warmup_ms, budget_ms=args.budget_ms,
                       force=args.force, cuda_graph=args.cuda_graph)
    return rank0_only(result)


def rank0_only(result):
    """Under torchrun every rank measures, rank 0 alone reports: the others leave quietly here."""
    if result.rank != 0:
        leave_process_group(130 if result.interrupted else 0)
    return result


def params_for(gpu):
    """The cost model's parameters for a GPU: its calibrated profile's, else the spec model's."""
    from ..cost import SPEC
    from ..profile import choose

    return choose(gpu)[0] if gpu else SPEC


def gpu_for(args, env):
    """The GPU to predict for: --gpu, else the measured one if the table knows it; None on a CPU."""
    from ..hardware import get_gpu

    if args.gpu:
        return get_gpu(args.gpu)
    try:
        return get_gpu(env["gpu_name"]) if env.get("gpu_name") else None
    except ShapewiseError:
        return None


def render_sweep(args, result, predict) -> int:
    """One row per case: measured median and spread, rate, and the prediction beside it."""
    from rich.table import Table

    if args.json:
        print(json.dumps([{**row, "predicted_ms": predict(case)} for case, row in result.rows], indent=2, default=str))
    else:
        table = Table(show_edge=False, pad_edge=False, header_style="bold")
        for col in ("case", "measured ms", "IQR", "TFLOP/s", "GB/s", "predicted ms", "error"):
            table.add_column(col, justify="left" if col in ("case", "error") else "right")
        for case, row in result.rows:
            ok = row.get("error") is None
            predicted = predict(case) if ok else None
            error = f"{predicted / row['median_ms'] - 1:+.1%}" if predicted and ok else (row.get("error") or "")
            table.add_row(case.label, f"{row['median_ms']:.4f}" if ok else "—",
                          f"{row['iqr_ms'] / row['median_ms']:.1%}" if ok else "",
                          f"{row['tflops']:,.1f}" if ok and row.get("tflops") else "",
                          f"{row['gbps']:,.0f}" if ok and row.get("gbps") else "",
                          f"{predicted:.4f}" if predicted else "", error)
        console = rich_console()
        console.print(table)
        env = result.environment
        console.print(f"{env.get('gpu_name') or env.get('cpu_model') or args.device}, torch {env.get('torch_version')}: "
                      + result.summary())
    return 130 if result.interrupted else 0


def measured_gpu(args, env):
    gpu = gpu_for(args, env)
    if gpu is None:
        name = env.get("gpu_name") or args.device
        raise ShapewiseError(f"{name} is not in the GPU table: name the GPU to calibrate with --gpu")
    return gpu



def cost_params(gpu, args):
    from ..profile import choose

    return choose(gpu, path=getattr(args, "profile", None), spec_only=getattr(args, "spec_only", False))


def config_text(path: str) -> str:
    target = Path(path)
    return (target / "config.json" if target.is_dir() else target).read_text()


def measured_rows(db):
    from ..store import Store

    if not db:
        return None
    with Store(db) as store:
        return store.rows()


def leave_process_group(code: int) -> int:
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
