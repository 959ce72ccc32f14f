"""What is being run: a model's shape (ModelShape) and how it is run (Workload). Named presets of
published models live in presets.py; Hugging Face config.json reading and writing in hf.py."""

from __future__ import annotations

import contextvars
import dataclasses
import difflib
import functools
import numbers
import os
from dataclasses import dataclass

from .dtypes import DTYPE_BYTES, activation_dtype
from .errors import ShapewiseError, check_name, listed, warn
from .limits import FIELDS, SEQ, check_tokens

# Matrices per MLP block: plain MLPs have up and down, gated ones (GLU family) add a gate.
MLP_KINDS = {"gelu": 2, "relu": 2, "swiglu": 3, "geglu": 3}
NORM_KINDS = {"layernorm": 2, "rmsnorm": 1}  # parameters per channel: LayerNorm has a bias
# What a QK-norm's weights span: one head's dims, shared by every query head and by every key head (Qwen3's
# RMSNorm(head_dim)); one head's weight and bias, shared alike (Persimmon's and Phi's LayerNorm(head_dim));
# each head its own weight, no bias (StableLM 2's StableLmLayerNormPerHead, a LayerNorm(head_dim, bias=False) a
# head; Cohere's CohereLayerNorm((heads, head_dim))); the whole query and key projections (OLMo-2's
# RMSNorm(heads × head_dim) and RMSNorm(kv heads × head_dim)); or nothing (Llama 4's L2 norm has no weight). The
# elements normalized are the same in each.
QK_NORM_WEIGHTS = ("head", "head_bias", "per_head", "projection", "none")
# Which linears `bias` puts biases on: every one; attention's alone (q, k, v and out: PhiMoE's experts are
# bias-free); or the MLP's alone (GPT-J's q, k, v and out_proj are bias-free, its fc_in and fc_out not). Apart from
# them, out_bias puts biases on the output projections, attention's and the MLP's (GPT-Neo's out_proj beside its
# biased MLP; TeleChat's dense and down_proj, its other linears bias-free).
BIAS_SCOPES = ("all", "attention", "mlp")
MODES = ("train", "prefill", "decode")
ATTENTION_KINDS = ("flash", "unfused")
# What a serving step's KV cache holds, as vLLM's and SGLang's --kv-cache-dtype name it: "auto", their default, is
# the model's own dtype (the activations': an fp8 checkpoint's cache is bf16); fp8 halves it only when asked.
KV_CACHE_DTYPES = ("auto", "bf16", "fp16", "fp8", "fp32")
# The annotations of whole-number fields (flags are annotated "bool"): the one list of a dataclass's
# whole-number fields is its annotations, text here (the __future__ import above), matched as written.
WHOLE_TYPES = ("int", "int | None")


@functools.cache
def _typed_fields(cls) -> tuple[tuple[tuple[str, object], ...], tuple[str, ...], tuple[str, ...]]:
    """cls's whole-number fields (name, default), flag fields and text fields, read once per class from the
    annotations."""
    fields = dataclasses.fields(cls)
    known = {*WHOLE_TYPES, "bool", "float", "str"}
    odd = [f.name for f in fields if f.type not in known]
    assert not odd, f"{cls.__name__}: annotate {odd} as one of {sorted(known)} (text matched as written)"
    return (tuple((f.name, f.default) for f in fields if f.type in WHOLE_TYPES),
            tuple(f.name for f in fields if f.type == "bool"), tuple(f.name for f in fields if f.type == "str"))


def _as_python(obj, owner: str) -> None:
    """numpy's integers, booleans and strings (np.int64(4), np.bool_, np.str_) in obj's whole-number, flag and
    text fields held as Python's, and a flag that is not a boolean ("no", "False", None) refused: each would be read as
    something it is not. Anything else in a whole-number field is left for _require_positive_int."""
    wholes, flags, texts = _typed_fields(type(obj))
    for name in texts:  # numpy's str_ ("fp16" from an array) held as Python's str, as the store and JSON expect
        value = getattr(obj, name)
        if type(value) is not str and isinstance(value, str):
            object.__setattr__(obj, name, str(value))
    for name, _ in wholes:
        value = getattr(obj, name)
        if type(value) is not int and isinstance(value, numbers.Integral) and not isinstance(value, bool) \
                and not _numpy_bool(value):
            object.__setattr__(obj, name, int(value))
    for name in flags:
        value = getattr(obj, name)
        if type(value) is bool:
            continue
        if _numpy_bool(value):
            object.__setattr__(obj, name, bool(value))
        else:
            raise ShapewiseError(f"{owner}: {name} must be True or False, got {value!r}")


def _numpy_bool(value) -> bool:
    return type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")


def _require_positive_int(owner: str, field: str, value, *, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ShapewiseError(f"{owner}: {field} must be a whole number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        low = "zero or more" if allow_zero else "positive"
        raise ShapewiseError(f"{owner}: {field} must be {low}, got {value}")
    if field in FIELDS and value > FIELDS[field].high:  # bounded: limits.py says why
        FIELDS[field].check(value, f"{owner}: {field}")


# Set while ModelShape.replace makes a shape from another: the notes said of a shape as it is made (a
# pattern longer than the model) are said of the one the user made, not again of each one derived from it
# (a search's hundreds of candidates, a one-layer block).
_DERIVING = contextvars.ContextVar("deriving", default=False)


@dataclass(frozen=True)
class ModelShape:
    """The shape of a decoder-only transformer. Fields left None are derived (see the properties)."""

    name: str
    hidden: int
    num_layers: int
    num_heads: int
    vocab: int
    num_kv_heads: int | None = None  # None: multi-head attention (as many kv heads as heads)
    head_dim: int | None = None  # None: hidden // num_heads
    ffn: int | None = None  # MLP width; None: 4 * hidden
    mlp: str = "gelu"
    tied_embeddings: bool = True
    norm: str = "layernorm"
    parallel_attn: bool = False  # attention and MLP read the same input (GPT-J, NeoX, Falcon)
    bias: bool = True  # linear layers carry biases
    bias_scope: str = "all"  # which of them do (BIAS_SCOPES): the attention and MLP ones, or one side alone
    learned_positions: int = 0  # rows of a learned position table; 0 for RoPE or ALiBi
    num_experts: int = 0  # 0: dense MLP
    top_k: int = 0
    expert_ffn: int | None = None  # None: ffn
    num_shared_experts: int = 0
    shared_expert_gate: bool = False  # the shared experts' output scaled by sigmoid(x · w), w hidden wide (Qwen2-MoE)
    # Beyond the plain pre-norm block (each default is the plain block):
    norms_per_layer: int = 2  # Gemma-2/3 wrap attention and MLP in pre- and post-norms: 4; one shared by parallel ones: 1
    qk_norm: bool = False  # queries and keys normalized before attention (Qwen3, OLMo-2, Gemma-3)
    qk_norm_weights: str = "head"  # what its weights span (QK_NORM_WEIGHTS)
    # with NoPE layers, whether they normalize queries and keys too (EXAONE 4) or the rotary layers alone do
    # (Llama 4's code: use_qk_norm and use_rope)
    qk_norm_nope: bool = True
    qkv_bias: bool = False  # biases on the query, key and value projections alone (Qwen2, GLM-4.5, StableLM 2)
    out_bias: bool = False  # biases on the output projections, attention's and the MLP's (GPT-Neo, TeleChat)
    embed_norm: bool = False  # a norm over the embeddings before the first layer (BLOOM's word_embeddings_layernorm)
    rotary_fraction: float = 1.0  # share of each head's dims rotated; 0: no rotary (ALiBi); NeoX 0.25
    logit_softcap: bool = False  # the output logits squashed by tanh (Gemma-2)
    lm_head_bias: bool = False  # the output head adds a bias, vocab wide (Phi-1/1.5/2, GPT-J, Phi-3.5-MoE)
    window: int = 0  # sliding-window attention span in tokens; 0: every layer attends to all tokens
    global_every: int = 0  # with a window, every n-th layer attends globally (Gemma-2: 2, Gemma-3: 6)
    nope_every: int = 0  # every n-th layer has no rotary embedding (NoPE: SmolLM3 and Llama 4, 4); 0 none
    num_dense_layers: int = 0  # MoE models: layers whose MLP is dense (DeepSeek's first_k_dense_replace)
    # Multi-head latent attention (DeepSeek-V2/V3): keys and values, and optionally queries, pass through
    # low-rank latents; each query/key head is head_dim non-rotary dims plus rope_head_dim rotary ones.
    kv_lora_rank: int = 0  # width of the key/value latent; 0: ordinary attention
    q_lora_rank: int = 0  # width of the query latent; 0: queries projected straight from the input
    rope_head_dim: int = 0
    v_head_dim: int | None = None  # value head width; None: head_dim
    source: str = ""  # where the numbers come from
    published_params: int | None = None  # the parameter count its authors give, for checking
    # Tokens a rotary model's positions were trained for (max_position_embeddings); 0: not given. Not
    # structure: it changes no op, and a shape read from a config equals its preset without it. compare=False
    # says so once: a field not compared is neither in STRUCTURAL_FIELDS nor in a store's key (shape_record).
    context: int = dataclasses.field(default=0, compare=False)

    def __repr__(self) -> str:
        """The fields at other values than their defaults (of some forty): still code that builds it again."""
        shown = (f for f in dataclasses.fields(self) if f.default is dataclasses.MISSING or getattr(self, f.name) != f.default)
        return f"ModelShape({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"

    def __post_init__(self):
        owner = f"model {self.name!r}"
        if not isinstance(self.name, str):
            raise ShapewiseError(f"a model's name must be text, got {self.name!r}")
        if isinstance(self.source, os.PathLike):  # the config.json it was read from, as a path: its text
            object.__setattr__(self, "source", os.fspath(self.source))
        if not isinstance(self.source, str):  # the report names it, and reads a config.json path from it
            raise ShapewiseError(f"model {self.name!r}: source must be text (where its numbers come from: a URL, "
                                 f"or the config.json it was read from), got {self.source!r:.100}")
        _as_python(self, owner)
        # A whole number that defaults to 0 may be 0 (none: no experts, no window), one that defaults to
        # None may be None (derived: see the properties); every other one is positive.
        for name, default in _typed_fields(ModelShape)[0]:
            value = getattr(self, name)
            if not (value is None and default is None):
                _require_positive_int(owner, name, value, allow_zero=default == 0)
        if isinstance(self.rotary_fraction, numbers.Real) and not isinstance(self.rotary_fraction, bool):
            object.__setattr__(self, "rotary_fraction", float(self.rotary_fraction))  # np.float32(0.5) as 0.5
        if not isinstance(self.rotary_fraction, float) or not 0 <= self.rotary_fraction <= 1:
            raise ShapewiseError(f"{owner}: rotary_fraction must be between 0 and 1, got {self.rotary_fraction!r}")
        if self.num_dense_layers and not (self.num_experts and self.num_dense_layers < self.num_layers):
            raise ShapewiseError(f"{owner}: num_dense_layers ({self.num_dense_layers}) needs experts and fewer "
                                 f"dense layers than layers ({self.num_layers})")
        if self.global_every and not self.window:
            raise ShapewiseError(f"{owner}: global_every needs a sliding window (window > 0)")
        if (self.q_lora_rank or self.rope_head_dim or self.v_head_dim) and not self.is_mla:
            raise ShapewiseError(f"{owner}: q_lora_rank, rope_head_dim and v_head_dim describe latent attention; "
                                 f"give kv_lora_rank too")
        if self.head_dim is None and self.hidden % self.num_heads:
            raise ShapewiseError(
                f"{owner}: {self.num_heads} heads do not divide hidden size {self.hidden}; "
                f"choose heads that divide it or give head_dim explicitly")
        if self.num_heads % self.kv_heads:
            raise ShapewiseError(
                f"{owner}: {self.kv_heads} kv heads do not divide {self.num_heads} heads; "
                f"use a divisor of {self.num_heads} (1 for multi-query attention)")
        check_name(self.mlp, MLP_KINDS, "MLP kind", owner=owner)
        check_name(self.norm, NORM_KINDS, "norm", owner=owner)
        check_name(self.qk_norm_weights, QK_NORM_WEIGHTS, "QK-norm weights", owner=owner)
        check_name(self.bias_scope, BIAS_SCOPES, "bias scope", owner=owner)
        if self.num_experts and not 1 <= self.top_k <= self.num_experts:
            raise ShapewiseError(f"{owner}: top_k must be between 1 and num_experts ({self.num_experts}), got {self.top_k}")
        if not self.num_experts and (self.top_k or self.num_shared_experts or self.expert_ffn is not None):
            raise ShapewiseError(f"{owner}: top_k, shared experts and expert_ffn need num_experts > 0")
        if self.shared_expert_gate and not self.num_shared_experts:
            raise ShapewiseError(f"{owner}: shared_expert_gate needs shared experts (num_shared_experts > 0)")
        if self.window > SEQ.high:
            SEQ.check(self.window, f"{owner}: window")
        if not _DERIVING.get():  # a shape made from another (replace) was said of when that one was made
            for name, none in (("global_every", "no layer attends globally"),
                               ("nope_every", "every layer is rotary")):
                if getattr(self, name) > self.num_layers:
                    warn(f"{owner}: {name} {getattr(self, name)} is more than its {self.num_layers} layers, so "
                         f"{none}, as with {name} 0")

    # Derived values: properties, never stored, so dataclasses.replace keeps them consistent.
    @property
    def kv_heads(self) -> int:
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    @property
    def d_head(self) -> int:
        return self.hidden // self.num_heads if self.head_dim is None else self.head_dim

    @property
    def ffn_width(self) -> int:
        return 4 * self.hidden if self.ffn is None else self.ffn

    @property
    def expert_width(self) -> int:
        return self.ffn_width if self.expert_ffn is None else self.expert_ffn

    @property
    def mlp_width(self) -> int:
        """The width of the MLP a token's GEMMs run: an expert's in an MoE model, the FFN's otherwise."""
        return self.expert_width if self.is_moe else self.ffn_width

    @property
    def gated(self) -> bool:
        return MLP_KINDS[self.mlp] == 3

    @property
    def attn_bias(self) -> bool:
        """Attention's q, k, v and output projections carry biases (qkv_bias adds q, k and v's alone)."""
        return self.bias and self.bias_scope != "mlp"

    @property
    def mlp_bias(self) -> bool:
        """The MLP's linears (each expert's, in an MoE model) carry biases."""
        return self.bias and self.bias_scope != "attention"

    @property
    def out_proj_bias(self) -> bool:
        """Attention's output projection carries a bias (with the rest of attention's, or by out_bias)."""
        return self.attn_bias or self.out_bias

    @property
    def down_bias(self) -> bool:
        """The MLP's down projection carries a bias (with the rest of the MLP's, or by out_bias)."""
        return self.mlp_bias or self.out_bias

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def qk_head_dim(self) -> int:
        """Width of each query and key head: with latent attention, its non-rotary and rotary parts."""
        return self.d_head + self.rope_head_dim

    @property
    def v_dim(self) -> int:
        """Width of each value head."""
        return self.d_head if self.v_head_dim is None else self.v_head_dim

    @property
    def rotary_width(self) -> int:
        """Rotated dims of each query and key head."""
        if self.learned_positions:
            return 0
        if self.is_mla:
            return self.rope_head_dim
        return round(self.d_head * self.rotary_fraction)

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    @property
    def window_layout(self) -> str:
        """Where the sliding window runs, in words: "1 layer in N global" or "every layer" ("" without one)."""
        if not self.window:
            return ""
        return f"1 layer in {self.global_every} global" if self.global_every else "every layer"

    @property
    def num_global_layers(self) -> int:
        """Layers that attend to the whole sequence; the others attend within the window."""
        if not self.window:
            return self.num_layers
        return self.num_layers // self.global_every if self.global_every else 0

    @property
    def num_rope_layers(self) -> int:
        """Layers that rotate their queries and keys: all but every nope_every-th (none without rotary)."""
        if not self.rotary_width:
            return 0
        return self.num_layers - (self.num_layers // self.nope_every if self.nope_every else 0)

    @property
    def num_qk_norm_layers(self) -> int:
        """Layers that normalize their queries and keys: every one, or the rotary ones alone where the NoPE
        layers do not (qk_norm_nope: Llama 4 normalizes only what it rotates)."""
        if not self.qk_norm:
            return 0
        return self.num_layers if self.qk_norm_nope or not self.nope_every else self.num_rope_layers

    @property
    def qk_norm_params(self) -> int:
        """Weights of one layer's query and key norms (none without QK-norm, or where it has no weights)."""
        if not self.qk_norm or self.qk_norm_weights == "none":
            return 0
        if self.qk_norm_weights in ("head", "head_bias"):  # one norm for the queries, one for the keys
            return 2 * self.d_head * (2 if self.qk_norm_weights == "head_bias" else 1)
        return (self.num_heads + self.kv_heads) * self.d_head

    @property
    def attention_params(self) -> int:
        """Parameters of one layer's attention: projections, their biases and any query/key norms."""
        h, H = self.hidden, self.num_heads
        if self.is_mla:
            qk, q_rank, kv_rank = self.qk_head_dim, self.q_lora_rank, self.kv_lora_rank
            # queries: down to the latent, its norm, up to every head; or straight from the input
            q = h * q_rank + q_rank + q_rank * H * qk if q_rank else h * H * qk
            # keys/values: down to the latent plus the shared rotary key, its norm, up to nope keys and values
            kv = h * (kv_rank + self.rope_head_dim) + kv_rank + kv_rank * H * (self.d_head + self.v_dim)
            return q + kv + H * self.v_dim * h
        d = self.d_head
        q, kv = H * d, self.kv_heads * d
        attn = h * (q + 2 * kv) + q * h + (q + 2 * kv) * (self.attn_bias or self.qkv_bias) + h * self.out_proj_bias
        return attn + self.qk_norm_params

    def _mlp_params(self, width: int) -> int:
        mats = MLP_KINDS[self.mlp]
        return mats * self.hidden * width + (mats - 1) * width * self.mlp_bias + self.hidden * self.down_bias

    @property
    def layer_params(self) -> int:
        """Exact parameter count of one transformer block (an MoE block, in an MoE model): attention, MLP
        (or router and experts) and its norms."""
        h = self.hidden
        if self.is_moe:  # router (and the shared experts' gate), experts
            ffn = h * (self.num_experts + self.shared_expert_gate) + \
                (self.num_experts + self.num_shared_experts) * self._mlp_params(self.expert_width)
        else:
            ffn = self._mlp_params(self.ffn_width)
        return self.attention_params + ffn + self.norms_per_layer * NORM_KINDS[self.norm] * h

    @property
    def blocks_params(self) -> int:
        """All transformer blocks together: the MoE ones and the dense ones (every block of a dense model)."""
        norms = self.norms_per_layer * NORM_KINDS[self.norm] * self.hidden
        dense_block = self.attention_params + self._mlp_params(self.ffn_width) + norms
        unnormed = (self.num_layers - self.num_qk_norm_layers) * self.qk_norm_params  # NoPE layers without QK-norm
        return self.num_moe_layers * self.layer_params + (self.num_layers - self.num_moe_layers) * dense_block - unnormed

    @property
    def params(self) -> int:
        """Exact parameter count of the structure described (embeddings included)."""
        h = self.hidden
        norm = NORM_KINDS[self.norm] * h * (1 + self.embed_norm)  # the final norm; BLOOM's over the embeddings
        embed = self.vocab * h * (1 if self.tied_embeddings else 2) + self.learned_positions * h
        return self.blocks_params + embed + norm + self.vocab * self.lm_head_bias

    def kv_cache_values(self, *, seq: int, tp: int = 1) -> int:
        """Values one sequence of seq tokens keeps cached on one tensor-parallel rank, over all layers:
        keys and values of its kv heads, or with latent attention the latent and rotary key (shared by
        every head, so not split across ranks); sliding-window layers keep at most the window."""
        per_token = self.kv_lora_rank + self.rope_head_dim if self.is_mla else \
            2 * -(-self.kv_heads // tp) * self.d_head
        local = self.num_layers - self.num_global_layers
        return per_token * (self.num_global_layers * seq + local * min(seq, self.window or seq))

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (differs from params only for MoE)."""
        if not self.is_moe:
            return self.params
        idle = self.num_experts - self.top_k
        return self.params - self.num_moe_layers * idle * self._mlp_params(self.expert_width)

    def to_json(self) -> dict:
        """The shape as check --json and models --json give it: its sizes by name, then every structural field."""
        return {"name": self.name, "params": self.params, "active_params": self.active_params, "hidden": self.hidden,
                "num_layers": self.num_layers, "num_heads": self.num_heads, "num_kv_heads": self.kv_heads,
                "head_dim": self.d_head, "ffn": self.ffn_width, "mlp": self.mlp, "vocab": self.vocab,
                "num_experts": self.num_experts, "top_k": self.top_k, "source": self.source,
                # the rest of the shape, as priced: every structural field
                "fields": {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                           if f.name not in ("name", "source", "published_params")}}

    def replace(self, **changes) -> "ModelShape":
        _known_fields(self, changes)
        token = _DERIVING.set(True)
        try:
            return dataclasses.replace(self, **changes)
        finally:
            _DERIVING.reset(token)

    @property
    def layers_alike(self) -> bool:
        """Every layer runs the same ops: no dense layers among MoE ones, no windowed layers among global ones,
        no NoPE layers among rotary ones."""
        windowed = self.num_layers - self.num_global_layers
        return self.num_dense_layers == 0 and windowed in (0, self.num_layers) and not self.mixed_rope

    @property
    def mixed_rope(self) -> bool:
        """Layers without rotary embeddings among rotary ones (nope_every)."""
        return self.num_rope_layers not in (0, self.num_layers)

    def one_layer(self) -> "ModelShape":
        """One block of this model, as a one-layer model: an MoE block where it has experts (dense-first
        layers dropped), a global-attention one where windows alternate with global layers and a rotary one
        where NoPE layers are among rotary ones."""
        return self.replace(num_layers=1, num_dense_layers=0, global_every=min(self.global_every, 1),
                            nope_every=int(self.nope_every == 1))


@dataclass(frozen=True)
class Workload:
    """How the model is run for one step on one tensor-parallel group."""

    batch: int = 4  # micro-batch: sequences per step
    seq: int = 2048  # tokens per sequence (in decode: the KV-cache length)
    tp: int = 1  # tensor-parallel degree (Megatron style, with sequence parallelism)
    dtype: str = "bf16"
    mode: str = "train"  # train: forward + backward; prefill; decode: one new token per sequence
    attention: str = "flash"  # flash: one fused kernel; unfused: score BMM, softmax, BMM over values
    overlap_comm: bool = False  # tensor-parallel collectives hidden behind compute (an upper bound)
    kv_cache_dtype: str = "auto"  # prefill and decode: the KV cache's dtype (KV_CACHE_DTYPES); training keeps none

    def __post_init__(self):
        _as_python(self, "workload")
        for field in ("batch", "seq", "tp"):
            _require_positive_int("workload", field, getattr(self, field))
        check_name(self.mode, MODES, "mode")  # first: the tokens' bound is the mode's (a decode step's is its cache)
        check_tokens(self.batch, self.seq, ("workload: batch", "seq"), self.mode)
        check_name(self.dtype, DTYPE_BYTES, "dtype")
        check_name(self.attention, ATTENTION_KINDS, "attention")
        check_name(self.kv_cache_dtype, KV_CACHE_DTYPES, "kv_cache_dtype")

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def kv_cache_name(self) -> str:
        """The KV cache's dtype as priced: "auto" is the activations' (an fp8 step's bf16, a tf32 step's fp32)."""
        if self.kv_cache_dtype != "auto":
            return self.kv_cache_dtype
        held = activation_dtype(self.dtype)  # an fp8 step's activations are bf16; tf32 is a math mode on fp32 values
        return "fp32" if held == "tf32" else held

    @property
    def kv_cache_bytes(self) -> int:
        return DTYPE_BYTES[self.kv_cache_name]

    def kv_cache_text(self) -> str:
        """", KV cache fp8" for a serving step, as headers say it (a training step has none)."""
        return "" if self.mode == "train" else f", KV cache {self.kv_cache_name}"

    @property
    def tokens(self) -> int:
        """Tokens processed per step: b·s, or b in decode (one new token per sequence)."""
        return self.batch if self.mode == "decode" else self.batch * self.seq

    def to_json(self) -> dict:
        """The workload as check --json, suggest --json and search --json give it: every field, the KV cache's dtype
        as priced (None in training, which keeps no cache)."""
        return {"batch": self.batch, "seq": self.seq, "tp": self.tp, "dtype": self.dtype, "mode": self.mode,
                "attention": self.attention, "overlap_comm": self.overlap_comm,
                "kv_cache_dtype": None if self.mode == "train" else self.kv_cache_name}

    def replace(self, **changes) -> "Workload":
        _known_fields(self, changes)
        return dataclasses.replace(self, **changes)


def _known_fields(obj, changes: dict) -> None:
    """Refuse a change of a field `obj` does not have in one line, with the field meant where it is plain:
    replace(heads=16) is num_heads, as suggest's changes and --keep name it (dataclasses raised TypeError)."""
    names = [f.name for f in dataclasses.fields(obj)]
    for name in changes:
        if name not in names:
            near = [n for n in names if n == f"num_{name}"] or difflib.get_close_matches(name, names, n=1)
            raise ShapewiseError(f"a {type(obj).__name__} has no field {name!r}" + (f"; did you mean {near[0]}?"
                                                                                   if near else ""))


def _even_kv_degrees(shape: ModelShape) -> list[int]:
    """The t that check_parallel takes: dividing the heads and the FFN width, and the kv heads or a multiple of them."""
    return [t for t in range(1, shape.num_heads + 1) if shape.num_heads % t == 0 and shape.mlp_width % t == 0
            and (shape.kv_heads % t == 0 or t % shape.kv_heads == 0)]


def check_parallel(shape: ModelShape, workload: Workload) -> None:
    """Raise if the tensor-parallel degree cannot split this model."""
    if not isinstance(shape, ModelShape):
        raise ShapewiseError(f"the model must be a ModelShape (shapewise.get_model(NAME), shapewise.load_config(PATH)), "
                             f"got {shape!r}")
    if not isinstance(workload, Workload):
        raise ShapewiseError(f"the workload must be a shapewise.Workload, got {workload!r}")
    t = workload.tp
    if shape.num_heads % t:
        raise ShapewiseError(
            f"tensor-parallel degree {t} does not divide {shape.name}'s {shape.num_heads} heads; "
            f"use a t that divides {shape.num_heads}")
    if shape.kv_heads % t and t % shape.kv_heads:
        raise ShapewiseError(
            f"tensor-parallel degree {t} and {shape.name}'s {shape.kv_heads} kv heads: neither divides "
            f"the other, so kv heads cannot be split or replicated evenly; use t = "
            f"{listed(map(str, _even_kv_degrees(shape)))}")
    width = shape.mlp_width
    if width % t:
        raise ShapewiseError(
            f"tensor-parallel degree {t} does not divide {shape.name}'s FFN width {width}; "
            f"use a t that divides it or round the width to a multiple of {t}")
    if shape.vocab < t:
        raise ShapewiseError(f"tensor-parallel degree {t} exceeds {shape.name}'s vocab ({shape.vocab})")


def canonical(shape: ModelShape) -> ModelShape:
    """The same shape with every field that merely restates its default set back to None, so that
    two descriptions of one structure compare equal (an explicit ffn of 4h, head_dim of h/heads...)."""
    changes = {}
    if shape.num_kv_heads == shape.num_heads:
        changes["num_kv_heads"] = None
    if shape.head_dim is not None and shape.head_dim * shape.num_heads == shape.hidden:
        changes["head_dim"] = None
    if shape.ffn == 4 * shape.hidden:
        changes["ffn"] = None
    if shape.expert_ffn is not None and (not shape.is_moe or shape.expert_ffn == shape.ffn_width):
        changes["expert_ffn"] = None
    if shape.v_head_dim is not None and shape.v_head_dim == shape.d_head:
        changes["v_head_dim"] = None
    if shape.qkv_bias and shape.attn_bias:  # attention's biases hold the query, key and value ones
        changes["qkv_bias"] = False
    if shape.out_bias and shape.attn_bias and shape.mlp_bias:  # every linear's biases hold the output ones
        changes["out_bias"] = False
    if shape.bias_scope != "all" and not shape.bias:  # no biases for a scope to restrict
        changes["bias_scope"] = "all"
    if not shape.qk_norm_nope and not (shape.qk_norm and shape.nope_every):  # no NoPE layers' QK-norm to skip
        changes["qk_norm_nope"] = True
    if shape.qk_norm_weights != "head" and not shape.qk_norm:  # no QK-norm for weights to span
        changes["qk_norm_weights"] = "head"
    return shape.replace(**changes) if changes else shape


# Fields that describe structure: every field compared (context is not) except name, source and published_params.
STRUCTURAL_FIELDS = tuple(f.name for f in dataclasses.fields(ModelShape)
                          if f.compare and f.name not in ("name", "source", "published_params"))



# Fields added for real configs (windows, latent attention, ...). A shape's record in a results store
# leaves them out while they hold their defaults, so that measurements keyed before they existed match.
_EXTENSIONS = ("norms_per_layer", "qk_norm", "qk_norm_weights", "qk_norm_nope", "qkv_bias", "out_bias", "bias_scope",
               "embed_norm",
               "rotary_fraction", "logit_softcap", "window", "global_every", "nope_every", "num_dense_layers",
               "kv_lora_rank", "q_lora_rank", "rope_head_dim", "v_head_dim", "shared_expert_gate")
# Structure that no op a store times has: the output head's bias (added in the logits GEMM, in no layer). A record
# leaves it out, so that Phi-2's layers measured before it was counted keep their key.
_UNTIMED = ("lm_head_bias",)


def shape_record(shape: ModelShape) -> dict:
    """The shape's fields as a results store keys them (ModelShape(**record) gives back its layers and ops)."""
    # a field not compared (context) changes no op: measurements of the same ops share a key without it
    record = {f.name: getattr(shape, f.name) for f in dataclasses.fields(ModelShape)
              if f.compare and f.name not in _UNTIMED}
    defaults = {f.name: f.default for f in dataclasses.fields(ModelShape) if f.name in _EXTENSIONS}
    return {k: v for k, v in record.items() if k not in defaults or v != defaults[k]}
