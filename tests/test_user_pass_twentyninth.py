"""What a new user's twenty-ninth pass found, on the CPU, through the Python API as a notebook uses it: suggest() listed
ten suggestions where `shapewise suggest` lists five (GPT-3 2.7B: the API's list went on past the command's) and its
docstring said neither; its default is now the flag's, and the docstring names the defaults. The commands price a GPU
with another GPU's profile under --borrow-profile, but cost_model() and check() had no way to: a profile of the H200
given for an H100 was refused with "run `shapewise calibrate` on the h100", where the command offers to borrow; both
take borrow_profile=True now, refuse without it in the command's words ("pass borrow_profile=True"), and price as
`check --borrow-profile` does. verify() given its candidates as a generator checked them, used them up, measured
nothing and returned [] without a word; plan(shapes=...) given a generator planned the original alone: both read it
once now. search(aspect=np.array([32, 256])) was refused as not "two numbers". A CheckResult's repr ran to 20,000
characters (every op of the step, every field of the shape twice over), a StepCost's to 19,600, a SearchResult's to
15,500, a ModelShape's to 780 (its some forty fields, mostly at their defaults): each now says what a reader looks
for in a few lines (the ops' count, the shapes' names, the suggestions' changes), and a ModelShape's lists the fields
it sets, still code that builds it again. An op's time and losses and a candidate's ms per token were numpy scalars
(np.float64(0.0404) in every repr): they are Python floats. CostModel("h200", {"gemm_ceiling": 0.5}) was made, then
failed at the first op priced with AttributeError: 'dict' object has no attribute 'bandwidth'; it is refused where it
is made, in one ShapewiseError naming params and how to change a few of them.

Found consistent: check() and `check --json` (the same document, to_json) for a dense training step, an MoE at tp 2, an
fp8 KV cache in decode, an fp8 prefill and collectives overlapped at tp 2; search() and `search --json` (the same
shapes and speeds); suggest() and `suggest --json` at the same settings; every check result's to_json dumps as strict
JSON (no NaN) for dense, MoE, decode, fp8 and tp > 1; numpy integers and floats, bools where numbers belong, text
where numbers belong, Path and str for profiles, lists and tuples for keep and vary: accepted or refused in one
ShapewiseError naming the argument; the GPU's and the profiles' caches keyed by the file's version."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest

import shapewise
from helpers import run
from shapewise import ModelShape, ShapewiseError, Workload, check, cost_model, get_model, search, suggest, verify
from shapewise.plan import plan

H200_PROFILE = Path(shapewise.__file__).parent / "data" / "profiles" / "h200.json"


def test_suggest_lists_as_many_as_the_command_by_default(capsys):
    assert inspect.signature(suggest).parameters["top"].default == 5
    code, out, _ = run(capsys, "suggest", "gpt3-2.7b", "--json")
    assert code == 0
    cli = json.loads(out)
    api = suggest(get_model("gpt3-2.7b"), Workload(), gpu="h200")
    assert len(api.suggestions) == len(cli["suggestions"]) == 5
    assert [s.speedup for s in api.suggestions] == [row["predicted_speedup"] for row in cli["suggestions"]]


def test_another_gpus_profile_is_borrowed_from_python_as_on_the_command_line(capsys):
    with pytest.raises(ShapewiseError, match="pass borrow_profile=True to price h100 with it"):
        cost_model("h100", profile=H200_PROFILE)
    lent = cost_model("h100", profile=H200_PROFILE, borrow_profile=True)
    assert lent.gpu.key == "h100" and "borrowed for h100" in lent.source
    result = check(get_model("gpt2"), Workload(seq=1024), gpu="h100", profile=str(H200_PROFILE), borrow_profile=True)
    code, out, _ = run(capsys, "check", "gpt2", "--seq", "1024", "--gpu", "h100", "--profile", str(H200_PROFILE),
                       "--borrow-profile", "--json")
    assert code == 0 and json.loads(out)["totals"]["step_ms"] == result.step.time_ms
    assert cost_model("h100", profile=cost_model("h100").profile).source == cost_model("h100").source  # lent already
    with pytest.raises(ShapewiseError, match="borrow_profile lends the given profile.*give profile too"):
        cost_model("h100", borrow_profile=True)
    with pytest.raises(ShapewiseError, match="borrow_profile must be True or False"):
        cost_model("h100", profile=H200_PROFILE, borrow_profile="yes")


TINY = ModelShape("tiny", hidden=64, num_layers=1, num_heads=2, vocab=256)


def test_verify_measures_candidates_given_as_a_generator():
    w = Workload(batch=1, seq=32)
    given = (label_shape for label_shape in [("4 heads", TINY.replace(num_heads=4), w)])
    with pytest.warns(shapewise.ShapewiseWarning, match="measured on the CPU"):
        results = verify((TINY, w), given, gpu="h200", device="cpu", rounds=1, budget_ms=1, warmup_ms=1)
    assert [r.label for r in results] == ["4 heads"]
    with pytest.raises(ShapewiseError, match="candidates must be a list of"):
        verify((TINY, w), 3, gpu="h200", device="cpu")


def test_plan_plans_shapes_given_as_a_generator():
    llama = get_model("llama3-8b")
    others = [llama.replace(num_heads=16, name="16 heads")]
    kw = dict(gpus=8, gpu="h100", global_batch_tokens=2**20, seq=4096, top=1000)
    listed = {p.shape.name for p in plan(llama, shapes=others, **kw).plans}
    generated = {p.shape.name for p in plan(llama, shapes=(s for s in others), **kw).plans}
    assert listed == generated == {"llama3-8b", "16 heads"}
    with pytest.raises(ShapewiseError, match="shapes must be a tuple of ModelShapes"):
        plan(llama, shapes=llama, **kw)


@pytest.mark.parametrize("aspect", [np.array([32, 256]), [32, 256], (32.0, 256.0)])
def test_searchs_aspect_is_any_two_numbers(aspect):
    w = Workload(batch=1, seq=4096)
    assert search(params_target=1e9, gpu="h200", workload=w, aspect=aspect).predicted == \
        search(params_target=1e9, gpu="h200", workload=w).predicted


@pytest.mark.parametrize("aspect", [[32], np.array([[32, 256]]), 32, "ab", None])
def test_searchs_aspect_of_other_than_two_numbers_is_refused(aspect):
    with pytest.raises(ShapewiseError, match="aspect must be two numbers"):
        search(params_target=1e9, gpu="h200", workload=Workload(batch=1, seq=4096), aspect=aspect)


def test_results_read_in_a_few_lines():
    llama = get_model("llama3-8b")
    result = check(llama, Workload(), gpu="h200")
    assert len(repr(result)) < 600 and "costs=<36 ops>" in repr(result) and "findings=['memory']" in repr(result)
    assert len(repr(result.step)) < 400
    shape_text = repr(llama)
    assert "qk_norm" not in shape_text and "num_kv_heads=8" in shape_text and "mlp='swiglu'" in shape_text
    assert eval(shape_text, {"ModelShape": ModelShape}) == llama  # still code that builds it
    found = search(params_target=1e9, gpu="h200", workload=Workload(batch=1, seq=4096))
    assert len(repr(found)) < 1200 and repr(found.top[0].shape.name) in repr(found)
    suggested = suggest(get_model("gpt3-2.7b"), Workload(), gpu="h200")
    assert len(repr(suggested)) < 1200 and "'vocab 50257→50304'" in repr(suggested)


def test_prices_are_pythons_floats():
    step = check(get_model("gpt2"), Workload(seq=1024), gpu="h200").step
    assert all(type(c.time_ms) is float for c in step.costs)
    assert all(type(v) is float for c in step.costs for v in c.losses.values())
    assert "np.float64" not in repr(step.costs[0])
    found = search(params_target=1e9, gpu="h200", workload=Workload(batch=1, seq=4096))
    assert type(found.top[0].gpu_ms_per_token) is float and type(found.top[0].step_ms) is float


def test_a_cost_model_of_other_than_cost_params_is_refused_where_it_is_made():
    with pytest.raises(ShapewiseError, match="params must be a shapewise.CostParams"):
        shapewise.CostModel("h200", {"gemm_ceiling": 0.5})
    made = shapewise.CostModel("h200", shapewise.CostParams())
    assert made.source == "given parameters" and check(get_model("gpt2"), Workload(seq=1024), gpu=made).step.time_ms > 0
