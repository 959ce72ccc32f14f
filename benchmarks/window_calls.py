"""Sliding-window attention (FlexAttention's kernel) against the cost model: the calibration's
windowed calls (fitted) and every windowed call the committed exports of the fresh judgements
measured (the models sets; seen data, never fitted), by pass, head dim and grouping. Median and p90
|error|, signed median, in %.

python benchmarks/window_calls.py [--profile PATH] [--calls]   (on the CPU; seconds)
"""

import argparse
import json
from pathlib import Path

import numpy as np
from decode_figures import line as summary
from few_blocks import measured_ops, signed
from refit_profile import averaged, rows_from_export

import shapewise
from shapewise.cost import predict_ops
from shapewise.profile import cost_model

SHIPPED = Path(shapewise.__file__).parent / "data" / "profiles" / "h200.json"


def line(label: str, err: np.ndarray) -> str:
    return f"  {label:40s} {summary(err)}"


def calibration_calls(profile_path: str) -> list[tuple]:
    """(op, measured ms) of the windowed calls of every export the profile was fitted from."""
    from shapewise.cases import op_from_case

    runs = [[(c, r) for c, r in rows_from_export(p) if c.bench == "op" and c.params.get("kind") == "flash"
             and c.params.get("window")] for p in json.load(open(profile_path))["fit"]["refitted_from"]]
    return [(op_from_case(c.params, flops=c.flops, nbytes=c.bytes), r["median_ms"])
            for c, r in averaged(runs) if r["error"] is None]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", help="the profile to judge (default: the shipped H200 profile)")
    ap.add_argument("--calls", action="store_true", help="every seen call's line")
    args = ap.parse_args()
    model = cost_model("h200", profile=args.profile)
    fitted = calibration_calls(args.profile or str(SHIPPED))
    predicted = np.array([c.time_ms for c in predict_ops([op for op, _ in fitted], gpu=model, dtype="bf16")])
    err = predicted / np.array([ms for _, ms in fitted]) - 1
    print("calibration's windowed calls (fitted):")
    for pass_ in ("fwd", "bwd"):
        print(line(pass_, err[np.array([op.pass_ == pass_ for op, _ in fitted])]))
    pairs = [(p, r) for p, r in measured_ops("flash") if p.get("window")]
    err = signed(pairs, model)
    print("the models sets' windowed calls (seen, never fitted):")
    for pass_ in ("fwd", "bwd"):
        chosen = np.array([p["pass_"] == pass_ for p, _ in pairs])
        print(line(pass_, err[chosen]))
        for d in sorted({p["k"] for p, _ in pairs}):
            for grouped in (False, True):
                sel = chosen & np.array([p["k"] == d and (p.get("groups", 1) > 1) == grouped for p, _ in pairs])
                if sel.any():
                    print(line(f"  head dim {d}, {'grouped' if grouped else 'a key head a query head'}", err[sel]))
    if args.calls:
        for (p, r), e in sorted(zip(pairs, err), key=lambda x: (x[0][0]["pass_"], x[0][0]["k"], x[0][0]["m"])):
            print(f"  {p['pass_']} {p['batch']:4d} × (q {p['m']:5d}, d {p['k']:3d}, window {p['window']:5d}, "
                  f"group {p.get('groups', 1):2d}): measured {float(r['median_ms']):8.4f} ms, {e:+6.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
