"""Where a small GEMM's run-to-run noise comes from: the estimate (median or a mean), its tensors'
addresses, or the SM clock.

Four calibration runs of the same shapes agree to 0.2-0.3% on GEMMs over 30 µs, but GEMMs of
10-30 µs move by 1% at the median and 9% at the 90th percentile from one run to the next, while
each run's own repetitions agree (interquartile range 3%). Something fixed for the whole of one
case's measurement changes between runs. This script times the noisiest shapes of the calibration
as `shapewise bench` does (L2 flushed, a spin before each call, CUDA events), in several rounds
(forward, reversed, shuffled) and fresh processes, two ways:

    held      tensors made once per process and kept
    rebuilt   fresh tensors each round (cache emptied, a spare tensor of random size moves them)

and prints how far each way's rounds spread under five estimates of one timing (median, mean,
interquartile mean, 10% trimmed mean, min), and how a shape's time moves with the SM clock (a spin
of known cycles, timed before and after each shape).

Run (on a GPU): python benchmarks/noise_sources.py [--processes 3] [--rounds 3] [--json OUT.json]
"""

import argparse
import json
import os
import random
import subprocess
import sys

import numpy as np

# (m, n, k, batch, layout): the 32 GEMMs whose medians spread most across the four H200 calibration
# runs (benchmarks/results/h200-calibration/calibration*.csv), then the six batched GEMMs that did
SHAPES = [(84, 160, 887, 1, "tn"), (8192, 2304, 768, 1, "nt"), (249, 50, 1530, 1, "nt"), (162, 396, 448, 1, "tn"),
          (64, 97, 274, 1, "tn"), (225, 58, 369, 1, "nn"), (40, 465, 512, 1, "nn"), (321, 34, 1232, 1, "nn"),
          (306, 42, 1106, 1, "tn"), (161, 346, 882, 1, "nt"), (42, 138, 1032, 1, "nn"), (130, 150, 1074, 1, "nt"),
          (502, 32, 561, 1, "nn"), (102, 114, 4854, 1, "tn"), (105, 66, 177, 1, "tn"), (82, 497, 433, 1, "nt"),
          (42, 945, 352, 1, "tn"), (1179, 91, 255, 1, "nt"), (48, 3045, 140, 1, "tn"), (556, 11623, 43, 1, "tn"),
          (21, 40, 4270, 1, "tn"), (20, 21, 22, 1, "tn"), (586, 161, 297, 1, "nt"), (404, 30, 1276, 1, "nt"),
          (41, 3706, 218, 1, "tn"), (34, 1024, 777, 1, "nt"), (81, 56, 1138, 1, "nt"), (146, 34, 6681, 1, "tn"),
          (23, 69, 42, 1, "nn"), (1042, 161, 192, 1, "nn"), (33, 1704, 233, 1, "nn"), (48, 1530, 649, 1, "tn"),
          (482, 42, 841, 38, "nt"), (3258, 888, 192, 422, "nt"), (129, 56, 114, 11, "nt"), (289, 66, 1312, 13, "nn"),
          (2154, 128, 778, 157, "nt"), (65, 136, 114, 11, "nn"),
          # stable references
          (2048, 2048, 2048, 1, "nn"), (4096, 4096, 4096, 1, "nn")]
WAYS = ("held", "rebuilt")
ESTIMATES = ("median", "mean", "interquartile mean", "10% trimmed mean", "min")


def estimate(samples, how: str) -> float:
    x = np.sort(np.asarray(samples))
    n = len(x)
    if how == "median":
        return float(np.median(x))
    if how == "mean":
        return float(x.mean())
    if how == "min":
        return float(x[0])
    cut = n // 4 if how == "interquartile mean" else n // 10
    return float(x[cut:n - cut].mean())


def child(rounds: int, seed: int) -> None:
    import torch

    from shapewise.bench import build
    from shapewise.cases import gemm_cases
    from shapewise.measure import _make_prep, _make_timer, plan_reps, warm_up

    device = "cuda"
    timer = _make_timer(device, None)
    cases = [gemm_cases([m], [n], [k], batches=(b,), layouts=(layout,))[0] for m, n, k, b, layout in SHAPES]
    held = [build(case, device)[0] for case in cases]

    def samples_ms(fn) -> list[float]:
        """As `shapewise bench` times a case: cold call, 3 ms warm-up, 10 ms of repetitions."""
        fn()
        timer.sync()
        prep = _make_prep(timer, fn, device, True, None, True)

        def call():
            prep()
            fn()

        _, per_call = warm_up(timer, call, 3)
        return timer.time_calls(fn, prep, plan_reps(per_call, 10, 10, 1000))

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def sm_mhz() -> float:
        """The SM clock now: a spin of known cycles, timed (the median of five)."""
        times = []
        for _ in range(5):
            start.record()
            torch.cuda._sleep(50_000)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return 50_000 / np.median(times) / 1e3

    rng = random.Random(seed)
    for r in range(rounds):
        order = list(range(len(cases)))
        if r % 3 == 1:
            order.reverse()
        elif r % 3 == 2:
            rng.shuffle(order)
        for i in order:
            out = {"shape": i, "round": r, "mhz_before": sm_mhz(), "held": samples_ms(held[i]), "mhz": sm_mhz()}
            torch.cuda.empty_cache()
            spare = torch.empty(rng.randrange(1, 64) * 2**20 + rng.randrange(0, 2**20, 512), dtype=torch.int8,
                                device=device)
            fn = build(cases[i], device)[0]
            out["rebuilt"] = samples_ms(fn)
            del fn, spare
            print(json.dumps(out), flush=True)


def spread(values) -> float:
    values = np.asarray(values)
    return values.max() / values.min() - 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write every timing here")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.rounds, args.child)
        return 0
    rows = []
    for p in range(args.processes):
        out = subprocess.run([sys.executable, __file__, "--child", str(p), "--rounds", str(args.rounds)],
                             capture_output=True, text=True, env=os.environ)
        if out.returncode:
            print(out.stderr, file=sys.stderr)
            return out.returncode
        rows += [dict(json.loads(line), process=p) for line in out.stdout.splitlines() if line.startswith("{")]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shapes": SHAPES, "rows": rows}, f)
    # t[way, estimate][shape][process][round]
    t = {(w, e): np.zeros((len(SHAPES), args.processes, args.rounds)) for w in WAYS for e in ESTIMATES}
    for row in rows:
        for w in WAYS:
            for e in ESTIMATES:
                t[w, e][row["shape"], row["process"], row["round"]] = estimate(row[w], e)
    small = np.array([np.median(t["held", "median"][i]) < 0.05 for i in range(len(SHAPES))])
    print(f"{len(SHAPES)} shapes ({small.sum()} under 50 µs), {args.processes} processes x {args.rounds} rounds; "
          "spread = max / min - 1 of a shape's timings")
    print(f"{'way, estimate':32s} {'rounds of one process':>26s} {'all rounds of all processes':>30s}")
    for w in WAYS:
        for e in ESTIMATES:
            within = [spread(t[w, e][i, p]) for i in np.flatnonzero(small) for p in range(args.processes)]
            every = [spread(t[w, e][i]) for i in np.flatnonzero(small)]
            print(f"{w + ', ' + e:32s} median {np.median(within):5.1%} p90 {np.percentile(within, 90):5.1%}"
                  f"      median {np.median(every):5.1%} p90 {np.percentile(every, 90):5.1%}")
    print("per shape, µs (held tensors: median, process 0 rounds | process 1 rounds ...; the interquartile mean the same)")
    for i, shape in enumerate(SHAPES):
        cells = " | ".join(" ".join(f"{x * 1e3:6.1f}" for x in t[w, e][i, p]) for w, e in
                           (("held", "median"), ("held", "interquartile mean"))
                           for p in range(args.processes))
        print(f"  {'x'.join(map(str, shape[:4]))} {shape[4]}: {cells}")
    # does a shape's time move with the clock? log(time / the shape's geometric mean) against log(clock)
    dt, dc = [], []
    for i in np.flatnonzero(small):
        mine = [r for r in rows if r["shape"] == i]
        lt = np.log([np.median(r["held"]) for r in mine])
        lc = np.log([r["mhz"] for r in mine])
        dt += list(lt - lt.mean())
        dc += list(lc - lc.mean())
    dt, dc = np.array(dt), np.array(dc)
    slope = (dt @ dc) / (dc @ dc) if dc @ dc > 0 else float("nan")
    mhz = np.array([r["mhz"] for r in rows])
    print(f"SM clock during the timings: {mhz.min():.0f}-{mhz.max():.0f} MHz (median {np.median(mhz):.0f}); "
          f"a small GEMM's log time against log clock: correlation {np.corrcoef(dt, dc)[0, 1]:+.2f}, slope {slope:+.2f}")
    print("the samples of a few shapes (held tensors, process 0, round 0), µs: count")
    for i in (0, 2, 4, 21):
        row = next(r for r in rows if r["shape"] == i and r["process"] == 0 and r["round"] == 0)
        values, counts = np.unique(np.round(np.asarray(row["held"]) * 1e3, 1), return_counts=True)
        print(f"  {'x'.join(map(str, SHAPES[i][:4]))}: " + " ".join(f"{v:.1f}:{c}" for v, c in zip(values, counts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
