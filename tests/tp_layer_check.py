"""Run under torchrun with the gloo backend: each rank's tensor-parallel block, gathered, equals the full block,
and its gradients, once sync_replica_grads has summed the replicated ones, are the full block's rows of them."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn

from shapewise.layers import build_layer, build_tp_layer, layer_inputs, sync_replica_grads
from shapewise.ops import layer_ops, replica_grad_ops
from shapewise.parallel import kv_head_params, whole_params
from shapewise.shapes import ModelShape, Workload

dist.init_process_group("gloo")
rank, tp = dist.get_rank(), dist.get_world_size()
results = []
calls = {"all_gather": 0, "reduce_scatter": 0}
reduced = []  # (ranks, elements) of each all-reduce sync_replica_grads runs


def counted(name):
    run = getattr(dist_fn, name)

    def call(*args):
        calls[name] += 1
        return run(*args)
    return call


def all_reduce(tensor, group=None):
    reduced.append((dist.get_world_size(group), tensor.numel()))
    return plain_all_reduce(tensor, group=group)


def full_rows(shape, name, full_grad):
    """The rows (or columns) of the full layer's gradient that this rank's parameter `name` holds: query
    head i reads kv head i // (heads / kv heads), so this rank's query heads name its kv heads."""
    H, K, d = shape.num_heads, shape.kv_heads, shape.d_head
    mine = range(rank * H // tp, (rank + 1) * H // tp)
    kv = sorted({i // (H // K) for i in mine})
    width = shape.ffn_width // tp
    cols = slice(rank * width, (rank + 1) * width)
    if name.startswith("attn.qkv"):
        rows = [i * d + j for i in mine for j in range(d)]
        rows += [(H + g) * d + j for g in kv for j in range(d)] + [(H + K + g) * d + j for g in kv for j in range(d)]
        return full_grad[rows]
    if name == "attn.out.weight":
        return full_grad[:, mine.start * d:mine.stop * d]
    if name.startswith(("mlp.up", "mlp.gate")):
        return full_grad[cols]
    if name == "mlp.down.weight":
        return full_grad[:, cols]
    return full_grad  # norms


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
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(7))
    want = full(x)
    want.backward(dy)
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
    mine.backward(dy.chunk(tp, dim=1)[rank])
    # Summing the replicas' gradients runs the all-reduces the cost model prices once a step, over as many ranks.
    reduced.clear()
    plain_all_reduce, dist.all_reduce = dist.all_reduce, all_reduce
    sync_replica_grads(layer)
    dist.all_reduce = plain_all_reduce
    ops = {op.name: op for op in replica_grad_ops(shape.one_layer(), train)}
    assert sorted(n for n, _ in reduced) == sorted(op.k for op in ops.values()), (shape.name, reduced, ops)
    # what every rank holds whole, as the memory and the priced all-reduce count it (parallel.whole_params)
    assert reduced[0] == (tp, whole_params(shape)), (shape.name, reduced, whole_params(shape))
    if "tp/kv_grads" in ops:
        assert reduced[-1] == (ops["tp/kv_grads"].k, kv_head_params(shape)), (shape.name, reduced)
    full_grads = dict(full.named_parameters())
    for name, p in layer.part.named_parameters():
        if name in ("attn.out.bias", "mlp.down.bias"):
            assert not p.requires_grad and not p.any()  # zero, untrained: the block's own bias is added whole
            continue
        ref = full_rows(shape, name, full_grads[name].grad)
        grad_err = ((p.grad - ref).norm() / ref.norm()).item()
        assert grad_err < 1e-4, (shape.name, name, grad_err)
    # the row-parallel outputs' biases, whole on each rank: after the sum, the full layer's gradients
    for bias, name in ((layer.out_bias, "attn.out.bias"), (layer.down_bias, "mlp.down.bias")):
        assert (bias is None) == (name not in full_grads), (shape.name, name)
        if bias is not None:
            ref = full_grads[name].grad
            grad_err = ((bias.grad - ref).norm() / ref.norm()).item()
            assert grad_err < 1e-4, (shape.name, name, grad_err)
    results.append(err)
if rank == 0:
    print("errors", results)
    assert all(e < 1e-5 for e in results), results
del full, layer, mine, got, want, x  # release the graphs that hold collectives before the ranks part
dist.barrier()
dist.destroy_process_group()
sys.stdout.flush()
os._exit(0)  # interpreter shutdown can abort on torch's collective threads; the work is done
