"""Real transformer blocks in plain PyTorch, built from a ModelShape, for timing one layer.

build_layer(shape) makes one decoder block (tensor-parallel degree 1, causal self-attention) whose
structure follows the shape's fields, not its name:

- norms: LayerNorm (weight and bias) or RMSNorm (weight only), eps 1e-5;
- attention: one fused QKV linear of output (heads + 2·kv_heads)·d_head, laid out [q heads | k heads |
  v heads]; RoPE on q and k over the first shape.rotary_width dims of each head (none with learned
  positions or ALiBi; the Llama / GPT-NeoX "rotate half" pairing of dim i with i + rot/2, base 10000); causal attention through
  scaled_dot_product_attention ("flash") or score matmul → mask → softmax → matmul ("unfused");
  grouped kv heads shared by consecutive query heads (query head j reads kv head j // (heads/kv_heads));
  an output projection; every linear has a bias when shape.bias (attention's or the MLP's alone as shape.bias_scope says),
  the QKV linear also when shape.qkv_bias, the output projection (and the MLP's down) also when shape.out_bias;
- MLP: gelu (tanh approximation, GPT-2's gelu_new) or relu on up; swiglu silu(gate)·up and geglu
  gelu_tanh(gate)·up with separate up and gate linears; then down;
- MoE: router linear (hidden → experts, no bias), top-k softmax routing (softmax over the k chosen
  logits, i.e. Mixtral's renormalised top-k), experts as separate MLPs looped over, plus shared experts
  that every token passes through with weight 1 (with shape.shared_expert_gate, their sum scaled by
  sigmoid of a hidden → 1 linear, as Qwen2-MoE's);
- order: parallel_attn gives y = x + attn(norm1(x)) + mlp(norm2(x)) (two norms, GPT-NeoX style; one
  shared norm, norm2 = norm1, with norms_per_layer 1 as in Cohere), otherwise pre-norm
  h = x + attn(norm1(x)); y = h + mlp(norm2(h)).

The module's parameter count is shape.layer_params exactly.

A sliding-window block (every layer of its one-layer shape slides: ModelShape.one_layer keeps the window
where no layer is global) lets each query see the last `window` keys up to itself: on CUDA through
FlexAttention, compiled, which skips the blocks outside the band as the windowed flash kernels ops.attention
prices do; elsewhere (the CPU, where FlexAttention has no backward) scaled_dot_product_attention with a
band mask, the same values; "unfused" masks the band.

What it does not build (check_buildable, called by build_layer): multi-head latent attention is
refused, its projections being other GEMMs; post-norms,
QK-norm and ALiBi's score bias change no matrix shape, so the block is built without them and one
warning line says so. Partial rotary embeddings rotate the shape's rotary width.

reference_layer recomputes the same block from the module's weights in float64, slowly and plainly, to
check the fast path. layer_inputs, run_fwd, run_fwd_bwd, fwd_call and fwd_bwd_call serve the timer.

torch is optional for shapewise: this module imports it only inside functions (the nn.Module classes
are defined on first use), so `import shapewise.layers` works without torch.
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

from .dtypes import torch_dtype
from .errors import ShapewiseError, warn
from .shapes import ModelShape

NORM_EPS = 1e-5
ROPE_THETA = 10000.0
ATTENTION = ("flash", "unfused")


def check_buildable(shape: ModelShape) -> None:
    """Refuse what this module would build as another model, and warn once, in one line, about what
    it leaves out that changes no matrix shape measured (only a few memory-bound kernels)."""
    if shape.is_mla:  # its q/kv low-rank projections and 192/128 heads are other GEMMs than a fused QKV
        raise ShapewiseError(f"{shape.name}: multi-head latent attention is not built as a torch layer; "
                             f"measure its ops with `shapewise bench ops` instead")
    if shape.norms_per_layer not in ((1, 2) if shape.parallel_attn else (2, 4)):
        raise ShapewiseError(f"{shape.name}: {shape.norms_per_layer} norms a layer"
                             + (" with parallel attention" if shape.parallel_attn else "")
                             + " is not built as a torch layer; use "
                             + ("1 or 2" if shape.parallel_attn else "2 (pre-norms) or 4 (pre- and post-norms)"))
    left_out = [what for what, present in (
        ("its post-norms", shape.norms_per_layer == 4),
        ("QK-norm", shape.qk_norm),
        ("ALiBi's bias on the attention scores", shape.rotary_fraction == 0 and not shape.learned_positions),
    ) if present]
    if left_out:
        _warn_once(f"{shape.name}: the torch layer is built without {', '.join(left_out)} (the same matrix "
                   f"shapes; fewer memory-bound kernels than the model runs)")


@functools.lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    warn(message)  # a whole model builds one layer per block: say it once


def _layer_dtype(dtype):
    """A layer's torch dtype: fp32, tf32, bf16 or fp16 (or a torch dtype). No fp8: its matmuls need scales."""
    if dtype == "fp8":
        raise ShapewiseError("no fp8 layers: use dtype fp32, bf16 or fp16")
    return torch_dtype(dtype)


@functools.lru_cache(maxsize=None)
def compiled_flex():
    """torch's FlexAttention, compiled: uncompiled it computes every score and masks it, the work a window saves.
    Each shape compiles its own kernel, and past dynamo's default cache of 8 a compiled function falls back to
    eager: a sweep's dozens of shapes stay compiled."""
    import torch
    import torch._dynamo
    from torch.nn.attention.flex_attention import flex_attention

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 512)
    torch._dynamo.config.accumulated_cache_size_limit = max(torch._dynamo.config.accumulated_cache_size_limit, 4096)
    return torch.compile(flex_attention, dynamic=False)


def window_block_mask(*, seq: int, window: int, device):
    """FlexAttention's block mask of causal attention in which each query sees the last `window` keys."""
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(lambda b, h, i, j: (i >= j) & (i - j < window), None, None, seq, seq, device=device)


@functools.lru_cache(maxsize=None)
def _classes() -> SimpleNamespace:
    """The nn.Module classes, defined on first use so that importing this module needs no torch."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    sdpa_has_gqa = "enable_gqa" in (F.scaled_dot_product_attention.__doc__ or "")

    class RMSNorm(nn.Module):
        def __init__(self, width: int, eps: float, **factory):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(width, **factory))

        def forward(self, x):
            if hasattr(F, "rms_norm"):  # torch >= 2.4
                return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def make_norm(shape: ModelShape, **factory) -> nn.Module:
        """The shape's norm over its hidden width, as every block (and a model's embedding and final norms) has it."""
        if shape.norm == "layernorm":
            return nn.LayerNorm(shape.hidden, eps=NORM_EPS, **factory)
        return RMSNorm(shape.hidden, NORM_EPS, **factory)

    class Attention(nn.Module):
        def __init__(self, shape: ModelShape, attention: str, **factory):
            super().__init__()
            self.heads, self.kv_heads, self.d_head = shape.num_heads, shape.kv_heads, shape.d_head
            width = (self.heads + 2 * self.kv_heads) * self.d_head
            self.qkv = nn.Linear(shape.hidden, width, bias=shape.attn_bias or shape.qkv_bias, **factory)
            self.out = nn.Linear(self.heads * self.d_head, shape.hidden, bias=shape.out_proj_bias, **factory)
            self.attention = attention
            self.rot = shape.rotary_width - shape.rotary_width % 2  # rotated dims of each head (an odd one passes)
            self.rope = self.rot > 0 and shape.one_layer().num_rope_layers > 0  # not a NoPE block (nope_every 1)
            # A block of a model whose every layer slides (global_every 0; verify.model_block builds a
            # windowed layer of one whose windows alternate with global layers so): each query sees the
            # last `window` keys up to itself.
            self.window = shape.window if shape.one_layer().num_global_layers == 0 else 0
            self.name = shape.name
            self.rope_theta = ROPE_THETA
            # None: SDPA's enable_gqa where the flash kernel takes it (CUDA, bf16/fp16, d <= 256; elsewhere
            # it would fall back to the math kernel), else repeat kv heads. True/False force a path.
            self.native_gqa: bool | None = None
            self._rope_cache: dict = {}  # the latest (seq, device, dtype)'s cos and sin tables
            self._mask_cache: dict = {}

        def rope_tables(self, seq: int, device, dtype):
            key = (seq, str(device), dtype)
            if key not in self._rope_cache:
                # Made outside inference_mode even when called in it, so that backward can save them later.
                with torch.inference_mode(False):
                    rot = self.rot
                    inv = 1.0 / self.rope_theta ** (torch.arange(0, rot, 2, device=device, dtype=torch.float32) / rot)
                    angles = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv)
                    angles = torch.cat([angles, angles], dim=-1)  # (seq, rot)
                    tables = angles.cos().to(dtype)[:, None, :], angles.sin().to(dtype)[:, None, :]
                self._rope_cache = {key: tables}
            return self._rope_cache[key]

        def future_mask(self, seq: int, device):
            """(seq, seq) bool, True where a query must not see a key: above the diagonal, and with a window
            shorter than seq, `window` or more positions before the query."""
            key = ("mask", seq, str(device))
            if key not in self._mask_cache:
                with torch.inference_mode(False):
                    hidden = torch.ones(seq, seq, dtype=torch.bool, device=device).triu_(1)
                    if self.window and seq > self.window:
                        hidden |= torch.ones(seq, seq, dtype=torch.bool, device=device).tril_(-self.window)
                    self._mask_cache = {key: hidden}
            return self._mask_cache[key]

        def windowed(self, q, k, v):
            """Flash attention over the last `window` keys of each query (q: b, heads, s, d)."""
            s, window = q.shape[2], self.window
            if q.device.type != "cuda":  # FlexAttention has no backward on the CPU: the band as a mask
                k, v = self.expand_kv(k), self.expand_kv(v)
                return F.scaled_dot_product_attention(q, k, v, attn_mask=~self.future_mask(s, q.device))
            key = ("band", s, str(q.device))
            if key not in self._mask_cache:
                with torch.inference_mode(False):
                    self._mask_cache = {key: window_block_mask(seq=s, window=window, device=q.device)}
            return compiled_flex()(q, k, v, block_mask=self._mask_cache[key], enable_gqa=self.kv_heads != self.heads)

        def apply_rope(self, x, cos, sin):
            """x: (batch, seq, heads, d). Rotates pairs (i, i + rot/2) by position · theta^(-2i/rot)."""
            rot = cos.shape[-1]
            xr = x[..., :rot] if rot < x.shape[-1] else x
            half = rot // 2
            rotated = torch.cat([-xr[..., half:], xr[..., :half]], dim=-1)
            y = xr * cos + rotated * sin
            return torch.cat([y, x[..., rot:]], dim=-1) if rot < x.shape[-1] else y

        def use_native_gqa(self, q) -> bool:
            if self.kv_heads == self.heads or not sdpa_has_gqa:
                return False
            if self.native_gqa is not None:
                return self.native_gqa
            return q.device.type == "cpu" or (
                q.device.type == "cuda" and q.dtype in (torch.bfloat16, torch.float16) and self.d_head <= 256)

        def expand_kv(self, t):
            return t if self.kv_heads == self.heads else t.repeat_interleave(self.heads // self.kv_heads, dim=1)

        def forward(self, x):
            b, s, _ = x.shape
            qkv = self.qkv(x).view(b, s, self.heads + 2 * self.kv_heads, self.d_head)
            q, k, v = qkv.split([self.heads, self.kv_heads, self.kv_heads], dim=2)
            if self.rope:
                cos, sin = self.rope_tables(s, x.device, x.dtype)
                q, k = self.apply_rope(q, cos, sin), self.apply_rope(k, cos, sin)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (b, heads, s, d)
            if self.attention == "flash" and self.window and s > self.window:
                o = self.windowed(q, k, v)
            elif self.attention == "flash":
                if self.use_native_gqa(q):
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                else:
                    o = F.scaled_dot_product_attention(q, self.expand_kv(k), self.expand_kv(v), is_causal=True)
            else:
                k, v = self.expand_kv(k), self.expand_kv(v)
                scores = torch.matmul(q * (1.0 / math.sqrt(self.d_head)), k.transpose(-2, -1))
                scores.masked_fill_(self.future_mask(s, x.device), float("-inf"))  # matmul saved q, k only
                o = torch.matmul(torch.softmax(scores, dim=-1), v)
            return self.out(o.transpose(1, 2).reshape(b, s, self.heads * self.d_head))

    class MLP(nn.Module):
        def __init__(self, shape: ModelShape, width: int, **factory):
            super().__init__()
            self.kind = shape.mlp
            self.up = nn.Linear(shape.hidden, width, bias=shape.mlp_bias, **factory)
            self.gate = nn.Linear(shape.hidden, width, bias=shape.mlp_bias, **factory) if shape.gated else None
            self.down = nn.Linear(width, shape.hidden, bias=shape.down_bias, **factory)

        def forward(self, x):
            up = self.up(x)
            if self.kind == "gelu":
                a = F.gelu(up, approximate="tanh")
            elif self.kind == "relu":
                a = F.relu(up)
            elif self.kind == "swiglu":
                a = F.silu(self.gate(x)) * up
            else:  # geglu
                a = F.gelu(self.gate(x), approximate="tanh") * up
            return self.down(a)

    class MoE(nn.Module):
        def __init__(self, shape: ModelShape, **factory):
            super().__init__()
            self.top_k = shape.top_k
            self.router = nn.Linear(shape.hidden, shape.num_experts, bias=False, **factory)
            self.experts = nn.ModuleList(MLP(shape, shape.expert_width, **factory) for _ in range(shape.num_experts))
            self.shared = nn.ModuleList(MLP(shape, shape.expert_width, **factory)
                                        for _ in range(shape.num_shared_experts))
            self.shared_gate = nn.Linear(shape.hidden, 1, bias=False, **factory) if shape.shared_expert_gate else None

        def forward(self, x):
            shape = x.shape
            xt = x.reshape(-1, shape[-1])
            top, chosen = self.router(xt).topk(self.top_k, dim=-1)  # (tokens, k)
            weights = torch.softmax(top.float(), dim=-1).to(x.dtype)
            out = torch.zeros_like(xt)
            for e, expert in enumerate(self.experts):
                # Every expert runs, on no rows if none chose it, so each always has a gradient.
                token, slot = (chosen == e).nonzero(as_tuple=True)
                out = out.index_add(0, token, expert(xt[token]) * weights[token, slot, None])
            if self.shared:
                shared = sum(expert(xt) for expert in self.shared)
                out = out + (shared * torch.sigmoid(self.shared_gate(xt)) if self.shared_gate is not None else shared)
            return out.view(shape)

    class Block(nn.Module):
        def __init__(self, shape: ModelShape, attention: str, **factory):
            super().__init__()
            self.shape = shape
            self.parallel = shape.parallel_attn
            self.norm1 = make_norm(shape, **factory)
            self.attn = Attention(shape, attention, **factory)
            # Parallel layers with one norm (Cohere) feed attention and the MLP the same normalized input.
            self.norm2 = self.norm1 if shape.norms_per_layer == 1 else make_norm(shape, **factory)
            self.mlp = MoE(shape, **factory) if shape.is_moe else MLP(shape, shape.ffn_width, **factory)

        def forward(self, x):
            if self.parallel:
                return x + self.attn(self.norm1(x)) + self.mlp(self.norm2(x))
            h = x + self.attn(self.norm1(x))
            return h + self.mlp(self.norm2(h))

        def extra_repr(self) -> str:
            return f"shape={self.shape.name!r}, parallel={self.parallel}"

    return SimpleNamespace(Block=Block, Attention=Attention, MLP=MLP, MoE=MoE, RMSNorm=RMSNorm, make_norm=make_norm)


def _init_(layer, seed: int) -> None:
    """Deterministic weights: linear weights N(0, 1/fan_in), so activations stay near unit scale; linear
    biases N(0, 0.02²); norm weights 1 + N(0, 0.1²) and norm biases N(0, 0.1²), so that a mistake in
    any of them shows. Drawn in float32 on the layer's device, then cast: one seed gives the same
    weights (up to rounding) in every dtype on one device."""
    import torch

    params = list(layer.named_parameters())
    device = params[0][1].device
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    with torch.no_grad():
        for name, p in params:
            w = torch.empty(p.shape, device=device, dtype=torch.float32)
            if "norm" in name:
                w.normal_(0.0, 0.1, generator=gen)
                if name.endswith("weight"):
                    w += 1.0
            elif p.dim() == 2:
                w.normal_(0.0, 1.0 / math.sqrt(p.shape[1]), generator=gen)
            else:
                w.normal_(0.0, 0.02, generator=gen)
            p.copy_(w)


def make_norm(shape: ModelShape, **factory):
    """The shape's norm over its hidden width (an nn.Module), as every block has it: a model's embedding and final
    norms are built with it too (verify's whole model, the pipeline's chunks)."""
    return _classes().make_norm(shape, **factory)


def build_layer(shape: ModelShape, *, device="cpu", dtype="bf16", attention: str = "flash", seed: int = 0):
    """One decoder block of `shape` (tensor-parallel degree 1) as a torch.nn.Module, its weights drawn
    from `seed` (none drawn on the meta device, which allocates nothing: use it to count parameters).
    attention: "flash" (scaled_dot_product_attention) or "unfused" (matmul, mask, softmax, matmul)."""
    import torch

    if not isinstance(shape, ModelShape):
        raise ShapewiseError(f"build_layer needs a ModelShape, got {type(shape).__name__}")
    check_buildable(shape)
    if attention not in ATTENTION:
        raise ShapewiseError(f"unknown attention {attention!r}; use one of {', '.join(ATTENTION)}")
    device = torch.device(device)
    layer = _classes().Block(shape, attention, device="meta", dtype=_layer_dtype(dtype))
    if device.type != "meta":
        layer = layer.to_empty(device=device)
        _init_(layer, seed)
    return layer


def layer_inputs(shape: ModelShape, *, batch: int, seq: int, device="cpu", dtype="bf16", seed: int = 0,
                 requires_grad: bool = False):
    """A random normal (batch, seq, hidden) input, drawn in float32 from `seed` and cast."""
    import torch

    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(seed)
    x = torch.randn(batch, seq, shape.hidden, device=device, dtype=torch.float32, generator=gen)
    return x.to(_layer_dtype(dtype)).requires_grad_(requires_grad)


# ---- timing helpers ----

def _clear_grads(layer, x) -> None:
    for p in layer.parameters():
        p.grad = None
    if x.requires_grad:
        x.grad = None


def run_fwd(layer, x):
    """The forward alone, without autograd (as in inference); returns the output."""
    import torch

    with torch.no_grad():
        return layer(x)


def run_fwd_bwd(layer, x, dy) -> None:
    """Forward, then backward with the fixed output gradient dy; grads are set to None first, so
    repeated calls do not accumulate (nor grow memory)."""
    import torch

    _clear_grads(layer, x)
    torch.autograd.backward(layer(x), dy)


def fwd_call(layer, x):
    """A no-argument callable running the forward, for shapewise.measure.time_fn."""
    return functools.partial(run_fwd, layer, x)


def fwd_bwd_call(layer, x, dy=None, *, seed: int = 1):
    """A no-argument callable running forward + backward. dy defaults to a random normal output gradient
    from `seed` (x's shape, dtype and device)."""
    import torch

    if dy is None:
        gen = torch.Generator(device=x.device)
        gen.manual_seed(seed)
        dy = torch.randn(x.shape, device=x.device, dtype=torch.float32, generator=gen).to(x.dtype)
    return functools.partial(run_fwd_bwd, layer, x, dy)


# ---- the slow, plain reference ----

def reference_layer(layer, x):
    """The block `layer` recomputed from its weights in float64 on the CPU, step by step: explicit norms,
    per-head attention with an explicit causal mask and the RoPE formula written out, per-token expert
    routing. Returns a float64 (batch, seq, hidden) tensor (differentiable in x, not in the weights)."""
    import torch

    shape: ModelShape = layer.shape
    W = {name: p.detach().to("cpu", torch.float64) for name, p in layer.named_parameters()}
    x = x.to("cpu", torch.float64)  # not detached: autograd through the reference gives a reference dx
    b, s, h = x.shape

    def linear(prefix, v):
        y = v @ W[prefix + ".weight"].T
        return y + W[prefix + ".bias"] if prefix + ".bias" in W else y

    def norm(prefix, v):
        if shape.norm == "layernorm":
            mean = v.mean(-1, keepdim=True)
            var = ((v - mean) ** 2).mean(-1, keepdim=True)
            return (v - mean) / torch.sqrt(var + NORM_EPS) * W[prefix + ".weight"] + W[prefix + ".bias"]
        return v / torch.sqrt((v * v).mean(-1, keepdim=True) + NORM_EPS) * W[prefix + ".weight"]

    def gelu_tanh(v):
        return 0.5 * v * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))

    def silu(v):
        return v / (1.0 + torch.exp(-v))

    def mlp(prefix, v):
        up = linear(prefix + ".up", v)
        if shape.mlp == "gelu":
            a = gelu_tanh(up)
        elif shape.mlp == "relu":
            a = torch.clamp(up, min=0.0)
        elif shape.mlp == "swiglu":
            a = silu(linear(prefix + ".gate", v)) * up
        else:
            a = gelu_tanh(linear(prefix + ".gate", v)) * up
        return linear(prefix + ".down", a)

    def rope(vec, pos):
        """One head's vector at position pos: rotate (vec[i], vec[i + rot/2]) by pos / theta^(2i/rot)."""
        rot = layer.attn.rot
        out = vec.clone()
        for i in range(rot // 2):
            angle = pos / layer.attn.rope_theta ** (2 * i / rot)
            c, sn = math.cos(angle), math.sin(angle)
            a, bb = vec[i], vec[i + rot // 2]
            out[i] = a * c - bb * sn
            out[i + rot // 2] = bb * c + a * sn
        return out

    def attention(v):
        H, K, d = shape.num_heads, shape.kv_heads, shape.d_head
        qkv = linear("attn.qkv", v)
        q = qkv[..., :H * d].reshape(b, s, H, d)
        k = qkv[..., H * d:(H + K) * d].reshape(b, s, K, d)
        val = qkv[..., (H + K) * d:].reshape(b, s, K, d)
        if layer.attn.rope:
            q = torch.stack([torch.stack([torch.stack([rope(q[i, t, j], t) for j in range(H)])
                                          for t in range(s)]) for i in range(b)])
            k = torch.stack([torch.stack([torch.stack([rope(k[i, t, j], t) for j in range(K)])
                                          for t in range(s)]) for i in range(b)])
        causal = torch.tril(torch.ones(s, s, dtype=torch.bool))
        if layer.attn.window:  # each query sees the last `window` keys up to itself
            causal &= torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1 - layer.attn.window)
        o = torch.zeros(b, s, H, d, dtype=torch.float64)
        for i in range(b):
            for j in range(H):
                g = j // (H // K)  # the kv head this query head reads
                scores = torch.einsum("td,ud->tu", q[i, :, j], k[i, :, g]) / math.sqrt(d)
                scores = torch.where(causal, scores, torch.tensor(float("-inf"), dtype=torch.float64))
                p = torch.exp(scores - scores.max(-1, keepdim=True).values)
                p = p / p.sum(-1, keepdim=True)
                o[i, :, j] = torch.einsum("tu,ud->td", p, val[i, :, g])
        return linear("attn.out", o.reshape(b, s, H * d))

    def ffn(v):
        if not shape.is_moe:
            return mlp("mlp", v)
        out = torch.zeros_like(v)
        for i in range(b):
            for t in range(s):
                tok = v[i, t]
                logits = W["mlp.router.weight"] @ tok
                order = sorted(range(shape.num_experts), key=lambda e: -float(logits[e].detach()))[:shape.top_k]
                chosen = torch.stack([logits[e] for e in order])
                gates = torch.exp(chosen - chosen.max())
                gates = gates / gates.sum()
                for gate, e in zip(gates, order):
                    out[i, t] += gate * mlp(f"mlp.experts.{e}", tok)
                shared = sum(mlp(f"mlp.shared.{e}", tok) for e in range(shape.num_shared_experts))
                if shape.shared_expert_gate:
                    shared = shared / (1.0 + torch.exp(-(W["mlp.shared_gate.weight"] @ tok)))
                out[i, t] += shared
        return out

    if shape.parallel_attn:
        return x + attention(norm("norm1", x)) + ffn(norm("norm2" if "norm2.weight" in W else "norm1", x))
    hid = x + attention(norm("norm1", x))
    return hid + ffn(norm("norm2", hid))


# ---- tensor parallelism ----

def _local_shape(shape: ModelShape, tp: int) -> ModelShape:
    """The part of a block one of `tp` ranks holds: its heads, kv heads and MLP columns. Past t = kv heads
    each rank keeps one whole kv head, the one its query heads read (vLLM's QKVParallelLinear replicates them)."""
    if shape.is_moe:
        raise ShapewiseError("tensor-parallel layers are built for dense MLPs only")
    heads, kv, width = shape.num_heads, shape.kv_heads, shape.ffn_width
    if heads % tp or width % tp or (kv % tp and tp % kv):
        raise ShapewiseError(f"t={tp} must divide the heads ({heads}) and FFN width ({width}) of {shape.name}, "
                             f"and divide its kv heads ({kv}) or be a multiple of them")
    return shape.replace(num_heads=heads // tp, num_kv_heads=max(kv // tp, 1), head_dim=shape.d_head,
                         ffn=width // tp, num_layers=1)


def build_tp_layer(shape: ModelShape, *, tp: int, rank: int, device="cpu", dtype="bf16", attention: str = "flash",
                   seed: int = 0):
    """Rank `rank`'s part of one block under Megatron tensor parallelism with sequence parallelism.

    The module takes this rank's slice of the sequence, (batch, seq/tp, hidden), and returns its slice
    of the output. Before attention and before the MLP it all-gathers the sequence; the QKV, up and
    gate projections are split by columns (this rank's heads and FFN columns), the output and down
    projections by rows, and their partial sums are reduce-scattered back over the sequence, where
    their biases are added. A parallel block gathers each norm's output and reduce-scatters the
    two branches' summed partial sums once. Past t = kv heads a rank holds the one kv head its query heads
    read, a copy of it on each of the t/kv ranks beside it. Weights are rank `rank`'s slices of
    build_layer(shape, seed=seed), so the gathered output equals that layer's (tested on the CPU with gloo).
    Backward leaves the gradients of what ranks hold alike as partial sums; sync_replica_grads sums them.
    Runs inside an initialized torch.distributed process group of `tp` ranks."""
    import torch
    import torch.distributed.nn.functional as dist_fn
    from torch import nn

    local = _local_shape(shape, tp)
    full = build_layer(shape, device="cpu", dtype="fp32", attention=attention, seed=seed)
    part = build_layer(local, device="cpu", dtype="fp32", attention=attention, seed=seed)
    d, heads, kv = shape.d_head, local.num_heads, local.kv_heads
    first_kv = rank * shape.kv_heads // tp  # the kv head of this rank's first query head
    q0, k0, v0 = rank * heads * d, (shape.num_heads + first_kv) * d, (shape.num_heads + shape.kv_heads + first_kv) * d
    rows = torch.cat([torch.arange(q0, q0 + heads * d), torch.arange(k0, k0 + kv * d), torch.arange(v0, v0 + kv * d)])
    width = local.ffn_width
    cols = slice(rank * width, (rank + 1) * width)
    full_params = dict(full.named_parameters())
    whole = []  # names of the parameters every rank holds whole
    with torch.no_grad():
        for name, p in part.named_parameters():
            source = full_params[name]
            if name.startswith("attn.qkv"):
                p.copy_(source[rows])
            elif name == "attn.out.weight":
                p.copy_(source[:, rank * heads * d:(rank + 1) * heads * d])
            elif name.startswith(("mlp.up", "mlp.gate")):
                p.copy_(source[cols])
            elif name == "mlp.down.weight":
                p.copy_(source[:, cols])
            elif name in ("attn.out.bias", "mlp.down.bias"):
                p.zero_().requires_grad_(False)  # the block's own, whole, is added once after the reduce-scatter
            else:
                p.copy_(source)  # norms: replicated
                whole.append(name)
    out_bias = full_params["attn.out.bias"].detach().clone() if shape.out_proj_bias else None
    down_bias = full_params["mlp.down.bias"].detach().clone() if shape.down_bias else None

    def gather(x):  # (b, s/t, h) on each rank -> (b, s, h)
        return torch.cat(dist_fn.all_gather(x.contiguous()), dim=1)

    def scatter(x):  # partial sums (b, s, h) -> this rank's summed slice (b, s/t, h)
        chunks = [c.contiguous() for c in x.chunk(tp, dim=1)]
        return dist_fn.reduce_scatter(torch.empty_like(chunks[0]), chunks)

    class TensorParallelBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.part = part
            self.shape, self.tp, self.rank = shape, tp, rank
            self.whole, self.kv_replicas, self.kv_groups = whole, max(tp // shape.kv_heads, 1), None
            # Row-parallel outputs' biases, whole on every rank and trained there (their gradients partial
            # sums over the rank's rows, which sync_replica_grads sums)
            self.out_bias = nn.Parameter(out_bias) if out_bias is not None else None
            self.down_bias = nn.Parameter(down_bias) if down_bias is not None else None

        def _attn(self, x):
            a = scatter(self.part.attn(gather(self.part.norm1(x))))
            return a + self.out_bias if self.out_bias is not None else a

        def _mlp(self, x):
            m = scatter(self.part.mlp(gather(self.part.norm2(x))))
            return m + self.down_bias if self.down_bias is not None else m

        def _parallel(self, x):
            # Each norm's output is gathered, one shared norm's once (GPT-NeoX; ops.model_ops prices it so).
            a = gather(self.part.norm1(x))
            m = a if shape.norms_per_layer == 1 else gather(self.part.norm2(x))
            y = scatter(self.part.attn(a) + self.part.mlp(m))
            y = y + self.out_bias if self.out_bias is not None else y
            return y + self.down_bias if self.down_bias is not None else y

        def forward(self, x):
            if shape.parallel_attn:
                return x + self._parallel(x)
            h = x + self._attn(x)
            return h + self._mlp(h)

    return TensorParallelBlock().to(device=device, dtype=_layer_dtype(dtype))


def sync_replica_grads(layer) -> None:
    """Sum the gradients of what the ranks of a build_tp_layer block hold alike, as a training step does
    once, after its last backward (Megatron-LM's finalize_model_grads; ops.replica_grad_ops prices it as
    tp/replica_grads and tp/kv_grads): the norms' and the row-parallel outputs' biases' over the t ranks, each
    of which ran its own slice of the sequence, and a replicated kv head's key and value rows over the t/kv
    ranks that hold it. One all-reduce each. Every rank calls it; the first call makes the kv heads' process groups."""
    import torch
    import torch.distributed as dist

    def all_reduce(grads, group=None):
        flat = torch.cat([g.flatten() for g in grads])
        dist.all_reduce(flat, group=group)
        for g, summed in zip(grads, flat.split([g.numel() for g in grads])):
            g.copy_(summed.view_as(g))

    params = dict(layer.part.named_parameters())
    biases = [b.grad for b in (layer.out_bias, layer.down_bias) if b is not None]
    all_reduce([params[name].grad for name in layer.whole] + biases)
    if layer.kv_replicas == 1:
        return
    if layer.kv_groups is None:  # new_group is collective: every rank makes every group, in one order
        r = layer.kv_replicas
        layer.kv_groups = [dist.new_group(list(range(g * r, (g + 1) * r))) for g in range(layer.tp // r)]
    qkv = layer.part.attn.qkv
    q_rows = layer.part.attn.heads * layer.part.attn.d_head  # the rows after them are this rank's k and v
    kv = [qkv.weight.grad[q_rows:]] + ([qkv.bias.grad[q_rows:]] if qkv.bias is not None else [])
    all_reduce(kv, layer.kv_groups[layer.rank // layer.kv_replicas])
