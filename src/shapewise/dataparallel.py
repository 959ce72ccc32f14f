"""Data parallelism measured: a training step of a whole model replicated with torch's DDP (gradients
all-reduced in buckets while backward runs) or sharded with torch's FSDP (fully_shard, ZeRO-3: weights
gathered per block for forward and backward, gradients reduce-scattered), on the ranks of a process
group already set up (gloo on the CPU, NCCL on GPUs). The model is pipeline.build_chunk's whole
model: embedding, the decoder blocks, final norm and output layer.

torch is imported only inside functions.
"""

from __future__ import annotations

import time

from .errors import ShapewiseError
from .measure import free_memory

KINDS = ("ddp", "fsdp")


def build_model(shape, *, device="cpu", dtype="fp32", attention="flash", seed: int = 0):
    from .pipeline import Layout, build_chunk

    return build_chunk(shape, Layout(1, 1), 0, device=device, dtype=dtype, attention=attention, seed=seed)


def wrap(model, kind: str, *, device="cpu"):
    """The model replicated (ddp) or sharded block by block (fsdp) over the default process group."""
    import torch
    import torch.distributed as dist

    if kind not in KINDS:
        raise ShapewiseError(f"unknown data parallelism {kind!r}; use {' or '.join(KINDS)}")
    device = torch.device(device)
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for block in model.blocks:  # one all-gather per block, overlapped with the previous block's compute
        fully_shard(block, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def train_step(model, optimizer, tokens, targets) -> float:
    """Forward, loss, backward and (given an optimizer) its step; the rank's loss."""
    from .pipeline import micro_batch_loss

    for p in model.parameters():
        p.grad = None
    loss = micro_batch_loss(model(tokens), targets, 1)
    loss.backward()
    if optimizer is not None:
        optimizer.step()
    return float(loss.detach())


def time_steps(shape, kind: str, *, batch: int, seq: int, device="cpu", dtype="fp32", warmup: int = 2,
               steps: int = 5, seed: int = 0) -> dict:
    """Median wall time of `steps` AdamW training steps of `shape` on every rank (micro-batch `batch` of
    `seq` tokens each), the slowest rank's per step; every rank runs the same number of steps."""
    import torch
    import torch.distributed as dist

    cuda = torch.device(device).type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    model = wrap(build_model(shape, device=device, dtype=dtype, seed=seed), kind, device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    gen = torch.Generator(device="cpu").manual_seed(seed + dist.get_rank())
    tokens, targets = (torch.randint(0, shape.vocab, (batch, seq), generator=gen).to(device) for _ in range(2))
    samples = []
    for i in range(warmup + steps):
        dist.barrier()
        sync()
        start = time.perf_counter()
        train_step(model, optimizer, tokens, targets)
        sync()
        if i >= warmup:
            samples.append((time.perf_counter() - start) * 1e3)
    slowest = torch.tensor(samples, dtype=torch.float64, device=device if cuda else "cpu")
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    per_step = sorted(slowest.tolist())
    del model, optimizer
    free_memory(device)
    return {"step_ms": per_step[len(per_step) // 2], "samples_ms": per_step}
