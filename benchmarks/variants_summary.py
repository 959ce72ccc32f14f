"""The targets of issue 17's variants set, from `shapewise validate --set variants --json`: per model,
the share of candidates whose predicted speedup is within 3% of the measured one and Spearman's rho
of predicted against measured speedups (the original among them); over all candidates, the share
within 3% (target 90%), apart for the top 10 and the random draws; models with rho at least 0.9
(target: all). Failed candidates and models are listed with their reasons.

Beside each rho, its ceiling: the mean rho of the measured speedups against themselves drawn again
within their own noise (each candidate's bootstrap 95% interval of the median round taken as ±1.96
standard deviations; 500 draws, seeded), the original fixed at 1. A rho well under its ceiling is the
model's miss, not the rounds' noise; a ceiling near 0.9 says the run could not rank that model better.
It counts the noise between the run's rounds only, not that between runs or machines.

python benchmarks/variants_summary.py variants.json[.gz]
"""

import gzip
import json
import math
import sys

import numpy as np

from shapewise.calibrate import spearman

CEILING_DRAWS = 500


def _within(c: dict) -> bool:
    return abs(c["predicted_speedup"] / c["measured_speedup"] - 1) <= 0.03


def ceiling(candidates: list, rng: np.random.Generator) -> float:
    """The rho a prediction equal to the measured speedups would get against a measurement as noisy as this
    (NaN where a run had too few rounds for an interval)."""
    if any(c["ci"][0] is None for c in candidates):
        return math.nan
    measured = np.array([1.0] + [c["measured_speedup"] for c in candidates])
    sd = np.array([0.0] + [(c["ci"][1] - c["ci"][0]) / (2 * 1.96) for c in candidates])
    rhos = [spearman(measured, measured + rng.normal(0.0, sd)) for _ in range(CEILING_DRAWS)]
    return float(np.nanmean(rhos)) if not all(math.isnan(r) for r in rhos) else math.nan


def main(path: str) -> int:
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        run = json.load(f)
    print(f"{run['rounds']} interleaved rounds, cost model: {run['cost_model']}"
          + (" — interrupted: the models below were finished" if run["interrupted"] else ""))
    print(f"{'model':20s} {'b×s':>7s} {'nbhd':>4s} {'meas':>4s} {'within 3%':>9s} {'Spearman':>8s} {'ceiling':>7s} "
          f"{'median |err|':>12s} {'worst':>7s}  worst candidate")
    rng = np.random.default_rng(0)
    done, failed, rhos = [], [], []
    for m in run["models"]:
        if m["error"]:
            failed.append((m["model"], "", m["error"]))
            print(f"{m['model']:20s} failed: {m['error']}")
            continue
        ok = [c for c in m["candidates"] if not c["error"]]
        failed += [(m["model"], c["candidate"], c["error"]) for c in m["candidates"] if c["error"]]
        done += ok
        if not ok:
            continue
        errors = sorted(abs(c["predicted_speedup"] / c["measured_speedup"] - 1) for c in ok)
        worst = max(ok, key=lambda c: abs(c["predicted_speedup"] / c["measured_speedup"] - 1))
        rho = m["spearman"]
        rhos.append(rho)
        print(f"{m['model']:20s} {m['batch']:>2d}×{m['seq']:<4d} {m['neighbourhood']:4d} {len(ok):4d} "
              f"{m['within_3pct']:9.0%} {rho:8.3f} {ceiling(ok, rng):7.3f} {errors[len(errors) // 2]:12.1%} {errors[-1]:7.1%}  "
              f"{worst['candidate']} ({worst['picked']}: predicted {worst['predicted_speedup']:.3f}, "
              f"measured {worst['measured_speedup']:.3f})")
    for picked in ("top", "random"):
        part = [c for c in done if c["picked"].startswith(picked)]
        if part:
            print(f"{picked:6s}: {sum(map(_within, part))} of {len(part)} within 3% ({sum(map(_within, part)) / len(part):.0%})")
    if done:
        within = sum(map(_within, done))
        print(f"predicted within 3% of measured: {within} of {len(done)} candidates ({within / len(done):.0%}; "
              f"target 90%)")
    ranked = [r for r in rhos if not math.isnan(r)]
    print(f"Spearman ≥ 0.9: {sum(r >= 0.9 for r in ranked)} of {len(ranked)} models (target: all); "
          f"lowest {min(ranked):.3f}" if ranked else "no model measured")
    for model, candidate, error in failed:
        print(f"failed: {model} {candidate}: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
