"""Fit the spec model's free GEMM parameters (CostParams) to a probe run with shapewise.fit.fit_gemm
(coordinate descent on the mean absolute log error, from fixed first guesses). Fits on the designed
sets and half of the random shapes (every other row); the other half is held out and reported apart.

Run: python benchmarks/fit_probe.py [benchmarks/results/h200-probe.csv] [--gpu h200]
Prints the fitted parameters, to be copied into CostParams with a note of the run they came from.
"""

import argparse
from pathlib import Path

import numpy as np

from compare_probe import extra, load
from shapewise.fit import START, GemmSamples, fit_gemm
from shapewise.fit import GEMM_SCALARS
from shapewise.hardware import get_gpu


def samples(rows) -> GemmSamples:
    return GemmSamples.from_rows([dict(m=int(r["m"]), n=int(r["n"]), k=int(r["k"]), batch=int(r["batch"]),
                                       layout=r["layout"], time_ms=float(r["time_ms"])) for r in rows])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", default=str(Path(__file__).parent / "results" / "h200-probe.csv"))
    parser.add_argument("--gpu", default="h200")
    args = parser.parse_args()
    gpu = get_gpu(args.gpu)
    rows = [r for r in load(args.csv) if r["kind"] in ("gemm", "bmm")]
    random = [r for r in rows if extra(r).get("set") == "random"]
    train = samples([r for r in rows if extra(r).get("set") not in ("random", "drift")] + random[0::2])
    held_out = samples(random[1::2])
    loss = lambda s, p: float(np.mean(np.abs(s.log_error(p, gpu, "bf16"))))  # noqa: E731
    print(f"fitting on {len(train)} GEMM/BMM rows; {len(held_out)} random rows held out")
    print(f"start:  train {loss(train, START):.4f}, held out {loss(held_out, START):.4f}")
    params, history = fit_gemm(train, gpu=gpu)
    for value in history:
        print(f"  mean |log error| {value:.4f}")
    print(f"after:  train {loss(train, params):.4f}, held out {loss(held_out, params):.4f}")
    for name in GEMM_SCALARS + ("tile_rates",):
        value = getattr(params, name)
        print(f"{name} = {tuple(round(v, 3) for v in value) if isinstance(value, tuple) else round(value, 4)}")


if __name__ == "__main__":
    main()
