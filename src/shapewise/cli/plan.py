"""`shapewise plan`: the fastest ways to train a model on a cluster that fit in memory."""

from __future__ import annotations

import json

from ..dtypes import DTYPE_BYTES
from ..errors import ShapewiseError, warn
from .common import (
    add_cost_args,
    console,
    cost_model,
    file_path,
    positive_int,
    refuse_emit_with_json,
    say_caveats,
    top_int,
    with_warnings,
)


def add_plan(sub) -> None:
    from ..limits import PARAMS, RATE, SEQ, TOKENS_TO_TRAIN
    from ..plan import GPUS_PER_NODE

    p = sub.add_parser("plan", help="the fastest ways to train a model on a cluster that fit in memory")
    p.add_argument("model", nargs="?", help="a preset name (`shapewise models` lists them), a Hugging Face hub id "
                   "(org/name, read from the local cache) or a config.json path")
    p.add_argument("--config", metavar="PATH", type=file_path,
                   help="a Hugging Face config.json (or a folder holding one)")
    p.add_argument("--params", type=PARAMS.arg, help="a parameter budget, e.g. 7e9: the fastest shape of that size")
    p.add_argument("--gpus", type=positive_int, required=True, help="GPUs in the cluster")
    p.add_argument("--gpu", default="h100", help="GPU name (check's default differs: h200)")
    p.add_argument("--gpus-per-node", type=positive_int, default=GPUS_PER_NODE, help="GPUs sharing NVLink")
    p.add_argument("--global-batch", type=positive_int, required=True, metavar="TOKENS", help="tokens per step")
    p.add_argument("--seq", "-s", type=SEQ.arg, required=True, help="sequence length")
    p.add_argument("--tokens", type=TOKENS_TO_TRAIN.arg, metavar="T", help="tokens to train on: prints the time it takes")
    p.add_argument("--shapes", action="store_true", help="also plan the faster shapes of about the same size")
    p.add_argument("--inter-node-gbs", type=RATE.arg, help="network GB/s per GPU between nodes (default: datasheet)")
    p.add_argument("--intra-node-gbs", type=RATE.arg, help="GB/s per GPU within a node (default: NVLink datasheet)")
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bf16", help="the data type of every op")
    p.add_argument("--top", type=top_int, default=5, help="how many plans")
    p.add_argument("--emit", choices=("megatron",), help="print the best plan as Megatron-LM flags")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_cost_args(p)
    p.set_defaults(run=run_plan)


def _shape(args, cost):
    from ..hf import load_config
    from ..hub import resolve_model
    from ..search import search
    from ..shapes import Workload

    given = [x for x in (args.model, args.config, args.params) if x is not None]
    if len(given) != 1:
        raise ShapewiseError("give one of: a model (a preset name, hub id or config.json path), --config PATH or --params N")
    if args.params is None:
        return load_config(args.config) if args.config else resolve_model(args.model)
    try:
        found = search(params_target=int(args.params), gpu=cost, workload=Workload(batch=1, seq=args.seq,
                                                                                     dtype=args.dtype),
                       top=1)  # the fastest shape of that size on this GPU
    except ShapewiseError as err:  # its advice names search's --vocab and --params-tol, which plan has not
        raise ShapewiseError(f"{err} (--vocab and --params-tol are `shapewise search`'s: plan --params takes their "
                             "defaults, a vocab of 32,000 and 5%)") from None
    if not found.top:
        raise ShapewiseError(f"no shape within the tolerance of {args.params:g} parameters; try another size")
    return found.top[0].shape


def run_plan(args) -> int:
    from ..hardware import get_gpu
    from ..plan import megatron_flags, plan, render, to_json
    from ..search import change_text, check_megatron, suggest
    from ..shapes import Workload

    refuse_emit_with_json(args)
    if args.emit and args.tokens is not None:
        warn(f"--tokens has no effect with --emit {args.emit}: the flags say no time to train (leave out --emit)")
    gpu = get_gpu(args.gpu)
    cost = cost_model(args, gpu)
    shape = _shape(args, cost)
    say_caveats(shape, Workload(seq=args.seq, dtype=args.dtype), gpu=args.gpu)  # as check says them
    if args.emit == "megatron":  # a model the flags cannot describe is refused before planning, not after it
        check_megatron(shape)
    shapes = ()
    if args.shapes:  # the neighbourhood suggest searches, each named by what it changes
        near = suggest(shape, Workload(batch=1, seq=args.seq, dtype=args.dtype), gpu=cost, keep=("batch", "tp"),
                       top=args.top, require_fit=False)
        shapes = tuple(s.candidate.shape.replace(name=change_text(s.changes))
                       for s in near.suggestions or near.alternatives)  # plan's own times judge them
    result = plan(shape, gpus=args.gpus, gpu=cost, global_batch_tokens=args.global_batch, seq=args.seq,
                  gpus_per_node=args.gpus_per_node, inter_gbs=args.inter_node_gbs, intra_gbs=args.intra_node_gbs,
                  top=args.top, shapes=shapes, dtype=args.dtype)
    if args.emit == "megatron":
        if not result.plans:
            raise ShapewiseError("no layout fits in memory, so there are no flags to emit")
        print(megatron_flags(result.plans[0], seq=args.seq, global_batch_tokens=args.global_batch, dtype=args.dtype))
    elif args.json:
        print(json.dumps(with_warnings(to_json(result, train_tokens=args.tokens)), indent=2))
    else:
        render(result, console(), gpu=gpu, train_tokens=args.tokens)
    return 0


COMMANDS = (add_plan,)
