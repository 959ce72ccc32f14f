"""What a new user's eighteenth pass found: check and suggest at --dtype fp32 called their memory mixed-precision
Adam (16-bit weights and fp32 master copies), its parts so split, where an fp32 step keeps fp32 weights and no
master copy."""

from __future__ import annotations

import json

from helpers import run


def test_an_fp32_step_s_memory_says_it_is_fp32_adam(capsys):
    """`check gpt2 --dtype fp32` said "weights 0.2, grads 0.2, optimizer 1.4 GiB ... (mixed-precision Adam ...)":
    the total, 16 bytes a parameter, was right, but the weights were counted as bf16 and an fp32 master copy
    added to the optimizer. It says fp32 Adam, its weights and gradients 4 bytes a parameter."""
    code, out, err = run(capsys, "check", "gpt2", "--dtype", "fp32", "--gpu", "h100")
    assert code == 0, err
    line = next(t for t in out.splitlines() if t.startswith("memory per GPU"))
    assert "fp32 Adam (no master copies)" in line and "mixed-precision" not in line, line
    code, out, err = run(capsys, "check", "gpt2", "--dtype", "fp32", "--gpu", "h100", "--json")
    assert code == 0, err
    parts = json.loads(out)["memory"]["parts_bytes"]
    params = 124_439_808  # gpt2's, its head tied to the embedding
    assert parts["weights"] == parts["grads"] == 4 * params and parts["optimizer"] == 8 * params, parts
    code, out, err = run(capsys, "check", "gpt2", "--gpu", "h100")  # bf16: as before
    assert "(mixed-precision Adam in PyTorch eager" in out
    code, out, err = run(capsys, "suggest", "gpt2", "--dtype", "fp32", "--gpu", "h100")
    assert code == 0, err
    assert "GiB (fp32 Adam (no master copies) in PyTorch eager, no ZeRO" in out.splitlines()[1], out
