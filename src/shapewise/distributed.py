"""Measurements across the ranks torchrun started: the process group, collectives (NCCL on GPUs, gloo
on CPUs) and one tensor-parallel layer, each timed with fixed call counts (every rank must run its
collectives equally often) and reported as the slowest rank's median.

torch is imported only inside functions: this module loads without it.
"""

from __future__ import annotations

import atexit
import time

from .cases import COLLECTIVES
from .dtypes import torch_dtype
from .errors import ShapewiseError
from .measure import import_torch


def distributed(device: str) -> tuple[int, int, str] | None:
    """(rank, world size, this rank's device) under torchrun (WORLD_SIZE > 1), with the process
    group set up once: gloo on the CPU, NCCL on GPUs, one GPU per rank. None in a plain process."""
    import os
    from datetime import timedelta

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    torch = import_torch()
    import torch.distributed as dist

    if device.startswith("cuda") and device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(torch.device(device))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(minutes=30))
        # Leaving with the group alive aborts the process (its threads are torn down mid-flight).
        atexit.register(lambda: dist.is_initialized() and dist.destroy_process_group())
    return dist.get_rank(), dist.get_world_size(), device


def gather(records, lost, env, *, store, rank, world, result) -> None:
    """Every rank's results to rank 0, which writes them, each under its own rank's environment."""
    import torch.distributed as dist

    payload = {"rank": rank, "records": records, "lost": lost, "env": env, "measured": result.measured,
               "failed": result.failed, "interrupted": result.interrupted}
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(payload, gathered, dst=0)
    if rank != 0:
        return
    result.measured = result.failed = 0
    for part in gathered:
        env_id = store.environment_id(part["env"])
        for record in part["records"]:
            store.record(env_id=env_id, **record)
        result.measured += part["measured"]
        result.failed += part["failed"]
        result.interrupted |= part["interrupted"]
        result.lost += [f"rank {part['rank']}: {label}" for label in part["lost"]]


def bench_comm(sizes: list[int], ops: list[str], *, store, device: str = "cuda", dtype: str = "bf16",
               warmup: int = 5, iters: int = 20, command: str = "bench comm") -> tuple[int, list[dict]]:
    """Time collectives across the ranks torchrun started; rank 0 stores and returns one row per case.

    Every rank runs the same fixed number of calls (a time budget would let ranks disagree and
    hang); each call starts after a barrier, and the slowest rank's median is the result. `command`: the
    command a run without torchrun is told to start under it."""
    from .measure import Timing, environment
    from .store import case_key

    torch = import_torch()
    import torch.distributed as dist

    ranks = distributed(device)
    if ranks is None:
        raise ShapewiseError(f"{command} needs several ranks: run it under torchrun, e.g. "
                             f"torchrun --nproc-per-node 2 -m shapewise {command} …")
    rank, world, device = ranks
    unknown = sorted(set(ops) - set(COLLECTIVES))
    if unknown:
        raise ShapewiseError(f"unknown collective {', '.join(unknown)}; use {', '.join(COLLECTIVES)}")
    env = environment(device)
    env_id = store.environment_id(env) if rank == 0 else None
    dt = torch_dtype(dtype)
    size_of = torch.tensor([], dtype=dt).element_size()
    rows, done = [], set()
    for op in ops:
        for size in sizes:
            elements = max(world, size // size_of // world * world)  # divisible among the ranks
            nbytes = elements * size_of
            if (op, nbytes) in done:  # an op given twice, or two sizes made the same one: one case
                continue
            done.add((op, nbytes))
            params = dict(op=op, bytes=nbytes, world=world, dtype=dtype, backend=dist.get_backend())
            try:  # a size past the memory fails on some ranks: all must agree to skip it, or they hang
                whole = torch.empty(elements, device=device, dtype=dt).normal_()
                part = torch.empty(elements // world, device=device, dtype=dt)
                failed = ""
            except (RuntimeError, MemoryError) as err:  # torch's OutOfMemoryError is a RuntimeError
                whole = part = None
                failed = f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
            agree = torch.tensor([1.0 if failed else 0.0], device=device if device.startswith("cuda") else "cpu")
            dist.all_reduce(agree, op=dist.ReduceOp.MAX)
            if agree.item():
                if rank == 0:
                    store.record(env_id=env_id, bench="comm", key=case_key({"bench": "comm", **params}),
                                 params=params, bytes=nbytes,
                                 error=failed or "a buffer of this size could not be made on another rank")
                    rows.append(dict(op=op, bytes=nbytes, error=failed or "failed on another rank"))
                whole = part = None
                continue
            # torch renamed the single-tensor collectives (2.13: *_single); older releases have the old names.
            gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
            scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
            call = {"all_reduce": lambda: dist.all_reduce(whole),
                    "all_gather": lambda: gather(whole, part),
                    "reduce_scatter": lambda: scatter(part, whole)}[op]
            for _ in range(warmup):
                call()
            samples = []
            for _ in range(iters):
                dist.barrier()
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                start = time.perf_counter()
                call()
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                samples.append((time.perf_counter() - start) * 1e3)
            slowest = torch.tensor([Timing(tuple(samples)).median_ms], dtype=torch.float64,
                                   device=device if device.startswith("cuda") else "cpu")
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            if rank == 0:
                timing = Timing(tuple(samples))
                ms = float(slowest.item())
                algbw = nbytes / (ms * 1e-3) / 1e9
                busbw = algbw * COLLECTIVES[op] * (world - 1) / world
                store.record(env_id=env_id, bench="comm", key=case_key({"bench": "comm", **params}), params=params,
                             timing=timing, bytes=nbytes,
                             metrics={"slowest_rank_median_ms": ms, "algbw_gbs": algbw, "busbw_gbs": busbw})
                rows.append(dict(op=op, bytes=nbytes, median_ms=ms, algbw_gbs=algbw, busbw_gbs=busbw))
            call = whole = part = None  # free this size's buffers before the next
    dist.barrier()
    return rank, rows


def bench_tp_layer(shape, workload, *, store, device: str = "cuda", warmup: int = 3, reps: int = 10,
                   seed: int = 0) -> tuple[int, list[dict], dict]:
    """One tensor-parallel layer (shapewise.layers.build_tp_layer) on the ranks torchrun started, one
    per tensor-parallel rank, forward+backward and forward; rank 0 stores and returns the slowest rank's
    medians. Fixed call counts: every rank must run its collectives equally often."""
    from .layers import build_tp_layer
    from .measure import Timing, environment, time_fn
    from .shapes import shape_record
    from .store import case_key

    torch = import_torch()
    import torch.distributed as dist

    ranks = distributed(device)
    if ranks is None or ranks[1] != workload.tp:
        raise ShapewiseError(f"a t={workload.tp} layer runs on {workload.tp} ranks: "
                             f"torchrun --nproc-per-node {workload.tp} -m shapewise bench layer … --tp {workload.tp}")
    rank, world, device = ranks
    if workload.seq % world:
        raise ShapewiseError(f"sequence parallelism splits the sequence: --seq must divide by t={world}")
    layer = build_tp_layer(shape, tp=world, rank=rank, device=device, dtype=workload.dtype,
                           attention=workload.attention, seed=seed)
    dt = next(layer.parameters()).dtype
    generator = torch.Generator(device="cpu").manual_seed(seed + rank)
    local = (workload.batch, workload.seq // world, shape.hidden)
    x = torch.randn(*local, generator=generator).to(device, dt).requires_grad_(True)
    dy = torch.randn(*local, generator=generator).to(device, dt)

    def fwd_bwd():
        x.grad = None
        for p in layer.parameters():
            p.grad = None
        torch.autograd.backward(layer(x), dy)

    def fwd():
        with torch.no_grad():
            layer(x)

    env = environment(device)
    env_id = store.environment_id(env) if rank == 0 else None
    rows = []
    passes = (("fwdbwd", fwd_bwd), ("fwd", fwd)) if workload.mode == "train" else (("fwd", fwd),)
    for pass_, fn in passes:
        timing = time_fn(fn, device=device, warmup_calls=warmup, reps=reps, flush_l2=False, cushion=False)
        slowest = torch.tensor([timing.median_ms], dtype=torch.float64,
                               device=device if device.startswith("cuda") else "cpu")
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if rank == 0:
            params = dict(model=shape.name, shape=shape_record(shape), batch=workload.batch, seq=workload.seq,
                          tp=world, attention=workload.attention, dtype=workload.dtype, **{"pass": pass_})
            store.record(env_id=env_id, bench="layer", key=case_key({"bench": "layer", **params}), params=params,
                         timing=Timing(timing.samples_ms), metrics={"slowest_rank_median_ms": float(slowest.item())})
            rows.append({"pass": pass_, "measured_ms": float(slowest.item())})
    dist.barrier()
    return rank, rows, env
