"""`shapewise results`, `plot` and `report`: the results store, the co-design paper's figures, and a
shareable report of a model on a GPU."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ShapewiseError, warn
from ..exports import BENCHES
from ..limits import HEADS, HIDDEN
from .common import (
    CAVEATS,
    SAID,
    Parser,
    Repeated,
    add_cost_args,
    add_db_arg,
    add_mkdir_arg,
    add_model_args,
    console,
    cost_model,
    model_and_workload,
    open_store,
    say_caveats,
    top_int,
)


def add_results(sub) -> None:
    p = sub.add_parser("results", help="the results store as a table, checked, exported to CSV or JSON, or imported")
    add_db_arg(p)
    p.add_argument("--export", metavar="PATH", help="write the rows to PATH (.csv or .json, gzipped as .csv.gz or .json.gz); from a damaged store, "
                                                    "every row that still reads")
    p.add_argument("--format", choices=("csv", "json"), help="export format (default: from the file name, which must agree)")
    p.add_argument("--mkdir", action="store_true",
                   help="make the export's folder, or an imported store's, if it does not exist")
    p.add_argument("--bench", help=f"only this benchmark's rows, in the table and the export ({', '.join(BENCHES)})")
    p.add_argument("--import", dest="import_csv", metavar="FILE",
                   help="read an export (CSV or JSON, another machine's, say) into the store (then --export or "
                        "--check it, if given)")
    p.add_argument("--check", action="store_true",
                   help="check the store for damage (SQLite's integrity check) and for rows no measurement can have")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    p.set_defaults(run=run_results)


def _check_bench(store, bench: str, *, export=None) -> None:
    """--bench names a bench: refused when shapewise writes none of that name, said when the store
    holds none of its rows, and then refused where they were to be exported (a damaged store, whose summary does
    not read, is not checked: its export saves what still reads)."""
    try:
        held = store.summary()["benches"]
    except ShapewiseError:
        return
    holds = f"it holds {', '.join(held)}" if held else "it holds no rows"
    if bench not in held and bench not in BENCHES:
        raise ShapewiseError(f"--bench {bench}: no such bench; use one of {', '.join(BENCHES)} ({holds})")
    if bench not in held and export is not None:
        raise ShapewiseError(f"--bench {bench}: the results store {store.path} has no rows of that bench ({holds}): "
                             f"nothing to export, {export} not written")
    if bench not in held:
        warn(f"--bench {bench}: the results store {store.path} has no rows of that bench; {holds}")


def _refuse_together(args) -> None:
    """Flags that do nothing together are refused, never one of them dropped without a word. --import runs
    first, then --export or --check of the store it went into; --check and --export are two runs."""
    if args.check and args.export is not None:
        raise ShapewiseError("--check and --export: give one of them; a damaged store fails its check, and --export "
                             "is what saves its readable rows, so run `--check` first and `--export` after")
    given = [flag for flag, on in (("--check", args.check), ("--export", args.export is not None),
                                   ("--import", args.import_csv is not None)) if on]
    if args.json and given:
        raise ShapewiseError(f"--json prints the summary table as JSON, which {' and '.join(given)} does not print: "
                             "leave out --json")
    if args.bench is not None and (args.check or args.import_csv is not None) and args.export is None:
        raise ShapewiseError("--bench picks the rows of the table and of --export: --check checks every row and "
                             "--import reads every row of its file; leave out --bench")


def run_results(args) -> int:
    from ..store import Store

    _refuse_together(args)
    target = None
    if args.export is not None:  # said before the store is read ("" too: it names no file)
        from ..outputs import output_file

        target, fmt = output_file(args.export, formats={".csv": "csv", ".json": "json", ".csv.gz": "csv",
                                                        ".json.gz": "json"}, fmt=args.format,
                                  mkdir=args.mkdir, what="export")
    elif args.format:
        raise ShapewiseError("--format is the format of --export: give --export PATH too")
    if args.mkdir and args.export is None and args.import_csv is None:
        warn("--mkdir has no effect without --export or --import, the files whose folder it makes")
    if args.import_csv is not None:
        from ..exports import read_export

        rows = read_export(args.import_csv)  # before the store: a file refused leaves no new store behind
        with open_store(args) as store:  # a new store: in a folder that is there or --mkdir makes
            count = store.import_rows(rows, source=args.import_csv)
        old, same, repeated = store.already_stored_rows, store.same_rows, store.repeated_rows
        there = [f"{same:,} the same measurement{'s' * (same != 1)}, not stored twice"] if same else []
        there += [f"{old:,} measured again, replaced by the file's"] if old else []
        said = [f"{count - repeated - old - same:,} new, {old + same:,} already there ({'; '.join(there)})"] \
            if there else []
        said += [f"the file repeats {_count(repeated, 'row')} (its last copy kept)"] if repeated else []
        print(f"imported {_count(count - repeated, 'row')} from {args.import_csv} into {store.path}"
              + (f": {'; '.join(said)}" if said else ""))
        if target is None and not args.check:
            return 0
    with Store(args.db, read_only=True) as store:
        if args.bench is not None:
            _check_bench(store, args.bench, export=target)
        if target is not None:
            count = store.export(target, fmt=fmt, bench=args.bench)
            print(f"wrote {_count(count, 'row')} to {target}")
            if store.unreadable_rows:
                warn(f"{_count(store.unreadable_rows, 'row')} of the damaged store {store.path} could not be read: "
                     f"not in {target} (`shapewise results --db {store.path} --check` says why)")
            return 0
        if args.check:
            problems = store.check_integrity()
            if problems:
                raise ShapewiseError(f"the results store {store.path} is damaged ({_count(len(problems), 'problem')}; "
                                     f"the first: {problems[0]}): save what is still readable with `shapewise results "
                                     f"--db {store.path} --export rows.csv` and start a new store, into which "
                                     f"`shapewise results --import rows.csv` reads the rows back")
            implausible = store.implausible_rows()
            if implausible:
                raise ShapewiseError(f"the results store {store.path} holds {_count(len(implausible), 'row')} no "
                                     f"measurement can have (the first: {implausible[0]}): export it (`--export "
                                     f"rows.csv`), delete or re-measure those rows, and import the file into a new store "
                                     f"(`--import` names any row it still refuses)")
            print(f"{store.path}: sound (SQLite's integrity check passed, every row and environment reads as "
                  f"shapewise writes them, and every row's numbers are ones a measurement can have)")
            return 0
        summary = store.summary()
    if args.bench is not None:
        summary["benches"] = {k: v for k, v in summary["benches"].items() if k == args.bench}
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
        return 0
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for col in ("bench", "measured", "failed"):
        table.add_column(col, justify="left" if col == "bench" else "right")
    for bench, counts in summary["benches"].items():
        table.add_row(bench, f"{counts['ok']:,}", f"{counts['failed']:,}")
    out = console()
    count = summary["environments"]
    out.print(f"{summary['path']}: {count} environment{'s' if count != 1 else ''}")  # a title would wrap to the table
    out.print(table)
    return 0

def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _measured_rows(db):
    from ..store import Store

    if db is None:  # "" is refused by the store, not taken for no --db
        return None
    with Store(db, read_only=True) as store:
        return store.rows()


def _output(args, formats: dict, what: str):
    """--out checked before the work: its format from the extension, its folder there (or --mkdir)."""
    from ..outputs import output_file

    return output_file(args.out, formats=formats, fmt=getattr(args, "format", None), mkdir=args.mkdir, what=what)


GEMM_FIXED_DIM = 8192  # plot gemm's dims beside the swept one, where none is given
SUGGESTIONS_DRAWN = 5  # plot suggestions' --top, where none is given


def add_plot(sub) -> None:
    from ..limits import BATCH, GEMM_DIM, HEAD_DIM, HEADS, SEQ

    p = sub.add_parser("plot", help="the co-design paper's figures, predicted and measured (PNG or SVG)")
    kinds = p.add_subparsers(dest="kind", required=True, parser_class=Parser)
    for name, text in (("gemm", "GEMM throughput against one swept dim, tile and wave boundaries marked"),
                       ("attention", "attention throughput against hidden size, by the power of two dividing h/a"),
                       ("attention-heads", "attention throughput at fixed head dim, by head count"),
                       ("layer", "layer throughput against hidden size, one series per head count")):
        q = kinds.add_parser(name, help=text)
        q.add_argument("--gpu", default="h200", help="GPU name (`shapewise gpus` lists them)")
        q.add_argument("--dtype", choices=("bf16", "fp16", "fp32", "tf32", "fp8"), default="bf16",
                       help="the data type of the ops")
        add_db_arg(q, "overlay the measurements of this results store")
        q.add_argument("--out", required=True, metavar="FILE", help="the figure: a .png or .svg file")
        add_mkdir_arg(q)
        add_cost_args(q)
        if name == "gemm":
            q.add_argument("--dim", choices=("m", "n", "k"), default="n", help="the swept dim")
            q.add_argument("--values", nargs="+", action=Repeated, required=True, help="its values or START:STOP:STEP ranges")
            for dim in ("m", "n", "k"):  # no default here: one given for the swept dim is refused (run_plot)
                q.add_argument(f"-{dim}", type=GEMM_DIM.arg,
                               help=f"{dim}, where it is not the swept dim (default: {GEMM_FIXED_DIM})")
            q.add_argument("--layout", choices=("nn", "nt", "tn"), default="nn",
                           help="nn: x @ W; nt: x @ W.T (a linear layer); tn: a weight gradient")
        else:
            q.add_argument("--seq", type=SEQ.arg, default=2048, help="sequence length")
            q.add_argument("--batch", type=BATCH.arg, default=4, help="sequences per step")
        if name == "attention":
            q.add_argument("--hiddens", nargs="+", action=Repeated, required=True, help="hidden sizes, values or START:STOP:STEP ranges")
            q.add_argument("--heads", type=HEADS.arg, required=True, help="the number of heads")
            q.add_argument("--kind", dest="attention_kind", choices=("flash", "bmm"), default="flash",
                           help="fused attention, or the score BMM of unfused attention")
        if name == "attention-heads":
            q.add_argument("--head-dim", type=HEAD_DIM.arg, required=True, help="the head dim")
            q.add_argument("--head-counts", nargs="+", action=Repeated, required=True, help="head counts, values or ranges")
        if name == "layer":
            q.add_argument("--hiddens", nargs="+", action=Repeated, required=True, help="hidden sizes, values or START:STOP:STEP ranges")
            q.add_argument("--head-counts", nargs="+", action=Repeated, required=True, help="head counts, one series each")
            q.add_argument("--mlp", choices=("gelu", "relu", "swiglu", "geglu"), default="gelu", help="the MLP's kind")
        q.set_defaults(run=run_plot)
    for name, text in (("breakdown", "a model's step time by op: train, prefill and decode side by side"),
                       ("suggestions", "a model against its top suggestions: predicted speedups")):
        q = kinds.add_parser(name, help=text)
        add_model_args(q)
        q.add_argument("--out", required=True, metavar="FILE", help="the figure: a .png or .svg file")
        add_mkdir_arg(q)
        if name == "suggestions":
            q.add_argument("--top", type=top_int, help=f"suggestions to draw (default: {SUGGESTIONS_DRAWN})")
            q.add_argument("--verified", metavar="JSON", help="draw a `shapewise verify --json` run: measured beside predicted")
        add_cost_args(q)
        q.set_defaults(run=run_plot)


def run_plot(args) -> int:
    from .. import plots
    from ..canvas import require_matplotlib
    from ..cases import parse_dims
    from ..hardware import get_gpu

    require_matplotlib()  # before --mkdir makes a folder for a figure that cannot be drawn
    if args.kind == "gemm" and getattr(args, args.dim) is not None:
        raise ShapewiseError(f"-{args.dim} {getattr(args, args.dim)} gives the swept dim (--dim {args.dim}), whose "
                             f"values are --values: leave -{args.dim} out, or sweep another --dim")
    out, _ = _output(args, plots.FORMATS, "figure")
    gpu = get_gpu(args.gpu)
    model = cost_model(args, gpu)
    if args.kind == "gemm":
        fixed = {dim: GEMM_FIXED_DIM if getattr(args, dim) is None else getattr(args, dim) for dim in "mnk"}
        data = plots.gemm_data(gpu=model, dim=args.dim, values=parse_dims(args.values, name="--values"), **fixed,
                               layout=args.layout, dtype=args.dtype, measured=_measured_rows(args.db))
        fig = plots.gemm_figure(data)
    elif args.kind == "attention":
        data = plots.attention_data(gpu=model, hiddens=parse_dims(args.hiddens, name="--hiddens"),
                                    heads=args.heads, seq=args.seq, batch=args.batch, kind=args.attention_kind,
                                    dtype=args.dtype, measured=_measured_rows(args.db))
        fig = plots.attention_figure(data)
    elif args.kind == "attention-heads":
        data = plots.attention_heads_data(gpu=model, head_dim=args.head_dim,
                                          head_counts=parse_dims(args.head_counts, name="--head-counts", limit=HEADS),
                                          seq=args.seq, batch=args.batch, dtype=args.dtype, measured=_measured_rows(args.db))
        fig = plots.attention_figure(data)
    elif args.kind == "layer":
        data = plots.layer_data(gpu=model, hiddens=parse_dims(args.hiddens, name="--hiddens", limit=HIDDEN),
                                head_counts=parse_dims(args.head_counts, name="--head-counts", limit=HEADS), seq=args.seq,
                                batch=args.batch, mlp=args.mlp, dtype=args.dtype, measured=_measured_rows(args.db))
        fig = plots.layer_figure(data)
    else:
        shape, workload = model_and_workload(args)
        if args.kind == "breakdown":
            if args.mode != "train":
                warn(f"--mode {args.mode} has no effect: the breakdown draws train, prefill and decode side by side")
            modes = {mode: workload.replace(mode=mode) for mode in ("train", "prefill", "decode")}
            fig = plots.breakdown_figure(plots.breakdown_data(shape, gpu=model, workloads=modes))
        elif args.verified:  # a `shapewise verify --json` run: its predictions and measurements as they were
            _say_unused_with_verified(args)
            # the caveats of what verify measured, one GPU's training step, not of the flags it ignores
            CAVEATS.clear()
            say_caveats(shape, workload.replace(mode="train", tp=1, overlap_comm=False), gpu=args.gpu)
            rows = _verify_json(args.verified)
            try:
                data = plots.verified_data(rows, model=shape.name, gpu=gpu, dtype=workload.dtype)
                mismatch = plots.verified_model_mismatch(rows, shape)
                at = plots.verified_at(rows)
            except ShapewiseError as err:
                raise ShapewiseError(f"{args.verified} is not the output of `shapewise verify --json`: {err}") from None
            if mismatch:
                raise ShapewiseError(f"{args.verified} is a verify run of another model: {mismatch}; give the model "
                                     "it verified")
            given = {"batch": workload.batch, "seq": workload.seq, "dtype": workload.dtype, "gpu": gpu.key}
            # batch, seq and dtype said together where any differs; the GPU where it does
            shown = [k for k in at if k != "gpu" or at[k] != given[k]]
            if any(given[name] != value for name, value in at.items()):
                raise ShapewiseError(f"{args.verified} was measured at {_at_text({k: at[k] for k in shown})}, not at "
                                     f"the {_at_text({k: given[k] for k in shown})} it would be drawn with; give "
                                     + " ".join(f"{plots.VERIFIED_AT[k]} {at[k]}" for k in shown))
            unsaid = [what for what, names in (("batch, sequence length or dtype", ("batch", "seq", "dtype")),
                                               ("GPU its speedups were predicted for", ("gpu",)))
                      if not any(name in at for name in names)]
            if unsaid:
                against = " ".join(f"{plots.VERIFIED_AT[k]} {v}" for k, v in given.items() if k not in at)
                warn(f"{args.verified} records no {' and no '.join(unsaid)} (written before `verify --json` gave "
                     f"them): not checked against the {against} given here")
            fig = plots.suggestions_figure(data)
        else:
            from ..search import suggest

            result = suggest(shape, workload, gpu=model, top=args.top or SUGGESTIONS_DRAWN)
            fig = plots.suggestions_figure(plots.suggestions_data(result, gpu=gpu))
    if args.kind in ("gemm", "attention", "attention-heads", "layer"):
        _say_left_out(data["left_out"], db=args.db, gpu=gpu)
    path = plots.save(fig, out)
    print(f"wrote {path}")
    return 0


def _say_unused_with_verified(args) -> None:
    """One warning naming the flags a drawn verify run does not use: it draws every candidate the run measured,
    with the predictions it made then, of one GPU's training step (verify measures no other)."""
    unused = [flag for flag, given in (
        (f"--top {args.top}", args.top is not None), (f"--tp {args.tp}", args.tp != 1),
        (f"--mode {args.mode}", args.mode != "train"), (f"--attention {args.attention}", args.attention != "flash"),
        ("--overlap-comm", args.overlap_comm), (f"--kv-cache-dtype {getattr(args, 'kv_cache_dtype', 'auto')}",
                                                getattr(args, "kv_cache_dtype", "auto") != "auto"), ("--profile", args.profile), ("--spec-only", args.spec_only)) if given]
    if unused:
        warn(f"{', '.join(unused)} {'has' if len(unused) == 1 else 'have'} no effect with --verified: the figure "
             "draws every candidate the verify run measured, with the predictions it made, of one GPU's training step")


def _at_text(at: dict) -> str:
    """"b=4 s=2048 bf16 for h200": where a verify run measured and the GPU it predicted for, or what a plot of it
    is given."""
    prefix = {"batch": "b=", "seq": "s=", "gpu": "for "}
    return " ".join(f"{prefix.get(k, '')}{v}" for k, v in at.items())


def _verify_json(path: str):
    """The JSON of a `shapewise verify --json` run, read; one line where the file is missing or no JSON."""
    from ..limits import json_int

    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ShapewiseError(f"--verified {path}: no such file; give the file `shapewise verify --json` wrote") from None
    except UnicodeDecodeError:  # a figure or a database given for the JSON: the decoder's bytes and offsets say nothing
        raise ShapewiseError(f"{path} is not the output of `shapewise verify --json`: not a text file (not UTF-8)") \
            from None
    except OSError as err:
        raise ShapewiseError(f"cannot read --verified {path}: {err.strerror or err}") from None
    try:
        return json.loads(text, parse_int=json_int)
    except ShapewiseError as err:  # a number too long (json_int)
        raise ShapewiseError(f"{path} is not the output of `shapewise verify --json`: {err}") from None
    except (ValueError, RecursionError) as err:
        raise ShapewiseError(f"{path} is not the output of `shapewise verify --json`: not JSON ({err})") from None


def _say_left_out(left_out: dict[str, int], *, db, gpu) -> None:
    """One warning line for --db rows of the figure's very cases that ran on another device."""
    if left_out:
        devices = ", ".join(f"{_count(n, 'measurement')} on {name}" for name, n in left_out.items())
        warn(f"--db {db} holds {devices} of these cases, not on the {gpu.name} (--gpu {gpu.key}): left out, as "
             f"another device's times are no test of this GPU's predictions")


REPORT_FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}


def add_report(sub) -> None:
    p = sub.add_parser("report", help="a shareable self-contained HTML (or Markdown) report of a model on a GPU")
    add_model_args(p)
    p.add_argument("--out", required=True, metavar="FILE", help="report.html, or report.md with figures beside it")
    p.add_argument("--format", choices=("html", "md"), help="html or md (default: from the file name, which must agree)")
    add_mkdir_arg(p)
    add_db_arg(p, "include measured-vs-predicted from this results store")
    p.add_argument("--top", type=top_int, default=5, help="suggestions to include")
    add_cost_args(p)
    p.set_defaults(run=run_report)


def run_report(args) -> int:
    from ..canvas import require_matplotlib
    from ..document import write_report
    from ..hardware import get_gpu
    from ..store import Store, default_path

    require_matplotlib()  # its figures, in either format: said before --mkdir makes a folder
    out, fmt = _output(args, REPORT_FORMATS, "report")
    shape, workload = model_and_workload(args)
    gpu = get_gpu(args.gpu)
    model = cost_model(args, gpu)
    # never create a store just to read it; --db "" is refused by the store, not taken for no --db
    db = args.db if args.db is not None else (default_path() if default_path().exists() else None)
    store = Store(db, read_only=True) if db is not None else None
    try:
        written = write_report(shape, workload, out=out, gpu=model, fmt=fmt, top=args.top, store=store,
                               model_arg=args.model or ["--config", args.config], warnings=tuple(SAID))
    finally:
        if store:
            store.close()
    print("wrote " + ", ".join(map(str, written)))
    return 0


COMMANDS = (add_results, add_plot, add_report)
