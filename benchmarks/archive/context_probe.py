"""Does a GEMM's measured time depend on what the GPU ran just before it? A panel of real models'
GEMMs (the `models` set's, seed 7) measured as `shapewise bench` measures each case, in five
contexts on one GPU, with the SM clock and power sampled all along:

  idle      0.3 s of idle GPU before each case (clocks back at their burst value)
  gemms     the panel back to back in a shuffled order, as a sweep of GEMMs alone runs
  hot       0.1 s of 8192³ GEMMs back to back before each case (the power cap reached)
  mixed     each GEMM after one of the set's memory-bound ops, as the models set's sweep runs
  idle2     `idle` again: the repeat noise
  settled   shuffled as `gemms`, each case followed by the pause a sweep now leaves (measure.settle_ms)

PYTHONPATH=src python3 benchmarks/archive/context_probe.py OUT.json [COUNT [CONTEXT ...]]
(on a GPU; about 2 minutes for all six)
"""

import json
import random
import sys
import threading
import time

import torch

from shapewise.bench import MIN_REPS, _measure_one, settle
from shapewise.judges import judge_set_cases
from shapewise.measure import time_fn
from sustained_probe import clocks

TIMING = dict(warmup_ms=3, budget_ms=10, min_reps=MIN_REPS, cuda_graph=False)  # sweep()'s defaults


def panel(count: int):
    drawn = judge_set_cases("models", seed=7, configs=["tests/data/hf"]).cases
    gemms = [c for c in drawn if c.params.get("kind") == "gemm" and 2e9 <= c.flops <= 4e12]
    memory = [c for c in drawn if c.params.get("kind") == "memory" and c.bytes >= 1e7]
    rng = random.Random(7)
    return rng.sample(gemms, min(count, len(gemms))), rng.sample(memory, 40)


def measure(case, settled: bool = False) -> float:
    record = _measure_one(torch, case, case.key, device="cuda", timing=TIMING, time_fn=time_fn)
    if settled:  # the sweep's own pause
        settle(record, device="cuda", warmup_ms=TIMING["warmup_ms"])
    return record["timing"].median_ms if "timing" in record else float("nan")


def run(context: str, gemms, memory, big) -> dict:
    order = list(gemms)
    if context in ("gemms", "settled"):
        random.Random(1).shuffle(order)
    out = {}
    start = time.time()
    for i, case in enumerate(order):
        if context in ("idle", "idle2"):
            torch.cuda.synchronize()
            time.sleep(0.3)
        elif context == "hot":
            end = time.time() + 0.1
            while time.time() < end:
                for _ in range(10):
                    big()
                torch.cuda.synchronize()
        elif context == "mixed":
            measure(memory[i % len(memory)])
        out[case.key] = [time.time(), measure(case, settled=context == "settled")]
    print(f"{context}: {len(order)} cases in {time.time() - start:.0f} s", flush=True)
    return out


def main() -> int:
    path, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 120
    contexts = sys.argv[3:] or ("idle", "gemms", "hot", "mixed", "idle2", "settled")
    gemms, memory = panel(count)
    a, b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16), torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    big = lambda: a @ b  # noqa: E731
    stop, samples = threading.Event(), []
    thread = threading.Thread(target=clocks, args=(stop, samples))
    thread.start()
    result = dict(cases={c.key: dict(params=c.params, flops=c.flops) for c in gemms}, contexts={})
    try:
        for context in contexts:
            result["contexts"][context] = run(context, gemms, memory, big)
    finally:
        stop.set()
        thread.join()
    result["clocks"] = samples
    with open(path, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
