"""Where the H200's whole-step misses come from (benchmarks/RESULTS.md, "the forest's lead priced",
its paragraph on the H200's whole steps): the models seeds 13-22 measured on H200s, priced with the
shipped profile; each step's error split by op class (aligned and misaligned GEMMs and batched GEMMs,
attention, memory-bound ops), the steps past 4% listed; then the aligned GEMMs over 0.2 ms by their
row count m (the 3,000-token prefills).

python benchmarks/archive/step_misses.py   (on the CPU; about two minutes)
"""

import collections
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))
from judge_figures import import_export  # noqa: E402

from shapewise.bench import stored_rows  # noqa: E402
from shapewise.cases import is_gemm  # noqa: E402
from shapewise.cost import align_classes  # noqa: E402
from shapewise.hardware import get_gpu  # noqa: E402
from shapewise.judges import judge, judge_set_cases  # noqa: E402
from shapewise.profile import find  # noqa: E402
from shapewise.store import Store  # noqa: E402

RUNS = {"fresh10": 13, "fresh11": 14, "fresh12": 15, "fresh13": 16, "fresh14": 17, "fresh15": 18, "fresh16": 19,
        "fresh17": 22}


def op_class(case) -> str:
    p = case.params
    if not is_gemm(case):
        return case.bench
    class_a, class_n = align_classes(p["m"], p["n"], p["k"], p["layout"], p.get("dtype", "bf16"), 16)
    kind = "bmm" if p.get("batch", 1) > 1 else "gemm"
    return kind + ("-misaligned" if max(int(class_a), int(class_n)) else "-aligned")


def main() -> int:
    gpu = get_gpu("h200")
    profile = find(gpu)
    errors, big = [], []
    for folder, seed in RUNS.items():
        with tempfile.TemporaryDirectory() as tmp:
            db = f"{tmp}/run.db"
            import_export(f"benchmarks/results/h200-judges-{folder}/judges.csv.gz", db)
            drawn = judge_set_cases("models", seed=seed, configs=["tests/data/hf"])
            with Store(db) as store:
                rows = stored_rows(drawn.cases, store=store)
        ok = [(c, r) for c, r in rows if r.get("error") is None]
        by_key = {c.key: (c, j) for (c, _), j in zip(ok, judge(ok, gpu=gpu, profile=profile))}
        for c, j in by_key.values():
            p = c.params
            if op_class(c) == "gemm-aligned" and j.measured_ms > 0.2:
                big.append((p["m"], j.predicted_ms["calibrated"] / j.measured_ms - 1))
        for step in drawn.steps:
            if not all(key in by_key for key, _ in step.ops):
                continue
            parts = [(by_key[key][0], by_key[key][1], n) for key, n in step.ops]
            measured = sum(j.measured_ms * n for _, j, n in parts)
            error = sum(j.predicted_ms["calibrated"] * n for _, j, n in parts) / measured - 1
            errors.append(error)
            if abs(error) > 0.04:
                share = collections.Counter()
                for c, j, n in parts:
                    share[op_class(c)] += n * (j.predicted_ms["calibrated"] - j.measured_ms) / measured
                print(f"seed {seed} {step.name}: {error:+.1%}  " + " ".join(
                    f"{k} {v:+.1%}" for k, v in share.most_common() if abs(v) > 0.005))
    e = np.abs(errors)
    print(f"\n{len(e)} whole steps: {int((e <= 0.05).sum())} within 5%, p90 |error| {np.percentile(e, 90):.1%}")
    m = np.array([b[0] for b in big])
    err = np.array([b[1] for b in big])
    print(f"aligned GEMMs over 0.2 ms: {len(err)}, p90 |error| {np.percentile(np.abs(err), 90):.1%}")
    for name, sel in (("m a multiple of 64", m % 64 == 0), ("m a multiple of 8, not 64", (m % 8 == 0) & (m % 64 != 0)),
                      ("m = 3,000", m == 3000)):
        print(f"  {name}: {sel.sum()}, median error {np.median(err[sel]):+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
