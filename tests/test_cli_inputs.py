"""A new user's inputs: bad ones refused in one line with exit code 2 (never a traceback), a failed
measurement kept with its reason while the run goes on, and meaningless flags said, not accepted
silently. Measurements run on the CPU at toy sizes."""

import importlib
import json
from pathlib import Path

import pytest

from helpers import run
from shapewise.cli import build_parser
from shapewise.errors import ShapewiseError

measure = importlib.import_module("shapewise.measure")
verify = importlib.import_module("shapewise.verify")  # the module: the package names its function `verify`

VERIFY = ("verify", "gpt2", "--device", "cpu", "-b", "1", "-s", "32", "--rounds", "1", "--top", "1")
CPU_ALLOCATOR = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you "
                 "tried to allocate 2472542208 bytes. Error code 12 (Cannot allocate memory)")


def one_line_error(code, err, *words):
    lines = err.strip().splitlines()
    return code == 2 and len(lines) == 1 and lines[0].startswith("shapewise: error:") and all(w in err for w in words)


# ---- 1. verify: a model too big for the device's memory ----------------------------------------

@pytest.mark.parametrize("memory, mode, words", [
    (0.3e9, "model", ("a whole training step", "needs about 0.5 GB, the device has 0.3 GB", "--measure layer")),
    (0.1e9, "layer", ("one layer and the output head", "needs about 0.2 GB, the device has 0.1 GB")),
])
def test_verify_refuses_an_original_too_big_for_the_memory_before_allocating(capsys, monkeypatch, memory, mode,
                                                                             words):
    monkeypatch.setattr(measure, "device_memory_bytes", lambda device: int(memory))
    built = []
    monkeypatch.setattr(verify, "_part_names", lambda *a, **k: built.append(a) or ("x",))
    code, _, err = run(capsys, *VERIFY, "--measure", mode)
    assert one_line_error(code, err, "gpt2 does not fit the memory of the CPU", *words), err
    assert not built  # refused before anything was allocated


def test_verify_says_an_original_that_runs_out_of_memory_does_not_fit(capsys, monkeypatch):
    """The estimate said it fits, the CPU's allocator (or CUDA's) said otherwise: one line, not torch's traceback."""
    def out_of_memory(*args):
        raise RuntimeError(CPU_ALLOCATOR)

    monkeypatch.setattr(verify, "_layer_fn", out_of_memory)
    code, _, err = run(capsys, *VERIFY, "--measure", "layer")
    assert one_line_error(code, err, "gpt2 does not fit the memory of the CPU: it ran out of memory",
                          "needs about 0.2 GB"), err


@pytest.mark.parametrize("when", ["built", "run"])
def test_verify_keeps_a_candidate_that_runs_out_of_memory_with_its_reason(capsys, monkeypatch, when):
    """gpt2's first suggestion pads its vocabulary: its head (and only it) runs out of memory, when built or
    when first run; the original is measured and the candidate's row says why it was not."""
    head_fn = verify._head_fn

    def head(shape, workload, device, seed):
        if shape.vocab == 50257:
            return head_fn(shape, workload, device, seed)
        if when == "built":
            raise RuntimeError("CUDA out of memory. Tried to allocate 1.2 GiB")

        def fails():
            raise RuntimeError(CPU_ALLOCATOR)
        return fails

    monkeypatch.setattr(verify, "_head_fn", head)
    code, out, err = run(capsys, *VERIFY, "--measure", "layer")
    assert code == 0, err
    assert "vocab 50257→50304" in out and "failed" in out and "out of memory" in out
    code, out, err = run(capsys, *VERIFY, "--measure", "layer", "--json")
    row, = json.loads(out)
    assert code == 0 and row["error"].startswith("out of memory") and row["measured_speedup"] is None


def test_torch_out_of_memory_errors_are_told_apart():
    from shapewise.bench import out_of_memory

    assert out_of_memory(RuntimeError(CPU_ALLOCATOR)) and out_of_memory(MemoryError())
    assert out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not out_of_memory(RuntimeError("expected scalar type BFloat16 but found Float"))


# ---- 2. bench layer and ops: a dtype they cannot run in ----------------------------------------

@pytest.mark.parametrize("what", ["layer", "ops"])
def test_bench_layer_and_ops_refuse_fp8_before_measuring(capsys, what):
    code, out, err = run(capsys, "bench", what, "gpt2", "-b", "1", "-s", "32", "--dtype", "fp8", "--device", "cpu")
    assert one_line_error(code, err, f"bench {what} measures fp32, tf32, bf16 or fp16, not fp8", "bench gemm"), err
    assert not out


# ---- 3 and 6. plan: the links a plan uses, and links that make no sense ---------------------------

PLAN = ("plan", "gpt2", "--global-batch", "2048", "--seq", "1024", "--json")


@pytest.mark.parametrize("flags, network", [
    (("--gpus", "1", "--gpu", "v100", "--dtype", "fp16"), "no link (one GPU)"),
    (("--gpus", "8", "--gpu", "v100", "--dtype", "fp16"), "within a node 150 GB/s (NVLink 2), no network (one node)"),
    (("--gpus", "1", "--gpu", "mi300x", "--dtype", "fp16"), "no link (one GPU)"),
    (("--gpus", "1", "--gpu", "rtx4090"), "no link (one GPU)"),
    (("--gpus", "1", "--gpu", "mi250x"), "no link (one GPU)"),
])
def test_plan_asks_only_for_the_links_its_layouts_use(capsys, flags, network):
    code, out, err = run(capsys, *PLAN, *flags)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["network"] == network and doc["plans"]


def test_plan_still_asks_for_a_network_across_nodes_and_says_the_dtype_first(capsys):
    code, _, err = run(capsys, *PLAN, "--gpus", "16", "--gpu", "v100", "--dtype", "fp16")
    assert one_line_error(code, err, "give --inter-node-gbs"), err
    code, _, err = run(capsys, *PLAN, "--gpus", "16", "--gpu", "v100", "--dtype", "fp8")
    assert one_line_error(code, err, "no fp8 support"), err


def test_the_library_plan_says_the_dtype_then_asks_for_a_link_its_layouts_use():
    from shapewise.plan import plan
    from shapewise.presets import PRESETS

    kw = dict(gpus=16, gpu="v100", global_batch_tokens=16 * 1024, seq=1024)
    with pytest.raises(ShapewiseError, match="no bf16 support"):
        plan(PRESETS["gpt2"], **kw)
    with pytest.raises(ShapewiseError, match="give inter_gbs \\(GB/s per GPU\\)"):
        plan(PRESETS["gpt2"], **kw, dtype="fp16")
    assert plan(PRESETS["gpt2"], **kw, dtype="fp16", inter_gbs=12.5).network.inter_gbs == 12.5


@pytest.mark.parametrize("flags, warning", [
    (("--gpus", "16", "--intra-node-gbs", "1", "--inter-node-gbs", "1000000"),
     "the network between nodes (1e+06 GB/s per GPU) is faster than the link within a node (1 GB/s)"),
    (("--gpus", "8", "--inter-node-gbs", "3"), "--inter-node-gbs 3 has no effect: the 8 GPUs are one node"),
    (("--gpus", "1", "--intra-node-gbs", "3"), "--intra-node-gbs 3 has no effect: one GPU sends nothing to another"),
])
def test_plan_says_links_that_make_no_sense(capsys, flags, warning):
    code, _, err = run(capsys, *PLAN, "--gpu", "h100", *flags)
    assert code == 0 and f"shapewise: warning: {warning}" in err, err


# ---- 4. verify's header says layers were asked for ---------------------------------------------

def test_verify_header_says_layers_were_asked_for(capsys):
    code, out, err = run(capsys, *VERIFY, "--measure", "layer")
    assert code == 0, err
    assert "(as asked: --measure layer)" in out and "do not fit" not in out


# ---- 5. bench: CPU times beside a GPU's predictions ----------------------------------------------

def test_bench_warns_that_cpu_times_are_not_the_gpus_it_predicts(capsys):
    code, out, err = run(capsys, "bench", "attention", "--heads", "2", "--head-dim", "16", "--seq", "32", "--batch", "1",
                         "--backend", "default", "--pass", "fwd", "--device", "cpu", "--gpu", "v100", "--dtype", "fp16",
                         "--budget-ms", "1", "--warmup-ms", "1")
    assert code == 0, err
    assert "shapewise: warning: these times were measured on the CPU" in err and "say nothing of the v100" in err


# ---- 7. calibrate: --out with nothing to write -------------------------------------------------

def test_calibrate_on_the_cpu_without_a_gpu_refuses_out(capsys, tmp_path):
    out = tmp_path / "p.json"
    code, _, err = run(capsys, "calibrate", "--device", "cpu", "--quick", "--out", str(out), "--no-install")
    assert one_line_error(code, err, "nothing is fitted", "--gpu"), err
    assert not out.exists()


# ---- 8. validate: flags the chosen set does not use ----------------------------------------------

@pytest.mark.parametrize("flags, words", [
    (("--set", "default", "--configs", "ok.json"), ("--configs: only the models and variants sets take it",)),
    (("--set", "wide", "--batch", "2"), ("--batch: only the variants set takes it",)),
    (("--set", "models", "--configs", "ok.json", "--seed", "3"), ("--seed", "drawn with none")),
    (("--set", "wide", "--seq", "64", "--batch", "2"), ("--batch, --seq: only the variants set takes them",
                                                        "leave them out of --set wide")),
    (("--set", "variants", "--configs", "ok.json", "--force", "--db", "x.db"),
     ("--db, --force: the variants set is measured interleaved, model by model, and not stored; leave them out",)),
])
def test_validate_refuses_flags_its_set_does_not_use(capsys, flags, words):
    code, _, err = run(capsys, "validate", "--device", "cpu", "--quick", *flags)
    assert one_line_error(code, err, *words), err


def test_every_set_but_variants_takes_the_stores_flags():
    """SET_FLAGS is validate's one table of which set takes which flag: a new set takes the store's flags."""
    from shapewise.cli.calibrate import SET_FLAGS, SET_REFUSES
    from shapewise.judges import SETS

    assert all(set(sets) <= set(SETS) for sets in SET_FLAGS.values()) and set(SET_REFUSES) <= set(SETS)
    for flag in ("from_db", "db", "force", "cuda_graph"):
        assert set(SET_FLAGS[flag]) == set(SETS) - {"variants"}


def test_the_models_set_is_drawn_with_its_seed():
    """--seed is no dead flag for --set models: its steps' workloads are drawn with it (--quick's are fixed)."""
    from shapewise.judges import judge_set_cases

    config = "tests/data/hf"
    keys = {seed: {c.key for c in judge_set_cases("models", seed=seed, configs=[config]).cases} for seed in (2, 3)}
    assert keys[2] != keys[3]


# ---- 9. flags that mean nothing as given ----------------------------------------------------------

@pytest.mark.parametrize("argv, words", [
    (("check", "gpt2", "-s", "1024", "--borrow-profile"), ("--borrow-profile", "give --profile PATH too")),
    (("check", "gpt2", "-s", "1024", "--spec-only", "--borrow-profile"), ("--spec-only uses no profile",)),
    (("suggest", "gpt2", "-s", "1024", "--vary", ""), ("--vary '' names no field",)),
    (("suggest", "gpt2", "-s", "1024", "--keep", "heads", "--keep", ","), ("--keep ',' names no field",)),
])
def test_meaningless_flags_are_refused(capsys, argv, words):
    code, _, err = run(capsys, *argv)
    assert one_line_error(code, err, *words), err


# ---- 10. list flags given more than once ---------------------------------------------------------

def test_repeated_keep_keeps_every_field(capsys):
    """--keep heads --keep vocab is --keep heads,vocab: the heads kept too (it suggested "heads 32→20")."""
    base = ("suggest", "gpt3-2.7b", "--json")
    docs = [json.loads(run(capsys, *base, *keep)[1]) for keep in (("--keep", "heads,vocab"),
                                                                   ("--keep", "heads", "--keep", "vocab"))]
    assert docs[0] == docs[1]
    changed = {field for row in docs[1]["suggestions"] + docs[1]["alternatives"] for field in row["changes"]}
    assert not changed & {"heads", "vocab"}


def test_repeated_list_flags_add_up():
    parse = build_parser().parse_args
    gemm = parse(["bench", "gemm", "-m", "128", "-m", "256", "-n", "64", "-k", "64", "--layout", "nt", "--layout", "tn"])
    assert gemm.m == ["128", "256"] and gemm.layout == ["nt", "tn"]
    assert parse(["bench", "gemm", "-m", "1", "-n", "1", "-k", "1"]).layout == ["nn"]  # the default, untouched
    attention = parse(["bench", "attention", "--heads", "8", "--head-dim", "64", "--seq", "128", "--seq", "256",
                       "--backend", "math", "--backend", "unfused"])
    assert attention.seq == ["128", "256"] and attention.backend == ["math", "unfused"]
    assert parse(["validate", "--configs", "a.json", "--configs", "b.json"]).configs == ["a.json", "b.json"]
    assert parse(["suggest", "gpt2", "--vary", "batch", "--vary", "tp"]).vary == ["batch", "tp"]


def test_results_refuses_a_second_bench_and_plot_adds_repeated_values(capsys, tmp_path, monkeypatch):
    from shapewise import plots

    code, out, err = run(capsys, "results", "--db", str(tmp_path / "x.db"), "--bench", "gemm", "--bench", "op")
    assert one_line_error(code, err, "argument --bench: given twice, gemm and op: give it once"), err
    seen = {}
    real = plots.gemm_data
    monkeypatch.setattr(plots, "gemm_data", lambda **kw: seen.setdefault("values", kw["values"]) and real(**kw))
    code, _, _ = run(capsys, "plot", "gemm", "--dim", "n", "--values", "64", "--values", "128", "-m", "64", "-k", "64",
                     "--gpu", "h200", "--out", str(tmp_path / "g.png"))
    assert code == 0 and list(seen["values"]) == [64, 128]  # the last use alone before


# ---- 11. flags of one value given twice ----------------------------------------------------------

@pytest.mark.parametrize("argv, flag, values", [
    (("check", "gpt2", "--gpu", "h200", "--gpu", "h100"), "--gpu", "h200 and h100"),
    (("check", "gpt2", "--batch", "4", "-b", "8"), "--batch/-b", "4 and 8"),
    (("check", "gpt2", "--mode", "train", "--mode", "train"), "--mode", "train and train"),
    (("suggest", "gpt2", "--top", "3", "--top", "5"), "--top", "3 and 5"),
    (("suggest", "gpt2", "--params-tol", "0.02", "--params-tol=0.05"), "--params-tol", "0.02 and 0.05"),
    (("bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "cpu", "--device", "cuda"), "--device",
     "cpu and cuda"),
    (("bench", "ops", "gpt2", "--db", "a.db", "--db", "b.db"), "--db", "a.db and b.db"),
    (("search", "--params", "7e9", "--params", "8e9"), "--params", "7e+09 and 8e+09"),
    (("calibrate", "--extended", "--extended", "2"), "--extended", "1 and 2"),
])
def test_a_flag_of_one_value_given_twice_is_refused_naming_both(capsys, argv, flag, values):
    """argparse kept the last silently: check gpt2 --gpu h200 --gpu h100 priced the H100 without a word."""
    code, out, err = run(capsys, *argv)
    assert out == "" and one_line_error(code, err, f"argument {flag}: given twice, {values}: give it once"), err


def parsers(parser):
    """The parser and every subcommand's, depth first."""
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


def test_every_flag_of_one_value_is_refused_twice_and_each_parse_starts_afresh():
    import argparse

    parser = build_parser()
    plain = [(p.prog, a.option_strings) for p in parsers(parser) for a in p._actions
             if type(a) is argparse._StoreAction]  # argparse's own: keeps the last of two silently
    assert plain == []
    assert parser.parse_args(["check", "gpt2", "--gpu", "h100"]).gpu == "h100"
    assert parser.parse_args(["check", "gpt2", "--gpu", "h200"]).gpu == "h200"  # the first parse's --gpu forgotten


@pytest.mark.parametrize("given", [("--causal", "--no-causal"), ("--no-causal", "--causal"),
                                   ("--no-causal", "--no-causal"), ("--causal", "--causal")])
def test_an_on_off_pair_given_more_than_once_is_refused_naming_both(capsys, given):
    """argparse kept the last silently: --causal --no-causal timed full attention without a word."""
    code, out, err = run(capsys, "bench", "attention", "--heads", "8", "--head-dim", "64", "--seq", "128",
                         "--device", "cpu", *given)
    assert out == "" and one_line_error(code, err, f"argument --causal/--no-causal: given twice, {given[0]} and "
                                                   f"{given[1]}: give one of them once"), err


def test_every_on_off_pair_is_a_switch_and_each_parse_starts_afresh():
    import argparse

    from shapewise.cli.common import Switch

    parser = build_parser()
    pairs = [(p.prog, a) for p in parsers(parser) for a in p._actions if isinstance(a, argparse.BooleanOptionalAction)]
    assert pairs and [(prog, a.option_strings) for prog, a in pairs if type(a) is not Switch] == []
    attention = ["bench", "attention", "--heads", "8", "--head-dim", "64", "--seq", "128"]
    assert parser.parse_args([*attention, "--no-causal"]).causal is False
    assert parser.parse_args([*attention, "--causal"]).causal is True  # the first parse's --no-causal forgotten
    assert parser.parse_args(attention).causal is True


def test_emit_config_refuses_to_write_over_the_config_it_read(capsys, tmp_path):
    source = tmp_path / "in.json"
    source.write_text((Path(__file__).parent / "data" / "hf" / "gpt2.json").read_text())
    before = source.read_text()
    for argv in ((str(source),), ("--config", str(source))):
        code, _, err = run(capsys, "suggest", *argv, "--seq", "1024", "--emit-config", str(source))
        assert one_line_error(code, err, "is the config the model was read from")
    assert source.read_text() == before


def test_plot_attention_heads_bounds_the_width_the_heads_make(capsys, tmp_path):
    code, _, err = run(capsys, "plot", "attention-heads", "--head-dim", "128", "--head-counts", "1000000",
                       "--gpu", "h200", "--out", str(tmp_path / "a.png"))
    assert one_line_error(code, err, "head count 1000000 × head dim 128", "2^20")


@pytest.mark.parametrize("argv, said", [
    (["plan", "llama2-7b", "--params", "-7e9", "--gpus", "8", "--gpu", "h200"], "the parameter budget must be a number above 0"),
    (["check", "gpt2", "--seq", "-1e3"], "the sequence length must be a positive whole number"),
])
def test_a_negative_number_in_exponent_form_is_a_value_refused_for_its_sign(capsys, argv, said):
    # argparse took "-7e9" for a flag: "expected one argument"
    code, _, err = run(capsys, *argv)
    assert code == 2 and said in err and "expected one argument" not in err and err.count("\n") == 1
