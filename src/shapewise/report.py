"""A checked step as the user sees it: a rich terminal view, or a JSON document with the same content."""

from __future__ import annotations

from dataclasses import dataclass

from .cost import StepCost, predict_step
from .errors import listed
from .hardware import GPU
from .memory import PRECISIONS, Memory, assumption_text, capacity_bytes, estimate, training_precision
from .ops import COMM, MEMORY
from .parallel import optimizer_ms
from .profile import CostModel, Profile, cost_model
from .rules import Finding, figure, find, memory_finding, price_caveats, share_text
from .shapes import ModelShape, Workload

LOSS_WORDS = {"kernel": "kernel ceiling", "tile": "tile quantization", "wave": "wave quantization",
              "misalign": "misaligned dim", "memory": "memory-bound", "launch": "launch overhead",
              "comm": "communication", "window": "windowed kernel", "correction": "measured correction"}


@dataclass(frozen=True)
class CheckResult:
    step: StepCost
    findings: tuple[Finding, ...]
    memory: Memory | None = None  # per GPU: as memory.assumption_text says
    caveats: tuple[str, ...] = ()  # what the price assumes that the model does not give (rules.price_caveats)
    # Training only: what the step above leaves out and `plan` prices, so that the two agree in words.
    optimizer_ms: float = 0.0  # Adam's update after the backward (the step's time is forward and backward)
    megatron_memory: Memory | None = None  # the same layout as Megatron-LM holds it (`plan`'s framework)

    def to_json(self) -> dict:
        """What `check --json` prints of it (less the warnings said): plain data for json.dumps."""
        return to_json(self)

    def __repr__(self) -> str:  # the step's ops and the memory's parts are its fields' to show
        return (f"CheckResult(step={self.step!r}, findings={[f.rule for f in self.findings]!r}, "
                f"caveats=<{len(self.caveats)}>)")

    @property
    def model(self) -> CostModel:
        return self.step.model

    @property
    def model_source(self) -> str:
        """Which cost model: a calibrated profile (which one), or the spec model."""
        return self.step.model.source

    @property
    def calibrated(self) -> bool:
        return self.step.model.calibrated


def check(shape: ModelShape, workload: Workload, *, gpu: GPU | str | CostModel, spec_only: bool = False,
          profile: Profile | str | None = None, borrow_profile: bool = False) -> CheckResult:
    """Predict every op of a step and list the rules the shape breaks, costliest first.

    The cost model is profile.cost_model(gpu, spec_only=, profile=, borrow_profile=): by default the GPU's
    calibrated profile where there is one, else the spec model; the result says which."""
    model = cost_model(gpu, spec_only=spec_only, profile=profile, borrow_profile=borrow_profile)
    step = predict_step(shape, workload, gpu=model)
    needed = estimate(shape, workload)
    findings = [f for f in (memory_finding(step, needed),) if f] + find(step)
    extra = {}
    if workload.mode == "train":
        adam = PRECISIONS[training_precision(workload.dtype)]  # estimate's default, as the memory line says
        extra = {"optimizer_ms": float(optimizer_ms(needed.weights / adam.weights, adam, step.model.params,
                                                    step.gpu.bytes_per_s)),
                 "megatron_memory": estimate(shape, workload, framework="megatron")}
    return CheckResult(step, tuple(findings), memory=needed, caveats=price_caveats(shape, workload, step.gpu), **extra)


# What --overlap-comm assumes, said wherever a step priced with it is described: its times depend on it
OVERLAPPED = "collectives overlapped with compute (--overlap-comm: an upper bound on overlap)"


def to_json(result: CheckResult) -> dict:
    step, shape, w, gpu = result.step, result.step.shape, result.step.workload, result.step.gpu
    return {
        "model": shape.to_json(),
        "workload": {**w.to_json(), "tokens": w.tokens},
        "gpu": {"key": gpu.key, "name": gpu.name, "peak_tflops": gpu.peak_tflops(w.dtype),
                "bandwidth_gbs": gpu.mem_bandwidth_gbs},
        "cost_model": {"source": result.model_source, "calibrated": result.calibrated},
        "caveats": list(result.caveats),
        "ops": [{"name": c.op.name, "pass": c.op.pass_, "kind": c.op.kind, "m": c.op.m, "n": c.op.n,
                 "k": c.op.k, "batch": c.op.batch, "layout": c.op.layout, "count": c.op.count,
                 "flops": c.op.flops, "bytes": c.op.bytes, "time_ms": c.time_ms, "total_ms": c.total_ms,
                 "tflops": c.tflops, "fraction_of_peak": c.fraction_of_peak,
                 "losses_ms": c.losses.as_dict(), "main_loss": c.losses.main,
                 **({"kernel": c.kernel} if c.kernel else {})} for c in step.costs],
        "totals": {"step_ms": step.time_ms, "tokens_per_s": step.tokens_per_s, "mfu": step.mfu,
                   "tokens_per_s_of": f"one {step.workload.tp}-GPU tensor-parallel group" if step.workload.tp > 1
                   else "one GPU", "flops": step.flops, "flops_of": "one GPU", "losses_ms": step.losses.as_dict(),
                   **({"optimizer_ms": result.optimizer_ms, "with_optimizer_ms": step.time_ms + result.optimizer_ms}
                      if w.mode == "train" else {})},
        "memory": None if result.memory is None else {
            "per_gpu_bytes": round(result.memory.total_bytes), "gpu_bytes": capacity_bytes(gpu),
            "fits": result.memory.fits(gpu), "parts_bytes": result.memory.parts(w.mode),
            **({"megatron_per_gpu_bytes": round(result.megatron_memory.total_bytes)}
               if result.megatron_memory is not None else {})},
        "findings": [{"rule": f.rule, "title": f.title, "fix": f.fix, "ops": list(f.ops), "cost_ms": f.cost_ms,
                      "share": f.share} for f in result.findings],
    }


@dataclass(frozen=True)
class Table:
    """A table as every view prints it (the terminal, HTML, Markdown): the column heads, the cells as
    text, and which columns are numbers (right-aligned) or code (monospaced)."""

    head: tuple[str, ...]
    rows: list[list[str]]
    numeric: frozenset[int] = frozenset()
    mono: frozenset[int] = frozenset()


def op_table(step: StepCost) -> Table:
    """One row per op: its share of the step's FLOPs and time, its rate, and its main loss."""
    total_ms, total_flops = step.time_ms, max(step.flops, 1)
    rows = []
    for c in step.costs:
        memory = c.op.kind in (MEMORY, COMM)  # rated in GB/s
        main = c.losses.main
        # a few rows over a link rate under 1 GB/s (a served step's head gathers 4 of them): not "0 GB/s"
        rate = (f"{c.gbps:,.0f} GB/s" if c.gbps >= 10 else f"{c.gbps:.2g} GB/s") if memory else f"{c.tflops:,.1f}"
        rows.append([c.op.label, c.op.shown_shape, f"{c.op.count}", f"{c.op.total_flops / total_flops:.1%}",
                     f"{c.total_ms:,.3f}", f"{c.total_ms / total_ms:.1%}", rate, f"{c.fraction_of_peak:.0%}",
                     f"{LOSS_WORDS[main]} {_loss_share(c, main):.0%}" if main else ""])
    return Table(("op", "shape m×n×k", "count", "FLOPs", "time ms", "time", "TFLOP/s", "of peak", "main loss"), rows,
                 frozenset({2, 3, 4, 5, 6, 7}), frozenset({1}))


def _loss_share(c, name: str) -> float:
    """A loss's share of the op's time before a calibrated profile's correction: where the measured
    correction made the op faster than the analytic model, the analytic losses (a launch, chiefly)
    can add up to more than the corrected time, and a share over 100% says nothing."""
    losses = c.losses.as_dict()
    analytic_ms = c.time_ms - min(losses["correction"], 0.0)
    return min(losses[name] / analytic_ms, 1.0) if analytic_ms > 0 else 0.0


PRICED_ALONE = "each finding is priced alone, its fix applied to this step"


def overlap_text(findings) -> str | None:
    """The findings whose fixes change the same ops (tp and comm: a smaller t also drops collectives), said, or None:
    each is priced alone (PRICED_ALONE, which the callers put before it), so their savings overlap and do not add up."""
    costed = [f for f in findings if f.cost_ms > 0 and f.ops]
    shared = [r for i, a in enumerate(costed) for b in costed[i + 1:] if set(a.ops) & set(b.ops) for r in (a.rule, b.rule)]
    if not shared:
        return None
    rules = list(dict.fromkeys(shared))
    total = sum(f.share for f in costed if f.rule in rules)
    return (f"{listed(rules, 'and')} change the same ops, so their savings overlap and do not add up"
            + (f" (their shares sum to {total:.0%})" if total > 1 else ""))


def mfu_text(step: StepCost) -> str:
    """MFU in words: a decode step's 0.045% is not "0.0%"."""
    return f"{step.mfu:.1%}" if step.mfu >= 0.01 else share_text(step.mfu)


def tflop_text(step: StepCost) -> str:
    """A step's TFLOP: one decimal from 1 up, three figures below (a decode step's 0.0191, not "0.0")."""
    return figure(step.flops / 1e12, one_decimal_from=1)


def flops_label(step: StepCost) -> str:
    """What step.flops counts: one rank's ops (each of t ranks runs its share), not the group's, beside the
    group's tokens/s."""
    return "TFLOP per step" + (" per GPU" if step.workload.tp > 1 else "")


def finding_table(findings) -> Table:
    rows = [[f"{f.cost_ms:,.2f}", f"{f.share:.1%}", f.rule, f.title, f.fix, ", ".join(f.ops)] for f in findings]
    return Table(("cost ms", "of step", "rule", "finding", "fix", "ops"), rows, frozenset({0, 1}))


def _within_error_note(s) -> str:
    """What to do with a suggestion the model cannot tell from the original: `shapewise verify` measures
    training steps alone, so a prefill or decode one is to be measured otherwise (bench ops --mode)."""
    return "within the model's error — " + ("verify it" if s.candidate.workload.mode == "train" else "measure it")


def suggestion_table(suggestions, *, memory_of: float | None = None) -> Table:
    """One row per search.Suggestion, ranked from 1: its predicted speedup with the 90% interval, and
    with memory_of (the GPU's bytes) each one's memory per GPU."""
    from .search import change_text

    rows = []
    for i, s in enumerate(suggestions, 1):
        lo, hi = s.interval
        memory = [f"{s.memory_bytes / 2**30:,.1f} of {memory_of / 2**30:,.1f}"] if memory_of else []
        rows.append([f"{i}", change_text(s.changes), f"{s.candidate.params / 1e9:.3f}B", f"{s.params_delta:+.2%}",
                     f"{s.speedup:.3f}×", f"{lo:.3f}–{hi:.3f}", *memory,
                     _within_error_note(s) if s.within_error else "", s.fixes_text])
    head = ("#", "changes", "params", "Δ params", "predicted speedup", "90% interval",
            *(("memory GiB",) if memory_of else ()), "note", "fixes")
    return Table(head, rows, frozenset({0, 2, 3, 4, 5, 6} if memory_of else {0, 2, 3, 4, 5}))


def rich_table(table: Table, **options):
    """The table as a rich Table, for a console; options go to rich (title, …)."""
    from rich.table import Table as RichTable

    out = RichTable(show_edge=False, pad_edge=False, header_style="bold", **options)
    for i, col in enumerate(table.head):
        out.add_column(col, justify="right" if i in table.numeric else "left")
    for row in table.rows:
        out.add_row(*row)
    return out


def render(result: CheckResult, console) -> None:
    """Print the op table, the totals and the findings to a rich console."""
    step, shape, w, gpu = result.step, result.step.shape, result.step.workload, result.step.gpu
    experts = (f", {shape.num_experts} experts top-{shape.top_k}"
               + (f" + {shape.num_shared_experts} shared" if shape.num_shared_experts else "")
               + (f", {shape.num_dense_layers} dense layers" if shape.num_dense_layers else "")) if shape.is_moe else ""
    window = (f", window {shape.window} " + (f"({shape.window_layout})" if shape.global_every else f"on {shape.window_layout}")
              if shape.window else "")
    if shape.mixed_rope:
        window += f", RoPE on {shape.num_rope_layers} of {shape.num_layers} layers"
    console.print(f"[bold]{shape.name}[/bold]: {shape.params / 1e9:.2f}B params, h={shape.hidden} "
                  f"L={shape.num_layers} heads={shape.num_heads}/{shape.kv_heads} d={shape.d_head} "
                  f"ffn={shape.ffn_width} ({shape.mlp}) vocab={shape.vocab}{experts}{window}")
    console.print(f"{w.mode} step, b={w.batch} s={w.seq} t={w.tp} {w.dtype}, {w.attention} attention{w.kv_cache_text()}"
                  + (f", tensor-parallel {OVERLAPPED}" if w.overlap_comm and w.tp > 1 else "") + ", on "
                  f"{gpu.name} ({gpu.peak_tflops(w.dtype):.0f} TFLOP/s peak); cost model: {result.model_source}",
                  soft_wrap=True)
    console.print(rich_table(op_table(step)))
    console.print(f"[bold]step {step.time_ms:,.2f} ms[/bold]  ·  {step.tokens_per_s:,.0f} tokens/s"
                  + (f" per {w.tp}-GPU group" if w.tp > 1 else "")
                  + f"  ·  MFU {mfu_text(step)}  ·  {tflop_text(step)} {flops_label(step)}")
    if w.mode == "train":  # what plan adds, so that the two commands' figures for one layout meet
        console.print(f"the step is the forward and backward; Adam's update adds {result.optimizer_ms:,.2f} ms "
                      f"({step.time_ms + result.optimizer_ms:,.2f} ms in all, as `shapewise plan` prices a step)",
                      soft_wrap=True)
    if result.memory is not None:
        megatron = result.megatron_memory
        said = None if megatron is None else f"{megatron.total_bytes / 2**30:,.1f} GiB"
        fused = "SwiGLU and cross-entropy" if shape.gated else "cross-entropy"
        other = (f"; Megatron-LM keeps less, its {fused} fused: {said}, as `plan` prices it"
                 if said and said != f"{result.memory.total_bytes / 2**30:,.1f} GiB" else "")
        console.print(f"memory per GPU {result.memory.text(w.mode)} of {capacity_bytes(gpu) / 2**30:,.1f} GiB"
                      + (f" ({assumption_text(w.dtype)}{other})"
                         if w.mode == "train" else ""),
                      soft_wrap=True)  # a line of text, not a table: left whole where it is piped (common.console)
    if not result.findings:
        console.print("[green]No findings: the shape follows every co-design rule that costs time here.[/green]")
        return
    console.print(rich_table(finding_table(result.findings), title="findings, costliest first", title_justify="left"))
    overlap = overlap_text(result.findings)
    if overlap:
        console.print(f"{PRICED_ALONE}: {overlap}", soft_wrap=True)
