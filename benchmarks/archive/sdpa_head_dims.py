"""Which SDPA backends torch runs at head dims past 256, and at what rate (benchmarks/RESULTS.md, "head dims
past 256, measured"): causal attention of 2 × 8 heads over 1,024 tokens at head dims 128, 256, 320 and 512,
each backend tried alone, the default timed (20 calls after 3) and its kernel named.

PYTHONPATH=src python3 benchmarks/archive/sdpa_head_dims.py   (on a GPU; seconds)
"""

import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)


def main() -> int:
    sdpa = torch.nn.functional.scaled_dot_product_attention
    print(torch.__version__, torch.cuda.get_device_name())
    for d in (128, 256, 320, 512):
        q = torch.randn(2, 8, 1024, d, device="cuda", dtype=torch.bfloat16)
        runs = []
        for backend in BACKENDS:
            try:
                with sdpa_kernel(backend):
                    sdpa(q, q, q, is_causal=True)
                torch.cuda.synchronize()
                runs.append(f"{backend.name}: runs")
            except RuntimeError:
                runs.append(f"{backend.name}: no")
        for _ in range(3):
            sdpa(q, q, q, is_causal=True)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(20):
            sdpa(q, q, q, is_causal=True)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - start) / 20 * 1e3
        flops = 2 * 2 * 8 * 1024 * 1025 / 2 * 2 * d  # QKᵀ and PV over the causal pairs
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            sdpa(q, q, q, is_causal=True)
            torch.cuda.synchronize()
        kernels = [e.name[:60] for e in prof.events() if e.device_type.name == "CUDA" and "Memset" not in e.name]
        print(f"d {d}: {'; '.join(runs)}; default {ms:.3f} ms, {flops / ms / 1e9:.0f} TFLOP/s, {kernels[:1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
