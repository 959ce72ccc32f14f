"""What a new user's twenty-first pass over the Python API found: its errors named the command's flags (`suggest(...,
top=0)` said "--top: ..."), and a number given as text was read by search, suggest and predict_step where Workload and
predict_gemm refuse it; search's attention kind was named --attention-kind. cost_model(profile=3) fell through to a
TypeError and profile="" read the working folder. verify took an unknown GPU, measured every shape, and only then
refused it; a seed of None or 1.5 failed inside torch, and an on_round that is no function after the first round.
resolve_model refused a pathlib.Path (what load_config takes) and a ModelShape (printing the whole of it)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import shapewise
from shapewise import ShapewiseError, Workload, get_model

GPT2 = get_model("gpt2")


@pytest.mark.parametrize("call, said", [
    (lambda: shapewise.suggest(GPT2, Workload(seq=1024), gpu="h200", top=0),
     "top: how many to show must be a positive whole number from 1 to 10,000, got 0"),
    (lambda: shapewise.suggest(GPT2, Workload(seq=1024), gpu="h200", aspect_band=0.5),
     "aspect_band: the aspect band must be a number from 1 to 100"),
    (lambda: shapewise.search(params_target=1e9, gpu="h200", workload=Workload(), vocab=1),
     "vocab: the vocab size must be a whole number from 2"),
    (lambda: shapewise.search(params_target=-1, gpu="h200", workload=Workload()),
     "params_target: the parameter budget must be a number above 0"),
    (lambda: shapewise.search(params_target=1e9, gpu="h200", workload=Workload(), attention="GQA"),
     "attention: unknown attention kind 'GQA'; use one of mha, gqa, mqa"),
    (lambda: shapewise.suggest(GPT2, Workload(seq=1024), gpu="h200", keep="hedas"),
     "keep: unknown field hedas; the fields are"),
    (lambda: shapewise.suggest(GPT2, Workload(seq=1024), gpu="h200", vary=[["batch"]]),
     "vary: give field names"),  # a TypeError (unhashable list) before
])
def test_the_apis_errors_name_the_argument_as_a_python_caller_wrote_it(call, said):
    """suggest(..., top=0) said "--top: ..." and search's attention="GQA" "--attention-kind must be ...": flags
    a Python caller never typed. Each names the keyword argument, without the flag."""
    with pytest.raises(ShapewiseError) as err:
        call()
    assert said in str(err.value) and "--" not in str(err.value), str(err.value)


def test_the_command_still_names_its_flags(capsys):
    from helpers import run

    code, out, err = run(capsys, "suggest", "gpt2", "--keep", "hedas")
    assert code == 2 and "--keep: unknown field hedas;" in err, err
    code, out, err = run(capsys, "search", "--params", "1e9", "--vocab", "1")
    assert code == 2 and "--vocab: the vocab size must be" in err, err


@pytest.mark.parametrize("call, name", [
    (lambda: shapewise.search(params_target="1e9", gpu="h200", workload=Workload()), "params_target"),
    (lambda: shapewise.search(params_target=1e9, gpu="h200", workload=Workload(), vocab="32000"), "vocab"),
    (lambda: shapewise.suggest(GPT2, Workload(seq=1024), gpu="h200", params_tol="0.1"), "params_tol"),
    (lambda: shapewise.suggest(GPT2, Workload(seq=1024), gpu="h200", top="3"), "top"),
    (lambda: shapewise.predict_step(GPT2, Workload(tp=2), gpu="h200", link_gbs="100"), "link_gbs"),
])
def test_a_number_given_as_text_is_refused_as_workload_and_predict_gemm_refuse_it(call, name):
    """search(params_target="1e9") designed a model where predict_gemm("64", ...) and Workload(batch="4") refuse
    text: the one API read a number's text or not by the function. Text is the command line's, read by its flags."""
    with pytest.raises(ShapewiseError, match=rf"^{name}: .* must be .*, not text, got '"):
        call()


def test_a_link_rate_is_checked_where_no_collective_travels_it():
    """predict_step(gpt2, Workload(), link_gbs="fast") priced a one-GPU step and said nothing of the rate."""
    with pytest.raises(ShapewiseError, match="link_gbs: the rate must be"):
        shapewise.predict_step(GPT2, Workload(seq=1024), gpu="h200", link_gbs="fast")
    with pytest.raises(ShapewiseError, match="link_gbs: the rate must be a number above 0"):
        shapewise.predict_step(GPT2, Workload(seq=1024), gpu="h200", link_gbs=0)


@pytest.mark.parametrize("profile", [3, "", ["h200.json"]])
def test_cost_model_refuses_a_profile_that_is_no_profile_or_path(profile):
    """cost_model("h200", profile=3) raised TypeError from os.fspath; profile="" read the working folder as a
    profile ("cannot read profile : Is a directory")."""
    with pytest.raises(ShapewiseError, match="profile must be a Profile or the path of a profile's JSON file, got"):
        shapewise.cost_model("h200", profile=profile)
    with pytest.raises(ShapewiseError, match="profile must be a Profile"):
        shapewise.check(GPT2, Workload(seq=1024), gpu="h200", profile=profile)


def _verify(**kwargs):
    shape = get_model("gpt2").replace(num_layers=1, hidden=64, num_heads=2, vocab=128)
    workload = Workload(batch=1, seq=32)
    args = dict(gpu="h200", device="cpu", rounds=3, budget_ms=1, warmup_ms=0) | kwargs
    return shapewise.verify((shape, workload), [("deeper", shape.replace(num_layers=2), workload)], **args)


@pytest.mark.parametrize("kwargs, said", [
    (dict(gpu="h2000"), "unknown GPU 'h2000'"),  # refused once every shape had been measured
    (dict(seed=None), "seed: the seed must be a whole number"),  # a TypeError inside the layer's builder
    (dict(seed=1.5), "seed: the seed must be a whole number"),  # torch's RuntimeError
    (dict(seed="x"), "seed: the seed must be a whole number, not text, got 'x'"),
    (dict(on_round=3), "on_round must be a function of the rounds done, or None, got 3"),  # after a round
])
def test_verify_checks_its_gpu_seed_and_callback_before_anything_is_built(kwargs, said, monkeypatch):
    def no_torch():
        raise AssertionError("the arguments are checked before torch or the device is asked for")
    monkeypatch.setattr(importlib.import_module("shapewise.measure"), "import_torch", no_torch)
    with pytest.raises(ShapewiseError, match=re.escape(said)):
        _verify(**kwargs)


def test_verify_takes_its_default_seed_and_a_numpy_one():
    pytest.importorskip("torch")
    import numpy as np

    assert _verify(seed=np.int64(0))[0].label == "deeper"


def test_resolve_model_takes_a_path_object_and_a_shape():
    """resolve_model(Path("phi-2.json")) said "give a model name, got PosixPath(...)": load_config takes the same
    Path. And resolve_model(a ModelShape) printed the whole shape in its refusal; it is the model already."""
    config = Path(__file__).parent / "data" / "hf" / "phi-2.json"
    assert shapewise.resolve_model(config) == shapewise.resolve_model(str(config)) == shapewise.load_config(config)
    assert shapewise.resolve_model(GPT2) is GPT2
    with pytest.raises(ShapewiseError, match="give a model name, got None"):
        shapewise.resolve_model(None)


def test_suggest_and_search_carry_the_caveats_their_commands_say():
    """`shapewise suggest gpt2` warns that its sequence of 2,048 is past GPT-2's 1,024 learned positions, and `search
    --gpu v100` that a V100 runs neither FlashAttention nor cuDNN's attention; suggest() and search() ranked the same
    shapes and said nothing, where check() carries its caveats. Their results carry them as check's does."""
    said = shapewise.suggest(GPT2, Workload(), gpu="h200", top=1).caveats
    assert said == shapewise.check(GPT2, Workload(), gpu="h200").caveats and "1,024 learned positions" in said[0]
    assert shapewise.suggest(GPT2, Workload(seq=1024), gpu="h200", top=1).caveats == ()
    v100 = shapewise.search(params_target=1e9, gpu="v100", workload=Workload(dtype="fp16"), top=1).caveats
    assert len(v100) == 1 and "FlashAttention and cuDNN's attention need Ampere" in v100[0], v100
    assert shapewise.search(params_target=1e9, gpu="h200", workload=Workload(), top=1).caveats == ()


@pytest.mark.parametrize("make, said", [
    (lambda: GPT2.replace(heads=16), "a ModelShape has no field 'heads'; did you mean num_heads?"),
    (lambda: GPT2.replace(layers=24), "a ModelShape has no field 'layers'; did you mean num_layers?"),
    (lambda: GPT2.replace(hiden=1024), "a ModelShape has no field 'hiden'; did you mean hidden?"),
    (lambda: Workload().replace(bacth=8), "a Workload has no field 'bacth'; did you mean batch?"),
])
def test_replace_names_a_field_it_does_not_have_and_the_one_meant(make, said):
    """A suggestion's changes and suggest's keep= name the heads and layers "heads" and "layers"; the shape's fields
    are num_heads and num_layers, and shape.replace(heads=16) raised dataclasses' TypeError from its __init__."""
    with pytest.raises(ShapewiseError, match=re.escape(said)):
        make()


def test_numpys_text_is_held_as_text_and_a_gpu_is_itself():
    """Left by the pass, mended after it: Workload(dtype=np.str_("fp16")) kept numpy's str_ (np.str_ is a str, but
    json and sqlite write it as the type it is not); get_gpu(a GPU) said "GPU name must be text", where every
    function taking gpu= takes one."""
    import numpy as np

    from shapewise import GPU, get_gpu

    w = Workload(dtype=np.str_("fp16"), mode=np.str_("decode"))
    assert type(w.dtype) is str and type(w.mode) is str and w == Workload(dtype="fp16", mode="decode")
    h100 = get_gpu("h100")
    assert isinstance(h100, GPU) and get_gpu(h100) is h100
