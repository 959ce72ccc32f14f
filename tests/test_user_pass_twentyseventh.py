"""What a new user's twenty-seventh pass found, on the CPU, in plan, verify, suggest's serving advice, the report
and fp8 MoE steps: an fp8 step priced the MoE router (8 experts wide) as an fp8 GEMM, which Megatron-LM runs as a
plain bf16 linear and torch._scaled_mm could not run at all, and told Mixtral to "pad it to 16" experts; verify with
every field kept said "widen --params-tol", which brings no shape within reach, and on a machine without a GPU
answered a mistyped model name or --keep field with "no CUDA GPU is visible"; suggest's run settings for a decode
step said "rank them with the shapes: --vary batch,tp", where a decode step keeps its batch (--vary batch has no
effect there) and the rows changed t alone; the report described every rotary model's positions as "RoPE or ALiBi"
(ALiBi models have no rotary dims, and are said apart); a step priced with --overlap-comm said so nowhere but in the
report's reproduce commands (not in check's header, the report's workload table, or check's and suggest's --json
workload); plan's time to train --tokens 1000 at a global batch of 65,536 was a 65th of a step; and plan said
"1 h100 GPUs" and, for --inter-node-gbs on one GPU, "the 1 GPUs are one node".

Found consistent: plan's refusals of zero, negative, NaN and infinite counts, rates and tokens, of global batches that
are not whole sequences and of GPUs that do not fill nodes; plan --json against its table; --emit megatron for
uneven stages, fp8, MoE and ZeRO; search's tolerance, vocab and budget limits; verify's refusals of --tp, --vary tp,
--config beside --suggestion, and an out-of-range --suggestion; results --import/--export of CSV, gzipped JSON, empty
files, an object for a list and a format the name contradicts; report's format, folder and store refusals, its
measured-against-predicted table and reproduce commands; plot's ranges, dims, formats and --verified files; check,
report and the Python API for Mixtral decoding at t=2, gpt-oss's windows in prefill and decode, in bf16 and fp8."""

from __future__ import annotations

import pytest

from helpers import run
from shapewise import ShapewiseError, Workload, check, get_model, load_config
from shapewise.cost import predict_step

MIXTRAL = "mixtral-8x7b"  # 8 experts: a router 8 wide
QWEN_MOE = "tests/data/hf/qwen1.5-moe-a2.7b.json"  # 60 experts and a shared experts' gate 1 wide


def _costs(step, name: str) -> list:
    return [c for c in step.costs if c.op.name == name]


@pytest.mark.parametrize("mode", ["train", "prefill", "decode"])
def test_an_fp8_step_runs_the_router_in_bf16(mode):
    """Mixtral at fp8, t=4, had its router priced as fp8 GEMMs (8192×8×4096 at the fp8 peak) and a misaligned finding,
    "moe/router has a leading dim of 8, not a multiple of 16 elements (16 bytes of fp8): pad it to 16": Megatron-LM's
    router is a plain linear beside Transformer Engine's fp8 layers (TorchTitan's fp8 conversion leaves it out too),
    and torch._scaled_mm takes no dim of 8. It is priced as the bf16 step prices it, and said of nothing."""
    shape = get_model(MIXTRAL)
    fp8 = check(shape, Workload(mode=mode, batch=4, seq=2048, tp=4, dtype="fp8"), gpu="h200")
    bf16 = predict_step(shape, Workload(mode=mode, batch=4, seq=2048, tp=4, dtype="bf16"), gpu="h200")
    assert not [f for f in fp8.findings if "moe/router" in f.ops]
    routers = _costs(fp8.step, "moe/router")
    assert routers and all(c.op.high_precision for c in routers)
    for ours, theirs in zip(routers, _costs(bf16, "moe/router")):
        assert ours.op == theirs.op  # its bytes are bf16's too
        assert ours.time_ms == pytest.approx(theirs.time_ms, rel=1e-9)
        assert ours.peak_tflops == fp8.step.gpu.peak_tflops("bf16")
    experts = _costs(fp8.step, "moe/experts/up")  # the experts' GEMMs stay fp8's
    assert experts and all(c.peak_tflops == fp8.step.gpu.peak_tflops("fp8") for c in experts)


def test_an_fp8_step_runs_the_shared_experts_gate_in_bf16():
    """Qwen1.5-MoE's shared experts' gate (hidden → 1, "as the router runs") was an fp8 GEMM of a dim of 1."""
    step = predict_step(load_config(QWEN_MOE), Workload(batch=2, seq=2048, dtype="fp8"), gpu="h200")
    gates = _costs(step, "moe/shared_gate")
    assert gates and all(c.op.high_precision and c.peak_tflops == step.gpu.peak_tflops("bf16") for c in gates)


def test_a_misaligned_bf16_op_of_an_fp8_step_is_said_in_bf16():
    """The misaligned finding said every op's elements in the step's dtype: an fp8 step's router, 60 experts wide (120
    bytes in bf16), is to be padded to a multiple of 8 elements (16 bytes of bf16), not 16."""
    result = check(load_config(QWEN_MOE), Workload(batch=2, seq=2048, dtype="fp8"), gpu="h200")
    router = [f for f in result.findings if f.rule == "misaligned" and "moe/router" in f.ops]
    assert router, [(f.rule, f.title) for f in result.findings]
    assert "not a multiple of 8 elements (16 bytes of bf16)" in router[0].title
    assert router[0].fix == "pad it to 64"


def test_verify_with_every_field_kept_says_what_brings_shapes_within_reach(capsys):
    """`verify gpt2 --keep` every field said "the neighbourhood holds no other shape; widen --params-tol", which brings
    none: suggest's own line names the three bounds."""
    fields = "hidden,layers,heads,kv_heads,head_dim,ffn,vocab,batch"
    code, out, err = run(capsys, "verify", "gpt2", "--device", "cpu", "--keep", fields)
    assert code == 2 and out == ""
    assert err.strip().endswith("no other shape; widen --params-tol or --aspect-band, or --keep fewer fields"), err


@pytest.mark.parametrize("argv, said", [
    (("gtp2",), "unknown model 'gtp2'; did you mean gpt2"),
    (("gpt2", "--keep", "foo"), "--keep: unknown field foo"),
    (("gpt2", "--config", "no-such-config.json"), "no-such-config.json: no such file"),
    (("gpt2",), "no CUDA GPU is visible here"),
])
def test_verify_refuses_a_bad_model_or_flag_before_the_missing_gpu(capsys, monkeypatch, argv, said):
    """On a machine without a GPU, `verify gtp2` (a typo) and `verify gpt2 --keep foo` said "no CUDA GPU is visible
    here; measure on the CPU with --device cpu", and on the GPU then the typo: what the arguments alone refuse comes
    first, and the device before the search."""
    import shapewise.measure

    def no_gpu(device, *, present=True):
        if present and device != "cpu":
            raise ShapewiseError(f"no CUDA GPU is visible here ({device}); measure on the CPU with --device cpu")
        return device
    monkeypatch.setattr(shapewise.measure, "check_device", no_gpu)
    code, out, err = run(capsys, "verify", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and said in err, err


def test_suggest_names_the_run_settings_its_rows_change_in_decode(capsys):
    """Mixtral decoding at fp8, t=2, listed tp 2→1 under "run settings (micro-batch b, tensor parallelism t) ...
    rank them with the shapes: --vary batch,tp", where --vary batch has no effect in decode (the batch served is
    kept): the title names what the rows change."""
    code, out, _ = run(capsys, "suggest", MIXTRAL, "--mode", "decode", "--batch", "64", "--seq", "4096", "--tp", "2",
                       "--dtype", "fp8", "--top", "3")
    assert code == 0
    title = next(line for line in out.splitlines() if line.startswith("run settings"))
    assert title == ("run settings (tensor parallelism t) that fit, alone and with the best shape; rank them with the "
                     "shapes: --vary tp")


def test_suggest_names_the_micro_batch_alone_where_t_cannot_change(capsys):
    code, out, _ = run(capsys, "suggest", "llama2-7b", "--tp", "2", "--top", "3")
    assert code == 0
    assert "run settings (micro-batch b) that fit, alone and with the best shape; rank them with the shapes: " \
           "--vary batch\n" in out


def test_the_report_says_rope_of_a_rotary_model():
    """The report's model table said "positions: RoPE or ALiBi" of Mixtral and every other rotary model; an ALiBi
    model has no rotary dims and is said as "no rotary (ALiBi, or none)"."""
    from shapewise.document import _model_rows

    assert dict(_model_rows(get_model(MIXTRAL)))["positions"] == "RoPE"
    assert dict(_model_rows(load_config("tests/data/hf/bloom-7b1.json")))["positions"] == "no rotary (ALiBi, or none)"


def test_plan_on_one_gpu_says_one_gpu(capsys):
    """`plan --gpus 1 --inter-node-gbs 10` said "3 layouts of 1 h100 GPUs" and "--inter-node-gbs 10 has no effect:
    the 1 GPUs are one node (--gpus-per-node 8)"."""
    code, out, err = run(capsys, "plan", "gpt2", "--gpus", "1", "--global-batch", "4096", "--seq", "1024",
                         "--inter-node-gbs", "10", "--top", "1")
    assert code == 0
    assert " layouts of 1 h100 GPU considered" in out
    assert "--inter-node-gbs 10 has no effect: one GPU sends nothing to another" in err, err
    code, out, err = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", "65536", "--seq", "1024",
                         "--inter-node-gbs", "10", "--top", "1")
    assert " layouts of 8 h100 GPUs considered" in out
    assert "--inter-node-gbs 10 has no effect: the 8 GPUs are one node (--gpus-per-node 8)" in err, err


def test_plan_trains_in_whole_steps(capsys):
    """`plan gpt2 ... --global-batch 65536 --tokens 1000` said 0.000471 s to train, a 65th of its 0.0309 s step: a
    run takes whole steps of the global batch."""
    import json

    code, out, _ = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", "65536", "--seq", "1024",
                       "--tokens", "1000", "--top", "2", "--json")
    assert code == 0
    for p in json.loads(out)["plans"]:
        assert p["time_to_train_s"] == pytest.approx(p["step_ms"] / 1e3, rel=1e-12)
    code, out, _ = run(capsys, "plan", "gpt2", "--gpus", "8", "--global-batch", "65536", "--seq", "1024",
                       "--tokens", "131073", "--top", "1", "--json")  # two steps and a token: three steps
    (p,) = json.loads(out)["plans"]
    assert p["time_to_train_s"] == pytest.approx(3 * p["step_ms"] / 1e3, rel=1e-12)


def test_a_step_priced_with_overlapped_collectives_says_so(capsys, tmp_path):
    """`check llama2-7b --tp 2 --overlap-comm` and its report priced the step with the collectives hidden behind
    compute, and said so only in the report's reproduce commands: check's header, the report's workload table and
    check's and suggest's --json workload said what a step without it says."""
    import json

    said = "collectives overlapped with compute (--overlap-comm: an upper bound on overlap)"
    argv = ("llama2-7b", "--tp", "2", "--overlap-comm")
    code, out, _ = run(capsys, "check", *argv)
    assert code == 0 and f"flash attention, tensor-parallel {said}, on " in out
    code, out, _ = run(capsys, "check", *argv, "--json")
    assert json.loads(out)["workload"]["overlap_comm"] is True
    code, out, _ = run(capsys, "suggest", *argv, "--top", "1", "--json")
    assert json.loads(out)["workload"]["overlap_comm"] is True
    report = tmp_path / "r.md"
    code, _, err = run(capsys, "report", *argv, "--out", str(report))
    assert code == 0, err
    assert f"| tensor parallel | 2, its {said} |" in report.read_text()
    code, out, _ = run(capsys, "check", "llama2-7b", "--tp", "2")
    assert said not in out


def test_an_fp8_steps_router_is_measured_as_it_is_priced():
    """The router's op case (what `bench`, `validate --set models` and `verify` measure) runs in bf16 as the step
    prices it, not as an fp8 GEMM of 8 columns that torch._scaled_mm cannot run; the step's other GEMMs stay fp8,
    and a bf16 step's cases keep their keys."""
    from shapewise.cases import op_case, predict_cases
    from shapewise.ops import model_ops

    shape, w = get_model("mixtral-8x7b"), Workload(batch=2, seq=1024, dtype="fp8")
    ops = {op.label: op for op in model_ops(shape, w)}
    router, up = op_case(ops["moe/router"], "fp8"), op_case(ops["moe/experts/up"], "fp8")
    assert router.params["dtype"] == "bf16" and up.params["dtype"] == "fp8"
    step = predict_step(shape, w, gpu="h200")
    priced = next(c.time_ms for c in step.costs if c.op.label == "moe/router")  # one call
    assert predict_cases([router], gpu="h200")[0] == pytest.approx(priced, rel=1e-9)
    bf16 = model_ops(shape, Workload(batch=2, seq=1024))
    assert all(op_case(op, "bf16").params["dtype"] == "bf16" for op in bf16)
