"""A new user's pass over config reading and writing: suggest's emitted configs, hub ids from the cache,
search's memory and dtype, --pick, layer_types, and the words of config errors."""

import json
import shutil
from pathlib import Path

import pytest

from helpers import run
from shapewise import Workload
from shapewise.errors import ShapewiseError, ShapewiseWarning
from shapewise.hf import load_config, to_hf_config
from shapewise.hub import resolve_model
from shapewise.profile import cost_model
from shapewise.search import layer_period, megatron_args, ranked_neighbours
from shapewise.shapes import canonical

DATA = Path(__file__).parent / "data"
GPT2, BTLM, DEEPSEEK = DATA / "hf" / "gpt2.json", DATA / "hf" / "btlm-3b-8k-base.json", DATA / "hf" / "deepseek-v3.json"
GPT_OSS, MINICPM3, MISTRAL = (DATA / "hf-later" / "gpt-oss-20b.json", DATA / "hf-later" / "minicpm3-4b.json",
                              DATA / "hf" / "mistral-7b-v0.1.json")


def _write(tmp_path, cfg, name="config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return path


def _one_line_error(capsys, *argv) -> str:
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and err.startswith("shapewise: error:"), err
    return err


# ---- 1. a config path given as MODEL is the base of --emit-config, as --config is ----

def test_a_config_path_as_model_is_written_into_like_config(tmp_path, capsys):
    as_model, as_config = tmp_path / "model.json", tmp_path / "config.json"
    assert run(capsys, "suggest", str(GPT2), "--keep", "batch", "--emit-config", str(as_model))[0] == 0
    assert run(capsys, "suggest", "--config", str(GPT2), "--keep", "batch", "--emit-config", str(as_config))[0] == 0
    written = json.loads(as_model.read_text())
    assert written == json.loads(as_config.read_text())
    assert set(json.loads(GPT2.read_text())) <= set(written)  # dropout, bos/eos, task params: all kept
    assert "_name_or_path" not in written  # the original had none; a name would mislabel the new shape


# ---- 2. gpt-oss: its experts' width, its layer_types, its layer pattern; Megatron's arguments ----

def test_gpt_oss_suggestions_keep_its_layer_pattern_and_write_what_it_reads(tmp_path, capsys):
    shape = load_config(GPT_OSS)
    assert layer_period(shape) == 2
    _, ranked, _ = ranked_neighbours(shape, Workload(), model=cost_model("h200"), keep=set(), params_tol=0.05,
                                     aspect_band=1.5)
    assert ranked and all(c.shape.num_layers % 2 == 0 for c in ranked)  # sliding, full: never 21 layers
    out = tmp_path / "oss.json"
    code, text, _ = run(capsys, "suggest", "--config", str(GPT_OSS), "--params-tol", "0.05", "--emit-config", str(out))
    assert code == 0
    written = json.loads(out.read_text())
    assert "moe_intermediate_size" not in written  # gpt_oss has no such key
    assert len(written["layer_types"]) == written["num_hidden_layers"]
    assert written["layer_types"][:4] == ["sliding_attention", "full_attention"] * 2
    back = load_config(out)
    assert back.expert_width == written["intermediate_size"] != 2880  # the suggested width, where gpt_oss reads it
    assert "do not repeat evenly" not in capsys.readouterr().err
    code, text, _ = run(capsys, "suggest", "--config", str(GPT_OSS), "--params-tol", "0.05", "--emit", "megatron")
    assert code == 0 and f"--ffn-hidden-size {back.ffn_width}" in text and f"--moe-ffn-hidden-size {back.ffn_width}" \
        in text


def test_a_gpt_oss_config_cannot_hold_experts_apart_from_its_mlp_width():
    shape, base = load_config(GPT_OSS), json.loads(GPT_OSS.read_text())
    with pytest.raises(ShapewiseError, match="experts' width in intermediate_size"):
        to_hf_config(canonical(shape.replace(expert_ffn=3072)), base)
    written = to_hf_config(shape.replace(num_layers=20), base)  # layer_types follows, alternating still
    assert written["layer_types"] == ["sliding_attention", "full_attention"] * 10


def test_btlm_gains_no_key_it_does_not_read_and_alibi_is_not_said_as_rope(capsys):
    shape, base = load_config(BTLM), json.loads(BTLM.read_text())
    written = to_hf_config(canonical(shape.replace(num_heads=20)), base)
    assert "num_key_value_heads" not in written and written["n_head"] == 20
    with pytest.raises(ShapewiseError, match="ALiBi"):
        megatron_args(shape, Workload())
    assert "ALiBi" in _one_line_error(capsys, "suggest", "--config", str(BTLM), "--emit", "megatron")


# ---- 3. latent attention: its head dim under its own key; what it cannot hold, in words ----

def test_latent_attention_head_dim_is_written_as_qk_nope_head_dim(tmp_path):
    shape, base = load_config(DEEPSEEK), json.loads(DEEPSEEK.read_text())
    target = canonical(shape.replace(num_heads=28, head_dim=None))  # heads 128→28, head dim 128→256
    written = to_hf_config(target, base)
    assert written["qk_nope_head_dim"] == 256 and "head_dim" not in written
    assert load_config(_write(tmp_path, written)).d_head == 256
    minicpm, base = load_config(MINICPM3), json.loads(MINICPM3.read_text())
    with pytest.raises(ShapewiseError, match="value heads' width") as err:  # its code takes hidden / heads
        to_hf_config(canonical(minicpm.replace(num_heads=80, head_dim=minicpm.d_head)), base)
    assert "None" not in str(err.value)


# ---- 4. a hub id read from the cache is named by the id, not its snapshot ----

def test_a_cached_hub_id_is_named_by_its_id(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    snapshot = tmp_path / "hub" / "models--my-org--tiny-gpt" / "snapshots" / "0e9e39f249a16976918f6564b8830bc894c89659"
    snapshot.mkdir(parents=True)
    shutil.copy(GPT2, snapshot / "config.json")
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text(snapshot.name)
    assert resolve_model("my-org/tiny-gpt").name == "my-org/tiny-gpt"
    code, out, _ = run(capsys, "check", "my-org/tiny-gpt")
    assert code == 0 and out.startswith("my-org/tiny-gpt:") and "0e9e39f" not in out
    out_file = tmp_path / "emitted.json"
    assert run(capsys, "suggest", "my-org/tiny-gpt", "--keep", "batch", "--emit-config", str(out_file))[0] == 0
    assert json.loads(out_file.read_text())["task_specific_params"]  # written into the cached file's keys


# ---- 5. search: memory said, a dtype the GPU lacks said as that ----

def test_search_says_what_does_not_fit_and_a_dtype_the_gpu_lacks(capsys):
    code, out, err = run(capsys, "search", "--params", "7e9", "--gpu", "v100", "--dtype", "fp16", "--top", "2", "--json")
    assert code == 0 and err.count("shapewise: warning:") == 2 and "do not fit" in err  # and Volta's attention:
    assert "v100: FlashAttention and cuDNN's attention need Ampere" in err  # said since the twentieth pass
    assert all(not row["fits"] and row["memory_bytes"] > 32e9 for row in json.loads(out)["top"])
    assert "no bf16 support" in _one_line_error(capsys, "search", "--params", "7e9", "--gpu", "v100")
    assert "no fp8 support" in _one_line_error(capsys, "search", "--params", "7e9", "--gpu", "a100-80gb", "--dtype",
                                               "fp8")


# ---- 6. --pick in its own words, and said when it does nothing ----

def test_pick_is_worded_as_which_suggestion_and_said_without_emit(capsys):
    assert "which suggestion to emit" in _one_line_error(capsys, "suggest", "gpt3-2.7b", "--pick", "0")
    code, _, err = run(capsys, "suggest", "gpt3-2.7b", "--pick", "2", "--keep", "batch")
    assert code == 0 and "--pick 2 has no effect" in err


# ---- 7. layer_types and sliding_window 0: said, never guessed ----

@pytest.mark.parametrize("types, said", [
    (["sliding_attention", "bogus_attention"] * 12, "'bogus_attention', not an attention kind"),
    ("sliding", "must be a list"),
    (["sliding_attention", "full_attention"] * 5, "names 10 layers but the model has 24"),
])
def test_layer_types_that_cannot_be_read_are_refused(tmp_path, capsys, types, said):
    path = _write(tmp_path, {**json.loads(GPT_OSS.read_text()), "layer_types": types})
    assert said in _one_line_error(capsys, "check", str(path))


def test_a_longer_layer_types_and_a_zero_window_are_said(tmp_path):
    longer = {**json.loads(GPT_OSS.read_text())}
    longer["layer_types"] = longer["layer_types"] + ["full_attention"]
    with pytest.warns(ShapewiseWarning, match="names 25 layers for 24; the first 24 are read"):
        assert load_config(_write(tmp_path, longer)).global_every == 2
    with pytest.warns(ShapewiseWarning, match="sliding_window 0 is read as no sliding window"):
        shape = load_config(_write(tmp_path, {**json.loads(MISTRAL.read_text()), "sliding_window": 0}))
    assert shape.window == 0


# ---- 8. config errors in a user's words ----

@pytest.mark.parametrize("text, said", [("null", "holds JSON null"), ('"x"', "holds a JSON string")])
def test_a_config_that_is_not_an_object_is_named_in_json_words(tmp_path, capsys, text, said):
    path = tmp_path / "config.json"
    path.write_text(text)
    err = _one_line_error(capsys, "check", str(path))
    assert said in err and "NoneType" not in err and " str," not in err


@pytest.mark.parametrize("value, said", [(1e30, "far too large"), (4096.0, "(write 4096)")])
def test_a_float_size_is_refused_for_what_it_is(tmp_path, capsys, value, said):
    cfg = {"model_type": "llama", "hidden_size": value, "num_hidden_layers": 2, "num_attention_heads": 32,
           "vocab_size": 32000}
    assert said in _one_line_error(capsys, "check", str(_write(tmp_path, cfg)))


def test_a_head_dim_the_types_defaults_give_is_written_when_it_changes(tmp_path):
    # Gemma3TextConfig's head_dim is 256 where text_config leaves it out: 20 heads of 128 must say so
    base = json.loads((DATA / "hf" / "gemma-3-4b-it.json").read_text())
    shape = load_config(DATA / "hf" / "gemma-3-4b-it.json")
    target = canonical(shape.replace(num_heads=20, num_kv_heads=10, head_dim=None))
    back = load_config(_write(tmp_path, to_hf_config(target, base)))
    assert (back.num_heads, back.kv_heads, back.d_head) == (20, 10, 128)
