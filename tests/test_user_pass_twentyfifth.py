"""What a new user's twenty-fifth pass found, on the CPU, reading check's findings and suggest's advice over the
corpus: the kv-heads finding priced a smaller t (every GEMM's gain from fewer splits, the tp finding's cost to the
millisecond) as the price of replicated kv heads, and advised a t the model does not fit at (Qwen3-235B decoding
at t=8: "use t=4", 203.7 ms, where it needs 135.4 GiB of the H200's 131.3); suggest and the head-dim finding kept a
partial rotary embedding's fraction at a new head dim (Phi-2's 0.4 of 128: 51 dims, which transformers' Phi cannot
pair), so Phi-2's suggestions were priced as another model and phi-msft's could not be written at all; the ffn
finding rounded to the nearest multiple, pricing a width cut (20% less work) as the misalignment's cost; the
misaligned finding named no dim, said 8 elements where fp8 needs 16, and listed losses of 0.00 ms below the bar
every other finding meets; the hidden, ffn and head-dim fixes grew the model without saying so; the window note
said "0.3 → 0.3 ms (11% less; the step 0% shorter)" and told a slower window "this is what it saves"; the head-dim
finding spoke of SDPA under unfused attention; findings whose savings overlap (tp and comm) were listed as if they
added up; and suggest and search said a tolerance of 0.1% as "within 0%"."""

from __future__ import annotations

import json

import pytest

from helpers import run
from shapewise import Workload, check, get_model, load_config, suggest
from shapewise.rules import find

GLM = "tests/data/hf-later/glm-4-9b.json"  # 32 heads, 2 kv heads
QWEN3_235B = "tests/data/hf-later/qwen3-235b-a22b.json"  # 64 heads, 4 kv heads
PHI2 = "tests/data/hf/phi-2.json"  # partial_rotary_factor 0.4 of head dim 80: 32 dims
PHI2_MSFT = "tests/data/hf-ninth/phi-2-msft.json"  # rotary_dim 32 of head dim 80


def _rules(result) -> dict:
    return {f.rule: f for f in result.findings}


def test_the_kv_heads_finding_prices_the_replication_not_a_smaller_t():
    """GLM-4-9B at t=4 (2 kv heads) had kv-heads at 43.70 ms, 27.0% of the step, the tp finding's cost to the
    millisecond, naming every op of the step: each rank's share is what it is with 4 kv heads; what the replicas
    add is the all-reduce of their gradients."""
    result = check(load_config(GLM), Workload(batch=1, seq=4000, tp=4), gpu="h200")
    found = _rules(result)
    kv = found["kv-heads"]
    assert kv.ops == ("tp/kv_grads",)
    assert kv.cost_ms == pytest.approx(result.step.by_name()["tp/kv_grads"], rel=1e-6)
    assert kv.cost_ms < 0.01 * found["tp"].cost_ms
    assert kv.fix == "use 4 kv heads (+0.9% parameters), or t=2, where the model fits too"


def test_the_kv_heads_finding_advises_no_t_the_model_does_not_fit_at():
    """Qwen3-235B decoding at t=8 was told "use t=4" for 203.7 ms, at a t where it needs 135.4 GiB; and in a serving
    step replicated kv heads cost nothing a step with as many kv heads would not: no finding now."""
    shape = load_config(QWEN3_235B)
    result = check(shape, Workload(mode="decode", batch=64, seq=4096, tp=8), gpu="h200")
    assert not [f for f in result.findings if "t=4" in f.fix]
    assert "kv-heads" not in _rules(result)


def test_suggest_keeps_phi2s_rotated_dims_at_a_new_head_dim(tmp_path, capsys):
    """Phi-2's top suggestion, 20 heads of 128, was priced rotating 0.4 × 128 = 51 dims and written with
    partial_rotary_factor 0.4, which transformers' Phi takes as 51 dims, an odd count its rotary code cannot pair:
    it rotates the 32 dims it did (0.25 of 128), and its speedup is that model's."""
    shape = load_config(PHI2)
    result = suggest(shape, Workload(), gpu="h200")
    for s in result.suggestions:
        assert s.candidate.shape.rotary_width == 32
    out = tmp_path / "phi2.json"
    assert run(capsys, "suggest", PHI2, "--emit-config", str(out))[0] == 0
    written = json.loads(out.read_text())
    assert (written["num_attention_heads"], written["partial_rotary_factor"]) == (20, 0.25)
    assert load_config(out).rotary_width == 32


def test_phi_msft_suggestions_can_be_written(tmp_path, capsys):
    """phi-msft configs give rotary_dim: the suggestion at head dim 128 had a fraction of 0.4 it could not hold, and
    --emit-config refused after the search ("cannot hold this shape's rotary fraction 0.4")."""
    out = tmp_path / "msft.json"
    code, _, err = run(capsys, "suggest", PHI2_MSFT, "--emit-config", str(out))
    assert code == 0, err
    written = json.loads(out.read_text())
    assert (written["n_head"], written["rotary_dim"]) == (20, 32)


def test_a_fraction_that_gives_whole_pairs_is_kept():
    """Pythia's quarter of each head stays a quarter at a new head dim (20 of 80 dims, 32 of 128), as before and as
    the committed variants runs drew it; Phi-2's 0.4 keeps its 32 dims."""
    from shapewise.rules import keep_rotary

    pythia = get_model("pythia-2.8b")
    wider = keep_rotary(pythia, pythia.replace(num_heads=20))
    assert (wider.rotary_fraction, wider.rotary_width) == (0.25, 32)
    phi = load_config(PHI2)
    assert keep_rotary(phi, phi.replace(num_heads=20)).rotary_width == 32
    assert keep_rotary(phi, phi.replace(num_heads=40)).rotary_width == 32  # 0.4 of 64 is 25.6


def test_the_head_dim_findings_fix_keeps_the_rotated_dims():
    phi = load_config(PHI2)
    step_findings = _rules(check(phi, Workload(), gpu="h200"))
    assert step_findings["head-dim"].fix == "use 20 heads (head dim 128)"
    # priced as the shape suggest's first row is: the same saving
    top = suggest(phi, Workload(), gpu="h200").suggestions[0]
    assert step_findings["head-dim"].share == pytest.approx(1 - 1 / top.speedup, rel=1e-6)


def test_the_head_dim_fallback_says_the_model_grows():
    """BitNet's 32 heads of 100 at t=4 (no head count of 64, 128 or 256 divides its width by 4) were told "use head
    dim 128": 9% more parameters, unsaid. (The twenty-sixth pass prices 104 beside it: each says what it adds.)"""
    bitnet = load_config("tests/data/hf-eighteenth/bitnet_b1_58-3b.json")
    fix = _rules(check(bitnet, Workload(batch=1, seq=2048, tp=4), gpu="h200"))["head-dim"].fix
    assert fix.startswith("use head dim 104, the heads as many (+1.3% parameters); head dim 128 (+9.0% parameters)")


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_the_misaligned_finding_names_its_dim_in_the_dtypes_elements(dtype):
    """Qwen1.5-MoE's router (60 experts) was "a dim that is not a multiple of 16 bytes: pad that dim to a multiple
    of 8 elements", in fp8 too, where 8 elements are 8 bytes. (An fp8 step runs its router in bf16: the twenty-seventh
    pass.)"""
    result = check(load_config("tests/data/hf/qwen1.5-moe-a2.7b.json"), Workload(dtype=dtype), gpu="h200")
    router = next(f for f in result.findings if f.ops == ("moe/router",))
    assert router.title == "moe/router has a leading dim of 60, not a multiple of 8 elements (16 bytes of bf16)"
    assert router.fix == "pad it to 64"


def test_the_misaligned_finding_names_an_fp8_gemms_dim_in_fp8s_elements():
    """DeepSeek-V3 with a query latent of 1,544 (a multiple of 8, not of 16): its fp8 GEMMs want 16 elements."""
    shape = load_config("tests/data/hf/deepseek-v3.json").replace(q_lora_rank=1544)
    found = {f.ops: f for f in check(shape, Workload(dtype="fp8", tp=8), gpu="h200").findings if f.rule == "misaligned"}
    assert found[("attn/q_down",)].title == ("attn/q_down has a leading dim of 1,544, not a multiple of 16 elements "
                                             "(16 bytes of fp8)")
    assert found[("attn/q_down",)].fix == "pad it to 1,552"
    assert not [f for f in check(shape, Workload(tp=8), gpu="h200").findings if f.rule == "misaligned"]


def test_the_misaligned_finding_says_a_kv_cache_length():
    """DeepSeek-V2-Lite decoding over 333 cached tokens: its absorbed attention's BMMs lead with the cache length."""
    result = check(load_config("tests/data/hf-fourth/deepseek-v2-lite.json"), Workload(mode="decode", batch=1, seq=333),
                   gpu="h200")
    score = next(f for f in result.findings if f.ops == ("attn/score",))
    assert "333 (the KV-cache length)" in score.title and score.fix == "pad it to 336"


def test_a_misaligned_loss_below_the_bar_is_no_finding():
    """Phixtral decoding one sequence listed "0.00 ms, 0.0%" for its router, under min_share, the bar of every
    other finding."""
    result = check(load_config("tests/data/hf-sixteenth/phixtral-4x2_8-4bit.json"),
                   Workload(mode="decode", batch=1, seq=333), gpu="h200")
    assert all(f.share >= 1e-4 for f in result.findings if f.rule != "window")
    assert not [f for f in find(result.step, min_share=0.01) if f.rule == "misaligned"]


def test_the_window_note_gives_small_times_in_figures():
    """gpt-oss-120b decoding one sequence over 333 tokens: "attention 0.3 → 0.3 ms (11% less; the step 0% shorter)"."""
    result = check(load_config("tests/data/hf-later/gpt-oss-120b.json"), Workload(mode="decode", batch=1, seq=333),
                   gpu="h200")
    title = _rules(result)["window"].title
    assert "0.3 → 0.3 ms" not in title and "the step 0% shorter" not in title
    assert "attention 0.2" in title and "% shorter)" in title


def test_a_tolerance_under_one_percent_is_said_as_given(capsys):
    """suggest --params-tol 0.001 said "within 0% of the parameters"."""
    code, out, _ = run(capsys, "suggest", "phi-2", "--params-tol", "0.001")
    assert code == 0 and "within 0.1% of the parameters" in out and "within 0% of" not in out


def test_the_ffn_finding_prices_the_width_rounded_up_not_cut():
    """Step-3.7-Flash decoding at t=8 was told "use swiglu width 1,024" for its experts of 1280 (20% less work) at
    1.5 ms, where 1536 is 1.2 ms slower: what the cut saved was work, not alignment. MiniCPM-2B at t=4 claimed
    0.76 ms for 5,760 → 5,632; rounded up to 5,888 it saves 0.03 ms. Phi-3.5-MoE at t=8 was told 6,144 where 6,656
    saves more."""
    decode = Workload(mode="decode", batch=64, seq=4096, tp=8)
    assert "ffn" not in _rules(check(load_config("tests/data/hf-fifth/step-3.7-flash.json"), decode, gpu="h200"))
    minicpm = _rules(check(load_config("tests/data/hf-eighth/minicpm-2b-sft-bf16.json"),
                           Workload(batch=1, seq=4000, tp=4), gpu="h200"))["ffn"]
    assert minicpm.fix == "use swiglu width 5,888 (+1.3% parameters)" and minicpm.cost_ms < 0.1
    phi = _rules(check(load_config("tests/data/hf/phi-3.5-moe-instruct.json"), decode, gpu="h200"))["ffn"]
    assert phi.fix == "use swiglu width 6,656 (+3.8% parameters)"


def test_a_window_slower_but_smaller_in_cache_is_not_said_to_save_time():
    """Step-3.7-Flash's prefill at s=1000: attention 29% MORE with its windows, its KV cache smaller; the fix read
    "keep it: this is what it saves over global attention", beside a title saying it costs time."""
    result = check(load_config("tests/data/hf-fifth/step-3.7-flash.json"),
                   Workload(mode="prefill", batch=3, seq=1000, tp=2), gpu="h200")
    window = _rules(result)["window"]
    assert "MORE" in window.title and "KV cache" in window.title
    assert window.fix.startswith("keep it for the KV cache it saves; its time is the kernel's")


def test_the_window_notes_figures_keep_their_digits():
    """"KV cache 12.0 → 6 GiB": three figures each, trailing zeros kept."""
    result = check(load_config("tests/data/hf/phi-3-mini-4k-instruct.json"),
                   Workload(mode="decode", batch=64, seq=4096, tp=8), gpu="h200")
    assert "KV cache 12.0 → 6.00 GiB" in _rules(result)["window"].title


def test_the_head_dim_finding_says_sdpa_only_where_sdpa_runs():
    """BitNet's head dim 100 under --attention unfused was said to make "SDPA run FlashAttention-2 on padded copies":
    unfused attention runs no SDPA; its BMMs are what the head dim slows."""
    bitnet = load_config("tests/data/hf-eighteenth/bitnet_b1_58-3b.json")
    unfused = _rules(check(bitnet, Workload(mode="prefill", batch=1, seq=777, attention="unfused"), gpu="h200"))
    assert unfused["head-dim"].title == "head dim 100 is not a multiple of 64 nor of 8"
    fused = _rules(check(bitnet, Workload(mode="prefill", batch=1, seq=777), gpu="h200"))
    assert fused["head-dim"].title.endswith("nor of 8 (SDPA runs FlashAttention-2 on padded copies)")


def test_the_hidden_and_ffn_fixes_say_the_parameters_they_add():
    """gpt-oss-120b at t=2 was told "use hidden size 2,944" and "use swiglu width 2,944", each a larger model, unsaid."""
    found = _rules(check(load_config("tests/data/hf-later/gpt-oss-120b.json"),
                         Workload(batch=2, seq=1000, tp=2, dtype="fp8"), gpu="h200"))
    assert found["hidden"].fix == "use hidden size 2,944 (+2.2% parameters)"
    assert found["ffn"].fix == "use swiglu width 2,944 (+2.2% parameters)"


def test_findings_whose_fixes_change_the_same_ops_are_said_not_to_add_up(capsys, tmp_path):
    """SantaCoder at t=4 listed tp at 79.3% of the step and comm at 62.6%, both naming the collectives: a user summing
    them read over 140% of the step saved. Each is priced alone: said under the table, and in the report."""
    from shapewise.report import overlap_text

    path = "tests/data/hf-eighth/gpt-bigcode-santacoder.json"
    result = check(load_config(path), Workload(batch=1, seq=2048, tp=4), gpu="h200")
    assert sum(f.share for f in result.findings) > 1
    said = overlap_text(result.findings)
    assert said.startswith("tp, comm and kv-heads change the same ops, so their savings overlap and do not add up "
                           "(their shares sum to")
    code, out, _ = run(capsys, "check", path, "-b", "1", "-s", "2048", "-t", "4")
    assert code == 0 and "each finding is priced alone, its fix applied to this step: tp, comm and kv-heads" in out
    report = tmp_path / "r.md"
    assert run(capsys, "report", path, "-b", "1", "-s", "2048", "-t", "4", "--out", str(report))[0] == 0
    assert "so their savings overlap and do not add up" in report.read_text()
    assert overlap_text(check(load_config(PHI2), Workload(), gpu="h200").findings) is None  # one finding alone
