"""Findings: each rule fires on the shape that breaks it, is priced by the cost model, and names its fix."""

from pathlib import Path

import pytest

from shapewise import ModelShape, Workload, check

GPT2 = ModelShape("gpt2-like", hidden=768, num_layers=12, num_heads=12, vocab=50257, learned_positions=1024)
GPT3_27 = ModelShape("gpt3-2.7b-like", hidden=2560, num_layers=32, num_heads=32, vocab=50257,
                     learned_positions=2048)
CLEAN = ModelShape("clean", hidden=4096, num_layers=4, num_heads=32, num_kv_heads=8, vocab=32000, ffn=11008,
                   mlp="swiglu", bias=False, norm="rmsnorm")


def rules(result):
    return {f.rule: f for f in result.findings}


def test_gpt2_vocab_is_flagged_with_its_fix_and_cost():
    result = check(GPT2, Workload(), gpu="h200")
    vocab = rules(result)["vocab"]
    assert "50,257" in vocab.title and "50,304" in vocab.fix
    assert "logits" in vocab.ops
    assert vocab.cost_ms > 0 and 0.05 < vocab.share < 0.9
    assert result.findings[0].rule == "vocab"  # costliest first


def test_head_dim_80_is_flagged_and_the_fix_keeps_hidden_size():
    found = rules(check(GPT3_27, Workload(), gpu="h200"))
    assert "head dim 80" in found["head-dim"].title
    assert "heads (head dim 128)" in found["head-dim"].fix or "heads (head dim 64)" in found["head-dim"].fix
    assert "attn/flash" in found["head-dim"].ops


def test_a_clean_shape_has_no_findings():
    assert check(CLEAN, Workload(), gpu="h200").findings == ()


def test_unrounded_swiglu_width():
    found = rules(check(CLEAN.replace(ffn=10922), Workload(), gpu="h200"))
    assert "8h/3" in found["ffn"].title and "10,944" in found["ffn"].fix
    assert {"mlp/up", "mlp/gate", "mlp/down"} <= set(found["ffn"].ops)


def test_tokens_not_a_multiple_of_64():
    found = rules(check(CLEAN, Workload(batch=3, seq=1001), gpu="h200"))
    assert "tokens" in found and "1024" in found["tokens"].fix


def test_vocab_rule_scales_with_tensor_parallelism():
    found = rules(check(CLEAN.replace(vocab=32002), Workload(tp=2), gpu="h200"))
    assert "multiple of 128" in found["vocab"].title  # each rank's 16,001 rows are odd


def test_a_rule_the_gpu_does_not_care_about_is_dropped():
    # 32,064 is not a multiple of 128, but each rank's 16,032 rows are a multiple of 8: on an H200 the
    # cost model (like the GPU) sees no loss, so no finding.
    assert "vocab" not in rules(check(CLEAN.replace(vocab=32064), Workload(tp=2), gpu="h200"))


def test_kv_heads_not_divisible_by_t_and_oversized_t():
    found = rules(check(CLEAN.replace(num_kv_heads=4), Workload(tp=8), gpu="h200"))
    assert "kv-heads" in found and "t=4" in found["kv-heads"].fix
    assert "tp" in found  # a 0.9B model needs no 8-way split


def test_odd_head_dim_with_odd_head_count_makes_projections_odd():
    odd = CLEAN.replace(num_heads=33, num_kv_heads=None, head_dim=127)  # q width 4191
    found = rules(check(odd, Workload(), gpu="h200"))
    assert found["head-dim"].fix == "use head dim 128, the heads as many (+0.2% parameters)"
    assert "attn/qkv" in found["head-dim"].ops and "misaligned" not in found


def test_misalignment_no_rule_covers_is_still_reported():
    moe = CLEAN.replace(num_experts=7, top_k=2)  # the router's 7 outputs are 14 bytes wide
    found = rules(check(moe, Workload(), gpu="h200"))
    assert found["misaligned"].ops == ("moe/router",)


@pytest.mark.parametrize("mode", ["train", "prefill", "decode"])
def test_findings_share_is_cost_over_step(mode):
    result = check(GPT2, Workload(mode=mode), gpu="h200")
    for f in result.findings:
        assert f.share == pytest.approx(f.cost_ms / result.step.time_ms)


# ---- the sliding window: what it saves, from the cost model and the memory estimate ----

def _corpus(stem: str) -> ModelShape:
    from shapewise.hf import load_config

    return load_config(Path(__file__).parent / "data" / "hf" / f"{stem}.json")


def _attention_ms(step) -> float:
    from shapewise.rules import CORE_ATTENTION

    return sum(ms for name, ms in step.by_name().items() if name in CORE_ATTENTION)


@pytest.mark.parametrize("stem, local_layers", [("mistral-7b-v0.1", 32), ("gemma-2-9b-it", 21)])
@pytest.mark.parametrize("mode", ["train", "prefill", "decode"])
def test_a_window_shorter_than_the_sequence_reports_what_it_saves(stem, local_layers, mode):
    from shapewise import predict_step
    from shapewise.memory import GIB, estimate
    from shapewise.rules import figure

    shape = _corpus(stem)
    w = Workload(batch=4, seq=32768, mode=mode)
    result = check(shape, w, gpu="h200")
    window = rules(result)["window"]
    assert (window.cost_ms, window.share, window.ops) == (0.0, 0.0, ("attn/window",))  # a note, not a cost
    assert "sliding window 4,096" in window.title and "s=32,768" in window.title
    assert ("every layer" if local_layers == shape.num_layers else f"{local_layers} of 42 layers") in window.title
    # The numbers are the cost model's: the same step with every layer global.
    dense = shape.replace(window=0, global_every=0)
    full = predict_step(dense, w, gpu=result.step.model)
    before, after = _attention_ms(full), _attention_ms(result.step)
    assert after < before
    assert f"attention {figure(before)} → {figure(after)} ms ({(before - after) / before:.0%} less" in window.title
    if mode == "train":
        assert "KV cache" not in window.title
    else:  # each windowed layer caches the window, not the sequence: (s - window) fewer tokens of K and V
        saved = local_layers * (32768 - 4096) * 2 * shape.kv_heads * shape.d_head * 4 * 2
        assert estimate(dense, w).kv_cache - estimate(shape, w).kv_cache == saved
        assert f"KV cache {figure(estimate(dense, w).kv_cache / GIB)} → {figure(estimate(shape, w).kv_cache / GIB)} GiB" \
            in window.title


def test_a_window_slower_than_global_attention_says_so():
    """At 8192 tokens a 4096 window skips a quarter of the blocks, while the windowed kernel at head dim
    256 runs at a fraction of cuDNN's causal rate (the profile's window factors): said, not hidden."""
    from shapewise import predict_step

    shape = _corpus("gemma-2-9b-it")
    w = Workload(batch=1, seq=8192)
    result = check(shape, w, gpu="h200")
    full = predict_step(shape.replace(window=0, global_every=0), w, gpu=result.step.model)
    before, after = _attention_ms(full), _attention_ms(result.step)
    assert after > before * 1.2
    window = rules(result)["window"]
    assert f"attention {before:,.1f} → {after:,.1f} ms ({(after - before) / before:.0%} MORE" in window.title
    assert window.cost_ms == 0.0 and "flash-attn" in window.fix


@pytest.mark.parametrize("stem", ["mistral-7b-v0.1", "gemma-2-9b-it"])
@pytest.mark.parametrize("mode", ["train", "decode"])
def test_a_window_at_least_the_sequence_long_is_not_reported(stem, mode):
    assert "window" not in rules(check(_corpus(stem), Workload(batch=4, seq=4096, mode=mode), gpu="h200"))


def test_the_window_saves_more_where_more_layers_have_it():
    """Mistral windows every layer, Gemma-2 every other one: at the same length (long enough that
    Gemma-2's windows save too, whose head dim of 256 runs the windowed kernel slowest), Mistral's
    attention saves the larger share."""
    import re

    def saved(stem):
        title = rules(check(_corpus(stem), Workload(batch=1, seq=32768), gpu="h200"))["window"].title
        return int(re.search(r"\((\d+)% less", title).group(1))

    assert saved("mistral-7b-v0.1") > saved("gemma-2-9b-it") > 0


def test_the_window_that_makes_a_decode_fit_says_so():
    shape = _corpus("mistral-7b-v0.1")
    window = rules(check(shape, Workload(batch=64, seq=32768, mode="decode"), gpu="h200"))["window"]
    assert "more than the h200 has" in window.fix


def test_inference_at_tp_says_its_collectives_are_an_upper_estimate():
    """A decode or prefill step at t>1 prices Megatron's sequence-parallel pairs at the fixed cost fitted inside
    training layers (about two thirds of llama3-70b's decode step at t=8), where serving engines all-reduce once a
    sublayer: said, in the caller's words; a training step at t>1 and an inference step at t=1 say nothing of it."""
    from shapewise.presets import get_model
    from shapewise.rules import caveats

    shape = get_model("llama3-70b")
    said = [c for c in caveats(shape, Workload(mode="decode", tp=8)) if "serving engines" in c]
    assert len(said) == 1 and said[0].startswith("tp 8 in decode:") and "upper estimate" in said[0]
    assert any("serving engines" in c for c in caveats(shape, Workload(mode="prefill", tp=2)))
    assert not any("serving engines" in c for c in caveats(shape, Workload(tp=8)) + caveats(shape, Workload(mode="decode")))
