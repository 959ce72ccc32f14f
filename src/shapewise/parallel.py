"""How a training step is spread over GPUs, and what that costs in time.

Parallelism names the layout (Megatron's terms): t-way tensor parallelism with sequence parallelism
(the Workload's tp), p pipeline stages of v virtual stages each, d-way data parallelism with ZeRO
stage 0-3 (3 is FSDP), e-way expert parallelism inside d, the recompute policy and m micro-batches
per step. The memory model and the step-time model below both read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dtypes import activation_bytes
from .errors import ShapewiseError, argument, warn
from .limits import COUNT
from .ops import EMBED_OPS, HEAD_OPS

RECOMPUTE = ("none", "selective", "full")


def stage_layers(num_layers: int, pp: int) -> tuple[int, ...]:
    """Layers on each of p pipeline stages, first to last. Where p does not divide the layers, stages
    hold ⌈L/p⌉ or ⌊L/p⌋ layers and the lighter ones go first and last, beside the embedding and the
    output layer (BLOOM ran 70 layers over 12 stages as 5, 6 … 6, 5; Llama 3 405B 126 over 16 as
    7, 8 … 8, 7); a single lighter stage goes last, as the output layer and loss outweigh the embedding."""
    if not 1 <= pp <= num_layers:
        raise ShapewiseError(f"{pp} pipeline stages of {num_layers} layers: give from 1 to {num_layers} stages, "
                             f"each holding a layer at least")
    light, heavy_stages = divmod(num_layers, pp)
    if not heavy_stages:
        return (light,) * pp
    if pp - heavy_stages == 1:
        return (light + 1,) * heavy_stages + (light,)
    return (light,) + (light + 1,) * heavy_stages + (light,) * (pp - heavy_stages - 1)


def stage_ends(num_layers: int, pp) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The layers of the first, the heaviest and the last pipeline stage (stage_layers), for each
    pipeline degree of an array of them: ⌈L/p⌉ is the heaviest's."""
    degrees, row = np.unique(np.asarray(pp), return_inverse=True)
    ends = np.array([(st[0], max(st), st[-1]) for st in (stage_layers(num_layers, int(p)) for p in degrees)],
                    dtype=float)
    return tuple(ends[row, i].reshape(np.shape(pp)) for i in range(3))


def expert_params(shape) -> int:
    """Parameters of one layer's routed experts (what expert parallelism splits)."""
    from .shapes import MLP_KINDS

    if not shape.is_moe:
        return 0
    mats, f = MLP_KINDS[shape.mlp], shape.expert_width
    return shape.num_experts * (mats * shape.hidden * f + (mats - 1) * f * shape.mlp_bias + shape.hidden * shape.down_bias)


def whole_params(shape) -> int:
    """Parameters of one layer that every tensor-parallel rank holds whole, as Megatron-LM and PyTorch's
    tensor parallelism do: its norms' weights and biases (a QK norm's shared by the heads too), the row-parallel
    linears' output biases (attention's out, a dense or shared expert's down), an MoE router, and latent attention's
    down projections (q_a_proj, kv_a_proj_with_mqa: ReplicatedLinear in vLLM and SGLang, which
    ops.projections prices unsplit) and their norms. Under sequence parallelism each rank's gradients
    of them are partial sums, which finalize_model_grads all-reduces over the group (replica_grads)."""
    from .shapes import NORM_KINDS

    h = shape.hidden
    norms = shape.norms_per_layer * NORM_KINDS[shape.norm] * h
    # shared by the heads (one head's weights, a bias too): whole on each rank; per head or per projection: split
    qk_norms = shape.qk_norm_params if shape.qk_norm_weights in ("head", "head_bias") else 0
    downs = shape.num_shared_experts if shape.is_moe else 1
    biases = h * shape.out_proj_bias + h * shape.down_bias * downs
    router = h * (shape.num_experts + shape.shared_expert_gate) if shape.is_moe else 0
    latent = 0
    if shape.is_mla:
        q_rank, kv_rank = shape.q_lora_rank, shape.kv_lora_rank
        latent = h * (q_rank + kv_rank + shape.rope_head_dim) + q_rank + kv_rank
    return norms + qk_norms + biases + router + latent


def kv_replicas(shape, tp):
    """Ranks that hold each kv head (1 where t ≤ kv heads): past t = kv heads every rank keeps one whole kv
    head (vLLM's QKVParallelLinear replicates them). tp may be a numpy array."""
    tp = np.asarray(tp, dtype=float)
    return 1.0 if shape.is_mla else np.maximum(tp / shape.kv_heads, 1.0)


def kv_head_params(shape) -> int:
    """One kv head's key and value weights (and biases)."""
    return 2 * shape.d_head * (shape.hidden + (shape.attn_bias or shape.qkv_bias))


def replicated_params(shape, tp):
    """Parameters of one layer that each of tp tensor-parallel ranks holds beyond its 1/tp share, the one
    place that says which weights a rank keeps whole (whole_params), and the kv heads past t = kv heads,
    whose k and v weights stop shrinking at one head. tp may be a numpy array."""
    tp = np.asarray(tp, dtype=float)
    kv = 0.0 if shape.is_mla else kv_head_params(shape) * (np.ceil(shape.kv_heads / tp) - shape.kv_heads / tp)
    return whole_params(shape) * (1 - 1 / tp) + kv


def outside_norms(shape, pp=1):
    """The norms' weights outside the layers on the rank that holds them: the final norm, and BLOOM's over
    the embeddings where one stage holds both ends (pp == 1); a pipeline's end stage holds one. Whole on
    every tensor-parallel rank. pp may be a numpy array."""
    from .shapes import NORM_KINDS

    return NORM_KINDS[shape.norm] * shape.hidden * np.where(np.asarray(pp) == 1, 1 + shape.embed_norm, 1)


def replica_groups(shape, tp, layers, outside=0):
    """What tensor-parallel ranks hold alike in `layers` layers and `outside` them (outside_norms), whose
    gradients a training step all-reduces once (Megatron-LM's _allreduce_layernorm_grads: every parameter
    marked sequence_parallel), as (op name, parameters, ranks): whole_params over the t ranks, and each
    replicated kv head's over the t/kv ranks holding it (none where t ≤ kv heads). Arrays broadcast."""
    replicas = kv_replicas(shape, tp)
    kv = np.where(replicas > 1, kv_head_params(shape), 0)
    return (("tp/replica_grads", layers * whole_params(shape) + outside, tp), ("tp/kv_grads", layers * kv, replicas))


def replica_grads_ms(shape, tp, layers, *, grad_bytes, gbs, params, outside=0):
    """The all-reduces of replica_groups, once a step after the last micro-batch's backward: ring, two passes."""
    return sum(ring_ms(count * grad_bytes, ranks, gbs, params, passes=2)
               for _, count, ranks in replica_groups(shape, tp, layers, outside))


def rank_layer_params(shape, tp):
    """One layer's parameters on one of tp tensor-parallel ranks, its routed experts apart (split t·ep ways):
    its 1/tp share and what it holds whole (replicated_params). tp may be a numpy array."""
    return (shape.layer_params - expert_params(shape)) / tp + replicated_params(shape, tp)


# ZeRO-3 shards the weights over d and gathers them for each micro-batch's forward and backward. Megatron-LM runs it
# as torch's FSDP2 (--use-torch-fsdp2, which asserts pipeline_model_parallel_size 1) or Megatron-FSDP
# (--data-parallel-sharding-strategy optim_grads_params: its second version refuses pipeline stages, its first is
# tested without them and refuses interleaved ones): no layout pairs the two, a time for one being of a run no
# framework is known to make.
FSDP_WITH_PIPELINE = ("ZeRO-3 (FSDP) with pipeline stages: Megatron-LM's FSDP runs without pipeline parallelism "
                      "(torch's FSDP2 refuses it)")


@dataclass(frozen=True)
class Parallelism:
    pp: int = 1  # pipeline stages
    dp: int = 1  # data-parallel replicas
    vp: int = 1  # virtual stages (model chunks) per pipeline rank: > 1 is the interleaved 1F1B schedule
    ep: int = 1  # expert parallelism: experts split over ep of the dp ranks
    zero: int = 0  # 0 replicated; 1 optimizer state sharded over dp; 2 and grads; 3 (FSDP) and weights
    recompute: str = "none"  # none; selective: core attention; full: each layer from its input
    micro_batches: int = 1  # m: micro-batches per step on each pipeline

    def __post_init__(self):
        for name in ("pp", "dp", "vp", "ep", "micro_batches"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ShapewiseError(f"parallelism: {name} must be a positive whole number, got {value!r}")
            COUNT.check(value, f"parallelism: {name}")  # no more than plan's --global-batch has tokens
        if self.zero not in (0, 1, 2, 3):
            raise ShapewiseError(f"parallelism: ZeRO stage must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.recompute not in RECOMPUTE:
            raise ShapewiseError(f"parallelism: recompute must be one of {', '.join(RECOMPUTE)}, got {self.recompute!r}")
        if self.dp % self.ep:
            raise ShapewiseError(f"parallelism: expert parallelism {self.ep} must divide data parallelism {self.dp}")
        if self.vp > 1 and self.pp == 1:
            raise ShapewiseError("parallelism: virtual stages need pipeline parallelism (pp > 1)")
        if self.zero == 3 and self.pp > 1:
            raise ShapewiseError(f"parallelism: {FSDP_WITH_PIPELINE}; give zero 2 or less, or pp 1")


# ---- links: within a node (hardware.NVLINK_DATASHEETS) and between nodes (below) ----

# Network bandwidth per GPU between nodes, per direction (one NIC per GPU in these systems).
SCALE_OUT = {
    "a100-40gb": (25.0, "NVIDIA DGX A100 datasheet: 8x single-port ConnectX-6 HDR InfiniBand 200 Gb/s, one per GPU"),
    "a100-80gb": (25.0, "NVIDIA DGX A100 datasheet: 8x single-port ConnectX-6 HDR InfiniBand 200 Gb/s, one per GPU"),
    "h100": (50.0, "NVIDIA DGX H100 datasheet: 8x single-port ConnectX-7 400 Gb/s InfiniBand/Ethernet, one per GPU"),
    "h200": (50.0, "NVIDIA DGX H200 datasheet: 8x single-port ConnectX-7 400 Gb/s InfiniBand/Ethernet, one per GPU"),
    "b200": (50.0, "NVIDIA DGX B200 datasheet: 8x single-port ConnectX-7 400 Gb/s InfiniBand/Ethernet, one per GPU"),
}


@dataclass(frozen=True)
class Network:
    """The links a step's collectives use: GB/s per direction per GPU within a node and between nodes;
    None for a link the plan uses none of (between nodes on one node; any link on one GPU)."""

    intra_gbs: float | None
    inter_gbs: float | None
    gpus_per_node: int = 8
    source: str = ""

    def __post_init__(self):
        if not all(gbs is None or gbs > 0 for gbs in (self.intra_gbs, self.inter_gbs)):
            raise ShapewiseError("network: link bandwidths must be positive GB/s")
        if isinstance(self.gpus_per_node, bool) or not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise ShapewiseError(f"network: GPUs per node must be a positive whole number, got {self.gpus_per_node!r}")

    def gbs(self, crosses):
        """GB/s per GPU of groups that cross nodes (crosses True) or stay within one; NaN for a link the
        network has none of, which network_for gives only where no layout of its GPUs uses it."""
        return np.where(crosses, np.nan if self.inter_gbs is None else self.inter_gbs,
                        np.nan if self.intra_gbs is None else self.intra_gbs)


def links_used(gpus: int | None, gpus_per_node: int) -> tuple[bool, bool]:
    """Whether layouts of `gpus` GPUs use the link within a node (two or more) and the network between
    nodes (more than a node); None: any number, both."""
    return gpus is None or gpus > 1, gpus is None or gpus > gpus_per_node


def network_for(gpu, *, gpus: int | None = None, gpus_per_node: int = 8, inter_gbs: float | None = None,
                intra_gbs: float | None = None) -> Network:
    """The GPU's datasheet links, each overridable; refuses a link the table has none of and none is given,
    where layouts of `gpus` GPUs use it (the network between nodes where they span several; the link within
    a node where there are two or more; both where gpus is None). A given rate no layout uses, or a network
    faster than the link within a node, is said in a warning."""
    from .hardware import link

    within, across = links_used(gpus, gpus_per_node)
    intra_name, inter_name = argument("intra_gbs"), argument("inter_gbs")
    alone = "one GPU sends nothing to another"
    for name, given, used, why in (
            (intra_name, intra_gbs, within, alone),
            (inter_name, inter_gbs, across, alone if gpus == 1 else
             f"the {gpus} GPUs are one node ({argument('gpus_per_node')} {gpus_per_node})")):
        if given is not None and not used:
            warn(f"{name} {given:g} has no effect: {why}")
    intra, inter = None, None
    if within:
        peer = link(gpu)
        if intra_gbs is None and peer is None:
            raise ShapewiseError(f"{gpu.name} has no GPU-to-GPU link in the table; give {intra_name}")
        intra = (float(intra_gbs), "given") if intra_gbs is not None else (peer[1], peer[0])
    if across:
        row = SCALE_OUT.get(gpu.key)
        if inter_gbs is None and row is None:
            raise ShapewiseError(f"no datasheet network for {gpu.name}; give {inter_name} (GB/s per GPU)")
        inter = (float(inter_gbs), "given") if inter_gbs is not None else row
    if intra and inter and inter[0] > intra[0]:
        warn(f"the network between nodes ({inter[0]:g} GB/s per GPU) is faster than the link within a node "
             f"({intra[0]:g} GB/s): plans then spread across nodes what a node would hold; check {intra_name} "
             f"and {inter_name}")
    source = ", ".join([f"within a node {intra[0]:g} GB/s ({intra[1]})" if intra else "no link (one GPU)"]
                       + ([f"between nodes {inter[0]:g} GB/s ({inter[1]})" if inter else "no network (one node)"]
                          if intra else []))
    return Network(intra[0] if intra else None, inter[0] if inter else None, gpus_per_node, source)


# ---- step time ----

# The attention core's ops, fused or not, in global and sliding-window layers (ops.attention): what
# selective recomputation repeats in every layer, windowed ones included.
CORE_ATTENTION = ("attn/flash", "attn/window", "attn/score", "attn/softmax", "attn/over_v")


@dataclass(frozen=True)
class LayerTimes:
    """One micro-batch on one tensor-parallel rank, from the cost model: ms and matrix FLOPs."""

    fwd_ms: float  # one layer's forward (its tensor-parallel collectives included)
    bwd_ms: float
    core_fwd_ms: float  # the forward of core attention alone (what selective recomputation repeats)
    tp_comm_ms: float  # one layer's tensor-parallel collectives, forward and backward
    embed_ms: float  # the embedding, forward and backward (first stage)
    head_ms: float  # final norm, output layer and loss, forward and backward (last stage)
    layer_flops: float
    outside_flops: float
    bytes_per_s: float  # the GPU's memory bandwidth (the optimizer's update is memory-bound)


def layer_times(shape, workload, *, gpu, params, link_gbs: float | None = None) -> LayerTimes:
    """One layer's times (and the embedding's and head's) on one tensor-parallel rank; its collectives over
    link_gbs GB/s per GPU where given (the network's within a node), else over the GPU's datasheet link."""
    from .cost import layers_priced, predict_step
    from .ops import COMM, REPLICA_GRADS
    from .profile import CostModel

    priced, layers = layers_priced(shape)  # a model of unlike layers: its mean layer
    step = predict_step(priced, workload, gpu=CostModel(gpu, params), link_gbs=link_gbs)

    def ms(keep) -> float:
        return sum(c.total_ms for c in step.costs if keep(c.op))

    inside = lambda op: op.name not in EMBED_OPS + HEAD_OPS + REPLICA_GRADS  # step_arrays prices those once a step
    return LayerTimes(
        fwd_ms=ms(lambda op: inside(op) and op.pass_ == "fwd") / layers,
        bwd_ms=ms(lambda op: inside(op) and op.pass_ != "fwd") / layers,
        core_fwd_ms=ms(lambda op: op.name in CORE_ATTENTION and op.pass_ == "fwd") / layers,
        tp_comm_ms=ms(lambda op: inside(op) and op.kind == COMM) / layers,
        embed_ms=ms(lambda op: op.name in EMBED_OPS), head_ms=ms(lambda op: op.name in HEAD_OPS),
        layer_flops=float(sum(c.op.total_flops for c in step.costs if inside(c.op))) / layers,
        outside_flops=float(sum(c.op.total_flops for c in step.costs if not inside(c.op))),
        bytes_per_s=step.gpu.bytes_per_s)


def optimizer_ms(local_params, precision, params, bytes_per_s):
    """The optimizer's update of a rank's local parameters: it reads weights, grads and its state and
    writes weights and state back, at the GPU's memory bandwidth as the profile reaches it."""
    touched = local_params * (2 * precision.weights + precision.grads + 2 * precision.optimizer)
    return touched / (params.gemm_bandwidth * bytes_per_s) * 1e3


def ring_ms(nbytes, ranks, gbs, params, *, passes: float = 1.0):
    """A ring collective over `ranks`: (ranks-1)/ranks of the message per pass (2 for an all-reduce)
    at the link's bus bandwidth (cost.CostParams.comm_bandwidth of the datasheet), plus its latency and its
    kernel's launch, as cost.comm_ms prices the same collective for check."""
    ranks = np.asarray(ranks, dtype=float)
    moved = passes * (ranks - 1) / ranks * nbytes
    fixed = params.comm_latency_ms + params.launch_ms
    return np.where(ranks > 1, moved / (gbs * 1e9 * params.comm_bandwidth) * 1e3 + fixed, 0.0)


def step_arrays(times: LayerTimes, shape, workload, *, pp, vp, dp, ep, zero, recompute, micro_batches,
                network: Network, params, precision, overlap_dp: bool = True) -> dict:
    """A training step's time, ms, by part, over numpy arrays of layouts (recompute: 0, 1, 2).

    compute: m micro-batches through the slowest stage (tensor-parallel collectives included, as
      the cost model prices them); recompute: the part of it that repeats forward work;
    bubble: 1F1B idles (p-1) stage-times, the interleaved schedule (p-1)/v of them (Narayanan et
      al. 2021, section 2.2): a share (p-1)/(v·m) of compute;
    pipeline_comm: each micro-batch's activation forward and its gradient back across every
      chunk boundary (v per rank), s·b·h/t bytes with sequence parallelism, not hidden;
    dp_comm: gradients reduced over d (all-reduce; with ZeRO a reduce-scatter and, after the
      optimizer, an all-gather of the updated weights; ZeRO-3/FSDP gathers the weights for every
      micro-batch's forward and backward). With overlap_dp, as DDP, FSDP and Megatron's
      --overlap-grad-reduce/--overlap-param-gather do, the gradient reduction hides behind the last
      micro-batch's backward, the weights' gather behind the first forward, FSDP's behind each
      micro-batch; what is longer than that compute, and always the last layer's bucket, is exposed
      (where p does not divide L, as in an even pipeline at the same pace);
    ep_comm: expert parallelism's dispatch and combine all-to-alls, forward and backward, exposed;
    optimizer: reading and writing the local optimizer shard at the GPU's memory bandwidth.

    Where p does not divide the layers, the first, the heaviest and the last rank hold their own
    (stage_layers: BLOOM's 70 over 12 ranks are 5, 6 … 6, 5, the embedding beside the first five and
    the head beside the last); the slowest rank sets the pace."""
    pp, vp, dp, ep, zero, recompute, m = (np.asarray(x) for x in (pp, vp, dp, ep, zero, recompute, micro_batches))
    t, B = workload.tp, workload.dtype_bytes
    first_layers, heaviest, last_layers = stage_ends(shape.num_layers, pp)  # the heaviest: the most weights and gradients
    extra = np.where(recompute == 2, times.fwd_ms, np.where(recompute == 1, times.core_fwd_ms, 0.0))
    layer = times.fwd_ms + times.bwd_ms + extra

    def end_stages(first_n, last_n):
        """The first and last rank's time with these layers: the embedding beside the first, the head
        beside the last, both on the one rank where there is one."""
        return (first_n * layer + times.embed_ms + np.where(pp == 1, times.head_ms, 0.0),
                last_n * layer + times.head_ms + np.where(pp == 1, times.embed_ms, 0.0))

    first, last = end_stages(first_layers, last_layers)
    stage = np.maximum(np.maximum(first, last), heaviest * layer)
    # The layers of the stage that sets the pace: recomputation and collectives are counted with its.
    pace = np.where(stage == first, first_layers, np.where(stage == last, last_layers, heaviest))
    compute = m * stage
    recomputed = m * pace * extra
    bubble = (pp - 1) / vp * stage
    gpn = network.gpus_per_node
    # Megatron orders ranks tensor-fastest, then data, then pipeline: a pipeline neighbour is t·d
    # ranks away, a data-parallel one t; a group within one node uses NVLink, else the network.
    p2p_gbs = network.gbs(t * dp >= gpn)
    message = workload.batch * workload.seq * shape.hidden * activation_bytes(B) / t  # fp8 sends bf16
    sends = np.where(pp > 1, 2 * vp * m, 0)
    pipeline_comm = np.where(sends > 0, sends * (message / (p2p_gbs * 1e9 * params.comm_bandwidth) * 1e3
                                                 + params.comm_latency_ms), 0.0)
    # Data parallelism: the stage's parameters (the largest stage: the embedding's or the head's; both
    # where one stage holds the model and they are not tied).
    experts = expert_params(shape)
    vocab_matrices = np.where(pp == 1, 1 if shape.tied_embeddings else 2, 1)

    norms = outside_norms(shape, pp)  # beside the vocab matrices, whole on each rank
    positions = shape.learned_positions * shape.hidden  # GPT-2's table, whole on each rank of the first stage

    def stage_params(layers):
        vocab = shape.vocab * (vocab_matrices * shape.hidden + shape.lm_head_bias) / t  # an output bias on the head's
        return (layers * rank_layer_params(shape, t) + vocab + positions + norms,
                layers * experts / (t * ep))

    # The reduction is priced as that of an even pipeline at this one's pace: its stages hold the
    # lighter stages' layers and what the slowest stage takes beyond them, in layers (L/p where p
    # divides L). With the heaviest stage's layers, a layer that left the slowest stage as it was (one
    # more on a middle stage, beside an end stage the head slows) gave the reduction more backward to
    # hide behind and a smaller share for its last bucket: a step of more work was priced faster
    # (llama3-8b on 96 H100s, ZeRO-3: 33 layers over 32 stages 4.5% faster than 32).
    light = np.minimum(first_layers, last_layers)
    paced = light + (stage - np.maximum(*end_stages(light, light))) / layer
    dense_sync, expert_sync = stage_params(paced)
    dp_gbs = network.gbs(t * dp > gpn)
    edp = np.maximum(dp // ep, 1)

    def over_dp(count, *, passes):
        return ring_ms(dense_sync * count, dp, dp_gbs, params, passes=passes) + \
            ring_ms(expert_sync * count, edp, dp_gbs, params, passes=passes)

    # ZeRO-2 keeps only its shard of the gradients: each micro-batch's are reduce-scattered as its backward
    # makes them (ZeRO-1 accumulates them whole and reduces once a step).
    grads_once = over_dp(precision.grads, passes=np.where(zero >= 1, 1, 2))
    grad_rounds = np.where(zero == 2, m, 1)
    grads = grad_rounds * grads_once
    gather = np.where((zero >= 1) & (zero <= 2), over_dp(precision.weights, passes=1), 0.0)
    fsdp = np.where(zero == 3, over_dp(2 * precision.weights + precision.grads, passes=1), 0.0)  # per micro-batch
    bwd_one, fwd_one = paced * times.bwd_ms, paced * times.fwd_ms
    if overlap_dp:
        bucket = 1 / np.maximum(paced, 1)
        exposed = grad_rounds * np.maximum(grads_once - bwd_one, grads_once * bucket) + \
            np.maximum(gather - fwd_one, gather * bucket)
        exposed = np.where(zero == 3, m * np.maximum(fsdp - stage, fsdp * bucket), exposed)
    else:
        exposed = np.where(zero == 3, m * fsdp, grads + gather)
    hidden = np.where(zero == 3, m * fsdp, grads + gather) - exposed
    # Expert parallelism: dispatch and combine, forward and backward, of every routed copy.
    routed = workload.batch * workload.seq * shape.top_k * shape.hidden * B
    ep_gbs = network.gbs(t * ep > gpn)
    ep_comm = m * pace * 4 * ring_ms(routed, ep, ep_gbs, params) if shape.is_moe else np.zeros_like(compute)
    optimizer = optimizer_ms(sum(stage_params(heaviest)) / np.where(zero >= 1, dp, 1), precision, params,
                             times.bytes_per_s)
    # The replicas' gradients, all-reduced over the tensor-parallel group once a step, after the last backward.
    replicas = replica_grads_ms(shape, t, pace, grad_bytes=precision.grads, gbs=network.gbs(t > gpn), params=params,
                                outside=norms)
    total = compute + bubble + pipeline_comm + exposed + ep_comm + optimizer + replicas
    return {"total_ms": total, "compute_ms": compute, "recompute_ms": recomputed, "bubble_ms": bubble,
            "pipeline_comm_ms": pipeline_comm, "dp_comm_ms": exposed, "dp_hidden_ms": hidden,
            "ep_comm_ms": ep_comm, "optimizer_ms": optimizer, "tp_comm_ms": m * pace * times.tp_comm_ms + replicas}
