"""validate's variants set: the draw deterministic per seed, Spearman by hand, the measurement run on
the CPU with tiny configs, failures recorded and interruptions kept."""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shapewise.calibrate import spearman
from shapewise.cli import main
from shapewise.errors import ShapewiseError
from shapewise.hf import load_config
from shapewise.judges import STREAMS, judge_set_cases
from shapewise.profile import cost_model
from shapewise.search import ranked_neighbours
from shapewise.shapes import Workload
from shapewise.variants import RANDOM, TOP, ModelVariants, Variant, VariantsRun, draw, measure

CONFIGS = "tests/data/hf"
ROOT = Path(__file__).resolve().parents[1]
TRAIN = Workload(batch=4, seq=2048)


def _shapes(*names):
    return [load_config(f"{CONFIGS}/{name}.json") for name in names]


def _picks(neighbourhood):
    return [(label, picked) for label, picked, _, _ in neighbourhood.candidates]


def test_spearman_by_hand_with_ties():
    # ranks of a: 1, 2.5, 2.5, 4 (the tie shares 2 and 3); of b: 1, 3, 2, 4 → 4.5 / √(4.5 · 5)
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(22.5))
    assert spearman([3, 1, 2], [30, 10, 20]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 2], [1, 2])) and math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_the_draw_is_the_top_ten_and_five_of_the_rest_the_same_for_a_seed():
    model = cost_model("h200")
    shapes = _shapes("llama-2-7b", "falcon-7b")
    one, again, other = (draw(shapes, seed=s, workload=TRAIN, model=model) for s in (1, 1, 2))
    assert [_picks(n) for n in one] == [_picks(n) for n in again]
    assert [_picks(n)[TOP:] for n in one] != [_picks(n)[TOP:] for n in other]  # another seed, other neighbours
    assert [_picks(n)[:TOP] for n in one] == [_picks(n)[:TOP] for n in other]  # the top is the ranking's
    for shape, n in zip(shapes, one):
        original, ranked, _ = ranked_neighbours(shape, TRAIN, model=model, keep={"tp"}, params_tol=0.02,
                                                aspect_band=1.5)
        assert n.size == len(ranked) >= TOP + RANDOM
        top = [(c.shape, c.workload) for c in ranked[:TOP]]
        assert [(s, w) for _, _, s, w in n.candidates[:TOP]] == top
        drawn = [(s, w) for _, picked, s, w in n.candidates if picked == "random"]
        assert len(drawn) == RANDOM == len(set(drawn)) and not set(drawn) & set(top)
        assert all(abs(s.params / shape.params - 1) <= 0.02 and w.tp == 1 for _, _, s, w in n.candidates)
    # A model draws the same neighbours whichever models are drawn with it.
    assert _picks(draw(shapes[1:], seed=1, workload=TRAIN, model=model)[0]) == _picks(one[1])


def test_a_small_neighbourhood_is_taken_whole():
    model = cost_model("h200")
    (n,) = draw(_shapes("pythia-1b"), seed=1, workload=TRAIN, model=model)
    assert n.size < TOP + RANDOM and len(n.candidates) == n.size


def test_the_variants_stream_is_its_own():
    assert len(set(STREAMS.values())) == len(STREAMS) and "variants" in STREAMS
    with pytest.raises(ShapewiseError, match="--set variants"):
        judge_set_cases("variants", seed=1)


def _tiny_configs(tmp_path):
    folder = tmp_path / "configs"
    folder.mkdir()
    base = {"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 2,
            "intermediate_size": 344, "vocab_size": 250, "hidden_act": "silu"}
    (folder / "a.json").write_text(json.dumps(base))
    (folder / "b.json").write_text(json.dumps({**base, "num_attention_heads": 1, "vocab_size": 300}))
    return folder


def test_variants_measure_on_the_cpu_and_a_candidate_that_fails_is_kept_with_its_reason(tmp_path, capsys,
                                                                                        monkeypatch):
    pytest.importorskip("torch")
    verify = importlib.import_module("shapewise.verify")  # the module (the package root's verify is the function)

    build = verify._layer_fn

    def refuse_one_head(shape, *args):
        if shape.num_heads == 1 and shape.vocab == 256:
            raise ShapewiseError("no layer of one head")
        return build(shape, *args)

    monkeypatch.setattr(verify, "_layer_fn", refuse_one_head)
    args = ["validate", "--set", "variants", "--configs", str(_tiny_configs(tmp_path)), "--device", "cpu", "--gpu",
            "h200", "--batch", "2", "--seq", "32", "--rounds", "2", "--warmup-ms", "1", "--budget-ms", "1", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rounds"] == 2 and not out["interrupted"] and [m["model"] for m in out["models"]] == ["a", "b"]
    rows = [c for m in out["models"] for c in m["candidates"]]
    failed = [c for c in rows if c["error"]]
    assert failed and all("no layer of one head" in c["error"] and c["measured_speedup"] is None for c in failed)  # JSON has no NaN
    done = [c for c in rows if not c["error"]]
    assert done and all(c["measured_speedup"] > 0 and c["ci"] == [None, None] for c in done)  # 2 rounds: no interval
    assert out["candidates_measured"] == len(done)
    for m in out["models"]:
        ok = [c for c in m["candidates"] if not c["error"]]
        within = [abs(c["predicted_speedup"] / c["measured_speedup"] - 1) <= 0.03 for c in ok]
        assert m["within_3pct"] == pytest.approx(sum(within) / len(ok))
        assert m["spearman"] == pytest.approx(spearman([1] + [c["predicted_speedup"] for c in ok],
                                                       [1] + [c["measured_speedup"] for c in ok]), nan_ok=True)
        assert {c["picked"] for c in m["candidates"]} >= {"top 1", "random"}
    (tmp_path / "variants.json").write_text(json.dumps(out))
    summary = _script("variants_summary.py", str(tmp_path / "variants.json"))
    assert f"of {len(done)} candidates" in summary and "Spearman ≥ 0.9" in summary and "no layer of one head" in summary
    assert "ceiling" in summary.splitlines()[1]
    configs = args.index("--configs") + 1
    assert main([*args[:configs], str(tmp_path / "configs" / "a.json"), *args[configs + 1:-1]]) == 0  # the tables
    text = capsys.readouterr().out
    assert "Spearman" in text and "no layer of one head" in text and "candidates" in text


def test_the_ceiling_is_one_for_exact_measurements_and_falls_with_their_noise():
    """variants_summary.py's ceiling: measured speedups with no spread between rounds rank themselves
    exactly; the same speedups inside intervals wider than their differences do not."""
    spec = importlib.util.spec_from_file_location("variants_summary", ROOT / "benchmarks" / "variants_summary.py")
    summary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summary)
    speedups = [0.90, 0.95, 1.02, 1.04, 1.10]
    exact = [{"measured_speedup": s, "ci": [s, s]} for s in speedups]
    noisy = [{"measured_speedup": s, "ci": [s - 0.1, s + 0.1]} for s in speedups]
    rng = np.random.default_rng(0)
    assert summary.ceiling(exact, rng) == pytest.approx(1.0)
    assert summary.ceiling(noisy, rng) < 0.9


def _script(name: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_plan_draws_what_the_run_measures_and_prices_it(tmp_path):
    folder = _tiny_configs(tmp_path)
    text = _script("variants_plan.py", str(folder), "--batch", "2", "--seq", "32", "--rounds", "20")
    drawn = draw([load_config(folder / "a.json"), load_config(folder / "b.json")], seed=1,
                 workload=Workload(batch=2, seq=32), model=cost_model("h200"))
    assert f"{sum(len(n.candidates) for n in drawn)} candidates" in text and "20 rounds" in text


def test_verify_times_a_layer_or_a_head_the_shapes_share_once(monkeypatch):
    pytest.importorskip("torch")
    from shapewise import measure as timing
    from shapewise.verify import verify

    seen = {}
    interleave = timing.interleave

    def counted(fns, **kw):
        seen["parts"] = len(fns)
        return interleave(fns, **kw)

    monkeypatch.setattr(timing, "interleave", counted)
    (shape,) = _shapes("gpt2")
    shape = shape.replace(hidden=64, num_heads=2, vocab=100, ffn=128, num_layers=2)
    w = Workload(batch=1, seq=16)
    others = [("vocab", shape.replace(vocab=128), w), ("layers", shape.replace(num_layers=3), w),
              ("heads", shape.replace(num_heads=1), w)]
    out = verify((shape, w), others, gpu="h200", device="cpu", rounds=2, budget_ms=1, warmup_ms=1, mode="layer")
    assert seen["parts"] == 4  # two layers (of 2 heads, of 1) and two heads (vocabularies 100 and 128)
    assert len(out) == 3 and out[1].head_ms == out[2].head_ms and out[0].layer_ms == out[1].layer_ms


def test_a_model_that_fails_is_recorded_and_an_interruption_keeps_what_was_finished(monkeypatch):
    pytest.importorskip("torch")
    verify = importlib.import_module("shapewise.verify")  # the module (the package root's verify is the function)

    model = cost_model("h200")
    drawn = draw(_shapes("pythia-1b", "phi-2", "gpt2"), seed=1, workload=TRAIN, model=model)
    calls = []

    def fake(original, candidates, **kw):
        calls.append(original[0].name)
        if len(calls) == 1:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")
        if len(calls) == 3:
            raise KeyboardInterrupt
        return [verify.Verification("layer", label, s, w, 1.0, 1.01, 1.0, 1.02, 1.0, 0.1)
                for label, s, w in candidates]

    monkeypatch.setattr(verify, "verify", fake)
    run = measure(drawn, model=model, device="cpu", progress=False)
    assert run.interrupted and [m.name for m in run.models] == [drawn[0].shape.name, drawn[1].shape.name]
    assert run.models[0].error == "out of memory" and not run.models[0].variants
    assert len(run.models[1].measured) == len(drawn[1].candidates) and run.models[1].within_share == 1.0
    assert run.to_json()["interrupted"] and run.to_json()["models"][0]["error"] == "out of memory"


def test_within_and_spearman_of_a_model():
    w = Workload(batch=1, seq=16)
    rows = (Variant("a", "top 1", 1.10, 1.08, (1.0, 1.2)), Variant("b", "top 2", 1.05, 1.10, (1.0, 1.2)),
            Variant("c", "random", 0.90, 0.95, (0.9, 1.0)), Variant("d", "random", 0.8, math.nan, (math.nan,) * 2, "x"))
    m = ModelVariants("m", w, 9, rows)
    assert [v.within for v in m.measured] == [True, False, False] and m.within_share == pytest.approx(1 / 3)
    # predicted 1, 1.10, 1.05, 0.90 against measured 1, 1.08, 1.10, 0.95: ranks 2 4 3 1 against 2 3 4 1
    assert m.spearman == pytest.approx(0.8)
    assert VariantsRun((m,), 20, cost_model("h200")).to_json()["candidates_measured"] == 3


@pytest.mark.parametrize("argv, needle", [
    (["validate", "--set", "wide", "--batch", "2"], "only the variants set"),
    (["validate", "--set", "variants", "--configs", CONFIGS, "--from-db", "--gpu", "h200"], "--from-db"),
    (["validate", "--set", "variants", "--configs", CONFIGS, "--cuda-graph", "--gpu", "h200"], "not stored"),
    (["validate", "--set", "variants", "--gpu", "h200", "--device", "cpu"], "--configs"),
    (["validate", "--set", "variants", "--configs", CONFIGS, "--device", "cpu"], "--gpu"),
])
def test_bad_variants_input_is_one_line(capsys, argv, needle):
    pytest.importorskip("torch")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_a_committed_run_priced_again_by_the_shipped_profile_gives_its_own_predictions():
    """benchmarks/variants_repriced.py finds every measured candidate in its neighbourhood by its label;
    seed 11 was drawn and predicted with the shipped profile, so pricing it again changes nothing."""
    text = _script("variants_repriced.py", str(ROOT / "benchmarks/results/h200-variants-11/variants.json.gz"))
    assert "within 3%: 209 → 209 of 216" in text and "Spearman ≥ 0.9: 15 of 16" in text
    pairs = [line.split("Spearman")[1].split("→") for line in text.splitlines() if "Spearman" in line and "→" in line
             and "within" not in line]
    assert len(pairs) == 16 and all(float(a) == float(b) for a, b in pairs)


def test_an_h100_run_priced_again_as_that_h100_gives_its_own_figures():
    """Variants seed 14 was measured on an H100 and ranked with the profile `calibrate --quick` wrote there:
    priced again as that GPU with that profile it gives its own figures; with the profile an H100 borrows
    it gives others (so --gpu and --profile are not ignored)."""
    folder = ROOT / "benchmarks/results/h100-variants-14"
    run = str(folder / "variants.json.gz")
    own = _script("variants_repriced.py", "--gpu", "h100", "--profile", str(folder / "h100-machine.json.gz"), run)
    assert "within 3%: 204 → 204 of 216" in own and "Spearman ≥ 0.9: 16 of 16" in own
    borrowed = _script("variants_repriced.py", "--gpu", "h100", run)
    assert "within 3%: 204 → 208 of 216" in borrowed


def test_seed_12_priced_both_ways_gives_the_figures_that_reverted_the_rankings():
    """Seed 12 was drawn and predicted without the power cap's onset (the rankings of that day): priced
    so again it gives its own figures; priced with the onset, as check prices, it ranks one model more
    at Spearman ≥ 0.9, which by the rule written before it was measured reverted the rankings."""
    run = str(ROOT / "benchmarks/results/h200-variants-12/variants.json.gz")
    own = _script("variants_repriced.py", "--power", "none", run)
    assert "within 3%: 181 → 181 of 190" in own and "Spearman ≥ 0.9: 12 of 14" in own
    check = _script("variants_repriced.py", "--power", "op", run)
    assert "within 3%: 181 → 183 of 190" in check and "Spearman ≥ 0.9: 13 of 14" in check


def test_a_run_over_another_folder_finds_its_models_by_the_names_their_configs_give():
    """Variants seed 19 was drawn over tests/data/hf-fourteenth, whose files are named otherwise than the models
    (meta-llama/Llama-2-13b-hf is llama-2-13b.json): --configs finds each by the name its config gives, and the
    run priced again as drawn, with the profile an H100 borrows, gives its own figures; without --configs the
    missing model is one line naming the flag, exit 2."""
    run = str(ROOT / "benchmarks/results/h100-variants-19/variants.json.gz")
    text = _script("variants_repriced.py", "--gpu", "h100", "--configs", str(ROOT / "tests/data/hf-fourteenth"), run)
    assert "within 3%: 65 → 65 of 66" in text and "Spearman ≥ 0.9: 5 of 6" in text
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks/variants_repriced.py"), "--gpu", "h100", run],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                          timeout=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "(--configs)" in done.stderr
