"""Predicted against published: the step times and throughputs of large training runs, from their
stated model, cluster and parallel configuration, and plan's own choice for the same model and cluster.

Every number below was looked up, not remembered; each run cites its source beside it.

Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
  arXiv:2205.05198, Table 3 (models, parallel configuration, global batch) and Table 4 / Figure 9
  (time per iteration on NVIDIA's Selene, A100 80GB, with full recomputation and with selective
  recomputation plus sequence parallelism). The same rows, as configurations, are in Calculon's
  validation set (github.com/calculon-ai/calculon: validation/seqsel/tab5/*_{full,seqsel}.json:
  t, p, d, global batch, micro-batch, interleaving, recompute). Their GPT models have a vocabulary
  of 51,200 (GPT-2's, padded by Megatron to a multiple of 128·t), learned positions, GeLU,
  LayerNorm, tied embeddings, sequences of 2048, fp16 and attention without FlashAttention.

The other sources (each run's block says which of its numbers come from where):
- MT-NLG: Smith et al. 2022, "Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B",
  arXiv:2201.11990, section 2.4 (global batch 1920 on 280, 350 and 420 DGX A100 servers: 60.1,
  50.2 and 44.4 s per iteration, 126, 121 and 113 TFLOP/s per GPU), read as quoted by
  github.com/cli99/llm-analysis examples/megatron-turing-nlg/README.md (whose run_train.sh takes
  t=8, p=35 and full recomputation from the paper).
- BLOOM-176B: github.com/bigscience-workshop/bigscience, train/tr11-176B-ml/README.md ("Replica
  setup", "Architecture", "Hardware", and the log line of iteration 85,376 under "Important
  checkpoints": 104.70 s per iteration at global batch 2048, 149.77 TFLOPs) and
  tr11-176B-ml.slurm (TP_SIZE=4, PP_SIZE=12, MICRO_BATCH_SIZE=2, --checkpoint-activations, bf16,
  ALiBi, --pad-vocab-size-to 250880, ZeRO stage 0 with "its own zero stage 1 equivalent").
- OPT-175B: Zhang et al. 2022, "OPT: Open Pre-trained Transformer Language Models",
  arXiv:2205.01068, Table 1 (96 layers, 96 heads, d_model 12288, batch 2M tokens), section 2.2
  (ReLU, sequences of 2048, dropout 0.1) and section 2.4 (992 80GB A100 GPUs, Fully Sharded Data
  Parallel with Megatron-LM tensor parallelism, "utilization of up to 147 TFLOP/s per GPU", FP16
  weights); the layout from github.com/facebookresearch/metaseq, metaseq/launcher/
  opt_job_constants.py ("175b": batch int(2.0 * M) tokens with M = 1024 * 1024, model_parallel 8)
  and opt_baselines.py (--ddp-backend fully_sharded, --no-reshard-after-forward, labelled "zero2",
  --checkpoint-activations, per-GPU batch = (batch tokens // data-parallel GPUs) // 2048,
  --update-freq 1); the vocabulary, 50,272, from huggingface.co/facebook/opt-30b config.json
  (the family's tokenizer).
- Llama 3 405B: Llama Team 2024, "The Llama 3 Herd of Models", arXiv:2407.21783, Table 3 (126
  layers, 16,384 wide, FFN 53,248, 128 heads, 8 kv heads, SwiGLU, RoPE), Table 4 (GPUs, TP, CP,
  PP, DP, sequence, batch per DP, TFLOPs/GPU, BF16 MFU), section 3.3.1 (H100 80GB HBM3 at 700 W,
  8 per server on NVLink, 400 Gbps between GPUs) and section 3.3.2 (FSDP that shards optimizer
  state and gradients and does not reshard weights after forward; one layer fewer on the first
  and last stages; an interleaved schedule of V stages per rank; no activation checkpointing at
  8K); the vocabulary, 128,256, as the released Llama 3 models' config.json (shapes.py's llama3
  presets; Table 3 rounds it to 128,000).

How a published throughput becomes a time per step (the unit every prediction is judged in):
- "megatron": Narayanan et al. 2021 (arXiv:2104.04473) count 96·B·s·L·h²·(1 + s/6h + V/16Lh)
  FLOPs a step, forward, backward and the recomputed forward (4 passes). MT-NLG's times and
  TFLOP/s agree under it (60.1 s on 2240 GPUs is 126 TFLOP/s), BLOOM counts the same 4 passes
  (its README: "using the 4*2 co-efficient"). OPT does not say how it counts: the same rule is
  taken, as the Megatron code OPT used counts.
- "palm": model FLOPs as Chowdhery et al. 2022 (PaLM, arXiv:2204.02311, Appendix B) define MFU,
  which Llama 3 cites: 6N + 12·L·H·Q·T per token (N parameters, H heads of Q dims, T sequence).

No profile exists for the A100 or the H100: every op is priced by the GPU table's spec model
(cost.SPEC, read off an H200); the links are the tables' NVLink and datasheet network rows unless
a run states its own.

    PYTHONPATH=src python3 benchmarks/published_runs.py
"""

from __future__ import annotations

from dataclasses import dataclass

from shapewise.cost import SPEC
from shapewise.errors import ShapewiseError
from shapewise.hardware import get_gpu
from shapewise.memory import FRAMEWORKS, PRECISIONS, Memory, training_arrays
from shapewise.parallel import RECOMPUTE, layer_times, network_for, step_arrays
from shapewise.plan import plan
from shapewise.profile import cost_model
from shapewise.shapes import ModelShape, Workload

KORTHIKANTI = "Korthikanti et al. 2022, arXiv:2205.05198, Tables 3-4 (Calculon validation set)"
MTNLG = "Smith et al. 2022, arXiv:2201.11990, section 2.4 (via github.com/cli99/llm-analysis)"
BLOOM = "github.com/bigscience-workshop/bigscience train/tr11-176B-ml (README, slurm)"
OPT = "Zhang et al. 2022, arXiv:2205.01068, Table 1, sections 2.2, 2.4; metaseq launcher"
LLAMA3 = "Llama Team 2024, arXiv:2407.21783, Tables 3-4, sections 3.3.1-3.3.2"
_GPT = {"vocab": 51200, "learned_positions": 2048, "mlp": "gelu", "norm": "layernorm", "bias": True,
        "tied_embeddings": True}


def gpt(name, hidden, heads, layers, source=KORTHIKANTI):
    return ModelShape(name=name, hidden=hidden, num_heads=heads, num_layers=layers, source=source, **_GPT)


@dataclass(frozen=True)
class Run:
    label: str
    shape: ModelShape
    gpu: str
    tp: int
    pp: int
    dp: int
    vp: int
    batch: int  # micro-batch, sequences
    global_batch: int  # sequences
    seq: int
    recompute: str
    source: str
    published_s: float | None = None  # time per iteration, where stated
    published_tflops: float | None = None  # per GPU, where that is what is stated
    flops_rule: str = ""  # how the published TFLOP/s count a step's FLOPs: "megatron" or "palm"
    attention: str = "unfused"
    dtype: str = "fp16"
    zero: int = 0
    overlap_dp: bool = False  # the data-parallel reduction hidden behind backward (DDP, FSDP) or after it
    inter_gbs: float | None = None  # network per GPU between nodes, where the run's cluster differs
    framework: str = "megatron-gpt"

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.batch * self.dp)

    def step_flops(self, rule: str) -> float:
        s, L, h, V = self.seq, self.shape.num_layers, self.shape.hidden, self.shape.vocab
        if rule == "megatron":  # Narayanan et al. 2021, section 5.1: with the recomputed forward
            return 96 * self.global_batch * s * L * h ** 2 * (1 + s / (6 * h) + V / (16 * L * h))
        assert rule == "palm"  # Chowdhery et al. 2022, Appendix B
        sh = self.shape
        return self.global_batch * s * (6 * sh.params + 12 * L * sh.num_heads * sh.d_head * s)

    @property
    def published_step_s(self) -> float:
        """The stated time per step, or the one the stated TFLOP/s imply under the run's FLOP count."""
        if self.published_s is not None:
            return self.published_s
        return self.step_flops(self.flops_rule) / (self.gpus * self.published_tflops * 1e12)

    @property
    def published_text(self) -> str:
        if self.published_s is not None:
            return f"{self.published_s:.2f} s"
        return f"{self.published_tflops:g} TFLOP/s"


M22, M175, M530, M1T = gpt("gpt-22b", 6144, 64, 48), gpt("gpt-175b", 12288, 96, 96), \
    gpt("gpt-530b", 20480, 128, 105), gpt("gpt-1t", 25600, 160, 128)
KORTHIKANTI_RUNS = (
    Run("22B full", M22, "a100-80gb", 8, 1, 1, 1, 4, 4, 2048, "full", KORTHIKANTI, published_s=1.42),
    Run("22B selective+SP", M22, "a100-80gb", 8, 1, 1, 1, 4, 4, 2048, "selective", KORTHIKANTI, published_s=1.10),
    Run("175B full", M175, "a100-80gb", 8, 8, 1, 3, 1, 64, 2048, "full", KORTHIKANTI, published_s=18.13),
    Run("175B selective+SP", M175, "a100-80gb", 8, 8, 1, 3, 1, 64, 2048, "selective", KORTHIKANTI, published_s=13.75),
    Run("530B full", M530, "a100-80gb", 8, 35, 1, 3, 1, 280, 2048, "full", KORTHIKANTI, published_s=49.05),
    Run("530B selective+SP", M530, "a100-80gb", 8, 35, 1, 3, 1, 280, 2048, "selective", KORTHIKANTI, published_s=37.83),
    Run("1T full", M1T, "a100-80gb", 8, 64, 1, 1, 1, 512, 2048, "full", KORTHIKANTI, published_s=94.42),
    Run("1T selective+SP", M1T, "a100-80gb", 8, 64, 1, 1, 1, 512, 2048, "selective", KORTHIKANTI, published_s=71.49),
)

# MT-NLG 530B on Selene: the 530B GPT above (105 layers, 20480 wide, 128 heads; the paper's 4-pass
# count with V = 51,200 reproduces its 126 TFLOP/s from 60.1 s). t=8, p=35, d = servers·8/280,
# global batch 1920, sequences of 2048, full recomputation (DeepSpeed's pipeline engine: 1F1B,
# no interleaving, gradients reduced after the flush). NOT STATED, chosen: micro-batch 1 (what
# Korthikanti et al. ran the same model with on the same machine), ZeRO 0, 16-bit (fp16 and bf16
# have the same A100 peak, so the choice does not move the prediction).
NLG = gpt("mt-nlg-530b", 20480, 128, 105, source=MTNLG)
MTNLG_RUNS = tuple(
    Run(f"MT-NLG {gpus} GPUs", NLG, "a100-80gb", 8, 35, gpus // 280, 1, 1, 1920, 2048, "full", MTNLG,
        published_s=seconds, dtype="bf16")
    for gpus, seconds in ((2240, 60.1), (2800, 50.2), (3360, 44.4)))

# BLOOM-176B on Jean Zay: 48 nodes of 8 A100 80GB, NVLink within a node, "4 OmniPath links" per
# node; Omni-Path runs 100 Gb/s a link (Intel Omni-Path 100 series; e.g. wiki.fysik.dtu.dk/
# niflheim/OmniPath: "a 100 Gbit/s Intel OmniPath high speed network fabric"): 4 · 100 Gb/s over
# 8 GPUs is 6.25 GB/s per GPU. 70 layers over 12 ranks with the tied embedding counted as a layer
# at each end: 5, 6 … 6, 5 (README, "Architecture"). bf16, ALiBi (no position table), GeLU,
# LayerNorm, biases, tied embeddings, vocabulary padded to 250,880; Megatron-DeepSpeed's softmax
# keeps the s² scores (no FlashAttention in 2022).
B176 = ModelShape(name="bloom-176b", hidden=14336, num_layers=70, num_heads=112, vocab=250880, mlp="gelu",
                  norm="layernorm", bias=True, tied_embeddings=True, source=BLOOM)
BLOOM_RUN = Run("BLOOM-176B", B176, "a100-80gb", 4, 12, 8, 1, 2, 2048, 2048, "full", BLOOM, published_s=104.70,
                dtype="bf16", zero=1, inter_gbs=4 * 100 / 8 / 8, framework="megatron")

# OPT-175B: t=8 and FSDP over 992/8 = 124 ranks without resharding after forward (ZeRO-2's
# traffic: gradients reduce-scattered during backward, weights gathered once a step); per-GPU
# batch (2·1024·1024 // 124) // 2048 = 8 sequences, one micro-batch a step, 992 sequences in all.
# Full recomputation, fp16, learned positions (2048), ReLU, LayerNorm, biases, tied embeddings.
# NOT STATED: the cluster's network (the DGX A100 rows are taken) and how the 147 TFLOP/s count
# FLOPs (the Megatron rule is taken; counting 3 passes instead of 4 would put the implied step
# about 25% shorter). "Up to": the published figure is a best, not an average.
O175 = ModelShape(name="opt-175b", hidden=12288, num_layers=96, num_heads=96, vocab=50272, mlp="relu",
                  norm="layernorm", bias=True, tied_embeddings=True, learned_positions=2048, source=OPT)
OPT_RUN = Run("OPT-175B", O175, "a100-80gb", 8, 1, 124, 1, 8, 992, 2048, "full", OPT, published_tflops=147,
              flops_rule="megatron", zero=2, overlap_dp=True)

# Llama 3 405B, Table 4's two 8K-context rows (the 128K row needs context parallelism, which the
# model does not have). 16 stages with one layer fewer on the first and last: 7, 8 … 8, 7. bf16,
# FlashAttention-style attention, no recomputation, FSDP as ZeRO-2 (weights kept after forward),
# overlapped; 400 Gbps per GPU is the H100 network row. NOT STATED, chosen: micro-batch 1 (one
# 8,192-token sequence; Batch size/DP = 32 and 16 sequences make m = 32 and 16) and V = 2 virtual
# stages per rank (the smallest interleaving, as the paper's own Figure 6 draws: 8 stages on 4
# ranks); main() prints V = 1, 4 and 8 beside it.
L405 = ModelShape(name="llama3-405b", hidden=16384, num_layers=126, num_heads=128, num_kv_heads=8, ffn=53248,
                  vocab=128256, mlp="swiglu", norm="rmsnorm", bias=False, tied_embeddings=False, source=LLAMA3)
LLAMA3_RUNS = tuple(
    Run(f"Llama3 405B {gpus} GPUs", L405, "h100", 8, 16, dp, 2, 1, dp * per_dp, 8192, "none", LLAMA3,
        published_tflops=tflops, flops_rule="palm", attention="flash", dtype="bf16", zero=2, overlap_dp=True,
        framework="megatron")
    for gpus, dp, per_dp, tflops in ((8192, 64, 32, 430), (16384, 128, 16, 400)))

OTHER_RUNS = (*MTNLG_RUNS, BLOOM_RUN, OPT_RUN, *LLAMA3_RUNS)
RUNS = KORTHIKANTI_RUNS + OTHER_RUNS


def network(run: Run):
    return network_for(get_gpu(run.gpu), inter_gbs=run.inter_gbs)


def predict(run: Run, **changes) -> dict:
    """The run's step time by part (ms), its memory per GPU and whether that fits."""
    from dataclasses import replace

    run = replace(run, **changes)
    gpu = get_gpu(run.gpu)
    w = Workload(batch=run.batch, seq=run.seq, tp=run.tp, dtype=run.dtype, attention=run.attention)
    times = layer_times(run.shape, w, gpu=gpu, params=SPEC)
    parts = step_arrays(times, run.shape, w, pp=run.pp, vp=run.vp, dp=run.dp, ep=1, zero=run.zero,
                        recompute=RECOMPUTE.index(run.recompute), micro_batches=run.micro_batches,
                        network=network(run), params=SPEC, precision=PRECISIONS["mixed"],
                        overlap_dp=run.overlap_dp)
    # With uneven stages memory is the fullest stage's, each with its own layers, as plan counts it.
    memory = Memory(**{k: float(v) for k, v in training_arrays(
        run.shape, seq=run.seq, dtype_bytes=w.dtype_bytes, attention=run.attention, tp=run.tp, pp=run.pp,
        dp=run.dp, vp=run.vp, ep=1, zero=run.zero, recompute=RECOMPUTE.index(run.recompute), batch=run.batch,
        micro_batches=run.micro_batches, precision=PRECISIONS["mixed"], framework=FRAMEWORKS[run.framework]).items()})
    return {k: float(v) for k, v in parts.items()} | {"memory": memory, "fits": memory.fits(gpu)}


def _row(run: Run, got: dict) -> str:
    layout = f"{run.tp} {run.pp}×{run.vp} {run.dp} {run.batch} {run.micro_batches}"
    step = got["total_ms"] / 1e3
    said = run.published_text
    if run.published_tflops is not None:  # the prediction in the published unit too
        said += f" ({run.step_flops(run.flops_rule) / (run.gpus * step * 1e12):.0f} predicted)"
    share = lambda k: f"{got[k] / got['total_ms']:.1%}"
    return (f"{run.label:22} {run.gpus:6} {layout:>18} {said:>27} {run.published_step_s:9.2f} {step:9.2f} "
            f"{step / run.published_step_s - 1:+7.1%} {share('bubble_ms'):>6} {share('recompute_ms'):>6} "
            f"{share('tp_comm_ms'):>6} {share('dp_comm_ms'):>6} {got['memory'].total_bytes / 2**30:6.1f}"
            + ("" if got["fits"] else " (over)"))


def table(runs) -> list[float]:
    print(f"{'run':22} {'GPUs':>6} {'t p×v d b m':>18} {'published (predicted)':>27} {'publ. s':>9} "
          f"{'pred. s':>9} {'error':>7} {'bubble':>6} {'recomp':>6} {'tp':>6} {'dp':>6} {'GiB':>6}")
    errors = []
    for run in runs:
        got = predict(run)
        errors.append(got["total_ms"] / 1e3 / run.published_step_s - 1)
        print(_row(run, got))
    print(f"mean |error| {sum(map(abs, errors)) / len(errors):.1%}, largest {max(map(abs, errors)):.1%}")
    return errors


def plan_line(run: Run) -> str:
    used = predict(run)["total_ms"]
    head = (f"{run.label:22} used t={run.tp} p={run.pp}×{run.vp} d={run.dp} b={run.batch} {run.recompute} "
            f"zero={run.zero}: {used / 1e3:.2f} s predicted; ")
    try:
        result = plan(run.shape, gpus=run.gpus, gpu=cost_model(run.gpu, spec_only=True),
                      global_batch_tokens=run.global_batch * run.seq, seq=run.seq, dtype=run.dtype,
                      attention=run.attention, framework=run.framework, inter_gbs=run.inter_gbs,
                      overlap_dp=run.overlap_dp, top=1)
    except ShapewiseError:  # no layout at all
        return head + "plan considers no layout"
    if not result.plans:
        return head + f"plan finds no layout that fits ({result.considered} considered)"
    best = result.plans[0]
    return head + (f"plan: {best.layout_text()}: {best.step_ms / 1e3:.2f} s ({used / best.step_ms - 1:+.1%} faster), "
                   f"{best.memory.total_bytes / 2**30:.1f} GiB")


def main() -> int:
    print("Korthikanti et al. 2022 on Selene (time per iteration stated):")
    table(KORTHIKANTI_RUNS)
    print("\nOther sources (TFLOP/s rows: the published step time is the one the stated TFLOP/s imply):")
    table(OTHER_RUNS)
    print("\nLlama 3 405B with the virtual stages it does not state (V=2 above):")
    for run in LLAMA3_RUNS:
        for v in (1, 4, 8):
            got = predict(run, vp=v)
            print(f"  {run.label} V={v}: {got['total_ms'] / 1e3:.2f} s "
                  f"({got['total_ms'] / 1e3 / run.published_step_s - 1:+.1%}), "
                  f"bubble {got['bubble_ms'] / got['total_ms']:.1%}, {got['memory'].total_bytes / 2**30:.1f} GiB")
    print("\nplan's choice for the same model, GPUs, global batch, attention and data-parallel overlap:")
    for run in (*KORTHIKANTI_RUNS[1::2], MTNLG_RUNS[0], BLOOM_RUN, OPT_RUN, *LLAMA3_RUNS):
        print(plan_line(run))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
