"""Which SDPA backend torch runs at head dims that are not multiples of 8, and at what rate (benchmarks/RESULTS.md,
"head dims not a multiple of 8, measured"): for each head dim, which backends take a causal call at all, the one
torch picks by default (torch._fused_sdp_choice), the kernels its forward runs, and the default's time against the
unfused ops (score BMM, mask, softmax, BMM over V) over three calls: a training forward and its backward (one
sequence of 8 heads over 2,048 tokens, causal), and decoding (256 sequences × heads, one query over 2,048 keys).
Written as JSON to the path given, and printed.

PYTHONPATH=src python3 benchmarks/archive/sdpa_odd_head_dims.py OUT.json   (on a GPU; about a minute)
"""

import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from shapewise.bench import _attention
from shapewise.measure import time_fn

HEAD_DIMS = (64, 72, 80, 84, 96, 100, 104, 112, 120, 124, 128, 36, 44, 52, 160, 200, 250, 256)
BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)
DEVICE = "cuda"  # "cpu" runs the script through, as a check of itself only
CALLS = {"train": dict(batch=1, heads=8, q_len=2048, kv_len=2048, causal=True),
         "decode": dict(batch=256, heads=1, q_len=1, kv_len=2048, causal=False)}


def takes(d: int) -> dict:
    """Which backends run a causal call at head dim d, and which one the default picks."""
    q = torch.randn(1, 8, 512, d, device=DEVICE, dtype=torch.bfloat16)
    out = {}
    for backend in BACKENDS:
        try:
            with sdpa_kernel(backend):
                torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
            torch.cuda.synchronize()
            out[backend.name] = True
        except RuntimeError:
            out[backend.name] = False
    chosen = torch._fused_sdp_choice(q, q, q, is_causal=True)
    out["default"] = next((name for name, b in SDPBackend.__members__.items() if int(getattr(b, "value", b)) == int(chosen)),
                          str(chosen))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        torch.cuda.synchronize()
    out["kernels"] = sorted({e.name[:90] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
    return out


def timed(d: int, call: str, backend: str, pass_: str) -> float | None:
    """The median ms of one call at head dim d by `backend` ("default" or "unfused"), None where it fails."""
    c = CALLS[call]
    try:
        fn, context = _attention(torch, DEVICE, batch=c["batch"], heads=c["heads"], kv_heads=c["heads"],
                                 q_len=c["q_len"], kv_len=c["kv_len"], head_dim=d, causal=c["causal"],
                                 backend=backend, pass_=pass_, dtype="bf16")
        with context:
            return time_fn(fn, device=DEVICE, warmup_ms=10, budget_ms=40).median_ms
    except RuntimeError as err:
        print(f"  d={d} {call} {backend} {pass_}: {str(err).splitlines()[0][:100]}")
        return None


def main() -> int:
    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "calls": CALLS, "head_dims": {}}
    print(out["torch"], out["gpu"])
    for d in HEAD_DIMS:
        row = takes(d)
        for call, passes in (("train", ("fwd", "fwdbwd")), ("decode", ("fwd",))):
            for pass_ in passes:
                for backend in ("default", "unfused"):
                    row[f"{call} {pass_} {backend} ms"] = timed(d, call, backend, pass_)
        out["head_dims"][d] = row
        print(d, {k: v for k, v in row.items() if k != "kernels"}, row["kernels"][:3])
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
