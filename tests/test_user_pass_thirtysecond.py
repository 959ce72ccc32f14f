"""What a new user's thirty-second pass found, on the CPU:

- `search --json`'s workload said five of its fields ({"batch": 1, "seq": 4096, "tp": 1, "dtype": "bf16", "mode":
  "train"}) where `suggest --json`'s and `check --json`'s said eight (attention, overlap_comm and kv_cache_dtype too),
  each built by its own copy of the dict. `Workload.to_json()` gives it, and the three print it (check's adds its
  tokens).
- The library's `search(..., workload=Workload(batch=8, seq=4096, mode="decode"))` ranked shapes by a decode step
  (0.26 ms per token against training's 0.012) while the command is training-only and its help promises no decode.
  The library now refuses it in one line, as the command cannot ask it: search's grid and budget design a model to
  be trained, and at one parameter budget a decode step's price is mostly its weights' bytes, the same for every
  shape; suggest and check price prefill and decode of a given model.
- `bench gemm -m 1:0` was refused as "a GEMM dim must be a positive whole number ..., got 0": the range's end checked
  as a dim, where the fault is a range ending before it starts (`-m 8:4` said so). Both now say "range '1:0' needs
  START <= STOP and a positive STEP". `bench comm --sizes 1K:0` did the same ("a collective's size in bytes must be
  a positive whole number ..., got 0"); it now says "range '1K:0' needs START <= STOP", as `--sizes 2K:1K` did.
- `gpus` and `models` had no --json: a script had to scrape a table. `gpus --json` gives every GPU's numbers and their
  sources (`GPU.to_json()`), `gpus NAME --json` one's; `models --json` gives each preset as check --json gives its
  model (`ModelShape.to_json()`, one function for the two).
- `Suggestions.to_json()` called from Python said "widen --params-tol or --aspect-band, or --keep fewer fields", the
  command line's flags, where the API's other messages name its keyword arguments (top, params_tol). It now says
  "widen params_tol or aspect_band, or keep fewer fields" from Python; `suggest --json` and `verify` say the flags as
  before.
- `suggest gpt2 --mkdir` said nothing of a flag that did nothing (it makes --emit-config's folder), where `results
  --mkdir` without a file warns so. suggest warns the same way now.
- `plan gpt2 --gpus 8 --global-batch 1 --seq 1024` said "the global batch of 1 tokens": "1 token" now.
- `shapewise.check(...)` and `plan(...)` gave results with no `to_json()`, where suggest's and search's have one since
  the last pass: a script had to find `report.to_json` and `plan.to_json` as functions. `CheckResult.to_json()` and
  `PlanResult.to_json(train_tokens=...)` give what `check --json` and `plan --json [--tokens]` print, the tokens
  checked as the flag is (1.5e12 refused: a count given as a float).
- `verify gpt2 --seq 1024 --keep hidden,heads,kv_heads,head_dim,ffn,vocab --suggestion 1` said "--suggestion must be
  between 1 and 0": its range was checked before there being nothing to verify. It now says there is nothing to
  verify (and how to widen the search); a --suggestion past those listed is said as suggest's --pick says it:
  "--suggestion 99: there are 4 suggestions; give --suggestion from 1 to 4" (one function for the two).
- `bench bmm --batch 4 -m 16 -n 16 -k 16` was refused as "the following arguments are required: -b": bmm named its
  batch -b alone, where bench attention named it --batch alone, and check, plan, verify and bench layer and ops take
  both. bench bmm and bench attention now take -b and --batch too.
- `report gpt2 --out r.html --db missing.db` said "no results store at missing.db: measure first (`shapewise bench`),
  or give --db PATH" to a user who had given --db PATH, where `results --db missing.db` said "check the path" (a
  message of its own, before the store's). The store says "no results store at missing.db (--db): check the path;
  `shapewise bench` and `shapewise calibrate` make a store" wherever a path is given (report, results, plot; "(path)"
  to a Python caller of Store), and "or give --db PATH" only of the default store.
- An empty path was taken for the flag left out: `check gpt2 --profile ''` priced with the default profile,
  `check gpt2 --config ''` priced the preset gpt2 as if --config were not there, and `calibrate --device cpu --gpu h100
  --out ''` began its 2,980 cases with no file to write the profile to (`report --out ''` and `suggest --emit-config
  ''` were refused). --profile and --config (check, suggest, search, plan, report, validate, verify's --config) now
  refuse it in one line, "argument --profile: the path is empty: give a file, or leave the flag out"; calibrate's --out
  says "give a file to write the profile to", as report's does, before anything is measured.
- `check gpt2 --seq $'0\n'` (a value pasted with its newline) printed its error on two lines, "... got 0" and then
  " (see `shapewise check --help`)": a limit read text stripped but echoed it as given (tests/test_limits.py's
  property test drew "0\n" in this pass's run of the suite). The value is echoed as read, stripped, and past 40
  characters cut, in each of the limit's three refusals.

Found consistent: bad counts, GPUs, devices and dims to check, plan, suggest, search, verify, bench, plot, results and
validate each refused in one line with exit 2; the API's wrong types (a name for a ModelShape, a dict for a Workload).

Left alone: "(3 considered)" beside "no other shape is within reach" when the three are the original at other
micro-batches (`suggest gpt2 --seq 1024 --keep hidden,heads,kv_heads,head_dim,ffn,vocab`; the count is README's "31
shapes" too); search's --dtype refuses fp32 and tf32 while the library's search and `plan --params --dtype fp32` take
them; a decode workload past 2^31 cache tokens is refused as "tokens per step (batch × sequence length)", which a
decoding step is not; search()'s keyword `attention` is the command's --attention-kind (gqa), not Workload's.
"""

from __future__ import annotations

import json
import re

import pytest

from helpers import run
from shapewise import GPUS, ShapewiseError, Workload, get_model, search, suggest
from shapewise.presets import PRESETS

NO_REACH = ("hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab")  # gpt2 at seq 1024: nothing else within reach


def test_search_json_says_the_workload_as_suggest_and_check_do(capsys):
    code, out, _ = run(capsys, "search", "--params", "1e9", "--gpu", "h100", "--top", "1", "--json")
    assert code == 0
    searched = json.loads(out)["workload"]
    code, out, _ = run(capsys, "suggest", "gpt2", "--gpu", "h100", "--seq", "1024", "--batch", "1", "--json")
    assert code == 0
    suggested = json.loads(out)["workload"]
    code, out, _ = run(capsys, "check", "gpt2", "--gpu", "h100", "--seq", "1024", "--batch", "1", "--json")
    checked = json.loads(out)["workload"]
    assert searched.keys() == suggested.keys() == checked.keys() - {"tokens"}
    assert searched == Workload(batch=1, seq=4096).to_json() and suggested == Workload(batch=1, seq=1024).to_json()
    assert {k: checked[k] for k in suggested} == suggested


@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_the_librarys_search_is_training_only_as_the_command_is(mode):
    with pytest.raises(ShapewiseError, match=rf"^search designs a model for training: the workload's mode must be "
                                             rf"train, got {mode} \(suggest and check price {mode} for a given model\)$"):
        search(params_target=1e9, gpu="h100", workload=Workload(batch=8, seq=4096, mode=mode), top=3)


@pytest.mark.parametrize("given", ["1:0", "8:4", "64:32:16"])
def test_a_range_ending_before_it_starts_is_said_as_that(capsys, given):
    code, _, err = run(capsys, "bench", "gemm", "-m", given, "-n", "16", "-k", "16", "--device", "cpu")
    assert code == 2 and err.strip() == f"shapewise: error: -m: range '{given}' needs START <= STOP and a positive STEP"


def test_a_range_starting_below_a_dim_is_still_said_as_the_dim(capsys):
    code, _, err = run(capsys, "bench", "gemm", "-m", "0:4", "-n", "16", "-k", "16", "--device", "cpu")
    assert code == 2 and "a GEMM dim must be a positive whole number" in err and err.strip().endswith("got 0")


@pytest.mark.parametrize("given", ["1K:0", "2K:1K"])
def test_a_size_range_ending_before_it_starts_is_said_as_that(capsys, given):
    code, _, err = run(capsys, "bench", "comm", "--sizes", given, "--device", "cpu")
    assert code == 2 and err.strip() == f"shapewise: error: --sizes: range '{given}' needs START <= STOP"


def _rows(text: str) -> dict[str, list[str]]:
    """A table's rows by their first cell (rich's box characters between cells)."""
    return {cells[0]: cells for line in text.splitlines()
            if len(cells := [c.strip() for c in re.split("[│┃]", line)]) > 2}


def test_gpus_json_says_what_the_table_does(capsys):
    code, text, _ = run(capsys, "gpus")
    assert code == 0
    code, out, _ = run(capsys, "gpus", "--json")
    assert code == 0
    listed = json.loads(out)["gpus"]
    rows = _rows(text)
    assert [g["key"] for g in listed] == [g.key for g in GPUS]
    for g in listed:
        row = rows[g["key"]]
        assert row[1] == g["name"] and row[2] == str(g["num_sms"]) and row[3] == str(g["boost_clock_mhz"])
        assert row[6] == (f"{g['tflops']['bf16']:,.0f}" if "bf16" in g["tflops"] else "—")
        assert row[9] == f"{g['mem_bandwidth_gbs'] / 1000:.2f}" and row[11] == f"{g['memory_gb']:g}"


def test_one_gpus_json_holds_every_number_with_its_source(capsys):
    code, text, _ = run(capsys, "gpus", "h100")
    assert code == 0
    code, out, _ = run(capsys, "gpus", "h100", "--json")
    assert code == 0
    one = json.loads(out)
    assert one == GPUS[[g.key for g in GPUS].index("h100")].to_json() and one["memory_gb"] == 80
    rows = _rows(text)
    assert rows["num_sms"][1] == str(one["num_sms"]) and rows["num_sms"][2].startswith(one["sources"]["num_sms"][:20])
    code, _, err = run(capsys, "gpus", "nope", "--json")
    assert code == 2 and err.count("\n") == 1


def test_models_json_says_what_the_table_does(capsys):
    code, text, _ = run(capsys, "models")
    assert code == 0
    code, out, _ = run(capsys, "models", "--json")
    assert code == 0
    given = json.loads(out)
    presets = given["presets"]
    assert [m["name"] for m in presets] == list(PRESETS) and "config.json" in given["config_json"]
    rows = _rows(text)
    for m in presets:
        row = rows[m["name"]]
        assert row[1] == f"{m['params'] / 1e9:.2f}B" and row[2] == str(m["hidden"]) and row[3] == str(m["num_layers"])
        assert row[5] == str(m["num_kv_heads"]) and row[6] == str(m["head_dim"]) and row[9] == str(m["vocab"])
    code, out, _ = run(capsys, "check", "llama3-8b", "--gpu", "h100", "--json")
    assert json.loads(out)["model"] == next(m for m in presets if m["name"] == "llama3-8b")


def test_suggestions_to_json_names_keywords_from_python_and_flags_from_the_command(capsys):
    result = suggest(get_model("gpt2"), Workload(seq=1024), gpu="h100", keep=NO_REACH)
    assert result.to_json()["message"].endswith("widen params_tol or aspect_band, or keep fewer fields).")
    code, out, _ = run(capsys, "suggest", "gpt2", "--gpu", "h100", "--seq", "1024", "--keep", ",".join(NO_REACH),
                       "--json")
    assert code == 0
    printed = json.loads(out)
    assert printed["message"].endswith("widen --params-tol or --aspect-band, or --keep fewer fields).")
    printed.pop("warnings")
    given = json.loads(json.dumps(result.to_json()))
    for doc in (printed, given):
        doc.pop("message")
    assert given == printed


def test_suggest_says_its_mkdir_does_nothing_without_a_file(capsys):
    code, _, err = run(capsys, "suggest", "gpt2", "--gpu", "h100", "--seq", "1024", "--mkdir")
    assert code == 0 and "--mkdir has no effect without --emit-config, the file whose folder it makes" in err


def test_one_token_is_said_as_one(capsys):
    code, _, err = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", "1", "--seq", "1024")
    assert code == 2 and "the global batch of 1 token is not a whole number of sequences of 1,024" in err


def test_check_results_to_json_is_what_check_json_prints(capsys):
    from shapewise import check

    code, out, _ = run(capsys, "check", "llama3-8b", "--gpu", "h100", "--mode", "decode", "--batch", "8", "--json")
    assert code == 0
    printed = json.loads(out)
    printed.pop("warnings")
    result = check(get_model("llama3-8b"), Workload(batch=8, mode="decode"), gpu="h100")
    assert json.loads(json.dumps(result.to_json())) == printed


def test_plan_results_to_json_is_what_plan_json_prints(capsys):
    from shapewise.plan import plan

    code, out, _ = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", str(2**19), "--seq", "1024",
                       "--tokens", "1e9", "--json")
    assert code == 0
    printed = json.loads(out)
    result = plan(get_model("gpt2"), gpus=8, gpu="h100", global_batch_tokens=2**19, seq=1024)
    given = json.loads(json.dumps(result.to_json(train_tokens=10**9)))
    for doc in (printed, given):
        doc.pop("warnings", None), doc.pop("seconds")  # (the time each took)
    assert given == printed and "time_to_train_s" in given["plans"][0]
    with pytest.raises(ShapewiseError, match="^train_tokens: the tokens to train on must be a positive whole number given "
                                             "as an int, got 1500000000000.0$"):
        result.to_json(train_tokens=1.5e12)


def test_verify_says_nothing_to_verify_before_its_suggestions_range(capsys):
    code, _, err = run(capsys, "verify", "gpt2", "--device", "cpu", "--gpu", "h100", "--seq", "1024", "--keep",
                       ",".join(NO_REACH), "--suggestion", "1")
    assert code == 2 and "between 1 and 0" not in err
    assert err.strip() == ("shapewise: error: nothing to verify: the neighbourhood holds no other shape; widen "
                           "--params-tol or --aspect-band, or --keep fewer fields")


def test_verify_says_a_suggestion_past_those_listed_as_suggests_pick_does(capsys):
    code, _, err = run(capsys, "suggest", "gpt2", "--gpu", "h100", "--seq", "1024", "--pick", "99", "--emit",
                       "megatron")
    assert code == 2
    listed = re.fullmatch(r"shapewise: error: --pick 99: there are (\d+) suggestions; give --pick from 1 to \1\n",
                          err).group(1)
    code, _, err = run(capsys, "verify", "gpt2", "--device", "cpu", "--gpu", "h100", "--seq", "1024",
                       "--suggestion", "99")
    assert code == 2
    assert err == f"shapewise: error: --suggestion 99: there are {listed} suggestions; give --suggestion from 1 to {listed}\n"


@pytest.mark.parametrize("kind, more", [("bmm", ("-m", "16", "-n", "16", "-k", "16")),
                                        ("attention", ("--heads", "8", "--head-dim", "64", "--seq", "64"))])
@pytest.mark.parametrize("flag", ["-b", "--batch"])
def test_the_benches_take_batch_as_dash_b_and_dash_dash_batch(capsys, kind, more, flag):
    code, _, err = run(capsys, "bench", kind, flag, "0", *more, "--device", "cpu")
    assert code == 2 and "a GEMM dim must be a positive whole number" in err and err.strip().endswith("got 0"), err


@pytest.mark.parametrize("argv", [("report", "gpt2", "--seq", "1024", "--out", "{tmp}/r.html"), ("results",),
                                  ("results", "--export", "{tmp}/r.csv")])
def test_a_missing_store_given_is_said_as_a_path_to_check(capsys, tmp_path, argv):
    missing = tmp_path / "missing.db"
    code, _, err = run(capsys, *(a.format(tmp=tmp_path) for a in argv), "--db", str(missing))
    assert code == 2 and "give --db PATH" not in err
    assert err.strip() == (f"shapewise: error: no results store at {missing} (--db): check the path; `shapewise bench` "
                           "and `shapewise calibrate` make a store")


def test_the_default_store_missing_is_said_as_before(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPEWISE_DB", str(tmp_path / "default.db"))
    code, _, err = run(capsys, "results")
    assert code == 2 and "measure first (`shapewise bench`), or give --db PATH" in err


@pytest.mark.parametrize("argv, flag", [
    (("check", "gpt2", "--seq", "1024", "--profile", ""), "--profile"),
    (("check", "gpt2", "--seq", "1024", "--config", ""), "--config"),
    (("plan", "--config", " ", "--gpus", "8", "--global-batch", "1048576", "--seq", "1024"), "--config"),
    (("validate", "--profile", "", "--device", "cpu", "--quick"), "--profile"),
    (("verify", "gpt2", "--device", "cpu", "--seq", "32", "--config", ""), "--config"),
])
def test_an_empty_path_is_refused_not_taken_for_none(capsys, argv, flag):
    code, out, err = run(capsys, *argv)
    assert code == 2 and not out
    assert err.startswith(f"shapewise: error: argument {flag}: the path is empty: give a file, or leave the flag out")


def test_calibrate_refuses_an_empty_out_before_measuring(capsys, tmp_path, monkeypatch):
    import shapewise.bench as bench

    monkeypatch.setattr(bench, "_measure_one", lambda *a, **k: pytest.fail("measured"))
    code, _, err = run(capsys, "calibrate", "--device", "cpu", "--gpu", "h100", "--out", "", "--db",
                       str(tmp_path / "r.db"))
    assert code == 2 and err.strip() == "shapewise: error: give a file to write the profile to"
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("given, said", [("0\n", "positive whole number from 1 to 16,777,216 = 2^24, got 0"),
                                         ("nan\n", "finite number from 1 to 16,777,216 = 2^24, got nan"),
                                         (" 1.5\t", "whole number, got 1.5")])
def test_a_value_with_its_newline_is_refused_on_one_line(capsys, given, said):
    code, _, err = run(capsys, "check", "gpt2", "--seq", given)
    assert code == 2 and err.count("\n") == 1 and f"must be a {said} (see `shapewise check --help`)" in err
