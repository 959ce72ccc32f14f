"""Edges a new user met: one-token sequences, causal pairs counted exactly, the head-dim rule for a head
dim set apart from the hidden size, and the caveats said before a price (head dims past the fused kernels,
sequences past a model's learned positions)."""

import json
import math

import pytest

from helpers import run
from shapewise import Workload
from shapewise.cost import predict_step
from shapewise.ops import attended_pairs
from shapewise.presets import get_model
from shapewise.rules import MAX_FUSED_HEAD_DIM, caveats, find


@pytest.mark.parametrize("mode", ["train", "prefill", "decode"])
def test_a_one_token_sequence_is_priced(capsys, mode):
    """seq 1 (a decode's first token; a one-token prefill) divided by zero causal pairs before."""
    code, out, err = run(capsys, "check", "gpt2", "--seq", "1", "--mode", mode, "--json")
    assert code == 0, err
    doc = json.loads(out)
    times = [op["time_ms"] for op in doc["ops"]]
    assert times and all(math.isfinite(t) and t > 0 for t in times)


@pytest.mark.parametrize("q_len, kv_len", [(1, 1), (2, 2), (3, 3), (1, 7), (4, 9), (2048, 2048)])
def test_causal_pairs_are_counted_exactly(q_len, kv_len):
    """Queries end-aligned with the keys: query i of q sees kv - q + i + 1 keys."""
    want = sum(kv_len - q_len + i + 1 for i in range(q_len))
    assert attended_pairs(q_len, kv_len, causal=True, window=0) == want
    assert attended_pairs(q_len, kv_len, causal=False, window=0) == q_len * kv_len


def test_the_head_dim_rule_fires_when_the_head_dim_is_set_apart(tmp_path):
    """32 heads of 96 over a hidden size of 4096 (head_dim given): the same attention width cut into heads
    of 128 or 64 keeps the projections' parameters, and is proposed as for a hidden size of 3072."""
    shape = get_model("llama3-8b").replace(head_dim=96)
    findings = {f.rule: f for f in find(predict_step(shape, Workload(batch=4, seq=2048), gpu="h200"))}
    assert "head-dim" in findings
    assert "heads (head dim 128" in findings["head-dim"].fix or "heads (head dim 64" in findings["head-dim"].fix


def test_caveats_name_a_head_dim_past_the_fused_kernels_and_a_sequence_past_the_positions():
    gpt2 = get_model("gpt2")
    assert caveats(gpt2, Workload(batch=1, seq=1024)) == []
    assert any("1,024 learned positions" in c for c in caveats(gpt2, Workload(batch=1, seq=2048)))
    wide = get_model("llama3-8b").replace(head_dim=2 * MAX_FUSED_HEAD_DIM)
    assert any("head dim 512 is past 256" in c for c in caveats(wide, Workload(batch=1, seq=1024)))
    assert caveats(wide, Workload(batch=1, seq=1024, attention="unfused")) == []


def test_a_window_note_in_suggest_carries_no_share(capsys):
    """gpt-oss's sliding window is a note whose saving is in its title, not a cost of 0.0%."""
    code, out, _ = run(capsys, "suggest", "--config", "tests/data/hf-later/gpt-oss-20b.json", "--top", "1")
    assert code == 0
    notes = [line for line in out.splitlines() if line.startswith("findings:")]
    assert notes and "sliding window" in notes[0] and "(0.0%)" not in notes[0]


@pytest.mark.parametrize("argv, said", [
    (["--hiddens", "2048", "--head-counts", "0"], "--head-counts: the number of heads"),
    (["--hiddens", "2048", "--head-counts", "3"], "no hidden size of --hiddens is a multiple of any head count of --head-counts"),
])
def test_plot_layer_errors_name_the_flags(capsys, tmp_path, argv, said):
    code, _, err = run(capsys, "plot", "layer", *argv, "--out", str(tmp_path / "x.png"))
    assert code == 2 and said in err and err.count("\n") == 1


def test_a_rounding_residue_is_no_loss():
    from shapewise.cost import Losses

    assert Losses(tile=-1e-16, wave=2e-3).as_dict()["tile"] == 0.0
    assert Losses(tile=-1e-16, wave=2e-3).as_dict()["wave"] == 2e-3


def test_the_reports_commands_carry_the_overlap_it_priced(capsys, tmp_path):
    out = tmp_path / "r.md"
    code, _, _ = run(capsys, "report", "llama3-8b", "--tp", "2", "--overlap-comm", "--out", str(out))
    assert code == 0
    checks = [line for line in out.read_text().splitlines() if line.startswith("shapewise check")]
    assert checks and all(line.endswith("--overlap-comm") for line in checks)


def test_a_plot_of_head_dims_past_the_fused_kernels_says_so(capsys, tmp_path):
    code, _, err = run(capsys, "plot", "layer", "--hiddens", "4096", "--head-counts", "4", "32", "--out",
                       str(tmp_path / "l.png"))
    assert code == 0 and "head dim 1024 is past 256" in err
    code, _, err = run(capsys, "plot", "layer", "--hiddens", "4096", "--head-counts", "32", "--out", str(tmp_path / "m.png"))
    assert code == 0 and "past 256" not in err


def test_plans_tensor_parallel_collectives_cross_the_link_it_is_given(capsys):
    """--intra-node-gbs prices the tensor-parallel collectives too: at 1 GB/s inside a node the best plan
    splits no GEMM (it did at NVLink's 450), and the header says the rate was given."""
    argv = ["plan", "llama3-8b", "--gpus", "8", "--global-batch", "1048576", "--seq", "8192", "--top", "1"]
    code, fast, _ = run(capsys, *argv)
    code_slow, slow, _ = run(capsys, *argv, "--intra-node-gbs", "1")
    assert code == code_slow == 0
    assert "within a node 1 GB/s (given)" in slow
    best = next(line for line in slow.splitlines() if line.startswith("1 "))
    assert "t=1 " in best


def test_plans_megatron_flags_carry_the_shape_it_planned(capsys):
    """With --shapes the best plan may be another shape than the one asked about: its flags say which."""
    code, out, _ = run(capsys, "plan", "gpt3-2.7b", "--gpus", "64", "--gpu", "a100-80gb", "--global-batch", "1048576",
                       "--seq", "2048", "--shapes", "--emit", "megatron", "--spec-only")
    assert code == 0 and "--num-attention-heads" in out and "--hidden-size 2560" in out
    assert "--make-vocab-size-divisible-by" in out and "--tensor-model-parallel-size" in out


def test_the_breakdown_takes_no_top_and_says_its_mode_is_all_three(capsys, tmp_path):
    code, _, err = run(capsys, "plot", "breakdown", "gpt2", "--seq", "1024", "--top", "3", "--out", str(tmp_path / "b.png"))
    assert code == 2 and "--top" in err
    code, _, err = run(capsys, "plot", "breakdown", "gpt2", "--seq", "1024", "--mode", "decode",
                       "--out", str(tmp_path / "b.png"))
    assert code == 0 and "--mode decode has no effect" in err


def test_plans_memory_parts_add_to_its_total(capsys):
    code, out, _ = run(capsys, "plan", "llama3-70b", "--gpus", "1024", "--gpu", "h100", "--global-batch", "16777216",
                       "--seq", "8192", "--top", "3", "--spec-only")
    assert code == 0 and "weights/grads/optim/act/loss/alloc" in out
    for line in (line for line in out.splitlines() if line[:2] in ("1 ", "2 ", "3 ")):
        cells = [c.strip() for c in line.split("│")]
        total, parts = float(cells[6]), [float(x) for x in cells[7].split("/") if x != "–"]
        assert sum(parts) == pytest.approx(total, abs=0.3)


def test_a_report_says_memory_per_gpu_and_the_caveats(capsys, tmp_path):
    out = tmp_path / "r.md"
    code, _, _ = run(capsys, "report", "gpt2", "--out", str(out))
    text = out.read_text()
    assert code == 0 and "memory per GPU **10.4 GiB" in text and "1,024 learned positions" in text
