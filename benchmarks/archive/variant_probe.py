"""Where do the variants set's worst candidates part from their predictions? For a few real models and
the neighbour the variants set judged worst (a head dim of 256 instead of 128, or twice the
micro-batch), one layer forward+backward as verify builds it: its ops each timed alone (`bench ops`,
as the judges time them, against the shipped profile's predictions), the layer timed alone (as
verify's rounds time it), and its attention timed alone twice: as `bench` lays out q, k and v
(contiguous heads × tokens) and as the layer does (a view of the fused QKV output, tokens × heads,
transposed), with the kernels each ran.

PYTHONPATH=src python3 benchmarks/archive/variant_probe.py OUT.json   (on a GPU; about a minute)
"""

import dataclasses
import json
import sys
import tempfile

import torch
import torch.nn.functional as F
from layer_power_probe import layer_parts

from shapewise.hf import load_config
from shapewise.measure import time_fn

C = "tests/data/hf"
# (config, batch, changes of the neighbour, its batch): the worst candidates of results/h200-variants-5/.
PAIRS = [("mistral-7b-v0.1", 4, dict(num_heads=16, num_kv_heads=4, head_dim=256), 4),
         ("llama-3.1-8b", 4, dict(num_heads=16, num_kv_heads=4, head_dim=256), 8),
         ("gpt-j-6b", 4, dict(num_heads=32, head_dim=128), 4),
         ("qwen2-7b", 4, dict(num_heads=14, num_kv_heads=2, head_dim=256), 8)]


def kernels(fn) -> list[str]:
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name[:90] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def attention_two_ways(shape, batch: int, seq: int = 2048) -> dict:
    heads, kv, d = shape.num_heads, shape.num_kv_heads or shape.num_heads, shape.head_dim or shape.hidden // shape.num_heads
    gqa = {"enable_gqa": True} if kv != heads else {}
    out = {}
    for layout in ("bench", "layer"):
        if layout == "bench":
            q = torch.randn(batch, heads, seq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            k, v = (torch.randn(batch, kv, seq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in "kv")
            leaves = (q, k, v)
        else:
            qkv = torch.randn(batch, seq, heads + 2 * kv, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            leaves = (qkv,)
            q, k, v = (t.transpose(1, 2) for t in qkv.split([heads, kv, kv], dim=2))
        dout = torch.randn(batch, heads, seq, d, device="cuda", dtype=torch.bfloat16)

        def fwd(q=q, k=k, v=v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)

        def fwd_bwd(leaves=leaves, fwd=fwd, dout=dout):
            for t in leaves:
                t.grad = None
            torch.autograd.backward(fwd(), dout)

        with torch.no_grad():
            f = time_fn(fwd, budget_ms=100).median_ms
        fb = time_fn(fwd_bwd, budget_ms=100).median_ms
        out[layout] = dict(fwd_ms=f, fwd_bwd_ms=fb, kernels=kernels(fwd_bwd))
    return out


def probe(shape, batch: int, db: str) -> dict:
    result = dict(layer_parts(shape, batch, db)[0], heads=shape.num_heads, kv_heads=shape.num_kv_heads,
                  head_dim=shape.head_dim, attention=attention_two_ways(shape, batch))
    torch.cuda.empty_cache()
    return result


def main() -> int:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, batch, changes, new_batch in PAIRS:
            original = load_config(f"{C}/{name}.json")
            for shape, b in ((original, batch), (dataclasses.replace(original, **changes), new_batch)):
                r = probe(shape, b, f"{tmp}/ops.db")
                out.append(r)
                a = r["attention"]
                print(f"{name:16s} h{shape.num_heads} kv{shape.num_kv_heads} d{shape.head_dim} b{b}: predicted "
                      f"{r['predicted_ms']:.2f} ops alone {r['ops_alone_ms']:.2f} layer alone {r['layer_alone_ms']:.2f} ms; "
                      f"attention fwd+bwd as bench {a['bench']['fwd_bwd_ms']:.3f}, as the layer {a['layer']['fwd_bwd_ms']:.3f}",
                      flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)  # the records in the order run: each original, then its neighbour
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
