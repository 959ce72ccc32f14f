"""Analytic speed: GEMM predictions per second, and `shapewise check` latency on the 70B presets.

Run: python benchmarks/bench_predict.py
Prints one line per figure; record them in benchmarks/RESULTS.md with the date and machine.
"""

import platform
import statistics
import subprocess
import sys
import time

import numpy as np

from shapewise import Workload, check, predict_gemm
from shapewise.cost import SPEC
from shapewise.presets import get_model
from shapewise.profile import CostModel, find


def predictions_per_second(params=SPEC, num: int = 200_000, rounds: int = 5) -> float:
    rng = np.random.default_rng(0)
    m, n, k = (rng.integers(1, 16384, num) for _ in range(3))
    layouts = rng.choice(["nn", "nt", "tn"], num)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        predict_gemm(m, n, k, layout=layouts, gpu=CostModel("h200", params))
        best = min(best, time.perf_counter() - start)
    return num / best


def check_ms(model: str, rounds: int = 10) -> float:
    shape = get_model(model)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        check(shape, Workload(batch=1, seq=4096, tp=8), gpu="h200")
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def cli_seconds(model: str, rounds: int = 5) -> tuple[float, bool]:
    """Wall time of the whole command, interpreter start included, and whether torch got imported."""
    code = ("import sys, shapewise.cli as c; c.main(['check', %r, '--gpu', 'h200', '--tp', '8', '--json']);"
            "sys.stderr.write('TORCH=%%s' %% ('torch' in sys.modules))") % model
    times, torch_loaded = [], False
    for _ in range(rounds):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - start)
        torch_loaded |= "TORCH=True" in out.stderr
    return statistics.median(times), torch_loaded


def main() -> None:
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    print(f"GEMM predictions per second (200,000 random shapes, all layouts), spec model: "
          f"{predictions_per_second():,.0f}")
    profile = find("h200")
    print(f"the same with the shipped H200 profile ({len(profile.params.gemm_trees)} trees, "
          f"{len(profile.params.cutlass_choices)} CUTLASS kernel choices): "
          f"{predictions_per_second(profile.params):,.0f}")
    for model in ("llama2-70b", "llama3-70b"):
        print(f"check {model} t=8 (library call, median of 10): {check_ms(model):.1f} ms")
        seconds, torch_loaded = cli_seconds(model)
        print(f"shapewise check {model} --tp 8 --json (whole process, median of 5): {seconds:.2f} s; "
              f"torch imported: {torch_loaded}")


if __name__ == "__main__":
    main()
