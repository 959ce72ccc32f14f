"""The files users bring, fuzzed: config.json, profiles (given with --profile, or lying in the
profile folder) and results stores, each valid or broken in the ways files break (wrong types, NaN,
infinite, negative or huge numbers, tables of the wrong shape, truncation, flipped bytes, a page of
garbage behind a valid header). Whatever the file: no traceback, exit 0 or 2, one line on stderr
for an error, memory bounded; a broken profile in the profile folder is set aside with a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import fuzz, run_explained
from shapewise.measure import Timing
from shapewise.store import Store

SHIPPED = Path(__file__).resolve().parents[1] / "src" / "shapewise" / "data" / "profiles" / "h200.json"

# JSON values as files get them wrong, and a few that are right for a size field.
json_value = st.one_of(
    st.sampled_from([0, -1, 1, 64, 4096, 10**12, 10**26, 2**63, 1.5, 1e26, float("nan"), float("inf"),
                     float("-inf"), True, False, None, "", "4096", [], {}, [4096], {"a": 1}]),
    st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5))

GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024,
        "n_inner": None, "activation_function": "gelu_new", "tie_word_embeddings": True}
LLAMA = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
         "num_key_value_heads": 4, "intermediate_size": 5632, "vocab_size": 32000, "hidden_act": "silu",
         "head_dim": 128, "max_position_embeddings": 4096, "tie_word_embeddings": False}
MIXTRAL = {**LLAMA, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}
# the keys read whatever the type (layer_types, Llama 4's and DeepSeek's MoE layouts, the warnings' keys)
LLAMA4 = {**MIXTRAL, "model_type": "llama4_text", "intermediate_size_mlp": 8192, "interleave_moe_layer_step": 2,
          "attention_chunk_size": 1024, "sliding_window": 512,
          "layer_types": ["sliding_attention", "full_attention"] * 2, "first_k_dense_replace": 1,
          "num_nextn_predict_layers": 1, "index_topk": 256, "architectures": ["Llama4ForCausalLM"]}

# Hunyuan's per-layer lists, shared MLP and refused keys
HUNYUAN = {**LLAMA, "model_type": "hunyuan", "num_experts": 8, "moe_topk": [2] * 4, "moe_intermediate_size": [1024] * 4,
           "intermediate_size": 1024, "use_mixed_mlp_moe": True, "num_shared_expert": [1] * 4, "use_qk_norm": True,
           "use_cla": False, "moe_layer_num_skipped": 0, "attention_head_dim": 128}


def mutated(base: dict):
    """`base` with some of its fields (or a new one) set to wrong or right values, some dropped."""
    keys = st.sampled_from(sorted(base)) | st.sampled_from(["hidden_size", "ffn_dim", "torch_dtype", "x", "moe_layers",
                                                           "multi_query_attention", "multi_query_group_num",
                                                           "cross_attention_layers", "vision_encoder", "block_configs",
                                                           "text_config", "sliding_window_pattern", "rmsnorm"])
    return st.tuples(st.dictionaries(keys, json_value, max_size=4), st.lists(st.sampled_from(sorted(base)),
                                                                              max_size=2)).map(
        lambda change: {k: v for k, v in {**base, **change[0]}.items() if k not in change[1]})


config_text = st.one_of(
    st.sampled_from([GPT2, LLAMA, MIXTRAL, LLAMA4, HUNYUAN]).flatmap(mutated).map(json.dumps),  # NaN and Infinity as JSON allows
    st.sampled_from([GPT2, LLAMA]).map(json.dumps).flatmap(lambda text: st.integers(0, len(text)).map(
        lambda cut: text[:cut])),  # truncated
    st.sampled_from(["", "[]", "null", "1", '"gpt2"', "{", '{"model_type": "gpt2"}', "[" * 5000, "\x00\xff"]),
)


@fuzz(50)
@given(text=config_text, extra=st.sampled_from([[], ["--mode", "decode"], ["--tp", "2"], ["--seq", "512"]]))
def test_configs(tmp_path_factory, text, extra):
    path = tmp_path_factory.mktemp("config") / "config.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    run_explained("check", "--config", str(path), "--json", *extra)


@pytest.fixture(scope="module")
def small_profile() -> dict:
    """The shipped profile with its tables cut to a few rows (a consistent profile, fast to read)."""
    data = json.loads(SHIPPED.read_text())
    params = data["params"]
    kernels = 6
    params["cutlass_kernels"] = params["cutlass_kernels"][:kernels]
    params["cutlass_chooser"] = params["cutlass_chooser"][:kernels]
    params["cutlass_choices"] = [row for row in params["cutlass_choices"] if row[6] < kernels][:40]
    params["gemm_trees"] = params["gemm_trees"][:5]
    return data


def broken_profile(data: dict):
    """A profile with one thing wrong (or nothing): a field, a parameter, a table's row or cell."""
    params = sorted(data["params"])
    tables = [name for name in params if isinstance(data["params"][name], list)
              and data["params"][name] and isinstance(data["params"][name][0], list)]

    def top(change):
        key, value = change
        return {**data, key: value}

    def param(change):
        key, value = change
        return {**data, "params": {**data["params"], key: value}}

    def cell(change):
        name, row, col, value = change
        table = [list(r) for r in data["params"][name]]
        row %= len(table)
        table[row][col % len(table[row])] = value
        return {**data, "params": {**data["params"], name: table}}

    def row(change):
        name, cut = change
        table = [list(r) for r in data["params"][name]]
        table[0] = table[0][:cut]
        return {**data, "params": {**data["params"], name: table}}

    return st.one_of(
        st.just(data),
        st.tuples(st.sampled_from(["format", "version", "gpu", "environment", "fit", "params", "created_utc"]),
                  json_value | st.sampled_from(["a100", "h200", "tpu", 4, 3, 5])).map(top),
        st.tuples(st.sampled_from(params), json_value).map(param),
        st.tuples(st.sampled_from(tables), st.integers(0, 100), st.integers(0, 40), json_value).map(cell),
        st.tuples(st.sampled_from(tables), st.integers(0, 7)).map(row),
    ).map(lambda d: json.dumps(d).encode())


raw_bytes = st.one_of(st.binary(max_size=300), st.sampled_from([b"", bytes(4096), b"\xff" * 100, b"{" * 100000]))


@fuzz(30)
@given(data=st.data())
def test_profiles_given_with_a_flag(tmp_path_factory, small_profile, data):
    content = data.draw(broken_profile(small_profile) | raw_bytes)
    gpu = data.draw(st.sampled_from(["h200", "a100"]))
    path = tmp_path_factory.mktemp("profile") / "p.json"
    path.write_bytes(content)
    code, out, err = run_explained("check", "gpt2", "--gpu", gpu, "--profile", str(path), "--json")
    if code == 0:
        assert json.loads(out)["totals"]["step_ms"] > 0


@fuzz(20)
@given(data=st.data())
def test_profiles_in_the_profile_folder(tmp_path_factory, small_profile, data, monkeypatch):
    content = data.draw(broken_profile(small_profile) | raw_bytes)
    folder = tmp_path_factory.mktemp("profiles")
    monkeypatch.setenv("SHAPEWISE_PROFILES", str(folder))
    (folder / "h200.json").write_bytes(content)
    code, out, err = run_explained("check", "gpt2", "--gpu", "h200", "--seq", "1024", "--json")
    assert code == 0, "a broken profile in the folder is set aside, not a reason to stop"
    if err:
        assert not (folder / "h200.json").exists(), "warned about but not set aside"
    assert json.loads(out)["totals"]["step_ms"] > 0


@pytest.fixture(scope="module")
def sound_store(tmp_path_factory) -> Path:
    """A small sound store, checkpointed into one file."""
    path = tmp_path_factory.mktemp("store") / "results.db"
    with Store(path) as store:
        env = store.environment_id({"device": "cpu", "processor": "test"})
        for i in range(120):
            store.record(env_id=env, bench="gemm" if i % 2 else "op", key=f"k{i}", params={"m": i, "pad": "x" * 100},
                         timing=Timing(samples_ms=(1.0, 1.1)), flops=1e9)
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def damaged(sound: bytes):
    def flip(change):
        offsets, value = change
        raw = bytearray(sound)
        for offset in offsets:
            raw[offset % len(raw)] = value
        return bytes(raw)

    def garbage_page(page):
        page %= len(sound) // 4096
        return sound[:page * 4096] + b"\xab" * 4096 + sound[(page + 1) * 4096:]

    return st.one_of(
        st.just(sound),
        st.tuples(st.lists(st.integers(0, len(sound)), min_size=1, max_size=20), st.integers(0, 255)).map(flip),
        st.integers(1, 40).map(garbage_page),
        st.integers(0, len(sound)).map(lambda cut: sound[:cut]),
        raw_bytes,
    )


@fuzz(40)
@given(data=st.data())
def test_stores(tmp_path_factory, sound_store, data):
    folder = tmp_path_factory.mktemp("db")
    path = folder / "results.db"
    path.write_bytes(data.draw(damaged(sound_store.read_bytes())))
    argv = data.draw(st.sampled_from([
        ["results", "--db", str(path)], ["results", "--db", str(path), "--check"],
        ["results", "--db", str(path), "--json"], ["results", "--db", str(path), "--export", str(folder / "x.csv")],
        ["results", "--db", str(path), "--export", str(folder / "x.json")],
        ["validate", "--from-db", "--db", str(path), "--gpu", "h200"],
        ["bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--device", "foo", "--db", str(path)],
    ]))
    run_explained(*argv)
