"""What is being run: a model's shape (ModelShape), how it is run (Workload), named presets of
published models, and Hugging Face config.json reading and writing."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .errors import ShapewiseError

# Matrices per MLP block: plain MLPs have up and down, gated ones (GLU family) add a gate.
MLP_KINDS = {"gelu": 2, "relu": 2, "swiglu": 3, "geglu": 3}
NORM_KINDS = {"layernorm": 2, "rmsnorm": 1}  # parameters per channel: LayerNorm has a bias
DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
MODES = ("train", "prefill", "decode")
ATTENTION_KINDS = ("flash", "unfused")


def _require_positive_int(owner: str, field: str, value, *, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ShapewiseError(f"{owner}: {field} must be a whole number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        low = "zero or more" if allow_zero else "positive"
        raise ShapewiseError(f"{owner}: {field} must be {low}, got {value}")


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
    learned_positions: int = 0  # rows of a learned position table; 0 for RoPE or ALiBi
    num_experts: int = 0  # 0: dense MLP
    top_k: int = 0
    expert_ffn: int | None = None  # None: ffn
    num_shared_experts: int = 0
    source: str = ""  # where the numbers come from
    published_params: int | None = None  # the parameter count its authors give, for checking

    def __post_init__(self):
        owner = f"model {self.name!r}"
        for field in ("hidden", "num_layers", "num_heads", "vocab"):
            _require_positive_int(owner, field, getattr(self, field))
        for field in ("num_kv_heads", "head_dim", "ffn", "expert_ffn"):
            if getattr(self, field) is not None:
                _require_positive_int(owner, field, getattr(self, field))
        for field in ("learned_positions", "num_experts", "top_k", "num_shared_experts"):
            _require_positive_int(owner, field, getattr(self, field), allow_zero=True)
        if self.head_dim is None and self.hidden % self.num_heads:
            raise ShapewiseError(
                f"{owner}: {self.num_heads} heads do not divide hidden size {self.hidden}; "
                f"choose heads that divide it or give head_dim explicitly")
        if self.num_heads % self.kv_heads:
            raise ShapewiseError(
                f"{owner}: {self.kv_heads} kv heads do not divide {self.num_heads} heads; "
                f"use a divisor of {self.num_heads} (1 for multi-query attention)")
        if self.mlp not in MLP_KINDS:
            raise ShapewiseError(f"{owner}: unknown MLP kind {self.mlp!r}; use one of {', '.join(MLP_KINDS)}")
        if self.norm not in NORM_KINDS:
            raise ShapewiseError(f"{owner}: unknown norm {self.norm!r}; use one of {', '.join(NORM_KINDS)}")
        if self.num_experts and not 1 <= self.top_k <= self.num_experts:
            raise ShapewiseError(f"{owner}: top_k must be between 1 and num_experts ({self.num_experts}), got {self.top_k}")
        if not self.num_experts and (self.top_k or self.num_shared_experts):
            raise ShapewiseError(f"{owner}: top_k and shared experts need num_experts > 0")

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
    def gated(self) -> bool:
        return MLP_KINDS[self.mlp] == 3

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def layer_params(self) -> int:
        """Exact parameter count of one transformer block: attention, MLP (or router and experts) and
        its two norms; params is num_layers of these plus the embeddings and the final norm."""
        h, d = self.hidden, self.d_head
        q, kv = self.num_heads * d, self.kv_heads * d
        attn = h * (q + 2 * kv) + q * h + (q + 2 * kv + h) * self.bias
        mats = MLP_KINDS[self.mlp]

        def mlp(width: int) -> int:
            return mats * h * width + ((mats - 1) * width + h) * self.bias

        if self.is_moe:
            ffn = h * self.num_experts + (self.num_experts + self.num_shared_experts) * mlp(self.expert_width)
        else:
            ffn = mlp(self.ffn_width)
        return attn + ffn + 2 * NORM_KINDS[self.norm] * h

    @property
    def params(self) -> int:
        """Exact parameter count of the structure described (embeddings included)."""
        h = self.hidden
        norm = NORM_KINDS[self.norm] * h  # the final norm
        embed = self.vocab * h * (1 if self.tied_embeddings else 2) + self.learned_positions * h
        return self.num_layers * self.layer_params + embed + norm

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (differs from params only for MoE)."""
        if not self.is_moe:
            return self.params
        idle = self.num_experts - self.top_k
        mats = MLP_KINDS[self.mlp]
        per_expert = mats * self.hidden * self.expert_width + ((mats - 1) * self.expert_width + self.hidden) * self.bias
        return self.params - self.num_layers * idle * per_expert

    def replace(self, **changes) -> "ModelShape":
        return dataclasses.replace(self, **changes)


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

    def __post_init__(self):
        for field in ("batch", "seq", "tp"):
            _require_positive_int("workload", field, getattr(self, field))
        if self.dtype not in DTYPE_BYTES:
            raise ShapewiseError(f"unknown dtype {self.dtype!r}; use one of {', '.join(DTYPE_BYTES)}")
        if self.mode not in MODES:
            raise ShapewiseError(f"unknown mode {self.mode!r}; use one of {', '.join(MODES)}")
        if self.attention not in ATTENTION_KINDS:
            raise ShapewiseError(f"unknown attention {self.attention!r}; use one of {', '.join(ATTENTION_KINDS)}")

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def tokens(self) -> int:
        """Tokens processed per step: b·s, or b in decode (one new token per sequence)."""
        return self.batch if self.mode == "decode" else self.batch * self.seq

    def replace(self, **changes) -> "Workload":
        return dataclasses.replace(self, **changes)


def check_parallel(shape: ModelShape, workload: Workload) -> None:
    """Raise if the tensor-parallel degree cannot split this model."""
    t = workload.tp
    if shape.num_heads % t:
        raise ShapewiseError(
            f"tensor-parallel degree {t} does not divide {shape.name}'s {shape.num_heads} heads; "
            f"use a t that divides {shape.num_heads}")
    if shape.kv_heads % t and t % shape.kv_heads:
        raise ShapewiseError(
            f"tensor-parallel degree {t} and {shape.name}'s {shape.kv_heads} kv heads: neither divides "
            f"the other, so kv heads cannot be split or replicated evenly")
    width = shape.expert_width if shape.is_moe else shape.ffn_width
    if width % t:
        raise ShapewiseError(
            f"tensor-parallel degree {t} does not divide {shape.name}'s FFN width {width}; "
            f"use a t that divides it or round the width to a multiple of {t}")
    if shape.vocab < t:
        raise ShapewiseError(f"tensor-parallel degree {t} exceeds {shape.name}'s vocab ({shape.vocab})")


# ---- presets and config.json: below this line ----

import copy
import difflib
import json
import os
import re
from pathlib import Path

# Where published_params comes from (beside each preset): "card"/"paper" for the authors' own figure,
# "hub" for the exact total the Hugging Face hub reports for the checkpoint (its safetensors metadata),
# used where the authors only give a size label such as "7B". Labels alone can be off by more than the
# 0.5% the tests allow (GPT-3's "350M" is 355.9M); tests/test_shapes.py lists those cases and why.
_HF = "https://huggingface.co/{}/blob/main/config.json"
_GPT3 = "GPT-3 paper, arXiv:2005.14165, Table 2.1"

_GPT2 = dict(mlp="gelu", norm="layernorm", bias=True, tied_embeddings=True, learned_positions=1024, vocab=50257)
_GPT3_ = dict(mlp="gelu", norm="layernorm", bias=True, tied_embeddings=True, learned_positions=2048, vocab=50257)
_NEOX = dict(mlp="gelu", norm="layernorm", bias=True, tied_embeddings=False, parallel_attn=True)
_LLAMA = dict(mlp="swiglu", norm="rmsnorm", bias=False, tied_embeddings=False)

_TABLE = (
    # GPT-2: the openai/gpt-2 README names the checkpoints by their corrected counts (124M, 355M, 774M,
    # 1558M); the paper's 117M/345M/762M/1542M were miscounted.
    ModelShape(name="gpt2", hidden=768, num_layers=12, num_heads=12, **_GPT2,
               source=_HF.format("openai-community/gpt2"), published_params=124_000_000),
    ModelShape(name="gpt2-medium", hidden=1024, num_layers=24, num_heads=16, **_GPT2,
               source=_HF.format("openai-community/gpt2-medium"), published_params=355_000_000),
    ModelShape(name="gpt2-large", hidden=1280, num_layers=36, num_heads=20, **_GPT2,
               source=_HF.format("openai-community/gpt2-large"), published_params=774_000_000),
    ModelShape(name="gpt2-xl", hidden=1600, num_layers=48, num_heads=25, **_GPT2,
               source=_HF.format("openai-community/gpt2-xl"), published_params=1_558_000_000),
    # GPT-3, Table 2.1 (no checkpoints; counts are the table's size labels). Two table cells contradict
    # the rest of their row and are read as Megatron-DeepSpeed's GPT-3 recipes read them: XL lists
    # 24 heads of 128 on a 2048-wide model (24*128 = 3072), taken as 16 heads of 128; 13B lists
    # d_model 5140 with 40 heads of 128, taken as 5120.
    ModelShape(name="gpt3-125m", hidden=768, num_layers=12, num_heads=12, **_GPT3_,
               source=_GPT3, published_params=125_000_000),
    ModelShape(name="gpt3-350m", hidden=1024, num_layers=24, num_heads=16, **_GPT3_,
               source=_GPT3, published_params=350_000_000),
    ModelShape(name="gpt3-760m", hidden=1536, num_layers=24, num_heads=16, **_GPT3_,
               source=_GPT3, published_params=760_000_000),
    ModelShape(name="gpt3-1.3b", hidden=2048, num_layers=24, num_heads=16, **_GPT3_,
               source=_GPT3, published_params=1_300_000_000),
    ModelShape(name="gpt3-2.7b", hidden=2560, num_layers=32, num_heads=32, **_GPT3_,  # head dim 80
               source=_GPT3, published_params=2_700_000_000),
    ModelShape(name="gpt3-6.7b", hidden=4096, num_layers=32, num_heads=32, **_GPT3_,
               source=_GPT3, published_params=6_700_000_000),
    ModelShape(name="gpt3-13b", hidden=5120, num_layers=40, num_heads=40, **_GPT3_,
               source=_GPT3, published_params=13_000_000_000),
    ModelShape(name="gpt3-175b", hidden=12288, num_layers=96, num_heads=96, **_GPT3_,
               source=_GPT3, published_params=175_000_000_000),
    # Pythia: exact totals from the model cards' renaming table. Vocab is padded per model.
    ModelShape(name="pythia-70m", hidden=512, num_layers=6, num_heads=8, ffn=2048, vocab=50304, **_NEOX,
               source=_HF.format("EleutherAI/pythia-70m"), published_params=70_426_624),
    ModelShape(name="pythia-160m", hidden=768, num_layers=12, num_heads=12, ffn=3072, vocab=50304, **_NEOX,
               source=_HF.format("EleutherAI/pythia-160m"), published_params=162_322_944),
    ModelShape(name="pythia-410m", hidden=1024, num_layers=24, num_heads=16, ffn=4096, vocab=50304, **_NEOX,
               source=_HF.format("EleutherAI/pythia-410m"), published_params=405_334_016),
    ModelShape(name="pythia-1b", hidden=2048, num_layers=16, num_heads=8, ffn=8192, vocab=50304, **_NEOX,
               source=_HF.format("EleutherAI/pythia-1b"), published_params=1_011_781_632),
    ModelShape(name="pythia-1.4b", hidden=2048, num_layers=24, num_heads=16, ffn=8192, vocab=50304, **_NEOX,
               source=_HF.format("EleutherAI/pythia-1.4b"), published_params=1_414_647_808),
    ModelShape(name="pythia-2.8b", hidden=2560, num_layers=32, num_heads=32, ffn=10240, vocab=50304, **_NEOX,
               source=_HF.format("EleutherAI/pythia-2.8b"), published_params=2_775_208_960),
    ModelShape(name="pythia-6.9b", hidden=4096, num_layers=32, num_heads=32, ffn=16384, vocab=50432, **_NEOX,
               source=_HF.format("EleutherAI/pythia-6.9b"), published_params=6_857_302_016),
    ModelShape(name="pythia-12b", hidden=5120, num_layers=36, num_heads=40, ffn=20480, vocab=50688, **_NEOX,
               source=_HF.format("EleutherAI/pythia-12b"), published_params=11_846_072_320),
    ModelShape(name="gpt-neox-20b", hidden=6144, num_layers=44, num_heads=64, ffn=24576, vocab=50432, **_NEOX,
               source=_HF.format("EleutherAI/gpt-neox-20b"), published_params=20_554_567_680),  # card
    # Llama family: Meta's papers say 7B/13B/70B/8B; the exact totals are the hub's.
    ModelShape(name="llama2-7b", hidden=4096, num_layers=32, num_heads=32, ffn=11008, vocab=32000, **_LLAMA,
               source=_HF.format("meta-llama/Llama-2-7b-hf"), published_params=6_738_415_616),
    ModelShape(name="llama2-13b", hidden=5120, num_layers=40, num_heads=40, ffn=13824, vocab=32000, **_LLAMA,
               source=_HF.format("meta-llama/Llama-2-13b-hf"), published_params=13_015_864_320),
    ModelShape(name="llama2-70b", hidden=8192, num_layers=80, num_heads=64, num_kv_heads=8, ffn=28672,
               vocab=32000, **_LLAMA,
               source=_HF.format("meta-llama/Llama-2-70b-hf"), published_params=68_976_648_192),
    ModelShape(name="llama3-8b", hidden=4096, num_layers=32, num_heads=32, num_kv_heads=8, ffn=14336,
               vocab=128256, **_LLAMA,
               source=_HF.format("meta-llama/Meta-Llama-3-8B"), published_params=8_030_261_248),
    ModelShape(name="llama3-70b", hidden=8192, num_layers=80, num_heads=64, num_kv_heads=8, ffn=28672,
               vocab=128256, **_LLAMA,
               source=_HF.format("meta-llama/Meta-Llama-3-70B"), published_params=70_553_706_496),
    ModelShape(name="mistral-7b", hidden=4096, num_layers=32, num_heads=32, num_kv_heads=8, ffn=14336,
               vocab=32000, **_LLAMA,  # Mistral's post says 7.3B; 7,241,732,096 is the hub's
               source=_HF.format("mistralai/Mistral-7B-v0.1"), published_params=7_241_732_096),
    ModelShape(name="mixtral-8x7b", hidden=4096, num_layers=32, num_heads=32, num_kv_heads=8, ffn=14336,
               vocab=32000, num_experts=8, top_k=2, expert_ffn=14336, **_LLAMA,  # paper: 47B total
               source=_HF.format("mistralai/Mixtral-8x7B-v0.1"), published_params=46_702_792_704),
    # Qwen2 has q/k/v biases but no others; the dataclass has one bias flag, so bias=False (129k
    # parameters, 0.002%). Qwen2's report says 7.07B, counting the untied embedding once; hub total here.
    ModelShape(name="qwen2-7b", hidden=3584, num_layers=28, num_heads=28, num_kv_heads=4, ffn=18944,
               vocab=152064, **_LLAMA,
               source=_HF.format("Qwen/Qwen2-7B"), published_params=7_615_616_512),
    # Gemma: 16 heads of 256 on a 3072-wide model, so head_dim is explicit. Count: paper Table 2,
    # embedding 786,825,216 + non-embedding 7,751,248,896 (its embedding count has 256,128 rows).
    ModelShape(name="gemma-7b", hidden=3072, num_layers=28, num_heads=16, head_dim=256, ffn=24576,
               vocab=256000, mlp="geglu", norm="rmsnorm", bias=False, tied_embeddings=True,
               source=_HF.format("google/gemma-7b"), published_params=8_538_074_112),
    # Falcon and Phi put attention and MLP side by side under one LayerNorm; the dataclass counts two
    # norms per layer (+0.004%). Falcon's card says 7B, the only figure it gives.
    ModelShape(name="falcon-7b", hidden=4544, num_layers=32, num_heads=71, num_kv_heads=1, vocab=65024,
               mlp="gelu", norm="layernorm", bias=False, tied_embeddings=True, parallel_attn=True,
               source=_HF.format("tiiuae/falcon-7b"), published_params=7_000_000_000),
    ModelShape(name="phi-2", hidden=2560, num_layers=32, num_heads=32, ffn=10240, vocab=51200, **_NEOX,
               source=_HF.format("microsoft/phi-2"), published_params=2_779_683_840),  # hub; card: 2.7B
    ModelShape(name="opt-1.3b", hidden=2048, num_layers=24, num_heads=32, ffn=8192, vocab=50272,
               mlp="relu", norm="layernorm", bias=True, tied_embeddings=True,
               learned_positions=2050,  # OPT offsets positions by 2: 2048 + 2 rows
               source=_HF.format("facebook/opt-1.3b"), published_params=1_315_758_080),  # hub; paper: 1.3B
    # BLOOM adds a LayerNorm after the embedding (8,192 parameters the dataclass does not count).
    ModelShape(name="bloom-7b1", hidden=4096, num_layers=30, num_heads=32, vocab=250880,
               mlp="gelu", norm="layernorm", bias=True, tied_embeddings=True,
               source=_HF.format("bigscience/bloom-7b1"), published_params=7_069_016_064),  # card
    ModelShape(name="starcoder2-15b", hidden=6144, num_layers=40, num_heads=48, num_kv_heads=4, ffn=24576,
               vocab=49152, mlp="gelu", norm="layernorm", bias=True, tied_embeddings=False,
               source=_HF.format("bigcode/starcoder2-15b"), published_params=15_000_000_000),  # card: 15B
)


def _canonical(shape: ModelShape) -> ModelShape:
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
    return shape.replace(**changes) if changes else shape


PRESETS: dict[str, ModelShape] = {s.name: _canonical(s) for s in _TABLE}

# Fields that describe structure (everything except name, source and published_params).
STRUCTURAL_FIELDS = tuple(f.name for f in dataclasses.fields(ModelShape)
                          if f.name not in ("name", "source", "published_params"))


# ---- preset lookup ----

# Spellings that canonical-key folding (below) does not reach.
_ALIASES = {
    "gpt2small": "gpt2", "neox20b": "gpt-neox-20b", "bloom7.1b": "bloom-7b1",
    "mixtral": "mixtral-8x7b", "mistral": "mistral-7b", "falcon": "falcon-7b", "phi2": "phi-2",
}
# Checkpoint-name suffixes that do not change the shape (chat/instruct tunes, dedup, HF conversions).
_SUFFIX = re.compile(r"(-(hf|chat|instruct|it|base|deduped|v\d+(\.\d+)*))+$")


def _key(name: str) -> str:
    """Fold a model name to a lookup key: case, '_' vs '-', an org prefix, 'meta-' and shape-neutral
    suffixes are ignored, and so are dashes (so llama-2-7b, Llama_2_7b and llama2-7b meet)."""
    s = name.strip().lower().replace("_", "-").rsplit("/", 1)[-1]
    s = _SUFFIX.sub("", s)
    s = s.removeprefix("meta-")
    return s.replace("-", "")


_KEYS: dict[str, str] = {_key(n): n for n in PRESETS}
_KEYS.update(_ALIASES)


def get_model(name: str) -> ModelShape:
    """The preset called name (case-insensitive; HF ids like meta-llama/Llama-2-7b-hf work too)."""
    if not isinstance(name, str) or not name.strip():
        raise ShapewiseError(f"give a model name, got {name!r}; run `shapewise models` to list the presets")
    found = _KEYS.get(_key(name))
    if found:
        return PRESETS[found]
    guess = name.strip().lower().replace("_", "-").rsplit("/", 1)[-1]
    close = difflib.get_close_matches(guess, list(PRESETS), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise ShapewiseError(f"unknown model {name!r}; {hint}run `shapewise models` to list the presets")


# ---- config.json reading ----

# Every spelling tried for each field, in order of preference.
_HIDDEN = ("hidden_size", "n_embd", "d_model", "dim", "n_embed")  # n_embed: BLOOM
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HEADS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
_KV_HEADS = ("num_key_value_heads", "n_head_kv", "num_kv_heads", "n_kv_heads")
_HEAD_DIM = ("head_dim", "kv_channels")
_FFN = ("intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size")
_VOCAB = ("padded_vocab_size", "vocab_size")  # the padded size is the real table size
_ACT = ("hidden_activation", "hidden_act", "activation_function")  # Gemma: hidden_activation wins
_BIAS = ("bias", "use_bias", "enable_bias", "attention_bias", "mlp_bias", "add_bias_linear")
_PARALLEL = ("use_parallel_residual", "parallel_attn", "parallel_residual")
_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")
_TOP_K = ("num_experts_per_tok", "moe_top_k")
_EXPERT_FFN = ("moe_intermediate_size",)


@dataclass(frozen=True)
class _Family:
    gated: bool  # MLP with a gate (GLU); the activation then picks swiglu or geglu
    norm: str
    bias: bool
    tied: bool  # Hugging Face's default for tie_word_embeddings in this model type
    parallel: bool
    positions: str = ""  # how learned positions are read: "gpt2", "opt", "gpt_neo" or none


_LLAMA_LIKE = _Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False)
_FAMILIES = {
    **{t: _LLAMA_LIKE for t in ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe")},
    "gemma": _Family(gated=True, norm="rmsnorm", bias=False, tied=True, parallel=False),
    "gpt2": _Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False, positions="gpt2"),
    "gpt_bigcode": _Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False, positions="gpt2"),
    "gpt_neo": _Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False, positions="gpt_neo"),
    "opt": _Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False, positions="opt"),
    "gptj": _Family(gated=False, norm="layernorm", bias=True, tied=False, parallel=True),
    "gpt_neox": _Family(gated=False, norm="layernorm", bias=True, tied=False, parallel=True),
    "phi": _Family(gated=False, norm="layernorm", bias=True, tied=False, parallel=True),
    "bloom": _Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False),
    "starcoder2": _Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False),
    **{t: _Family(gated=False, norm="layernorm", bias=False, tied=True, parallel=True)
       for t in ("falcon", "refinedwebmodel", "refinedweb")},
}
_FAMILIES["phi-msft"] = _FAMILIES["mixformer-sequential"] = _FAMILIES["phi"]  # phi-2's first config
_FALCON_TYPES = ("falcon", "refinedwebmodel", "refinedweb")


class _Reader:
    """Reads the fields of one config dict; every error names where the dict came from."""

    def __init__(self, cfg: dict, where: str):
        self.cfg, self.where = cfg, where

    def fail(self, message: str):
        raise ShapewiseError(f"{self.where}: {message}")

    def _present(self, keys) -> list[str]:
        return [k for k in keys if self.cfg.get(k) is not None]  # null counts as absent (n_inner: null)

    def whole(self, keys, what: str, *, required: bool = False, minimum: int = 1, agree: bool = True) -> int | None:
        """A whole number under the first present spelling; all present spellings must agree."""
        present = self._present(keys)
        if not present:
            if required:
                self.fail(f"no {what} found; tried {', '.join(keys)}")
            return None
        values = {}
        for k in present:
            v = self.cfg[k]
            if isinstance(v, bool) or not isinstance(v, int):
                self.fail(f"{k} must be a whole number, got {json.dumps(v)[:40]}")
            if v < minimum:
                self.fail(f"{k} must be {'positive' if minimum == 1 else f'at least {minimum}'}, got {v}")
            values[k] = v
        if agree and len(set(values.values())) > 1:
            self.fail(f"{' and '.join(f'{k}={v}' for k, v in values.items())} disagree about the {what}")
        return values[present[0]]

    def flag(self, keys, default: bool | None) -> bool | None:
        """A true/false under the first present spelling."""
        for k in self._present(keys):
            v = self.cfg[k]
            if not isinstance(v, bool):
                self.fail(f"{k} must be true or false, got {json.dumps(v)[:40]}")
            return v
        return default

    def text(self, keys) -> str | None:
        for k in self._present(keys):
            v = self.cfg[k]
            if not isinstance(v, str):
                self.fail(f"{k} must be a string, got {json.dumps(v)[:40]}")
            return v
        return None


def _fields_from_config(cfg: dict, where: str) -> dict:
    """ModelShape keyword arguments (all structural fields) read from a config dict."""
    if "text_config" in cfg and not any(k in cfg for k in _HIDDEN) and isinstance(cfg["text_config"], dict):
        cfg = cfg["text_config"]  # multimodal wrappers keep the language model one level down
    r = _Reader(cfg, where)
    model_type = (r.text(("model_type",)) or "").lower()
    family = _FAMILIES.get(model_type)

    hidden = r.whole(_HIDDEN, "hidden size", required=True)
    layers = r.whole(_LAYERS, "layer count", required=True)
    heads = r.whole(_HEADS, "attention head count", required=True)
    vocab = r.whole(_VOCAB, "vocabulary size", required=True, agree=False)
    if r.whole(("vocab_size",), "vocabulary size") and cfg["vocab_size"] > vocab:
        r.fail(f"padded_vocab_size {vocab} is smaller than vocab_size {cfg['vocab_size']}")

    # Falcon's first design reads multi_query and ignores num_kv_heads (the hub's expanded configs
    # carry num_kv_heads = 71 beside multi_query = true); its new_decoder_architecture reads num_kv_heads.
    multi_query = r.flag(("multi_query",), None)
    if model_type in _FALCON_TYPES and not r.flag(("new_decoder_architecture",), False):
        kv = 1 if multi_query in (None, True) else heads
    else:
        kv = r.whole(_KV_HEADS, "key/value head count")
        if kv is None and multi_query:
            kv = 1

    head_dim = r.whole(_HEAD_DIM, "head dimension")
    ffn = r.whole(_FFN, "MLP width")

    act = (r.text(_ACT) or "").lower()
    mlp_type = (r.text(("mlp_type",)) or "").lower()  # StarCoder2 writes "default" for a plain MLP
    if "glu" in mlp_type or "gated" in mlp_type:
        gated = True
    elif mlp_type in ("default", "mlp", "plain"):
        gated = False
    elif family is not None:
        gated = family.gated
    else:
        gated = act in ("silu", "swish")  # unknown llama derivatives: a SiLU MLP is a SwiGLU
    if gated:
        mlp = "geglu" if "gelu" in act else "swiglu"
    else:
        mlp = "relu" if act.startswith("relu") else "gelu"

    norm_type = (r.text(("norm_type", "normalization_type")) or "").lower()
    if "rms" in norm_type:
        norm = "rmsnorm"
    elif "layer" in norm_type:
        norm = "layernorm"
    elif family is not None:
        norm = family.norm
    else:
        norm = "rmsnorm" if "rms_norm_eps" in cfg else "layernorm"

    no_bias = r.flag(("no_bias",), None)  # Qwen (1) spells it negatively
    bias = r.flag(_BIAS, None if no_bias is None else not no_bias)
    if bias is None:
        bias = family.bias if family is not None else norm == "layernorm"
    tied = r.flag(("tie_word_embeddings",), family.tied if family is not None else True)
    parallel = r.flag(_PARALLEL, family.parallel if family is not None else False)

    positions = 0
    how = family.positions if family is not None else ""
    if how == "gpt2":
        positions = r.whole(("n_positions", "max_position_embeddings", "n_ctx"), "position count",
                            agree=False) or 1024  # n_positions is the table; n_ctx may differ
    elif how == "gpt_neo":
        positions = r.whole(("max_position_embeddings",), "position count") or 2048
    elif how == "opt":  # OPT's learned table has two extra rows (its positions start at 2)
        positions = (r.whole(("max_position_embeddings",), "position count") or 2048) + 2

    experts = r.whole(_EXPERTS, "expert count", minimum=0) or 0
    top_k = shared = 0
    expert_ffn = None
    if experts:
        top_k = r.whole(_TOP_K, "experts per token")
        if top_k is None:
            r.fail(f"{experts} experts but no experts per token; tried {', '.join(_TOP_K)}")
        expert_ffn = r.whole(_EXPERT_FFN, "expert MLP width")
        width = expert_ffn or ffn or 4 * hidden
        shared = r.whole(("n_shared_experts", "num_shared_experts"), "shared expert count", minimum=0) or 0
        shared_width = r.whole(("shared_expert_intermediate_size",), "shared expert width", minimum=0)
        if shared_width and not shared:
            # Qwen2-MoE gives one shared MLP of this width; shapewise models it as whole experts.
            if shared_width % width:
                r.fail(f"shared_expert_intermediate_size {shared_width} is not a multiple of the expert "
                       f"width {width}; shapewise counts shared experts in whole experts")
            shared = shared_width // width
    return dict(hidden=hidden, num_layers=layers, num_heads=heads, vocab=vocab, num_kv_heads=kv,
                head_dim=head_dim, ffn=ffn, mlp=mlp, tied_embeddings=tied, norm=norm, parallel_attn=parallel,
                bias=bias, learned_positions=positions, num_experts=experts, top_k=top_k,
                expert_ffn=expert_ffn, num_shared_experts=shared)


def _shape_from_config(cfg: dict, where: str, name: str, source: str = "") -> ModelShape:
    fields = _fields_from_config(cfg, where)
    try:
        return _canonical(ModelShape(name=name, source=source, **fields))
    except ShapewiseError as err:
        raise ShapewiseError(f"{where}: {err}") from None


def _config_name(cfg: dict, file: Path) -> str:
    """The model's name: _name_or_path when it names a hub model, else the folder or file name."""
    named = cfg.get("_name_or_path")
    if isinstance(named, str) and named.strip() and not named.startswith((".", "/", "~")) and "\\" not in named:
        return named.strip()
    return file.parent.name if file.name == "config.json" and file.parent.name else file.stem


def load_config(path) -> ModelShape:
    """A ModelShape from a Hugging Face config.json, given the file or a folder holding one."""
    if not isinstance(path, (str, os.PathLike)):
        raise ShapewiseError(f"expected a path to a config.json, got {path!r}")
    file = Path(path)
    if file.is_dir():
        if not (file / "config.json").is_file():
            raise ShapewiseError(f"{file}: folder has no config.json; give the file itself or its folder")
        file = file / "config.json"
    elif not file.exists():
        raise ShapewiseError(f"{file}: no such file; give a config.json or the folder holding one")
    try:
        cfg = json.loads(file.read_text(encoding="utf-8"))
    except OSError as err:
        raise ShapewiseError(f"{file}: cannot read it ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise ShapewiseError(f"{file}: not a text file (not UTF-8), so not a config.json") from None
    except json.JSONDecodeError as err:
        raise ShapewiseError(f"{file}: not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None
    except RecursionError:
        raise ShapewiseError(f"{file}: JSON nested too deeply to be a config.json") from None
    if not isinstance(cfg, dict):
        raise ShapewiseError(f"{file}: holds a JSON {type(cfg).__name__}, but a config.json is an object {{...}}")
    return _shape_from_config(cfg, str(file), _config_name(cfg, file), source=str(file))


# ---- config.json writing ----

_ACT_NAME = {"swiglu": "silu", "geglu": "gelu_pytorch_tanh", "gelu": "gelu_new", "relu": "relu"}


def _template(s: ModelShape) -> dict:
    """A fresh config for s: GPT-2 style when it has learned positions, Llama (or Mixtral) style when
    its MLP is gated, GPT-NeoX style otherwise; _fit then adds whatever that style leaves implicit."""
    if s.learned_positions:
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": s.hidden,
                "n_layer": s.num_layers, "n_head": s.num_heads, "n_inner": s.ffn, "n_positions": s.learned_positions,
                "n_ctx": s.learned_positions, "vocab_size": s.vocab, "activation_function": _ACT_NAME[s.mlp],
                "layer_norm_epsilon": 1e-5, "tie_word_embeddings": s.tied_embeddings}
    if s.gated:
        cfg = {"architectures": ["MixtralForCausalLM" if s.is_moe else "LlamaForCausalLM"],
               "model_type": "mixtral" if s.is_moe else "llama", "hidden_size": s.hidden,
               "intermediate_size": s.ffn_width, "num_hidden_layers": s.num_layers,
               "num_attention_heads": s.num_heads, "num_key_value_heads": s.kv_heads, "head_dim": s.d_head,
               "vocab_size": s.vocab, "hidden_act": _ACT_NAME[s.mlp], "rms_norm_eps": 1e-5,
               "attention_bias": s.bias, "mlp_bias": s.bias, "tie_word_embeddings": s.tied_embeddings}
        return cfg
    return {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_size": s.hidden,
            "intermediate_size": s.ffn_width, "num_hidden_layers": s.num_layers,
            "num_attention_heads": s.num_heads, "vocab_size": s.vocab, "hidden_act": _ACT_NAME[s.mlp],
            "layer_norm_eps": 1e-5, "use_parallel_residual": s.parallel_attn, "attention_bias": s.bias,
            "tie_word_embeddings": s.tied_embeddings}


def _put(cfg: dict, keys, value, fallback: str) -> None:
    """Write value under every spelling of keys the config already uses, or under fallback."""
    present = [k for k in keys if cfg.get(k) is not None]
    for k in present or [fallback]:
        cfg[k] = value


def _fit(cfg: dict, s: ModelShape) -> bool:
    """Change cfg, field by field, until it reads back as s; fields that already match stay as written.
    Returns whether anything had to change."""
    try:
        now = _canonical(ModelShape(name="x", **_fields_from_config(cfg, "config")))
    except ShapewiseError:
        now = None  # an unreadable base: every field gets written
    model_type = str(cfg.get("model_type", "")).lower()
    family = _FAMILIES.get(model_type)

    def differs(*fields) -> bool:
        return now is None or any(getattr(now, f) != getattr(s, f) for f in fields)

    if differs("hidden"):
        _put(cfg, _HIDDEN, s.hidden, "n_embd" if model_type == "gpt2" else "hidden_size")
    if differs("num_layers"):
        _put(cfg, _LAYERS, s.num_layers, "n_layer" if model_type == "gpt2" else "num_hidden_layers")
    if differs("num_heads"):
        _put(cfg, _HEADS, s.num_heads, "n_head" if model_type == "gpt2" else "num_attention_heads")
    if differs("vocab"):
        _put(cfg, _VOCAB, s.vocab, "vocab_size")
    if (now is None or now.d_head != s.d_head) and (
            s.head_dim is not None or any(cfg.get(k) is not None for k in _HEAD_DIM)):
        _put(cfg, _HEAD_DIM, s.d_head, "head_dim")
    if now is None or now.kv_heads != s.kv_heads:
        if model_type in _FALCON_TYPES and not cfg.get("new_decoder_architecture"):
            if s.kv_heads in (1, s.num_heads):
                cfg["multi_query"] = s.kv_heads == 1
            else:  # only Falcon's newer layout has grouped kv heads
                cfg["new_decoder_architecture"] = True
                _put(cfg, ("num_kv_heads", "n_head_kv"), s.kv_heads, "num_kv_heads")
        else:
            _put(cfg, _KV_HEADS, s.kv_heads, "num_key_value_heads")
            if cfg.get("multi_query") is not None:
                cfg["multi_query"] = s.kv_heads == 1
    if (now is None or now.ffn_width != s.ffn_width) and (
            s.ffn is not None or any(cfg.get(k) is not None for k in _FFN)):  # else 4h follows hidden
        key = {"gpt2": "n_inner", "opt": "ffn_dim"}.get(model_type, "intermediate_size")
        _put(cfg, _FFN, s.ffn_width, "ffn_hidden_size" if model_type in _FALCON_TYPES else key)
    if differs("mlp"):
        _put(cfg, _ACT, _ACT_NAME[s.mlp], "activation_function" if model_type in ("gpt2", "opt") else "hidden_act")
        family_gated = family.gated if family is not None else s.gated
        if s.gated != family_gated or cfg.get("mlp_type") is not None:
            cfg["mlp_type"] = "glu" if s.gated else "default"
    if differs("norm"):
        cfg["norm_type"] = "rms_norm" if s.norm == "rmsnorm" else "layer_norm"
    if differs("bias"):
        if cfg.get("no_bias") is not None:
            cfg["no_bias"] = not s.bias
        _put(cfg, _BIAS, s.bias, "bias")
    if differs("tied_embeddings"):
        cfg["tie_word_embeddings"] = s.tied_embeddings
    if differs("parallel_attn"):
        _put(cfg, _PARALLEL, s.parallel_attn, "parallel_attn")
    if differs("learned_positions"):
        how = family.positions if family is not None else ""
        if how and s.learned_positions <= (2 if how == "opt" else 0):
            raise ShapewiseError(f"{model_type} configs always have a learned position table; cannot describe "
                                 f"{s.learned_positions} learned positions in one (drop base to write a fresh config)")
        if how == "gpt2":
            _put(cfg, ("n_positions", "max_position_embeddings", "n_ctx"), s.learned_positions, "n_positions")
        elif how == "gpt_neo":
            cfg["max_position_embeddings"] = s.learned_positions
        elif how == "opt":
            cfg["max_position_embeddings"] = s.learned_positions - 2
        else:
            raise ShapewiseError(f"{model_type or 'untyped'} configs have no learned position table; cannot "
                                 f"describe {s.learned_positions} learned positions in one (drop base to write "
                                 f"a fresh config)")
    if differs("num_experts", "top_k", "expert_ffn", "num_shared_experts") or (
            now is not None and s.is_moe and now.expert_width != s.expert_width):
        if s.is_moe:
            _put(cfg, _EXPERTS, s.num_experts, "num_local_experts")
            _put(cfg, _TOP_K, s.top_k, "num_experts_per_tok")
            if s.expert_width != s.ffn_width or cfg.get("moe_intermediate_size") is not None:
                cfg["moe_intermediate_size"] = s.expert_width
            cfg.pop("shared_expert_intermediate_size", None)
            cfg["n_shared_experts"] = s.num_shared_experts
        else:
            for k in (*_EXPERTS, *_TOP_K, "moe_intermediate_size", "n_shared_experts", "num_shared_experts",
                      "shared_expert_intermediate_size"):
                cfg.pop(k, None)
    return now is None or any(getattr(now, f) != getattr(s, f) for f in STRUCTURAL_FIELDS)


def to_hf_config(shape: ModelShape, base: dict | None = None) -> dict:
    """A config.json dict describing shape. With base (an original config), a copy of it with the changed
    fields rewritten under the keys base already uses; without, a fresh Llama/GPT-2/NeoX-style config."""
    if base is not None and not isinstance(base, dict):
        raise ShapewiseError(f"base must be a config dict, got {type(base).__name__}")
    target = _canonical(shape)
    cfg = copy.deepcopy(base) if base is not None else _template(target)
    inner = cfg.get("text_config")
    if not (isinstance(inner, dict) and not any(k in cfg for k in _HIDDEN)):
        inner = cfg  # the language model's fields sit at the top unless a multimodal wrapper nests them
    if _fit(inner, target) or base is None:
        cfg["_name_or_path"] = shape.name  # base's name would now mislabel it
    back = _canonical(ModelShape(name=shape.name, **_fields_from_config(cfg, "written config")))
    for field in STRUCTURAL_FIELDS:
        if getattr(back, field) != getattr(target, field):  # a gap in _fit, not bad input
            raise ShapewiseError(f"cannot write {field}={getattr(target, field)!r} into this "
                                 f"{cfg.get('model_type', 'generic')} config (it reads back as "
                                 f"{getattr(back, field)!r})")
    return cfg
