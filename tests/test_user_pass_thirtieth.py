"""What a new user's thirtieth pass found, on the CPU, in the measuring commands:

- `bench ops` of a latent-attention model (DeepSeek-V2's MLA: queries and keys of 192 dims, values of 128) priced
  its fused attention with values of their own width but measured it with values as wide as the keys: the op
  measured did a third more work than the op priced, and said nothing. An op now carries its values' head dim where
  it differs (Op.v_dim, kept in the op case's parameters only there: every other op's key stays as it was), and the
  bench builds values and their gradient of that width.
- A wide spread (IQR over 10% of the median) was blamed on "too short a --budget-ms" even where every wide case had
  run the most repetitions a case runs (1,000): a longer budget adds none there, and --budget-ms's help named the
  floor (10) but not that ceiling. The warning now says a longer budget does not help where none of the wide cases
  was cut short by it, and the help names both bounds.
- `bench layer --json` gave the rows without the predictions its table shows (the layer's predicted ms, per pass),
  where `bench gemm --json` and `bench ops --json` give each row its predicted_ms: each row now carries it, the
  layer's and each op's, as the cost model prices that one call.
- `results --bench attention --export rows.csv` on a store holding no attention rows warned, then wrote a CSV header
  alone over rows.csv (an earlier export of that name lost), exit 0; `--import` refuses such a file. An export of no
  rows (of the bench asked for, or of an empty store) is now refused in one line and writes nothing.
- `bench ops --json` gave each op's time for one call but not how many calls a step makes, nor which op a row was
  (mlp/up and mlp/gate of one shape are one case): the step its table sums ("step, measured op by op") could not be
  summed from it. Each row now carries its case's label (as bench layer's rows do), and bench ops' its op's count.

Found consistent: bench gemm/bmm/attention/ops/layer's refusals of zero, negative, NaN and huge dims, budgets and
warm-ups, unknown devices and GPUs, fp8 outside the nt layout and in a model's layer or ops, CUDA-only backends and
--kernels on the CPU, kv heads that do not divide the heads, and a sweep none of whose cases fits (each one line, exit
2); a case too big for the device recorded with its reason beside measured ones, and in --json; CPU times beside a
GPU's predictions said once, in bench, validate --quick and verify; calibrate --quick --device cpu fitting nothing
without --gpu, installing nothing with it, and refusing --out where nothing is fitted; an interrupted bench layer and
bench ops --json (what was measured kept, the layer's ops not measured counted, exit 130); results' export, import
(CSV and JSON, a bench --json output too) and --check of a store with failed rows; bench comm under torchrun on gloo.
"""

from __future__ import annotations

import json

import pytest

from helpers import read_config, run
from shapewise.cases import op_case, op_from_case
from shapewise.ops import FLASH, model_ops
from shapewise.shapes import ModelShape, Workload

torch = pytest.importorskip("torch")

MEASURE = ["--device", "cpu", "--warmup-ms", "0.2", "--budget-ms", "0.5"]


def _mla(tmp_path):
    path = tmp_path / "mla.json"
    path.write_text(json.dumps({
        "model_type": "deepseek_v2", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 4, "num_hidden_layers": 1, "vocab_size": 256, "max_position_embeddings": 128,
        "kv_lora_rank": 32, "q_lora_rank": None, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 16,
        "n_routed_experts": None}))
    return path


def test_latent_attention_is_measured_with_its_values_width(tmp_path, monkeypatch):
    import shapewise.bench as bench

    shape, _ = read_config(_mla(tmp_path))
    flash = [op for op in model_ops(shape, Workload(batch=1, seq=16)) if op.kind == FLASH]
    assert flash and all(op.k == 48 and op.v_dim == 16 for op in flash)
    case = op_case(flash[0], "bf16")
    assert case.params["v_dim"] == 16 and op_from_case(case.params, flops=case.flops, nbytes=case.bytes) == \
        flash[0].__class__(**{**flash[0].__dict__, "count": 1})
    seen = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, **kwargs):
        seen.append((q.shape[-1], k.shape[-1], v.shape[-1]))
        return real(q, k, v, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    fn, context = bench.build(case, "cpu")
    with context:
        out = fn()
    assert seen[-1] == (48, 48, 16) and out.shape[-1] == 16
    bwd = op_case(flash[1], "bf16")
    fn, context = bench.build(bwd, "cpu")
    with context:
        fn()
    assert seen[-1] == (48, 48, 16)


def test_an_op_of_equal_head_dims_keeps_its_key():
    shape = ModelShape("tiny", 64, 1, 4, 256, num_kv_heads=2, ffn=128, mlp="swiglu", norm="rmsnorm", bias=False)
    flash = next(op for op in model_ops(shape, Workload(batch=1, seq=16)) if op.kind == FLASH)
    assert flash.v_dim == 0 and "v_dim" not in op_case(flash, "bf16").params


def _wide_row(num_reps):
    return {"error": None, "median_ms": 1.0, "iqr_ms": 0.5, "num_reps": num_reps}


def test_a_wide_spread_at_the_most_repetitions_is_not_blamed_on_the_budget(recwarn):
    from shapewise.bench import MAX_REPS
    from shapewise.cli.bench import _warn_wide

    _warn_wide([_wide_row(MAX_REPS), _wide_row(MAX_REPS), _wide_row(None) | {"iqr_ms": 0.01}])
    text = str(recwarn.pop().message)
    assert "2 of 3 cases" in text and "too short a --budget-ms" not in text and f"({MAX_REPS:,})" in text
    _warn_wide([_wide_row(MAX_REPS), _wide_row(40)])
    assert "too short a --budget-ms" in str(recwarn.pop().message)


def test_the_sweep_runs_at_most_max_reps_and_the_help_says_so(tmp_path, capsys, monkeypatch):
    import shapewise.measure as measure
    from shapewise.bench import MAX_REPS

    plans = []
    real = measure.plan_reps
    monkeypatch.setattr(measure, "plan_reps", lambda *a: plans.append(a) or real(*a))
    code, out, _ = run(capsys, "bench", "gemm", "-m", "8", "-n", "8", "-k", "8", *MEASURE, "--db", str(tmp_path / "r.db"))
    assert code == 0 and plans and plans[0][-1] == MAX_REPS
    code, out, _ = run(capsys, "bench", "gemm", "--help")
    assert f"at most {MAX_REPS:,}" in " ".join(out.split())


def test_bench_layer_json_rows_carry_their_predictions(tmp_path, capsys):
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 256, "max_position_embeddings": 128}))
    args = ["bench", "layer", "--config", str(config), "-b", "1", "-s", "8", *MEASURE, "--db", str(tmp_path / "r.db"),
            "--gpu", "h100", "--mode", "prefill"]
    code, table, _ = run(capsys, *args)
    assert code == 0
    code, out, _ = run(capsys, *args, "--json")
    rows = json.loads(out)
    assert code == 0 and all(r["predicted_ms"] and r["predicted_ms"] > 0 for r in rows)
    layer = next(r for r in rows if r["bench"] == "layer")
    assert f"{layer['predicted_ms']:.3f}" in table  # the table's predicted ms, the same number


def test_an_export_of_no_rows_is_refused_and_leaves_the_file_as_it_was(tmp_path, capsys):
    db = tmp_path / "r.db"
    code, _, err = run(capsys, "bench", "gemm", "-m", "8", "-n", "8", "-k", "8", *MEASURE, "--db", str(db))
    assert code == 0, err
    kept = tmp_path / "rows.csv"
    kept.write_text("an earlier export\n")
    code, out, err = run(capsys, "results", "--db", str(db), "--bench", "attention", "--export", str(kept))
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "nothing to export" in err, err
    assert kept.read_text() == "an earlier export\n"
    from shapewise.store import Store

    with Store(tmp_path / "empty.db") as store:
        with pytest.raises(ValueError, match="holds no rows: nothing to export"):
            store.export(tmp_path / "new.json", fmt="json")
    assert not (tmp_path / "new.json").exists()


def test_bench_ops_json_sums_to_the_step_its_table_says(tmp_path, capsys):
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": 128}))
    args = ["bench", "ops", "--config", str(config), "-b", "1", "-s", "8", "--mode", "prefill", *MEASURE,
            "--db", str(tmp_path / "r.db")]
    code, table, _ = run(capsys, *args)
    assert code == 0
    code, out, _ = run(capsys, *args, "--json")
    rows = json.loads(out)
    assert code == 0 and {r["count"] for r in rows} >= {1, 2}
    assert any(r["label"].startswith("op mlp/gate") for r in rows) and any(r["label"].startswith("op mlp/up") for r in rows)
    step = sum(r["median_ms"] * r["count"] for r in rows)
    assert f"step, measured op by op: {step:,.2f} ms" in table
