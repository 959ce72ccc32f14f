"""Run under torchrun with the gloo backend: each rank's tensor-parallel block, gathered, equals the full block."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn

from shapewise.layers import build_layer, build_tp_layer, layer_inputs
from shapewise.ops import layer_ops
from shapewise.shapes import ModelShape, Workload

dist.init_process_group("gloo")
rank, tp = dist.get_rank(), dist.get_world_size()
results = []
calls = {"all_gather": 0, "reduce_scatter": 0}


def counted(name):
    run = getattr(dist_fn, name)

    def call(*args):
        calls[name] += 1
        return run(*args)
    return call


shapes = (ModelShape("llama", 64, 1, 4, 100, num_kv_heads=2, ffn=96, mlp="swiglu", norm="rmsnorm", bias=False),
          ModelShape("gpt", 64, 1, 4, 100, learned_positions=64),
          ModelShape("neox", 64, 1, 8, 100, parallel_attn=True),
          ModelShape("falcon", 64, 1, 8, 100, num_kv_heads=2, bias=False, parallel_attn=True, norms_per_layer=1),
          ModelShape("gptj", 64, 1, 8, 100, bias_scope="mlp", parallel_attn=True, norms_per_layer=1),
          # one kv head, held by every rank: multi-query attention with QKV biases
          ModelShape("mqa", 64, 1, 4, 100, num_kv_heads=1, ffn=128, mlp="swiglu", norm="rmsnorm", bias=False,
                     qkv_bias=True))
for shape in shapes:
    full = build_layer(shape, dtype="fp32", seed=3)
    x = layer_inputs(shape, batch=2, seq=16, dtype="fp32", seed=5)
    want = full(x)
    layer = build_tp_layer(shape, tp=tp, rank=rank, dtype="fp32", seed=3)
    train = Workload(batch=2, seq=16, tp=tp, mode="train")
    qkv_width = next(op.n for op in layer_ops(shape, train) if op.name == "attn/qkv")
    assert layer.part.attn.qkv.weight.shape[0] == qkv_width, (shape.name, layer.part.attn.qkv.weight.shape, qkv_width)
    # The layer's forward runs the collectives the cost model counts for one layer.
    calls.update(all_gather=0, reduce_scatter=0)
    gather, scatter = dist_fn.all_gather, dist_fn.reduce_scatter
    dist_fn.all_gather, dist_fn.reduce_scatter = counted("all_gather"), counted("reduce_scatter")
    mine = layer(x.chunk(tp, dim=1)[rank].clone().requires_grad_(True))
    dist_fn.all_gather, dist_fn.reduce_scatter = gather, scatter
    priced = {op.family: op.count for op in layer_ops(shape, Workload(batch=2, seq=16, tp=tp, mode="prefill"))
              if op.name in ("tp/all_gather", "tp/reduce_scatter")}
    assert calls == priced, (shape.name, calls, priced)
    got = torch.cat(torch.distributed.nn.functional.all_gather(mine.contiguous()), dim=1)
    err = ((got - want).norm() / want.norm()).item()
    mine.sum().backward()
    results.append(err)
if rank == 0:
    print("errors", results)
    assert all(e < 1e-5 for e in results), results
del full, layer, mine, got, want, x  # release the graphs that hold collectives before the ranks part
dist.barrier()
dist.destroy_process_group()
sys.stdout.flush()
os._exit(0)  # interpreter shutdown can abort on torch's collective threads; the work is done
