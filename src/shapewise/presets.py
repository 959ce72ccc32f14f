"""Named presets of published models, each with its source and published parameter count, and
lookup by name (case-insensitive; Hugging Face ids of the same checkpoints work too)."""

from __future__ import annotations

import difflib
import re

from .errors import ShapewiseError
from .shapes import ModelShape, canonical

# Where published_params comes from (beside each preset): "card"/"paper" for the authors' own figure,
# "hub" for the exact total the Hugging Face hub reports for the checkpoint (its safetensors metadata),
# used where the authors only give a size label such as "7B". Labels alone can be off by more than the
# 0.5% the tests allow (GPT-3's "350M" is 355.9M); tests/test_shapes.py lists those cases and why.
_HF = "https://huggingface.co/{}/blob/main/config.json"
_GPT3 = "GPT-3 paper, arXiv:2005.14165, Table 2.1"

_GPT2 = dict(mlp="gelu", norm="layernorm", bias=True, tied_embeddings=True, learned_positions=1024, vocab=50257)
_GPT3_ = dict(mlp="gelu", norm="layernorm", bias=True, tied_embeddings=True, learned_positions=2048, vocab=50257)
# Pythia, GPT-NeoX-20B and Phi-2 were trained at 2,048 tokens (their configs' max_position_embeddings).
_NEOX = dict(mlp="gelu", norm="layernorm", bias=True, tied_embeddings=False, parallel_attn=True, context=2048)
# Pythia and GPT-NeoX-20B rotate a quarter of each head (rotary_pct 0.25), Phi-2 40% (partial_rotary_factor),
# BLOOM none (ALiBi), as their checkpoints' configs say. (Calibration's draws measured these presets with
# every head dim rotated and Mistral 7B without its window, and keep drawing them so: draws.measured_preset.)
_PYTHIA = dict(**_NEOX, rotary_fraction=0.25)  # Pythia's and GPT-NeoX-20B's: a quarter of each head
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
    ModelShape(name="pythia-70m", hidden=512, num_layers=6, num_heads=8, ffn=2048, vocab=50304, **_PYTHIA,
               source=_HF.format("EleutherAI/pythia-70m"), published_params=70_426_624),
    ModelShape(name="pythia-160m", hidden=768, num_layers=12, num_heads=12, ffn=3072, vocab=50304, **_PYTHIA,
               source=_HF.format("EleutherAI/pythia-160m"), published_params=162_322_944),
    ModelShape(name="pythia-410m", hidden=1024, num_layers=24, num_heads=16, ffn=4096, vocab=50304, **_PYTHIA,
               source=_HF.format("EleutherAI/pythia-410m"), published_params=405_334_016),
    ModelShape(name="pythia-1b", hidden=2048, num_layers=16, num_heads=8, ffn=8192, vocab=50304, **_PYTHIA,
               source=_HF.format("EleutherAI/pythia-1b"), published_params=1_011_781_632),
    ModelShape(name="pythia-1.4b", hidden=2048, num_layers=24, num_heads=16, ffn=8192, vocab=50304, **_PYTHIA,
               source=_HF.format("EleutherAI/pythia-1.4b"), published_params=1_414_647_808),
    ModelShape(name="pythia-2.8b", hidden=2560, num_layers=32, num_heads=32, ffn=10240, vocab=50304, **_PYTHIA,
               source=_HF.format("EleutherAI/pythia-2.8b"), published_params=2_775_208_960),
    ModelShape(name="pythia-6.9b", hidden=4096, num_layers=32, num_heads=32, ffn=16384, vocab=50432, **_PYTHIA,
               source=_HF.format("EleutherAI/pythia-6.9b"), published_params=6_857_302_016),
    ModelShape(name="pythia-12b", hidden=5120, num_layers=36, num_heads=40, ffn=20480, vocab=50688, **_PYTHIA,
               source=_HF.format("EleutherAI/pythia-12b"), published_params=11_846_072_320),
    ModelShape(name="gpt-neox-20b", hidden=6144, num_layers=44, num_heads=64, ffn=24576, vocab=50432, **_PYTHIA,
               source=_HF.format("EleutherAI/gpt-neox-20b"), published_params=20_554_567_680),  # card
    # Llama family: Meta's papers say 7B/13B/70B/8B; the exact totals are the hub's.
    ModelShape(name="llama2-7b", hidden=4096, num_layers=32, num_heads=32, ffn=11008, vocab=32000, **_LLAMA,
               context=4096, source=_HF.format("meta-llama/Llama-2-7b-hf"), published_params=6_738_415_616),
    ModelShape(name="llama2-13b", hidden=5120, num_layers=40, num_heads=40, ffn=13824, vocab=32000, **_LLAMA,
               context=4096, source=_HF.format("meta-llama/Llama-2-13b-hf"), published_params=13_015_864_320),
    ModelShape(name="llama2-70b", hidden=8192, num_layers=80, num_heads=64, num_kv_heads=8, ffn=28672,
               vocab=32000, **_LLAMA,
               context=4096, source=_HF.format("meta-llama/Llama-2-70b-hf"), published_params=68_976_648_192),
    ModelShape(name="llama3-8b", hidden=4096, num_layers=32, num_heads=32, num_kv_heads=8, ffn=14336,
               vocab=128256, **_LLAMA,
               context=8192, source=_HF.format("meta-llama/Meta-Llama-3-8B"), published_params=8_030_261_248),
    ModelShape(name="llama3-70b", hidden=8192, num_layers=80, num_heads=64, num_kv_heads=8, ffn=28672,
               vocab=128256, **_LLAMA,
               context=8192, source=_HF.format("meta-llama/Meta-Llama-3-70B"), published_params=70_553_706_496),
    ModelShape(name="mistral-7b", hidden=4096, num_layers=32, num_heads=32, num_kv_heads=8, ffn=14336,
               vocab=32000, **_LLAMA,  # Mistral's post says 7.3B; 7,241,732,096 is the hub's
               window=4096,  # v0.1's sliding window on every layer (its config's sliding_window)
               context=32768, source=_HF.format("mistralai/Mistral-7B-v0.1"), published_params=7_241_732_096),
    ModelShape(name="mixtral-8x7b", hidden=4096, num_layers=32, num_heads=32, num_kv_heads=8, ffn=14336,
               vocab=32000, num_experts=8, top_k=2, expert_ffn=14336, **_LLAMA,  # paper: 47B total
               context=32768, source=_HF.format("mistralai/Mixtral-8x7B-v0.1"), published_params=46_702_792_704),
    # Qwen2 has q/k/v biases but no others (qkv_bias). Qwen2's report says 7.07B, counting the untied
    # embedding once; hub total here, which the count meets to the parameter.
    ModelShape(name="qwen2-7b", hidden=3584, num_layers=28, num_heads=28, num_kv_heads=4, ffn=18944,
               vocab=152064, **_LLAMA, qkv_bias=True,
               context=131072, source=_HF.format("Qwen/Qwen2-7B"), published_params=7_615_616_512),
    # Gemma: 16 heads of 256 on a 3072-wide model, so head_dim is explicit. Count: paper Table 2,
    # embedding 786,825,216 + non-embedding 7,751,248,896 (its embedding count has 256,128 rows).
    ModelShape(name="gemma-7b", hidden=3072, num_layers=28, num_heads=16, head_dim=256, ffn=24576,
               vocab=256000, mlp="geglu", norm="rmsnorm", bias=False, tied_embeddings=True,
               context=8192, source=_HF.format("google/gemma-7b"), published_params=8_538_074_112),
    # Falcon and Phi put attention and MLP side by side under one LayerNorm (norms_per_layer 1). Falcon's
    # card says 7B, the only figure it gives.
    ModelShape(name="falcon-7b", hidden=4544, num_layers=32, num_heads=71, num_kv_heads=1, vocab=65024,
               mlp="gelu", norm="layernorm", bias=False, tied_embeddings=True, parallel_attn=True, norms_per_layer=1,
               source=_HF.format("tiiuae/falcon-7b"), published_params=7_000_000_000),
    ModelShape(name="phi-2", hidden=2560, num_layers=32, num_heads=32, ffn=10240, vocab=51200, **_NEOX,
               rotary_fraction=0.4, norms_per_layer=1, lm_head_bias=True, source=_HF.format("microsoft/phi-2"),
               published_params=2_779_683_840),  # hub, its head's bias included; card: 2.7B
    ModelShape(name="opt-1.3b", hidden=2048, num_layers=24, num_heads=32, ffn=8192, vocab=50272,
               mlp="relu", norm="layernorm", bias=True, tied_embeddings=True,
               learned_positions=2050,  # OPT offsets positions by 2: 2048 + 2 rows
               source=_HF.format("facebook/opt-1.3b"), published_params=1_315_758_080),  # hub; paper: 1.3B
    # BLOOM adds a LayerNorm after the embedding (embed_norm).
    ModelShape(name="bloom-7b1", hidden=4096, num_layers=30, num_heads=32, vocab=250880,
               mlp="gelu", norm="layernorm", bias=True, tied_embeddings=True, rotary_fraction=0.0,  # ALiBi
               embed_norm=True,
               source=_HF.format("bigscience/bloom-7b1"), published_params=7_069_016_064),  # card
    ModelShape(name="starcoder2-15b", hidden=6144, num_layers=40, num_heads=48, num_kv_heads=4, ffn=24576,
               vocab=49152, mlp="gelu", norm="layernorm", bias=True, tied_embeddings=False,
               context=16384, source=_HF.format("bigcode/starcoder2-15b"), published_params=15_000_000_000),  # card: 15B
)


PRESETS: dict[str, ModelShape] = {s.name: canonical(s) for s in _TABLE}


# ---- preset lookup ----

# Spellings that canonical-key folding (below) does not reach.
_ALIASES = {
    "gpt2small": "gpt2", "neox20b": "gpt-neox-20b", "bloom7.1b": "bloom-7b1",
    "mixtral": "mixtral-8x7b", "mistral": "mistral-7b", "falcon": "falcon-7b", "phi2": "phi-2",
}
# Checkpoint-name suffixes that do not change the shape (chat/instruct tunes, dedup, HF conversions), and
# versions, which may: Mistral-7B-v0.3's vocabulary has 32,768 rows where v0.1's has 32,000.
_SUFFIX = re.compile(r"(-(hf|chat|instruct|it|base|deduped|v\d+(\.\d+)*))+$")
_VERSION = re.compile(r"v\d+(\.\d+)*")


def _fold(name: str) -> tuple[str, str, tuple[str, ...]]:
    """A model name as (org, key, versions): its org prefix ("" for none); the key, with case, '_' vs '-',
    'meta-', shape-neutral suffixes and dashes folded away (so llama-2-7b, Llama_2_7b and llama2-7b meet);
    and the versions among its suffixes (v0.1), which may change the shape."""
    org, _, s = name.strip().lower().replace("_", "-").rpartition("/")
    suffix = _SUFFIX.search(s)
    versions = tuple(p for p in suffix.group().split("-") if _VERSION.fullmatch(p)) if suffix else ()
    return org, _SUFFIX.sub("", s).removeprefix("meta-").replace("-", ""), versions


def _key(name: str) -> str:
    return _fold(name)[1]


_KEYS: dict[str, str] = {_key(n): n for n in PRESETS}
_KEYS.update(_ALIASES)


def hub_id(preset: str) -> str | None:
    """The Hugging Face checkpoint a preset's numbers come from (its source), or None (GPT-3 has none)."""
    head, tail = _HF.split("{}")
    source = PRESETS[preset].source
    return source[len(head):-len(tail)] if source.startswith(head) and source.endswith(tail) else None


def _lookup(name: str) -> tuple[str | None, str | None]:
    """(the preset name means, the preset it would mean but for its org or version): a hub id means a
    preset only when it names the preset's own checkpoint, up to shape-neutral suffixes (another org's
    gpt2 may be any model; Mistral-7B-v0.3 is not v0.1's shape), and a name with a version only when the
    version is the checkpoint's."""
    org, key, versions = _fold(name)
    found = _KEYS.get(key)
    if found is None or not (org or versions):
        return found, None
    checkpoint = hub_id(found)
    if checkpoint is None:
        return None, found
    its_org, its_key, its_versions = _fold(checkpoint)
    if its_versions != versions or (org and (its_org, its_key) != (org, key)):
        return None, found
    return found, None


def preset_key(name: str) -> str | None:
    """The preset a name (or hub id of the same checkpoint) means, or None."""
    return _lookup(name)[0] if isinstance(name, str) else None


def preset_like(name: str) -> str | None:
    """The preset a name would mean but for its org or version (randomorg/gpt2: gpt2), or None."""
    return _lookup(name)[1] if isinstance(name, str) else None


def get_model(name: str) -> ModelShape:
    """The preset called name (case-insensitive; its checkpoint's hub id, meta-llama/Llama-2-7b-hf, too)."""
    if not isinstance(name, str) or not name.strip():
        raise ShapewiseError(f"give a model name, got {name!r}; run `shapewise models` to list the presets")
    found, like = _lookup(name)
    if found:
        return PRESETS[found]
    if like:
        checkpoint = hub_id(like)
        what = f"is {checkpoint}, whose shape another org's model or another version need not have" \
            if checkpoint else "has no versions"
        raise ShapewiseError(f"unknown model {name!r}: the preset {like} {what}; name {like} to price that "
                             f"shape, or give the model's config.json")
    guess = name.strip().lower().replace("_", "-").rsplit("/", 1)[-1]
    close = difflib.get_close_matches(guess, list(PRESETS), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise ShapewiseError(f"unknown model {name!r}; {hint}run `shapewise models` to list the presets")
