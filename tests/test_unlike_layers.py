"""Models whose layers differ (dense-first layers among MoE ones, windowed layers among global ones, layers
without rotary embeddings among rotary ones) are
priced by suggest, search and plan as check prices them: their mean layer, not one block × the layers."""

import pytest

from shapewise import check, suggest
from shapewise.hf import load_config
from shapewise.parallel import layer_times
from shapewise.profile import cost_model
from shapewise.shapes import Workload

UNLIKE = ["tests/data/hf/gemma-2-9b-it.json", "tests/data/hf/deepseek-v3.json",
          "tests/data/hf-later/llama-4-maverick-17b-128e-instruct-fp8.json", "tests/data/hf-later/gpt-oss-20b.json",
          "tests/data/hf-fourth/smollm3-3b.json"]  # the last: every 4th layer without rotary embeddings
ALIKE = "tests/data/hf/llama-3.1-8b.json"


def test_layers_alike_says_which_models_differ_by_layer():
    assert not any(load_config(path).layers_alike for path in UNLIKE)
    assert load_config(ALIKE).layers_alike


@pytest.mark.parametrize("path", [*UNLIKE, ALIKE])
@pytest.mark.parametrize("mode", ["train", "decode"])
def test_suggest_prices_the_original_and_its_pick_as_check_does(path, mode):
    shape, w = load_config(path), Workload(batch=4, seq=2048, mode=mode)
    result = suggest(shape, w, gpu="h200")
    assert result.original.step_ms == pytest.approx(check(shape, w, gpu="h200").step.time_ms, rel=1e-9)
    for s in (*result.suggestions[:2], *result.alternatives[:1]):
        checked = check(s.candidate.shape, s.candidate.workload, gpu="h200").step.time_ms
        assert s.candidate.step_ms == pytest.approx(checked, rel=1e-9), s.changes


@pytest.mark.parametrize("path", [UNLIKE[0], "tests/data/hf/gemma-3-1b-it.json", ALIKE])
def test_plans_layers_are_checks(path):
    shape, w = load_config(path), Workload(batch=4, seq=2048)
    model = cost_model("h200")
    t = layer_times(shape, w, gpu=model.gpu, params=model.params)
    step = check(shape, w, gpu="h200").step.time_ms
    assert shape.num_layers * (t.fwd_ms + t.bwd_ms) + t.embed_ms + t.head_ms == pytest.approx(step, rel=1e-9)


def test_suggest_on_a_gpu_without_the_dtype_says_so_in_one_line(capsys):
    from shapewise.cli import main
    from shapewise.errors import ShapewiseError
    from shapewise.presets import get_model

    with pytest.raises(ShapewiseError, match="no bf16 support"):
        suggest(get_model("gpt2"), Workload(), gpu="v100")
    assert main(["suggest", "gpt2", "--gpu", "a100-80gb", "--dtype", "fp8"]) == 2
    assert capsys.readouterr().err.strip() == ("shapewise: error: NVIDIA A100 SXM4 80GB has no fp8 support in its "
                                               "datasheet; use one of fp32, tf32, bf16, fp16")


def test_plan_takes_a_dtype_and_emits_its_precision(capsys):
    from shapewise.cli import main

    args = ["plan", "gpt2", "--gpus", "8", "--gpu", "v100", "--global-batch", "1048576", "--seq", "1024", "--top", "1",
            "--inter-node-gbs", "12.5"]
    assert main(args) == 2 and "no bf16 support" in capsys.readouterr().err
    assert main([*args, "--dtype", "fp16", "--emit", "megatron"]) == 0
    flags = capsys.readouterr().out
    assert "--fp16" in flags and "--bf16" not in flags


def test_megatron_flags_say_what_they_cannot_describe():
    import warnings

    from shapewise.errors import ShapewiseWarning
    from shapewise.search import megatron_args

    w = Workload()
    qwen3 = megatron_args(load_config("tests/data/hf/qwen3-8b.json"), w)
    assert "--qk-layernorm" in qwen3
    deepseek = load_config("tests/data/hf/deepseek-v3.json")
    with pytest.warns(ShapewiseWarning, match="multi-head latent attention .* and which 3 layers are dense"):
        flags = megatron_args(deepseek, w)
    assert f"--moe-shared-expert-intermediate-size {deepseek.num_shared_experts * deepseek.expert_width}" in flags
    with pytest.warns(ShapewiseWarning, match=r"falcon-7b.s parallel attention and MLP \(one norm\), which the prices count"):
        megatron_args(load_config("tests/data/hf/falcon-7b.json"), w)
    with pytest.warns(ShapewiseWarning, match="sliding-window layers, GEGLU .*, post-norms and logits' soft-capping"):
        megatron_args(load_config("tests/data/hf/gemma-2-9b-it.json"), w)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShapewiseWarning)
        megatron_args(load_config(ALIKE), w)  # a plain model: every feature said, no warning


def test_megatron_flags_express_or_name_every_feature():
    """No feature is dropped in silence: Qwen2-MoE's shared-expert gate has a flag; GPT-J's MLP-only biases,
    PhiMoE's attention-only ones, OLMo-2's QK-norm over the projection, OPT's ReLU and Gemma's GEGLU have none."""
    import warnings

    from shapewise.errors import ShapewiseWarning
    from shapewise.search import megatron_args

    w = Workload()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShapewiseWarning)
        qwen_moe = megatron_args(load_config("tests/data/hf/qwen1.5-moe-a2.7b.json"), w)
    assert {"--moe-shared-expert-gate", "--disable-bias-linear", "--add-qkv-bias"} <= set(qwen_moe)
    with pytest.warns(ShapewiseWarning, match=r"parallel attention and MLP \(one norm\), bias-free attention .* and "
                                              r"bias on the output head"):
        gptj = megatron_args(load_config("tests/data/hf/gpt-j-6b.json"), w)
    assert "--disable-bias-linear" not in gptj  # the MLP's biases kept: attention's come with them
    with pytest.warns(ShapewiseWarning, match="attention's output bias"):
        phimoe = megatron_args(load_config("tests/data/hf/phi-3.5-moe-instruct.json"), w)
    assert {"--disable-bias-linear", "--add-qkv-bias"} <= set(phimoe)
    with pytest.warns(ShapewiseWarning, match="QK-norm weights over the whole projection"):
        megatron_args(load_config("tests/data/hf/olmo-2-1124-7b.json"), w)
    with pytest.warns(ShapewiseWarning, match="ReLU MLP"):
        megatron_args(load_config("tests/data/hf/opt-1.3b.json"), w)
    with pytest.warns(ShapewiseWarning, match="GEGLU"):
        gemma = megatron_args(load_config("tests/data/hf/gemma-7b.json"), w)
    assert "--quick-geglu" in gemma and "--geglu" not in gemma  # Megatron-LM has no --geglu
    llama4 = load_config("tests/data/hf/llama-3.1-8b.json").replace(qk_norm=True, qk_norm_weights="none")
    assert "--qk-l2-norm" in megatron_args(llama4, w)
    # --qk-layernorm under --normalization LayerNorm is Persimmon's and Phi's QK-norm: LayerNorm(head_dim), weight
    # and bias shared by the heads; StableLM 2's and Cohere's hold a weight a head, which no flag says
    phi = load_config("tests/data/hf/phi-2.json")
    with pytest.warns(ShapewiseWarning) as record:
        persimmon_like = megatron_args(phi.replace(qk_norm=True, qk_norm_weights="head_bias"), w)
    assert "--qk-layernorm" in persimmon_like and "--normalization RMSNorm" not in persimmon_like
    assert not any("QK-norm" in str(r.message) for r in record)
    stablelm = load_config("tests/data/hf-eighth/stablelm-2-zephyr-1.6b.json").replace(qk_norm=True,
                                                                                      qk_norm_weights="per_head")
    with pytest.warns(ShapewiseWarning, match="QK-norm weights of each head its own, without a bias"):
        assert "--qk-layernorm" in megatron_args(stablelm, w)
    with pytest.warns(ShapewiseWarning, match="a QK-norm with a bias .--qk-layernorm's RMSNorm has none"):
        megatron_args(load_config("tests/data/hf/qwen3-8b.json").replace(qk_norm_weights="head_bias"), w)


@pytest.mark.parametrize("path", ["tests/data/hf/mistral-7b-v0.1.json", UNLIKE[0], ALIKE])
def test_selective_recompute_repeats_every_layers_attention_forward(path):
    """Megatron's selective recomputation reruns core attention in every layer, windowed ones too: the plan's
    repeated time is the step's attention forward over the layers (a window's kernel was left out, so
    recomputing Mistral's attention, every layer windowed, cost nothing)."""
    shape, w = load_config(path), Workload(batch=1, seq=8192)
    model = cost_model("h200")
    t = layer_times(shape, w, gpu=model.gpu, params=model.params)
    step = check(shape, w, gpu="h200").step
    forward = sum(c.total_ms for c in step.costs if c.op.name.startswith("attn/") and c.op.kind == "flash"
                  and c.op.pass_ == "fwd")
    assert forward > 0
    assert shape.num_layers * t.core_fwd_ms == pytest.approx(forward, rel=1e-9)
