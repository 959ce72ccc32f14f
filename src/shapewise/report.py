"""A checked step as the user sees it: a rich terminal view, or a JSON document with the same content."""

from __future__ import annotations

from dataclasses import dataclass

from .cost import SPEC, CostParams, StepCost, predict_step
from .hardware import GPU, get_gpu
from .ops import COMM, MEMORY
from .memory import Memory, capacity_bytes, estimate
from .rules import Finding, find, memory_finding
from .shapes import ModelShape, Workload

LOSS_WORDS = {"kernel": "kernel ceiling", "tile": "tile quantization", "wave": "wave quantization",
              "misalign": "misaligned dim", "memory": "memory-bound", "launch": "launch overhead",
              "comm": "communication"}


@dataclass(frozen=True)
class CheckResult:
    step: StepCost
    findings: tuple[Finding, ...]
    model_source: str  # which cost model: a calibrated profile (which one), or the spec model
    calibrated: bool = False
    memory: Memory | None = None  # per GPU: mixed-precision Adam, no pipeline, no ZeRO, no recompute


def check(shape: ModelShape, workload: Workload, *, gpu: GPU | str, params: CostParams | None = None,
          profile=None) -> CheckResult:
    """Predict every op of a step and list the rules the shape breaks, costliest first.

    The cost model uses `params` if given, else `profile` (a profile.Profile), else the profile
    predictions for this GPU use (profile.find), else the spec model; the result says which."""
    from . import profile as profiles

    gpu = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    if params is not None:
        source = "spec-only" if params is SPEC else "given parameters"
    else:
        params, source = profiles.choose(gpu, profile=profile)
    step = predict_step(shape, workload, gpu=gpu, params=params)
    needed = estimate(shape, workload)
    findings = [f for f in (memory_finding(step, needed),) if f] + find(step, params=params)
    return CheckResult(step, tuple(findings), source, calibrated=source.startswith("calibrated"), memory=needed)


def to_json(result: CheckResult) -> dict:
    step, shape, w, gpu = result.step, result.step.shape, result.step.workload, result.step.gpu
    return {
        "model": {"name": shape.name, "params": shape.params, "active_params": shape.active_params,
                  "hidden": shape.hidden, "num_layers": shape.num_layers, "num_heads": shape.num_heads,
                  "num_kv_heads": shape.kv_heads, "head_dim": shape.d_head, "ffn": shape.ffn_width,
                  "mlp": shape.mlp, "vocab": shape.vocab, "num_experts": shape.num_experts,
                  "top_k": shape.top_k, "source": shape.source},
        "workload": {"batch": w.batch, "seq": w.seq, "tp": w.tp, "dtype": w.dtype, "mode": w.mode,
                     "attention": w.attention, "tokens": w.tokens},
        "gpu": {"key": gpu.key, "name": gpu.name, "peak_tflops": gpu.peak_tflops(w.dtype),
                "bandwidth_gbs": gpu.mem_bandwidth_gbs},
        "cost_model": {"source": result.model_source, "calibrated": result.calibrated},
        "ops": [{"name": c.op.name, "pass": c.op.pass_, "kind": c.op.kind, "m": c.op.m, "n": c.op.n,
                 "k": c.op.k, "batch": c.op.batch, "layout": c.op.layout, "count": c.op.count,
                 "flops": c.op.flops, "bytes": c.op.bytes, "time_ms": c.time_ms, "total_ms": c.total_ms,
                 "tflops": c.tflops, "fraction_of_peak": c.fraction_of_peak,
                 "losses_ms": c.losses.as_dict(), "main_loss": c.losses.main,
                 **({"kernel": c.kernel} if c.kernel else {})} for c in step.costs],
        "totals": {"step_ms": step.time_ms, "tokens_per_s": step.tokens_per_s, "mfu": step.mfu,
                   "flops": step.flops, "losses_ms": step.losses.as_dict()},
        "memory": None if result.memory is None else {
            "per_gpu_bytes": result.memory.total_bytes, "gpu_bytes": capacity_bytes(gpu),
            "fits": result.memory.fits(gpu), "parts_bytes": result.memory.as_dict()},
        "findings": [{"rule": f.rule, "title": f.title, "fix": f.fix, "ops": list(f.ops), "cost_ms": f.cost_ms,
                      "share": f.share} for f in result.findings],
    }


def render(result: CheckResult, console) -> None:
    """Print the op table, the totals and the findings to a rich console."""
    from rich.table import Table

    step, shape, w, gpu = result.step, result.step.shape, result.step.workload, result.step.gpu
    total_ms, total_flops = step.time_ms, max(step.flops, 1)
    experts = f", {shape.num_experts} experts top-{shape.top_k}" if shape.is_moe else ""
    console.print(f"[bold]{shape.name}[/bold]: {shape.params / 1e9:.2f}B params, h={shape.hidden} "
                  f"L={shape.num_layers} heads={shape.num_heads}/{shape.kv_heads} d={shape.d_head} "
                  f"ffn={shape.ffn_width} ({shape.mlp}) vocab={shape.vocab}{experts}")
    console.print(f"{w.mode} step, b={w.batch} s={w.seq} t={w.tp} {w.dtype}, {w.attention} attention, on "
                  f"{gpu.name} ({gpu.peak_tflops(w.dtype):.0f} TFLOP/s peak); cost model: {result.model_source}")
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for col, justify in (("op", "left"), ("shape m×n×k", "left"), ("count", "right"), ("FLOPs", "right"),
                         ("time ms", "right"), ("time", "right"), ("TFLOP/s", "right"), ("of peak", "right"),
                         ("main loss", "left")):
        table.add_column(col, justify=justify)
    for c in step.costs:
        memory = c.op.kind in (MEMORY, COMM)  # rated in GB/s
        rate = f"{c.gbps:,.0f} GB/s" if memory else f"{c.tflops:,.1f}"
        main = c.losses.main
        lost = f"{LOSS_WORDS[main]} {c.losses.as_dict()[main] / c.time_ms:.0%}" if main else ""
        table.add_row(c.op.label, c.op.shape_text, str(c.op.count), f"{c.op.total_flops / total_flops:.1%}",
                      f"{c.total_ms:,.3f}", f"{c.total_ms / total_ms:.1%}", rate, f"{c.fraction_of_peak:.0%}",
                      lost)
    console.print(table)
    console.print(f"[bold]step {total_ms:,.2f} ms[/bold]  ·  {step.tokens_per_s:,.0f} tokens/s"
                  + (f" per {w.tp}-GPU group" if w.tp > 1 else "")
                  + f"  ·  MFU {step.mfu:.1%}  ·  {step.flops / 1e12:,.1f} TFLOP per step")
    if result.memory is not None:
        console.print(f"memory per GPU {result.memory.text()} of {capacity_bytes(gpu) / 2**30:,.1f} GiB"
                      + (" (mixed-precision Adam, no pipeline, no ZeRO, no recomputation)" if w.mode == "train" else ""))
    if not result.findings:
        console.print("[green]No findings: the shape follows every co-design rule that costs time here.[/green]")
        return
    findings = Table(title="findings, costliest first", show_edge=False, pad_edge=False, header_style="bold",
                     title_justify="left")
    for col in ("cost ms", "of step", "rule", "finding", "fix", "ops"):
        findings.add_column(col, justify="right" if col in ("cost ms", "of step") else "left")
    for f in result.findings:
        findings.add_row(f"{f.cost_ms:,.2f}", f"{f.share:.1%}", f.rule, f.title, f.fix, ", ".join(f.ops))
    console.print(findings)
