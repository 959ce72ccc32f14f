"""What a new user's eighteenth pass found: check and suggest at --dtype fp32 called their memory mixed-precision Adam
(16-bit weights and fp32 master copies), its parts so split, where an fp32 step keeps fp32 weights and no master
copy. verify --json recorded no batch or sequence length, so a plot of it could not check them. validate judged
another GPU's profile without --borrow-profile, which check and the rest require. A nope_every or global_every
longer than the model was taken without a word, and so was a global batch of billions of tokens. search's help
promised 8 query heads per kv head where it grouped 20 heads over 2. search sent a budget past its grid to widen
--params-tol, which cannot reach it. verify's help offered a decode it lacks and any --tp, and a hub id not cached
was sent to a --config that in verify names the candidates. suggest sent decode alternatives to verify, which
measures training steps alone. suggest --json did not say the sequence length, dtype or mode it priced. suggest
pointed to the nearest shapes below where none were listed. verify counted an fp32 model's weights at 2 bytes. plan
split an fp32 step's memory as mixed precision's. suggest's help cut a field of --keep in two. search did not say
the step it priced."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from helpers import run
from shapewise import ModelShape, ShapewiseError
from shapewise.errors import ShapewiseWarning
from shapewise.parallel import Parallelism
from shapewise.profile import _shipped, save

HF = Path(__file__).parent / "data" / "hf"


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
    assert "GiB (fp32 Adam (no master copies) in PyTorch eager, no pipeline, no ZeRO" in out.splitlines()[1], out


def _tiny(tmp_path, name: str, **changes) -> str:
    config = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
              "intermediate_size": 213, "vocab_size": 250, "hidden_act": "silu", **changes}
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return str(path)


def test_a_verify_run_records_where_it_measured_and_the_plot_checks_it(capsys, tmp_path):
    """`verify --json` gave no batch or sequence length, so `plot suggestions --verified FILE` drew a run measured
    at b=1 s=32 beside the default b=4 s=2048 without a word. The rows record the run's batch, seq and dtype; the
    plot refuses a file measured at others in one line, and draws an older file without them with a one-line
    warning."""
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    tiny, other = _tiny(tmp_path, "tiny.json"), _tiny(tmp_path, "other.json", vocab_size=256)
    at = ("--batch", "1", "--seq", "32")
    code, out, err = run(capsys, "verify", tiny, "--config", other, "--device", "cpu", *at, "--rounds", "1", "--json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert (row["batch"], row["seq"], row["dtype"]) == (1, 32, "bf16")
    verified = tmp_path / "verify.json"
    verified.write_text(out)
    plot = ("plot", "suggestions", tiny, "--verified", str(verified), "--out")
    code, out, err = run(capsys, *plot, str(tmp_path / "a.png"), *at)
    assert code == 0 and err == "", err
    code, out, err = run(capsys, *plot, str(tmp_path / "b.png"))  # the defaults, b=4 s=2048
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert "measured at b=1 s=32 bf16, not at the b=4 s=2048 bf16" in err, err
    assert "give --batch 1 --seq 32 --dtype bf16" in err and not (tmp_path / "b.png").exists()
    code, out, err = run(capsys, *plot, str(tmp_path / "b.png"), *at, "--dtype", "fp16")
    assert code == 2 and "measured at b=1 s=32 bf16, not at the b=1 s=32 fp16" in err, err
    older = tmp_path / "older.json"
    older.write_text(json.dumps([{k: v for k, v in row.items() if k not in ("batch", "seq", "dtype")}]))
    code, out, err = run(capsys, *plot[:4], str(older), "--out", str(tmp_path / "c.png"))
    assert code == 0 and len(err.splitlines()) == 1 and "records no batch, sequence length or dtype" in err, err
    older.write_text(json.dumps([{**row, "dtype": ["bf16"]}]))  # no name: refused in a line, not a TypeError
    code, out, err = run(capsys, *plot[:4], str(older), "--out", str(tmp_path / "d.png"))
    assert code == 2 and len(err.splitlines()) == 1 and "dtype is ['bf16'], not one of" in err, err


def test_a_verify_run_records_the_gpu_it_predicted_for_and_the_device_it_measured(capsys, tmp_path):
    """`verify --json` named neither the GPU whose cost model predicted its speedups nor the device that timed them,
    so a run predicted for an H100 was drawn as an H200's. The rows say both ("gpu": its key, "measured_on": the
    device's name); the plot refuses another --gpu in one line, says the device in the figure's title, and warns
    once for a file written before the rows said the GPU."""
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    from shapewise import plots

    tiny, other = _tiny(tmp_path, "tiny.json"), _tiny(tmp_path, "other.json", vocab_size=256)
    at = ("--batch", "1", "--seq", "32")
    code, out, err = run(capsys, "verify", tiny, "--config", other, "--device", "cpu", *at, "--rounds", "1", "--json",
                         "--gpu", "h100")
    assert code == 0, err
    (row,) = json.loads(out)
    assert (row["gpu"], row["measured_on"]) == ("h100", "CPU"), row
    assert "measured on CPU" in plots.verified_data([row], model="tiny", gpu="h100")["source"]
    verified = tmp_path / "verify.json"
    verified.write_text(out)
    plot = ("plot", "suggestions", tiny, "--verified", str(verified), *at, "--out")
    code, out, err = run(capsys, *plot, str(tmp_path / "a.png"), "--gpu", "h100")
    assert code == 0 and err == "", err
    code, out, err = run(capsys, *plot, str(tmp_path / "b.png"))  # the default GPU, h200
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "measured at b=1 s=32 bf16 for h100, not at the b=1 s=32 bf16 for h200" in err, err
    assert err.rstrip().endswith("--gpu h100") and not (tmp_path / "b.png").exists(), err
    older = tmp_path / "older.json"
    older.write_text(json.dumps([{k: v for k, v in row.items() if k != "gpu"}]))
    code, out, err = run(capsys, *plot[:4], str(older), *at, "--out", str(tmp_path / "c.png"))
    assert code == 0 and len(err.splitlines()) == 1 and "records no GPU its speedups were predicted for" in err, err
    older.write_text(json.dumps([{**row, "gpu": "h9000"}]))
    code, out, err = run(capsys, *plot[:4], str(older), *at, "--out", str(tmp_path / "d.png"))
    assert code == 2 and "gpu is h9000, not a GPU of the table" in err, err


def test_verify_refuses_to_vary_tp_and_says_keep_tp_does_nothing(capsys, tmp_path):
    """verify measures one GPU's step, tp 1, yet took `--vary tp` and `--keep tp` and dropped both without a
    word (its help offered them). --vary tp is refused in one line before anything is measured; --keep tp is said
    to have no effect; verify's help no longer offers tp."""
    code, out, err = run(capsys, "verify", "gpt2", "--vary", "batch,tp", "--device", "cpu")
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "cannot measure --vary tp" in err, err
    help_text = " ".join(run(capsys, "verify", "--help")[1].split())
    assert "batch,tp" not in help_text and "ffn, vocab, batch (repeat" in help_text, help_text
    pytest.importorskip("torch")
    tiny = _tiny(tmp_path, "tiny.json")
    code, out, err = run(capsys, "verify", tiny, "--keep", "tp", "--device", "cpu", "--batch", "1", "--seq", "32",
                         "--rounds", "1", "--top", "1", "--json")
    assert code == 0 and "--keep tp has no effect here" in err, err


def test_validate_takes_another_gpu_s_profile_only_when_borrowed(capsys, tmp_path):
    """`validate --profile p.json --device cpu --quick --gpu h100`, p.json fitted (on CPU times) for the h200,
    judged the h200's profile as the h100's without a word, where check refuses it without --borrow-profile.
    validate refuses it in the same words, before a store is made, and takes it lent with --borrow-profile."""
    pytest.importorskip("torch")
    shipped = _shipped("h200")
    cpu = save(dataclasses.replace(shipped, path="", environment={**shipped.environment, "device": "cpu"}),
               tmp_path / "cpu-h200.json")
    db = tmp_path / "r.db"
    argv = ("validate", "--profile", str(cpu), "--device", "cpu", "--quick", "--gpu", "h100", "--db", str(db))
    for extra in ((), ("--set", "variants", "--configs", str(HF / "gpt2.json"))):
        code, out, err = run(capsys, *argv[:-2], *extra) if extra else run(capsys, *argv)
        assert code == 2 and out == "" and len(err.splitlines()) == 1, err
        assert "a profile of the h200, not the h100: give --gpu h200, or add --borrow-profile" in err, err
    assert not db.exists()
    code, out, err = run(capsys, *argv, "--borrow-profile")
    assert code == 0, err
    assert "judged as NVIDIA H100 SXM5 80GB's; profile: profile for h200 fitted on CPU times" in out
    assert "(borrowed for h100" in out
    code, out, err = run(capsys, "validate", "--device", "cpu", "--quick", "--borrow-profile", "--db", str(db))
    assert code == 2 and "give --profile PATH too" in err, err


def test_a_layer_pattern_longer_than_the_model_is_said_once(capsys, tmp_path, recwarn):
    """ModelShape(..., num_layers=12, nope_every=13), or a config.json of 4 layers with Gemma-3's
    sliding_window_pattern 6, was taken without a word, though no layer is then NoPE (global): the same model as
    with 0. It is still taken, with one warning naming the field, its value and the layer count, said once of the
    shape the user made and not again of every shape a search derives from it."""
    shape = ModelShape("x", 768, 12, 12, 50257, nope_every=13, window=512, global_every=12)
    assert [str(w.message) for w in recwarn.list if w.category is ShapewiseWarning] == [
        "model 'x': nope_every 13 is more than its 12 layers, so every layer is rotary, as with nope_every 0"]
    assert recwarn.list[0].filename == __file__  # the user's line, not the dataclass's __init__
    recwarn.clear()
    shape.replace(hidden=1536)
    assert not recwarn.list
    with pytest.warns(ShapewiseWarning, match="global_every 13 is more than its 12 layers, so no layer attends"):
        ModelShape("x", 768, 12, 12, 50257, window=512, global_every=13)
    config = json.loads((HF / "gemma-3-1b-it.json").read_text())
    path = tmp_path / "gemma-4-layers.json"
    path.write_text(json.dumps({**config, "num_hidden_layers": 4}))
    code, out, err = run(capsys, "suggest", "--config", str(path), "--gpu", "h100")
    assert code == 0 and err.count("warning") == 1, err
    assert "global_every 6 is more than its 4 layers" in err


def test_an_absurd_global_batch_is_said_and_micro_batches_past_a_32_bit_count_refused(capsys):
    """`plan gpt2 --gpus 1 --global-batch 2147483647 --seq 1` priced a step of 2,147,483,647 micro-batches (57 days)
    without a word, and Parallelism(micro_batches=2**31) was taken as any other. A global batch past sixteen times the
    largest published is priced with one warning; micro-batches past plan's bound on the tokens are refused."""
    for argv in (("--global-batch", "2147483647", "--seq", "1"), ("--global-batch", "536870912", "--seq", "1024")):
        code, out, err = run(capsys, "plan", "gpt2", "--gpus", "1", "--gpu", "h100", *argv)
        assert code == 0 and out and len(err.splitlines()) == 1, err
        assert "is more than sixteen times the largest published" in err and "--global-batch counts tokens" in err
    code, out, err = run(capsys, "plan", "gpt2", "--gpus", "8", "--gpu", "h100", "--global-batch", "16777216",
                         "--seq", "1024")  # Llama 3 405B's 16M tokens: nothing to say
    assert code == 0 and err == "", err
    with pytest.raises(ShapewiseError, match="micro_batches: .* at most|micro_batches: .*2,147,483,647"):
        Parallelism(pp=2, micro_batches=2**31)


def test_search_says_how_it_groups_query_heads(capsys):
    """`search --help` said "gqa: 8 query heads per kv head", and `search --params 1e9` listed 20 heads over 2 kv
    heads (10 each) and 22 over 2 (11). The help says the rule the search follows: heads // 8 kv heads, at least 1."""
    code, out, err = run(capsys, "search", "--help")
    assert code == 0 and "8 query heads per kv head" not in out
    assert "a kv head per 8 query heads, rounded down (20 heads share 2 kv heads, 10 each; under 16 heads, 1)" in \
        " ".join(out.split())
    code, out, err = run(capsys, "search", "--params", "1e9", "--gpu", "h100", "--json")
    assert code == 0, err
    rows = json.loads(out)["pareto"]
    assert all(r["kv_heads"] == max(1, r["heads"] // 8) for r in rows)
    assert any(r["heads"] % 8 for r in rows)  # where "8 per kv head" was not what ran


def test_a_budget_past_the_grid_is_not_sent_to_widen_the_tolerance(capsys):
    """`search --params 1e14` said "widen --params-tol or change --params", but the grid's largest shape has 2.8e12
    parameters and --params-tol stops at 0.5: no tolerance reaches it. It says the largest there is."""
    code, out, err = run(capsys, "search", "--params", "1e14")
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert "its largest has 2.82e+12 parameters; give a smaller --params" in err and "widen" not in err, err
    code, out, err = run(capsys, "search", "--params", "4e12")  # --params-tol 0.3 reaches 2.8e12: said as before
    assert code == 2 and "widen --params-tol" in err, err


def test_verify_s_help_and_advice_speak_of_verify(capsys, tmp_path, monkeypatch):
    """`verify --help` offered --seq as "KV-cache length in decode" (verify has no --mode) and --tp as any
    tensor-parallel degree (it refuses all but 1), and named no hub id for the model it takes; `verify org/name`
    not cached said "give --config PATH", which in verify names the candidates, not the model."""
    code, out, err = run(capsys, "verify", "--help")
    text = " ".join(out.split())
    assert code == 0 and "KV-cache" not in text and "--seq SEQ, -s SEQ sequence length (a training step)" in text
    assert "1 alone, as verify measures one GPU's step" in text and "a Hugging Face hub id" in text
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, out, err = run(capsys, "verify", "acme/none", "--device", "cpu")
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert "--config" not in err and "or give the path of a config.json" in err, err


def test_a_decode_suggestion_within_the_error_is_not_sent_to_verify(capsys):
    """`suggest llama-3-8b --mode decode` noted each nearest alternative "within the model's error — verify it", but
    verify measures training steps alone (it has no --mode): a decode or prefill one is to be measured, not verified."""
    code, out, err = run(capsys, "suggest", "llama-3-8b", "--gpu", "h100", "--mode", "decode", "--seq", "4096",
                         "--batch", "16")
    assert code == 0, err
    assert "within the model's error — measure it" in out and "verify it" not in out
    code, out, err = run(capsys, "suggest", "llama-2-7b", "--gpu", "h100")  # a training step's: verify measures it
    assert code == 0 and "within the model's error — verify it" in out, err


def test_suggest_json_says_what_the_original_was_priced_at(capsys):
    """`suggest gpt2 --dtype fp8 --seq 1024 --json` gave each suggestion's batch and tp but not the sequence length,
    the dtype or the mode the speedups were priced at, which check --json and search --json give."""
    code, out, err = run(capsys, "suggest", "gpt2", "--gpu", "h100", "--dtype", "fp8", "--seq", "1024", "--json")
    assert code == 0, err
    assert json.loads(out)["workload"] == {"batch": 4, "seq": 1024, "tp": 1, "dtype": "fp8", "mode": "train",
                                           "attention": "flash", "overlap_comm": False, "kv_cache_dtype": None}


def test_validate_on_a_gpu_is_not_sent_to_another_gpu_for_another_gpu_s_profile(capsys):
    """A validate run on a GPU measures that GPU's times: "give --gpu h200" for the h200's profile would have set
    the h100's times beside the h200's predictions. It is offered --borrow-profile or a calibration of its own."""
    from shapewise.profile import for_gpu

    with pytest.raises(ShapewiseError, match="not of the h100 whose times it would judge: pass borrow_profile=True") \
            as err:  # the library's keyword; the command says --borrow-profile
        for_gpu(_shipped("h200"), "h100", device="cuda", gpu_times=True)
    assert "gpu h200" not in str(err.value)
    assert for_gpu(_shipped("h200"), "h100", gpu_times=True, borrow=True).borrowed_for == "h100"


def test_nothing_faster_points_below_only_where_something_is_listed(capsys):
    """`suggest gpt2 --keep hidden,layers,heads,kv_heads,head_dim,ffn,vocab,batch,tp` said "keep the shape, or measure
    the nearest below" above nothing at all: with every field kept no other shape is within reach."""
    code, out, err = run(capsys, "suggest", "gpt2", "--gpu", "h100", "--keep",
                         "hidden,layers,heads,kv_heads,head_dim,ffn,vocab,batch,tp")
    assert code == 0, err
    line = next(t for t in out.splitlines() if t.startswith("No shape within"))
    assert "nearest below" not in line and "no other shape is within reach" in line, line
    assert "┃" not in out  # no table below it
    code, out, err = run(capsys, "suggest", "llama-3-8b", "--gpu", "h100", "--mode", "decode", "--seq", "4096",
                         "--batch", "16")
    assert code == 0 and "keep the shape, or measure the nearest below." in out, err


def test_verify_counts_an_fp32_model_s_weights_at_4_bytes(capsys):
    """`verify MODEL --dtype fp32` decided whether the whole models fit at once by 2-byte weights and gradients and a
    16-bit loss's 6 bytes a logit: half of what an fp32 model holds, so it could build more than fits."""
    from shapewise import Workload, get_model
    from shapewise.memory import estimate
    from shapewise.verify import _need_bytes

    gpt2, w = get_model("gpt2"), Workload(dtype="fp32", batch=1, seq=128)
    assert _need_bytes(gpt2, w, whole=True) >= 8 * gpt2.params + 12 * w.tokens * gpt2.vocab
    bf16 = w.replace(dtype="bf16")  # a 16-bit one's: as before
    assert _need_bytes(gpt2, bf16, whole=True) == \
        estimate(gpt2, bf16, precision="no-optimizer", framework="torch-bf16-loss").allocated_bytes


def test_plan_keeps_an_fp32_step_s_state_in_fp32(capsys):
    """`plan gpt2 --dtype fp32` split its memory column as mixed precision's (weights 0.2 GiB, an fp32 master copy
    in the optimizer's), as check did: an fp32 step's weights and gradients are 4 bytes a parameter, no master."""
    code, out, err = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", "524288", "--seq", "1024",
                         "--dtype", "fp32", "--gpu", "h100", "--json")
    assert code == 0, err
    whole = [p for p in json.loads(out)["plans"] if p["tp"] == p["pp"] == 1 and p["zero"] <= 1]  # unsharded
    assert whole and all(p["memory_bytes"]["weights"] == p["memory_bytes"]["grads"] == 4 * p["params"] for p in whole)


@pytest.mark.parametrize("command", ["suggest", "verify"])
def test_the_keep_help_names_every_field_whole(capsys, monkeypatch, command):
    """`suggest --help` on an 80-column terminal listed the fields of --keep as "hidden,layers,heads,kv_heads,hea" and
    "d_dim,ffn,…": argparse cut the one long word where the line ended, and "hea d_dim" reads as no field at all."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run(capsys, command, "--help")
    keep = out[out.index("  --keep"):out.index("  --vary")]
    words = {w.strip(",()") for w in keep.split()}
    fields = {"hidden", "layers", "heads", "kv_heads", "head_dim", "ffn", "vocab", "batch"}
    assert code == 0 and fields | ({"tp"} if command == "suggest" else set()) <= words  # verify measures tp 1 alone


def test_search_names_the_step_it_priced(capsys):
    """`search --params 1e9 --dtype fp8 --seq 2048` headed its tables "predicted on NVIDIA H100 SXM5 80GB": its
    defaults (b=1 s=4096) differ from check's, and neither they nor the dtype were said, as suggest and check say
    theirs."""
    code, out, err = run(capsys, "search", "--params", "1e9", "--gpu", "h100", "--dtype", "fp8", "--seq", "2048",
                         "--top", "1")
    assert code == 0, err
    assert "predicted on NVIDIA H100 SXM5 80GB (train, b=1 s=2048 t=1 fp8) in" in out.splitlines()[0]
