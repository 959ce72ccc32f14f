"""Hugging Face config.json: reading one into a ModelShape, and writing a ModelShape as one."""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

from .errors import ShapewiseError, warn
from .families import (
    ACTIVATIONS,
    BAICHUAN_ROTARY_HIDDEN,
    ENCODER_ONLY,
    FALCON_TYPES,
    FAMILIES,
    FFN_FOUR_TIMES_HIDDEN,
    FIRST_LAYOUTS,
    LLAVA_OWN_LANGUAGE_MODELS,
    MINICPMV_LANGUAGE_MODELS,
    NESTED_DEFAULTS,
    NOT_ATTENTION,
    NOT_ATTENTION_KEYS,
    UNMODELLED_ARCHITECTURES,
    UNMODELLED_TYPES,
    VISION_ONLY,
)
from .limits import LAYERS, flag, json_int
from .shapes import STRUCTURAL_FIELDS, ModelShape, canonical

# ---- config.json reading ----

# Every spelling tried for each field, in order of preference.
_HIDDEN = ("hidden_size", "n_embd", "d_model", "dim", "n_embed")  # n_embed: BLOOM
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HEADS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
_KV_HEADS = ("num_key_value_heads", "n_head_kv", "num_kv_heads", "n_kv_heads")
_HEAD_DIM = ("head_dim", "kv_channels", "attention_head_dim")  # attention_head_dim: Hunyuan
_FFN = ("intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size")
_VOCAB = ("padded_vocab_size", "vocab_size")  # the padded size is the real table size
_ACT = ("hidden_activation", "hidden_act", "activation_function")  # Gemma: hidden_activation wins
_BIAS = ("bias", "use_bias", "enable_bias", "attention_bias", "mlp_bias", "add_bias_linear")
_PARALLEL = ("use_parallel_residual", "parallel_attn", "parallel_residual")
_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")  # the last: ERNIE 4.5's
_TOP_K = ("num_experts_per_tok", "moe_top_k", "num_experts_per_token", "moe_k")  # Kimi Linear's; ERNIE 4.5's
_EXPERT_FFN = ("moe_intermediate_size",)
# DBRX nests its attention and MoE fields in blocks, read flattened as prefix + key (attn_kv_n_heads)
_BLOCKS = {"attn_config": "attn_", "ffn_config": "ffn_"}


def _ffn_keys(family) -> tuple:
    """Where a config of this family gives its dense MLP's width, for reading and writing alike."""
    return (family.ffn_key,) if family and family.ffn_key else (*_FFN, "ffn_ffn_hidden_size")


def _bias_keys(family) -> tuple:
    """Where a config of this family says every linear has a bias: not the key of its q, k and v biases alone,
    and no key where the type's code fixes its biases (Phi)."""
    if family is not None and family.bias_fixed:
        return ()
    return tuple(k for k in _BIAS if not (family and k == family.qkv_bias))


def _expert_ffn_keys(family) -> tuple:
    return (family.expert_ffn_key,) if family and family.expert_ffn_key else _EXPERT_FFN


def _top_k_keys(family) -> tuple:
    return (family.top_k_key,) if family and family.top_k_key else (*_TOP_K, "ffn_moe_top_k")


def _json_words(value) -> str:
    """A JSON value as a user reads it: small values as written, others by their JSON kind."""
    if value is None:
        return "null"
    if isinstance(value, (list, dict)) and len(json.dumps(value)) > 40:
        return "a list" if isinstance(value, list) else "an object {...}"
    if isinstance(value, str):
        return f"the string {json.dumps(value)[:40]}"
    return json.dumps(value)[:40]


class _Reader:
    """Reads the fields of one config dict; every error names where the dict came from."""

    def __init__(self, cfg: dict, where: str, used: set | None = None):
        self.cfg, self.where = cfg, where
        self.used = set() if used is None else used  # every key looked up, for _unread

    def fail(self, message: str):
        raise ShapewiseError(f"{self.where}: {message}")

    def _present(self, keys) -> list[str]:
        self.used.update(keys)
        return [k for k in keys if self.cfg.get(k) is not None]  # null counts as absent (n_inner: null)

    def get(self, key: str):
        """A key's raw value (None when absent), marked as read."""
        self.used.add(key)
        return self.cfg.get(key)

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
            if isinstance(v, float) and math.isfinite(v) and abs(v) >= 2 ** 53:  # 1e30: whole, but no size
                self.fail(f"{k} is {v:g}, far too large for a model's {what}")
            if isinstance(v, float) and v.is_integer():  # refused alike wherever read: a size is written whole
                self.fail(f"{k} must be a whole number written without a decimal point, got {v!r} "
                          f"(write {int(v)})")
            if isinstance(v, bool) or not isinstance(v, int):
                self.fail(f"{k} must be a whole number, got {_json_words(v)}")
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

    def number(self, key: str) -> int | float | None:
        """A number (None when absent or null)."""
        v = self.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            self.fail(f"{key} must be a number, got {_json_words(v)}")
        return v

    def mapping(self, key: str) -> dict | None:
        """An object {...} (None when absent or null)."""
        v = self.get(key)
        if v is not None and not isinstance(v, dict):
            self.fail(f"{key} must be an object {{...}} or null, got {_json_words(v)}")
        return v


# Multimodal types whose encoder no config key names (their modeling code builds it)
_CODE_ENCODERS = {"molmo": "vision backbone (built by its code, named by no config key)",
                  "internlmxcomposer": "vision encoder and Q-Former (num_query_token; built by its code, named by "
                                       "no config key)"}
# What a known type's code builds beside what shapewise prices, said in one line
_UNPRICED = {"klear": "its coefficient layer (hidden → 2 and a bias, each layer: 4,098 weights blending the shared "
                      "and the routed experts' outputs) is neither counted nor priced",
             # LLaDA2MoeAttention: is_causal False; it denoises a block of masked tokens at a time, each attending to
             # its whole block and the blocks before
             **{t: "its attention is not causal (a masked-diffusion model, LLaDA2MoeAttention's is_causal false: a "
                   "token attends to its whole block and the blocks before); shapewise prices causal attention and "
                   "one forward pass a token, where its decoding runs several a block"
                for t in ("llada2_moe", "llada2_moe_veomni")}}
_NESTED = ("text_config", "language_config", "llm_config", "llm_cfg")  # Gemma 3, LLaVA; DeepSeek-VL2; InternVL; VILA
_ENCODERS = {"vision_config": "vision encoder", "audio_config": "audio encoder", "vision_encoder": "vision encoder",
             "vision_tower": "vision encoder", "mm_vision_tower": "vision encoder",
             "vision_backbone": "vision encoder", "gen_vision_config": "image generator",
             "img_processor": "image encoder",  # img_processor: Phi-3-vision's CLIP encoder
             "vision_tower_cfg": "vision encoder"}  # VILA's


def _inner(cfg: dict) -> tuple[str, dict] | None:
    """A multimodal wrapper's language model config and its key, where the wrapper's own top level lacks
    a width or a layer count (Voxtral's top level carries its text width alone)."""
    for key in _NESTED:
        inner = cfg.get(key)
        if isinstance(inner, dict) and not (any(cfg.get(k) is not None for k in _HIDDEN)
                                            and any(cfg.get(k) is not None for k in _LAYERS)):
            return key, inner
    return None


def _unwrap(cfg: dict) -> dict:
    """The language model's fields: multimodal wrappers (Gemma-3, LLaVA) nest them in text_config. The
    wrapper's own tie_word_embeddings decides whether the language model's output head is tied (Mistral 3
    writes it only there), unless text_config says."""
    found = _inner(cfg)
    if found is not None:
        inner = found[1]
        if inner.get("tie_word_embeddings") is None and cfg.get("tie_word_embeddings") is not None:
            return {**inner, "tie_word_embeddings": cfg["tie_word_embeddings"]}
        return inner
    return cfg


# deepseek_sparse_attention (GLM-5.2's): full attention through a sparse indexer, priced as dense attention and
# said so (by its index_topk, or where the file gives none, by its layer_types)
_ATTENTION_LAYERS = ("full_attention", "sliding_attention", "chunked_attention", "attention",
                     "deepseek_sparse_attention")


class NotATransformer(ShapewiseError):
    """A config of an architecture shapewise does not price (state-space, recurrent, hybrid)."""


# Per-layer lists of a layer-wise scaled model (OpenELM: query and key/value heads, MLP width multipliers)
_LAYERWISE = ("num_query_heads", "num_kv_heads", "ffn_multipliers")


def _refuse_diffusers(cfg: dict, where: str) -> None:
    # Diffusers writes each model of a pipeline its own config.json (transformer/, vae/, MiniMax-H3's video DiT
    # among them) under _class_name and _diffusers_version: no language model and no vocabulary, so it was
    # refused for the vocab_size it lacks, without saying what the file is
    version = cfg.get("_diffusers_version")
    if version is None:
        return
    named = cfg.get("_class_name")
    named = f" ({named})" if isinstance(named, str) and named.strip() else ""
    raise NotATransformer(f"{where}: a diffusers model's config{named}, not a transformers one (_diffusers_version "
                          f"{version}); shapewise prices transformers language models and cannot price it (a "
                          f"pipeline's text encoder, if it has one, has its own config.json in text_encoder/)")


def _refuse_non_attention(cfg: dict, model_type: str, where: str) -> None:
    arch = cfg.get("architectures")
    named = f"{model_type} ({arch[0]})" if isinstance(arch, list) and arch and isinstance(arch[0], str) else model_type
    blocks = cfg.get("block_configs")
    if isinstance(blocks, list) and blocks:  # Nemotron-NAS: each layer's attention and MLP its own
        raise NotATransformer(f"{where}: {named or 'this model'} gives each of its {len(blocks)} layers its own "
                              f"attention and MLP (block_configs); shapewise models a stack of identical layers and "
                              f"cannot price it")
    scaled = [k for k in _LAYERWISE if isinstance(cfg.get(k), list) and len({json.dumps(v) for v in cfg[k]}) > 1]
    if scaled:  # OpenELM: layer-wise scaling, each layer its own head counts and MLP width
        raise NotATransformer(f"{where}: {named or 'this model'} scales its layers one by one ({', '.join(scaled)} "
                              f"differ by layer); shapewise models a stack of identical layers and cannot price it")
    if isinstance(cfg.get("thinker_config"), dict):  # Qwen2.5-Omni, Qwen3-ASR: no language model a level down
        talker = " and a talker (talker_config), a second transformer speaking its answers" \
            if isinstance(cfg.get("talker_config"), dict) else ""
        raise NotATransformer(f"{where}: {named or 'this model'} nests its language model in a thinker "
                              f"(thinker_config's text_config, beside its encoders){talker}; shapewise reads a "
                              f"language model at the top level or in text_config and cannot price it")
    halves = [k for k in ("encoder_layers", "decoder_layers") if cfg.get(k) is not None]
    if cfg.get("is_encoder_decoder") is True or halves:  # Whisper, T5, BART: no decoder-only stack
        said = ", ".join(halves) if halves else "is_encoder_decoder"
        raise NotATransformer(f"{where}: {named or 'this model'} is an encoder-decoder model ({said}); shapewise "
                              f"prices decoder-only transformers and cannot price its encoder or cross-attention")
    if model_type in ENCODER_ONLY:  # BERT, RoBERTa: bidirectional layers, no causal head
        raise NotATransformer(f"{where}: {named} is an encoder-only model (every token attends to every other, "
                              f"no causal language-model head); shapewise prices decoder-only transformers and "
                              f"cannot price it")
    if model_type in VISION_ONLY:  # an image tower (or CLIP's pair), often a multimodal model's vision_config
        raise NotATransformer(f"{where}: {named} is an image model (a vision encoder, or CLIP's image and text "
                              f"encoders: no language-model head); shapewise prices decoder-only language "
                              f"transformers and cannot price it")
    what = NOT_ATTENTION.get(model_type)
    if what is None and model_type not in FAMILIES:
        hybrid = [k for k in NOT_ATTENTION_KEYS if k in cfg]
        types = cfg.get("layer_types")
        other = sorted({t for t in types if isinstance(t, str) and t not in _ATTENTION_LAYERS}) \
            if isinstance(types, list) else []
        if other:
            hybrid.append(f"layer_types of {', '.join(other)}")
        what = f"not an attention-only transformer (its config has {', '.join(hybrid)})" if hybrid else None
    if what:
        raise NotATransformer(f"{where}: {named or 'this model'} is {what}; shapewise models attention "
                             f"transformers only and cannot price its other layers")


# Keys of structures shapewise has no ops for, whatever the model type: set (and not neutral), they refuse
# the file, saying what the model computes (DeepSeek-V4's are the first such file).
_UNMODELLED = {"o_lora_rank": "grouped low-rank output projection (o_lora_rank, o_groups)",
               "compress_ratios": "attention over compressed keys by layer (compress_ratios)",
               "hc_mult": "hyper-connections, several residual streams a layer (hc_mult)",
               "attention_out_bias": "bias on the attention output alone (attention_out_bias)",
               # IQuest-Coder Loop: each token runs the layers loop_num times, the second pass gated per head
               # between attention over the first pass's keys and over a local window (loop_window_size)
               "loop_num": "second pass through every layer a token, gated per head against attention over a "
                           "local window (loop_num, loop_window_size)"}
_UNMODELLED_NEUTRAL = {"hc_mult": 1, "loop_num": 1}


def _refuse_unmodelled(r: _Reader) -> None:
    """Refuses a config whose layers compute what shapewise has no ops for, naming each such key; and one
    whose layers differ in head count (num_attention_heads_per_layer: Laguna's full and sliding layers)."""
    found = [what for key, what in _UNMODELLED.items()
             if r.get(key) not in (None, False, 0, [], {}, "", _UNMODELLED_NEUTRAL.get(key))]
    by_type = UNMODELLED_TYPES.get(str(r.cfg.get("model_type", "")).lower())
    if by_type:  # what the type's code builds whatever the file says (AFMoE's attention gate)
        found.append(by_type)
    names = r.cfg.get("architectures")
    names = [a.lower() for a in names if isinstance(a, str)] if isinstance(names, list) else []
    found += [what for start, what in UNMODELLED_ARCHITECTURES.items() if any(a.startswith(start) for a in names)]
    if found:
        r.fail(f"its {'; its '.join(found)}: shapewise has no ops for {'these' if len(found) > 1 else 'it'} "
               f"and cannot price the model")
    kinds = r.get("attn_type_list")  # MiniMax: 1 a softmax-attention layer, 0 a lightning (linear) attention one
    if isinstance(kinds, list) and 0 in kinds:
        r.fail(f"its lightning (linear) attention on {kinds.count(0)} of its {len(kinds)} layers (attn_type_list 0): "
               f"shapewise has no ops for it and cannot price the model")
    per_layer = r.get("num_attention_heads_per_layer")
    if per_layer not in (None, []):
        if not isinstance(per_layer, list):
            r.fail(f"num_attention_heads_per_layer must be a list of one head count a layer, got "
                   f"{_json_words(per_layer)}")
        heads = _one_value(r, "num_attention_heads_per_layer")
        said = r.cfg.get("num_attention_heads")
        if said is not None and heads != said:
            r.fail(f"num_attention_heads_per_layer gives every layer {json.dumps(heads)} heads and "
                   f"num_attention_heads {json.dumps(said)}: they disagree about the attention head count")


def _one_value(r: _Reader, key: str):
    """A per-layer list's value where every layer has the same; else refused, naming the key."""
    values = r.get(key)
    if not values:
        r.fail(f"{key} is an empty list; give one value per layer")
    if any(v != values[0] for v in values):
        seen = ", ".join(dict.fromkeys(json.dumps(v) for v in values))
        r.fail(f"{key} differs by layer ({seen[:60]}): shapewise prices models whose layers are alike")
    return values[0]


def _layer_list(r: _Reader, key: str) -> list[int]:
    value = r.get(key) or []
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        r.fail(f"{key} must be a list of layer numbers")
    return value


def _moe_dense_layers(r: _Reader, layers: int) -> int:
    """How many layers of an MoE model have a dense MLP instead of experts, by the rule whose keys the
    config carries (whatever its type: Kimi K2 writes DeepSeek-V3's)."""
    present = set(r._present(("first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers",
                              "interleave_moe_layer_step", "moe_layers", "moe_layer_start_index",
                              "moe_layer_end_index", "moe_layer_interval", "num_dense_layers")))
    if "num_dense_layers" in present:  # LFM2-MoE, AFMoE: a layer is MoE when idx >= num_dense_layers
        return min(r.whole(("num_dense_layers",), "dense layer count", minimum=0) or 0, layers)
    if r.get("mlp_layer_types") is not None:  # Laguna: "dense" or "sparse", one a layer
        kinds = _layer_entries(r, "mlp_layer_types", layers, is_entry=_is_mlp_kind, entry='"dense" or "sparse"')
        return kinds.count("dense")
    if present & {"first_k_dense_replace", "moe_layer_freq"}:
        # DeepseekV3: a layer is MoE when idx >= first_k_dense_replace and idx % moe_layer_freq == 0
        first = r.whole(("first_k_dense_replace",), "dense layer count", minimum=0) or 0
        if isinstance(r.get("moe_layer_freq"), list):  # MiMo-V2-Flash: one entry a layer, 1 where it is MoE
            moe = _layer_entries(r, "moe_layer_freq", layers)
            return sum(1 for i in range(layers) if not (i >= first and moe[i]))
        freq = r.whole(("moe_layer_freq",), "MoE layer frequency") or 1
        return sum(1 for i in range(layers) if not (i >= first and i % freq == 0))
    if present & {"moe_layer_start_index", "moe_layer_end_index", "moe_layer_interval"}:
        # ERNIE 4.5 (Ernie4_5_MoeConfig): MoE where start <= idx <= end (-1: the last layer) and
        # (idx + 1) % moe_layer_interval == 0
        start = r.whole(("moe_layer_start_index",), "first MoE layer", minimum=0) or 0
        end = r.get("moe_layer_end_index")
        end = layers - 1 if end in (None, -1) else r.whole(("moe_layer_end_index",), "last MoE layer", minimum=0)
        step = r.whole(("moe_layer_interval",), "MoE layer interval") or 1
        return sum(1 for i in range(layers) if not (start <= i <= end and (i + 1) % step == 0))
    if present & {"decoder_sparse_step", "mlp_only_layers"}:
        # Qwen-MoE: dense where listed in mlp_only_layers or (idx + 1) % decoder_sparse_step != 0
        step = r.whole(("decoder_sparse_step",), "sparse step") or 1
        only = _layer_list(r, "mlp_only_layers")
        return sum(1 for i in range(layers) if i in only or (i + 1) % step)
    if present & {"interleave_moe_layer_step", "moe_layers"}:
        # Llama 4: MoE at the layers listed in moe_layers, by default every interleave_moe_layer_step-th
        step = r.whole(("interleave_moe_layer_step",), "MoE layer step") or 1
        moe = _layer_list(r, "moe_layers") or range(step - 1, layers, step)
        return layers - len({i for i in moe if 0 <= i < layers})
    return 0


# Keys whose value shapewise reads as present or not, or never reads (rope_scaling, query_pre_attn_scalar),
# and whose kind it checks all the same: a model's code computes with them, so one of the wrong kind (a
# string for a number) says the file is not the model it claims, which is refused rather than priced.
_NUMBERS = ("rope_theta", "final_logit_softcapping", "attn_logit_softcapping", "query_pre_attn_scalar",
            "expansion_ratio")
_OBJECTS = ("rope_scaling", "rope_parameters", *_BLOCKS)


def _fields_from_config(cfg: dict, where: str) -> tuple[dict, list[str], list[str]]:
    """ModelShape keyword arguments (all structural fields) read from a config dict, the names of the
    fields guessed because neither the file nor a known model type's defaults give them, and notes on
    what the file says that shapewise prices otherwise (each a warning)."""
    _refuse_diffusers(cfg, where)
    nested = _inner(cfg) is not None
    outer, cfg = cfg, _unwrap(cfg)
    named = _type_from_architectures(cfg)
    if named:  # no model_type, but a class whose configuration class has one (MiniCPM3-4B's copy in LLM-TPU)
        cfg = {**cfg, "model_type": named}
    r = _Reader(cfg, where)
    model_type = (r.text(("model_type",)) or "").lower()
    _refuse_non_attention(cfg, model_type, where)
    for key in _NUMBERS:
        r.number(key)
    for key in _OBJECTS:
        r.mapping(key)
    _context(r)  # read by some rules only, refused by all when it is not a length
    if nested and model_type in NESTED_DEFAULTS:
        cfg = {**dict(NESTED_DEFAULTS[model_type]), **cfg}
        r = _Reader(cfg, where, r.used)
    if model_type == "dbrx":  # DBRX nests its attention and MoE fields
        cfg = {**cfg, **{prefix + k: v for block, prefix in _BLOCKS.items() for k, v in (cfg.get(block) or {}).items()}}
        r = _Reader(cfg, where, r.used)
    family = _family(cfg, model_type)
    if family is None and model_type == "llava" and cfg.get("mm_vision_tower") is not None:
        r.fail(f"LLaVA's own {_llava_own_class(cfg)} builds its language model on a class shapewise does not read "
               f"in this layout (it reads {', '.join(LLAVA_OWN_LANGUAGE_MODELS)})")
    if model_type == "olmo" and r.get("d_model") is not None:
        cfg = _olmo_in_transformers_keys(cfg, where)
        r = _Reader(cfg, where, r.used)
    if model_type == "telechat" and r.get("n_embd") is not None:  # TeleChat-52B's GPT-2-derived code
        _telechat_52b_as_read(r)
    if model_type == "gpt_neo":
        cfg = _gpt_neo_layers_as_layer_types(r)
        r = _Reader(cfg, where, r.used)
    left_out = [k for k, _ in family.defaults if k not in cfg] if family is not None else []
    if family is not None and family.defaults:  # what the type's configuration class fills in
        cfg = {**dict(family.defaults), **cfg}
        r = _Reader(cfg, where, r.used)
    if family is not None and (family.per_layer or family.refused):
        for key, what in family.refused:
            if r.get(key):
                r.fail(f"its {what}; shapewise prices layers that are alike, each computing its own attention and MLP")
        cfg = {**cfg, **{key: _one_value(r, key) for key in family.per_layer if isinstance(cfg.get(key), list)}}
        r = _Reader(cfg, where, r.used)
    _refuse_unmodelled(r)
    guesses: list[str] = []
    notes: list[str] = []
    if named:
        notes.append(f"it has no model_type: read as {named}, the type of the class its architectures name "
                     f"({cfg['architectures'][0]})")
    unlike = _class_unlike_type(cfg, model_type)
    if unlike:
        notes.append(unlike)
    if "q_lora_rank" in left_out and cfg.get("use_mla") is not False:  # a latent query its file never names
        notes.append(f"it leaves q_lora_rank out, so its configuration class's {cfg['q_lora_rank']}-wide query "
                     "latent is priced (a model without one writes q_lora_rank null)")
    if not nested:  # a nested language config beside a whole top level: the top level is read; a conflict said
        for key in (k for k in _NESTED if isinstance(outer.get(k), dict)):
            apart = [f"{k} {outer[key][k]} where the top level says {outer[k]}" for k in (*_HIDDEN, *_LAYERS)
                     if outer[key].get(k) is not None and outer.get(k) is not None and outer[key][k] != outer[k]]
            if apart:
                notes.append(f"its {key} describes another model ({', '.join(apart)}): shapewise prices the top "
                             "level's")
    if cfg.get("causal_attn") is False:  # LocateAnything's Qwen2: each token sees its whole block_size block
        block = f", block_size {cfg['block_size']}" if cfg.get("block_size") is not None else ""
        notes.append(f"its attention is not causal (causal_attn false{block}): shapewise prices causal attention, "
                     "about half the attention work of one that is not")

    hidden = r.whole(_HIDDEN, "hidden size", required=True)
    layers = r.whole(_LAYERS, "layer count", required=True)
    try:  # bounded here, not by ModelShape after: rules below (MoE layers, NoPE layers) walk them one by one
        LAYERS.check(layers, r._present(_LAYERS)[0])
    except ShapewiseError as err:
        r.fail(str(err))
    heads = r.whole(_HEADS, "attention head count", required=True)
    vocab = r.whole(_VOCAB, "vocabulary size", required=True, agree=False)
    if r.whole(("vocab_size",), "vocabulary size") and cfg["vocab_size"] > vocab:
        r.fail(f"padded_vocab_size {vocab} is smaller than vocab_size {cfg['vocab_size']}")

    # Falcon's first design reads multi_query and ignores num_kv_heads (the hub's expanded configs
    # carry num_kv_heads = 71 beside multi_query = true); its new_decoder_architecture reads num_kv_heads.
    multi_query = r.flag(("multi_query",), None)
    if model_type in FALCON_TYPES and not r.flag(("new_decoder_architecture",), False):
        kv = 1 if multi_query in (None, True) else heads
    else:
        kv = r.whole((*_KV_HEADS, "attn_kv_n_heads"), "key/value head count")
        if kv is None and r.flag(("multi_query_attention",), False):  # ChatGLM: its groups are the kv heads
            kv = r.whole(("multi_query_group_num",), "key/value head count (multi_query_group_num)", required=True)
        if kv is None and multi_query:
            kv = 1

    mla = {}
    latent = r.whole(("kv_lora_rank",), "key/value latent width")
    if latent and r.flag(("use_mla",), True) is False:  # DeepSeek-VL2's DeepseekV2Config: plain attention instead
        r.used.update(("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
        latent = None
    if latent:
        mla = dict(kv_lora_rank=latent, q_lora_rank=r.whole(("q_lora_rank",), "query latent width") or 0,
                   rope_head_dim=r.whole(("qk_rope_head_dim",), "rotary head dim", required=True),
                   v_head_dim=(hidden // heads if family and family.mla_v_from_hidden  # its code ignores v_head_dim
                               else r.whole(("v_head_dim",), "value head dim", required=True)))
        head_dim = r.whole(("qk_nope_head_dim",), "non-rotary head dim", required=True)
        kv = None  # latent attention expands keys and values to every head
        r.used.update(_HEAD_DIM)  # the latent dims above say what a head_dim would
    else:
        head_dim = r.whole(_HEAD_DIM, "head dimension")
    ffn = r.whole(_ffn_keys(family), "MLP width")
    dense_width = r.whole(("dense_intermediate_size",), "dense MLP width")  # MiniMax-M3: its dense layers' own
    if family and family.fused_mlp and ffn:
        ffn //= 2  # both halves of the gated MLP in one width
    if ffn is None and family is None:
        guesses.append(f"MLP width {4 * hidden} (4 × hidden)")
    elif ffn is None and model_type not in FFN_FOUR_TIMES_HIDDEN and not r.get("moe_intermediate_size"):
        meta = r._present(("ffn_dim_multiplier", "multiple_of"))
        if meta:  # Meta's params.json (tt-metal keeps AFM-4.5B's so): a rule of the code that reads it, not a width
            r.fail(f"its MLP width is given only by {' and '.join(meta)}, the rule a Meta-style params.json leaves "
                   f"to the code that reads it, not a width; shapewise reads a Hugging Face config.json "
                   f"(intermediate_size)")
        guesses.append(f"MLP width {4 * hidden} (4 × hidden: the file gives no {_ffn_keys(family)[0]}, where "
                       f"transformers would build the default of {model_type}'s configuration class)")
    if kv is None and family is None and not mla:
        guesses.append("as many key/value heads as heads")
    if ffn is None and model_type == "mpt":
        ratio = r.number("expansion_ratio")
        ffn = int((4 if ratio is None else ratio) * hidden)

    act = (r.text(_ACT) or (family.act if family else "")).lower()
    nulled = [k for k in _ACT if k in cfg and cfg[k] is None]
    if nulled and not r.text(_ACT) and family is not None:  # the type's default stands in for it: said
        notes.append(f"its {nulled[0]} is null: priced with {model_type}'s default activation, {act}")
    mlp_type = (r.text(("mlp_type",)) or "").lower()  # StarCoder2 writes "default" for a plain MLP
    if "glu" in act or "glu" in mlp_type or "gated" in mlp_type:
        gated = True  # BTLM (swiglu), MiniMax-M3 (swigluoai) name their gated MLP by the activation
    elif mlp_type in ("default", "mlp", "plain"):
        gated = False
    elif family is not None:
        gated = family.gated
    else:
        # Llama derivatives: a SiLU MLP is a SwiGLU. A file naming no activation at all is guessed a SwiGLU
        # too: a type whose configuration class fills the activation in (Laguna's, Step 3's abridged
        # copies) is a Llama-era one; the GPT-2-era configs name theirs (activation_function).
        gated = act in ("silu", "swish", "")
        guesses.append(f"{'gated' if gated else 'plain'} MLP")
    if not act:
        act = "silu" if gated else "gelu"
        guesses.append(f"activation {act}")
    if act not in ACTIVATIONS:
        r.fail(f"activation {act!r} is not one shapewise models (it knows {', '.join(sorted(ACTIVATIONS))})")
    if not gated and ACTIVATIONS[act] == "swiglu":  # (a gated MLP's SiLU makes the SwiGLU it does model)
        why = f"its mlp_type {mlp_type!r} says so" if mlp_type else f"{model_type} models have none"
        r.fail(f"activation {act!r} in an MLP without a gate ({why}) is not one shapewise models: it prices "
               f"{act} only in a gated MLP (SwiGLU), and an MLP without a gate only with GELU, ReLU or xIELU")
    kind = ACTIVATIONS[act]
    if gated:
        if kind not in ("swiglu", "geglu"):
            r.fail(f"a gated MLP with {act}{' (ReGLU)' if kind == 'relu' else ''} is not one shapewise models")
        mlp = kind
    else:
        mlp = "relu" if kind == "relu" else "gelu"
    if model_type in _UNPRICED:
        notes.append(_UNPRICED[model_type])
    if kind == "xielu":  # Apertus's: said, as the summary line names the MLP by the op it is priced as
        notes.append(f"its activation {act} is priced as GELU's, one elementwise op of the same reads and "
                     "writes; its two learned scalars a layer are not counted")

    norm_type = (r.text(("norm_type", "normalization_type", "layer_norm_type")) or "").lower()
    rms = r.flag(("rmsnorm", "use_RMSNorm"), None)  # ChatGLM; TeleChat-52B
    if "rms" in norm_type or rms:
        norm = "rmsnorm"
    elif "layer" in norm_type or rms is False:
        norm = "layernorm"
    elif family is not None:
        norm = family.norm
    else:
        norm = "rmsnorm" if "rms_norm_eps" in cfg else "layernorm"
        guesses.append(norm)

    no_bias = r.flag(("no_bias",), None)  # Qwen (1) and MPT spell it negatively
    qkv_key = family.qkv_bias if family is not None else ""  # GLM-4.5's attention_bias: on q, k and v alone
    bias = r.flag(_bias_keys(family), None if no_bias is None else not no_bias)
    if bias is None:
        bias = family.bias if family is not None else norm == "layernorm"
        if family is None:
            guesses.append("biases" if bias else "no biases")
    bias_scope = family.bias_scope if family is not None and bias else "all"
    keys = _bias_keys(family)
    # LlamaConfig (and Granite's and Arcee's) default each side to false: a file from before mlp_bias existed (a "llamafied"
    # Qwen's attention_bias alone) has none on its MLP, as LlamaMLP then had none.
    side_default = False if model_type in ("llama", "granite", "arcee") else None
    sides = [cfg.get(k, side_default) for k in ("attention_bias", "mlp_bias")]
    if ("attention_bias" in keys and bias_scope == "all" and all(isinstance(v, bool) for v in sides)
            and sides[0] != sides[1] and not any(k in cfg for k in keys[:keys.index("attention_bias")])):
        # LlamaConfig's two keys, q, k, v and o's biases and the MLP's, apart: the first read stood for both
        bias, bias_scope = True, "attention" if sides[0] else "mlp"
    qkv_bias = not bias and (qkv_key == "always" or bool(qkv_key) and r.flag((qkv_key,), False))
    tied = r.flag(("tie_word_embeddings",), family.tied if family is not None else None)
    if tied is None:
        tied = True  # PretrainedConfig's own default
        guesses.append("tied embeddings")
    parallel = r.flag(_PARALLEL, family.parallel if family is not None else None)
    if parallel is None:
        parallel = False
        if family is None:
            guesses.append("sequential attention and MLP")

    positions, rotary = 0, None
    how = family.positions if family is not None else ""
    if how == "gpt2":
        positions = r.whole(("n_positions", "max_position_embeddings", "n_ctx"), "position count",
                            agree=False) or 1024  # n_positions is the table; n_ctx may differ
    elif how == "gpt_neo":
        positions = r.whole(("max_position_embeddings",), "position count") or 2048
    elif how == "opt":  # OPT's learned table has two extra rows (its positions start at 2)
        positions = (r.whole(("max_position_embeddings",), "position count") or 2048) + 2
    elif how == "btlm":
        if r.text(("position_embedding_type",)) == "alibi":
            rotary = 0
        else:
            positions = r.whole(("n_positions",), "position count") or 1024
    elif how == "alibi" or r.flag(("alibi",), False) or (cfg.get("attn_config") or {}).get("alibi") is True or (
            model_type == "baichuan" and hidden != BAICHUAN_ROTARY_HIDDEN):
        rotary = 0
    elif family is None and not any(k in cfg for k in ("rope_theta", "rope_scaling", "rope_parameters", "rotary_emb_base")):
        guesses.append("rotary positions")
    if rotary is None and not positions and (family is None or family.rotary != "full"):
        rotary = _rotary_share(r, family.rotary if family is not None else "", head_dim or hidden // heads)

    expert_keys = (*_EXPERTS, "ffn_moe_num_experts")
    experts = r.whole(expert_keys, "expert count", minimum=0) or 0
    none = [k for k in expert_keys if type(cfg.get(k)) is int and cfg[k] == 0]
    picks = [f"{k} {cfg[k]}" for k in _top_k_keys(family) if type(cfg.get(k)) is int and cfg[k] > 0]
    if none and picks:  # a router over no experts: priced as a dense model it would be a plausible wrong number
        r.fail(f"{none[0]} 0 but {picks[0]}: a model that routes each token to experts has some; give their count")
    top_k = shared = dense = 0
    expert_ffn = None
    if experts:
        top_k = r.whole(_top_k_keys(family), "experts per token")
        if top_k is None:
            other = [k for k in cfg if ("top_k" in k or "topk" in k) and k not in _TOP_K]
            r.fail(f"{experts} experts but no experts per token; tried {', '.join(_TOP_K)}" + (
                f" (it has {', '.join(other)}, which shapewise does not read for model type {model_type!r})"
                if other else ""))
        expert_ffn = None if family and family.experts_at_ffn else r.whole(
            _expert_ffn_keys(family), "expert MLP width", required=bool(family and family.expert_ffn_key))
        if dense_width:  # intermediate_size is then the experts' (and shared experts') width, unless given apart
            expert_ffn, ffn = expert_ffn or ffn, dense_width
        shared = (family.shared_experts if family else 0) or r.whole(
            ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts"), "shared expert count", minimum=0) or 0
        width = expert_ffn or ffn or 4 * hidden
        shared_width = r.whole(("shared_expert_intermediate_size",), "shared expert width", minimum=0)
        if family and family.shared_mlp and r.flag((family.shared_mlp[0],), False):
            shared_width = (ffn or 4 * hidden) * (r.whole((family.shared_mlp[1],), "shared MLP count", minimum=0) or 0)
        if shared_width and not shared:
            # Qwen2-MoE and Hunyuan give one shared MLP of this width; shapewise models it as whole experts.
            if shared_width % width:
                r.fail(f"the shared MLP's width {shared_width} is not a multiple of the expert width {width}; "
                       f"shapewise counts shared experts in whole experts")
            shared = shared_width // width
        dense = _moe_dense_layers(r, layers)
    elif dense_width and dense_width != ffn:
        r.fail(f"dense_intermediate_size {dense_width} and the MLP width {ffn} disagree in a model without experts")

    window, global_every = _window(r, family, layers, guesses, notes)
    nope_every = _nope_every(r, family, layers, notes) if rotary != 0 and not positions else 0
    if family is not None and family.nope_global and global_every and rotary != 0:
        nope_every = global_every  # EXAONE 4: a window on the other layers, no rotary embedding on the global ones
    notes += _priced_otherwise(r, vocab)
    # quantization: mlx's key (group_size, bits), as mlx-community's checkpoints write it
    quant_key = next((k for k in ("quantization_config", "quantization") if cfg.get(k) or outer.get(k)), "")
    stored = _stored_as(cfg.get(quant_key) or outer.get(quant_key)) if quant_key else ""
    if stored:  # DeepSeek-V3's FP8, gpt-oss's MXFP4, EXAONE's W4A16: the file is the checkpoint's, not the run's
        notes.append(f"its checkpoint is quantized ({stored}, {quant_key}): shapewise prices its ops in the "
                     "dtype asked (--dtype, bf16 by default), not in the checkpoint's format")
    qk_norm = r.flag(("use_qk_norm", "qk_layernorm"), family.qk_norm if family else False)
    qk_weights = (family.qk_norm_weights if family else "head") if qk_norm else "head"
    if qk_norm and r.text(("qk_norm_type",)) == "per_layer":  # MiniMax-M2: a norm over all query heads, one over keys
        qk_weights = "projection"
    head_key = family.lm_head_bias if family else "lm_head_bias"  # PhimoeConfig's key, where no rule says otherwise
    lm_head_bias = head_key == "always" or bool(head_key) and r.flag((head_key,), False)
    shared_gate = bool(family and family.shared_expert_gate and shared)
    rope_only = family.qk_norm_rope_only if family is not None else bool(qk_norm and nope_every)
    if rope_only and family is None:
        guesses.append("QK-norm on its rotary layers only, as Llama 4's code runs it")
    extra = dict(norms_per_layer=_norms_per_layer(r, family, model_type, parallel), qk_norm=qk_norm,
                 qk_norm_weights=qk_weights, qk_norm_nope=not rope_only, lm_head_bias=lm_head_bias,
                 shared_expert_gate=shared_gate,
                 rotary_fraction=1.0 if rotary is None else rotary, window=window, global_every=global_every,
                 nope_every=nope_every, num_dense_layers=dense,
                 logit_softcap=bool(family and family.softcap and cfg.get("final_logit_softcapping")), **mla)
    unread = _unread(r)
    if unread:
        notes.append(f"shapewise does not read {', '.join(unread)}, which change{'s' if len(unread) == 1 else ''} "
                     f"the model's ops; it prices the model without {'it' if len(unread) == 1 else 'them'}")
    return dict(hidden=hidden, num_layers=layers, num_heads=heads, vocab=vocab, num_kv_heads=kv,
                head_dim=head_dim, ffn=ffn, mlp=mlp, tied_embeddings=tied, norm=norm, parallel_attn=parallel,
                bias=bias, bias_scope=bias_scope,
                qkv_bias=qkv_bias, out_bias=bool(family and family.out_bias),
                embed_norm=bool(family and family.embed_norm) or bool(r.flag(("embed_layernorm",), False)),
                learned_positions=positions, num_experts=experts, top_k=top_k, expert_ffn=expert_ffn,
                num_shared_experts=shared, context=0 if positions else _given_context(r),
                **extra), guesses, notes


def _family(cfg: dict, model_type: str):
    """The rule a config is read and written by: its type's, or its type's first layout's where a key says so."""
    if model_type == "llava" and cfg.get("mm_vision_tower") is not None:  # LLaVA's own code: its class tells
        named = LLAVA_OWN_LANGUAGE_MODELS.get(_llava_own_class(cfg))
        return FAMILIES[named] if named else None
    if model_type == "minicpmv":  # MiniCPM-V's own code: its version tells
        named = MINICPMV_LANGUAGE_MODELS.get(_minicpmv_version(cfg))
        return FAMILIES[named] if named else None
    first = [rule for (kind, key), rule in FIRST_LAYOUTS.items() if kind == model_type and cfg.get(key) is not None]
    return first[0] if first else FAMILIES.get(model_type)


def _class_stem(cfg: dict) -> str | None:
    """The first architecture's causal-LM class stem, squashed as _bare squashes a type (MiniCPM3ForCausalLM:
    minicpm3), or None where it names no such class."""
    archs = cfg.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        return None
    stem = next((archs[0][:-len(end)] for end in ("ForCausalLM", "LMHeadModel") if archs[0].endswith(end)), None)
    return _bare(stem) if stem else None


def _bare(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def _type_from_architectures(cfg: dict) -> str | None:
    """The model type a file without one has by its first architecture's name, where that name is a known type's
    causal-LM class (MiniCPM3ForCausalLM: minicpm3, as transformers names each class after its type); else None."""
    found = _types_named(None if cfg.get("model_type") else _class_stem(cfg))
    return found[0] if len(found) == 1 else None


def _types_named(stem: str | None) -> list[str]:
    """The known model types whose name squashes to a class's stem (_class_stem)."""
    return [kind for kind in FAMILIES if _bare(kind) == stem] if stem else []


# The types other models' files borrow (a serving shim, a derivative): under one of them a class of another name is a
# model the type's layout may not be. Honest borrowers name their own type (kimi_k2 with DeepseekV3ForCausalLM,
# phi-msft with PhiForCausalLM), so only these are checked; BitNet's llama file has its own note.
_BORROWED_TYPES = ("llama", "mistral", "qwen2", "qwen3")


def _class_unlike_type(cfg: dict, model_type: str) -> str | None:
    """A note where a borrowed model_type (llama) comes with a causal-LM class of another model (DeepseekV41ForCausalLM),
    priced as the type's layout; else None."""
    stem = _class_stem(cfg)
    if model_type not in _BORROWED_TYPES or not stem or stem in (_bare(model_type), "bitnet"):
        return None
    known = _types_named(stem)
    which = (f"the class of model_type {known[0]}, which the file would name to be read as it" if known else
             "a class shapewise does not know")
    return (f"its architectures name {cfg['architectures'][0]} ({which}) under model_type {model_type}: read as "
            f"{model_type}; if its layers are not {model_type}'s, the price is not the model's")


def _minicpmv_version(cfg: dict) -> tuple | None:
    """MiniCPM-V's version as its code reads it (families.MINICPMV_LANGUAGE_MODELS); None where it is not two numbers."""
    version = cfg.get("version")
    if version is None:
        return (2, 0) if cfg.get("hidden_size") == 2304 and cfg.get("query_num") == 64 else (2, 5)
    try:
        return tuple(int(part) for part in str(version).split("."))
    except ValueError:
        return None


def _llava_own_class(cfg: dict) -> str:
    """The class LLaVA's own config.json names (its first architecture), the first LLaVA's where it names none."""
    archs = cfg.get("architectures")
    return str(archs[0]) if isinstance(archs, list) and archs else "LlavaLlamaForCausalLM"


# OLMo's own keys, which _olmo_in_transformers_keys spells as transformers' OlmoConfig does
_OLMO_OWN = ("d_model", "n_layers", "n_heads", "mlp_hidden_size", "mlp_ratio", "embedding_size", "weight_tying",
             "include_bias", "multi_query_attention", "activation_type")


def _olmo_in_transformers_keys(cfg: dict, where: str) -> dict:
    """OLMo's own hf_olmo file (OLMoConfig: d_model, n_layers, mlp_ratio, ...), whose model_type is transformers'
    OlmoConfig's, in transformers' keys: read so, and a suggestion written so. Its SwiGLU's ff_proj is
    mlp_hidden_size wide (else mlp_ratio × d_model), both halves of the gate; embedding_size is the table's rows
    (vocab_size the tokenizer's)."""
    r = _Reader(cfg, where)
    act, block = r.text(("activation_type",)), r.text(("block_type",))
    if act not in (None, "swiglu"):
        r.fail(f"activation_type {act!r} in OLMo's own file: shapewise reads its SwiGLU MLP only")
    if block not in (None, "sequential", "llama"):
        r.fail(f"block_type {block!r} in OLMo's own file: shapewise reads its sequential blocks only")
    if r.flag(("attention_layer_norm",), False) or r.flag(("rope",), True) is False and not r.flag(("alibi",), False):
        r.fail("its LayerNorm over queries and keys (attention_layer_norm) or attention without position encoding "
               "(rope false): shapewise reads OLMo's own file with rotary or ALiBi attention alone")
    hidden = r.whole(("d_model",), "hidden size", required=True)
    width = r.whole(("mlp_hidden_size",), "MLP width") or hidden * (r.whole(("mlp_ratio",), "MLP ratio") or 4)
    keys = {"hidden_size": hidden, "num_hidden_layers": r.whole(("n_layers",), "layer count", required=True),
            "num_attention_heads": r.whole(("n_heads",), "attention head count", required=True),
            "intermediate_size": width // 2, "hidden_act": "silu",
            "tie_word_embeddings": r.flag(("weight_tying",), True), "bias": r.flag(("include_bias",), False),
            "vocab_size": r.whole(("embedding_size",), "embedding rows") or r.whole(("vocab_size",), "vocabulary size")}
    if r.flag(("multi_query_attention",), False) and not r._present(_KV_HEADS):
        keys["num_key_value_heads"] = 1
    return {**{k: v for k, v in cfg.items() if k not in _OLMO_OWN}, **keys}


def _telechat_52b_as_read(r: _Reader) -> None:
    """TeleChat-52B's code (TELECHATMLP, TELECHATTransformer) builds a SwiGLU only for activation_function silu (a
    plain MLP n_inner wide otherwise) and rotates its heads only for relative_encoding "rotary" (a learned position
    table where it is null): what shapewise reads it as, any other file of that code refused in one line."""
    act, encoding = r.get("activation_function"), r.get("relative_encoding")
    if act != "silu" or encoding != "rotary":
        r.fail(f"TeleChat-52B's code with activation_function {_json_words(act)} and relative_encoding "
               f"{_json_words(encoding)}: shapewise reads its SwiGLU (silu) with rotary heads alone")


def _expand_attention_types(value) -> list:
    """GPT-Neo's attention_types, [[kinds, times], ...], as GPTNeoConfig expands it: each kinds list `times` over."""
    return [kind for kinds, times in value for _ in range(times) for kind in kinds]


_GPT_NEO_KINDS = {"global": "full_attention", "local": "sliding_attention"}


def _gpt_neo_layers_as_layer_types(r: _Reader) -> dict:
    """GPT-Neo's attention_layers ("global" or "local", one a layer; else attention_types expanded, as GPTNeoConfig
    does, by default [[["global", "local"], 12]]) and window_size (256 by default), the keys a local layer attends
    over, as layer_types and sliding_window."""
    kinds, key = r.get("attention_layers"), "attention_layers"
    if kinds is None:
        types, key = r.get("attention_types"), "attention_types"
        types = [[["global", "local"], 12]] if types is None else types
        if not (isinstance(types, list) and all(isinstance(t, list) and len(t) == 2 and isinstance(t[0], list)
                                                and type(t[1]) is int and t[1] >= 0 for t in types)):
            r.fail(f"attention_types must be a list of [kinds, times] pairs, got {_json_words(types)}")
        kinds = _expand_attention_types(types)
    if not isinstance(kinds, list) or any(k not in _GPT_NEO_KINDS for k in kinds):
        r.fail(f"attention_layers must be a list of \"global\" or \"local\", one a layer, got {_json_words(kinds)}")
    layers = r.whole(_LAYERS, "layer count")
    if layers is not None and len(kinds) != layers:  # GPTNeoConfig refuses it too
        r.fail(f"{key} names {len(kinds)} layers' attention but the model has {layers} layers; give one a layer")
    window = r.whole(("window_size",), "local attention window")
    return {**r.cfg, "layer_types": [_GPT_NEO_KINDS[k] for k in kinds], "sliding_window": 256 if window is None else window}


def _norms_per_layer(r: _Reader, family, model_type: str, parallel: bool) -> int:
    """Norms a layer: the family's (two, four with post-norms, one where attention and the MLP share one);
    two wherever the two run one after the other. Falcon's new architecture norms each apart unless
    num_ln_in_parallel_attn says one (FalconDecoderLayer)."""
    norms = family.norms_per_layer if family else 2
    if model_type in FALCON_TYPES and r.flag(("new_decoder_architecture",), False):
        norms = r.whole(("num_ln_in_parallel_attn",), "norms of a parallel layer") or 2
        if norms not in (1, 2):
            r.fail(f"num_ln_in_parallel_attn is {norms}; Falcon's layers have 1 or 2 norms")
    return norms if parallel else max(norms, 2)


def _stored_as(quantization) -> str:
    """How a checkpoint's weights are stored, as its quantization_config names it ("" when it names nothing):
    the method (fp8, mxfp4, compressed-tensors, ...), NVIDIA Model Optimizer's algorithm (NVFP4, FP8) and,
    where its groups say, the weights' bits."""
    if not isinstance(quantization, dict):
        return ""
    method = next((quantization[k] for k in ("quant_method", "fmt", "format") if isinstance(quantization.get(k), str)), "")
    algorithm = quantization.get("quant_algo")
    if isinstance(algorithm, str) and algorithm.lower() != method.lower():
        method = f"{method} {algorithm}".strip()
    groups = quantization.get("config_groups")
    weights = [g.get("weights") for g in groups.values() if isinstance(g, dict)] if isinstance(groups, dict) else []
    bits = sorted({w["num_bits"] for w in weights if isinstance(w, dict) and isinstance(w.get("num_bits"), int)})
    if not method and isinstance(quantization.get("bits"), int):  # mlx's quantization: group_size and bits alone
        bits = [quantization["bits"]]
    what = ", ".join([method] * bool(method) + [f"{'/'.join(map(str, bits))}-bit weights"] * bool(bits))
    return what or ("quantized" if quantization else "")


def _priced_otherwise(r: _Reader, vocab: int) -> list[str]:
    """What a config says that shapewise prices otherwise, a warning each: attention over fewer keys
    than causal (chunks, a sparse indexer), layers it does not price (multi-token prediction) or prices
    as others (cross attention), and a head that is not a vocabulary's."""
    notes = []
    chunk = r.whole(("attention_chunk_size",), "attention chunk", minimum=0)
    if chunk and chunk < _context(r):
        notes.append(f"its chunked attention (attention_chunk_size {chunk}: a query sees only its own chunk of "
                     f"{chunk} tokens) is priced as full causal attention, the same up to {chunk} tokens and "
                     f"dearer beyond")
    topk = r.whole(("index_topk",), "keys a query attends to")
    if topk:
        notes.append(f"its sparse attention (index_topk {topk}: a query attends only to the {topk} keys its "
                     f"indexer picks) is priced as dense attention without the indexer, the same up to {topk} "
                     f"tokens and dearer beyond")
    sparse = r.mapping("sparse_attention_config")  # MiniMax-M3's
    if sparse and sparse.get("use_sparse_attention", True) is not False:
        notes.append("its sparse attention (sparse_attention_config: a query attends only to the keys its "
                     "selection picks) is priced as dense attention, dearer at long sequences")
    mtp_keys = r._present(("num_nextn_predict_layers", "num_mtp_modules"))  # DeepSeek's; MiniMax-M2's
    counts = {k: r.whole((k,), "multi-token prediction layers", minimum=0) for k in mtp_keys}
    counts = {k: v for k, v in counts.items() if v}
    if len(counts) > 1:  # MiniMax-M3 writes both, and they differ
        said = " and ".join(f"{k} {v}" for k, v in counts.items())
        notes.append(f"its multi-token prediction layers ({said}), trained beside the model, are not priced")
    elif counts:
        (key, mtp), = counts.items()
        what = "module" if key == "num_mtp_modules" else "layer"
        notes.append(f"its {mtp} multi-token prediction {what}{'s' if mtp > 1 else ''} ({key}), "
                     f"trained beside the model, {'are' if mtp > 1 else 'is'} not priced")
    arch = r.get("architectures")
    names = [a for a in arch if isinstance(a, str)] if isinstance(arch, list) else []
    head = next((a for a in names if a.endswith(_NOT_LM_HEADS)), None)
    if head:
        notes.append(f"its head is not a language model's ({head}): shapewise prices a {vocab:,}-row output "
                     f"head and its loss, which such a model does not run")
    bare = next((a for a in names if _is_bare_model(a)), None)
    if bare and not head:
        notes.append(f"its architecture is a model without a head ({bare}: an embedding model's, as E5-Mistral's): "
                     f"shapewise prices a {vocab:,}-row output head and its loss, which such a model does not run")
    bitnet = next((a for a in names if a.lower() == "bitnetforcausallm"), None)
    if bitnet:
        # BitNet b1.58 (1bitLLM's BitnetForCausalLM under model_type llama; transformers' BitNetForCausalLM): an
        # RMSNorm on the attention output before o_proj (inner_attn_ln, attn_sub_norm) and one on the MLP's product
        # before down_proj (ffn_layernorm, ffn_sub_norm), intermediate_size wide
        notes.append(f"its BitNet layers ({bitnet}) normalize the attention output before o_proj and the "
                     "MLP's product before down_proj, two RMSNorms a layer (one intermediate_size wide) that shapewise "
                     "does not price, and its ternary weights are priced in the dtype asked")
    # Ming's MoE blocks: a text, an image and an audio router (BailingMoeSparseMoeBlock's multi_gate, BailingMoeV2's
    # router_type MultiRouter), the image and audio ones run over every token where the input holds that modality
    multi = "multi_gate" if r.flag(("multi_gate",), False) else "router_type MultiRouter" if r.get(
        "router_type") == "MultiRouter" else ""
    if multi:
        notes.append(f"its image and audio routers ({multi}: two more gates a MoE layer, hidden → experts, which its "
                     "code runs over every token where the input holds images or audio) are neither counted nor "
                     "priced: shapewise prices the text router alone")
    if r.flag(("is_causal",), True) is False:  # gte-Qwen2: an embedding model whose every query sees every key
        notes.append("its bidirectional attention (is_causal false: every query attends to every key) is priced "
                     "as causal attention, which computes about half its scores")
    cross = _layer_list(r, "cross_attention_layers")
    if cross:
        notes.append(f"its {len(cross)} cross-attention layers (cross_attention_layers), which attend to the "
                     f"image, are priced as self-attention layers over the text")
    return notes


# Keys that change a model's ops. A config that sets one on a path where shapewise never looks it up
# (a model type whose rule has no use for it) is priced without it, which its warning says.
_WATCHED = ("layer_types", "sliding_window", "sliding_window_pattern", "attention_chunk_size",
            "interleave_moe_layer_step", "moe_layers", "intermediate_size_mlp", "first_k_dense_replace",
            "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers", "cross_attention_layers",
            "multi_query_group_num", "n_shared_experts", "num_shared_experts", "shared_expert_intermediate_size",
            "moe_intermediate_size", "partial_rotary_factor", "rotary_pct", "rotary_dim", "q_lora_rank",
            "kv_lora_rank", "v_head_dim", "qk_nope_head_dim", "qk_rope_head_dim", "num_experts",
            "num_local_experts", "n_routed_experts", "head_dim", "kv_channels", "use_qk_norm", "qk_layernorm",
            "no_rope_layers", "no_rope_layer_interval", "layer_rope_theta", "gating", "attention_output_gate",
            "use_sparse_attention", "moe_num_experts", "moe_k", "moe_num_shared_experts", "moe_layer_start_index",
            "moe_layer_end_index", "moe_layer_interval")


# Architectures whose head is not the vocabulary's (a reward model's score, a tagger's labels)
_NOT_LM_HEADS = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "RewardModel")
# Base-model classes named as a whole causal LM by their own code: ChatGLM's carries its output layer
_BARE_WITH_HEAD = ("ChatGLMModel",)


def _is_bare_model(arch: str) -> bool:
    """Whether an architecture is a base model class without a head (MistralModel, Qwen2Model): transformers
    names a model with a head X-For-Y or X-LMHeadModel."""
    return arch.endswith("Model") and "For" not in arch and "LMHead" not in arch and arch not in _BARE_WITH_HEAD

# Values of watched keys that change nothing shapewise prices (a whole head rotated, every layer MoE)
_NEUTRAL = {"partial_rotary_factor": 1.0, "rotary_pct": 1.0, "moe_layer_freq": 1, "decoder_sparse_step": 1,
            "interleave_moe_layer_step": 1, "moe_layer_interval": 1}


def _unread(r: _Reader) -> list[str]:
    """The watched keys the config sets (not null, empty, false, zero or neutral) that no rule looked up."""
    return [k for k in _WATCHED if k not in r.used and r.cfg.get(k) not in (None, False, 0, [], {}, "")
            and r.cfg.get(k) != _NEUTRAL.get(k)]


_ROTARY = ("partial_rotary_factor", "rotary_pct", "rotary_dim")


def _rotary_share(r: _Reader, key: str, head_dim: int) -> float | None:
    """The rotated share of each head under key, the family's spelling, or where key is "" (a type of no
    rule) the first spelling the file writes (None: it writes none). Another spelling written beside it
    must rotate as many dims: MiniMax-M2 writes a fraction and the width it makes."""
    written = [k for k in _ROTARY if r.get(k) is not None]
    key = key or (written[0] if written else "")
    if not key:
        return None
    share = _rotary_fraction(r, key, head_dim)
    for other in written:
        dims = round(_rotary_fraction(r, other, head_dim) * head_dim)
        if dims != round(share * head_dim):
            r.fail(f"{key} and {other} disagree about the rotated dims of each head ({round(share * head_dim)} "
                   f"and {dims} of {head_dim}); give one")
    return share


def _rotary_fraction(r: _Reader, key: str, head_dim: int) -> float:
    """The rotated share of each head, from a fraction (partial_rotary_factor, rotary_pct) or a width
    (GPT-J's rotary_dim)."""
    value = r.get(key)
    if value is None:
        return 0.25 if key == "rotary_pct" else 1.0  # GPTNeoXConfig's rotary_pct default is 0.25
    limit = head_dim if key == "rotary_dim" else 1
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= limit:
        r.fail(f"{key} must be a number from 0 to {limit}, got {json.dumps(value)[:40]}")
    return value / head_dim if key == "rotary_dim" else float(value)


def _window(r: _Reader, family, layers: int, guesses: list[str], notes: list[str]) -> tuple[int, int]:
    """Sliding-window span and how often a layer attends globally: by layer_types where the file names
    each layer's attention, else by the model type's rule; a type shapewise does not know that writes a
    window is guessed to slide on every layer."""
    rule = family.window if family is not None else ""
    span = r.whole(("sliding_window",), "sliding window", minimum=0) or 0
    if r.get("sliding_window") == 0:  # no window or a window of nothing: configs mean the first, say which
        notes.append("its sliding_window 0 is read as no sliding window: every layer attends to all tokens")
    types = _layer_types(r, layers, notes)
    named = isinstance(types, list) and any(t == "sliding_attention" for t in types)
    if named:
        rule = "pattern"
    if not span or r.flag(("use_sliding_window",), True) is False or span >= _context(r):
        return 0, 0  # Qwen2 writes a window it does not use; a window as long as the context is none
    if not rule:
        if family is not None:
            return 0, 0  # the type's own rule: a window the model does not use
        guesses.append(f"a {span}-token window on every layer")
        return span, 0
    if rule == "alternate":
        return span, 2
    if rule == "pattern":
        if isinstance(types, list) and types:
            r.used.add("sliding_window_pattern")  # layer_types say it layer by layer
            full = sum(1 for t in types if t == "full_attention")
            if full == 0:
                return span, 0
            every, at = layers // full, [i for i, t in enumerate(types) if t == "full_attention"]
            if layers % full == 0 and at == list(range(at[0], layers, every)):  # evenly spaced, from any layer
                return span, every
            every = max(round(layers / full), 1)
            notes.append(f"its {full} full-attention layers among {layers} (layer_types) do not repeat evenly; "
                         f"priced as one in every {every}")
            return span, every
        pattern = r.get("sliding_window_pattern")
        if isinstance(pattern, str) and pattern and set(pattern) <= {"L", "G"} and pattern.count("G") == 1:
            return span, len(pattern)  # EXAONE 4 writes "LLLG"
        return span, r.whole(("sliding_window_pattern", "_sliding_window_pattern"), "sliding window pattern") or 6
    return span, 0


def _nope_every(r: _Reader, family, layers: int, notes: list[str]) -> int:
    """Every how many layers one runs without rotary embeddings (NoPE; 0: none), from no_rope_layers, one
    entry a layer (1: the layer rotates, 0: it does not), or where the file gives no list, by the type's rule:
    a NoPE layer every no_rope_layer_interval-th (SmolLM3Config, Llama4TextConfig). A list whose NoPE layers
    do not repeat evenly is priced by the interval nearest their count, and said."""
    if family is not None and not family.nope_interval:
        return 0  # a type whose code has no NoPE layers: a no_rope_layers it carries is said unread
    if family is None and isinstance(r.cfg.get("layer_rope_theta"), list) and not r.cfg.get("no_rope_layers"):
        key = "layer_rope_theta"
        rotates = [theta != 0 for theta in _layer_entries(r, key, layers, is_entry=_is_rotary_base,
                                                         entry="rotary base (0: none)")]
    elif not r.get("no_rope_layers"):  # absent, null or empty (Llama4TextConfig reads an empty list as none given)
        return (r.whole(("no_rope_layer_interval",), "NoPE layer interval") or family.nope_interval) if family else 0
    else:
        r.used.add("no_rope_layer_interval")  # the list says it layer by layer
        key, rotates = "no_rope_layers", _layer_entries(r, "no_rope_layers", layers)
    nope = [i for i, rotary in enumerate(rotates) if not rotary]
    if not nope:
        return 0
    every = min(range(1, layers + 1), key=lambda n: abs(layers // n - len(nope)))
    if nope != list(range(nope[0], layers, every)) or len(nope) != layers // every:
        notes.append(f"its {len(nope)} layers without rotary embeddings among {layers} ({key}) do not "
                     f"repeat evenly; priced as one in every {every} ({layers // every} layers)")
    return every


def _is_flag(v) -> bool:
    return isinstance(v, int) and v in (0, 1)


def _is_mlp_kind(v) -> bool:
    return v in ("dense", "sparse")


def _is_rotary_base(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0


def _layer_entries(r: _Reader, key: str, layers: int, *, is_entry=_is_flag, entry: str = "0 or 1") -> list:
    """A list of one `entry` per layer (no_rope_layers and moe_layer_freq: 0 or 1; layer_rope_theta: a rotary
    base, 0 where the layer has none, as Muse Glimmer writes it; mlp_layer_types: "dense" or "sparse"); entries
    past the layers are not read."""
    value = r.get(key)
    if not isinstance(value, list) or not all(is_entry(v) for v in value):
        r.fail(f"{key} must be a list of one {entry} per layer, got {_json_words(value)}")
    if len(value) < layers:
        r.fail(f"{key} gives {len(value)} entries but the model has {layers} layers; give one per layer")
    return value[:layers]


def _layer_types(r: _Reader, layers: int, notes: list[str]) -> list[str] | None:
    """layer_types, one attention kind per layer, or None where the file has none; anything that cannot
    be read as that is refused, a list longer than the layers read in its first entries and said."""
    types = r.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        r.fail(f"layer_types must be a list naming each layer's attention ({', '.join(_ATTENTION_LAYERS)}), "
               f"got {_json_words(types)}")
    unknown = [t for t in dict.fromkeys(types) if t not in _ATTENTION_LAYERS]
    if unknown:
        r.fail(f"layer_types names {', '.join(map(repr, unknown[:3]))}, not an attention kind shapewise knows "
               f"({', '.join(_ATTENTION_LAYERS)})")
    if len(types) < layers:
        r.fail(f"layer_types names {len(types)} layers but the model has {layers}; give one entry per layer")
    if len(types) > layers:  # EXAONE 4.5 writes one more, for its multi-token prediction layer
        notes.append(f"its layer_types names {len(types)} layers for {layers}; the first {layers} are read")
    if "deepseek_sparse_attention" in types[:layers] and not r.cfg.get("index_topk"):
        notes.append("its sparse attention layers (layer_types deepseek_sparse_attention) are priced as dense "
                     "attention, dearer at long sequences")
    return types[:layers]


SERVED_CONTEXT = 1 << 24  # a model_max_length past this is a tokenizer's "no limit" (1e30), not a context


def _given_context(r: _Reader) -> int:
    """max_position_embeddings where the file gives it (a rotary model's trained context; LLaMA's first conversions
    spell it max_sequence_length, DBRX and MPT max_seq_len), else 0; a longer model_max_length or max_length where
    the file gives one too: Command R v01's writes 8,192 beside the 131,072 it serves, MiniCPM-2B-128k 65,536
    positions (stretched by dynamic NTK scaling) beside the max_length 131,072 it serves."""
    given = r.whole(("max_position_embeddings", "max_sequence_length", "max_seq_len"), "context length",
                    agree=False) or 0
    lengths = (r.cfg.get(key) for key in ("model_max_length", "max_length"))  # max_length's default is 20: shorter
    served = max((n for n in lengths if isinstance(n, int) and not isinstance(n, bool)), default=0)
    if given < served <= SERVED_CONTEXT:
        return served if given else 0  # alone, a tokenizer's or generation's length says nothing of the positions
    return given


def _context(r: _Reader) -> int:
    """The context the window and chunk rules compare with: the given one, else unbounded."""
    return _given_context(r) or 1 << 62


class GuessedFields(ShapewiseError):
    """A config read only by guessing some fields, refused because the caller asked for strictness.
    The CLI exits 1 for it (a finding, as `check --strict` exits 1), not 2 (bad input)."""

    exit_code = 1


def _shape_from_config(cfg: dict, where: str, name: str, source: str = "", *, strict: bool = False) -> ModelShape:
    fields, guesses, notes = _fields_from_config(cfg, where)
    # Qwen3-Embedding's file names Qwen3ForCausalLM: only its name says that the head is not run
    if "embedding" in name.lower() and not any("output head" in note for note in notes):
        notes.append(f"its name ({name}) says an embedding model, but its architectures name a language model's "
                     f"head: shapewise prices a {fields['vocab']:,}-row output head and its loss, which an embedding "
                     f"model, pooling the last hidden state, does not run")
    for note in notes:
        warn(f"{where}: {note}")
    found, model_type = _inner(cfg), _unwrap(cfg).get("model_type")
    encoders = [f"its {what} ({key})" for key, what in _ENCODERS.items() if cfg.get(key) not in (None, "", {}, [])]
    if str(model_type).lower() in _CODE_ENCODERS:
        encoders.append(f"its {_CODE_ENCODERS[str(model_type).lower()]}")
    if encoders:
        warn(f"{where}: {cfg.get('model_type') or 'this model'} is multimodal; shapewise prices its language model "
             f"{f'({found[0]}) ' if found else ''}only, not {' or '.join(encoders)}")
    if guesses:
        known = str(model_type).lower() in FAMILIES  # a known type's file can still leave out what its code fills in
        message = (f"{where}: no model_type, so shapewise guessed {', '.join(guesses)}" if not model_type else
                   f"{where}: model type {model_type!r} is known, but its file leaves out what shapewise reads; it "
                   f"guessed {', '.join(guesses)}" if known else
                   f"{where}: model type {model_type!r} is not one shapewise knows; it guessed {', '.join(guesses)}")
        if strict:
            raise GuessedFields(f"{message} (--strict refuses guesses; `shapewise models` lists the known types)")
        warn(message)
    try:
        return canonical(ModelShape(name=name, source=source, **fields))
    except ShapewiseError as err:
        raise ShapewiseError(f"{where}: {err}") from None


def _config_name(cfg: dict, file: Path) -> str:
    """The model's name: _name_or_path when it names a hub model, else the folder or file name."""
    named = cfg.get("_name_or_path")
    if isinstance(named, str) and named.strip() and not named.startswith((".", "/", "~")) and "\\" not in named:
        return named.strip()
    return file.parent.name if file.name == "config.json" and file.parent.name else file.stem


def _pairs(pairs: list) -> dict:
    """A JSON object whose keys are each given once, or twice with one value: a key given two values is
    refused, not read as its last (Python's json keeps the last without a word)."""
    out = {}
    for key, value in pairs:
        if key in out and json.dumps(out[key], sort_keys=True) != json.dumps(value, sort_keys=True):
            raise ShapewiseError(f"{key} is given twice, as {_json_words(out[key])} and {_json_words(value)} "
                                 f"(a JSON reader keeps the last); remove the one not meant")
        out[key] = value
    return out


def load_config(path, *, strict: bool = False) -> ModelShape:
    """A ModelShape from a Hugging Face config.json, given the file or a folder holding one. A field
    that neither the file nor its model type's defaults give is guessed with a one-line
    ShapewiseWarning, or, with strict, refused (GuessedFields)."""
    strict = flag(strict, "strict")
    if not isinstance(path, (str, os.PathLike)):
        raise ShapewiseError(f"expected a path to a config.json, got {path!r}")
    file = Path(path)
    try:
        if file.is_dir():
            if file.name == "config.json":  # a snapshot's config.json that is a folder: a broken download
                raise ShapewiseError(f"{file}: a folder, not a file; give the config.json file or the folder holding it")
            if not (file / "config.json").is_file():
                raise ShapewiseError(f"{file}: folder has no config.json; give the file itself or its folder")
            file = file / "config.json"
        elif not file.exists():
            raise ShapewiseError(f"{file}: no such file; give a config.json or the folder holding one")
        text = file.read_text(encoding="utf-8")
    except OSError as err:  # a folder or file without permission, a file that is a device
        raise ShapewiseError(f"{err.filename or file}: cannot read it ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise ShapewiseError(f"{file}: not a text file (not UTF-8), so not a config.json") from None
    try:
        cfg = json.loads(text, object_pairs_hook=_pairs, parse_int=json_int)
    except json.JSONDecodeError as err:
        raise ShapewiseError(f"{file}: not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None
    except ShapewiseError as err:  # JSON, but no config: a key given two values (_pairs), a number too long
        raise ShapewiseError(f"{file}: {err}") from None
    except RecursionError:
        raise ShapewiseError(f"{file}: JSON nested too deeply to be a config.json") from None
    if not isinstance(cfg, dict):
        kind = {list: "a JSON list", str: "a JSON string", type(None): "JSON null", bool: "JSON true or false"}.get(
            type(cfg), "a JSON number")
        raise ShapewiseError(f"{file}: holds {kind}, but a config.json is an object {{...}}")
    return _shape_from_config(cfg, str(file), _config_name(cfg, file), source=str(file), strict=strict)


# ---- config.json writing ----

_ACT_NAME = {"swiglu": "silu", "geglu": "gelu_pytorch_tanh", "gelu": "gelu_new", "relu": "relu"}


def _template(s: ModelShape) -> dict:
    """A fresh config for s: BLOOM style when it normalizes its embeddings, GPT-2 style when it has learned
    positions, Llama (or Mixtral, Qwen2, SmolLM3, Mistral) style when its MLP is gated, GPT-NeoX style otherwise;
    _fit then adds whatever that style leaves implicit."""
    if s.embed_norm:  # BLOOM's is the layout with a norm over the embeddings (ALiBi, a GELU MLP 4 × hidden wide)
        return {"architectures": ["BloomForCausalLM"], "model_type": "bloom", "n_embed": s.hidden,
                "n_layer": s.num_layers, "n_head": s.num_heads, "vocab_size": s.vocab, "layer_norm_epsilon": 1e-5,
                "tie_word_embeddings": s.tied_embeddings}
    if s.learned_positions:
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": s.hidden,
                "n_layer": s.num_layers, "n_head": s.num_heads, "n_inner": s.ffn, "n_positions": s.learned_positions,
                "n_ctx": s.learned_positions, "vocab_size": s.vocab, "activation_function": _ACT_NAME[s.mlp],
                "layer_norm_epsilon": 1e-5, "tie_word_embeddings": s.tied_embeddings}
    if s.gated:
        # SmolLM3 is Llama's layout with NoPE layers (no_rope_layers, written by _fit); Mistral's, with a
        # window on every layer (sliding_window); Qwen2's, with biases on q, k and v; Qwen2-MoE's, with its
        # shared experts' gate; PhiMoE's, with a bias on its output head (lm_head_bias)
        arch, model_type = ("Qwen2MoeForCausalLM", "qwen2_moe") if s.shared_expert_gate else \
            ("PhimoeForCausalLM", "phimoe") if s.is_moe and s.lm_head_bias else \
            ("MixtralForCausalLM", "mixtral") if s.is_moe else \
            ("Qwen2ForCausalLM", "qwen2") if s.qkv_bias else \
            ("SmolLM3ForCausalLM", "smollm3") if s.nope_every else \
            ("MistralForCausalLM", "mistral") if s.window and not s.global_every else ("LlamaForCausalLM", "llama")
        cfg = {"architectures": [arch], "model_type": model_type, "hidden_size": s.hidden,
               "intermediate_size": s.ffn_width, "num_hidden_layers": s.num_layers,
               "num_attention_heads": s.num_heads, "num_key_value_heads": s.kv_heads, "head_dim": s.d_head,
               "vocab_size": s.vocab, "hidden_act": _ACT_NAME[s.mlp], "rms_norm_eps": 1e-5,
               "attention_bias": s.attn_bias, "mlp_bias": s.mlp_bias, "tie_word_embeddings": s.tied_embeddings}
        return cfg
    if s.parallel_attn and s.norms_per_layer == 1:
        # One norm feeding attention and the MLP: GPT-J's layout (biases on the MLP alone), Phi's (biases, part
        # of each head rotated) or Falcon's first design (no biases); GPT-NeoX norms each apart
        common = {"hidden_size": s.hidden, "num_hidden_layers": s.num_layers, "num_attention_heads": s.num_heads,
                  "vocab_size": s.vocab, "tie_word_embeddings": s.tied_embeddings}
        if s.bias and s.bias_scope == "mlp":  # GPT-J's: biases on the MLP alone
            return {"architectures": ["GPTJForCausalLM"], "model_type": "gptj", "n_embd": s.hidden,
                    "n_layer": s.num_layers, "n_head": s.num_heads, "n_inner": s.ffn, "vocab_size": s.vocab,
                    "activation_function": _ACT_NAME[s.mlp], "rotary_dim": s.rotary_width,
                    "layer_norm_epsilon": 1e-5, "tie_word_embeddings": s.tied_embeddings}
        if s.bias:
            return {"architectures": ["PhiForCausalLM"], "model_type": "phi", **common, "intermediate_size": s.ffn_width,
                    "num_key_value_heads": s.kv_heads, "hidden_act": _ACT_NAME[s.mlp], "layer_norm_eps": 1e-5,
                    "partial_rotary_factor": s.rotary_fraction}
        return {"architectures": ["FalconForCausalLM"], "model_type": "falcon", **common, "ffn_hidden_size": s.ffn_width,
                "multi_query": s.kv_heads == 1, "new_decoder_architecture": False, "parallel_attn": True, "bias": False,
                "alibi": False, "activation": "gelu" if s.mlp == "gelu" else _ACT_NAME[s.mlp], "layer_norm_epsilon": 1e-5}
    return {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_size": s.hidden,
            "intermediate_size": s.ffn_width, "num_hidden_layers": s.num_layers,
            "num_attention_heads": s.num_heads, "vocab_size": s.vocab, "hidden_act": _ACT_NAME[s.mlp],
            "layer_norm_eps": 1e-5, "use_parallel_residual": s.parallel_attn, "attention_bias": s.bias,
            "rotary_pct": s.rotary_fraction, "tie_word_embeddings": s.tied_embeddings}


def _set(cfg: dict, key: str, value) -> None:
    """cfg[key] = value, kept a per-layer list where the config gives one (Hunyuan)."""
    cfg[key] = [value] * len(cfg[key]) if isinstance(cfg.get(key), list) else value


def _put(cfg: dict, keys, value, fallback: str) -> None:
    """Write value under every spelling of keys the config already uses, or under fallback. DBRX's keys
    read as attn_X and ffn_X are written where DBRX keeps them, as X in attn_config and ffn_config."""
    present = [(cfg, k) for k in keys if cfg.get(k) is not None]
    for block, prefix in _BLOCKS.items():
        inner = cfg.get(block)
        if isinstance(inner, dict):
            present += [(inner, k[len(prefix):]) for k in keys
                        if k.startswith(prefix) and inner.get(k[len(prefix):]) is not None]
    for where, k in present or [(cfg, fallback)]:
        _set(where, k, value)


def _fit(cfg: dict, s: ModelShape) -> bool:
    """Change cfg, field by field, until it reads back as s; fields that already match stay as written.
    Returns whether anything had to change."""
    try:
        now = canonical(ModelShape(name="x", **_fields_from_config(cfg, "config")[0]))
    except ShapewiseError:
        now = None  # an unreadable base: every field gets written
    model_type = str(cfg.get("model_type") or _type_from_architectures(cfg) or "").lower()
    family = _family(cfg, model_type)

    def differs(*fields) -> bool:
        return now is None or any(getattr(now, f) != getattr(s, f) for f in fields)

    defaults = dict(family.defaults) if family is not None else {}

    def said(keys) -> bool:
        """Whether the config, or its type's defaults where it leaves a key out, gives one of keys."""
        return any(cfg.get(k) is not None or k in defaults for k in keys)

    if differs("hidden"):
        _put(cfg, _HIDDEN, s.hidden, "n_embd" if model_type == "gpt2" else "hidden_size")
    if differs("num_layers"):
        _put(cfg, _LAYERS, s.num_layers, "n_layer" if model_type == "gpt2" else "num_hidden_layers")
        if now is not None:
            _resize_layer_lists(cfg, now.num_layers, s.num_layers, family)
    if differs("num_heads"):
        _put(cfg, _HEADS, s.num_heads, "n_head" if model_type == "gpt2" else "num_attention_heads")
    if differs("vocab"):
        _put(cfg, _VOCAB, s.vocab, "vocab_size")
    if (now is None or now.d_head != s.d_head) and s.kv_lora_rank:
        cfg["qk_nope_head_dim"] = s.d_head  # latent attention's head dim: its non-rotary part
    elif (now is None or now.d_head != s.d_head) and (s.head_dim is not None or said(_HEAD_DIM)):
        _put(cfg, _HEAD_DIM, s.d_head, "head_dim")
    if s.kv_lora_rank and family is not None and family.mla_v_from_hidden and s.v_dim != s.hidden // s.num_heads:
        raise ShapewiseError(f"a {model_type} config has no key for the value heads' width (its code takes hidden "
                             f"size / heads = {s.hidden // s.num_heads}): cannot describe value heads {s.v_dim} wide")
    kv_said = model_type in FALCON_TYPES or said((*_KV_HEADS, "attn_kv_n_heads", "multi_query", "multi_query_attention"))
    if (now is None or now.kv_heads != s.kv_heads) and (kv_said or s.kv_heads != s.num_heads):
        # (a type that names no kv heads reads as many as heads: nothing to write for that)
        if model_type in FALCON_TYPES and not cfg.get("new_decoder_architecture"):
            if s.kv_heads in (1, s.num_heads):
                cfg["multi_query"] = s.kv_heads == 1
            else:  # only Falcon's newer layout has grouped kv heads
                cfg["new_decoder_architecture"] = True
                _put(cfg, ("num_kv_heads", "n_head_kv"), s.kv_heads, "num_kv_heads")
        else:
            _put(cfg, (*_KV_HEADS, "attn_kv_n_heads"), s.kv_heads, "num_key_value_heads")
            if cfg.get("multi_query") is not None:
                cfg["multi_query"] = s.kv_heads == 1
    # (a width left out is 4 × hidden, which follows the hidden size)
    if (now is None or now.ffn_width != s.ffn_width) and (s.ffn is not None or said(_ffn_keys(family))):
        width = 2 * s.ffn_width if family is not None and family.fused_mlp else s.ffn_width  # both halves
        fallback = (family.ffn_key if family is not None and family.ffn_key  # Llama 4: not intermediate_size
                    else "ffn_hidden_size" if model_type in FALCON_TYPES
                    else {"gpt2": "n_inner", "opt": "ffn_dim"}.get(model_type, "intermediate_size"))
        dense_apart = cfg.get("dense_intermediate_size") is not None  # MiniMax-M3: intermediate_size the experts'
        _put(cfg, ("dense_intermediate_size",) if dense_apart else _ffn_keys(family), width, fallback)
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
        _put(cfg, _bias_keys(family), s.bias, "bias")
    if differs("qkv_bias") and family is not None and family.qkv_bias not in ("", "always"):
        cfg[family.qkv_bias] = s.qkv_bias  # (a type with no such key refuses it when the config is read back)
    if differs("tied_embeddings"):
        cfg["tie_word_embeddings"] = s.tied_embeddings
    head_key = family.lm_head_bias if family is not None else "lm_head_bias"
    if differs("lm_head_bias") and head_key not in ("", "always"):
        cfg[head_key] = s.lm_head_bias  # (a type with no such key refuses it when the config is read back)
    if differs("parallel_attn"):
        _put(cfg, _PARALLEL, s.parallel_attn, "parallel_attn")
    if now is None or now.rotary_fraction != s.rotary_fraction or (now.d_head != s.d_head and not s.is_mla):
        # every spelling the file writes rotates as many dims (MiniMax-M3 writes a fraction and a width, which
        # a new head dim must follow), and the type's own
        keys = [k for k in _ROTARY if cfg.get(k) is not None]
        if differs("rotary_fraction") and family is not None and family.rotary != "full":
            keys.insert(0, family.rotary)
        for key in dict.fromkeys(keys):
            cfg[key] = s.rotary_width if key == "rotary_dim" else s.rotary_fraction
    if differs("window") and s.window and family is not None and family.window:
        cfg["window_size" if model_type == "gpt_neo" else "sliding_window"] = s.window
    listed = bool(cfg.get("no_rope_layers"))  # else the type's own interval, which follows the layer count
    if (family is None or family.nope_interval) and ((listed and differs("num_layers")) or (
            differs("nope_every") and (s.nope_every or listed or family is not None))):  # (no NoPE: no list to add)
        # one entry a layer, NoPE on every nope_every-th: SmolLM3Config's and Llama4TextConfig's own rule
        cfg["no_rope_layers"] = [int(not s.nope_every or (i + 1) % s.nope_every != 0) for i in range(s.num_layers)]
    how = family.positions if family is not None else ""
    if differs("learned_positions") and (how or s.learned_positions):  # else no table either way
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
    if s.kv_lora_rank and differs("v_head_dim") and not (family is not None and family.mla_v_from_hidden):
        cfg["v_head_dim"] = s.v_head_dim or s.d_head
    if differs("num_experts", "top_k", "expert_ffn", "num_shared_experts") or (
            now is not None and s.is_moe and now.expert_width != s.expert_width):
        if s.is_moe and family is not None and family.experts_at_ffn and s.expert_width != s.ffn_width:
            raise ShapewiseError(f"a {model_type} config gives its experts' width in intermediate_size and has no "
                                 f"dense MLP beside them: cannot describe experts {s.expert_width} wide apart from "
                                 f"an MLP width of {s.ffn_width}")
        if s.is_moe:
            _put(cfg, (*_EXPERTS, "ffn_moe_num_experts"), s.num_experts, "num_local_experts")
            _put(cfg, _top_k_keys(family), s.top_k, (family and family.top_k_key) or "num_experts_per_tok")
            key = _expert_ffn_keys(family)[0]
            if s.expert_width != s.ffn_width or cfg.get(key) is not None:
                _set(cfg, key, s.expert_width)
            if family is not None and family.shared_mlp:  # shared MLPs of intermediate_size each
                flag, count = family.shared_mlp
                if s.num_shared_experts * s.expert_width % s.ffn_width:
                    raise ShapewiseError(f"{model_type} configs give shared MLPs in whole MLP widths ({s.ffn_width}); "
                                         f"cannot describe {s.num_shared_experts} shared experts {s.expert_width} wide")
                cfg[flag] = s.num_shared_experts > 0
                _set(cfg, count, s.num_shared_experts * s.expert_width // s.ffn_width)
            elif cfg.get("shared_expert_intermediate_size") is not None:  # Qwen2-MoE: one shared MLP this wide
                cfg["shared_expert_intermediate_size"] = s.num_shared_experts * s.expert_width
            elif s.num_shared_experts or any(cfg.get(k) is not None for k in ("n_shared_experts", "num_shared_experts")):
                _put(cfg, ("n_shared_experts", "num_shared_experts"), s.num_shared_experts, "n_shared_experts")
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
    target = canonical(shape)
    cfg = copy.deepcopy(base) if base is not None else _template(target)
    if str(cfg.get("model_type", "")).lower() == "olmo" and cfg.get("d_model") is not None:
        cfg = _olmo_in_transformers_keys(cfg, "base config")
        cfg.pop("auto_map", None)  # OLMo's own code, which reads its own keys: transformers' class reads these
        cfg["architectures"] = ["OlmoForCausalLM"]
    found = _inner(cfg)
    inner = found[1] if found else cfg  # the language model's fields sit at the top unless a wrapper nests them
    if inner is not cfg:  # the defaults a nested config leaves out, written out so that its fields can change
        for key, value in NESTED_DEFAULTS.get(str(inner.get("model_type", "")).lower(), ()):
            inner.setdefault(key, value)
    changed = _fit(inner, target)
    for _ in range(2):  # a field left as written may read otherwise once others changed (kv heads, head_dim)
        if not _fit(inner, target):
            break
    if base is None:
        cfg["_name_or_path"] = shape.name
    elif changed:
        cfg.pop("_name_or_path", None)  # base's name would now mislabel it
    back = canonical(ModelShape(name=shape.name, **_fields_from_config(cfg, "written config")[0]))
    for field in STRUCTURAL_FIELDS:
        if getattr(back, field) != getattr(target, field):  # a field this type's keys cannot hold
            what, want, got = _field_words(field, target, back)
            raise ShapewiseError(f"a {cfg.get('model_type') or 'untyped'} config cannot hold this shape's {what} "
                                 f"{want}: written in its keys, it reads back as {got}")
    return cfg


# Fields whose None means a value derived from others: said by that value
_DERIVED = {"num_kv_heads": ("key/value heads", "kv_heads"), "head_dim": ("head dim", "d_head"),
            "ffn": ("MLP width", "ffn_width"), "expert_ffn": ("experts' width", "expert_width"),
            "v_head_dim": ("value head width", "v_dim")}


def _field_words(field: str, want: ModelShape, got: ModelShape) -> tuple[str, object, object]:
    """A structural field as a user reads it: its name in words and the two values it compares."""
    what, prop = _DERIVED.get(field, (field.replace("num_", "").replace("_", " "), field))
    return what, getattr(want, prop), getattr(got, prop)


def _resize_layer_lists(cfg: dict, old: int, new: int, family) -> None:
    """The lists of one entry per layer, made new long: layer_types and layer_rope_theta by their pattern
    (the shortest period that repeats through the original's layers), a per-layer value (Hunyuan) by its
    one value, a list of each layer's MLP kind by its last layer's (MiniMax-M3's dense layers, first, stay
    as many)."""
    neo = str(cfg.get("model_type", "")).lower() == "gpt_neo"  # GPTNeoConfig expands attention_types, written once
    if neo and isinstance(cfg.get("attention_types"), list) and not isinstance(cfg.get("attention_layers"), list):
        cfg["attention_layers"] = _expand_attention_types(cfg["attention_types"])  # resized below
    for key in ("layer_types", "layer_rope_theta", "attention_layers"):  # Muse Glimmer: a window and a rotary base
        entries = cfg.get(key)  # a layer; GPT-Neo: each layer's attention
        if isinstance(entries, list) and len(entries) >= old:
            head, extra = entries[:old], entries[old:]  # EXAONE 4.5 writes one more, for its prediction layer
            period = next(p for p in range(1, old + 1) if all(head[i] == head[i % p] for i in range(old)))
            cfg[key] = [head[i % period] for i in range(new)] + extra
    if neo and isinstance(cfg.get("attention_types"), list):  # the resized list, once
        cfg["attention_types"] = [[cfg["attention_layers"], 1]]
    for key in family.per_layer if family is not None else ():
        if isinstance(cfg.get(key), list) and len(cfg[key]) == old:
            cfg[key] = [cfg[key][0]] * new
    for key in ("moe_layer_freq", "mlp_layer_types"):  # each layer's MLP kind: its dense layers come first
        kinds = cfg.get(key)
        if isinstance(kinds, list) and len(kinds) == old:
            cfg[key] = kinds[:new] + kinds[-1:] * (new - old)  # the last layer's kind for the layers added
