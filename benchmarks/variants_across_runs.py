"""How well can any model rank a variants model's candidates, judged by the runs themselves? For each
model of the committed H200 variants runs (seeds 6-12, rounds settled and shuffled), the Spearman of
one run's measured speedups against another's over the candidates both measured (the runs' own
reproducibility, machine to machine and day to day), and, per run, the Spearman of the mean of the
other runs' measurements against this run's (a predictor that knew every other run), beside the
shipped pricing's as recorded. A model whose other runs rank it under 0.9 cannot be asked for 0.9.

python benchmarks/variants_across_runs.py [RUN.json.gz ...]   (default: results/h200-variants-{6..12})
"""

import gzip
import itertools
import json
import statistics
import sys

from shapewise.calibrate import spearman

DEFAULT = [f"benchmarks/results/h200-variants-{seed}/variants.json.gz" for seed in range(6, 13)]


def main() -> int:
    paths = sys.argv[1:] or DEFAULT
    measured: dict = {}  # model → run → candidate → measured speedup
    predicted: dict = {}  # model → run → candidate → predicted speedup, as recorded
    for run, path in enumerate(paths):
        for m in json.load(gzip.open(path) if path.endswith(".gz") else open(path))["models"]:
            for c in m["candidates"]:
                if c.get("measured_speedup"):
                    measured.setdefault(m["model"], {}).setdefault(run, {})[c["candidate"]] = c["measured_speedup"]
                    predicted.setdefault(m["model"], {}).setdefault(run, {})[c["candidate"]] = c["predicted_speedup"]
    print(f"{len(paths)} runs; Spearman with the original (1.0) counted in, as the variants set counts it")
    print(f"{'model':28s} {'run against run':>22s} {'others mean, per run':>24s} {'recorded, same cands':>24s}")
    for model, runs in measured.items():
        pairs = []
        for a, b in itertools.combinations(sorted(runs), 2):
            common = [k for k in runs[a] if k in runs[b]]
            if len(common) >= 5:
                pairs.append(spearman([1.0] + [runs[a][k] for k in common], [1.0] + [runs[b][k] for k in common]))
        others, recorded = [], []
        for run, cands in runs.items():
            known = [k for k in cands if any(k in runs[r] for r in runs if r != run)]
            if len(known) < 5:
                continue
            mean = [statistics.mean(runs[r][k] for r in runs if r != run and k in runs[r]) for k in known]
            truth = [1.0] + [cands[k] for k in known]
            others.append(spearman([1.0] + mean, truth))
            recorded.append(spearman([1.0] + [predicted[model][run][k] for k in known], truth))
        if pairs and others:
            print(f"{model[-28:]:28s} {min(pairs):10.3f} (median {statistics.median(pairs):.3f})"
                  f" {min(others):12.3f} (median {statistics.median(others):.3f})"
                  f" {min(recorded):12.3f} (median {statistics.median(recorded):.3f})")
    print("columns: the lowest over pairs of runs or over runs (and the median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
