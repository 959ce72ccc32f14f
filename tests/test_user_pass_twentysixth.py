"""What a new user's twenty-sixth pass found, on the CPU, comparing the numbers of check, report, plot breakdown,
plan and the Python API for one model and workload, and reading the advice the twenty-fifth left: the comm finding
told prefill and decode steps to use Megatron's --tp-comm-overlap, a training flag; the head-dim fallback widened a
head dim not a multiple of 8 to 64's next multiple (BitNet's 100 → 128, +9.0% parameters, 4.48 ms at t=4) where the
next multiple of 8 (104, +1.3%) saves 10.0 ms; suggest's fixes column credited a rule only where it vanished, so a
candidate easing one (head dim 100 → 112: 11.7% of the step → 0.8%) said nothing of it; check's and report's step
line said a decode step's 19 GFLOP as "0.0 TFLOP per step" and its MFU as "0.0%", and at t>1 one rank's TFLOP
beside the group's tokens/s, unsaid; validate on the CPU warned of hours before refusing a bad --profile or --db;
and check --strict exited 1 without a word of why. Found consistent: check, report, plot breakdown, shapewise.check
and predict_step (train, prefill, decode; t up to 8; fp8; MoE; windows), check --json against its tables, plan's
chosen layouts against check at their micro-batch and t (compute, tp collectives, Adam's update, memory as Megatron
holds it), every command's --json, results --export/--import round trips (CSV, JSON, gzipped)."""

from __future__ import annotations

import json

import pytest

from helpers import run
from shapewise import Workload, check, get_model, load_config, suggest

BITNET = "tests/data/hf-eighteenth/bitnet_b1_58-3b.json"  # 32 heads of 100: 3,200 wide


def _rules(result) -> dict:
    return {f.rule: f for f in result.findings}


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_the_comm_finding_advises_serving_what_serving_has(mode):
    """Decoding at t=2 was told to "overlap them with compute (Megatron's --tp-comm-overlap)", a training flag no
    serving engine reads; serving is told what it can do, and that the flag is training's."""
    result = check(get_model("llama-2-7b"), Workload(mode=mode, batch=8, seq=2048, tp=2), gpu="h200")
    fix = _rules(result)["comm"].fix
    assert fix.startswith("use a smaller t")
    assert "Megatron's --tp-comm-overlap is for training" in fix
    train = check(get_model("llama-2-7b"), Workload(batch=4, seq=2048, tp=2), gpu="h200")
    assert _rules(train)["comm"].fix == "overlap them with compute (Megatron's --tp-comm-overlap) or use a smaller t"


@pytest.mark.parametrize("tp", [4, 8])
def test_the_head_dim_fallback_prices_the_next_multiple_of_8_too(tp):
    """BitNet's 32 heads of 100 at t=4 (no head count of 64, 128 or 256 cuts 3,200 into heads t divides) were told
    "use head dim 128 (+9.0% parameters)", 4.48 ms, where 104 leaves the padded-copy kernel for +1.3% and saves
    10.0 ms: both are priced, the better proposed, and the other said with its parameters and saving."""
    shape = load_config(BITNET)
    w = Workload(batch=4, seq=2048, tp=tp)
    finding = _rules(check(shape, w, gpu="h200"))["head-dim"]
    assert finding.fix.startswith("use head dim 104, the heads as many (+1.3% parameters); head dim 128 (+9.0% "
                                  "parameters) saves ")
    wide = check(shape.replace(head_dim=128), w, gpu="h200").step
    narrow = check(shape.replace(head_dim=104), w, gpu="h200").step
    step = check(shape, w, gpu="h200").step
    saved = (step.gpu_ms_per_token - narrow.gpu_ms_per_token) * w.tokens / tp
    assert finding.cost_ms == pytest.approx(saved, rel=1e-6)
    assert narrow.gpu_ms_per_token < wide.gpu_ms_per_token
    said = float(finding.fix.rsplit("saves ", 1)[1].split(" ms")[0])
    assert said == pytest.approx((step.gpu_ms_per_token - wide.gpu_ms_per_token) * w.tokens / tp, abs=0.01)


def test_suggest_says_what_a_candidate_eases_not_only_what_it_clears(capsys):
    """BitNet's fifth suggestion, head dim 100 → 112, leaves the padded-copy kernel (head-dim 11.7% of the step
    → 0.8%), yet its fixes column said "vocab" alone, as for a candidate that leaves the head dim as it is: a rule
    still firing at less cost is said with its share before and after, in the original's step."""
    shape = load_config(BITNET)
    result = suggest(shape, Workload(batch=4, seq=2048), gpu="h200")
    eased = [s for s in result.suggestions if s.changes.get("head_dim") == (100, 112)]
    assert eased, [s.changes for s in result.suggestions]
    s = eased[0]
    assert "head-dim" not in s.fixes
    (rule, before, after), = s.eased
    assert rule == "head-dim" and before == pytest.approx(0.1167, abs=1e-3) and after < 0.02
    assert s.fixes_text == f"vocab, head-dim {before:.1%} → {after:.1%} of the original's step"
    code, out, _ = run(capsys, "suggest", BITNET, "--json")
    assert code == 0
    rows = [r for r in json.loads(out)["suggestions"] if r["changes"].get("head_dim") == [100, 112]]
    assert rows[0]["eased"] == [{"rule": "head-dim", "share_before": before, "share_after": after}]


def test_suggest_shares_are_of_the_original_step_per_token():
    """A share of the candidate's own step moves when other ops do: gpt2 at t=2 padding its vocab would read
    "tp 47.2% → 61.3%" at the same collectives. Priced per token against the original's step, an untouched rule is
    not listed as eased or worsened."""
    result = suggest(get_model("gpt2"), Workload(batch=4, seq=2048, tp=2), gpu="h200")
    vocab_only = [s for s in result.suggestions if set(s.changes) == {"vocab"}]
    assert vocab_only and all(s.eased == () and s.adds == () for s in vocab_only)


def test_a_decode_steps_work_and_mfu_are_not_printed_as_zero(capsys):
    """GLM-4-9B decoding one sequence at t=4 in fp8 read "MFU 0.0%  ·  0.0 TFLOP per step": 19 GFLOP, said as
    none; and at t>1 the figure is one rank's (each runs its share), beside the group's tokens/s, unsaid."""
    code, out, _ = run(capsys, "check", "tests/data/hf-later/glm-4-9b.json", "--mode", "decode", "--tp", "4",
                       "--dtype", "fp8", "-b", "1")
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("step "))
    assert "MFU 0.0%" not in line and "0.0 TFLOP" not in line
    assert line.endswith(" TFLOP per step per GPU")
    code, out, _ = run(capsys, "check", "tests/data/hf-later/glm-4-9b.json", "--mode", "decode", "--tp", "4",
                       "--dtype", "fp8", "-b", "1", "--json")
    totals = json.loads(out)["totals"]
    assert totals["flops_of"] == "one GPU"
    assert f"MFU {totals['mfu'] * 100:.2g}%" in line and f"{totals['flops'] / 1e12:.3g} TFLOP" in line


@pytest.mark.parametrize("flags, said", [
    (("--profile", "/no/such/profile.json"), "cannot read profile /no/such/profile.json"),
    (("--db", "/no/such/folder/results.db"), "the folder /no/such/folder does not exist"),
])
def test_validate_refuses_before_it_warns_of_hours(capsys, flags, said):
    """`validate --device cpu` with an unreadable --profile or a --db in a missing folder said two lines: a warning
    that the run would take hours, then the error that it would not run; calibrate refuses first (one line)."""
    code, out, err = run(capsys, "validate", "--device", "cpu", *flags)
    assert code == 2
    assert err.count("\n") == 1 and said in err and "hours" not in err


def test_check_strict_says_why_it_exits_1(capsys):
    """`check --strict --json` exited 1 on a costly finding with no word on stderr (a CI log showed nothing); it
    says which findings, after the output, which is printed whole."""
    code, out, err = run(capsys, "check", "gpt2", "--strict", "--json")
    assert code == 1 and json.loads(out)["findings"][0]["rule"] == "vocab"
    assert err.splitlines()[-1].startswith("shapewise: error: --strict: 1 finding costs more than 1% of the step: "
                                           "vocab ")
    assert "learned positions" in err  # the caveats are still said
