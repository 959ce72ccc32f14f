"""What the commands share: the parser class, the flags of a model, of a measurement and of the cost
model, the one place the cost model is chosen, and the console they render on."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import TYPE_CHECKING

from ..errors import ShapewiseError

if TYPE_CHECKING:
    from ..hardware import GPU
    from ..profile import CostModel

GPU_TO_PREDICT = "GPU to predict for beside each measurement (default: the one measured)"


def default_text(value) -> str:
    """A flag's default as --help shows it: lists as their words, as they are typed."""
    return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


class HelpFormatter(argparse.HelpFormatter):
    """Every flag's default after its description, unless it has none (None, or off for a switch)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "%(default)" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: {default_text(action.default).replace('%', '%%')})"


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        # a flag is read only by its full name: argparse's prefixes took suggest's `--params 0.3` (search's and
        # plan's flag) as --params-tol 0.3 without a word
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        for name in (None, "store"):  # every flag of one value, unless it names another action
            self.register("action", name, Once)
        # a negative number is a value, written in exponent form too (--params -7e9 is refused for its sign,
        # not as "expected one argument"); no flag of shapewise looks like a number
        self._negative_number_matcher = re.compile(r"^-\d+$|^-\d*\.\d+$|^-(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")

    def error(self, message):  # one line and exit code 2, as for every other bad input
        self.exit(2, f"shapewise: error: {message} (see `{self.prog} --help`)\n")

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if not hasattr(namespace, "parser"):  # the innermost command's parser returns first
            namespace.parser = self
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but a flag no command knows is refused by the command's own parser, whose
        --help lists the flags it takes (argparse leaves it to the top one)."""
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            namespace.parser.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace


class Once(argparse.Action):
    """A flag of one value, refused when given twice: argparse keeps the last silently, so that `check gpt2
    --gpu h200 --gpu h100` priced the H100 without a word. Every plain flag is one (Parser registers it);
    a flag meant to be repeated is Repeated."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given", {})  # this parse's flags: the namespace is the parse's own
        if option_string is not None and self.dest in given:
            first, then = (f"{v:g}" if isinstance(v, float) else v for v in (given[self.dest], values))
            raise argparse.ArgumentError(self, f"given twice, {first} and {then}: give it once")
        given[self.dest] = values
        setattr(namespace, self.dest, values)


class Switch(argparse.BooleanOptionalAction):
    """An on/off pair (--causal and --no-causal), refused when given more than once, the same or both: as
    for a flag of one value (Once), argparse kept the last silently, so that `--causal --no-causal` timed
    full attention. Every on/off pair of the CLI is one."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given", {})
        if self.dest in given:
            raise argparse.ArgumentError(self, f"given twice, {given[self.dest]} and {option_string}: give one of "
                                               "them once")
        given[self.dest] = option_string
        super().__call__(parser, namespace, values, option_string)


class Repeated(argparse.Action):
    """A list flag that may be given more than once, each use adding its values (`-m 128 -m 256` is
    `-m 128 256`): argparse's own nargs="+" keeps the last use only, and its "extend" adds to the default.
    A flag of one value (nargs None) adds that one."""

    def __call__(self, parser, namespace, values, option_string=None):
        earlier = getattr(namespace, self.dest, None)
        earlier = [] if earlier is None or earlier is self.default else list(earlier)
        setattr(namespace, self.dest, earlier + (list(values) if isinstance(values, list) else [values]))


def positive_int(text: str) -> int:
    """A count: 1 to limits.COUNT."""
    from ..limits import COUNT

    return COUNT.arg(text)


def file_path(text: str) -> str:
    """For argparse's type= of a file a command reads (--config, --profile): an empty path names none, and was
    taken for the flag left out (the default profile priced, --config ignored beside a model's name)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the path is empty: give a file, or leave the flag out")
    return text


def top_int(text: str) -> int:
    """How many to show, or which one to pick: 1 to limits.TOP."""
    from ..limits import TOP

    return TOP.arg(text)


def device_arg(text: str) -> str:
    """--device: cpu, cuda or cuda:N (whether the GPU is there is asked when measuring starts)."""
    from ..measure import check_device

    try:
        return check_device(text, present=False)
    except ShapewiseError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_mkdir_arg(p: argparse.ArgumentParser, text: str = "make the output's folder if it does not exist") -> None:
    p.add_argument("--mkdir", action="store_true", help=text)


def console():
    from rich.console import Console

    out = Console(highlight=False)
    # Piped output has no terminal width: keep table rows whole rather than wrap them at 80 columns.
    return out if out.is_terminal else Console(highlight=False, width=180, soft_wrap=True)


# ---- a model and its workload -----------------------------------------------------------------

def add_model_args(p: argparse.ArgumentParser, *, measuring: bool = False) -> None:
    from ..shapes import ATTENTION_KINDS, DTYPE_BYTES, KV_CACHE_DTYPES, MODES

    p.add_argument("model", nargs="?", help="a preset name (`shapewise models` lists them), a Hugging Face hub id "
                   "(org/name, read from the local cache) or a config.json path")
    p.add_argument("--config", metavar="PATH", type=file_path,
                   help="a Hugging Face config.json (or a folder holding one)")
    if measuring:
        p.add_argument("--gpu", help=GPU_TO_PREDICT)
    else:
        p.add_argument("--gpu", default="h200", help="GPU name (`shapewise gpus` lists them)")
    add_workload_args(p)
    p.add_argument("--mode", choices=MODES, default="train", help="train (fwd+bwd), prefill or decode")
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bf16", help="the data type of every op")
    p.add_argument("--attention", choices=ATTENTION_KINDS, default="flash", help="fused or unfused attention")
    p.add_argument("--overlap-comm", action="store_true",
                   help="tensor-parallel collectives hidden behind compute (an upper bound on overlap)")
    if not measuring:  # what torch measures is the activations' dtype: a cache of another is priced, not measured
        p.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto",
                       help="prefill and decode: the KV cache's dtype, as vLLM's and SGLang's flag of that name; auto "
                            "(their default): the activations' (bf16 in an fp8 step)")


def add_workload_args(p: argparse.ArgumentParser, *, batch: int = 4, seq: int = 2048, note: str = "",
                      modes: bool = True, tp_help: str = "tensor-parallel degree") -> None:
    """--batch, --seq and --tp, each bounded (limits.py says why); `note` follows each default
    that differs from check's; modes: the command takes --mode (decode's --seq is the cache's length)."""
    from ..limits import BATCH, SEQ, TP

    seq_help = "sequence length, or KV-cache length in decode" if modes else "sequence length (a training step)"
    p.add_argument("--batch", "-b", type=BATCH.arg, default=batch, help="micro-batch, sequences per step" + note)
    p.add_argument("--seq", "-s", type=SEQ.arg, default=seq, help=seq_help + note)
    p.add_argument("--tp", "-t", type=TP.arg, default=1, help=tp_help)


def check_tokens(batch: int, seq: int, mode: str = "train") -> None:
    """b·s within limits.TOKENS (the M of every GEMM of the step; a decode step's cache), refused in the flags'
    words before a model is read, as Workload would refuse it after."""
    from .. import limits

    limits.check_tokens(batch, seq, ("--batch", "--seq"), mode)


def model_and_workload(args):
    from ..hf import load_config
    from ..hub import resolve_model
    from ..shapes import Workload

    if args.model and args.config:
        raise ShapewiseError("give a preset name or --config, not both")
    if not args.model and not args.config:
        raise ShapewiseError("name a model (`shapewise models` lists them) or give --config PATH")
    check_tokens(args.batch, args.seq, args.mode)
    known_gpu(args)
    strict = getattr(args, "strict", False)
    shape = load_config(args.config, strict=strict) if args.config else resolve_model(args.model, strict=strict)
    workload = Workload(batch=args.batch, seq=args.seq, tp=args.tp, dtype=args.dtype, mode=args.mode,
                        attention=args.attention, overlap_comm=args.overlap_comm,
                        kv_cache_dtype=getattr(args, "kv_cache_dtype", "auto"))
    say_caveats(shape, workload, gpu=getattr(args, "gpu", None))
    return shape, workload


def say_caveats(shape, workload, *, gpu: str | None = None) -> None:
    """What the price of this model (None: search's shapes, of no given model) and workload (on `gpu`, where it
    is named) assumes that the model does not give (rules.price_caveats), to be said once the
    command has priced it."""
    from ..hardware import get_gpu
    from ..rules import caveats, price_caveats

    said = price_caveats(shape, workload, get_gpu(gpu)) if isinstance(gpu, str) else \
        (caveats(shape, workload) if shape is not None else [])
    CAVEATS.extend(line for line in said if line not in CAVEATS)


# The flags of the library's keyword arguments (and Workload's fields), by which messages the command line and the
# library share name them while a command runs (errors.argument): `suggest --keep`, where suggest() says keep.
FLAGS = {"params_target": "--params", "params_tol": "--params-tol", "aspect_band": "--aspect-band", "vocab": "--vocab",
         "keep": "--keep", "vary": "--vary", "batch": "--batch", "seq": "--seq", "tp": "--tp", "dtype": "--dtype",
         "overlap_comm": "--overlap-comm", "kv_cache_dtype": "--kv-cache-dtype", "gpus_per_node": "--gpus-per-node",
         "global_batch_tokens": "--global-batch", "intra_gbs": "--intra-node-gbs", "inter_gbs": "--inter-node-gbs",
         "hiddens": "--hiddens", "head_counts": "--head-counts", "heads": "--heads", "kv_heads": "--kv-heads",
         "device": "--device", "gpu": "--gpu", "cuda_graph": "--cuda-graph", "layout": "--layout",
         "borrow_profile": "--borrow-profile", "quick": "--quick", "seed": "--seed"}

# What a price assumes that the model does not give (rules.caveats), said once the command has priced it
# (cli.main): an input refused later gets its one-line error alone.
CAVEATS: list[str] = []
# Every warning the command has said so far (cli.main's hook adds each): the JSON of the pricing commands
# carries them (with_warnings), so that
# a reader of the JSON alone knows what the numbers were read or priced by guessing.
SAID: list[str] = []


def refuse_emit_with_json(args) -> None:
    """--emit prints flags and --json prints JSON: given both, one of them was dropped without a word (suggest
    printed the JSON, plan the flags, which a JSON reader then failed on)."""
    if args.emit and args.json:
        raise ShapewiseError(f"--emit {args.emit} prints Megatron-LM flags and --json prints JSON: give one of them")


def with_warnings(out: dict) -> dict:
    """A command's JSON with every warning it said: check, suggest, search and plan --json carry them."""
    return {**out, "warnings": [*SAID, *(line for line in CAVEATS if line not in SAID)]}  # caveats: said after


# ---- the cost model ---------------------------------------------------------------------------

def add_cost_args(p: argparse.ArgumentParser, *, judged: bool = False) -> None:
    """--profile, --borrow-profile and --spec-only: which cost model a command predicts with (see
    cost_model); for a command that judges a profile (validate), no --spec-only."""
    if judged:
        p.add_argument("--profile", metavar="PATH", type=file_path,
                       help="the profile to judge (default: the one predictions use)")
    else:
        p.add_argument("--profile", metavar="PATH", type=file_path,
                       help="use this calibrated profile (default: the GPU's own, else the shipped one)")
    p.add_argument("--borrow-profile", action="store_true",
                   help="use --profile even though it was measured on another GPU than --gpu (the output says so)")
    if judged:
        return
    p.add_argument("--spec-only", action="store_true", help="ignore profiles: the spec model alone")


def cost_model(args, gpu: GPU | None) -> CostModel | None:
    """The one place a command chooses its cost model: profile.cost_model with the flags (the spec
    model with --spec-only, else the profile at --profile, else the GPU's calibrated profile if it has
    one, else the spec model); None with no GPU to predict for."""
    from ..profile import cost_model as choose

    path, spec_only = getattr(args, "profile", None), getattr(args, "spec_only", False)
    if path and spec_only:
        raise ShapewiseError("give --profile or --spec-only, not both")
    if getattr(args, "borrow_profile", False) and not path:
        raise ShapewiseError("--borrow-profile lends the profile at --profile to another GPU: "
                             + ("--spec-only uses no profile; leave --borrow-profile out" if spec_only
                                else "give --profile PATH too, or leave --borrow-profile out"))
    profile = None
    if path and gpu is not None:  # a profile measured on one GPU prices another only when asked, and says so
        from ..profile import for_gpu, load

        profile = for_gpu(load(path), gpu.key, borrow=getattr(args, "borrow_profile", False),
                          device=getattr(args, "device", None))
    return choose(gpu, spec_only=spec_only, profile=profile) if gpu is not None else None


# ---- measuring --------------------------------------------------------------------------------

def add_measure_args(p: argparse.ArgumentParser, *, gpu: bool | str = True, mkdir: bool = False,
                     graph: bool = True, rows: bool = True) -> None:
    """The flags of a sweep; gpu: --gpu, with its help where it is not GPU_TO_PREDICT; mkdir: --mkdir, for a new
    store's folder (open_store); graph: --cuda-graph; rows: --json, for a command that prints rows."""
    if gpu:
        p.add_argument("--gpu", help=GPU_TO_PREDICT if gpu is True else gpu)
    from ..bench import MAX_REPS, MIN_REPS
    from ..limits import BUDGET_MS, WARMUP_MS

    add_device_arg(p)
    add_db_arg(p, mkdir=mkdir)
    p.add_argument("--force", action="store_true", help="measure again cases the store already holds")
    # 3 ms + 10 ms (and at least 10 repetitions) measured 5× faster than the co-design paper's
    # harness and repeated within 0.7% on an H200 (benchmarks/RESULTS.md).
    p.add_argument("--warmup-ms", type=WARMUP_MS.arg, default=3.0, help="warm-up time per case, in ms")
    p.add_argument("--budget-ms", type=BUDGET_MS.arg, default=10.0,
                   help=f"time for the timed repetitions per case, in ms (at least {MIN_REPS} repetitions, at most "
                        f"{MAX_REPS:,})")
    if graph:
        p.add_argument("--cuda-graph", action="store_true",
                       help="time replays of a CUDA graph of 20 calls: for ops of a few microseconds")
    if rows:
        p.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")


def add_device_arg(p: argparse.ArgumentParser, text: str = "cuda, cuda:N or cpu") -> None:
    p.add_argument("--device", type=device_arg, default="cuda", help=text)


def add_db_arg(p: argparse.ArgumentParser, text: str = "results store (default: $SHAPEWISE_DB, else "
                                                      "$XDG_CACHE_HOME/shapewise/results.db, else "
                                                      "~/.cache/shapewise/results.db)", *, mkdir: bool = False) -> None:
    """--db, and with mkdir --mkdir for the folder of a new store that the command writes (open_store)."""
    p.add_argument("--db", metavar="PATH", help=text)
    if mkdir:
        add_mkdir_arg(p, "make the folder of a new results store (--db) if it does not exist")


def known_gpu(args, *, among=None) -> None:
    """Refuse an unknown --gpu, or a --dtype it lacks (naming those of `among` it has), before a sweep: the GPU is
    looked up only to predict or fit once every case is measured, and so was refused after minutes of measuring
    (bench gemm left every prediction blank without a word)."""
    if getattr(args, "gpu", None) is not None:
        from ..hardware import get_gpu

        gpu = get_gpu(args.gpu)
        if getattr(args, "dtype", None) is not None:
            gpu.check_dtype(args.dtype, among=among)


def check_store_folder(args) -> None:
    """A new store's folder at --db must be there, or --mkdir makes it (shapewise makes the default store's
    itself). Said as every output's missing folder is, where store.Store, which has no --mkdir to offer, says
    only that it is missing; a command that warns before it measures calls this first, so that the folder's
    refusal is the run's one line."""
    from pathlib import Path

    from ..outputs import writable_folder

    if args.db and not Path(args.db).expanduser().exists():
        writable_folder(Path(args.db).expanduser().parent, mkdir=getattr(args, "mkdir", False), what="results store")


def open_store(args):
    """The results store at --db, opened to write, its folder checked first (check_store_folder)."""
    from ..store import Store

    check_store_folder(args)
    return Store(args.db)


def rank0_only(result):
    """Under torchrun every rank measures, rank 0 alone reports: the others leave quietly here."""
    if result.rank != 0:
        leave_process_group(130 if result.interrupted else 0)
    return result


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
