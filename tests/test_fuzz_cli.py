"""The command line's argument space, fuzzed: every command with every flag, each given a value that
is valid or wrong in one of the ways people get it wrong (zero, negative, NaN, infinite, huge, a
fraction, text, empty), and paths that are folders, under a file, unwritable or of the wrong kind.

Whatever the input: no traceback, exit 0 or 2 (1 only for check --strict), one line on stderr for an
error, and memory bounded (fuzzing.memory_bound). Commands that measure are only ever given inputs
that must be refused before anything is measured, so that the suite needs neither a GPU nor minutes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import fuzz, run_explained

# Numbers as a user types them wrong, and as they type them right.
WRONG_NUMBERS = ["0", "-1", "-5", "nan", "NaN", "inf", "-inf", "1e400", "1e26", "100000000000",
                 "99999999999999999999999999", "0.5", "2.5", "1e-300", "", " ", "x", "0x10", "--", "4:8", "True",
                 "1,000", "٣"]
wrong_number = st.sampled_from(WRONG_NUMBERS) | st.integers(-2**80, 2**80).map(str) | \
    st.floats(allow_nan=True, allow_infinity=True).map(repr) | st.text(max_size=6)


def flag(name: str, valid: list[str], wrong=wrong_number):
    """A flag and one value, valid or wrong about as often, so that whole commands run too."""
    return st.tuples(st.just(name), st.sampled_from(valid) | wrong)


def switch(name: str):
    return st.just((name,))


def command_line(head: list[str], *options):
    """head, then any subset of the options in any order."""
    if not options:
        return st.just(list(head))
    return st.lists(st.sampled_from(range(len(options))), unique=True, max_size=len(options)).flatmap(
        lambda chosen: st.tuples(*(options[i] for i in chosen)) if chosen else st.just(())).map(
        lambda picked: [*head, *(word for option in picked for word in option)])


GPUS = ["h200", "a100", "H100", "", "h2000", "nvidia", " ", "NVIDIA H100 80GB HBM3"]
MODELS = ["gpt2", "llama3-8b", "mixtral-8x7b", "gpt5", "", "../gpt2", "GPT2"]


def model_options():
    return (flag("--gpu", GPUS, st.text(max_size=6)), flag("--batch", ["1", "4"]), flag("--seq", ["128", "2048"]),
            flag("--tp", ["1", "2"]), flag("--mode", ["train", "prefill", "decode"], st.sampled_from(["serve", ""])),
            flag("--dtype", ["bf16", "fp16", "fp8"], st.sampled_from(["int4", ""])),
            flag("--attention", ["flash", "unfused"], st.sampled_from(["sdpa", ""])))


@fuzz(40)
@given(st.sampled_from(MODELS).flatmap(lambda model: command_line(
    ["check", model], *model_options(), switch("--json"), switch("--strict"), switch("--spec-only"),
    flag("--profile", ["/nonexistent.json"], st.sampled_from(["", "/", "/proc/self/status"])))))
def test_check(argv):
    run_explained(*argv, strict="--strict" in argv)


@fuzz(15)
@given(command_line(["suggest", "gpt2"], *model_options()[:4],
                    flag("--params-tol", ["0.02", "0.05"]), flag("--aspect-band", ["1.5", "2"]),
                    flag("--top", ["1", "3"]), flag("--pick", ["1", "2"]),
                    flag("--keep", ["hidden", "vocab,batch"], st.sampled_from(["", ",", "size", "hidden,,x"])),
                    switch("--json")))
def test_suggest(argv):
    run_explained(*argv)


@fuzz(15)
@given(command_line(["search"], flag("--params", ["7e9", "1.3e9"]), flag("--gpu", GPUS),
                    flag("--seq", ["2048", "4096"]), flag("--batch", ["1", "2"]), flag("--tp", ["1", "2"]),
                    flag("--vocab", ["32000", "50257"]), flag("--params-tol", ["0.05", "0.1"]),
                    flag("--top", ["3", "10"]), flag("--mlp", ["swiglu", "gelu"], st.just("mish")),
                    flag("--attention-kind", ["gqa", "mha"], st.just("mla")), switch("--json")))
def test_search(argv):
    run_explained(*argv)


@fuzz(20)
@given(st.sampled_from([["gpus"], ["models"], ["gpus", "h200"], ["--version"]])
       | st.text(max_size=12).map(lambda name: ["gpus", name]))
def test_listings(argv):
    run_explained(*argv)


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """Output paths of every kind: fine, a folder, under a file, unwritable, missing folder, wrong kind."""
    root = tmp_path_factory.mktemp("out")
    (root / "a-file").write_text("")
    return root


def output_path(root, suffixes):
    fine = [str(root / f"out{s}") for s in suffixes]
    wrong = [str(root), str(root / "a-file" / f"x{suffixes[0]}"), f"/proc/shapewise-test/x{suffixes[0]}",
             str(root / "missing" / f"x{suffixes[0]}"), str(root / "x.txt"), str(root / "x"), ""]
    return st.sampled_from(fine + wrong)  # mostly wrong: a right one runs the whole command


@fuzz(20)
@given(data=st.data())
def test_plot_and_report(paths, data):
    kind = data.draw(st.sampled_from(["gemm", "breakdown", "report", "attention"]))
    out = ("--out", data.draw(output_path(paths, [".png", ".svg"] if kind != "report" else [".html", ".md"])))
    if kind == "gemm":
        argv = data.draw(command_line(["plot", "gemm", *out], flag("--values", ["4096", "4090:4100"],
                                      st.sampled_from(["1:100000000:1", "0:10", "5:1", "1:10:0", "1:10:-1", "a:b",
                                                       "1:2:3:4", "", "1e3"])),
                                      flag("-m", ["8192"]), flag("-k", ["4096"]), flag("--gpu", GPUS)))
        if "--values" not in argv:
            argv += ["--values", "4096"]
    elif kind == "attention":
        argv = data.draw(command_line(["plot", "attention", *out, "--hiddens", "2048"], flag("--heads", ["16"]),
                                      flag("--seq", ["2048"]), flag("--batch", ["4"])))
    else:
        head = ["plot", "breakdown", "gpt2", *out] if kind == "breakdown" else ["report", "gpt2", *out]
        extra = (flag("--format", ["html", "md"], st.just("pdf")),) if kind == "report" else ()
        argv = data.draw(command_line(head, flag("--seq", ["512"]), flag("--top", ["2"]), *extra, switch("--mkdir")))
    code, out_text, _ = run_explained(*argv)
    if code == 0:
        assert "wrote" in out_text


@fuzz(10)
@given(data=st.data())
def test_suggest_writes_configs_only_where_it_can(paths, data):
    target = data.draw(output_path(paths, [".json"]))
    code, _, _ = run_explained("suggest", "gpt2", "--emit-config", target, "--top", "1")
    if code == 0:
        assert json.loads(Path(target).read_text())["n_embd"] > 0


DEVICES = ["foo", "cuda", "cuda:7", "", "gpu", "mps", "cuda:-1", "cuda:x", "cpu:0:1"]


def measuring(head, *options):
    """A measuring command whose device is wrong (no GPU here) or with one number surely wrong."""
    return command_line(head, *options).flatmap(lambda argv: st.one_of(
        st.sampled_from(DEVICES).map(lambda device: [*argv, "--device", device]),
        st.tuples(st.sampled_from(["--warmup-ms", "--budget-ms"]), st.sampled_from(
            ["nan", "inf", "-1", "-5", "1e9", "x", ""])).map(lambda bad: [*argv, "--device", "cpu", *bad])))


@fuzz(50)
@given(st.one_of(
    measuring(["bench", "gemm", "-m", "64", "-n", "64", "-k", "64"], flag("--layout", ["nn", "nt"])),
    measuring(["bench", "bmm", "-b", "2", "-m", "64", "-n", "64", "-k", "64"]),
    measuring(["bench", "attention", "--heads", "2", "--head-dim", "64", "--seq", "128"]),
    measuring(["bench", "ops", "gpt2"], flag("--seq", ["128"]), flag("--batch", ["1"])),
    measuring(["calibrate", "--quick"], switch("--no-install")),
    measuring(["validate", "--quick"], flag("--seed", ["2", "3"])),
))
def test_measuring_commands_refuse_before_measuring(argv):
    code, _, _ = run_explained(*argv)
    assert code == 2


@fuzz(40)
@given(st.lists(st.sampled_from(["gemm", "-m", "-n", "-k", "-b", "64", "1:100000000", "0", "-1", "nan", "1:4:0",
                                 "x", "", "--device", "foo", "--layout", "tn", "--dtype", "fp8", "64:1",
                                 "1_000_000_000_000"]), max_size=10))
def test_bench_dims(words):
    """Dims and ranges are read and bounded before any device is touched."""
    run_explained("bench", *words, "--device", "foo")


@fuzz(30)
@given(st.lists(st.sampled_from(["--sizes", "1M", "1G:1K", "nan", "infK", "-1", "0", "1e30", "64K:1T", "1P", "x",
                                 "--ops", "all_reduce", "--iters", "0", "--warmup", "-1", "99999999999"]),
                max_size=8))
def test_bench_comm(words):
    run_explained("bench", "comm", *words, "--device", "foo")


@fuzz(15)
@given(command_line(["verify", "gpt2"], flag("--rounds", ["3"]), flag("--seq", ["128"]), flag("--batch", ["1"]),
                    flag("--suggestion", ["1"]), flag("--params-tol", ["0.02"]), flag("--top", ["1"]),
                    flag("--measure", ["auto", "layer"], st.just("step"))).map(lambda argv: [*argv, "--device", "foo"]))
def test_verify_refuses_a_wrong_device_first(argv):
    code, _, _ = run_explained(*argv)
    assert code == 2
