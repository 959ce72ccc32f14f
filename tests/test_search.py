"""suggest and search: constraints always hold; emitted configs read back; verify runs on the CPU."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import run
from shapewise import Workload
from shapewise.hf import load_config
from shapewise.presets import PRESETS, get_model
from shapewise.search import KEEPABLE, megatron_args, search, suggest

LOSSY = ["gpt2", "gpt3-2.7b", "pythia-2.8b", "phi-2", "falcon-7b", "llama2-7b", "gpt2-medium"]




@settings(max_examples=25, deadline=None)
@given(st.sampled_from(LOSSY), st.sampled_from([0.01, 0.02, 0.05]), st.sets(st.sampled_from(KEEPABLE), max_size=3),
       st.sampled_from([1, 2]))
def test_suggestions_respect_every_constraint(name, tol, keep, tp):
    shape = get_model(name)
    if shape.num_heads % tp or shape.ffn_width % tp:
        tp = 1
    workload = Workload(batch=2, seq=1024, tp=tp)
    result = suggest(shape, workload, gpu="h200", params_tol=tol, keep=tuple(keep), top=5)
    aspect = shape.hidden / shape.num_layers
    fields = {"hidden": lambda s, w: s.hidden, "layers": lambda s, w: s.num_layers, "heads": lambda s, w: s.num_heads,
              "kv_heads": lambda s, w: s.kv_heads, "head_dim": lambda s, w: s.d_head, "ffn": lambda s, w: s.ffn_width,
              "vocab": lambda s, w: s.vocab, "batch": lambda s, w: w.batch, "tp": lambda s, w: w.tp}
    for sug in result.suggestions:
        s, w = sug.candidate.shape, sug.candidate.workload
        assert abs(s.params / shape.params - 1) <= tol
        assert s.num_heads % w.tp == 0 and s.ffn_width % w.tp == 0 and s.num_heads % s.kv_heads == 0
        assert tp % w.tp == 0  # only smaller tensor-parallel degrees that divide the original
        assert 1 / 1.5 <= (s.hidden / s.num_layers) / aspect <= 1.5
        for field in keep:
            assert fields[field](s, w) == fields[field](shape, workload)
        assert sug.speedup == pytest.approx(result.original.gpu_ms_per_token / sug.candidate.gpu_ms_per_token)
    speeds = [s.speedup for s in result.suggestions]
    assert speeds == sorted(speeds, reverse=True)


def test_suggest_fixes_what_check_finds():
    result = suggest(get_model("gpt3-2.7b"), Workload(), gpu="h200", keep=("batch",))
    top = result.suggestions[0]
    assert {"vocab", "head-dim"} <= set(top.fixes) and top.speedup > 1.1
    assert top.changes["head_dim"] == (80, 128) and top.changes["vocab"] == (50257, 50304)
    falcon = suggest(get_model("falcon-7b"), Workload(), gpu="h200", keep=("batch",))
    nearest = (falcon.suggestions or falcon.alternatives)[0]  # its best is within the model's error
    assert nearest.candidate.shape.num_heads != 71 and nearest.speedup > 1


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_emitted_configs_round_trip(name, tmp_path, capsys):
    out = tmp_path / "config.json"
    code, _, err = run(capsys, "suggest", name, "--emit-config", str(out), "--keep", "batch", "--params-tol", "0.05")
    if code == 2:
        assert "no suggestion" in err
        return
    assert code == 0
    shape = load_config(out)
    chosen = suggest(get_model(name), Workload(), gpu="h200", keep=("batch",),
                     params_tol=0.05).suggestions[0]  # the default, as the command's: the shipped profile
    assert shape.params == chosen.candidate.shape.params and shape.hidden == chosen.candidate.shape.hidden


def test_emit_config_keeps_the_original_files_keys(tmp_path, capsys):
    original = {"model_type": "gpt2", "n_embd": 2560, "n_layer": 32, "n_head": 32, "vocab_size": 50257,
                "n_positions": 2048, "activation_function": "gelu_new", "my_own_key": "kept"}
    (tmp_path / "in.json").write_text(json.dumps(original))
    code, _, _ = run(capsys, "suggest", "--config", str(tmp_path / "in.json"), "--emit-config", str(tmp_path / "out.json"),
                     "--keep", "batch")
    written = json.loads((tmp_path / "out.json").read_text())
    assert code == 0 and written["my_own_key"] == "kept" and written["n_head"] == 20 and written["vocab_size"] == 50304


def test_megatron_arguments():
    flags = megatron_args(get_model("llama2-70b"), Workload(tp=8, batch=1, seq=4096))
    for arg in ("--num-layers 80", "--hidden-size 8192", "--num-query-groups 8", "--swiglu", "--ffn-hidden-size 28672",
                "--tensor-model-parallel-size 8", "--sequence-parallel", "--normalization RMSNorm"):
        assert arg in flags


def test_search_meets_its_budget_and_screens_fast():
    result = search(params_target=7e9, gpu="h200", workload=Workload(batch=1, seq=4096), params_tol=0.05)
    assert result.screened > 100_000 and result.screen_rate > 1e6
    for c in result.top + result.pareto:
        assert abs(c.params / 7e9 - 1) <= 0.05 and c.shape.num_heads % c.shape.kv_heads == 0
    sizes = [c.params for c in result.pareto]
    speeds = [1 / c.gpu_ms_per_token for c in result.pareto]
    assert sizes == sorted(sizes) and speeds == sorted(speeds, reverse=True)  # a true front


@pytest.mark.parametrize("argv, needle", [
    (["suggest", "gpt2", "--keep", "depth"], "unknown field"),
    (["suggest", "gpt2", "--params-tol", "0"], "above 0"),
    (["search", "--params", "-5"], "above 0"),
    (["search", "--params", "1e3"], "no shape"),
])
def test_bad_input(capsys, argv, needle):
    code, _, err = run(capsys, *argv)
    assert code == 2 and needle in err and err.count("\n") == 1


def test_verify_runs_on_the_cpu_with_tiny_shapes(tmp_path, capsys):
    pytest.importorskip("torch")
    config = {"model_type": "llama", "hidden_size": 80, "num_hidden_layers": 4, "num_attention_heads": 4,
              "intermediate_size": 213, "vocab_size": 250, "hidden_act": "silu"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, out, _ = run(capsys, "verify", str(path), "--device", "cpu", "--batch", "1", "--seq", "32", "--params-tol",
                       "0.1", "--top", "2", "--rounds", "3", "--vary", "batch", "--json")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 2 and any("batch 1→2" in r["candidate"] for r in rows)
    assert all(r["measured_speedup"] > 0 and r["ci"][0] <= r["measured_speedup"] <= r["ci"][1] for r in rows)
    assert {r["mode"] for r in rows} == {"model"}  # tiny models all fit: whole steps are measured
    code, out, _ = run(capsys, "verify", str(path), "--device", "cpu", "--batch", "1", "--seq", "32", "--params-tol",
                       "0.1", "--top", "1", "--rounds", "3", "--measure", "layer", "--json")
    assert code == 0 and json.loads(out)[0]["mode"] == "layer" and json.loads(out)[0]["head_ms"] > 0
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**config, "vocab_size": 256}))
    code, out, _ = run(capsys, "verify", str(path), "--config", str(other), "--device", "cpu", "--batch", "1",
                       "--seq", "32", "--rounds", "3", "--json")
    assert code == 0 and json.loads(out)[0]["predicted_speedup"] > 0.99


def test_verify_refuses_without_a_gpu(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    code, _, err = run(capsys, "verify", "gpt2")
    assert code == 2 and "no" in err and "GPU" in err
