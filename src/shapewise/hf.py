"""Hugging Face config.json: reading one into a ModelShape, and writing a ModelShape as one."""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import ShapewiseError
from .shapes import STRUCTURAL_FIELDS, ModelShape, canonical

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
        return canonical(ModelShape(name=name, source=source, **fields))
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
        now = canonical(ModelShape(name="x", **_fields_from_config(cfg, "config")))
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
    target = canonical(shape)
    cfg = copy.deepcopy(base) if base is not None else _template(target)
    inner = cfg.get("text_config")
    if not (isinstance(inner, dict) and not any(k in cfg for k in _HIDDEN)):
        inner = cfg  # the language model's fields sit at the top unless a multimodal wrapper nests them
    if _fit(inner, target) or base is None:
        cfg["_name_or_path"] = shape.name  # base's name would now mislabel it
    back = canonical(ModelShape(name=shape.name, **_fields_from_config(cfg, "written config")))
    for field in STRUCTURAL_FIELDS:
        if getattr(back, field) != getattr(target, field):  # a gap in _fit, not bad input
            raise ShapewiseError(f"cannot write {field}={getattr(target, field)!r} into this "
                                 f"{cfg.get('model_type', 'generic')} config (it reads back as "
                                 f"{getattr(back, field)!r})")
    return cfg
