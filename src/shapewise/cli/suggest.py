"""`shapewise suggest`, `search` and `verify`: faster shapes of about the same size, shapes for a
parameter budget, and a model measured against its suggestions."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..dtypes import DTYPE_BYTES
from ..errors import ShapewiseError, warn
from ..search import GIB, not_fitting_text, nothing_faster_text, tolerance_text, training_memory_text, widen_text
from .common import (
    Repeated,
    add_cost_args,
    add_device_arg,
    add_mkdir_arg,
    add_model_args,
    add_workload_args,
    check_tokens,
    console,
    cost_model,
    file_path,
    model_and_workload,
    refuse_emit_with_json,
    say_caveats,
    top_int,
    with_warnings,
)

# search designs from a budget rather than from a model: its defaults differ from check's, and say so.
DIFFERS = " (check's default differs: it prices a training step at b=4 s=2048)"


def _add_shape_search_args(p, *, one_gpu: bool = False) -> None:
    """The selection flags suggest and verify share; one_gpu (verify's): tp is never changed, so not offered."""
    from ..limits import ASPECT_BAND, PARAMS_TOL

    p.add_argument("--params-tol", type=PARAMS_TOL.arg, default=0.02, help="relative tolerance on the parameter count")
    p.add_argument("--top", type=top_int, default=5, help="how many suggestions")
    p.add_argument("--keep", metavar="FIELDS", action=Repeated,
                   help="fields not to change, comma-separated (--keep heads,vocab): hidden, layers, heads, "
                        f"kv_heads, head_dim, ffn, vocab, batch{'' if one_gpu else ', tp'} (repeat it to add more)")
    p.add_argument("--vary", metavar="FIELDS", action=Repeated,
                   help="the micro-batch ranked with the shapes: batch (verify measures one GPU, tp 1)" if one_gpu else
                        "run settings ranked with the shapes: batch,tp (by default they form a table of their own)")
    p.add_argument("--aspect-band", type=ASPECT_BAND.arg, default=1.5,
                   help="hidden/layers may differ from the original's by at most this factor")


def add_suggest(sub) -> None:
    p = sub.add_parser("suggest", help="faster shapes of about the same size, ranked by predicted time per token")
    add_model_args(p)
    _add_shape_search_args(p)
    add_cost_args(p)
    p.add_argument("--emit-config", metavar="PATH", help="write suggestion --pick as a Hugging Face config (a .json file)")
    add_mkdir_arg(p)
    p.add_argument("--emit", choices=("megatron",), help="print suggestion --pick as Megatron-LM / GPT-NeoX arguments")
    p.add_argument("--pick", type=_which("suggestion to emit"), metavar="N",
                   help="which suggestion --emit or --emit-config writes, 1 the fastest (default: 1)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(run=run_suggest)


def _which(what: str):
    """For argparse's type=: a suggestion's rank, 1 to limits.TOP, refused in its own words."""
    from dataclasses import replace

    from ..limits import TOP

    return replace(TOP, what=f"which {what} (1 is the fastest)").arg


def _check_rank(flag: str, given: int, num_listed: int, what: str) -> None:
    """A rank past those listed (--pick, verify's --suggestion), refused naming how many there are."""
    if given > num_listed:
        raise ShapewiseError(f"{flag} {given}: there {'is' if num_listed == 1 else 'are'} {num_listed} "
                             f"{what}{'s' * (num_listed != 1)}; give {flag} from 1 to {num_listed}")


def _fields(texts: list[str] | None, flag: str) -> tuple[str, ...]:
    """The field names of every use of --keep or --vary (each a comma-separated list), each one suggest takes
    there (search.field_names, in the flag's words); a use that names none ("", ",") is refused."""
    from ..search import KEEPABLE, RUN_FIELDS, field_names

    names = []
    for text in texts or ():
        words = [k.strip() for k in text.split(",") if k.strip()]
        if not words:
            example = "batch,tp" if flag == "--vary" else "heads,vocab"
            raise ShapewiseError(f"{flag} {text!r} names no field: give one or more, comma-separated "
                                 f"(`{flag} {example}`), or leave {flag} out")
        names += words
    field_names(names, KEEPABLE if flag == "--keep" else RUN_FIELDS, flag)
    return tuple(dict.fromkeys(names))


def _suggest(args, shape, workload, model):
    from ..search import suggest

    return suggest(shape, workload, gpu=model, params_tol=args.params_tol, keep=_fields(args.keep, "--keep"),
                   vary=_fields(args.vary, "--vary"), aspect_band=args.aspect_band, top=args.top)


def _suggestions(args):
    from ..hardware import get_gpu
    from ..search import check_megatron

    shape, workload = model_and_workload(args)
    if args.emit == "megatron":  # a model it cannot describe is refused before the search, not after it
        check_megatron(shape)
    gpu = get_gpu(args.gpu)
    model = cost_model(args, gpu)
    return shape, workload, gpu, model.source, _suggest(args, shape, workload, model)


def _source_file(args):
    """The config.json the original was read from: --config, or MODEL as a path or a hub id's cached file
    (None for a preset)."""
    from ..hub import config_path

    return args.config or (config_path(args.model) if args.model else None)


def _refuse_writing_over_the_source(args) -> None:
    """--emit-config into the config the original was read from would replace the user's model with the
    suggestion: refused, the path named."""
    source = _source_file(args)
    target = Path(args.emit_config)
    if source and target.exists() and target.resolve() == Path(source).resolve():
        raise ShapewiseError(f"--emit-config {args.emit_config} is the config the model was read from: writing the "
                             "suggestion there would replace it; give another path")


def run_suggest(args) -> int:
    from ..hf import load_config, to_hf_config
    from ..report import rich_table, suggestion_table
    from ..search import flags_text, megatron_args

    refuse_emit_with_json(args)
    if args.emit_config is not None:  # said before the search, not after it ("" too: it names no file)
        from ..outputs import output_file

        output_file(args.emit_config, formats={".json": "json"}, mkdir=args.mkdir, what="config")
        _refuse_writing_over_the_source(args)
    elif args.mkdir:  # as results says its --mkdir without a file to make a folder for
        warn("--mkdir has no effect without --emit-config, the file whose folder it makes")
    if args.pick is not None and not (args.emit_config or args.emit):
        warn(f"--pick {args.pick} has no effect without --emit or --emit-config, which write the suggestion it picks")
    pick = args.pick or 1
    shape, workload, gpu, source, result = _suggestions(args)
    chosen = None
    if args.emit_config or args.emit:
        if not result.suggestions:
            raise ShapewiseError("no suggestion to emit: no shape is predicted faster than the original by more "
                                 "than the model's error (`suggest` shows the nearest)")
        _check_rank("--pick", pick, len(result.suggestions), "suggestion")
        chosen = result.suggestions[pick - 1].candidate
    if args.emit_config:
        # A config given as MODEL (a path, or a hub id's cached file) is the base, as with --config: the
        # suggestion is written into its own keys, the rest of it kept.
        source_file = _source_file(args)
        base = json.loads(_config_text(source_file)) if source_file else None
        try:
            # Named as what it is, not as the model it came from ("gpt3-2.7b, suggested").
            named = chosen.shape.replace(name=f"{shape.name}, suggested")
            Path(args.emit_config).write_text(json.dumps(to_hf_config(named, base=base), indent=2) + "\n")
        except OSError as err:
            raise ShapewiseError(f"cannot write the config to {args.emit_config}: {err.strerror or err}") from None
        load_config(args.emit_config)  # what we write must read back
        _say_run_settings_not_written(result.suggestions[pick - 1], pick)
    if args.json:
        print(json.dumps(with_warnings(result.to_json()), indent=2))
        return 0
    if args.emit == "megatron":
        print(flags_text(megatron_args(chosen.shape, chosen.workload)))
        return 0
    out = console()
    o = result.original
    out.print(f"[bold]{shape.name}[/bold]: {shape.params / 1e9:.3f}B params, predicted "
              f"{1000 / o.gpu_ms_per_token:,.0f} tokens/s per GPU on {gpu.name} ({workload.mode}, b={workload.batch} "
              f"s={workload.seq} t={workload.tp} {workload.dtype}{workload.kv_cache_text()}); cost model: {source}")  # as check
    if result.original_fits:
        what = training_memory_text(workload)
        out.print(f"memory per GPU {result.original_memory_bytes / GIB:,.1f} GiB of {result.gpu_memory_bytes / GIB:,.1f}"
                  f" GiB{what}")
    else:
        out.print(f"[red]{not_fitting_text(result, workload)}[/red]")
    if result.findings:
        # a note (a window's saving, in its title) costs nothing: no share to print
        out.print("findings: " + "; ".join(f.title + (f" ({f.share:.1%})" if f.cost_ms else "") for f in result.findings))
    varied = f", {' and '.join(result.vary)} varied" if result.vary else ""
    if result.suggestions:
        out.print(rich_table(suggestion_table(result.suggestions), title_justify="left",
                             title=f"{len(result.suggestions)} fastest of {result.considered} shapes within "
                                   f"{tolerance_text(args.params_tol)} of the parameters{varied} ({result.seconds:.2f} s)"))
    else:
        out.print(f"[green]{nothing_faster_text(result)}[/green]")
        if result.alternatives:
            out.print(rich_table(suggestion_table(result.alternatives), title_justify="left",
                                 title="no faster shape: the nearest alternatives"))
    if result.run_changes:
        # the settings these rows change (a decode step keeps its batch: --vary batch has no effect there)
        run = [f for f in ("batch", "tp") if any(f in s.changes for s in result.run_changes)]
        said = {"batch": "micro-batch b", "tp": "tensor parallelism t"}
        out.print(rich_table(suggestion_table(result.run_changes, memory_of=result.gpu_memory_bytes),
                             title_justify="left", title=f"run settings ({', '.join(said[f] for f in run)}) that fit, "
                             f"alone and with the best shape; rank them with the shapes: --vary {','.join(run)}"))
    elif result.original_memory_bytes > result.gpu_memory_bytes:
        out.print(f"No micro-batch or tensor-parallel degree tried (t={args.tp} at most: suggest tries no larger) "
                  "fits either: a larger --tp may, and `shapewise plan` spreads the model over more GPUs (tensor and "
                  "pipeline parallelism, ZeRO, recomputation).")
    out.print(f"intervals: 90%, from the {result.errors.source}")
    if args.emit_config:
        out.print(f"suggestion {pick} written to {args.emit_config}")
    return 0


def _say_run_settings_not_written(chosen, pick: int) -> None:
    """A config holds a model's shape, not how it is run: a suggestion that changes the micro-batch or t (--vary) is
    written without them, and its speedup counts them; said, where the file was written without a word."""
    from ..search import RUN_FIELDS, change_text

    run = {field: pair for field, pair in chosen.changes.items() if field in RUN_FIELDS}
    if run:
        settings = " ".join(f"{'b' if field == 'batch' else 't'}={new}" for field, (_, new) in run.items())
        warn(f"--emit-config: suggestion {pick}'s {change_text(run)} is how it runs, which a config does not hold: the "
             f"file has its shape alone, and its predicted {chosen.speedup:.3f}× is at {settings}")


def _config_text(path: str) -> str:
    target = Path(path)
    return (target / "config.json" if target.is_dir() else target).read_text()


def add_search(sub) -> None:
    p = sub.add_parser("search", help="design from a parameter budget: the Pareto front of size against speed")
    from ..limits import PARAMS, PARAMS_TOL
    from ..search import SEARCH_ATTENTION, SEARCH_VOCAB
    from ..shapes import ATTENTION_KINDS

    p.add_argument("--params", type=PARAMS.arg, required=True, help="parameter budget, e.g. 7e9")
    p.add_argument("--gpu", default="h200", help="GPU name (`shapewise gpus` lists them)")
    add_workload_args(p, batch=1, seq=4096, note=DIFFERS, modes=False)
    # every dtype check and plan take, as the library's search() does: fp32 and tf32 train too (slower)
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bf16", help="the data type of every op")
    p.add_argument("--vocab", type=SEARCH_VOCAB.arg, default=32000, help="vocab size, padded to a multiple of 64·t")
    p.add_argument("--mlp", choices=("swiglu", "geglu", "gelu", "relu"), default="swiglu", help="the MLP's kind")
    p.add_argument("--attention-kind", choices=SEARCH_ATTENTION, default="gqa",
                   help="gqa: a kv head per 8 query heads, rounded down (20 heads share 2 kv heads, 10 each; under "
                        "16 heads, 1)")
    # as check's and suggest's --attention: the library's search() prices the workload's, so the command lets it be set
    p.add_argument("--attention", choices=ATTENTION_KINDS, default="flash", help="fused or unfused attention")
    p.add_argument("--params-tol", type=PARAMS_TOL.arg, default=0.05,
                   help="relative tolerance on the budget (suggest's default differs: 0.02)")
    p.add_argument("--top", type=top_int, default=10,
                   help="how many of the fastest shapes to list; the Pareto front is listed whole, whatever --top "
                        "(suggest's default differs: 5)")
    add_cost_args(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(run=run_search)


def run_search(args) -> int:
    from rich.table import Table

    from ..hardware import get_gpu
    from ..search import search
    from ..shapes import Workload

    gpu = get_gpu(args.gpu)
    gpu.check_dtype(args.dtype)
    model = cost_model(args, gpu)
    source = model.source
    check_tokens(args.batch, args.seq)
    workload = Workload(batch=args.batch, seq=args.seq, tp=args.tp, dtype=args.dtype, attention=args.attention)
    say_caveats(None, workload, gpu=args.gpu)  # fused attention on a GPU before Ampere, as check says it
    result = search(params_target=args.params, gpu=model, workload=workload, vocab=args.vocab, mlp=args.mlp,
                    attention=args.attention_kind, params_tol=args.params_tol, top=args.top)
    listed = {c.shape.name: c for c in (*result.pareto, *result.top)}.values()
    too_big = sum(not result.fits(c) for c in listed)
    if too_big:
        what = training_memory_text(workload)
        both = len(result.pareto) + len(result.top) - len(listed)
        warn(f"{too_big} of the {len(listed)} shapes listed (the Pareto front's {len(result.pareto)} and the "
             f"{len(result.top)} fastest{f', {both} in both' if both else ''}) do not fit in {gpu.name}'s "
             f"{result.gpu_memory_bytes / GIB:,.1f} GiB at b={workload.batch} s={workload.seq} t={workload.tp}{what}; "
             f"they are ranked by speed alone (`shapewise plan MODEL --gpus N` spreads one over more GPUs)")
    if args.json:
        print(json.dumps(with_warnings(result.to_json()), indent=2))
        return 0
    out = console()
    out.print(f"{result.screened:,} shapes screened ({result.screen_rate:,.0f} per second), {result.predicted:,} "
              f"within {tolerance_text(args.params_tol)} of {args.params / 1e9:g}B params predicted on {gpu.name} "
              f"({workload.mode}, b={workload.batch} s={workload.seq} t={workload.tp} {workload.dtype}) in "
              f"{result.seconds:.2f} s; cost model: {source}")  # the step priced, as check and suggest name it
    front = f"all {len(result.pareto)} shapes" if len(result.pareto) != 1 else "its one shape"
    for title, cands in ((f"Pareto front, {front} (--top limits the list below): more parameters cost speed",
                          result.pareto),
                         (f"the {len(result.top)} fastest (--top {args.top})", result.top)):
        table = Table(title=title, show_edge=False, pad_edge=False, header_style="bold", title_justify="left")
        for col in ("params", "hidden", "layers", "heads", "kv", "head dim", "ffn", "tokens/s per GPU",
                    "memory/GPU GiB"):
            table.add_column(col, justify="right")
        for c in cands:
            s = c.shape
            memory = f"{c.memory_bytes / GIB:,.1f}" + ("" if result.fits(c) else " (no fit)")
            table.add_row(f"{c.params / 1e9:.3f}B", str(s.hidden), str(s.num_layers), str(s.num_heads),
                          str(s.kv_heads), str(s.d_head), str(s.ffn_width), f"{1000 / c.gpu_ms_per_token:,.0f}",
                          memory if result.fits(c) else f"[red]{memory}[/red]")
        out.print(table)
    return 0


def add_verify(sub) -> None:
    from ..limits import ROUNDS

    p = sub.add_parser("verify", help="measure a model against its suggestions (or other configs) on the GPU")
    p.add_argument("model", help="the original: a preset name, a Hugging Face hub id (org/name, read from the local "
                                 "cache) or a config.json path")
    p.add_argument("--config", metavar="OTHER", action="append", type=file_path,
                   help="verify against this config.json instead of the suggestions (repeat for several)")
    p.add_argument("--suggestion", type=_which("suggestion to verify"), metavar="N",
                   help="verify only suggestion N (default: all of --top)")
    p.add_argument("--gpu", default="h200", help="GPU whose cost model gives the predicted speedups")
    add_workload_args(p, modes=False, tp_help="tensor-parallel degree: 1 alone, as verify measures one GPU's step")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16", help="the data type of the models")
    p.add_argument("--attention", choices=("flash", "unfused"), default="flash", help="fused or unfused attention")
    add_device_arg(p)
    p.add_argument("--rounds", type=ROUNDS.arg, default=15,
                   help="interleaved rounds: each times every shape once, in an order that changes from round to "
                        "round, the GPU left idle after each for 1.5x the time it kept it busy")
    p.add_argument("--measure", choices=("auto", "model", "layer"), default="auto",
                   help="whole training steps, or layers × layer + head (auto: whole steps where all fit at once)")
    _add_shape_search_args(p, one_gpu=True)
    add_cost_args(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run_verify)


def _verify_candidates(args, shape, workload, model) -> tuple[list, str]:
    """What verify measures against the original, as (label, shape, workload, changes): the configs given
    (changes None: they name none), else suggest's suggestions with the same selection flags, else (no
    shape faster beyond the model's error) the nearest alternatives."""
    from ..hf import load_config
    from ..measure import check_device
    from ..search import change_text

    if args.config:
        if args.suggestion or args.keep or args.vary:
            raise ShapewiseError("--config names the candidates itself: leave out --suggestion, --keep and --vary")
        configs = [(f"config {Path(path).name}", load_config(path), workload, None) for path in args.config]
        check_device(args.device)
        return configs, "config"
    # verify times one GPU's step (tp 1 alone): a tensor-parallel candidate cannot be measured here
    if "tp" in _fields(args.vary, "--vary"):
        raise ShapewiseError("verify measures one GPU's step, so it cannot measure --vary tp's candidates: vary "
                             "batch alone, or rank tp with `shapewise suggest --vary tp`")
    if "tp" in _fields(args.keep, "--keep"):
        warn("--keep tp has no effect here: verify measures one GPU's step, tp 1, and never changes it")
    check_device(args.device)  # after what the model and flags alone refuse, before the search for candidates
    result = _suggest(args, shape, workload, model)
    what = "suggestion" if result.suggestions else "no faster shape"
    picked = list(enumerate(result.suggestions or result.alternatives, 1))
    if not picked:  # said before --suggestion's range, which would be 1 to 0
        raise ShapewiseError(f"nothing to verify: the neighbourhood holds no other shape; {widen_text()}")
    if args.suggestion:
        _check_rank("--suggestion", args.suggestion, len(picked),
                    "suggestion" if result.suggestions else "nearest alternative")
        picked = [picked[args.suggestion - 1]]
    return [(f"#{i} " + change_text(s.changes), s.candidate.shape, s.candidate.workload, s.changes)
            for i, s in picked], what


def run_verify(args) -> int:
    from rich.markup import escape
    from rich.table import Table

    from ..bench import progress_bar
    from ..exports import finite_json
    from ..hardware import get_gpu
    from ..hub import resolve_model
    from ..shapes import Workload
    from ..verify import MIN_INTERVAL_ROUNDS, verify

    check_tokens(args.batch, args.seq)
    source = args.model
    shape = resolve_model(source)
    workload = Workload(batch=args.batch, seq=args.seq, tp=args.tp, dtype=args.dtype, mode="train",
                        attention=args.attention)
    gpu = get_gpu(args.gpu)
    model = cost_model(args, gpu)
    candidates, what = _verify_candidates(args, shape, workload, model)
    with progress_bar(True, args.rounds, "verifying, rounds") as advance:
        results = verify((shape, workload), [c[:3] for c in candidates], gpu=model, device=args.device,
                         rounds=args.rounds, mode=args.measure, keep_going=True,
                         on_round=lambda done: advance(f"{len(candidates) + 1} shapes"))
    if args.json:  # changes: what the label says, for `plot suggestions --verified` to read; no interval: null
        rows = [v.to_json(what, changes, original=workload) for v, (*_, changes) in zip(results, candidates)]
        print(json.dumps(finite_json(rows), indent=2, allow_nan=False))
        return 0
    whole = results[0].mode == "model"
    why = "as asked: --measure layer" if args.measure == "layer" else "the whole models do not fit at once"
    measured = "whole training steps" if whole else f"layers × layer + head ({why})"
    note = "no shape is predicted faster beyond the model's error: the nearest alternatives; " \
        if what == "no faster shape" else ""
    table = Table(show_edge=False, pad_edge=False, header_style="bold", title_justify="left",
                  title=f"{shape.name} on {args.device}: {note}{measured}, per token, measured interleaved "
                        f"({args.rounds} round{'s' if args.rounds > 1 else ''}); cost model: {model.source}")
    columns = ("candidate", "predicted speedup", "90% interval", "measured speedup", "95% interval",
               *(("step ms",) if whole else ("layer ms", "head ms")))
    for col in columns:
        table.add_column(col, justify="left" if col == "candidate" else "right")
    for v in results:
        if v.error:  # not measured: why, in the measured columns
            table.add_row(v.label, f"{v.predicted_speedup:.3f}×", "{:.3f}–{:.3f}".format(*v.predicted_interval),
                          "failed", escape(v.error), *[""] * (len(columns) - 5))
            continue
        times = (f"{v.measured_step_ms:.3f}",) if whole else (f"{v.layer_ms:.3f}", f"{v.head_ms:.3f}")
        interval = f"{v.ci_low:.3f}–{v.ci_high:.3f}" if math.isfinite(v.ci_low) else "–"
        table.add_row(v.label, f"{v.predicted_speedup:.3f}×", "{:.3f}–{:.3f}".format(*v.predicted_interval),
                      f"{v.measured_speedup:.3f}×", interval, *times)
    console().print(table)
    base = next((v for v in results if math.isfinite(v.original_measured_step_ms)), None)
    if base is not None:  # the candidates' step times had no original's to be read against
        step = "a step" if whole else "a step (layers × layer + head)"
        console().print(f"the original: {base.original_measured_step_ms:.3f} ms {step} measured, "
                        f"{base.original_predicted_step_ms:.3f} ms predicted")
    if args.rounds < MIN_INTERVAL_ROUNDS:
        warn(f"{args.rounds} round{'s' if args.rounds > 1 else ''}: too few for a measured interval (it takes "
             f"{MIN_INTERVAL_ROUNDS}); --rounds 15 is the default")
    return 0


COMMANDS = (add_suggest, add_search, add_verify)
