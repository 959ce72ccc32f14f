"""NoPE layers (ModelShape.nope_every): every n-th layer runs without rotary embeddings (SmolLM3, Llama 4).
Only the rotary op changes: it runs on the other layers; the step's matrix work and the parameters do not."""

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from shapewise import ModelShape, Workload, model_ops
from shapewise.shapes import shape_record

SMOLLM3 = Path(__file__).parent / "data" / "hf-fourth" / "smollm3-3b.json"

SMOL = ModelShape("smol-like", hidden=2048, num_layers=36, num_heads=16, num_kv_heads=4, vocab=128256, ffn=11008,
                  mlp="swiglu", norm="rmsnorm", bias=False, nope_every=4)


@settings(max_examples=100, deadline=None)
@given(layers=st.integers(1, 64), every=st.integers(0, 70), mode=st.sampled_from(["train", "prefill", "decode"]))
def test_rotary_runs_on_all_but_every_nth_layer_and_nothing_else_changes(layers, every, mode):
    shape, w = SMOL.replace(num_layers=layers, nope_every=every), Workload(batch=1, seq=256, mode=mode)
    rope = layers - (layers // every if every else 0)
    ops, plain = model_ops(shape, w), model_ops(shape.replace(nope_every=0), w)
    assert [op.count for op in ops if op.name == "attn/rope"] == [rope] * (2 if mode == "train" else 1) * (rope > 0)
    assert [op for op in ops if op.name != "attn/rope"] == [op for op in plain if op.name != "attn/rope"]
    assert shape.params == SMOL.replace(num_layers=layers).params
    assert shape.layers_alike == (rope in (0, layers))


def test_without_rotary_embeddings_there_is_nothing_to_leave_out():
    alibi = SMOL.replace(rotary_fraction=0.0)
    assert alibi.num_rope_layers == 0 and "attn/rope" not in {op.name for op in model_ops(alibi, Workload())}
    assert SMOL.replace(nope_every=1).num_rope_layers == 0 and SMOL.replace(nope_every=1).one_layer().nope_every == 1


def test_a_store_record_leaves_nope_every_out_at_its_default():
    assert "nope_every" not in shape_record(SMOL.replace(nope_every=0))  # records keyed before it existed match
    assert shape_record(SMOL)["nope_every"] == 4 and ModelShape(**shape_record(SMOL)) == SMOL
    assert shape_record(SMOL.one_layer()) == shape_record(SMOL.replace(nope_every=0).one_layer())  # one rotary block


def test_check_says_how_many_layers_rotate(capsys):
    from helpers import run

    code, out, _ = run(capsys, "check", "--config", str(SMOLLM3), "--seq", "1024")
    assert code == 0 and "RoPE on 27 of 36 layers" in out.splitlines()[0]
