"""Benchmarks on the CPU device: sweeps store their rows, resume, survive Ctrl-C and failures."""

import json

import pytest

from helpers import run
from shapewise.bench import sweep
from shapewise.cases import Case, gemm_cases, parse_dims
from shapewise.errors import ShapewiseError
from shapewise.store import Store

torch = pytest.importorskip("torch")

TINY = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256, "hidden_act": "silu"}
FAST = ["--device", "cpu", "--warmup-ms", "1", "--budget-ms", "2"]




def test_parse_dims_takes_numbers_and_inclusive_ranges():
    assert parse_dims(["64", "128"], name="-m") == [64, 128]
    assert parse_dims(["64:256:64"], name="-k") == [64, 128, 192, 256]
    assert parse_dims(["1:3", "2"], name="-n") == [1, 2, 3]
    for bad in (["x"], ["0"], ["256:64:64"], ["1:2:0"], ["1:2:3:4"]):
        with pytest.raises(ShapewiseError):
            parse_dims(bad, name="-m")


def test_issue_command_stores_its_rows_and_resumes(capsys, tmp_path):
    db = str(tmp_path / "r.db")
    argv = ["bench", "gemm", "-m", "64", "128", "-n", "64", "-k", "64:256:64", "--db", db, *FAST]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "8 measured, 0 already in the store, 0 failed" in out
    with Store(db) as store:
        rows = store.rows(bench="gemm")
    assert len(rows) == 8 and all(r["median_ms"] > 0 and r["error"] is None for r in rows)
    assert {(r["params"]["m"], r["params"]["k"]) for r in rows} == {(m, k) for m in (64, 128) for k in (64, 128, 192, 256)}
    code, out, _ = run(capsys, *argv)
    assert "0 measured, 8 already in the store" in out
    code, out, _ = run(capsys, *argv, "--force")
    assert "8 measured, 0 already in the store" in out


def test_ctrl_c_keeps_finished_rows_and_the_next_run_resumes(tmp_path, monkeypatch):
    import shapewise.measure as measure

    real, calls = measure.time_fn, []

    def interrupted_on_third(fn, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(fn, **kw)

    cases = gemm_cases([32], [32], [16, 32, 48, 64, 80])
    with Store(tmp_path / "r.db") as store:
        monkeypatch.setattr(measure, "time_fn", interrupted_on_third)
        first = sweep(cases, store=store, device="cpu", warmup_ms=1, budget_ms=2, progress=False)
        assert first.interrupted and first.measured == 2 and len(first.rows) == 2
        monkeypatch.setattr(measure, "time_fn", real)
        second = sweep(cases, store=store, device="cpu", warmup_ms=1, budget_ms=2, progress=False)
    assert not second.interrupted and second.skipped == 2 and second.measured == 3 and len(second.rows) == 5


def test_a_failing_case_is_recorded_with_its_reason_and_the_sweep_goes_on(tmp_path):
    cases = [*gemm_cases([32], [32], [32]), *gemm_cases([32], [32], [32], dtype="fp8"), *gemm_cases([16], [16], [16])]
    with Store(tmp_path / "r.db") as store:
        result = sweep(cases, store=store, device="cpu", warmup_ms=1, budget_ms=2, progress=False)
        failed = store.failed_keys(store.environment_id(result.environment), "gemm")
    assert result.measured == 2 and result.failed == 1 and len(failed) == 1
    error = next(row["error"] for _, row in result.rows if row["error"])
    assert "fp8" in error and "nt layout" in error
    assert "1 failed" in result.summary()


def test_attention_backends_and_unfused_path_on_cpu(capsys, tmp_path):
    code, out, _ = run(capsys, "bench", "attention", "--heads", "4", "--kv-heads", "2", "--head-dim", "16",
                       "--seq", "32", "--batch", "1", "--backend", "default", "unfused", "--db",
                       str(tmp_path / "r.db"), *FAST, "--json")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 4  # 2 backends × (fwd, fwdbwd)
    assert all(r["error"] is None and r["median_ms"] > 0 for r in rows)


def test_unfused_attention_matches_sdpa():
    from shapewise.bench import _attention

    outs = {}
    for backend in ("default", "unfused"):
        torch.manual_seed(0)
        fn, context = _attention(torch, "cpu", batch=2, heads=4, kv_heads=2, q_len=8, kv_len=8, head_dim=16,
                                 causal=True, backend=backend, pass_="fwd", dtype="fp32")
        with context:
            outs[backend] = fn()
    assert torch.allclose(outs["default"], outs["unfused"], atol=1e-5)


def test_bench_ops_measures_every_op_of_check(capsys, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    code, out, _ = run(capsys, "bench", "ops", "--config", str(config), "--batch", "1", "--seq", "32",
                       "--db", str(tmp_path / "r.db"), *FAST, "--gpu", "h200")
    assert code == 0
    assert "attn/qkv.wgrad" in out and "loss.bwd" in out and "attn/flash.bwd" in out
    assert "step, measured op by op" in out and "predicted" in out
    assert " 0 failed" in out


def test_bench_layer_times_the_layer_and_its_ops(capsys, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    code, out, _ = run(capsys, "bench", "layer", "--config", str(config), "--batch", "1", "--seq", "32",
                       "--db", str(tmp_path / "r.db"), *FAST)
    assert code == 0 and "fwdbwd" in out and "fwd" in out and "0 failed" in out


def test_results_export_round_trips(capsys, tmp_path):
    db = str(tmp_path / "r.db")
    run(capsys, "bench", "bmm", "-b", "2", "-m", "16", "-n", "16", "-k", "16", "32", "--db", db, *FAST)
    code, out, _ = run(capsys, "results", "--db", db, "--export", str(tmp_path / "out.json"))
    assert code == 0 and "wrote 2 rows" in out
    rows = json.loads((tmp_path / "out.json").read_text())
    assert {r["params"]["k"] for r in rows} == {16, 32} and all(r["params"]["batch"] == 2 for r in rows)
    code, out, _ = run(capsys, "results", "--db", db, "--json")
    assert json.loads(out)["benches"]["bmm"]["ok"] == 2


def test_no_gpu_is_a_clear_error(capsys, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    code, out, err = run(capsys, "bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--db", str(tmp_path / "r.db"))
    assert code == 2 and "--device cpu" in err and err.count("\n") == 1


def test_case_labels():
    case = Case("gemm", dict(m=1, n=2, k=3, batch=1, layout="nt", dtype="bf16"))
    assert case.label == "gemm 1×2×3 nt bf16"


def test_parse_sizes_takes_units_and_doubling_ranges():
    from shapewise.cases import parse_sizes

    assert parse_sizes(["4096", "64K", "1M", "1G"]) == [4096, 65536, 2**20, 2**30]
    assert parse_sizes(["1K:8K"]) == [1024, 2048, 4096, 8192]
    for bad in (["x"], ["0"], ["-5K"]):
        with pytest.raises(ShapewiseError):
            parse_sizes(bad)


def test_moe_permute_is_timed_as_the_two_copies_the_op_counts():
    """Dispatch and combine: the op counts each routed row read and written twice; the benchmark
    must run both kernels (one copy timed against two counted put the op 2x off on the H200)."""
    from torch.profiler import ProfilerActivity, profile

    from shapewise.bench import build
    from shapewise.cases import op_case
    from shapewise.ops import elementwise

    ops = elementwise("moe/permute", 64, 32, reads=2, writes=2, bwd_reads=2, bwd_writes=2, train=True, count=1,
                      dtype_bytes=4, family="copy")
    for op in ops:
        assert op.bytes == 4 * 64 * 32 * 4
        fn, _ = build(op_case(op, "fp32"), "cpu")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            out = fn()
        names = [e.key for e in prof.key_averages()]
        assert "aten::index_select" in names and "aten::index_copy_" in names
        assert out.shape == (64, 32)


def test_a_windowed_op_runs_the_band_it_prices():
    """A sliding-window op's benchmark computes causal attention over the last `window` keys only
    (on the CPU: SDPA over the band as a mask): the same numbers as masking the scores by hand."""
    from shapewise.bench import _window_attention

    heads, kv_heads, seq, d, window = 4, 2, 96, 16, 24
    torch.manual_seed(0)
    fn, _ = _window_attention(torch, "cpu", heads=heads, kv_heads=kv_heads, seq=seq, head_dim=d, window=window,
                              pass_="fwd", dtype="fp32")
    out = fn()
    torch.manual_seed(0)  # the inputs it drew, drawn again in its order: q, k, v
    q = torch.randn(1, heads, seq, d)
    k, v = (torch.randn(1, kv_heads, seq, d).repeat_interleave(heads // kv_heads, dim=1) for _ in range(2))
    i = torch.arange(seq)
    keep = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < window)
    scores = (q @ k.transpose(-1, -2) * d ** -0.5).masked_fill(~keep, float("-inf"))
    assert torch.allclose(out, torch.softmax(scores, dim=-1) @ v, atol=1e-5)
    for pass_ in ("bwd", "fwdbwd"):
        fn, _ = _window_attention(torch, "cpu", heads=4, kv_heads=4, seq=64, head_dim=16, window=8, pass_=pass_,
                                  dtype="fp32")
        fn()


def test_bench_ops_takes_a_cost_model_for_its_predictions(tmp_path):
    """bench_ops and bench_cases take a cost model as their gpu (the H200's profile for times measured elsewhere):
    the warning that the times are not that GPU's asked the model for a key it does not have and raised
    AttributeError after measuring, on the CPU as on an H100."""
    from shapewise import Workload
    from shapewise.bench import bench_cases, bench_ops
    from shapewise.errors import ShapewiseWarning
    from shapewise.hf import load_config
    from shapewise.profile import cost_model

    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    shape = load_config(config)
    with Store(str(tmp_path / "r.db")) as store, pytest.warns(ShapewiseWarning, match="measured on the CPU.*h200"):
        ops = bench_ops(shape, Workload(batch=1, seq=32), store=store, device="cpu", gpu=cost_model("h200"),
                        warmup_ms=1, budget_ms=2, progress=False)
    assert ops.rows and all(p is not None and p > 0 for _, _, p in ops.rows)
    with Store(str(tmp_path / "g.db")) as store, pytest.warns(ShapewiseWarning, match="measured on the CPU"):
        cases = bench_cases(gemm_cases([64], [64], [64]), store=store, device="cpu", gpu=cost_model("h200"),
                            warmup_ms=1, budget_ms=2, progress=False)
    assert cases.rows[0][2] > 0
