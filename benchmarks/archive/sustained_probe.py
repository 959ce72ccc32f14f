"""Do GEMMs run slower sustained than timed alone? A large GEMM timed as `measure.time_fn` times every
op (after an L2 flush, each call alone), then run back to back for a few seconds as a layer's GEMMs
are, with the SM clock sampled; and, where torch has it, a sliding-window attention through
FlexAttention against the full causal attention the same shape runs through SDPA.

PYTHONPATH=src python3 benchmarks/archive/sustained_probe.py OUT.json   (on a GPU; about a minute)
"""

import json
import subprocess
import sys
import threading
import time

import torch

from shapewise.measure import time_fn


def clocks(stop: threading.Event, out: list) -> None:
    while not stop.is_set():
        line = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True).stdout.strip()
        out.append([time.time(), line])
        time.sleep(0.2)


def sustained(fn, seconds: float) -> list[float]:
    """ms per call over consecutive batches of 20 calls, back to back, for `seconds`."""
    per_call, start = [], time.time()
    while time.time() - start < seconds:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(20):
            fn()
        b.record()
        b.synchronize()
        per_call.append(a.elapsed_time(b) / 20)
    return per_call


def sampled(fn, seconds: float) -> tuple[list[float], list]:
    """sustained(fn, seconds) with the SM clock, power and temperature sampled all along."""
    stop, samples = threading.Event(), []
    thread = threading.Thread(target=clocks, args=(stop, samples))
    thread.start()
    try:
        return sustained(fn, seconds), samples
    finally:
        stop.set()
        thread.join()


def gemm_probe(m: int, n: int, k: int) -> dict:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    fn = lambda: x @ w  # noqa: E731
    alone = time_fn(fn).median_ms
    torch.cuda.synchronize()
    time.sleep(1.0)
    runs, samples = sampled(fn, 4.0)
    return dict(shape=[m, n, k], alone_ms=alone, first_ms=runs[0], last_second_ms=sorted(runs[-max(1, len(runs) // 4):])[len(runs[-max(1, len(runs) // 4):]) // 2],
                batches=len(runs), clocks=samples)


def window_probe() -> dict:
    import torch.nn.functional as F
    out = {}
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError as e:
        return dict(error=str(e))
    for b, h, s, d, w in ((4, 16, 4096, 128, 1024), (2, 16, 8192, 128, 4096), (4, 8, 2048, 256, 1024)):
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        full = time_fn(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)).median_ms  # noqa: B023
        try:
            mask = create_block_mask(lambda b_, h_, i, j: (i >= j) & (i - j < w), None, None, s, s, device="cuda")  # noqa: B023
            compiled = torch.compile(flex_attention)
            start = time.time()
            compiled(q, k, v, block_mask=mask)
            torch.cuda.synchronize()
            compile_s = time.time() - start
            flex = time_fn(lambda: compiled(q, k, v, block_mask=mask)).median_ms  # noqa: B023
            mask_full = create_block_mask(lambda b_, h_, i, j: i >= j, None, None, s, s, device="cuda")
            flex_causal = time_fn(lambda: compiled(q, k, v, block_mask=mask_full)).median_ms  # noqa: B023
            out[f"{b}x{h}x{s}x{d} w{w}"] = dict(sdpa_causal_ms=full, flex_window_ms=flex, flex_causal_ms=flex_causal,
                                                compile_s=compile_s)
        except Exception as e:  # noqa: BLE001 - a probe: say what failed and go on
            out[f"{b}x{h}x{s}x{d} w{w}"] = dict(sdpa_causal_ms=full, error=f"{type(e).__name__}: {e}"[:300])
    return out


def main() -> int:
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  gemms=[gemm_probe(8192, 8192, 8192), gemm_probe(16384, 14336, 4096)], window=window_probe())
    with open(sys.argv[1], "w") as f:
        json.dump(result, f, indent=1)
    for g in result["gemms"]:
        print(g["shape"], f"alone {g['alone_ms']:.3f} first {g['first_ms']:.3f} last second {g['last_second_ms']:.3f}",
              g["clocks"][0][1], "->", g["clocks"][-1][1])
    print(json.dumps(result["window"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
