"""The co-design paper's timing method against shapewise's timer, on the same GEMMs, in one run.

The paper's method, written out from its description: per shape, 50 warm-up calls, then 200 timed
calls, each between its own pair of CUDA events followed by a synchronize; no L2 flush; the minimum
is reported. shapewise's: shapewise.measure.time_fn (L2 flushed before each call outside the timed
region, warm-up and repetitions by time budget, median), at two budgets.

For each method: GPU seconds spent per shape (wall time of the whole procedure, warm-up included),
and repeatability: the median relative difference between two rounds over all shapes, each round in
its own shuffled order, the methods run back to back on each shape.

Run on a GPU: PYTHONPATH=src python3 benchmarks/harness_compare.py --out DIR [--shapes 120]
"""

import argparse
import csv
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
from shapewise.measure import environment, time_fn  # noqa: E402

OURS = {"shapewise (10 ms warm-up, 40 ms budget)": dict(warmup_ms=10, budget_ms=40),
        "shapewise (3 ms warm-up, 10 ms budget)": dict(warmup_ms=3, budget_ms=10, min_reps=10)}


def shapes(count: int, seed: int = 0) -> list[tuple[int, int, int]]:
    """Half aligned transformer-like GEMMs, half log-uniform random dims of every alignment class."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        if len(out) % 2:
            m, n, k = (round(2 ** rng.uniform(8, 14)) for _ in range(3))
        else:
            m, n, k = (64 * round(2 ** rng.uniform(2, 8)) for _ in range(3))
        if 2 * m * n * k <= 1e12:
            out.append((m, n, k))
    return out


def paper_method(torch, fn, warmup=50, timed=200) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(timed):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shapes", type=int, default=120)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    import torch

    os.makedirs(args.out, exist_ok=True)
    env = environment(args.device)
    cases = shapes(args.shapes)
    methods = {"paper (50 + 200 calls, event pair + sync each, no flush, min)": None, **OURS}
    results = {}  # (method, shape, round) -> (value ms, wall s)
    for rnd in (1, 2):
        order = cases[:]
        random.Random(100 + rnd).shuffle(order)
        for i, (m, n, k) in enumerate(order):
            a = torch.randn(m, k, device=args.device, dtype=torch.bfloat16)
            b = torch.randn(k, n, device=args.device, dtype=torch.bfloat16)
            fn = lambda: torch.matmul(a, b)  # noqa: E731
            for name, budget in methods.items():
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                value = paper_method(torch, fn) if budget is None else time_fn(fn, device=args.device, **budget).median_ms
                torch.cuda.synchronize()
                results[name, (m, n, k), rnd] = (value, time.perf_counter() - t0)
            if (i + 1) % 20 == 0:
                print(f"round {rnd}: {i + 1}/{len(order)} shapes", flush=True)

    with open(os.path.join(args.out, "harness.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["method", "m", "n", "k", "round", "time_ms", "wall_s"])
        for (name, (m, n, k), rnd), (value, wall) in results.items():
            writer.writerow([name, m, n, k, rnd, f"{value:.6g}", f"{wall:.6g}"])

    print(f"\n{env.get('gpu_name')}, torch {env.get('torch_version')}, {len(cases)} GEMM shapes (bf16), 2 rounds")
    print(f"{'method':62} {'s/shape':>8} {'vs paper':>8} {'repeat diff median':>18} {'p90':>6}")
    paper_s = None
    for name in methods:
        walls = [results[name, c, r][1] for c in cases for r in (1, 2)]
        diffs = [abs(results[name, c, 1][0] - results[name, c, 2][0]) / min(results[name, c, 1][0], results[name, c, 2][0])
                 for c in cases]
        per_shape = sum(walls) / len(walls)
        paper_s = paper_s or per_shape
        p90 = sorted(diffs)[int(0.9 * (len(diffs) - 1))]
        print(f"{name:62} {per_shape:8.4f} {paper_s / per_shape:7.1f}x {statistics.median(diffs):17.2%} {p90:6.2%}")
    first = list(methods)
    ratio = [results[first[1], c, 1][0] / results[first[0], c, 1][0] for c in cases]
    print(f"\nshapewise's median over the paper's minimum, per shape: median {statistics.median(ratio):.3f} "
          f"(the paper's numbers exclude the L2 flush and keep each shape's fastest call)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
