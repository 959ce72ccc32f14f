"""What a new user's twenty-third pass found, on the CPU: a prefill at tensor parallelism gathered every token for an
output head that scores the last one alone; the analytic side priced fp8 GEMMs in layouts torch._scaled_mm does not
run, which bench refuses; `results --import` took any text for a timestamp; profile refusals named the command's flags
to a Python caller; and suggest's decode warning read awkwardly."""

from __future__ import annotations

import pytest

from shapewise import Workload, get_model
from shapewise.ops import model_ops


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_a_served_steps_head_gathers_the_rows_it_scores(mode):
    """A prefill of b=4, s=2048 at t=2 gathered all 8192 tokens (64 MiB, 0.208 ms on an H200) before its output
    head, which scores each sequence's last token: 4 rows. Training still gathers every token."""
    llama = get_model("llama3-8b")
    w = Workload(batch=4, seq=2048, tp=2, mode=mode)
    ops = {(op.name, op.pass_): op for op in model_ops(llama, w)}
    assert ops[("tp/logits", "fwd")].m == ops[("logits", "fwd")].m == 4
    assert ops[("tp/logits", "fwd")].bytes == 4 * llama.hidden * 2
    train = {(op.name, op.pass_): op for op in model_ops(llama, w.replace(mode="train"))}
    assert train[("tp/logits", "fwd")].m == train[("logits", "fwd")].m == 8192
