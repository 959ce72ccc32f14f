"""What a new user's twenty-eighth pass found, on the CPU, in serving memory, suggest's counts and imports: an fp8 serving
step held its KV cache in fp8 (Llama-3-8B decoding 32 sequences of 8,192 tokens: 16.0 GiB) while its decoding attention
read that cache in bf16 (8.16 ms of 13.69), and said neither: serving engines keep the cache in the model's dtype unless
asked (vLLM's and SGLang's --kv-cache-dtype, "auto" by default), so the default is now the activations' dtype (32.0 GiB,
the step's time unchanged), --kv-cache-dtype fp8 halves the cache and what the fused decoding kernel reads (4.68 ms, the
step 10.20 ms), and check's and suggest's headers, their --json and the report's workload table say the cache's dtype; a
cache in another dtype that latent or unfused attention reads through batched GEMMs (which torch runs in the
activations' dtype) is said as a warning; a training step says the flag has no effect; the memory finding of a serving
step now names the fp8 cache beside fp8 weights (which no longer halve the cache). suggest said "2 considered" with
every field kept, counting the original and its neighbourhood's copy of it: the count is now the other shapes priced,
and the report, where none is faster, says "No other shape is within 2%" or "the one other shape" instead of "None of
the 0 shapes"; the report names the cache's dtype in its workload table and carries the flag in its reproduce commands
of serving steps alone (bench, which measures the activations' dtype, takes none). results --import of an empty JSON
list or of a CSV header alone said "imported 0 rows"; it is refused in one line.

Found consistent: check, suggest and the Python API's memory and step time for the same serving workload; the fused
decoding kernel's bytes against the cache's; windowed layers' caches (Gemma-2) at both cache dtypes; a training step's
prices, unchanged by the new field; check --json's workload against its header."""

from __future__ import annotations

import json

import pytest

from helpers import run
from shapewise import ShapewiseError, Workload, check, get_model
from shapewise.memory import estimate
from shapewise.ops import model_ops

GIB = 2**30
DECODE = dict(batch=32, seq=8192, mode="decode")


def _flash(step):
    return next(c for c in step.costs if c.op.name == "attn/flash")


def test_an_fp8_step_keeps_its_kv_cache_in_bf16_unless_asked():
    """`check llama3-8b --mode decode --dtype fp8` held a 16.0 GiB cache (one byte an element) while its decoding
    attention read 2 bytes an element: an fp8 checkpoint served as vLLM serves it keeps a bf16 cache (32.0 GiB)."""
    shape = get_model("llama3-8b")
    auto = Workload(dtype="fp8", **DECODE)
    assert estimate(shape, auto).kv_cache / GIB == pytest.approx(32.0)
    asked = auto.replace(kv_cache_dtype="fp8")
    assert estimate(shape, asked).kv_cache / GIB == pytest.approx(16.0)
    # the fused decoding kernel reads the cache in its dtype: half the bytes of K and V, and less time
    slow, fast = check(shape, auto, gpu="h200").step, check(shape, asked, gpu="h200").step
    assert _flash(fast).op.bytes < 0.52 * _flash(slow).op.bytes
    assert _flash(fast).time_ms < 0.7 * _flash(slow).time_ms and fast.time_ms < slow.time_ms
    # a bf16 step's default is its own dtype: nothing moves
    bf16 = Workload(**DECODE)
    assert estimate(shape, bf16).kv_cache == estimate(shape, auto).kv_cache
    assert [op.bytes for op in model_ops(shape, bf16)] == [op.bytes for op in model_ops(shape, bf16.replace(
        kv_cache_dtype="bf16"))]


def test_the_kv_cache_dtype_is_said_in_check_and_suggest(capsys):
    """Neither check's header nor its --json said what the cache was held in."""
    argv = ("llama3-8b", "--mode", "decode", "--dtype", "fp8", "--batch", "32", "--seq", "8192")
    code, out, _ = run(capsys, "check", *argv)
    assert code == 0 and "fp8, flash attention, KV cache bf16, on" in out
    code, out, _ = run(capsys, "check", *argv, "--kv-cache-dtype", "fp8", "--json")
    assert code == 0 and json.loads(out)["workload"]["kv_cache_dtype"] == "fp8"
    code, out, _ = run(capsys, "check", "llama3-8b", "--json")
    assert code == 0 and json.loads(out)["workload"]["kv_cache_dtype"] is None  # a training step has no cache
    code, out, _ = run(capsys, "suggest", *argv, "--kv-cache-dtype", "fp8", "--top", "1")
    assert code == 0 and "fp8, KV cache fp8)" in out.splitlines()[0]


def test_a_kv_cache_dtype_on_a_training_step_is_said(capsys):
    """A training step keeps no cache: the flag is said to have no effect (as --overlap-comm at t=1), and plot
    breakdown, which draws train beside prefill and decode, takes it for its serving steps."""
    code, out, err = run(capsys, "check", "llama3-8b", "--kv-cache-dtype", "fp8")
    assert code == 0 and "KV cache" not in out.splitlines()[1]
    assert "--kv-cache-dtype fp8 has no effect on a training step: it keeps no KV cache" in err
    with pytest.raises(ShapewiseError, match="kv_cache_dtype"):
        Workload(kv_cache_dtype="int4", mode="decode")


def test_a_cache_read_by_batched_gemms_is_said(capsys):
    """Latent attention's absorbed form reads the cache through batched GEMMs, which torch runs in bf16: an fp8 cache
    halves its memory but not its time, said as a warning rather than priced as a kernel that does not run."""
    code, _, err = run(capsys, "check", "llama3-8b", "--mode", "decode", "--attention", "unfused",
                       "--kv-cache-dtype", "fp8")
    assert code == 0 and "unfused attention's batched GEMMs read it in bf16" in err
    code, _, err = run(capsys, "check", "llama3-8b", "--mode", "decode", "--kv-cache-dtype", "fp8")
    assert code == 0 and "batched GEMMs" not in err
    # The fused decoding kernel's fp8 cache is priced from its bytes: torch has no kernel that reads one, so it is said.
    assert "priced at the bf16 kernel's rate over the cache's fp8 bytes, not measured" in err
    code, _, err = run(capsys, "check", "llama3-8b", "--mode", "decode", "--kv-cache-dtype", "bf16")
    assert code == 0 and "not measured" not in err


def test_the_memory_finding_names_an_fp8_cache(capsys):
    """A serving step that did not fit was told "fp8 weights (--dtype fp8)", which (the cache now held in the
    activations' dtype) leaves the cache, most of such a step's memory, as it was."""
    w = Workload(batch=64, seq=32768, mode="decode")
    memory = next(f for f in check(get_model("llama3-70b"), w, gpu="h200").findings if f.rule == "memory")
    assert "an fp8 KV cache (kv_cache_dtype fp8)" in memory.fix
    cached = check(get_model("llama3-70b"), w.replace(kv_cache_dtype="fp8"), gpu="h200").findings
    assert "KV cache (kv_cache_dtype" not in next(f for f in cached if f.rule == "memory").fix


def test_considered_counts_the_other_shapes(capsys):
    """With every field kept there is no other shape, yet suggest said "(2 considered)": the original and its
    neighbourhood's copy of it."""
    code, out, _ = run(capsys, "suggest", "gpt2", "--keep", "hidden,layers,heads,kv_heads,head_dim,ffn,vocab,batch")
    assert code == 0 and "(0 considered)" in out
    code, out, _ = run(capsys, "suggest", "gpt2", "--json")
    result = json.loads(out)
    assert code == 0 and result["considered"] >= len(result["suggestions"]) > 0


@pytest.mark.parametrize("name, text, said", [
    ("empty.json", "[]", "is an empty list: nothing to import"),
    ("empty.csv", None, "is a CSV header and no rows: nothing to import"),
])
def test_importing_a_file_of_no_rows_is_refused(capsys, tmp_path, name, text, said):
    """`results --import` of `[]`, or of an export's header alone, said "imported 0 rows" and made a store."""
    from shapewise.exports import CSV_HEAD, CSV_TAIL

    path = tmp_path / name
    path.write_text(text if text is not None else ",".join((*CSV_HEAD, *CSV_TAIL)) + "\n")
    db = tmp_path / "r.db"
    code, out, err = run(capsys, "results", "--import", str(path), "--db", str(db))
    assert code == 2 and out == "" and said in err and not db.exists()


def test_the_report_says_the_cache_and_reproduces_it(capsys, tmp_path):
    """The report's workload table names the cache's dtype, and its reproduce commands carry the flag to the
    serving steps alone (a training check would be told it has no effect)."""
    out_file = tmp_path / "r.md"
    code, _, err = run(capsys, "report", "llama3-8b", "--mode", "decode", "--dtype", "fp8", "--kv-cache-dtype", "fp8",
                       "--out", str(out_file))
    assert code == 0, err
    text = out_file.read_text()
    assert "| KV cache | fp8 |" in text
    commands = [line for line in text.splitlines() if line.startswith("shapewise check")]
    assert commands and all(("--kv-cache-dtype fp8" in line) == ("--mode train" not in line) for line in commands)


@pytest.mark.parametrize("considered, said", [
    (0, "No other shape is within 2% of the parameters."),
    (1, "The one other shape within 2% of the parameters is not predicted faster than the original by more than "
        "the model's error."),
    (61, "None of the 61 other shapes within 2% of the parameters"),
])
def test_the_report_counts_the_other_shapes_in_words(considered, said):
    """The report's line where nothing is faster read "None of the 0 shapes" and "None of the 1 shapes"."""
    from types import SimpleNamespace

    from shapewise.document import _nothing_faster

    assert _nothing_faster(SimpleNamespace(considered=considered, alternatives=())).startswith(said)
