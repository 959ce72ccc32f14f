"""What a new user's thirty-first pass found, on the CPU:

- The Python API took its whole numbers two ways: `Workload(seq=2048.0)` was refused ("seq must be a whole number"),
  while `suggest(..., top=3.0)`, `search(..., vocab=32000.0)`, `predict_attention(batch=1.0, ...)` and
  `plan(..., gpus=8.0)` took the float. The stricter way is kept everywhere: a keyword argument that counts (top,
  vocab, batch, seq, gpus, rounds) must be an int (numpy's too), and 3.0 is refused in one line naming the argument,
  as Workload's fields are: a float where a count is meant is most often a quotient nobody rounded.
- `CostParams` built in code took anything: `CostParams(gemm_bandwidth=0)`, a negative or NaN `gemm_ceiling`, a tile
  rate of -1 were accepted and then priced as infinite, negative or NaN times (or divided by zero far from where they
  were given); only a profile file's reader checked its numbers. Each scalar and each rate is now checked where the
  params are built, in one line naming the field; a profile holding such a value (a zero efficiency written before
  the floor) is refused where it is read.
- `validate --quick --device cpu --gpu h100` ended "layers, calibrated: tiny -86.1%, tiny -89.8%, tiny -86.7%":
  its three layer cases (one layer, two variants) were all named "tiny". The variants are named by their heads, as
  the full set's are: "tiny, tiny-a8, tiny-a4".
- An interrupted `bench gemm --json` (and `bench layer`, `bench ops`) warned "interrupted: 2 measured, 0 already in
  the store, 0 failed — interrupted: what was measured is kept in the store": the word twice. Said once now.
- `suggest --json` had no counterpart in the Python API: a `Suggestions` result had no JSON form, and the dict the
  command printed was built in the command line's code. `Suggestions.to_json()` gives it, and `suggest --json` prints
  it (less the warnings): the two agree key for key.
- The same held of `search --json` and a `SearchResult`: `SearchResult.to_json()` gives what the command prints.
- `benchmarks/machine_files.py` read a machine file's factors through profile.py's private `_params_from_json`.
  profile.py has a public reader of a subset of the parameters (`read_params`), checked as a profile's are.

Found consistent: suggest/search/plan/verify's refusals of zero, negative, NaN and text counts; predict_gemm's dims
(whole-valued floats taken on purpose: it is vectorized over numpy arrays, which are often float).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import shapewise
from helpers import interrupt_after, run
from shapewise import CostParams, ShapewiseError, Workload, get_model, search, suggest
from shapewise.cost import predict_attention
from shapewise.draws import validation_cases
from shapewise.plan import plan

ROOT = Path(__file__).resolve().parents[1]


def test_workload_refuses_a_float_count():
    with pytest.raises(ShapewiseError, match="seq must be a whole number, got 2048.0"):
        Workload(seq=2048.0)


@pytest.mark.parametrize("call, name", [
    (lambda: suggest(get_model("gpt2"), Workload(seq=1024), gpu="h100", top=3.0), "top"),
    (lambda: search(params_target=1e9, gpu="h100", workload=Workload(batch=1, seq=1024), vocab=32000.0), "vocab"),
    (lambda: search(params_target=1e9, gpu="h100", workload=Workload(batch=1, seq=1024), top=np.float64(2)), "top"),
    (lambda: predict_attention(batch=1.0, heads=8, kv_heads=8, seq=1024, head_dim=64, gpu="h100"), "batch"),
    (lambda: plan(get_model("gpt2"), gpus=8.0, gpu="h100", global_batch_tokens=2**20, seq=1024), "gpus"),
])
def test_the_apis_counts_refuse_floats_as_workload_does(call, name):
    with pytest.raises(ShapewiseError, match=rf"^{name}: .* must be a (positive )?whole number given as an int, "
                                             rf"got (3|32000|2|1|8)\.0$"):
        call()


def test_the_apis_counts_take_ints_and_numpys():
    w = Workload(seq=1024)
    assert len(suggest(get_model("gpt2"), w, gpu="h100", top=np.int64(1)).alternatives) <= 1
    assert predict_attention(batch=np.int32(1), heads=8, kv_heads=8, seq=1024, head_dim=64, gpu="h100") > 0


@pytest.mark.parametrize("field, value, said", [
    ("gemm_bandwidth", 0, "gemm_bandwidth is 0; it must be over 0"),
    ("gemm_ceiling", -0.5, "gemm_ceiling is -0.5; it must be a finite number, 0 or more"),
    ("gemm_ceiling", math.nan, "gemm_ceiling is nan"),
    ("launch_ms", math.inf, "launch_ms is inf"),
    ("comm_bandwidth", 0.0, "comm_bandwidth is 0.0; it must be over 0"),
    ("flash_block_q", 0, "flash_block_q is 0"),
    ("flash_block_q", 64.5, "flash_block_q must be a whole number, got 64.5"),
    ("launch_ms", "0.005", "launch_ms must be a number"),
    ("k_overhead", True, "k_overhead must be a number"),
    ("tile_rates", (1.0,) * 8 + (-1.0,), "tile_rates holds -1.0; each rate must be a finite number over 0"),
    ("flash_fwd", (0.5, 0.6, math.nan, 0.7), "flash_fwd holds nan"),
    ("bandwidth", (("copy", 0.0),), "bandwidth holds 0.0"),
])
def test_cost_params_are_checked_where_built(field, value, said):
    with pytest.raises(ShapewiseError, match="^CostParams: " + said.replace("(", r"\(").replace(")", r"\)")) as err:
        CostParams(**{field: value})
    assert "\n" not in str(err.value)


def test_cost_params_take_what_may_be_signed_and_the_shipped_profiles():
    assert CostParams(machine_launch_ms=-0.001, gemm_tree_base=-0.2, wave_credit=0.0).machine_launch_ms == -0.001
    for gpu in ("h200", "h100"):
        assert shapewise.cost_model(gpu).params.gemm_ceiling > 0


def test_validate_quick_names_its_layer_cases_apart():
    names = [c.params["model"] for c in validation_cases(quick=True) if c.bench == "layer"]
    assert names == ["tiny", "tiny-a8", "tiny-a4"]


def test_an_interrupted_json_sweep_says_interrupted_once(capsys, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    interrupt_after(monkeypatch, 2)
    code, out, err = run(capsys, "bench", "gemm", "-m", "16", "32", "48", "-n", "16", "-k", "16", "--json",
                         "--db", str(tmp_path / "r.db"), "--device", "cpu", "--warmup-ms", "0", "--budget-ms", "1")
    assert code == 130 and len(json.loads(out)) == 2
    warning = next(line for line in err.splitlines() if "interrupted" in line)
    assert warning.count("interrupted") == 1, warning
    assert "interrupted: 2 measured, 0 already in the store, 0 failed; what was measured is kept in the store" in err


@pytest.mark.parametrize("argv, keywords", [
    (("gpt2", "--seq", "1024"), dict(model="gpt2", workload=Workload(seq=1024))),
    (("llama3-8b", "--mode", "decode", "--batch", "8", "--seq", "4096", "--top", "2", "--vary", "tp"),
     dict(model="llama3-8b", workload=Workload(batch=8, seq=4096, mode="decode"), top=2, vary=("tp",))),
])
def test_suggestions_to_json_is_what_suggest_json_prints(capsys, argv, keywords):
    code, out, _ = run(capsys, "suggest", *argv, "--gpu", "h100", "--json")
    assert code == 0
    printed = json.loads(out)
    printed.pop("warnings", None)
    keywords = dict(keywords)
    result = suggest(get_model(keywords.pop("model")), keywords.pop("workload"), gpu="h100", **keywords)
    assert json.loads(json.dumps(result.to_json())) == printed


def test_search_result_to_json_is_what_search_json_prints(capsys):
    code, out, _ = run(capsys, "search", "--params", "1e9", "--gpu", "h100", "--top", "3", "--json")
    assert code == 0
    printed = json.loads(out)
    result = search(params_target=1e9, gpu="h100", workload=Workload(batch=1, seq=4096), top=3)
    given = json.loads(json.dumps(result.to_json()))
    for doc in (printed, given):
        doc.pop("warnings", None), doc.pop("seconds")  # (the time each took)
    assert given == printed and len(given["top"]) == 3


def test_a_params_subset_is_read_by_a_public_reader():
    from shapewise.profile import read_params

    got = read_params({"machine_gemm": 1.03, "gemm_ceiling": 0.5}, ["machine_gemm", "machine_stream"], where="f.json")
    assert got == {"machine_gemm": 1.03, "machine_stream": 1.03}  # machine_stream left out: machine_gemm's
    with pytest.raises(ShapewiseError, match="f.json: parameter machine_gemm is -1.0"):
        read_params({"machine_gemm": -1.0}, ["machine_gemm"], where="f.json")
    assert read_params({"machine_bmm": 0.98}, "machine_bmm", where="f.json") == {"machine_bmm": 0.98}
    with pytest.raises(ShapewiseError, match="no cost-model parameter is named machine_gpu"):
        read_params({}, ["machine_gpu"], where="f.json")
    assert "_params_from_json" not in (ROOT / "benchmarks" / "machine_files.py").read_text()
