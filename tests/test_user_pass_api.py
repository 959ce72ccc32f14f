"""The Python API as a new user met it: bad input is shapewise's one error, flags are booleans, numpy's
integers are integers, the caveats come with check's result, and a GPU read as its nearest is said."""

import importlib
import re
import warnings

import numpy as np
import pytest

import shapewise
from shapewise import ShapewiseError, ShapewiseWarning, Workload, check, get_model, predict_gemm, predict_step


@pytest.mark.parametrize("m", [float("inf"), 1e30, 2**31, 2**63, 2**70, 0, -1, 3.5, "x", None])
def test_predict_gemm_refuses_what_the_commands_refuse(m):
    with pytest.raises(ShapewiseError, match="whole numbers from 1 to 2,147,483,647"):
        predict_gemm(m, 64, 64)


def test_an_arrays_bad_element_is_named_by_its_position():
    with pytest.raises(ShapewiseError, match="got 0 at 1"):
        predict_gemm(np.array([64, 0, 128]), 64, 64)
    assert predict_gemm(np.int64(64), 64.0, 64).time_ms == predict_gemm(64, 64, 64).time_ms


@pytest.mark.parametrize("flag", ["no", "False", None, 1])
def test_a_flag_is_true_or_false(flag):
    with pytest.raises(ShapewiseError, match="overlap_comm must be True or False"):
        Workload(overlap_comm=flag)
    with pytest.raises(ShapewiseError, match="bias must be True or False"):
        get_model("gpt2").replace(bias=flag)


def test_numpy_integers_and_booleans_are_read_as_pythons():
    w = Workload(batch=np.int64(4), overlap_comm=np.bool_(False))
    assert type(w.batch) is int and w.overlap_comm is False
    assert type(get_model("gpt2").replace(hidden=np.int64(1536)).hidden) is int


def test_a_workload_past_the_token_bound_and_wrong_types_are_refused():
    with pytest.raises(ShapewiseError, match="tokens per step"):
        Workload(batch=2**20, seq=2**20)
    with pytest.raises(ShapewiseError, match="must be a ModelShape"):
        predict_step("gpt2", Workload(), gpu="h200")
    with pytest.raises(ShapewiseError, match="must be a shapewise.Workload"):
        predict_step(get_model("gpt2"), None, gpu="h200")


def test_check_carries_the_caveats_the_commands_print():
    assert check(get_model("gpt2"), Workload(seq=1024), gpu="h200").caveats == ()
    said = check(get_model("gpt2"), Workload(seq=2048), gpu="h200").caveats
    assert len(said) == 1 and "1,024 learned positions" in said[0]


def test_a_gpu_read_as_the_nearest_of_its_family_is_said_once():
    with pytest.warns(ShapewiseWarning, match="nvl variant") as record:  # every one recorded, however often raised
        assert shapewise.get_gpu("NVIDIA H100 NVL").key == "h100"
        assert shapewise.get_gpu("NVIDIA H100 NVL").key == "h100"
    assert len(record) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShapewiseWarning)
        assert shapewise.get_gpu("NVIDIA H100 80GB HBM3").key == "h100"  # what torch names an H100 SXM


@pytest.mark.parametrize("kw, said", [
    (dict(top=2.5), "must be a whole number"), (dict(top=-1), "from 1 to 10,000"),
    (dict(params_tol=float("nan")), "finite"), (dict(params_tol=5), "at most 0.5"),
    (dict(aspect_band=float("nan")), "finite"), (dict(keep="hedas"), "unknown field hedas;"),
])
def test_suggest_checks_its_arguments_as_the_command_does(kw, said):
    from shapewise.search import suggest

    with pytest.raises(ShapewiseError, match=said):
        suggest(get_model("gpt2"), Workload(seq=1024), gpu="h200", **kw)


def test_suggest_reads_one_kept_field_as_a_name():
    from shapewise.search import suggest

    kept = suggest(get_model("gpt2"), Workload(seq=1024), gpu="h200", keep="heads")
    assert all("heads" not in s.changes for s in (*kept.suggestions, *kept.alternatives))


@pytest.mark.parametrize("change, said", [
    (dict(name=None), "name must be text"), (dict(published_params=-1), "published_params must be positive"),
    (dict(expert_ffn=100), "expert_ffn need num_experts"), (dict(window=10**9), "window"),
])
def test_a_model_field_no_model_has_is_refused(change, said):
    with pytest.raises(ShapewiseError, match=said):
        get_model("llama3-8b").replace(**change)


def test_spec_only_and_a_profile_conflict_and_times_are_python_floats():
    with pytest.raises(ShapewiseError, match="give one of them"):
        check(get_model("gpt2"), Workload(seq=1024), gpu="h200", spec_only=True, profile="missing.json")
    assert type(predict_step(get_model("gpt2"), Workload(seq=1024), gpu="h200").time_ms) is float


def test_a_gpus_datasheet_numbers_cannot_be_changed_in_place():
    gpu = shapewise.get_gpu("h200")
    before = predict_gemm(4096, 4096, 4096, gpu="h200").time_ms
    with pytest.raises(TypeError, match="read-only"):
        gpu.tflops["bf16"] = 1.0  # the table's GPU is every call's: this would reprice them all
    with pytest.raises(TypeError, match="read-only"):
        gpu.sources.clear()
    assert predict_gemm(4096, 4096, 4096, gpu="h200").time_ms == before
    assert {gpu: 1}[shapewise.get_gpu("h200")] == 1  # a frozen value is hashable


@pytest.mark.parametrize("gbs", [0, -100, float("nan"), float("inf"), "fast", None])
def test_a_link_rate_is_a_positive_number(gbs):
    if gbs is None:  # None: the GPU's datasheet link
        assert predict_step(get_model("gpt2"), Workload(tp=2), gpu="h200", link_gbs=gbs).time_ms > 0
        return
    with pytest.raises(ShapewiseError, match="link_gbs: the rate must be"):
        predict_step(get_model("gpt2"), Workload(tp=2), gpu="h200", link_gbs=gbs)


@pytest.mark.parametrize("kwargs, said", [
    (dict(params_target="1e9x"), "params_target: the parameter budget must be a number"),
    (dict(params_target=float("nan")), "the parameter budget must be a finite number"),
    (dict(vocab=32000.5), "vocab: the vocab size must be a whole number"),
    (dict(params_tol=0.9), "params_tol: the parameter tolerance must be a number above 0"),
    (dict(top=0), "top: how many to show must be a positive whole number"),
    (dict(aspect=(32.0,)), "aspect must be two numbers"),
    (dict(aspect=(-1, 32)), "aspect: hidden/layers must be a number above 0"),
    (dict(aspect=(float("nan"), 32)), "aspect: hidden/layers must be a finite number"),
    (dict(aspect=(256, 32)), "the lowest hidden/layers comes first, got 256 > 32"),
    (dict(workload=None), "the workload must be a shapewise.Workload, got None"),
    (dict(mlp="relu2"), "unknown MLP kind 'relu2'; use one of gelu, relu, swiglu, geglu"),
])
def test_search_checks_its_arguments_as_the_command_checks_its_flags(kwargs, said):
    args = dict(params_target=1e9, gpu="h200", workload=Workload(batch=1, seq=4096)) | kwargs
    with pytest.raises(ShapewiseError) as err:
        shapewise.search(**args)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_arrays_that_do_not_broadcast_are_said_in_one_line():
    with pytest.raises(ShapewiseError, match=r"do not broadcast together \(m \(3,\), k \(2,\)\)"):
        predict_gemm(np.array([64, 128, 256]), 64, np.array([64, 128]))
    with pytest.raises(ShapewiseError, match=r"\(n \(2,\), layout \(3,\)\)"):
        predict_gemm(64, np.array([64, 128]), 64, layout=np.array(["nn", "nt", "tn"]))
    with pytest.raises(ShapewiseError, match="unknown dtype"):
        predict_gemm(64, 64, 64, dtype=["bf16"])
    assert predict_gemm(np.array([64, 128]), 64, np.array([[64], [128]])).time_ms.shape == (2, 2)


@pytest.mark.parametrize("kwargs, said", [
    (dict(rounds=0), "rounds: the rounds must be a positive whole number"),
    (dict(rounds=2.5), "rounds: the rounds must be a whole number"),
    (dict(budget_ms=float("nan")), "budget_ms: the timing budget in ms must be a finite number"),
    (dict(warmup_ms=-1), "warmup_ms: the warm-up time in ms must be a number"),
    (dict(mode="whole"), "unknown verify mode 'whole'"),
    (dict(candidates=[]), "nothing to verify"),
    (dict(candidates=[get_model("gpt2")]), "a candidate must be a (label, ModelShape, Workload) triple"),
    (dict(original=get_model("gpt2")), "the original must be a (ModelShape, Workload) pair"),
])
def test_verify_checks_its_arguments_before_building_anything(kwargs, said, monkeypatch):
    import importlib

    def build(*args, **kwargs):
        raise AssertionError("the arguments are checked before any shape is built")
    monkeypatch.setattr(importlib.import_module("shapewise.verify"), "_part_names", build)  # the module, not the function
    gpt2, workload = get_model("gpt2"), Workload(batch=1, seq=64)
    args = dict(original=(gpt2, workload), candidates=[("same", gpt2, workload)], gpu="h200", device="cpu") | kwargs
    with pytest.raises(ShapewiseError) as err:
        shapewise.verify(**args)
    assert said in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("workload, said", [
    (Workload(batch=1, seq=64, tp=2), "without tensor parallelism: give tp 1 (got tp 2)"),
    (Workload(batch=1, seq=64, mode="prefill"), "verify measures training steps, not prefill"),
])
def test_verify_checks_every_shapes_workload_before_asking_for_torch(workload, said, monkeypatch):
    def no_torch():
        raise AssertionError("the workloads are checked before torch or the device is asked for")
    monkeypatch.setattr(importlib.import_module("shapewise.measure"), "import_torch", no_torch)
    gpt2 = get_model("gpt2")
    with pytest.raises(ShapewiseError, match=re.escape(said)):
        shapewise.verify((gpt2, Workload(batch=1, seq=64)), [("other", gpt2, workload)], gpu="h200", device="cpu")


@pytest.mark.parametrize("make, said", [
    (lambda: Workload(dtype=["bf16"]), "unknown dtype ['bf16']"),
    (lambda: Workload(mode={"train"}), "unknown mode {'train'}"),
    (lambda: get_model("gpt2").replace(mlp=["gelu"]), "unknown MLP kind ['gelu']"),
    (lambda: get_model("gpt2").replace(norm={"kind": "rmsnorm"}), "unknown norm {'kind': 'rmsnorm'}"),
    (lambda: shapewise.search(params_target=1e9, gpu="h200", workload=Workload(), mlp=["gelu"]), "unknown MLP kind"),
])
def test_a_choice_that_is_not_text_is_refused_as_unknown(make, said):
    with pytest.raises(ShapewiseError, match=re.escape(said)):
        make()


@pytest.mark.parametrize("call, name", [
    (lambda v: shapewise.cost_model("h200", spec_only=v), "spec_only"),
    (lambda v: check(get_model("gpt2"), Workload(), gpu="h200", spec_only=v), "spec_only"),
    (lambda v: shapewise.load_config("tests/data/hf-sixth/minicpmv.json", strict=v), "strict"),
    (lambda v: shapewise.suggest(get_model("gpt2"), Workload(), gpu="h200", require_fit=v), "require_fit"),
])
@pytest.mark.parametrize("value", ["no", 0, None])
def test_a_functions_switch_is_true_or_false(call, name, value):
    """spec_only="no" was read as yes: the spec model, said nowhere but in the result's source."""
    with pytest.raises(ShapewiseError, match=f"{name} must be True or False, got {re.escape(repr(value))}"):
        call(value)
    assert shapewise.cost_model("h200", spec_only=np.bool_(True)).source == "spec-only"


def test_half_precision_dims_are_read_without_numpys_overflow_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's RuntimeWarning from comparing float16 with 2^31-1
        got = predict_gemm(np.array([4096, 64], dtype=np.float16), 64, 64).time_ms
    assert got.tolist() == [predict_gemm(4096, 64, 64).time_ms, predict_gemm(64, 64, 64).time_ms]
    with pytest.raises(ShapewiseError, match="got 0.5 at 1"):
        predict_gemm(np.array([64, 0.5], dtype=np.float16), 64, 64)


@pytest.mark.parametrize("kwargs, said", [(dict(keep=None), "keep: give field names"),
                                          (dict(vary=3), "vary: give field names")])
def test_suggest_takes_field_names_or_says_what_it_wants(kwargs, said):
    with pytest.raises(ShapewiseError, match=said):
        shapewise.suggest(get_model("gpt2"), Workload(), gpu="h200", **kwargs)
    assert shapewise.suggest(get_model("gpt2"), Workload(), gpu="h200", keep=["vocab"], top=1).original


def test_the_api_reads_a_model_argument_as_the_commands_do():
    from pathlib import Path

    assert shapewise.resolve_model("gpt2") == shapewise.get_model("gpt2")
    config = Path(__file__).parent / "data" / "hf" / "phi-2.json"
    assert shapewise.resolve_model(str(config)).rotary_fraction == 0.4
    with pytest.raises(shapewise.ShapewiseError, match="give a model name"):
        shapewise.resolve_model("")


@pytest.mark.parametrize("device", [3, "", ["cuda"]])
def test_cost_model_refuses_a_device_that_names_none(device):
    with pytest.raises(ShapewiseError, match="device must name where a run measures"):
        shapewise.cost_model("h200", device=device)
