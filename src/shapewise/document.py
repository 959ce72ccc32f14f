"""The shareable report: everything `check` and `suggest` say about one model on one GPU, with the
figures, the measurements the results store holds for its ops, and the commands that reproduce
every number.

Two formats:

    html  one self-contained page: figures as data: URIs (base64 PNG), inline CSS, nothing fetched
          from the network (a Content-Security-Policy forbids it). A short inline script, run on
          load, checks that every image decoded and that nothing was fetched, and writes the result
          into <p id="browser-check"> (what the headless-browser test reads).
    md    Markdown that references its figures as PNG files beside it (write_report writes them).

Content, in order: title (model, GPU, date); the model and the workload; the cost model; the op
table; the totals; the findings; the breakdown figure (train, prefill and decode of the same model
and batch); the suggestions with their figure; measured against predicted (only where the store
holds "op" measurements of this step's ops on this GPU); and the commands that reproduce it all.
"""

from __future__ import annotations

import base64
import html
import os
import shlex
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .errors import ShapewiseError, warn
from .hardware import GPU, find_gpu
from .memory import capacity_bytes
from .presets import PRESETS
from .profile import SPEC_ASKED, CostModel, Profile, cost_model
from .report import (
    OVERLAPPED,
    PRICED_ALONE,
    CheckResult,
    Table,
    check,
    finding_table,
    flops_label,
    mfu_text,
    op_table,
    overlap_text,
    suggestion_table,
    tflop_text,
)
from .shapes import MODES, ModelShape, Workload

FORMATS = ("html", "md")
MATCH_FIELDS = ("label", "m", "n", "k", "batch", "layout")  # and dtype: the op's params a measurement must share

# What the browser runs on load: every <img> decoded, and no fetch outside data: and file: (also
# counting anything the Content-Security-Policy blocked). The result goes into #browser-check.
_SCRIPT = """
var blocked = [];
document.addEventListener("securitypolicyviolation", function (e) { blocked.push(e.blockedURI); });
window.addEventListener("load", function () {
  var images = document.images, ok = 0;
  for (var i = 0; i < images.length; i++) {
    if (images[i].complete && images[i].naturalWidth > 0) ok++;
  }
  var fetched = performance.getEntriesByType("resource").filter(function (r) {
    return !/^(data|file):/.test(r.name);
  });
  var out = document.getElementById("browser-check");
  out.textContent = "images=" + images.length + " images-ok=" + ok + " network=" + (fetched.length + blocked.length);
  out.setAttribute("data-checked", "1");
});
"""

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d232a;margin:0;background:#fff}
main{max-width:1240px;margin:0 auto;padding:24px 28px 40px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #dde2e7;padding-bottom:4px}
.meta,.note,footer{color:#5a6570;font-size:13px}
table{border-collapse:collapse;margin:6px 0 10px;font-variant-numeric:tabular-nums}
th,td{padding:3px 10px;border-bottom:1px solid #eceff2;text-align:left;vertical-align:top}
th{background:#f4f6f8;font-weight:600}tbody tr:nth-child(even){background:#fafbfc}
td.n,th.n{text-align:right}td.mono,code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
table.kv th{background:none;font-weight:500;color:#5a6570}.pair{display:flex;flex-wrap:wrap;gap:0 40px;align-items:flex-start}
.totals{font-size:16px}.totals b{font-size:18px}
figure{margin:10px 0}figure img{max-width:100%;height:auto;border:1px solid #eceff2}figcaption{color:#5a6570;font-size:13px}
pre{background:#f4f6f8;padding:10px 12px;overflow-x:auto;white-space:pre-wrap}
.good{color:#1e7b34}
"""

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


@dataclass
class _Content:
    """Everything the report says, format-free."""

    shape: ModelShape
    workload: Workload
    gpu: GPU
    result: CheckResult
    date: str
    model_rows: list  # (field, value)
    workload_rows: list
    ops: Table
    totals: dict
    findings: Table
    suggestions: object  # search.Suggestions
    suggested: Table  # the suggestions' rows
    measured: Table  # rows only where the store measured this step's ops
    measured_note: str
    commands: list  # (what it reproduces, command)
    figures: dict = field(default_factory=dict)  # name -> (PNG bytes, caption)
    reproduce_note: str = ""
    warnings: tuple = ()  # what reading the model guessed or leaves unpriced, and what its prices assume


# ---- public API -------------------------------------------------------------------------------

def build_report(shape: ModelShape, workload: Workload, *, gpu: GPU | str | CostModel, spec_only: bool = False,
                 profile: Profile | str | None = None, store=None, fmt: str = "html", top: int = 5,
                 model_arg: str | list[str] | None = None, out: str | os.PathLike | None = None,
                 warnings: tuple[str, ...] = ()) -> str:
    """The report as one string: a self-contained HTML page, or Markdown whose figures are PNG files
    named <stem>-breakdown.png and <stem>-suggestions.png (stem: of `out`, else "report").

    gpu, spec_only, profile: the cost model, as for report.check; store: a store.Store whose "op"
    measurements of this step's ops (on this GPU) are set against the predictions; top: how many
    suggestions; model_arg: how the command line names the model, for the Reproduce section: "gpt2",
    or ["--config", path] (a string is split as a shell would; default: the preset name, or --config
    with the shape's source file);
    out: the file the report will be written to, named in its own reproduce command; warnings: what was
    guessed or left unpriced in reading the model (the command's warnings), said under the model with what
    the prices assume (report.check's caveats)."""
    text, _ = _build(shape, workload, model=cost_model(gpu, spec_only=spec_only, profile=profile), store=store,
                     fmt=fmt, top=top, model_arg=model_arg, out=out, warnings=warnings)
    return text


def write_report(shape: ModelShape, workload: Workload, *, out: str | os.PathLike, gpu: GPU | str | CostModel,
                 spec_only: bool = False, profile: Profile | str | None = None, store=None, fmt: str | None = None,
                 top: int = 5, model_arg: str | list[str] | None = None, warnings: tuple[str, ...] = ()) -> list[Path]:
    """Write the report to `out` and return the files written, the report first.

    fmt: "html" or "md" (default: "md" when out ends in .md, else "html"). Markdown is written
    with its figures beside it: <stem>-breakdown.png, and <stem>-suggestions.png when there are
    suggestions."""
    out = Path(out).expanduser()
    fmt = fmt or ("md" if out.suffix.lower() in (".md", ".markdown") else "html")
    text, figures = _build(shape, workload, model=cost_model(gpu, spec_only=spec_only, profile=profile), store=store,
                           fmt=fmt, top=top, model_arg=model_arg, out=out, warnings=warnings)
    written = [out]
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        if fmt == "md":
            for name, (png, _caption) in figures.items():
                path = out.parent / _figure_file(out.stem, name)
                path.write_bytes(png)
                written.append(path)
    except OSError as err:  # the report, or a figure beside it: the file that failed is the one named
        failed = Path(err.filename) if err.filename else out
        what = "the report to" if failed == out else "the report's figure"
        raise ShapewiseError(f"cannot write {what} {failed}: {err.strerror or err}") from None
    return written


# ---- gathering --------------------------------------------------------------------------------

def _build(shape, workload, *, model: CostModel, store, fmt, top, model_arg, out, warnings=()) -> tuple[str, dict]:
    if fmt not in FORMATS:
        raise ShapewiseError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
    content = _gather(shape, workload, model=model, store=store, top=top, model_arg=model_arg, out=out, fmt=fmt)
    # what reading said, then what the prices assume (check's caveats): the file is read without the terminal
    content.warnings = tuple(dict.fromkeys((*warnings, *content.result.caveats)))
    stem = Path(out).stem if out is not None else "report"
    text = _html(content) if fmt == "html" else _markdown(content, stem)
    return text, content.figures


def _gather(shape, workload, *, model: CostModel, store, top, model_arg, out, fmt) -> _Content:
    from . import plots
    from .search import suggest

    gpu, w = model.gpu, workload
    result = check(shape, workload, gpu=model)
    step = result.step
    totals = {"step ms": f"{step.time_ms:,.2f}",
              "tokens/s" + (f" per {w.tp}-GPU group" if w.tp > 1 else ""): f"{step.tokens_per_s:,.0f}",
              "MFU": mfu_text(step), flops_label(step): tflop_text(step)}
    if w.mode == "train":  # as check says it: the step is forward and backward; plan's adds Adam's update
        totals["with Adam's update ms"] = f"{step.time_ms + result.optimizer_ms:,.2f}"
    if result.memory is not None:  # as check prints it: the parts, and of what the GPU holds
        totals["memory per GPU"] = f"{result.memory.text(w.mode)} of {capacity_bytes(gpu) / 2**30:,.1f} GiB"
    if result.megatron_memory is not None:
        totals["memory per GPU as Megatron-LM holds it"] = f"{result.megatron_memory.total_bytes / 2**30:,.1f} GiB"
    for i, caveat in enumerate(result.caveats, 1):
        totals[f"caveat {i}" if len(result.caveats) > 1 else "caveat"] = caveat

    figures = {}
    modes = {mode: w.replace(mode=mode) for mode in MODES}
    fig = plots.breakdown_figure(plots.breakdown_data(shape, gpu=model, workloads=modes))
    caption = (f"Share of the step time per op in {', '.join(modes)} steps of {shape.name} (b={w.batch}, s={w.seq}, "
               f"t={w.tp}, {w.dtype}; in decode s is the KV-cache length) on {gpu.name}, predicted.")
    figures["breakdown"] = (_png(plots, fig), caption)
    sugg = suggest(shape, workload, gpu=model, top=top)
    if sugg.suggestions:
        fig = plots.suggestions_figure(plots.suggestions_data(sugg, gpu=gpu))
        caption = f"Predicted speedup of the {len(sugg.suggestions)} fastest shapes within 2% of {shape.name}'s parameters."
        figures["suggestions"] = (_png(plots, fig), caption)

    measured, measured_note = _measured(step, gpu, store)
    commands, note = _commands(shape, w, model, store, top, model_arg, out, fmt, measured=bool(measured.rows))
    return _Content(shape=shape, workload=w, gpu=gpu, result=result,
                    date=datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                    model_rows=_model_rows(shape), workload_rows=_workload_rows(w, gpu), ops=op_table(step),
                    totals=totals, findings=finding_table(result.findings), suggestions=sugg,
                    suggested=suggestion_table(sugg.suggestions), measured=measured,
                    measured_note=measured_note, commands=commands, figures=figures, reproduce_note=note)


def _png(plots, fig) -> bytes:
    return plots.png_bytes(fig, dpi=110)  # also drops the figure from pyplot's registry, if it was there


def _bias_words(s) -> str:
    """Which linears carry biases, in words."""
    words = ({"all": "yes", "attention": "on attention only", "mlp": "on the MLP only"}[s.bias_scope] if s.bias
             else "on q, k and v only" if s.qkv_bias else "")
    if s.out_bias:  # GPT-Neo's out_proj beside its MLP's; TeleChat's dense and down_proj alone
        return f"{words}, and on the output projections" if words else "on the output projections only"
    return words or "no"


def _model_rows(s: ModelShape) -> list:
    rows = [("name", s.name), ("parameters", f"{s.params:,} ({s.params / 1e9:.3f}B)")]
    if s.is_moe:
        rows.append(("active parameters", f"{s.active_params:,} ({s.active_params / 1e9:.3f}B)"))
    if s.published_params:
        rows.append(("published parameters", f"{s.published_params:,}"))
    rows += [("hidden", s.hidden), ("layers", s.num_layers), ("heads", s.num_heads),
             ("kv heads", f"{s.kv_heads}" + ("" if s.kv_heads == s.num_heads else f" (grouped: {s.num_heads // s.kv_heads} "
                                                                                  f"query heads per kv head)")),
             ("head dim", s.d_head), ("FFN width", s.ffn_width), ("MLP", s.mlp), ("vocab", f"{s.vocab:,}"),
             ("norm", s.norm), ("tied embeddings", "yes" if s.tied_embeddings else "no"),
             ("biases", _bias_words(s)), ("parallel attention and MLP", "yes" if s.parallel_attn else "no"),
             ("positions", f"learned, {s.learned_positions:,} rows" if s.learned_positions else
                           f"RoPE on {s.num_rope_layers} of {s.num_layers} layers"
                           if s.mixed_rope else "RoPE" if s.rotary_fraction else "no rotary (ALiBi, or none)")]
    if s.rotary_fraction not in (0.0, 1.0):
        rows.append(("rotary share of each head", f"{s.rotary_fraction:g}"))
    if s.is_mla:  # the head dim alone misdescribes it: queries and keys are wider than values, through latents
        rows.append(("latent attention", f"key/value latent {s.kv_lora_rank}"
                     + (f", query latent {s.q_lora_rank}" if s.q_lora_rank else ", queries from the input")
                     + f"; query/key head {s.qk_head_dim} ({s.d_head} + {s.rope_head_dim} rotary), "
                       f"value head {s.v_dim}"))
    if s.qk_norm:
        rows.append(("QK-norm", "yes" if s.num_qk_norm_layers == s.num_layers
                     else f"on the {s.num_qk_norm_layers} rotary layers of {s.num_layers}"))
    if s.embed_norm:
        rows.append(("norm over the embeddings", "yes"))
    if s.logit_softcap:
        rows.append(("logit soft-capping", "yes"))
    if s.is_moe:
        rows += [("experts", f"{s.num_experts}, top-{s.top_k}" + (f", {s.num_shared_experts} shared"
                                                                 if s.num_shared_experts else "")),
                 ("expert FFN width", s.expert_width)]
        if s.num_dense_layers:
            rows.append(("dense layers", f"{s.num_dense_layers} of {s.num_layers}"))
    if s.window:
        rows.append(("sliding window", f"{s.window:,} tokens, {s.window_layout}"))
    if s.source:
        rows.append(("source", s.source))
    return [(k, f"{v}") for k, v in rows]


def _workload_rows(w: Workload, gpu: GPU) -> list:
    peaks = f"{gpu.peak_tflops(w.dtype):,.0f} TFLOP/s {w.dtype} peak, {gpu.mem_bandwidth_gbs / 1000:.2f} TB/s"
    return [("GPU", f"{gpu.name} ({peaks})"),
            ("mode", {"train": "train (forward + backward)", "prefill": "prefill (forward)",
                      "decode": "decode (one new token per sequence)"}.get(w.mode, w.mode)),
            ("micro-batch", f"{w.batch} sequence{'s' if w.batch != 1 else ''}"),
            ("sequence length" if w.mode != "decode" else "KV-cache length", f"{w.seq:,}"),
            ("tokens per step", f"{w.tokens:,}"),
            ("tensor parallel", f"{w.tp}" + (f", its {OVERLAPPED}" if w.overlap_comm and w.tp > 1 else "")),
            ("dtype", w.dtype), ("attention", w.attention),
            *([("KV cache", w.kv_cache_name + (" (auto: the activations' dtype)" if w.kv_cache_dtype == "auto" else ""))]
              if w.mode != "train" else [])]


def _op_key(op) -> tuple:
    return tuple(getattr(op, f) for f in MATCH_FIELDS)


def _measured(step, gpu: GPU, store) -> tuple[Table, str]:
    """A table (op, shape, count, measured ms, predicted ms, error, measured on) of the ops of the step
    that the store measured on this GPU (bench "op"; the newest measurement of each op wins), and a
    note on it."""
    if store is None:
        return _measured_table([]), ""
    dtype = step.workload.dtype
    wanted = {_op_key(c.op) for c in step.costs}
    found, elsewhere = {}, {}
    for row in store.rows(bench="op", include_errors=False):
        p = row["params"]
        if not isinstance(p, dict) or p.get("dtype") != dtype or row.get("median_ms") is None:
            continue
        key = tuple(p.get(f) for f in MATCH_FIELDS)
        if key not in wanted:
            continue
        if getattr(find_gpu(row.get("gpu_name")), "key", None) != gpu.key:
            # measured on another GPU or the CPU: no comparison with this GPU's prediction
            device = row.get("gpu_name") or "an unnamed device"
            elsewhere[device] = elsewhere.get(device, 0) + 1
            continue
        best = found.get(key)
        if best is None or (row["created_utc"], row["id"]) >= (best["created_utc"], best["id"]):
            found[key] = row
    rows = []
    for c in step.costs:  # in the step's order
        key = _op_key(c.op)
        if key not in found:
            continue
        row = found[key]
        measured, predicted = row["median_ms"], c.time_ms
        rows.append([c.op.label, c.op.shown_shape, f"{c.op.count}", f"{measured:.4f}", f"{predicted:.4f}",
                     f"{predicted / measured - 1:+.1%}" if measured > 0 else "",
                     f"{row.get('gpu_name') or '?'}, torch {row.get('torch') or '?'}, {row['created_utc'][:10]}"])
    note = ""
    if rows:
        note = (f"{len(rows)} of {len(step.costs)} ops of the step measured alone (median per call; error is "
                f"predicted / measured − 1), from {store.path}.")
        if elsewhere:
            count = sum(elsewhere.values())
            note += (f" {count} measurement{'s' if count != 1 else ''} of these ops on other devices "
                     f"{'are' if count != 1 else 'is'} left out.")
    elif elsewhere:  # the file says it too, not the terminal alone: a reader sees why a store gave no table
        count = sum(elsewhere.values())
        note = (f"{store.path} holds {count} measurement{'s' if count != 1 else ''} of this step's ops, none on the "
                f"{gpu.name} ({', '.join(f'{n} on {name}' for name, n in elsewhere.items())}): left out, as another "
                f"device's times are no test of this GPU's predictions.")
    if elsewhere:
        devices = ", ".join(f"{n} on {name}" for name, n in elsewhere.items())
        warn(f"the results store {store.path} holds measurements of this step's ops ({devices}) not on the {gpu.name}: left "
             f"out of the report's measured-against-predicted table, as another device's times are no test of "
             f"this GPU's predictions")
    return _measured_table(rows), note


def _measured_table(rows: list) -> Table:
    return Table(MEASURED_HEAD, rows, frozenset({2, 3, 4, 5}), frozenset({1}))


def _model_flag(shape: ModelShape, model_arg) -> tuple[list[str], str]:
    if model_arg:
        return (shlex.split(model_arg) if isinstance(model_arg, str) else [f"{a}" for a in model_arg]), ""
    if PRESETS.get(shape.name) == shape:
        return [shape.name], ""
    if shape.source and Path(shape.source).is_file():
        return ["--config", shape.source], ""
    return ["--config", "CONFIG.json"], (f"{shape.name} is not a preset and was not read from a config.json: "
                                         f"save its shape as a Hugging Face config.json and pass that file.")


def _is_default_store(path) -> bool:
    from .store import default_path

    try:
        return Path(path).resolve() == default_path().resolve()
    except OSError:
        return False


def _commands(shape, w: Workload, cost_model_: CostModel, store, top, model_arg, out, fmt, *, measured: bool):
    model, note = _model_flag(shape, model_arg)
    gpu, profile = cost_model_.gpu, cost_model_.profile
    shape_flags = ["--batch", f"{w.batch}", "--seq", f"{w.seq}", "--tp", f"{w.tp}"]
    rest = ["--dtype", w.dtype, "--attention", w.attention, *(["--overlap-comm"] if w.overlap_comm else [])]
    # the cache's dtype where a step keeps one (bench measures the activations' dtype and takes no such flag)
    kv = lambda mode: ["--kv-cache-dtype", w.kv_cache_dtype] if w.kv_cache_dtype != "auto" and mode != "train" else []  # noqa: E731
    if cost_model_.params is cost_model(gpu).params:
        cost = []  # the GPU's own cost model (the user's profile, else the shipped one, else the spec), as the default
    elif cost_model_.source == SPEC_ASKED:
        cost = ["--spec-only"]
    elif profile is not None and profile.path and Path(profile.path).is_file():
        cost = ["--profile", profile.path]  # (a shipped profile has no file: the default finds it)
        if profile.borrowed_for == gpu.key:  # another GPU's profile prices this one only when asked
            cost.append("--borrow-profile")
    else:
        cost = []
        note = (note + " " if note else "") + ("The cost model's parameters were given in code: the commands "
                                              "below use the GPU's profile instead.")
    # The default store is found without naming it (and its path is the user's home: not for a shared report).
    db = ["--db", str(store.path)] if store is not None and not _is_default_store(store.path) else []

    def cmd(*parts):
        return " ".join(shlex.quote(p) for p in ("shapewise", *parts))

    target = Path(out).name if out is not None else f"report.{fmt}"
    commands = [
        ("the op table, the totals and the findings",
         cmd("check", *model, "--gpu", gpu.key, *shape_flags, "--mode", w.mode, *rest, *kv(w.mode), *cost)),
        ("the breakdown figure (one check per mode)",
         "\n".join(cmd("check", *model, "--gpu", gpu.key, *shape_flags, "--mode", m, *rest, *kv(m), *cost)
                   for m in MODES)),
        ("the suggestions", cmd("suggest", *model, "--gpu", gpu.key, *shape_flags, "--mode", w.mode, *rest,
                                *kv(w.mode), "--top", f"{top}", *cost)),
    ]
    if measured:
        commands.append(("the measurements (on a machine with this GPU; --gpu names the GPU to predict for)",
                         cmd("bench", "ops", *model, "--gpu", gpu.key, *shape_flags, "--mode", w.mode, *rest,
                             "--device", "cuda", *db)))
    commands.append(("this report", cmd("report", *model, "--gpu", gpu.key, *shape_flags, "--mode", w.mode, *rest,
                                        *kv(w.mode), "--top", f"{top}", *cost, *db, "--out", target,
                                        *(["--format", "md"] if fmt == "md" else []))))
    return commands, note


# ---- HTML -------------------------------------------------------------------------------------

def _nothing_faster(sugg) -> str:
    """What the report says where suggest lists no shape: none faster beyond the model's error, and the nearest
    one predicted faster within it, as `shapewise suggest` lists it (a report said "none is predicted faster" of
    llama2-7b, where suggest printed layers 32→31, ffn 11008→11264 at 1.022×)."""
    from .search import change_text

    n, beyond = sugg.considered, "faster than the original by more than the model's error"  # n: the other shapes
    said = ("No other shape is within 2% of the parameters" if n == 0 else
            f"The one other shape within 2% of the parameters is not predicted {beyond}" if n == 1 else
            f"None of the {n} other shapes within 2% of the parameters is predicted {beyond}")
    faster = [a for a in sugg.alternatives if a.speedup > 1]
    if not faster:
        return said + "."
    near = faster[0]
    return (f"{said}; the nearest, {change_text(near.changes)}, is predicted {near.speedup:.3f}× "
            f"({near.interval[0]:.3f}–{near.interval[1]:.3f} at 90%): within it, so measure it before taking it "
            "(`shapewise verify`).")


def _run_settings(sugg) -> str:
    """The fastest changed run setting (micro-batch, t) that fits, as suggest's second table lists it, or "": the
    report listed shapes alone, and said nothing of llama3-8b at t=2 running 1.10× at twice the micro-batch."""
    from .search import change_text

    if not sugg.run_changes:
        return ""
    best = max(sugg.run_changes, key=lambda s: s.speedup)
    return (f"Run settings are apart from the shapes: the fastest that fits, {change_text(best.changes)}, is predicted "
            f"{best.speedup:.3f}× ({best.interval[0]:.3f}–{best.interval[1]:.3f} at 90%); `shapewise suggest` "
            "lists them.")


def _e(text) -> str:
    return html.escape(f"{text}", quote=True)


def _table(table: Table, *, id_: str = "") -> str:
    head, rows = table.head, table.rows

    def cls(i):
        names = (["n"] if i in table.numeric else []) + (["mono"] if i in table.mono else [])
        return f' class="{" ".join(names)}"' if names else ""

    ident = f' id="{_e(id_)}"' if id_ else ""
    out = [f"<table{ident}><thead><tr>" + "".join(f"<th{cls(i)}>{_e(h)}</th>" for i, h in enumerate(head))
           + "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td{cls(i)}>{_e(v)}</td>" for i, v in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _kv(rows: list, id_: str) -> str:
    return (f'<table class="kv" id="{_e(id_)}"><tbody>'
            + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows) + "</tbody></table>")


def _figure(content: _Content, name: str) -> str:
    png, caption = content.figures[name]
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure id="figure-{name}"><img alt="{_e(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


MEASURED_HEAD = ("op", "shape", "count", "measured ms", "predicted ms", "error", "measured on")


def _title(c: _Content) -> str:
    return f"{c.shape.name} on {c.gpu.name}: {c.workload.mode} step, {c.date}"


def _html(c: _Content) -> str:
    s, w = c.shape, c.workload
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(_title(c))}</title>", f"<style>{_CSS}</style>", f"<script>{_SCRIPT}</script>", "</head><body><main>",
        f"<h1>{_e(s.name)} on {_e(c.gpu.name)}</h1>",
        (f'<p class="meta">{_e(w.mode)} step · b={w.batch} s={w.seq} t={w.tp} {_e(w.dtype)} · {_e(c.date)} · '
         f"shapewise {_e(_version())}</p>"),
        '<section id="model"><h2>Model and workload</h2><div class="pair">', _kv(c.model_rows, "model-table"),
        _kv(c.workload_rows, "workload-table"), "</div>",
        *([f'<p class="note">Warning: {_e(line)}</p>' for line in c.warnings]), "</section>",
        '<section id="cost-model"><h2>Cost model</h2>',
        f"<p>{_e(c.result.model_source)}"
        + ("" if c.result.calibrated else " — uncalibrated: expect larger errors than a calibrated profile's") + "</p>",
        "</section>",
        '<section id="ops"><h2>Ops of one step</h2>',
        ('<p class="note">One row per op on one tensor-parallel rank. FLOPs: share of the step\'s matrix FLOPs; '
         "time: share of the step time; of peak: of the dtype's peak (of the memory bandwidth for memory-bound ops); "
         "main loss: the largest avoidable loss, with its share of the op's time (before a calibrated "
         "correction that made the op faster).</p>"),
        _table(c.ops, id_="op-table"), "</section>",
        '<section id="totals"><h2>Totals</h2><p class="totals">'
        + " · ".join(f"{_e(k)} <b>{_e(v)}</b>" for k, v in c.totals.items()) + "</p></section>",
        '<section id="findings"><h2>Findings, costliest first</h2>',
    ]
    if c.findings.rows:
        overlap = overlap_text(c.result.findings)
        parts += ['<p class="note">Each finding is priced by predicting the step again with its fix applied'
                  + (f"; {_e(overlap)}" if overlap else "") + ".</p>",
                  _table(c.findings, id_="findings-table")]
    else:
        parts.append('<p class="good">No findings: the shape follows every co-design rule that costs time here.</p>')
    parts += ["</section>", '<section id="breakdown"><h2>Train, prefill and decode</h2>', _figure(c, "breakdown"),
              "</section>", '<section id="suggestions"><h2>Faster shapes of about the same size</h2>']
    sugg = c.suggestions
    if c.suggested.rows:
        parts += [(f'<p class="note">{len(sugg.suggestions)} fastest of {sugg.considered} shapes within 2% of the '
                   f"parameters, ranked by predicted GPU time per token.</p>"),
                  _table(c.suggested, id_="suggestions-table"),
                  _figure(c, "suggestions")]
    else:
        parts.append(f"<p>{_e(_nothing_faster(sugg))}</p>")
    settings = _run_settings(sugg)
    if settings:
        parts.append(f"<p>{_e(settings)}</p>")
    parts.append("</section>")
    if c.measured_note:  # a table, or why the store gave none
        parts += ['<section id="measured"><h2>Measured against predicted</h2>',
                  f'<p class="note">{_e(c.measured_note)}</p>',
                  *([_table(c.measured, id_="measured-table")] if c.measured.rows else []),
                  "</section>"]
    parts += ['<section id="reproduce"><h2>Reproduce</h2>']
    if c.reproduce_note:
        parts.append(f'<p class="note">{_e(c.reproduce_note)}</p>')
    for what, command in c.commands:
        parts.append(f"<p>{_e(what.capitalize())}:</p><pre><code>{_e(command)}</code></pre>")
    parts += ["</section>",
              '<footer><p id="browser-check">browser check not run</p></footer>', "</main></body></html>"]
    return "\n".join(parts) + "\n"


# ---- Markdown ---------------------------------------------------------------------------------

def _md_cell(value) -> str:
    text = " ".join(f"{value}".split())
    return html.escape(text, quote=False).replace("|", "\\|")


def _md_table(table: Table) -> str:
    lines = ["| " + " | ".join(_md_cell(h) for h in table.head) + " |",
             "|" + "|".join("---:" if i in table.numeric else "---" for i in range(len(table.head))) + "|"]
    lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _figure_file(stem: str, name: str) -> str:
    return f"{stem}-{name}.png"


def _md_link(stem: str, name: str) -> str:
    """The figure's file as a Markdown link target: percent-encoded, as a space ends the target and a #
    starts a fragment (a report named "design review.md" otherwise links to no file)."""
    return urllib.parse.quote(_figure_file(stem, name))


def _markdown(c: _Content, stem: str) -> str:
    s, w = c.shape, c.workload
    out = [f"# {_md_cell(s.name)} on {_md_cell(c.gpu.name)}", "",
           f"{_md_cell(w.mode)} step · b={w.batch} s={w.seq} t={w.tp} {w.dtype} · {c.date} · shapewise {_version()}", "",
           "## Model and workload", "", _md_table(Table(("model", ""), c.model_rows)), "",
           _md_table(Table(("workload", ""), c.workload_rows)), "",
           *(f"Warning: {_md_cell(line)}\n" for line in c.warnings),
           "## Cost model", "", _md_cell(c.result.model_source), "",
           "## Ops of one step", "", _md_table(c.ops), "",
           "## Totals", "", " · ".join(f"{k} **{v}**" for k, v in c.totals.items()), "",
           "## Findings, costliest first", ""]
    overlap = overlap_text(c.result.findings)
    out += [_md_table(c.findings) if c.findings.rows else
            "No findings: the shape follows every co-design rule that costs time here.", "",
            *([f"Note: {_md_cell(f'{PRICED_ALONE}: {overlap}')}.", ""] if overlap else [])]
    _, caption = c.figures["breakdown"]
    out += ["## Train, prefill and decode", "", f"![{_md_cell(caption)}]({_md_link(stem, 'breakdown')})", "",
            "## Faster shapes of about the same size", ""]
    sugg = c.suggestions
    if c.suggested.rows:
        _, caption = c.figures["suggestions"]
        out += [(f"{len(sugg.suggestions)} fastest of {sugg.considered} shapes within 2% of the parameters, ranked by "
                 f"predicted GPU time per token."), "", _md_table(c.suggested), "",
                f"![{_md_cell(caption)}]({_md_link(stem, 'suggestions')})", ""]
    else:
        out += [_md_cell(_nothing_faster(sugg)), ""]
    settings = _run_settings(sugg)
    if settings:
        out += [_md_cell(settings), ""]
    if c.measured_note:  # a table, or why the store gave none
        out += ["## Measured against predicted", "", _md_cell(c.measured_note), ""]
        out += [_md_table(c.measured), ""] if c.measured.rows else []
    out += ["## Reproduce", ""]
    if c.reproduce_note:
        out += [_md_cell(c.reproduce_note), ""]
    for what, command in c.commands:
        out += [f"{what.capitalize()}:", "", "```", command, "```", ""]
    return "\n".join(out)


def _version() -> str:
    from . import __version__

    return __version__
