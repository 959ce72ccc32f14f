"""The co-design rules as findings: what a shape breaks, which ops it slows, what it costs, the fix.

Each rule looks at a model and workload and, when it fires, proposes the smallest fix. The fix is
priced by the cost model itself: the finding's cost is the GPU time per token saved by the fix, times
the step's tokens. So a rule never claims a cost the model cannot show, and a rule that the GPU
does not care about (on some GPU, for some shape) costs nothing and is dropped.

(b·a)/t being an integer, one of the paper's rules, needs no finding: heads must divide by t, which
the input check enforces, so it always holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .cost import StepCost, align_classes, predict_step
from .dtypes import activation_bytes, activation_dtype
from .errors import ShapewiseError, argument
from .hardware import GPU
from .memory import GIB, capacity_bytes, estimate
from .ops import run_dtype
from .parallel import CORE_ATTENTION
from .params import PADDED_SDPA
from .shapes import DTYPE_BYTES, ModelShape, Workload

ALIGN = 64  # the paper's power of two: dims that are multiples of 64 fill the tensor-core tiles
GOOD_HEAD_DIMS = (128, 64, 256)  # what fused attention kernels serve best, most preferred first
# FlashAttention's and cuDNN's largest head dim: past it torch 2.11's SDPA ran the memory-efficient kernel
# on an H100 (d 320 and 512: 76-86 TFLOP/s against 163 at d 256, causal, 8 heads of 1024 tokens; in
# `bench ops` of 8 heads of 512 over 4 × 2048 tokens the forward took 1.28 ms against 0.29 priced, the
# backward 12.7 ms against 1.17)
MAX_FUSED_HEAD_DIM = 256
# The dtypes FlashAttention and cuDNN do not take (they take fp16 and bf16): torch's SDPA runs fp32 inputs,
# tf32 mode or not, on its memory-efficient kernel
FUSED_UNTAKEN_DTYPES = ("fp32", "tf32")


def round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


@dataclass(frozen=True)
class Finding:
    rule: str  # short id: vocab, tokens, hidden, head-dim, ffn, kv-heads, tp, comm, misaligned, memory, window
    title: str
    fix: str
    ops: tuple[str, ...]  # op names whose time the fix changes
    cost_ms: float  # predicted ms per step the fix saves
    share: float  # cost_ms over the step time


@dataclass(frozen=True)
class Proposal:
    """What a rule proposes before it is priced."""

    rule: str
    title: str
    fix: str
    shape: ModelShape
    workload: Workload
    # The fix's saving per token over the step's tokens (a shape, or a training run's sequences, that does the same
    # work in fewer GPU-seconds per token), or, False, the step's own time before and after: a prefill padded to
    # aligned prompts does more tokens' work for the same real ones.
    per_token: bool = True
    # Set on fixes a rule offers side by side (the head-dim fallback's two paddings): what the finding names of
    # those it did not choose, each with what it would save ("head dim 128 (+9.0% parameters)").
    label: str = ""


def _vocab(shape: ModelShape, w: Workload):
    multiple = ALIGN * w.tp
    if shape.vocab % multiple:
        padded = round_up(shape.vocab, multiple)
        yield Proposal("vocab", f"vocab {shape.vocab:,} is not a multiple of {multiple}"
                       + (f" (64·t, t={w.tp})" if w.tp > 1 else ""),
                       f"pad the vocab to {padded:,} (unused rows cost {padded - shape.vocab} embeddings)",
                       shape.replace(vocab=padded), w)


def _tokens(shape: ModelShape, w: Workload):
    if w.mode != "decode" and w.tokens % ALIGN:
        seq = round_up(w.seq, ALIGN)
        title = f"b·s = {w.batch}·{w.seq} = {w.tokens:,} tokens is not a multiple of {ALIGN}"
        if w.mode == "prefill":  # the prompts are the requests': padding them adds tokens, not real ones
            yield Proposal("tokens", title, f"pad each prompt to {seq} tokens", shape, w.replace(seq=seq),
                           per_token=False)
        else:
            yield Proposal("tokens", title, f"use a sequence length of {seq} (or a batch that makes b·s a multiple "
                           f"of {ALIGN})", shape, w.replace(seq=seq))


def _hidden(shape: ModelShape, w: Workload):
    multiple = ALIGN * w.tp
    if shape.hidden % multiple:
        hidden = round_up(shape.hidden, multiple)
        fixed = shape.replace(hidden=hidden, head_dim=shape.d_head)
        yield Proposal("hidden", f"hidden size {shape.hidden:,} is not a multiple of {multiple}"
                       + (f" (64·t, t={w.tp})" if w.tp > 1 else ""),
                       f"use hidden size {hidden:,} ({fixed.params / shape.params - 1:+.1%} parameters)", fixed, w)


def keep_rotary(base: ModelShape, shape: ModelShape) -> ModelShape | None:
    """shape, made from base at another head dim, with a partial rotary embedding a config can say: base's
    fraction where it gives whole pairs of dims at the new head dim (NeoX's 0.25 of 128), else as many dims as
    base rotates (Phi-2's 32 of 80: 0.4 of 128 is 51.2, and transformers' Phi takes 51, an odd count its
    rotary code cannot pair). transformers multiplies a config's fraction by the head dim and truncates:
    None where that does not give the dims back exactly."""
    if shape.is_mla or shape.learned_positions or shape.rotary_fraction in (0.0, 1.0) or shape.d_head == base.d_head:
        return shape
    dims = shape.rotary_fraction * shape.d_head
    if dims == int(dims) and int(dims) % 2 == 0:  # the fraction says whole pairs at this head dim too (NeoX's 0.25)
        return shape
    width = min(base.rotary_width, shape.d_head)
    fraction = width / shape.d_head
    return shape.replace(rotary_fraction=fraction) if int(fraction * shape.d_head) == width else None


def _head_options(shape: ModelShape, w: Workload):
    """The same attention width (heads × head dim: the hidden size, unless the model sets its head dim
    apart), cut into heads of the head dims the fused kernels like, GQA ratio kept: the projections keep
    their parameters."""
    ratio = shape.num_heads // shape.kv_heads
    width = shape.num_heads * shape.d_head
    for d in GOOD_HEAD_DIMS:
        heads = width // d
        if width % d or heads % w.tp or (shape.kv_heads != 1 and heads % ratio):
            continue
        kv = 1 if shape.kv_heads == 1 else heads // ratio
        fixed = keep_rotary(shape, shape.replace(num_heads=heads, num_kv_heads=None if kv == heads else kv,
                                                 head_dim=None if shape.head_dim is None else d))
        if fixed is not None and (kv % w.tp == 0 or w.tp % kv == 0):
            yield fixed


def _head_dim(shape: ModelShape, w: Workload):
    d = shape.d_head
    if d % ALIGN == 0:
        return
    title = f"head dim {d} is not a multiple of {ALIGN}" + (" (too small to fill the tensor cores)" if d < ALIGN else "")
    if d % 8:  # fused, a price many times its padded neighbour's (cost.padded_sdpa); unfused, misaligned BMMs
        title += " nor of 8" + (" (SDPA runs FlashAttention-2 on padded copies)" if w.attention == "flash" else "")
    options = list(_head_options(shape, w))
    for fixed in options:
        yield Proposal("head-dim", title, f"use {fixed.num_heads} heads (head dim {fixed.d_head}"
                       + (f", {fixed.kv_heads} kv heads" if fixed.kv_heads != fixed.num_heads else "") + ")",
                       fixed, w)
    if not options:
        # no head count of a good head dim cuts the attention width at this t: wider heads, a larger model
        # (not a multiple of 8: the next multiple of 8 leaves the padded-copy kernel for fewer parameters, BitNet's
        # 100 → 104 against 128; both are priced and the finding says which saves more, and what each adds)
        paddings = sorted({round_up(d, ALIGN)} | ({round_up(d, 8)} if d % 8 else set()))
        for padded in paddings:
            fixed = keep_rotary(shape, shape.replace(head_dim=padded))
            if fixed is not None:
                more = f"{fixed.params / shape.params - 1:+.1%} parameters"
                yield Proposal("head-dim", title, f"use head dim {padded}, the heads as many ({more})", fixed, w,
                               label=f"head dim {padded} ({more})" if len(paddings) > 1 else "")


def _ffn(shape: ModelShape, w: Workload):
    multiple = ALIGN * w.tp
    width = shape.mlp_width
    if width % multiple == 0:
        return
    # Rounded up: the wider MLP does more work, so what it saves is the misalignment's and the quantization's
    # alone. Rounded to the nearest, a width cut down (Step-3.7-Flash's experts 1280 → 1024 at t=8, 20% less work)
    # was priced as the rule's cost: 1.5 ms, where 1536 is 1.2 ms slower.
    fixed_width = round_up(width, multiple)
    near_8h3 = shape.gated and abs(width - 8 * shape.hidden / 3) < multiple
    kind = f"{shape.mlp} width" if shape.gated else "FFN width"
    title = f"{kind} {width:,}" + (" (8h/3, unrounded)" if near_8h3 else "") + f" is not a multiple of {multiple}"
    field = "expert_ffn" if shape.is_moe and shape.expert_ffn is not None else "ffn"
    fixed = shape.replace(**{field: fixed_width})
    yield Proposal("ffn", title, f"use {kind} {fixed_width:,} ({fixed.params / shape.params - 1:+.1%} parameters)",
                   fixed, w)


def _kv_heads(shape: ModelShape, w: Workload, gpu: GPU):
    """Fewer kv heads than t ranks: each rank keeps one whole (Megatron-LM and vLLM replicate them), so each rank's
    share of the step is what it would be with t kv heads; what the replicas add is the all-reduce of their
    gradients after the backward (tp/kv_grads). The fix priced is t kv heads at the same t: what the replication
    costs, not what a smaller t saves besides (the tp finding prices that, where the model fits there)."""
    if w.tp == 1 or shape.is_mla or shape.kv_heads % w.tp == 0:
        return
    kv = round_up(shape.kv_heads, w.tp)  # check_parallel holds t a multiple of the kv heads here: t divides the heads
    fixed = shape.replace(num_kv_heads=None if kv == shape.num_heads else kv)
    smaller = [t for t in range(w.tp - 1, 0, -1) if shape.kv_heads % t == 0 and shape.num_heads % t == 0
               and fits_in_memory(shape, w.replace(tp=t), gpu)]
    more = fixed.params / shape.params - 1
    yield Proposal("kv-heads", f"{shape.kv_heads} kv head{'s' * (shape.kv_heads != 1)} do{'es' * (shape.kv_heads == 1)} "
                   f"not divide by t={w.tp}: each rank keeps a replicated copy, whose gradients are all-reduced "
                   "after the backward", f"use {kv} kv heads ({more:+.1%} parameters)"
                   + (f", or t={smaller[0]}, where the model fits too" if smaller else ""), fixed, w)


def past_fused(head_dims) -> str | None:
    """The caveat of fused attention priced at head dims past the fused kernels' (None where none is)."""
    past = sorted({int(d) for d in head_dims if d > MAX_FUSED_HEAD_DIM})
    if not past:
        return None
    dims = ", ".join(map(str, past[:4])) + (" …" if len(past) > 4 else "")
    return (f"head dim{'s' if len(past) > 1 else ''} {dims} {'are' if len(past) > 1 else 'is'} past "
            f"{MAX_FUSED_HEAD_DIM}, the most FlashAttention and cuDNN take: torch runs its memory-efficient kernel "
            f"there, which shapewise does not model; fused attention is priced at the {MAX_FUSED_HEAD_DIM} kernel's "
            "rate, far too fast (at head dim 512 on an H100 the forward took 4.4 and the backward 11 times the "
            "price): measure it with `shapewise bench ops`")


def padded_fused(head_dims) -> str | None:
    """The caveat of fused attention at head dims that are not multiples of 8 (None where none is): torch runs
    another kernel there, priced by factors measured on one GPU (params.PADDED_SDPA)."""
    odd = sorted({int(d) for d in head_dims if d % 8 and d <= MAX_FUSED_HEAD_DIM})
    if not odd:
        return None
    dims = ", ".join(map(str, odd[:4])) + (" …" if len(odd) > 4 else "")
    return (f"head dim{'s' if len(odd) > 1 else ''} {dims} {'are' if len(odd) > 1 else 'is'} not a multiple of 8: "
            "cuDNN's attention and torch's memory-efficient kernel refuse it, so SDPA runs FlashAttention-2 on copies "
            f"padded to {', '.join(str(round_up(d, 8)) for d in odd[:4])}, priced at cuDNN's rate there times the "
            f"slowdown measured on an H100 (forward {PADDED_SDPA['fwd']:.1f}×, backward {PADDED_SDPA['bwd']:.1f}×, "
            f"decoding {PADDED_SDPA['decode']:.1f}×; on 116 calls it was not fitted on, 14% off at the median and 48% at "
            "the 90th percentile): a head dim that "
            "is a multiple of 8 runs cuDNN's kernel; measure it with `shapewise bench ops`")


def fused_caveats(head_dims, dtype: str) -> list[str]:
    """What fused attention at these head dims and this dtype is priced by that its kernels do not run: past
    their head dims, at head dims not multiples of 8, in a dtype they do not take (check's and the figures')."""
    out = [past_fused(head_dims), padded_fused(head_dims)]
    if dtype in FUSED_UNTAKEN_DTYPES:
        out.append(f"{argument('dtype')} {dtype}: FlashAttention and cuDNN take only fp16 and bf16, so torch runs its "
                   "memory-efficient kernel, which shapewise does not model; fused attention is priced at the "
                   f"{dtype} peak by the fp16/bf16 kernels' efficiency: measure it with `shapewise bench ops`")
    return [line for line in out if line]


def caveats(shape: ModelShape, w: Workload) -> list[str]:
    """What the prices of this model and workload assume that the model itself does not give: each a
    warning line for the user (the commands print them once they have priced: cli.main)."""
    out = fused_caveats([shape.d_head], w.dtype) if w.attention == "flash" else []
    if shape.learned_positions and w.seq > shape.learned_positions:
        out.append(f"sequence {w.seq:,} is longer than the model's {shape.learned_positions:,} learned positions: "
                   "priced as asked, but the model as configured cannot run it")
    elif shape.context and not shape.learned_positions and w.seq > shape.context:
        out.append(f"sequence {w.seq:,} is longer than the model's context of {shape.context:,} tokens "
                   "(as its config gives it): priced as asked, but the model was not trained for it")
    out.extend(_tensor_parallel_caveats(w))
    out.append(_kv_cache_caveat(shape, w))
    return [line for line in out if line]


def _kv_cache_caveat(shape: ModelShape, w: Workload) -> str:
    """A cache of another dtype than the activations' is read at its own bytes by the fused decoding kernel alone
    (ops.attention_op); a decode's batched GEMMs over it (latent attention's absorbed form, unfused attention) run
    in the activations' dtype, torch's fp8 GEMM taking no batch: the memory holds the cache in its dtype, the
    time reads it in theirs. Said, not hidden."""
    if w.mode == "train" and w.kv_cache_dtype != "auto":  # as --overlap-comm at t=1: said, not refused
        return (f"{argument('kv_cache_dtype')} {w.kv_cache_dtype} has no effect on a training step: it keeps no KV "
                f"cache ({argument('mode', '--mode')} prefill or decode has one)")
    if w.mode != "decode" or w.kv_cache_dtype == "auto" or w.kv_cache_bytes == activation_bytes(w.dtype_bytes):
        return ""
    if not shape.is_mla and w.attention == "flash":  # priced from the cache's bytes: no torch kernel to time it by
        return (f"{argument('kv_cache_dtype')} {w.kv_cache_dtype}: the fused decoding attention is priced at the "
                f"{activation_dtype(w.dtype)} kernel's rate over the cache's {w.kv_cache_dtype} bytes, not measured "
                f"(torch's SDPA reads no {w.kv_cache_dtype} cache; serving kernels that do may differ)")
    how = "latent attention's batched GEMMs" if shape.is_mla else "unfused attention's batched GEMMs"
    run = activation_dtype(w.dtype)
    return (f"{argument('kv_cache_dtype')} {w.kv_cache_dtype}: the KV cache's memory is priced in {w.kv_cache_dtype}, "
            f"but {how} read it in {run}" + (" (torch's fp8 GEMM takes no batch)" if w.kv_cache_dtype == "fp8" else "")
            + f": the attention time is that of a {run} cache")


def gpu_caveats(gpu, w: Workload) -> list[str]:
    """What the price on this GPU assumes that the GPU does not run: torch's FlashAttention and cuDNN
    attention kernels need Ampere or newer, so on a V100 (Volta) fused attention runs torch's
    memory-efficient kernel, which the model does not price as itself."""
    if w.attention == "flash" and gpu.vendor == "NVIDIA" and gpu.arch == "volta":
        return [f"{gpu.key}: FlashAttention and cuDNN's attention need Ampere or newer, so torch runs its "
                "memory-efficient kernel there, which shapewise does not model; fused attention is priced by the "
                "newer kernels' efficiency: measure it with `shapewise bench ops`"]
    return []


def price_caveats(shape: ModelShape | None, w: Workload, gpu) -> tuple[str, ...]:
    """Every caveat of a price: the model's and workload's (caveats; None for search's shapes, of no given
    model) and the GPU's (gpu_caveats). check, suggest and search carry them; the commands say them."""
    # search's shapes have no one head dim, but all share the workload's dtype (fp32, tf32: no fused kernel takes it)
    own = caveats(shape, w) if shape is not None else fused_caveats((), w.dtype) if w.attention == "flash" else []
    return tuple(own + gpu_caveats(gpu, w))


def _tensor_parallel_caveats(w: Workload) -> list[str]:
    """Where --tp and --overlap-comm price something other than what was asked: collectives past one node
    still at NVLink's speed, or an overlap with no collective to hide."""
    from .plan import GPUS_PER_NODE

    out = []
    if w.tp > GPUS_PER_NODE:
        out.append(f"{argument('tp')} {w.tp}: tensor parallelism past one node's {GPUS_PER_NODE} GPUs is priced as if all "
                   f"{w.tp} shared NVLink; across nodes its collectives would be slower (`shapewise plan` prices "
                   "the network between nodes)")
    if w.tp > 1 and w.mode != "train":
        out.append(f"{argument('tp')} {w.tp} in {w.mode}: each layer's collectives are priced as Megatron's "
                   "sequence-parallel pairs (an all-gather and a reduce-scatter a sublayer, each at the fixed cost "
                   "fitted on collectives inside training layers), where serving engines all-reduce once a sublayer and "
                   "a lone small collective costs less: their share of this step is an upper estimate, not measured "
                   "for inference (`shapewise bench layer --tp` times it)")
    if w.overlap_comm and w.tp == 1:
        out.append(f"{argument('overlap_comm')} has no effect at {argument('tp')} 1: there is no tensor-parallel "
                   "collective to overlap")
    return out


def fits_in_memory(shape: ModelShape, workload: Workload, gpu: GPU, *, headroom: float = 1.0) -> bool:
    """One tensor-parallel rank's step within the GPU's memory (memory.estimate: Adam as memory.adam_text says,
    no pipeline, no ZeRO, no recomputation; the allocator's allowance is part of the estimate)."""
    return estimate(shape, workload).total_bytes <= capacity_bytes(gpu) * headroom


def memory_finding(step: StepCost, memory) -> Finding | None:
    """A model that does not fit costs the whole step: a finding ahead of every other, or None."""
    if memory.fits(step.gpu):
        return None
    need, have = memory.total_bytes / 2**30, capacity_bytes(step.gpu) / 2**30
    # Recomputation and ZeRO shed training state (activations kept for the backward, gradients, Adam's moments),
    # and plan plans training: an inference step keeps weights and its KV cache alone. A micro-batch of one has no
    # smaller, and a peak at the optimizer step (activations freed by then) is model state that only sharding sheds.
    w = step.workload
    if w.mode == "train":
        fix = ("use more tensor parallelism or ZeRO (`shapewise plan` searches them): the peak is at the optimizer "
               "step, where recomputation and a smaller micro-batch free nothing" if memory.peak_at_step else
               "use more tensor parallelism, recomputation or ZeRO (`shapewise plan` searches them)"
               + (", or a smaller micro-batch" if w.batch > 1 else ""))
    else:
        fp8 = "fp8" in step.gpu.tflops
        fix = ("use more tensor parallelism, fewer sequences or a shorter KV cache" if w.batch > 1 else
               "use more tensor parallelism or a shorter KV cache") \
            + (f", an fp8 KV cache ({argument('kv_cache_dtype')} fp8)" if w.kv_cache_bytes > 1 and fp8 else "") \
            + (f", or fp8 weights ({argument('dtype')} fp8)" if w.dtype != "fp8" and fp8 else "")
    return Finding("memory", f"needs {need:,.1f} GiB per GPU; the {step.gpu.key} has {have:,.1f} GiB", fix, (),
                   step.time_ms, 1.0)


def _tp(shape: ModelShape, w: Workload, gpu: GPU):
    if w.tp == 1:
        return
    smaller = [t for t in range(1, w.tp) if w.tp % t == 0 and shape.num_heads % t == 0
               and (shape.kv_heads % t == 0 or t % shape.kv_heads == 0) and fits_in_memory(shape, w.replace(tp=t), gpu)]
    if smaller:
        t = min(smaller)
        yield Proposal("tp", f"t={w.tp} splits every GEMM {w.tp} ways, but the model fits with t={t}",
                       f"use t={t} (and {w.tp // t} {'data-parallel ranks' if w.mode == 'train' else 'replicas'} "
                       f"on the {w.tp} GPUs)", shape, w.replace(tp=t))


def _comm(shape: ModelShape, w: Workload):
    if w.tp > 1 and not w.overlap_comm:
        # Megatron's --tp-comm-overlap is a training flag; serving engines run their collectives in line by
        # default (vLLM overlaps them only through its async-TP compile pass, with sequence parallelism)
        fix = ("overlap them with compute (Megatron's --tp-comm-overlap) or use a smaller t" if w.mode == "train" else
               "use a smaller t (and replicas on the other GPUs), or an engine that overlaps them with compute "
               "(vLLM's async tensor-parallel compile pass, with sequence parallelism): serving engines run them "
               "in line by default, Megatron's --tp-comm-overlap is for training")
        yield Proposal("comm", f"t={w.tp}: tensor-parallel collectives wait on the GPU link, not overlapped", fix,
                       shape, w.replace(overlap_comm=True))


def figure(x: float, *, one_decimal_from: float = 10) -> str:
    """A time or size in a finding's words: one decimal from 10 up, else three figures (a decode step's
    attention 0.312 → 0.278 ms, where one decimal read "0.3 → 0.3 ms (11% less)"); a step's TFLOP from 1 up
    (report.tflop_text)."""
    return f"{x:,.1f}" if abs(x) >= one_decimal_from else f"{x:#.3g}"


def share_text(x: float) -> str:
    """A share in a finding's words: whole percents from 1% up, two figures below ("0.45%", not "0%")."""
    return f"{x:.0%}" if abs(x) >= 0.01 else f"{x * 100:.2g}%"


def window_finding(step: StepCost, *, min_share: float) -> Finding | None:
    """What a sliding window does at this workload: the attention time and KV cache of the step, and
    of the same model with every layer attending globally, from the cost model and memory.estimate.
    Reported where either saving reaches min_share (of the step's time, or of its memory), the bar
    every finding meets. A window at least the sequence long bounds nothing: its layers' ops are
    global attention already, the op table shows it, and there is nothing to report. It is a note,
    not a fix: its cost is 0, and the time and bytes saved are in its title."""
    shape, w = step.shape, step.workload
    local = shape.num_layers - shape.num_global_layers
    if not local or shape.window >= w.seq:
        return None
    dense = shape.replace(window=0, global_every=0)
    try:
        full = predict_step(dense, w, gpu=step.model)
    except ShapewiseError:
        return None

    def attention_ms(s: StepCost) -> float:
        return sum(ms for name, ms in s.by_name().items() if name in CORE_ATTENTION)

    windowed_ms, global_ms = attention_ms(step), attention_ms(full)
    memory, global_memory = estimate(shape, w), estimate(dense, w)
    cache, global_cache = memory.kv_cache, global_memory.kv_cache
    saved_ms, saved_bytes = global_ms - windowed_ms, global_cache - cache
    if abs(saved_ms) / step.time_ms < min_share and saved_bytes / memory.total_bytes < min_share:
        return None
    parts = []
    if saved_ms / step.time_ms >= min_share:
        parts.append(f"attention {figure(global_ms)} → {figure(windowed_ms)} ms ({share_text(saved_ms / global_ms)} "
                     f"less; the step {share_text(saved_ms / full.time_ms)} shorter)")
    elif -saved_ms / step.time_ms >= min_share:  # the windowed kernel's rate loses more than the window skips
        parts.append(f"attention {figure(global_ms)} → {figure(windowed_ms)} ms ({share_text(-saved_ms / global_ms)} "
                     "MORE: the windowed kernel runs slower than the global one here, more than the window saves)")
    if saved_bytes / memory.total_bytes >= min_share:
        parts.append(f"KV cache {figure(global_cache / GIB)} → {figure(cache / GIB)} GiB")
    where = "every layer" if local == shape.num_layers else f"{local} of {shape.num_layers} layers"
    title = f"sliding window {shape.window:,} in {where} at s={w.seq:,}: " + ", ".join(parts)
    kernel = "a windowed kernel as fast as the causal one (flash-attn's window) would save time here"
    if saved_ms >= 0:
        fix = "keep it: this is what it saves over global attention in every layer"
    elif saved_bytes > 0:  # slower, yet its cache is smaller: not "what it saves" of the time
        fix = f"keep it for the KV cache it saves; its time is the kernel's: {kernel} too"
    else:
        fix = f"a note on the kernel, not the model: {kernel}"
    if global_memory.total_bytes > capacity_bytes(step.gpu) >= memory.total_bytes:
        fix += f" (which would need {global_memory.total_bytes / GIB:,.1f} GiB: more than the {step.gpu.key} has)"
    return Finding("window", title, fix, ("attn/window",), 0.0, 0.0)


RULES = (_vocab, _tokens, _hidden, _head_dim, _ffn, _comm)


def _changed_ops(before: StepCost, after: StepCost) -> tuple[str, ...]:
    a, b = before.by_name(), after.by_name()
    return tuple(name for name in a if abs(a[name] - b.get(name, 0.0)) > 1e-3 * max(a[name], 1e-9))


def find(step: StepCost, *, min_share: float = 1e-4) -> list[Finding]:
    """Findings for a predicted step, costliest first; rules whose fix saves nothing are dropped. Each
    fix is priced with the cost model the step was predicted with."""
    shape, w, gpu = step.shape, step.workload, step.gpu
    proposals = [p for rule in RULES for p in rule(shape, w)]
    proposals += [p for rule in (_kv_heads, _tp) for p in rule(shape, w, gpu)]
    best: dict[str, Finding] = {}  # a rule may propose several fixes: keep the one that saves most
    others: dict[str, list[tuple[float, str]]] = {}  # the labelled fixes' savings, said beside the one kept
    for p in proposals:
        try:
            fixed = predict_step(p.shape, p.workload, gpu=step.model)
        except ShapewiseError:
            continue  # a fix that is itself invalid for this model is no fix
        cost_ms = ((step.gpu_ms_per_token - fixed.gpu_ms_per_token) * w.tokens / w.tp if p.per_token
                   else step.time_ms - fixed.time_ms)
        if p.label:
            others.setdefault(p.rule, []).append((cost_ms, p.label))
        if cost_ms / step.time_ms >= min_share and (p.rule not in best or cost_ms > best[p.rule].cost_ms):
            best[p.rule] = Finding(p.rule, p.title, p.fix, _changed_ops(step, fixed), cost_ms, cost_ms / step.time_ms)
    for rule, priced in others.items():
        if rule in best:
            said = [f"{label} saves {figure(ms)} ms" if ms > 0 else f"{label} saves nothing"
                    for ms, label in priced if ms != best[rule].cost_ms]
            if said:
                best[rule] = replace(best[rule], fix=best[rule].fix + "; " + ", ".join(said))
    findings = list(best.values())
    findings += _misaligned(step, covered={op for f in findings for op in f.ops}, min_share=min_share)
    window = window_finding(step, min_share=min_share)
    findings += [window] if window else []
    return sorted(findings, key=lambda f: -f.cost_ms)


def _misaligned(step: StepCost, covered: set[str], *, min_share: float) -> list[Finding]:
    """Any other op that loses time to misalignment (a custom config's odd width, say), with the leading dims
    that are misaligned (cost.align_classes: cuBLAS's 16 bytes, as many elements as the dtype fits in them)."""
    w = step.workload
    lost: dict[str, float] = {}
    dims: dict[str, set[int]] = {}
    dtypes: dict[str, str] = {}  # the dtype each op runs in: an fp8 step's router and batched GEMMs in bf16
    for c in step.costs:
        if c.losses.misalign > 0 and c.op.name not in covered:
            lost[c.op.name] = lost.get(c.op.name, 0.0) + c.losses.misalign * c.op.count
            dtypes[c.op.name] = run_dtype(c.op, w.dtype)
            if c.op.is_matmul:
                class_a, class_n = align_classes(c.op.m, c.op.n, c.op.k, c.op.layout, dtypes[c.op.name],
                                                 step.gpu.align_bytes)
                lead_a = c.op.m if c.op.layout == "tn" else c.op.k
                dims.setdefault(c.op.name, set()).update(
                    d for d, misaligned in ((lead_a, class_a), (c.op.n, class_n)) if misaligned)
    length = "KV-cache length" if w.mode == "decode" else "sequence length"

    def said(name: str) -> tuple[str, str]:
        vec = max(1, step.gpu.align_bytes // DTYPE_BYTES[dtypes[name]])
        found = sorted(dims.get(name, ()))
        if not found:
            return (f"{name} has a dim that is not a multiple of {step.gpu.align_bytes} bytes",
                    f"pad that dim to a multiple of {vec} elements ({step.gpu.align_bytes} bytes)")
        what = " and ".join(f"{d:,}" + (f" (the {length})" if d == w.seq else "") for d in found)
        return (f"{name} has a leading dim of {what}, not a multiple of {vec} elements ({step.gpu.align_bytes} "
                f"bytes of {dtypes[name]})", f"pad {'it' if len(found) == 1 else 'them'} to "
                + " and ".join(f"{round_up(d, vec):,}" for d in found))

    return [Finding("misaligned", *said(name), (name,), ms, ms / step.time_ms)
            for name, ms in lost.items() if ms / step.time_ms >= min_share]
