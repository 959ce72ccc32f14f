"""From a model's shape and a workload to the named ops of one step, with per-rank shapes and counts.

GEMMs follow torch's conventions: an op multiplies an m×k matrix by a k×n matrix (batch of them for
BMMs). `layout` names how the two operands are stored, as cuBLAS sees torch tensors: "nn" both
row-major (x @ W), "nt" the second one transposed (F.linear: x @ W.T, W stored out×in), "tn" the first
one transposed (a weight gradient: dy.T @ x). Layout decides which dims are leading dims, and so which
dims must be aligned for the fast kernels.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .dtypes import activation_bytes, activation_dtype
from .shapes import ModelShape, Workload, check_parallel

GEMM, BMM, FLASH, MEMORY, COMM = "gemm", "bmm", "flash", "memory", "comm"


SIZE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def size_text(nbytes: float, *, largest: str = "MiB", digits: str = ",.1f") -> str:
    """Bytes in the largest unit up to `largest` they reach, bytes below a KiB. An op's row says MiB from one
    MiB up with one decimal, KiB below (a served step's head gathers 4 rows: "32.0 KiB", where MiB read
    "0.0"), never GiB: Op.shape_text keys stored cases. A collective's size is said as people write it,
    largest="GiB", digits=",.4g": 4 KiB, 1.5 MiB, 2 GiB."""
    units = SIZE_UNITS[[unit for unit, _ in SIZE_UNITS].index(largest):]
    for unit, scale in units:
        if nbytes >= scale:
            return f"{nbytes / scale:{digits}} {unit}"
    return f"{nbytes:,.0f} B"


@dataclass(frozen=True)
class Op:
    """One kind of kernel call in a step: its shape, how often it runs and its exact work."""

    name: str  # path-like: attn/qkv, mlp/down, logits
    pass_: str  # fwd; dgrad/wgrad (linear backward); dq/dk/dp/dv (attention BMM backward); bwd
    kind: str  # gemm, bmm, flash or memory
    count: int  # calls per step
    flops: int  # per call; matrix FLOPs (2 per multiply-add); 0 for memory ops
    bytes: int  # per call: each input read once, each output written once
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 1  # BMM batch; for flash: sequences × heads
    layout: str = "nn"
    causal: bool = False  # flash only: m is the query length, n the key length, k the head dim
    groups: int = 1  # flash only: query heads per kv head (grouped-query attention)
    window: int = 0  # flash only: each query sees only the last `window` keys (sliding window); 0: all
    v_dim: int = 0  # flash only: the value head dim where it is not k's (latent attention: 192 and 128); 0: k
    # Memory ops: m rows of n values, and the kind of kernel, whose speeds differ: copy, add,
    # layernorm, rmsnorm, act, glu, softmax, loss, embed (whose table has k rows) or rope (heads of k).
    family: str = ""
    # A GEMM an fp8 step runs in bf16 all the same (run_dtype): the MoE router and the shared experts' gate, plain
    # linears beside Transformer Engine's fp8 ones in Megatron-LM (and left out of TorchTitan's fp8 conversion),
    # whose widths of a few experts torch._scaled_mm, which takes dims of multiples of 16, could not run at all.
    high_precision: bool = False

    @property
    def label(self) -> str:
        return self.name if self.pass_ == "fwd" else f"{self.name}.{self.pass_}"

    @property
    def is_matmul(self) -> bool:
        return self.kind in (GEMM, BMM)

    @property
    def shape_text(self) -> str:
        if self.kind == GEMM:
            return f"{self.m}×{self.n}×{self.k}"
        if self.kind == BMM:
            return f"{self.batch}×({self.m}×{self.n}×{self.k})"
        if self.kind == FLASH:
            return f"{self.batch}×(q{self.m} kv{self.n} d{self.k}{f' w{self.window}' if self.window else ''})"
        # part of a stored op case's key (cases.op_case): never reworded
        return f"{self._rows_text}, {self.bytes / 2**20:,.1f} MiB"

    @property
    def _rows_text(self) -> str:
        """A memory-bound op's or collective's rows × width (and ranks), before its size."""
        return f"{self.m}×{self.n} over {self.k}" if self.kind == COMM else f"{self.m}×{self.n}"

    @property
    def shown_shape(self) -> str:
        """shape_text as a table shows it: a memory-bound op's or collective's size under a MiB in KiB or bytes."""
        if self.kind in (GEMM, BMM, FLASH):
            return self.shape_text
        return f"{self._rows_text}, {size_text(self.bytes)}"

    @property
    def total_flops(self) -> int:
        return self.flops * self.count


def matmul(name: str, pass_: str, m: int, n: int, k: int, *, layout: str, count: int, dtype_bytes: int,
           batch: int = 1, high_precision: bool = False) -> Op:
    """A GEMM (batch 1) or BMM: FLOPs and bytes of C[m×n] = A[m×k] · B[k×n], batch times. A BMM's
    operands are activations (an fp8 step's in bf16: dtypes.activation_dtype), and so are a high_precision GEMM's."""
    size = activation_bytes(dtype_bytes) if batch > 1 or high_precision else dtype_bytes
    return Op(name, pass_, BMM if batch > 1 else GEMM, count=count, flops=2 * m * n * k * batch,
              bytes=(m * k + k * n + m * n) * batch * size, m=m, n=n, k=k, batch=batch, layout=layout,
              high_precision=high_precision)


def run_dtype(op: Op, dtype: str) -> str:
    """The dtype an op of a step in `dtype` runs in: an fp8 step's GEMMs in fp8 but for its high_precision ones,
    its batched GEMMs and attention in bf16 (dtypes.activation_dtype); any other step's ops in its own."""
    return dtype if op.kind == GEMM and not op.high_precision else activation_dtype(dtype)


def linear(name: str, tokens: int, out_features: int, in_features: int, *, train: bool, count: int,
           dtype_bytes: int, high_precision: bool = False) -> list[Op]:
    """y = x Wᵀ, and in training its two backward GEMMs, each with its own shape and layout."""
    def gemm(pass_: str, m: int, n: int, k: int, layout: str) -> Op:
        return matmul(name, pass_, m, n, k, layout=layout, count=count, dtype_bytes=dtype_bytes,
                      high_precision=high_precision)

    ops = [gemm("fwd", tokens, out_features, in_features, "nt")]
    if train:
        ops += [
            # dx = dy · W: the input gradient, same tokens, contracted over the output features
            gemm("dgrad", tokens, in_features, out_features, "nn"),
            # dW = dyᵀ · x: the weight gradient, contracted over the tokens
            gemm("wgrad", out_features, in_features, tokens, "tn"),
        ]
    return ops


def memory(name: str, pass_: str, num_bytes: int, *, rows: int, width: int, count: int, family: str) -> Op:
    return Op(name, pass_, MEMORY, count=count, flops=0, bytes=num_bytes, m=rows, n=width, family=family)


def elementwise(name: str, rows: int, width: int, *, reads: int, writes: int, bwd_reads: int, bwd_writes: int,
                train: bool, count: int, dtype_bytes: int, family: str, head_dim: int = 0) -> list[Op]:
    """A memory-bound op over rows × width activations (an fp8 step's in bf16): forward, and in training
    its backward."""
    size = rows * width * activation_bytes(dtype_bytes)
    ops = [memory(name, "fwd", (reads + writes) * size, rows=rows, width=width, count=count, family=family)]
    if train:
        ops.append(memory(name, "bwd", (bwd_reads + bwd_writes) * size, rows=rows, width=width, count=count,
                          family=family))
    # Rotary embeddings rotate within each head: k carries the head dim the kernel needs.
    return [dataclasses.replace(op, k=head_dim) for op in ops] if head_dim else ops


def attention_op(pass_: str, *, seqs: int, heads: int, kv_heads: int, q_len: int, kv_len: int, head_dim: int,
                 causal: bool, dtype_bytes: int, count: int = 1, v_dim: int = 0, window: int = 0,
                 name: str = "attn/flash", kv_bytes: int = 0) -> Op:
    """One fused attention kernel call over `seqs` sequences of `heads` query heads. Queries and keys
    have head_dim dims, values v_dim (latent attention: 192 and 128); with a window, each query sees
    only the last `window` keys (sliding-window layers), which bounds the work at long sequences.
    kv_bytes: bytes of a key or value element where they differ from the activations' (a decode's fp8 cache)."""
    v_dim = v_dim or head_dim
    dtype_bytes = activation_bytes(dtype_bytes)  # an fp8 step's attention runs in bf16 (dtypes.activation_dtype)
    kv_element = kv_bytes or dtype_bytes
    pairs = attended_pairs(q_len, kv_len, causal=causal, window=window)
    fwd_flops = 2 * seqs * heads * pairs * (head_dim + v_dim)  # QKᵀ and PV
    q_bytes = seqs * heads * q_len * head_dim * dtype_bytes
    o_bytes = seqs * heads * q_len * v_dim * dtype_bytes
    kv_bytes = seqs * kv_heads * kv_len * (head_dim + v_dim) * kv_element
    groups = heads // kv_heads if heads % kv_heads == 0 else 1
    if pass_ == "fwd":  # read q, k, v; write o
        flops, nbytes = fwd_flops, q_bytes + o_bytes + kv_bytes
    else:  # backward recomputes QKᵀ and runs four more products (dV, dP, dQ, dK): 2.5× the forward
        flops, nbytes = fwd_flops * 5 // 2, 2 * (q_bytes + o_bytes + kv_bytes)
    bounding = window if causal and 0 < window < q_len else 0  # a window at least the sequence long bounds nothing
    return Op(name, pass_, FLASH, count=count, flops=flops, bytes=nbytes, m=q_len, n=kv_len, k=head_dim,
              batch=seqs * heads, causal=causal, groups=groups, window=bounding,
              v_dim=v_dim if v_dim != head_dim else 0)


def attended_pairs(q_len: int, kv_len: int, *, causal: bool, window: int) -> int:
    """Query-key pairs a kernel computes. Causal kernels skip the masked half of the score matrix; a
    window keeps, for each query, only the last `window` keys up to itself."""
    if not causal:
        return q_len * min(kv_len, window or kv_len)
    if not window or window >= kv_len:  # queries end-aligned with the keys: the last sees them all
        return q_len * kv_len - q_len * (q_len - 1) // 2
    # queries 0..w-1 see 1..w keys; every later query sees w
    return window * (window + 1) // 2 + (q_len - window) * window


def attention(shape: ModelShape, w: Workload, *, train: bool, B: int) -> list[Op]:
    """The attention core (after the projections, before the output projection) of every layer:
    global layers, and sliding-window layers apart where the model has them."""
    t = w.tp
    heads = shape.num_heads // t
    q_len = 1 if w.mode == "decode" else w.seq
    ops = []
    # A window shorter than the sequence bounds what each query sees, and in decode the cache itself; one at least
    # the sequence long bounds nothing, and its layers run as the global ones: one row of them all, not two alike.
    windowed = shape.window if shape.window and shape.window < w.seq else 0
    local = shape.num_layers - shape.num_global_layers if windowed else 0
    for layers, window in ((shape.num_layers - local, 0), (local, windowed)):
        if layers == 0:
            continue
        kv_len = min(w.seq, window) if window and w.mode == "decode" else w.seq
        ops += _attention_core(shape, w, heads=heads, q_len=q_len, kv_len=kv_len,
                               window=window if w.mode != "decode" else 0, count=layers, train=train, B=B,
                               name="attn/window" if window else "attn/flash")
    return ops


def _attention_core(shape: ModelShape, w: Workload, *, heads: int, q_len: int, kv_len: int, window: int, count: int,
                    train: bool, B: int, name: str) -> list[Op]:
    seqs = w.batch
    causal = q_len == kv_len  # decoding attends to the whole cache
    if shape.is_mla and w.mode == "decode":
        return _latent_decode(shape, w, heads=heads, kv_len=kv_len, count=count, B=B)
    kv_heads = heads if shape.is_mla else math.ceil(shape.kv_heads / w.tp)  # MLA expands keys to every head
    d, v = shape.qk_head_dim, shape.v_dim
    if w.attention == "flash":
        make = lambda pass_: attention_op(pass_, seqs=seqs, heads=heads, kv_heads=kv_heads, q_len=q_len,  # noqa: E731
                                          kv_len=kv_len, head_dim=d, causal=causal, dtype_bytes=B, count=count,
                                          v_dim=v, window=window, name=name,
                                          # decoding reads K and V from the cache, in its dtype (--kv-cache-dtype)
                                          kv_bytes=w.kv_cache_bytes if w.mode == "decode" else 0)
        return [make("fwd"), make("bwd")] if train else [make("fwd")]
    # Unfused: kv heads are expanded to every query head, then two BMMs around a softmax (a window masks
    # scores but the BMMs still compute the whole matrix).
    bh = seqs * heads
    ops = [matmul("attn/score", "fwd", q_len, kv_len, d, batch=bh, layout="nt", count=count, dtype_bytes=B),
           *elementwise("attn/softmax", bh * q_len, kv_len, reads=1, writes=1, bwd_reads=2, bwd_writes=1, train=False,
                        count=count, dtype_bytes=B, family="softmax"),
           matmul("attn/over_v", "fwd", q_len, v, kv_len, batch=bh, layout="nn", count=count, dtype_bytes=B)]
    if train:
        ops += [
            matmul("attn/over_v", "dp", q_len, kv_len, v, batch=bh, layout="nt", count=count, dtype_bytes=B),  # dO·Vᵀ
            matmul("attn/over_v", "dv", kv_len, v, q_len, batch=bh, layout="tn", count=count, dtype_bytes=B),  # Pᵀ·dO
            memory("attn/softmax", "bwd", 3 * bh * q_len * kv_len * activation_bytes(B), rows=bh * q_len,
                   width=kv_len, count=count, family="softmax"),
            matmul("attn/score", "dq", q_len, d, kv_len, batch=bh, layout="nn", count=count, dtype_bytes=B),  # dS·K
            matmul("attn/score", "dk", kv_len, d, q_len, batch=bh, layout="tn", count=count, dtype_bytes=B),  # dSᵀ·Q
        ]
    return ops


def _latent_decode(shape: ModelShape, w: Workload, *, heads: int, kv_len: int, count: int, B: int) -> list[Op]:
    """Latent attention in decode, in its absorbed form, as DeepSeek's reference inference code runs
    it (github.com/deepseek-ai/DeepSeek-V3, inference/model.py, attn_impl "absorb"). The cache holds
    each token's latent and its rotary key, kv_lora_rank + rope_head_dim values shared by every head
    (DeepSeek-V2, arXiv:2405.04434, section 2.1: (d_c + d_h^R)·l values per token). Each query's
    non-rotary part is mapped into the latent by the key up-projection; then per sequence two BMMs
    around a softmax, the heads as query rows over one cache: scores against the whole cached row
    (latent and rotary key), and the weighted sum of the latents alone; the value up-projection maps
    the result back to each head's values. Each BMM reads the cache once: rank + rope values per token
    for the scores, rank for the sum, as the reference runs them. (A fused kernel such as FlashMLA
    reads it once for both; torch has none to measure, so it is not the op.)"""
    seqs, rank, nope, v = w.batch, shape.kv_lora_rank, shape.d_head, shape.v_dim
    row = rank + shape.rope_head_dim
    return [
        matmul("attn/absorb_q", "fwd", seqs, rank, nope, batch=heads, layout="nn", count=count, dtype_bytes=B),
        matmul("attn/score", "fwd", heads, kv_len, row, batch=seqs, layout="nt", count=count, dtype_bytes=B),
        *elementwise("attn/softmax", seqs * heads, kv_len, reads=1, writes=1, bwd_reads=2, bwd_writes=1, train=False,
                     count=count, dtype_bytes=B, family="softmax"),
        matmul("attn/over_v", "fwd", heads, rank, kv_len, batch=seqs, layout="nn", count=count, dtype_bytes=B),
        matmul("attn/absorb_v", "fwd", seqs, v, rank, batch=heads, layout="nn", count=count, dtype_bytes=B),
    ]


def mlp(shape: ModelShape, w: Workload, *, tokens: int, train: bool, B: int) -> list[Op]:
    """The dense MLP, or for MoE the router, the routed experts and any shared experts."""
    L, t, h = shape.num_layers, w.tp, shape.hidden
    act_reads = 2 if shape.gated else 1
    act_bwd = (3, 2) if shape.gated else (2, 1)

    def block(prefix: str, rows: int, width: int, count: int) -> list[Op]:
        ops = linear(f"{prefix}/up", rows, width, h, train=train, count=count, dtype_bytes=B)
        if shape.gated:
            ops += linear(f"{prefix}/gate", rows, width, h, train=train, count=count, dtype_bytes=B)
        ops += elementwise(f"{prefix}/act", rows, width, reads=act_reads, writes=1, bwd_reads=act_bwd[0],
                           bwd_writes=act_bwd[1], train=train, count=count, dtype_bytes=B,
                           family="glu" if shape.gated else "act")
        ops += linear(f"{prefix}/down", rows, h, width, train=train, count=count, dtype_bytes=B)
        return ops

    # Layers of two kinds, counted and priced apart: dense MLPs (every layer of a dense model, and the
    # dense layers of an MoE model such as DeepSeek's first three), and MoE layers.
    dense, moe = L - shape.num_moe_layers, shape.num_moe_layers
    ops = block("mlp", tokens, shape.ffn_width // t, dense) if dense else []
    if not moe:
        return ops
    # Routed experts: the experts some token is routed to run, each on its share of the routed rows (as
    # even as whole rows go: `more` of them take one row more). A decoding step's few tokens reach few of
    # them (one token: its top_k), a training step's every one.
    active = routed_experts(shape.num_experts, shape.top_k, tokens)
    rows, more = divmod(tokens * shape.top_k, active)
    width = shape.expert_width // t
    ops += linear("moe/router", tokens, shape.num_experts, h, train=train, count=moe, dtype_bytes=B, high_precision=True)
    # Dispatch and combine copy each routed token's hidden vector out and back.
    ops += elementwise("moe/permute", tokens * shape.top_k, h, reads=2, writes=2, bwd_reads=2, bwd_writes=2,
                       train=train, count=moe, dtype_bytes=B, family="copy")
    ops += block("moe/experts", rows, width, moe * (active - more))
    if more:  # every routed row once: ⌈rows⌉ for all of them counted 204 rows for DeepSeek-V3's 128 at b=16
        ops += block("moe/experts", rows + 1, width, moe * more)
    if shape.num_shared_experts:
        ops += block("moe/shared", tokens, width, moe * shape.num_shared_experts)
    if shape.shared_expert_gate:  # Qwen2-MoE scales the shared experts' output by a gate of its own, as the router runs
        ops += linear("moe/shared_gate", tokens, 1, h, train=train, count=moe, dtype_bytes=B, high_precision=True)
    return ops


def routed_experts(experts: int, top_k: int, tokens: int) -> int:
    """How many of `experts` the `tokens` of a step reach, each routed to `top_k` of them, by uniform routing's
    expectation: an expert no token picks, (1 - top_k / experts) ** tokens of them, runs no GEMM (one token
    reaches its top_k, a few hundred every expert). Every expert running, a row at least each, streamed all 8 of
    Mixtral's experts at one token, 4x the expert weights its step reads."""
    if top_k >= experts:
        return experts
    reached = experts * -math.expm1(tokens * math.log1p(-top_k / experts))
    return max(top_k, min(experts, round(reached)))


def projections(shape: ModelShape, w: Workload, *, tokens: int, train: bool, B: int) -> list[Op]:
    """Query, key and value projections of every layer: one fused QKV linear, or for latent attention
    the low-rank paths (queries through their latent, keys and values through theirs; the down
    projections are not split across tensor-parallel ranks, the up projections are, by head)."""
    L, t, h = shape.num_layers, w.tp, shape.hidden
    heads = shape.num_heads // t
    if not shape.is_mla:
        width = (heads + 2 * math.ceil(shape.kv_heads / t)) * shape.d_head
        return linear("attn/qkv", tokens, width, h, train=train, count=L, dtype_bytes=B)
    rank, q_rank = shape.kv_lora_rank, shape.q_lora_rank

    def latent_norm(name: str, width: int) -> list[Op]:
        return elementwise(name, tokens, width, reads=1, writes=1, bwd_reads=2, bwd_writes=1, train=train, count=L,
                           dtype_bytes=B, family="rmsnorm")

    if q_rank:
        ops = linear("attn/q_down", tokens, q_rank, h, train=train, count=L, dtype_bytes=B)
        ops += latent_norm("attn/q_norm", q_rank)
        ops += linear("attn/q_up", tokens, heads * shape.qk_head_dim, q_rank, train=train, count=L, dtype_bytes=B)
    else:
        ops = linear("attn/q", tokens, heads * shape.qk_head_dim, h, train=train, count=L, dtype_bytes=B)
    ops += linear("attn/kv_down", tokens, rank + shape.rope_head_dim, h, train=train, count=L, dtype_bytes=B)
    ops += latent_norm("attn/kv_norm", rank)
    if w.mode != "decode":  # decode works in the latent (see _latent_decode); the others expand it per head
        ops += linear("attn/kv_up", tokens, heads * (shape.d_head + shape.v_dim), rank, train=train, count=L,
                      dtype_bytes=B)
    return ops


def tensor_parallel_collectives(shape: ModelShape, w: Workload, *, tokens: int, train: bool) -> list[Op]:
    """Megatron tensor parallelism with sequence parallelism: each layer all-gathers the sequence
    before attention and before the MLP, and reduce-scatters after each; backward does the reverse.
    A parallel block (parallel_attn) gathers each norm's output and reduce-scatters once. The
    vocab-parallel embedding reduce-scatters its output; the output layer gathers its input: every token's
    in training, the last token of each sequence when serving, the only rows the head scores, whose logits
    serving gathers across the vocab to sample."""
    t = w.tp
    if t == 1:
        return []

    def collective(name: str, family: str, pass_: str, count: int, rows: int = tokens, width: int = shape.hidden,
                   size: int | None = None) -> Op:
        # The gathered activation, as nccl-tests counts size. Under fp8 Transformer Engine gathers the
        # column-parallel inputs in fp8 but reduces the row-parallel outputs in bf16 (activation_bytes).
        if size is None:
            size = w.dtype_bytes if family == "all_gather" else activation_bytes(w.dtype_bytes)
        return Op(name, pass_, COMM, count=count, flops=0, bytes=rows * width * size, m=rows, n=width, k=t,
                  family=family)

    # In each layer: before attention and before the MLP, and after each; the reverse in backward. In a
    # parallel block, x + attn(norm(x)) + mlp(norm(x)), the branches' partial sums add before one
    # reduce-scatter, as GPT-NeoX's gpt_j_residual and vLLM's Falcon and GPT-J reduce once; each norm's
    # output is gathered (GPT-NeoX with two norms: two gathers, its norms on this rank's own rows). Backward
    # is the reverse: a gather for each forward reduce-scatter and the other way round. NeMo's Falcon on
    # Megatron core reduces after each branch still: four a layer, as a sequential block.
    L = shape.num_layers
    gathers, scatters = (shape.norms_per_layer * L, L) if shape.parallel_attn else (2 * L, 2 * L)
    ops = [collective("tp/all_gather", "all_gather", "fwd", gathers),
           collective("tp/reduce_scatter", "reduce_scatter", "fwd", scatters)]
    if train:
        ops += [collective("tp/all_gather", "all_gather", "bwd", scatters),
                collective("tp/reduce_scatter", "reduce_scatter", "bwd", gathers)]
    # Outside the layers: the vocab-parallel embedding's output, and the output layer's input, the rows it scores
    # (a prefill scores each sequence's last token alone, as model_ops prices its logits).
    head_rows = tokens if train else w.batch
    ops += [collective("tp/embed", "reduce_scatter", "fwd", 1),
            collective("tp/logits", "all_gather", "fwd", 1, rows=head_rows)]
    if train:
        ops += [collective("tp/embed", "all_gather", "bwd", 1), collective("tp/logits", "reduce_scatter", "bwd", 1)]
        return ops + replica_grad_ops(shape, w)
    # Serving samples the next token from whole rows of logits: each rank holds its vocab/t columns of the
    # last token's, gathered in the head's output dtype before sampling (vLLM's logits gather, Megatron's
    # inference all-gather); training's loss reduces over the vocab in parallel and gathers none.
    return ops + [collective("tp/sample", "all_gather", "fwd", 1, rows=w.batch, width=math.ceil(shape.vocab / t) * t,
                             size=activation_bytes(w.dtype_bytes))]


def replica_grad_ops(shape: ModelShape, w: Workload) -> list[Op]:
    """Once a training step, the all-reduces of the gradients of what tensor-parallel ranks hold alike
    (parallel.replica_groups) in every layer, the norms outside the layers with the first; in the weights'
    dtype, bf16 under fp8."""
    from .parallel import outside_norms, replica_groups

    t, B = w.tp, activation_bytes(w.dtype_bytes)
    if t == 1:
        return []
    groups = [(name, int(count), int(ranks))
              for name, count, ranks in replica_groups(shape, t, shape.num_layers, outside_norms(shape))]
    return [Op(name, "bwd", COMM, count=1, flops=0, bytes=n * B, m=n, n=1, k=ranks, family="all_reduce")
            for name, n, ranks in groups if n]


def model_ops(shape: ModelShape, workload: Workload) -> list[Op]:
    """Every op of one step on one tensor-parallel rank, each forward op followed by its backward ops."""
    check_parallel(shape, workload)
    w, t, h, B = workload, workload.tp, shape.hidden, workload.dtype_bytes
    A = activation_bytes(B)  # the embeddings' rows: an fp8 step keeps its activations in bf16
    train = w.mode == "train"
    L = shape.num_layers
    tokens = w.tokens  # rows of every projection GEMM (sequence parallelism gathers them back)
    local = math.ceil(tokens / t)  # rows each rank keeps for norms and residuals under sequence parallelism
    q_width = shape.num_heads // t * shape.d_head
    kv_width = math.ceil(shape.kv_heads / t) * shape.d_head
    # Training and prefill score every position's logits only in training; serving needs the last one.
    logit_rows = tokens if train else w.batch
    vocab = math.ceil(shape.vocab / t)  # vocab-parallel output layer

    def norm(name: str, count: int) -> list[Op]:
        return elementwise(name, local, h, reads=1, writes=1, bwd_reads=2, bwd_writes=1, train=train,
                           count=count, dtype_bytes=B, family=shape.norm)

    # The embedding gathers token rows of the (vocab/t)×h table (k holds the table's rows).
    ops = [Op("embed", "fwd", MEMORY, count=1, flops=0, bytes=2 * tokens * h * A, m=tokens, n=h, k=vocab,
              family="embed")]
    if shape.embed_norm:  # BLOOM normalizes the embeddings before the first layer
        ops += norm("embed/norm", 1)
    post_norms = shape.norms_per_layer > 2  # Gemma-2/3 also normalize each sublayer's output
    ops += norm("attn/norm", L)
    ops += projections(shape, w, tokens=tokens, train=train, B=B)
    # Queries and keys normalized before attention, NoPE layers aside: each head (Qwen3) or each whole projection
    # (OLMo-2), the same elements either way; the width is the projections' (cost reads it as the rows' width)
    if shape.num_qk_norm_layers:
        ops += elementwise("attn/qk_norm", tokens, q_width + kv_width, reads=1, writes=1, bwd_reads=2, bwd_writes=1,
                           train=train, count=shape.num_qk_norm_layers, dtype_bytes=B, family=shape.norm)
    if shape.num_rope_layers:  # rotary embeddings: the rotated part of every query and key head, NoPE layers aside
        heads = shape.num_heads // t + (math.ceil(shape.kv_heads / t) if not shape.is_mla else 1)
        ops += elementwise("attn/rope", tokens, heads * shape.rotary_width, reads=1, writes=1, bwd_reads=1,
                           bwd_writes=1, train=train, count=shape.num_rope_layers, dtype_bytes=B, family="rope",
                           head_dim=shape.rotary_width)
    ops += attention(shape, w, train=train, B=B)
    ops += linear("attn/out", tokens, h, shape.num_heads // t * shape.v_dim, train=train, count=L, dtype_bytes=B)
    if post_norms:
        ops += norm("attn/post_norm", L)
    if shape.norms_per_layer != 1:  # one norm shared by attention and the MLP (Falcon, GPT-J, Phi, Cohere): attn's
        ops += norm("mlp/norm", L)
    ops += mlp(shape, w, tokens=tokens, train=train, B=B)
    if post_norms:
        ops += norm("mlp/post_norm", L)
    ops += tensor_parallel_collectives(shape, w, tokens=tokens, train=train)
    # Two residual adds per layer, also with parallel attention (x + attn(…) + mlp(…)), whose branches'
    # partial sums add on the gathered rows, before their one reduce-scatter.
    branch_rows = tokens if shape.parallel_attn else local
    adds = [("residual", local, 2 * L)] if branch_rows == local else [("residual", local, L),
                                                                       ("residual/branches", branch_rows, L)]
    for name, rows, count in adds:
        ops += elementwise(name, rows, h, reads=2, writes=1, bwd_reads=2, bwd_writes=1, train=train,
                           count=count, dtype_bytes=B, family="add")
    ops += norm("final/norm", 1)
    ops += linear("logits", logit_rows, vocab, h, train=train, count=1, dtype_bytes=B)
    if shape.logit_softcap:  # cap·tanh(logits / cap): one more pass over the logits
        ops += elementwise("logits/softcap", logit_rows, vocab, reads=1, writes=1, bwd_reads=2, bwd_writes=1,
                           train=train, count=1, dtype_bytes=B, family="act")
    if train:
        # Cross-entropy reads the logits once forward and writes their gradient once backward.
        ops += elementwise("loss", logit_rows, vocab, reads=1, writes=0, bwd_reads=1, bwd_writes=1, train=True,
                           count=1, dtype_bytes=B, family="loss")
        # The embedding gradient scatters into a dense (vocab/t)×h table, zeroed first.
        ops.append(Op("embed", "bwd", MEMORY, count=1, flops=0, bytes=(2 * tokens * h + vocab * h) * A, m=tokens,
                      n=h, k=vocab, family="embed"))
    return ops


# Ops that run once per step, not once per layer: what "one layer" leaves out.
# The replicas' gradient all-reduce runs once a step too (replica_grad_ops).
# The embedding's (a pipeline's first stage) and the head's (its last): one list each, that every step built from
# one layer (search, verify, plan) reads, so no once-a-step op is counted in each layer.
REPLICA_GRADS = ("tp/replica_grads", "tp/kv_grads")
EMBED_OPS = ("embed", "embed/norm", "tp/embed")
HEAD_OPS = ("final/norm", "logits", "logits/softcap", "loss", "tp/logits", "tp/sample")
OUTSIDE_LAYERS = EMBED_OPS + HEAD_OPS + REPLICA_GRADS


def layer_ops(shape: ModelShape, workload: Workload) -> list[Op]:
    """The ops of one transformer block (an MoE block, in an MoE model; a global-attention one where
    layers alternate): a one-layer step without embedding, final norm and head."""
    one = shape.one_layer()
    return [op for op in model_ops(one, workload) if op.name not in OUTSIDE_LAYERS]
