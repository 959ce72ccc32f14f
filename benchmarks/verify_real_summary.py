"""The targets of issue 18's proof, from benchmarks/verify_real.py's JSON: per model, the top
suggestion's measured speedup against the best measured of its top 10 (target at least 97%) and
against the original (never slower); over every candidate, the predicted speedup within 3% of the
measured one (target 90% of candidates), and how often the predicted 90% interval held the measured
speedup. Models with no shape faster beyond the model's error are shown apart: there the nearest
alternatives were measured, and a measured gain would be a faster shape the model missed.

python benchmarks/verify_real_summary.py verify-real.json[.gz] ...   (several: one summary each)
"""

import json
import sys

from shapewise.exports import open_export


def main(path: str) -> int:
    with open_export(path) as f:  # gzipped or not
        results = json.load(f)
    print(path)
    within, held, total, tops = 0, 0, 0, []
    print(f"{'model':20s} {'what':16s} {'#1 predicted':>12s} {'#1 measured':>12s} {'best measured':>14s} "
          f"{'#1 / best':>9s}")
    for name, rows in results.items():
        if not isinstance(rows, (list, dict)):  # a note on the run ("shared_norms"), not a model
            continue
        if isinstance(rows, dict):
            print(f"{name:20s} failed (exit {rows['error']})")
            continue
        for r in rows:
            total += 1
            within += abs(r["predicted_speedup"] / r["measured_speedup"] - 1) <= 0.03
            lo, hi = r["predicted_interval"]
            held += lo <= r["measured_speedup"] <= hi
        top, best = rows[0], max(r["measured_speedup"] for r in rows)
        if top["what"] == "suggestion":
            tops.append((top["measured_speedup"] / best, top["measured_speedup"], top["ci"][1]))
        print(f"{name:20s} {top['what']:16s} {top['predicted_speedup']:12.3f} {top['measured_speedup']:12.3f} "
              f"{best:14.3f} {top['measured_speedup'] / best:9.3f}   {top['candidate']}")
    if tops:
        print(f"top suggestion / best of its top 10: min {min(t[0] for t in tops):.3f}, "
              f"{sum(t[0] >= 0.97 for t in tops)} of {len(tops)} at least 0.97 (target: all)")
        print(f"top suggestion slower than the original: {sum(t[1] < 1 for t in tops)} of {len(tops)} by its median, "
              f"{sum(t[2] < 1 for t in tops)} beyond its 95% interval (target: none)")
    if total:
        print(f"predicted within 3% of measured: {within} of {total} candidates ({within / total:.0%}; target 90%)")
        print(f"measured inside the predicted 90% interval: {held} of {total} ({held / total:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(max(main(path) for path in sys.argv[1:]))
