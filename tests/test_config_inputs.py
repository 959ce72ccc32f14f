"""A new user's pass over what a model argument and a config.json may hold: unreadable folders, numbers too
long to read, paths and presets that shadow each other, hub ids that are not a preset's checkpoint, keys
given twice, keys of the wrong kind, and an activation the MLP cannot take. Each is one line, or a
warning, never a traceback or a silent guess."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from helpers import run
from shapewise.errors import ShapewiseError, ShapewiseWarning
from shapewise.hf import load_config
from shapewise.hub import cached_config, resolve_model
from shapewise.presets import PRESETS, get_model, preset_key

DATA = Path(__file__).parent / "data" / "hf"
GPT2, LLAMA3, GEMMA2 = DATA / "gpt2.json", DATA / "llama-3-8b.json", DATA / "gemma-2-9b-it.json"


def _config(source: Path, **changes) -> dict:
    return {**json.loads(source.read_text()), **changes}


def _write(path: Path, cfg) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    return path


def _place(source: Path, path: Path) -> Path:
    """source copied to path, its folders made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(source, path))


def _one_line_error(capsys, *argv) -> str:
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and err.startswith("shapewise: error:"), err
    return err


def _quiet(call):
    """call's result, asserting it warned of nothing."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    assert not [w for w in caught if issubclass(w.category, ShapewiseWarning)], [str(w.message) for w in caught]
    return result


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """An empty Hugging Face cache, offline."""
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "home" / "hub"


# ---- 1. a folder or file that cannot be read ----

def _locked(monkeypatch, folder: Path) -> None:
    """Whatever lies in folder answers as under `chmod 000 folder` for a user who is not root."""
    stat = pathlib.Path.stat

    def denied(self, *args, **kwargs):
        if str(self).startswith(str(folder) + os.sep):
            raise PermissionError(13, "Permission denied", str(self))
        return stat(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "stat", denied)


@pytest.mark.parametrize("how", [("--config", "{d}"), ("{d}",), ("{d}/config.json",)])
def test_a_folder_without_permission_is_one_line(tmp_path, monkeypatch, capsys, how):
    folder = tmp_path / "d"
    _place(GPT2, folder / "config.json")
    _locked(monkeypatch, folder)
    err = _one_line_error(capsys, "check", *[a.format(d=folder) for a in how])
    assert "cannot read it (Permission denied)" in err


def test_a_folder_without_permission_for_real(tmp_path):
    """As the user met it: `chmod 000 d`; root reads through permissions, so it drops those powers."""
    folder = tmp_path / "d"
    _place(GPT2, folder / "config.json")
    prefix = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root reads any folder, and setpriv is not here to drop that")
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]
    folder.chmod(0)
    try:
        done = subprocess.run([*prefix, sys.executable, "-m", "shapewise", "check", "--config", str(folder)],
                              capture_output=True, text=True, timeout=120)
    finally:
        folder.chmod(0o755)
    if done.returncode != 2 and "Operation not permitted" in done.stderr:
        pytest.skip("setpriv cannot drop capabilities here")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Permission denied" in done.stderr, done.stderr


def test_a_hub_cache_entry_without_permission_is_one_line(hub, monkeypatch):
    repo = hub / "models--meta-llama--Llama-3.1-8B"
    _write(repo / "refs" / "main", "abc")
    _locked(monkeypatch, repo)
    with pytest.raises(ShapewiseError, match="cannot read this Hugging Face cache entry"):
        cached_config("meta-llama/Llama-3.1-8B")


# ---- 2. a number too long for Python to read ----

def test_a_number_of_5000_digits_is_one_line_that_does_not_echo_it(tmp_path, capsys):
    text = LLAMA3.read_text().replace('"vocab_size": 128256', '"vocab_size": ' + "9" * 5000)
    assert "9" * 5000 in text
    err = _one_line_error(capsys, "check", "--config", str(_write(tmp_path / "big.json", text)))
    assert "big.json" in err and "5,000 digits long" in err and "9" * 50 not in err


@pytest.mark.parametrize("config, hidden", [("llama-3-8b.json", 4096), ("phi-2.json", 2560)])
def test_a_size_past_a_floats_range_is_one_line(tmp_path, capsys, config, hidden):
    """A whole number of 401 digits: Python reads it, no float holds it (once an OverflowError's traceback,
    from the hidden size's bound, and from Phi-2's rotated share of each head)."""
    text = (DATA / config).read_text().replace(f'"hidden_size": {hidden}', '"hidden_size": 1' + "0" * 400)
    err = _one_line_error(capsys, "check", "--config", str(_write(tmp_path / "big.json", text)))
    assert "big.json: a number in it is 401 digits long" in err and "0" * 50 not in err


def test_too_many_layers_are_refused_before_they_are_walked(tmp_path, capsys):
    """DeepSeek-V3's dense layers are counted layer by layer: num_hidden_layers 10^12 ran for hours before
    ModelShape refused it. The bound is checked as the count is read, naming the config's key."""
    text = (DATA / "deepseek-v3.json").read_text().replace('"num_hidden_layers": 61', '"num_hidden_layers": 10000000')
    err = _one_line_error(capsys, "check", "--config", str(_write(tmp_path / "deep.json", text)))
    assert "deep.json: num_hidden_layers: the number of layers must be a positive whole number from 1 to 65,536" in err


# ---- 3. a path is read as a path, a preset as a preset ----

def test_a_missing_path_is_no_such_file_not_the_preset_of_its_last_name(capsys):
    for name in ("/nonexistent/dir/gpt2", "foo/bar/baz"):
        assert "no such file" in _one_line_error(capsys, "check", name)


def test_an_existing_file_without_json_is_read_not_the_preset_it_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _place(GPT2, tmp_path / "x" / "llama3-8b")
    shutil.copy(GPT2, tmp_path / "myconfig")
    assert resolve_model(str(tmp_path / "x" / "llama3-8b")).vocab == 50257  # gpt2's, not llama3-8b's 128256
    assert resolve_model("x/llama3-8b").vocab == 50257
    assert _quiet(lambda: resolve_model("./myconfig")).vocab == 50257


def test_a_local_folder_named_as_a_preset_is_read_and_said(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _place(LLAMA3, tmp_path / "gpt2" / "config.json")
    with pytest.warns(ShapewiseWarning, match=r"read the local folder .*gpt2, not the preset gpt2"):
        assert resolve_model("gpt2").vocab == 128256
    code, out, err = run(capsys, "check", "gpt2")
    assert code == 0 and err.count("shapewise: warning:") == 1 and "not the preset gpt2" in err
    assert _quiet(lambda: resolve_model("./gpt2")).vocab == 128256  # a path, said as one: nothing to warn of
    assert _quiet(lambda: resolve_model("llama3-8b")) is PRESETS["llama3-8b"]


def test_a_stray_file_named_as_a_preset_says_why_it_was_read(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpt2").write_text("not a config")
    err = _one_line_error(capsys, "check", "gpt2")
    assert "not valid JSON" in err and "not the preset gpt2" in err


# ---- 4. a hub id falls back only to its own checkpoint's preset, and says so ----

@pytest.mark.parametrize("name, like", [("randomorg/gpt2", "openai-community/gpt2"),
                                        ("someone/llama3-8b", "meta-llama/Meta-Llama-3-8B"),
                                        ("mistralai/Mistral-7B-v0.3", "mistralai/Mistral-7B-v0.1"),
                                        ("mistralai/Mistral-7B-Instruct-v0.3", "mistralai/Mistral-7B-v0.1")])
def test_a_hub_id_of_another_org_or_version_is_not_a_preset(hub, capsys, name, like):
    assert preset_key(name) is None
    with pytest.raises(ShapewiseError, match="unknown model"):
        get_model(name)
    err = _one_line_error(capsys, "check", name)
    assert "not in the Hugging Face cache" in err and like in err


def test_a_version_that_changes_the_shape_is_not_the_preset():
    assert preset_key("mistral-7b-v0.3") is None and preset_key("mistral-7b-v0.1") == "mistral-7b"
    assert preset_key("mistralai/Mixtral-8x7B-Instruct-v0.1") == "mixtral-8x7b"
    with pytest.raises(ShapewiseError, match="mistralai/Mistral-7B-v0.1"):
        get_model("Mistral-7B-v0.3")


def test_a_hub_id_priced_as_its_preset_says_so(hub, capsys):
    with pytest.warns(ShapewiseWarning, match="meta-llama/Llama-2-7b-chat-hf is not in the local hub cache: "
                                              "priced as the preset llama2-7b"):
        assert resolve_model("meta-llama/Llama-2-7b-chat-hf") is PRESETS["llama2-7b"]
    code, _, err = run(capsys, "check", "openai-community/gpt2")
    assert code == 0 and "openai-community/gpt2 is not in the local hub cache: priced as the preset gpt2" in err


def test_a_cached_v0_3_reads_its_own_vocabulary(hub):
    snapshot = hub / "models--mistralai--Mistral-7B-v0.3" / "snapshots" / "abc"
    _place(DATA / "mistral-7b-instruct-v0.3.json", snapshot / "config.json")
    assert resolve_model("mistralai/Mistral-7B-v0.3").vocab == 32768


# ---- 5. a key given twice ----

def test_a_key_given_two_values_is_refused_naming_both(tmp_path, capsys):
    text = LLAMA3.read_text().rstrip().removesuffix("}") + ', "hidden_size": 2048}'
    err = _one_line_error(capsys, "check", "--config", str(_write(tmp_path / "dup.json", text)))
    assert "hidden_size is given twice" in err and "4096" in err and "2048" in err
    nested = json.dumps({"model_type": "llava", "text_config": {"model_type": "llama"}})
    nested = nested.replace('"model_type": "llama"', '"model_type": "llama", "vocab_size": 1, "vocab_size": 2')
    with pytest.raises(ShapewiseError, match="vocab_size is given twice, as 1 and 2"):
        load_config(_write(tmp_path / "nested.json", nested))


def test_a_key_given_twice_alike_is_read_without_a_word(tmp_path):
    text = LLAMA3.read_text().rstrip().removesuffix("}") + ', "hidden_size": 4096, "rope_scaling": null}'
    assert _quiet(lambda: load_config(_write(tmp_path / "twice.json", text))).hidden == 4096


# ---- 6. keys of the wrong kind are refused as other keys are ----

@pytest.mark.parametrize("source, key, value, expected", [
    (LLAMA3, "max_position_embeddings", -1, "must be positive"),
    (LLAMA3, "max_position_embeddings", "4096", "must be a whole number"),
    (LLAMA3, "rope_scaling", "linear", "must be an object"),
    (LLAMA3, "rope_scaling", [1, 2], "must be an object"),
    (LLAMA3, "rope_theta", "500000", "must be a number"),
    (GEMMA2, "query_pre_attn_scalar", "x", "must be a number"),
    (GEMMA2, "final_logit_softcapping", "y", "must be a number"),
    (GEMMA2, "rope_scaling", "linear", "must be an object"),
    (DATA / "dbrx-base.json", "attn_config", "x", "must be an object"),  # was an AttributeError
    (DATA / "mpt-30b-chat.json", "expansion_ratio", "x", "must be a number"),  # was read as 4
    (DATA / "btlm-3b-8k-base.json", "position_embedding_type", 3, "must be a string"),
    (LLAMA3, "alibi", "yes", "must be true or false"),
])
def test_a_key_of_the_wrong_kind_is_refused(tmp_path, capsys, source, key, value, expected):
    path = _write(tmp_path / "config.json", _config(source, **{key: value}))
    err = _one_line_error(capsys, "check", "--config", str(path))
    assert f"{key} {expected}" in err


def test_null_and_right_kinds_are_read(tmp_path):
    assert load_config(_write(tmp_path / "a.json", _config(LLAMA3, rope_scaling=None))).vocab == 128256
    assert load_config(_write(tmp_path / "b.json", _config(GEMMA2, final_logit_softcapping=None))).logit_softcap is False


# ---- 8. an activation the family's MLP cannot take says why ----

@pytest.mark.parametrize("source, key", [(GPT2, "activation_function"), (DATA / "phi-2.json", "hidden_act")])
def test_silu_in_an_mlp_without_a_gate_says_so(tmp_path, capsys, source, key):
    err = _one_line_error(capsys, "check", "--config", str(_write(tmp_path / "c.json", _config(source, **{key: "silu"}))))
    assert "'silu' in an MLP without a gate" in err and "it knows" not in err


def test_a_rotary_model_past_its_trained_context_is_said(capsys):
    from shapewise.shapes import shape_record

    config = Path(__file__).parent / "data" / "hf" / "llama-2-7b.json"  # max_position_embeddings 4096
    code, out, err = run(capsys, "check", "--config", str(config), "--seq", "8192", "--json")
    said = "sequence 8,192 is longer than the model's context of 4,096 tokens (as its config gives it)"
    assert code == 0 and said in err and any(said in line for line in json.loads(out)["caveats"])
    code, _, err = run(capsys, "check", "--config", str(config), "--seq", "4096")
    assert code == 0 and "context" not in err
    shape = load_config(config)
    assert shape.context == 4096 and "context" not in shape_record(shape)  # store keys as before
    assert shape == shape.replace(context=0)


def test_a_longer_model_max_length_is_the_context_a_model_serves(capsys, tmp_path):
    """Command R v01's full file writes max_position_embeddings 8192 beside model_max_length 131072, the 128K it
    serves: a sequence of 16,384 was warned past its context. The longer is its context; a tokenizer's "no limit"
    (1e30) or a model_max_length alone (no positions given) is not."""
    config = Path(__file__).parent / "data" / "hf-twentieth" / "command-r-v01-weight-tie.json"
    assert load_config(config).context == 131072
    code, _, err = run(capsys, "check", "--config", str(config), "--seq", "16384")
    assert code == 0 and "context" not in err, err
    code, _, err = run(capsys, "check", "--config", str(config), "--seq", "262144", "--batch", "1")
    assert code == 0 and "context of 131,072 tokens" in err, err
    base = json.loads(config.read_text())
    no_positions = {k: v for k, v in base.items() if k != "max_position_embeddings"}
    for number, (cfg, context) in enumerate(((dict(base, model_max_length=10**30), 8192),
                                             (dict(base, model_max_length=4096), 8192), (no_positions, 0))):
        path = tmp_path / f"{number}.json"
        path.write_text(json.dumps(cfg))
        assert load_config(path).context == context, cfg.get("model_max_length")


@pytest.mark.parametrize("preset, config", [
    ("llama2-7b", "llama-2-7b"), ("llama3-8b", "llama-3-8b"), ("mistral-7b", "mistral-7b-v0.1"),
    ("mixtral-8x7b", "mixtral-8x7b"), ("qwen2-7b", "qwen2-7b"), ("gemma-7b", "gemma-7b"), ("phi-2", "phi-2"),
    ("pythia-1b", "pythia-1b"),
])
def test_a_presets_context_is_its_checkpoints(preset, config):
    read = load_config(Path(__file__).parent / "data" / "hf" / f"{config}.json")
    assert PRESETS[preset].context == read.context > 0


def test_hunyuan_dense_is_read_by_its_own_rule(tmp_path):
    """transformers' HunYuanDenseV1 (model_type hunyuan_v1_dense) was guessed: Llama's layer with a QK RMSNorm
    over head_dim, untied. The fields below are those its configuration class documents (Hunyuan-7B's)."""
    import json
    import warnings

    from shapewise.hf import load_config

    cfg = {"architectures": ["HunYuanDenseV1ForCausalLM"], "model_type": "hunyuan_v1_dense", "vocab_size": 290943,
           "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128, "hidden_act": "silu", "rms_norm_eps": 1e-5,
           "attention_bias": False, "tie_word_embeddings": False}
    file = tmp_path / "config.json"
    file.write_text(json.dumps(cfg))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing guessed
        shape = load_config(file)
    assert (shape.qk_norm, shape.qk_norm_weights, shape.tied_embeddings, shape.attn_bias) == (True, "head", False, False)
    h, f, L, V, kv = 4096, 11008, 32, 290943, 8 * 128
    layer = h * (h + 2 * kv) + h * h + 3 * h * f + 2 * h + 2 * 128
    assert shape.params == L * layer + 2 * V * h + h


def test_hunyuan_moe_in_transformers_reads_as_tencents_own_file(tmp_path):
    """Hunyuan-A13B's file for Tencent's own code (model_type hunyuan: moe_intermediate_size and
    num_shared_expert per layer) and for transformers' HunYuanMoEV1 (hunyuan_v1_moe: a shared MLP and 64
    experts, all intermediate_size wide) are one model; the second was guessed."""
    import json
    import warnings

    from shapewise.hf import load_config

    own = Path(__file__).parent / "data" / "hf-third" / "hunyuan-a13b-instruct.json"
    cfg = json.loads(own.read_text())
    for key in ("moe_intermediate_size", "num_shared_expert", "use_mixed_mlp_moe", "auto_map"):
        cfg.pop(key)
    cfg["model_type"] = "hunyuan_v1_moe"
    native = tmp_path / "config.json"
    native.write_text(json.dumps(cfg))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the multimodal keys Tencent's file carries are said for both
        a, b = load_config(own), load_config(native)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        load_config(native)
    assert not any("guessed" in str(w.message) for w in said)
    assert (b.params, b.active_params, b.num_experts, b.top_k, b.num_shared_experts, b.qk_norm) == \
        (a.params, a.active_params, 64, 8, 1, True)
