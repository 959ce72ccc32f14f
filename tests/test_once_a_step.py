"""Ops that run once a step (embedding, final norm, output head, its soft-cap, loss, the head's collectives) are
priced once, wherever a step is built from one layer: search's and suggest's layers × layer + the rest, verify's
layers × layer + head, and plan's stages. Gemma 2's logits soft-cap (a pass over b·s × 256,000 logits) was
counted as a layer op there: × 26 layers for Gemma 2 2B, which ranked its fewer, wider layers first (suggest's top
three all cut 26 layers to 20) and put verify's predicted speedups 9-11% over the measured ones."""

import warnings

import pytest

from shapewise import Workload, predict_step
from shapewise.cost import predict_layer_and_outside
from shapewise.hf import load_config
from shapewise.parallel import layer_times
from shapewise.presets import get_model
from shapewise.profile import cost_model

CONFIGS = ["tests/data/hf-tenth/gemma-2-2b.json", "tests/data/hf/gemma-2-9b-it.json"]


def _shapes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [load_config(c) for c in CONFIGS] + [get_model(m) for m in ("llama3-8b", "mixtral-8x7b", "gpt2")]


@pytest.mark.parametrize("shape", _shapes(), ids=lambda s: s.name)
@pytest.mark.parametrize("workload", [Workload(batch=2, seq=2048), Workload(batch=2, seq=2048, tp=2),
                                      Workload(batch=8, seq=4096, mode="decode", tp=2),
                                      Workload(batch=1, seq=3000, mode="prefill")], ids=str)
def test_layers_times_a_layer_and_the_rest_is_checks_step(shape, workload):
    model = cost_model("h200")
    layer, outside = predict_layer_and_outside(shape, workload, gpu=model)
    step = predict_step(shape, workload, gpu=model)
    assert shape.num_layers * layer + sum(c.total_ms for c in outside) == pytest.approx(step.time_ms, rel=1e-9)
    assert {c.op.name for c in outside} >= ({"logits/softcap"} if shape.logit_softcap else set())


@pytest.mark.parametrize("config", CONFIGS)
def test_plans_stages_price_the_soft_cap_once_in_the_head(config):
    """plan's layer_times: the soft-cap in the last stage's head, not in each layer."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shape = load_config(config)
    model = cost_model("h200")
    w = Workload(batch=2, seq=2048)
    times = layer_times(shape, w, gpu=model.gpu, params=model.params)
    capped = layer_times(shape.replace(logit_softcap=False), w, gpu=model.gpu, params=model.params)
    assert times.fwd_ms == pytest.approx(capped.fwd_ms) and times.bwd_ms == pytest.approx(capped.bwd_ms)
    assert times.head_ms > capped.head_ms
