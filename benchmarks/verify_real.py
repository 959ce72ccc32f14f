"""`shapewise verify` on real models of the config corpus, default selection flags, one process (torch
and CUDA start once): each model's rows under its name in one JSON file, rewritten after every model,
so that what was measured comes back even if the time runs out.

python benchmarks/verify_real.py OUT.json CONFIG... [--budget-s 330] [--top 10] [--rounds 10] [--device cuda]
"""

import argparse
import contextlib
import io
import json
import sys
import time
from pathlib import Path

from shapewise.cli import main as shapewise


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--budget-s", type=float, default=330, help="no model is started after this (330)")
    ap.add_argument("--top", default="10")
    ap.add_argument("--rounds", default="10")
    ap.add_argument("--device", default="cuda", help="cpu only tests the script")
    ap.add_argument("--batch", default="4")
    ap.add_argument("--seq", default="2048")
    ap.add_argument("--gpu", default="h200", help="the GPU whose cost model ranks and predicts (h100: the profile it borrows)")
    ap.add_argument("--profile", help="predict with this profile (another GPU's `calibrate --quick` profile)")
    args = ap.parse_args()
    # a parallel layer whose config shares one norm is built and priced with one (variants_repriced.py)
    start, results = time.perf_counter(), {"shared_norms": True, "rotary_kept": True}
    for config in args.configs:
        if time.perf_counter() - start > args.budget_s:
            print(f"budget spent: {config} and after not measured", flush=True)
            break
        name, began, text = Path(config).stem, time.perf_counter(), io.StringIO()
        with contextlib.redirect_stdout(text):
            code = shapewise(["verify", config, "--top", args.top, "--rounds", args.rounds, "--device", args.device,
                              "--batch", args.batch, "--seq", args.seq, "--gpu", args.gpu, "--json"]
                             + (["--profile", args.profile] if args.profile else []))
        results[name] = json.loads(text.getvalue()) if code == 0 else {"error": code}
        rows = results[name] if code == 0 else []
        print(f"{name:20s} {time.perf_counter() - began:5.1f} s, {len(rows)} rows"
              + (f", {rows[0]['what']}: #1 predicted {rows[0]['predicted_speedup']:.3f} measured "
                 f"{rows[0]['measured_speedup']:.3f}" if rows else f", exit {code}"), flush=True)
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
