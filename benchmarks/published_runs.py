"""Predicted against published: the iteration times of large Megatron-LM runs, from their stated
model, cluster and parallel configuration, and plan's own choice for the same model and cluster.

Source of every number (looked up, not remembered):
- Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
  arXiv:2205.05198, Table 3 (models, parallel configuration, global batch) and Table 4 / Figure 9
  (time per iteration on NVIDIA's Selene, A100 80GB, with full recomputation and with selective
  recomputation plus sequence parallelism). The same rows, as configurations, are in Calculon's
  validation set (github.com/calculon-ai/calculon: calculon/megatron/validation.py holds the
  times "reported here: https://arxiv.org/pdf/2205.05198.pdf"; examples/{22B,175B,530B,1T}.json the
  models; validation/*_{full,seqsel}.json the configurations: t, p, d, global batch, micro-batch,
  interleaving, recompute).
- Selene's links: DGX A100 nodes, NVLink 3 within a node and 8 HDR InfiniBand NICs per node
  (parallel.SCALE_OUT cites the DGX A100 datasheet).
The GPT models there have a vocabulary of 51,200 (GPT-2's, padded by Megatron to a multiple of 128·t),
learned positions, GeLU, LayerNorm, tied embeddings, sequences of 2048, fp16, and attention without
FlashAttention (2022's Megatron core attention: score BMM, softmax, BMM).

No profile exists for the A100: these predictions use the GPU table's spec model (cost.SPEC).

    PYTHONPATH=src python3 benchmarks/published_runs.py
"""

from __future__ import annotations

from dataclasses import dataclass

from shapewise.cost import SPEC
from shapewise.hardware import get_gpu
from shapewise.memory import FRAMEWORKS, PRECISIONS, estimate
from shapewise.parallel import (
    RECOMPUTE,
    Parallelism,
    layer_times,
    network_for,
    step_arrays,
)
from shapewise.plan import plan
from shapewise.shapes import ModelShape, Workload

KORTHIKANTI = "Korthikanti et al. 2022, arXiv:2205.05198, Tables 3-4 (Calculon validation set)"
_GPT = dict(vocab=51200, learned_positions=2048, mlp="gelu", norm="layernorm", bias=True, tied_embeddings=True)


def gpt(name, hidden, heads, layers):
    return ModelShape(name=name, hidden=hidden, num_heads=heads, num_layers=layers, source=KORTHIKANTI, **_GPT)


@dataclass(frozen=True)
class Run:
    label: str
    shape: ModelShape
    gpu: str
    tp: int
    pp: int
    dp: int
    vp: int
    batch: int  # micro-batch
    global_batch: int  # sequences
    seq: int
    recompute: str
    attention: str
    published_s: float  # time per iteration
    source: str


M22, M175, M530, M1T = gpt("gpt-22b", 6144, 64, 48), gpt("gpt-175b", 12288, 96, 96), \
    gpt("gpt-530b", 20480, 128, 105), gpt("gpt-1t", 25600, 160, 128)
RUNS = (
    Run("22B full", M22, "a100", 8, 1, 1, 1, 4, 4, 2048, "full", "unfused", 1.42, KORTHIKANTI),
    Run("22B selective+SP", M22, "a100", 8, 1, 1, 1, 4, 4, 2048, "selective", "unfused", 1.10, KORTHIKANTI),
    Run("175B full", M175, "a100", 8, 8, 1, 3, 1, 64, 2048, "full", "unfused", 18.13, KORTHIKANTI),
    Run("175B selective+SP", M175, "a100", 8, 8, 1, 3, 1, 64, 2048, "selective", "unfused", 13.75, KORTHIKANTI),
    Run("530B full", M530, "a100", 8, 35, 1, 3, 1, 280, 2048, "full", "unfused", 49.05, KORTHIKANTI),
    Run("530B selective+SP", M530, "a100", 8, 35, 1, 3, 1, 280, 2048, "selective", "unfused", 37.83, KORTHIKANTI),
    Run("1T full", M1T, "a100", 8, 64, 1, 1, 1, 512, 2048, "full", "unfused", 94.42, KORTHIKANTI),
    Run("1T selective+SP", M1T, "a100", 8, 64, 1, 1, 1, 512, 2048, "selective", "unfused", 71.49, KORTHIKANTI),
)


def predict(run: Run, *, framework: str = "megatron-gpt") -> dict:
    gpu = get_gpu(run.gpu)
    w = Workload(batch=run.batch, seq=run.seq, tp=run.tp, dtype="fp16", attention=run.attention)
    m = run.global_batch // (run.batch * run.dp)
    times = layer_times(run.shape, w, gpu=gpu, params=SPEC)
    parts = step_arrays(times, run.shape, w, pp=run.pp, vp=run.vp, dp=run.dp, ep=1, zero=0,
                        recompute=RECOMPUTE.index(run.recompute), micro_batches=m,
                        network=network_for(gpu), params=SPEC, precision=PRECISIONS["mixed"], overlap_dp=False)
    memory = estimate(run.shape, w, Parallelism(pp=run.pp, dp=run.dp, vp=run.vp, recompute=run.recompute,
                                                micro_batches=m), framework=FRAMEWORKS[framework])
    return {k: float(v) for k, v in parts.items()} | {"memory": memory, "fits": memory.fits(gpu)}


def main() -> int:
    print(f"{'run':20} {'GPUs':>5} {'t p×v d b m':>16} {'published s':>11} {'predicted s':>11} {'error':>7}"
          f"  {'bubble':>6} {'recompute':>9} {'tp comm':>7} {'memory GiB':>10}")
    errors = []
    for run in RUNS:
        got = predict(run)
        m = run.global_batch // (run.batch * run.dp)
        error = got["total_ms"] / 1e3 / run.published_s - 1
        errors.append(abs(error))
        layout = f"{run.tp} {run.pp}×{run.vp} {run.dp} {run.batch} {m}"
        print(f"{run.label:20} {run.tp * run.pp * run.dp:5} {layout:>16} {run.published_s:11.2f} "
              f"{got['total_ms'] / 1e3:11.2f} {error:+7.1%}  {got['bubble_ms'] / got['total_ms']:6.1%} "
              f"{got['recompute_ms'] / got['total_ms']:9.1%} {got['tp_comm_ms'] / got['total_ms']:7.1%} "
              f"{got['memory'].total_bytes / 2**30:10.1f}")
    print(f"mean |error| {sum(errors) / len(errors):.1%}, largest {max(errors):.1%}")
    print("\nplan's choice for the same model, GPUs and global batch (flash attention off, as these runs had it):")
    for run in RUNS[1::2]:
        gpus = run.tp * run.pp * run.dp
        result = plan(run.shape, gpus=gpus, gpu=run.gpu, global_batch_tokens=run.global_batch * run.seq, seq=run.seq,
                      params=SPEC, dtype="fp16", attention=run.attention, framework="megatron-gpt", top=1)
        used = predict(run)["total_ms"]
        if result.plans:
            best = result.plans[0]
            print(f"{run.shape.name:10} used t={run.tp} p={run.pp}×{run.vp} d={run.dp} b={run.batch} "
                  f"{run.recompute}: {used / 1e3:.2f} s predicted; plan: {best.layout_text()}: "
                  f"{best.step_ms / 1e3:.2f} s ({used / best.step_ms - 1:+.1%} faster), {best.memory.total_bytes / 2**30:.1f} GiB")
        else:
            print(f"{run.shape.name:10} plan finds no layout that fits ({result.considered} considered)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
