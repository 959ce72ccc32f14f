"""A new user's consistency pass: JSON that says what its numbers are of, where a table says it in words."""

import json


def test_check_json_says_whose_tokens_per_second(capsys):
    from shapewise.cli import main

    for tp, of in ((1, "one GPU"), (2, "one 2-GPU tensor-parallel group")):
        assert main(["check", "llama3-8b", "--tp", str(tp), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["totals"]["tokens_per_s_of"] == of


def test_plan_json_says_which_time_parts_hold_others(capsys):
    from shapewise.cli import main

    assert main(["plan", "llama3-8b", "--gpus", "16", "--global-batch", "4194304", "--seq", "4096", "--top", "1",
                 "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["plans"][0]
    assert "compute_ms includes recompute_ms and tp_comm_ms" in best["times_note"]
    assert best["times_ms"]["total_ms"] == best["step_ms"]


def test_a_config_emitted_from_a_preset_is_named_as_a_suggestion(capsys, tmp_path):
    from shapewise.cli import main
    from shapewise.hf import load_config

    out = tmp_path / "s.json"
    assert main(["suggest", "gpt3-2.7b", "--emit-config", str(out)]) == 0
    assert load_config(out).name == "gpt3-2.7b, suggested"


def test_check_json_holds_the_whole_shape_and_search_json_its_workload(capsys):
    from shapewise.cli import main

    assert main(["check", "tests/data/hf/gemma-2-9b-it.json", "--json"]) == 0
    fields = json.loads(capsys.readouterr().out)["model"]["fields"]
    assert fields["window"] == 4096 and fields["global_every"] == 2 and fields["logit_softcap"] is True
    assert main(["search", "--params", "7e9", "--top", "1", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["workload"] == {"batch": 1, "seq": 4096, "tp": 1, "dtype": "bf16", "mode": "train",
                                 "attention": "flash", "overlap_comm": False, "kv_cache_dtype": None}
    assert found["top"][0]["head_dim"] * found["top"][0]["heads"] >= found["top"][0]["hidden"] // 2


def test_search_help_does_not_promise_a_decode_it_has_not(capsys):
    from shapewise.cli import main

    try:
        main(["search", "--help"])
    except SystemExit:
        pass
    assert "decode" not in capsys.readouterr().out


def test_a_variants_run_whose_candidates_all_failed_writes_json_without_nan():
    import math

    from shapewise.profile import cost_model
    from shapewise.shapes import Workload
    from shapewise.variants import ModelVariants, Variant, VariantsRun

    failed = Variant("heads 12→6", "top 1", 1.05, math.nan, (math.nan, math.nan), error="out of memory")
    run = VariantsRun((ModelVariants("gpt2", Workload(), 20, (failed,)),), rounds=20, model=cost_model("h200"))
    text = json.dumps(run.to_json(), allow_nan=False)  # raises on NaN or Infinity
    assert json.loads(text)["models"][0]["candidates"][0]["measured_speedup"] is None
