"""Measured peak memory of real training steps against memory.estimate, on one GPU.

Each configuration builds a whole model from shapewise.layers' blocks (embedding, learned positions
where the shape has them, L blocks, final norm, output layer), runs AdamW steps with persistent
gradients (zero_grad(set_to_none=False), as DDP and FSDP keep them) and reads
torch.cuda.max_memory_allocated over steps after the first (which creates the optimizer state). The
loss is F.cross_entropy on fp32 logits. Precision "bf16": bf16 weights and torch's AdamW (foreach) on
them; "mixed": bf16 weights and gradients, fp32 master weights in a fused AdamW, each gradient
upcast at the step. Full recomputation wraps each block in torch.utils.checkpoint.

    PYTHONPATH=src python3 benchmarks/h200_memory.py --out results.json
    PYTHONPATH=src python3 benchmarks/h200_memory.py --compare benchmarks/results/h200-memory/h200-memory.json

--compare prints a stored run against the estimate as the code has it now (no GPU needed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from shapewise.memory import GIB, estimate
from shapewise.parallel import Parallelism
from shapewise.shapes import ModelShape, Workload

_LLAMA = dict(mlp="swiglu", norm="rmsnorm", bias=False, tied_embeddings=False)
_GPT = dict(mlp="gelu", norm="layernorm", bias=True, tied_embeddings=True, learned_positions=2048)
BASE = ModelShape(name="llama-1b", hidden=2048, num_layers=8, num_heads=16, ffn=5632, vocab=32000, **_LLAMA)
GPT = ModelShape(name="gpt-1b", hidden=2048, num_layers=8, num_heads=16, vocab=50304, **_GPT)

# (label, shape, micro-batch, sequence, attention, recompute, precision)
CONFIGS = (
    ("base", BASE, 4, 2048, "flash", "none", "bf16"),
    ("full recompute", BASE, 4, 2048, "flash", "full", "bf16"),
    ("micro-batch 8", BASE, 8, 2048, "flash", "none", "bf16"),
    ("micro-batch 1", BASE, 1, 2048, "flash", "none", "bf16"),
    ("GQA 16/4", BASE.replace(name="llama-gqa", num_kv_heads=4), 4, 2048, "flash", "none", "bf16"),
    ("MoE 8 top-2", BASE.replace(name="llama-moe", num_layers=4, num_experts=8, top_k=2, expert_ffn=2816),
     4, 2048, "flash", "none", "bf16"),
    ("vocab 128256", BASE.replace(name="llama-v128k", vocab=128256), 4, 2048, "flash", "none", "bf16"),
    ("GPT, GeLU, LayerNorm", GPT, 4, 2048, "flash", "none", "bf16"),
    ("GPT, unfused attention", GPT, 2, 1024, "unfused", "none", "bf16"),
    ("parallel attention", GPT.replace(name="neox-1b", parallel_attn=True, tied_embeddings=False,
                                       learned_positions=0), 4, 2048, "flash", "none", "bf16"),
    ("mixed precision", BASE, 4, 2048, "flash", "none", "mixed"),
    ("mixed, full recompute", BASE, 4, 2048, "flash", "full", "mixed"),
    ("mixed, micro-batch 1, s=512", BASE, 1, 512, "flash", "none", "mixed"),
)


def build_model(shape: ModelShape, *, device: str, attention: str, recompute: str, seed: int = 0):
    """A callable loss(ids, targets) over a whole model, and its parameters."""
    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    from shapewise.layers import build_layer

    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device != "cpu" else torch.float32
    name = "bf16" if dtype == torch.bfloat16 else "fp32"
    blocks = [build_layer(shape.replace(num_layers=1), device=device, dtype=name, attention=attention, seed=seed + i)
              for i in range(shape.num_layers)]

    def table(rows):
        return torch.nn.Parameter(torch.randn(rows, shape.hidden, device=device, dtype=dtype) * 0.02)

    embed = table(shape.vocab)
    head = embed if shape.tied_embeddings else table(shape.vocab)
    positions = table(shape.learned_positions) if shape.learned_positions else None
    norm_weight = torch.nn.Parameter(torch.ones(shape.hidden, device=device, dtype=dtype))
    norm_bias = torch.nn.Parameter(torch.zeros_like(norm_weight)) if shape.norm == "layernorm" else None

    def norm(x):
        if norm_bias is None:
            return F.rms_norm(x, (shape.hidden,), norm_weight, 1e-5)
        return F.layer_norm(x, (shape.hidden,), norm_weight, norm_bias, 1e-5)

    params = [embed, *([] if shape.tied_embeddings else [head]), *([positions] if positions is not None else []),
              norm_weight, *([norm_bias] if norm_bias is not None else []), *(p for b in blocks for p in b.parameters())]

    def loss(ids, targets):
        x = F.embedding(ids, embed)
        if positions is not None:
            x = x + positions[: ids.shape[1]]
        for block in blocks:
            x = checkpoint(block, x, use_reentrant=False) if recompute == "full" else block(x)
        logits = F.linear(norm(x), head)
        return F.cross_entropy(logits.float().view(-1, shape.vocab), targets.view(-1))

    return loss, params


def make_step(params, precision: str):
    """One optimizer step after backward: bf16 AdamW (foreach) on the weights, or fp32 masters."""
    import torch

    if precision == "bf16":
        opt = torch.optim.AdamW(params, lr=1e-4)

        def step():
            opt.step()
            opt.zero_grad(set_to_none=False)
        return step
    masters = [p.detach().float().requires_grad_(True) for p in params]
    opt = torch.optim.AdamW(masters, lr=1e-4, fused=masters[0].is_cuda)

    @torch.no_grad()
    def step():
        for p, m in zip(params, masters):
            m.grad = p.grad.float()
        opt.step()
        for p, m in zip(params, masters):
            m.grad = None
            p.copy_(m)
            p.grad.zero_()
    return step


def measure(shape, batch, seq, attention, recompute, precision, *, device: str = "cuda", steps: int = 3) -> dict:
    import torch

    loss_fn, params = build_model(shape, device=device, attention=attention, recompute=recompute)
    step = make_step(params, precision)
    g = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(0, shape.vocab, (batch, seq), generator=g).to(device)
    targets = torch.randint(0, shape.vocab, (batch, seq), generator=g).to(device)
    cuda = device.startswith("cuda")
    for i in range(steps):
        if i == 1 and cuda:  # the first step made the optimizer state and the gradients
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        loss = loss_fn(ids, targets)
        loss.backward()
        step()
    out = {"loss": float(loss.detach())}
    if cuda:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        out.update(max_allocated=torch.cuda.max_memory_allocated(), max_reserved=torch.cuda.max_memory_reserved(),
                   reserved=torch.cuda.memory_reserved(), outside_allocator=total - free - torch.cuda.memory_reserved())
    del loss_fn, params, step
    return out


def predicted(shape, batch, seq, attention, recompute, precision):
    w = Workload(batch=batch, seq=seq, attention=attention)
    return estimate(shape, w, Parallelism(recompute=recompute), precision=precision, framework="torch")


HEADER = f"{'config':32} {'measured GiB':>12} {'estimate GiB':>12} {'error':>7}   estimate's parts"


def compare(path: str) -> int:
    rows = json.load(open(path))["rows"]
    print(HEADER)
    for (label, shape, *run), row in zip(CONFIGS, rows):
        assert row["label"] == label, "the stored run has other configurations"
        est = predicted(shape, *run)
        print(f"{label:32} {row['max_allocated'] / GIB:12.2f} {est.allocated_bytes / GIB:12.2f} "
              f"{est.allocated_bytes / row['max_allocated'] - 1:+7.1%}   {est.text()}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON file for the results")
    ap.add_argument("--compare", metavar="JSON", help="a stored run against the estimate as it is now")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(args.compare)
    if not args.out:
        ap.error("give --out FILE (measure) or --compare FILE")
    import torch

    rows = []
    print(HEADER)
    for label, shape, batch, seq, attention, recompute, precision in CONFIGS:
        start = time.time()
        got = measure(shape, batch, seq, attention, recompute, precision)
        est = predicted(shape, batch, seq, attention, recompute, precision)
        error = est.allocated_bytes / got["max_allocated"] - 1
        rows.append({"label": label, "shape": shape.name, "params": shape.params, "batch": batch, "seq": seq,
                     "attention": attention, "recompute": recompute, "precision": precision, **got,
                     "estimate_bytes": est.allocated_bytes, "estimate_parts": est.as_dict(), "error": error,
                     "seconds": time.time() - start})
        print(f"{label:32} {got['max_allocated'] / GIB:12.2f} {est.allocated_bytes / GIB:12.2f} {error:+7.1%}   "
              f"{est.text()}", flush=True)
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
