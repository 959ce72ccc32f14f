"""A new user's pass over tensor parallelism and the flags it writes: a layout Megatron-LM refuses is said in one
line (exit code 2), not printed as flags, and a config's biases are counted where its model's code puts them."""

import json

from helpers import run


def one_error(err: str) -> bool:
    return err.count("\n") == 1 and err.startswith("shapewise: error: ")


def test_megatron_flags_are_refused_where_t_does_not_divide_the_kv_heads(capsys):
    # Gemma-3-1B's one kv head at t=4: check prices it replicated, as vLLM runs it, but Megatron-core splits
    # --num-query-groups over the ranks and asserts t divides it; the flags had been printed as if it would run.
    code, out, err = run(capsys, "suggest", "tests/data/hf/gemma-3-1b-it.json", "--tp", "4", "--vary", "batch",
                         "--keep", "kv_heads,heads", "--top", "2", "--emit", "megatron")
    assert code == 2 and one_error(err) and out == ""
    assert "t=4 does not divide gemma-3-1b-it's 1 kv heads" in err and "suggest --emit-config" in err
    # The same model at t=1 still gets its flags.
    code, out, _ = run(capsys, "suggest", "tests/data/hf/gemma-3-1b-it.json", "--vary", "batch",
                       "--keep", "kv_heads,heads", "--top", "2", "--emit", "megatron")
    assert code == 0 and "--num-query-groups 1" in out


def test_plans_megatron_refusals_name_no_flag_plan_lacks(capsys):
    # plan has no --emit-config: its refusal and its warning had told the user to give one.
    layout = ("--gpus", "8", "--global-batch", "524288", "--seq", "2048", "--emit", "megatron")
    code, out, err = run(capsys, "plan", "tests/data/hf/bloom-7b1.json", *layout)
    assert code == 2 and one_error(err) and out == "" and "`shapewise suggest --emit-config`" in err
    code, out, err = run(capsys, "plan", "tests/data/hf/falcon-7b.json", *layout)
    assert code == 0 and "--num-layers 32" in out and err.count("\n") == 1
    assert "parallel attention and MLP" in err and "`shapewise suggest --emit-config`" in err
    code, _, err = run(capsys, "plan", "tests/data/hf/falcon-7b.json", *layout, "--emit-config", "x.json")
    assert code == 2 and "unrecognized arguments" in err


def test_a_llama_config_with_one_bias_key_has_biases_on_that_side_alone(capsys, tmp_path):
    # LlamaConfig defaults attention_bias and mlp_bias to false: a file giving attention_bias alone (written before
    # mlp_bias existed, as a llamafied Qwen's) has no MLP biases; the one key read had stood for both sides.
    base = json.loads(open("tests/data/hf/llama-3-8b.json").read())
    h, ffn, L = base["hidden_size"], base["intermediate_size"], base["num_hidden_layers"]
    counts = {}
    for name, keys in {"none": {}, "attn": {"attention_bias": True}, "mlp": {"mlp_bias": True}}.items():
        path = tmp_path / f"{name}.json"
        config = {k: v for k, v in base.items() if k not in ("attention_bias", "mlp_bias")}
        path.write_text(json.dumps({**config, **keys}))
        code, out, _ = run(capsys, "check", str(path), "--json")
        assert code == 0
        fields = json.loads(out)["model"]["fields"]
        counts[name] = json.loads(out)["model"]["params"]
        assert fields["bias_scope"] == {"none": "all", "attn": "attention", "mlp": "mlp"}[name]
    kv = base["num_key_value_heads"] * h // base["num_attention_heads"]
    assert counts["attn"] - counts["none"] == L * (2 * h + 2 * kv)  # q, o: h wide; k, v: the kv heads'
    assert counts["mlp"] - counts["none"] == L * (2 * ffn + h)


def test_a_t_the_kv_heads_refuse_names_the_ones_that_work(capsys):
    # Qwen2.5-7B's 28 heads take t=7, its 4 kv heads do not: the error said why and not what to give instead.
    code, _, err = run(capsys, "check", "tests/data/hf/qwen2.5-7b.json", "--tp", "7")
    assert code == 2 and one_error(err) and err.rstrip().endswith("use t = 1, 2 or 4")  # 28 does not divide its FFN
    for t in (1, 2, 4):
        assert run(capsys, "check", "tests/data/hf/qwen2.5-7b.json", "--tp", str(t), "--json")[0] == 0
    code, _, err = run(capsys, "check", "tests/data/hf/qwen2.5-7b.json", "--tp", "28")
    assert code == 2 and "FFN width 18944" in err
