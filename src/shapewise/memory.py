"""Memory per GPU of a training or inference step: the one estimate every command uses.

Training holds the model state (weights, gradients, optimizer state, sharded by ZeRO/FSDP over the
data-parallel ranks) and, at its peak, the activations the backward pass needs plus the loss's
buffers. The peak comes at the start of the last micro-batch's backward (all its activations alive,
the logits' gradient being made), or at the optimizer step (activations gone, the optimizer's
temporaries made), whichever is larger. Gradients are persistent buffers, as in DDP, FSDP, DeepSpeed
and Megatron.

Activations follow Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models" (arXiv:2205.05198, section 4): a GPT layer keeps sbh(34 + 5as/h) bytes in 16-bit: 11sbh +
5as²b in attention (QKV input 2, Q and K 4, V 2, softmax output 2as²b, its dropout mask as²b, the
dropout output 2as²b, the output projection's input 2, its dropout mask 1), 19sbh in the MLP (input
2, GeLU input 8, GeLU output 8, dropout mask 1) and 4sbh for the two LayerNorms' inputs. With tensor
and sequence parallelism everything divides by t (their Table 2). Here the same count is made from
the shape (GQA's narrower K and V, SwiGLU's gate, MoE's routed copies), tensor by tensor, for what
stays alive:

- flash attention keeps no s² tensor: its backward recomputes the scores from Q, K, V, the output O
  and the row log-sum-exp, 4 bytes per query row per head (Dao et al. 2022, "FlashAttention",
  arXiv:2205.14135, section 3.1: the backward recomputes S and P from Q, K, V, the output O and
  the softmax's normalization statistics; today's kernels keep their log-sum-exp, one fp32 per
  row). So a flash layer keeps
  sbh·34/t + 4·a·s·b/t bytes (with dropout, as the paper counts; modern models have none: 32);
- selective recomputation (Megatron's default --recompute-activations: core attention) drops what
  core attention keeps inside itself: the s² tensors unfused, the log-sum-exp with flash;
- full recomputation keeps each layer's input (2sbh/t) and, during backward, one layer's working set;
- pipelines: the first stage of 1F1B holds p micro-batches in flight, the interleaved schedule
  L(1 + (p-1)/(pv)) layers' worth (Korthikanti et al. section 4.2.3; Megatron's warm-up counts);
  each stage counts its own layers, and the fullest one is the peak.

Implementation details that change what is kept are a Framework: eager PyTorch (shapewise.layers,
Hugging Face-style code) against Megatron-LM's fused kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .dtypes import DTYPE_BYTES, activation_bytes
from .errors import ShapewiseError
from .hardware import GPU
from .parallel import (
    RECOMPUTE,
    Parallelism,
    expert_params,
    outside_norms,
    rank_layer_params,
    replicated_params,
    stage_ends,
)
from .shapes import NORM_KINDS, ModelShape, Workload

GIB = 2 ** 30


@dataclass(frozen=True)
class Precision:
    """Bytes per parameter of the model state, and of the optimizer step's temporaries."""

    name: str
    weights: int
    grads: int
    master: int  # an fp32 copy of the weights, where the weights are narrower
    moments: int  # Adam's two moments
    step_temp: int  # made at the step only: an fp32 copy of a narrow gradient, or foreach's sqrt(v)

    @property
    def optimizer(self) -> int:
        return self.master + self.moments


PRECISIONS = {p.name: p for p in (
    # ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054, section 3.1): 2 + 2 + (4 + 4 + 4) = 16 bytes a
    # parameter; the step upcasts each bf16 gradient to fp32 for the master's update.
    Precision("mixed", weights=2, grads=2, master=4, moments=8, step_temp=4),
    # Megatron-LM's default: gradients accumulate in an fp32 main_grad buffer (18 bytes a parameter).
    Precision("mixed-fp32-grads", weights=2, grads=4, master=4, moments=8, step_temp=0),
    # bf16 weights and AdamW in bf16: torch's foreach AdamW makes sqrt(v) for every parameter at once.
    Precision("bf16", weights=2, grads=2, master=0, moments=4, step_temp=2),
    # fp32 weights, gradients and AdamW moments: 4 + 4 + 8 = 16 bytes a parameter, mixed precision's total
    # split otherwise (no master copy); foreach AdamW makes sqrt(v) for every parameter at the step.
    Precision("fp32", weights=4, grads=4, master=0, moments=8, step_temp=4),
    # Forward and backward only (verify's measurement): no optimizer; in a 16-bit dtype, or in fp32.
    Precision("no-optimizer", weights=2, grads=2, master=0, moments=0, step_temp=0),
    Precision("no-optimizer-fp32", weights=4, grads=4, master=0, moments=0, step_temp=0),
)}


def training_precision(dtype: str) -> str:
    """The precision a training step in dtype keeps its state in, as estimate assumes by default: a
    4-byte dtype's in fp32, any narrower one's as mixed precision (16-bit weights, fp32 master copies)."""
    return "fp32" if DTYPE_BYTES.get(dtype) == 4 else "mixed"


def adam_text(dtype: str) -> str:
    """How the output names the optimizer state estimate prices for a training step in dtype."""
    return "fp32 Adam (no master copies)" if training_precision(dtype) == "fp32" else "mixed-precision Adam"


def assumption_text(dtype: str) -> str:
    """All that estimate assumes of a training step in dtype by default, as every command says it beside a figure."""
    return f"{adam_text(dtype)} in PyTorch eager, no pipeline, no ZeRO, no recomputation"


@dataclass(frozen=True)
class Framework:
    """What an implementation keeps for backward where implementations differ."""

    name: str
    glu_widths: int  # FFN-wide tensors a gated MLP keeps: eager 4 (gate, up, act(gate), product), fused 3
    rope_copies: bool  # rotated Q and K are new tensors while V, a view, keeps the QKV output alive
    loss_bytes_per_logit: int  # the loss's buffers at the start of backward, per logit
    dropout: bool  # dropout masks (1 byte an element) after attention and the MLP


FRAMEWORKS = {f.name: f for f in (
    # F.cross_entropy(logits.float()): the fp32 log-softmax kept (4), at backward its gradient (4) and
    # the input's gradient (4) at once: 12 bytes a logit.
    Framework("torch", glu_widths=4, rope_copies=True, loss_bytes_per_logit=12, dropout=False),
    # The same with F.cross_entropy on bf16 logits (verify's step): 2 + 2 + 2 bytes a logit.
    Framework("torch-bf16-loss", glu_widths=4, rope_copies=True, loss_bytes_per_logit=6, dropout=False),
    # Megatron-LM: fused bias-SwiGLU saves its input alone; vocab-parallel cross-entropy upcasts once
    # and works in place (fp32 softmax 4 + the bf16 gradient 2).
    Framework("megatron", glu_widths=3, rope_copies=True, loss_bytes_per_logit=6, dropout=False),
    # Korthikanti et al.'s GPT: GeLU MLP, learned positions, dropout everywhere.
    Framework("megatron-gpt", glu_widths=3, rope_copies=False, loss_bytes_per_logit=6, dropout=True),
)}

# The caching allocator rounds and splits blocks, and CUDA and its libraries keep memory outside it:
# an allowance on top of what max_memory_allocated counts. On the H200 (torch 2.11, CUDA 13;
# benchmarks/results/h200-memory/) the peak reserved exceeded the peak allocated by 1-11% over 13
# training configurations (the largest is taken: the allowance decides whether a plan fits), and
# the device held 0.75 GiB outside the allocator.
ALLOCATOR_FRACTION = 0.11
CONTEXT_BYTES = 0.75 * GIB


# A serving step's parts named for what they hold where training's names do not fit (Memory.parts).
SERVING_NAMES = {"loss": "logits"}


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU at the step's peak, by part. Parts add; total_bytes is their sum."""

    weights: float = 0.0
    grads: float = 0.0
    optimizer: float = 0.0
    activations: float = 0.0
    loss: float = 0.0  # logits and the loss's buffers (training), or the last positions' logits
    kv_cache: float = 0.0
    allocator: float = 0.0  # the allocator's rounding and the CUDA context

    def __add__(self, other: Memory) -> Memory:
        return Memory(*(a + b for a, b in zip(self.values(), other.values())))

    def values(self) -> tuple[float, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict[str, int]:
        """The parts in whole bytes, as the JSON outputs give them: an estimate's fraction of a byte is none."""
        return {f.name: round(getattr(self, f.name)) for f in fields(self)}

    def parts(self, mode: str = "train") -> dict[str, int]:
        """as_dict's parts as a step of `mode` has them: a serving step (prefill, decode) has no gradients,
        optimizer state or loss, so those are left out and its loss part, the last positions' logits, is
        named logits (its activations are one layer's live tensors, not what a backward pass keeps)."""
        if mode == "train":
            return self.as_dict()
        return {SERVING_NAMES.get(k, k): v for k, v in self.as_dict().items() if k not in ("grads", "optimizer")}

    @property
    def total_bytes(self) -> float:
        return sum(self.values())

    @property
    def allocated_bytes(self) -> float:
        """What torch.cuda.max_memory_allocated would report: the total less the allowance."""
        return self.total_bytes - self.allocator

    def fits(self, gpu: GPU) -> bool:
        return self.total_bytes <= capacity_bytes(gpu)

    @property
    def peak_at_step(self) -> bool:
        """A training peak at the optimizer step: the backward's activations and the loss's buffers
        are freed by then, and the step's temporaries count with the optimizer (training_arrays)."""
        return bool(self.optimizer) and not (self.activations or self.loss or self.kv_cache)

    def text(self, mode: str = "train") -> str:
        """'52.3 GiB (weights 13.0, grads 13.0, … GiB)', the parts that are not zero as parts(mode) names
        them (one under 0.05 GiB as <0.1, not as a 0.0 that reads as none), and where the peak is when it is
        at the optimizer step (else the missing activations read as free)."""
        parts = ", ".join(f"{k.replace('_', ' ')} {v / GIB:,.1f}" if v >= 0.05 * GIB else f"{k.replace('_', ' ')} <0.1"
                          for k, v in self.parts(mode).items() if v)
        where = " at the optimizer step, the activations freed by then" if self.peak_at_step else ""
        return f"{self.total_bytes / GIB:,.1f} GiB{where} ({parts} GiB)"


def capacity_bytes(gpu: GPU) -> int:
    return round(gpu.memory_gb * 1e9)  # the datasheet's decimal gigabytes


def _lookup(table: dict, key, what: str):
    if isinstance(key, str):
        if key not in table:
            raise ShapewiseError(f"unknown {what} {key!r}; use one of {', '.join(table)}")
        return table[key]
    return key


def layer_activation_bytes(shape: ModelShape, *, seq: int, dtype_bytes: int, attention: str, tp, recompute,
                           framework: Framework):
    """Bytes one layer keeps for backward per token of a micro-batch, on one tensor-parallel rank.

    tp and recompute (0 none, 1 selective, 2 full) may be numpy arrays; full recompute's layer
    input is returned (the working set of the layer being recomputed is added once, elsewhere)."""
    tp = np.asarray(tp, dtype=float)
    recompute = np.asarray(recompute)
    # fp8 runs the GEMMs in fp8 but keeps what flows between them (the residual stream, norms, attention)
    # in bf16, as Transformer Engine does: activations are 2 bytes at the least.
    B, h, d = activation_bytes(dtype_bytes), shape.hidden, shape.d_head
    q = shape.num_heads * d / tp
    kv = np.ceil(shape.kv_heads / tp) * d  # kv heads that do not divide by t are replicated
    heads = shape.num_heads / tp
    norm_stats = 8 if shape.norm == "layernorm" else 4  # fp32 mean and rstd per row, or rstd alone
    drop = 1 if framework.dropout else 0
    sp = 1 / tp  # sequence parallelism: the norms' and the projections' inputs keep s/t rows
    rope = shape.learned_positions == 0 and framework.rope_copies
    # Attention: norm input, norm output (the QKV GEMM's input), Q K V (and rotated copies), O.
    attn = (2 * B * h + norm_stats + drop * h) * sp + B * (q + 2 * kv) + rope * B * (q + kv) + B * q
    if attention == "flash":
        core = 4 * heads  # fp32 log-sum-exp per query row and head
    else:  # softmax output (and with dropout its mask and output) over s keys, per query row and head
        core = heads * seq * (B + drop * (1 + B)) + (framework.name == "torch") * B * q  # q·scale copy
    # MLP: norm input (shared with attention's when the two run in parallel), norm output and statistics
    # (attention's, where one norm feeds both), the FFN.
    shared = shape.parallel_attn and shape.norms_per_layer == 1
    mlp = ((0 if shape.parallel_attn else B * h) + (0 if shared else B * h + norm_stats) + drop * h) * sp
    widths = framework.glu_widths if shape.gated else 2
    if shape.is_moe:
        f = shape.expert_width / tp
        k = shape.top_k
        # The top-k indices (int64) and fp32 probabilities; each routed copy: its input, its FFN
        # tensors, its output (weighted at the combine) and its token and slot indices.
        mlp = mlp + 12 * k + k * (2 * B * h + widths * B * f + 16)
        mlp = mlp + shape.num_shared_experts * widths * B * f
    else:
        mlp = mlp + widths * B * shape.ffn_width / tp
    whole = attn + core + mlp
    layer_input = B * h * sp
    return np.where(recompute == 2, layer_input, np.where(recompute == 1, whole - core, whole))


def _in_flight_layers(stage, pp, vp, micro_batches, rank):
    """Layers' worth of one micro-batch's activations pipeline rank i (0 first) holds at its peak:
    in 1F1B min(p - i, m) micro-batches of its `stage` layers in flight (the first p, the last one);
    in the interleaved schedule 2(p-i-1) + (v-1)p + 1 chunks of stage/v layers (Megatron's warm-up
    plus one), never more than the m·v chunks a step has."""
    pp, vp, m, rank = (np.asarray(x, dtype=float) for x in (pp, vp, micro_batches, rank))
    plain, chunks = np.minimum(pp - rank, m), 2 * (pp - rank - 1) + (vp - 1) * pp + 1
    interleaved = np.minimum(chunks, m * vp) * stage / vp
    return np.where(vp > 1, interleaved, plain * stage)


def _state(params, precision: Precision, shard_w, shard_g, shard_o):
    return params * precision.weights / shard_w, params * precision.grads / shard_g, \
        params * precision.optimizer / shard_o


def training_arrays(shape: ModelShape, *, seq: int, dtype_bytes: int, attention: str, tp, pp, dp, vp, ep, zero,
                    recompute, batch, micro_batches, precision: Precision, framework: Framework) -> dict:
    """Each part of the peak per GPU (bytes), over numpy arrays of layouts; the fullest pipeline
    stage's, each with its own layers (stage_layers). Keys: the fields of Memory."""
    tp, pp, dp, vp, ep, zero, recompute, batch = (np.asarray(x) for x in (tp, pp, dp, vp, ep, zero, recompute, batch))
    h, V = shape.hidden, shape.vocab
    tokens = batch * seq
    experts = expert_params(shape)
    rank_layer = rank_layer_params(shape, tp)
    first_layers, heaviest, last_layers = stage_ends(shape.num_layers, pp)
    embed_norm = NORM_KINDS[shape.norm] * h * shape.embed_norm  # BLOOM's, on the first stage
    embed = V * h / tp + shape.learned_positions * h + embed_norm
    head = np.where(pp > 1, V * h / tp, 0.0) if shape.tied_embeddings else V * h / tp  # Megatron keeps a copy
    head = head + V * shape.lm_head_bias / tp  # Phi's output bias, split with the vocabulary
    final_norm = NORM_KINDS[shape.norm] * h  # the last stage's, whole on each rank
    edp = np.maximum(dp // ep, 1)  # replicas of each expert
    shard_w = np.where(zero >= 3, dp, 1), np.where(zero >= 3, edp, 1)
    shard_g = np.where(zero >= 2, dp, 1), np.where(zero >= 2, edp, 1)
    shard_o = np.where(zero >= 1, dp, 1), np.where(zero >= 1, edp, 1)
    per_layer = layer_activation_bytes(shape, seq=seq, dtype_bytes=dtype_bytes, attention=attention, tp=tp,
                                       recompute=recompute, framework=framework)
    working = layer_activation_bytes(shape, seq=seq, dtype_bytes=dtype_bytes, attention=attention, tp=tp,
                                     recompute=np.zeros_like(recompute), framework=framework)
    # FSDP gathers a layer's weights before it runs and prefetches the next: two layers unsharded.
    gathered = np.where((zero >= 3) & (dp > 1), 2 * (rank_layer + experts / (tp * ep)) * precision.weights, 0.0)
    # The fullest stage is the first (the embedding, the most micro-batches in flight), the last (the
    # head and the loss) or, where the first is a lighter one, the second: ⌈L/p⌉ layers and one
    # micro-batch fewer in flight than the first. The other middle stages hold no more layers and fewer
    # micro-batches than one of these.
    with_one_stage = embed + head + final_norm  # the first is the last: embedding, head and loss on one GPU
    best = None
    for rank, layers, extra_params, logits, counted in (
            (0, first_layers, embed, False, True),
            (1, heaviest, 0.0, False, pp >= 3),
            (pp - 1, last_layers, np.where(pp == 1, with_one_stage, head + final_norm), True, True)):
        layers_experts = layers * experts / (tp * ep)
        dense = layers * rank_layer + extra_params
        w1, g1, o1 = _state(dense, precision, *(s[0] for s in (shard_w, shard_g, shard_o)))
        w2, g2, o2 = _state(layers_experts, precision, *(s[1] for s in (shard_w, shard_g, shard_o)))
        weights, grads, optimizer = w1 + w2 + gathered, g1 + g2, o1 + o2
        held = _in_flight_layers(layers, pp, vp, micro_batches, rank) * per_layer * tokens
        has_logits = np.full(np.shape(pp), logits) | (pp == 1)
        # The final norm's input and output (the output layer's input) with the logits' buffers.
        loss = np.where(has_logits, tokens * (V / tp * framework.loss_bytes_per_logit + 2 * activation_bytes(dtype_bytes) * h / tp), 0.0)
        # Full recomputation rebuilds one layer's activations at a time, after the loss's backward
        # has freed its buffers: the two are never alive together (on the H200, counting both put
        # the estimate 5-8% over).
        rebuilt = np.where(recompute == 2, working * tokens, 0.0)
        held = held + np.where(rebuilt > loss, rebuilt, 0.0)
        loss = np.where(rebuilt > loss, 0.0, loss)
        step = (dense + layers_experts) / np.where(zero >= 1, dp, 1) * precision.step_temp
        backward, at_step = held + loss, step
        peak_is_step = at_step > backward
        parts = {"weights": weights, "grads": grads, "optimizer": optimizer,
                 "activations": np.where(peak_is_step, 0.0, held), "loss": np.where(peak_is_step, 0.0, loss),
                 "step": np.where(peak_is_step, at_step, 0.0)}
        total = sum(parts.values())
        if best is None:
            best = parts, total
        else:
            worse = counted & (total > best[1])
            best = {k: np.where(worse, parts[k], best[0][k]) for k in parts}, np.where(worse, total, best[1])
    parts = best[0]
    # The optimizer step's temporaries count with the optimizer.
    parts["optimizer"] = parts["optimizer"] + parts.pop("step")
    parts["kv_cache"] = np.zeros_like(parts["weights"])
    parts["allocator"] = ALLOCATOR_FRACTION * sum(parts.values()) + CONTEXT_BYTES
    return parts


def estimate(shape: ModelShape, workload: Workload, parallel: Parallelism = Parallelism(), *,
             precision: str | Precision | None = None, framework: str | Framework = "torch") -> Memory:
    """The peak bytes per GPU of one step (training) or of serving (prefill, decode), by part; a training
    step's state by default as training_precision(workload.dtype) keeps it."""
    precision = _lookup(PRECISIONS, precision or training_precision(workload.dtype), "precision")
    framework = _lookup(FRAMEWORKS, framework, "framework")
    if workload.mode != "train":
        if parallel != Parallelism():  # a layout dropped without a word would price every weight on one group
            raise ShapewiseError(f"parallel lays out a training step (pipeline, data parallelism, ZeRO, "
                                 f"recomputation); a {workload.mode} step is priced on one tensor-parallel group "
                                 f"(tp): leave parallel out")
        return _inference(shape, workload, framework)
    if parallel.vp > 1 and shape.num_layers % (parallel.pp * parallel.vp):
        raise ShapewiseError(f"{shape.num_layers} layers do not split into {parallel.pp} pipeline stages of "
                             f"{parallel.vp} chunks; use a pp·vp that divides {shape.num_layers}")
    parts = training_arrays(shape, seq=workload.seq, dtype_bytes=workload.dtype_bytes, attention=workload.attention,
                            tp=workload.tp, pp=parallel.pp, dp=parallel.dp, vp=parallel.vp, ep=parallel.ep,
                            zero=parallel.zero, recompute=RECOMPUTE.index(parallel.recompute), batch=workload.batch,
                            micro_batches=parallel.micro_batches, precision=precision, framework=framework)
    return Memory(**{k: float(v) for k, v in parts.items()})


def _inference(shape: ModelShape, w: Workload, framework: Framework) -> Memory:
    """Weights, the KV cache of batch sequences of seq tokens, and the largest live tensors of one
    layer (the MLP's input and its FFN-wide tensors); logits of the last positions only."""
    B, t = w.dtype_bytes, w.tp
    cache = shape.kv_cache_values(seq=w.seq, tp=t) * w.batch * w.kv_cache_bytes  # latent and windowed caches too
    rows = w.tokens  # prefill: every position; decode: one new token per sequence
    width = shape.mlp_width
    widths = 3 if shape.gated else 2
    transient = rows * B * (2 * shape.hidden + widths * width / t) * (shape.top_k if shape.is_moe else 1)
    if w.attention == "unfused":
        # Without a fused kernel a layer's scores and their softmax are two b·(a/t)·q·k tensors alive at once
        # (as ops.attention's attn/softmax reads and writes them; Hugging Face's eager attention upcasts the
        # softmax to fp32 on top); a window masks scores but the matrix is whole, except a decode's cache.
        q_len = 1 if w.mode == "decode" else w.seq
        kv_len = min(w.seq, shape.window) if w.mode == "decode" and not shape.num_global_layers else w.seq
        scores = 2 * w.batch * shape.num_heads / t * q_len * kv_len * activation_bytes(B)
        transient = max(transient, scores)
    logits = w.batch * shape.vocab / t * 4  # fp32 logits of each sequence's last position
    whole = float(outside_norms(shape))  # the final norm (BLOOM's over the embeddings too) on every rank
    weights = (shape.params - whole) / t + whole + shape.num_layers * float(replicated_params(shape, t))
    parts = Memory(weights=weights * B, activations=transient, loss=logits, kv_cache=cache)
    return parts + Memory(allocator=ALLOCATOR_FRACTION * parts.total_bytes + CONTEXT_BYTES)


def korthikanti_bytes(shape: ModelShape, *, seq: int, batch: int, tp: int = 1) -> float:
    """The paper's sbh(34 + 5as/h)/t for one layer, 16-bit, with sequence parallelism (their eq. 2 and
    Table 2): the check the tensor-by-tensor count reproduces for a GPT layer with dropout."""
    s, b, h, a = seq, batch, shape.hidden, shape.num_heads
    return s * b * h * (34 + 5 * a * s / h) / tp
