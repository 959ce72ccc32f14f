"""The one-row walk (params.WALK_*, CostParams.walk_*): cuBLAS's kernel for a weight of 705-1056 columns
read by 1-3 rows, and the line its time follows, fitted on every such GEMM measured on H200s and
committed (the models seeds, the --shards draws and the walk's first draw of benchmarks/results/h200-*/),
with the kernels their census named.

It prints: which kernel cuBLAS ran for the GEMMs of the band and around it (the rule's evidence), the
line fitted on the band's calls (fixed + per_k × k / 2) against the values params.py holds, and every
band call priced with and without the walk.

python benchmarks/one_row_walk.py [--write src/shapewise/data/profiles/h200.json]   (on the CPU; seconds;
    --write puts the fitted line into that profile, the only one that holds it)

Judged on calls drawn after the walk was frozen (its band and the shapes around it, which it must leave
alone), measured with the sweep's timer and named by the kernel census:
  PYTHONPATH=src python3 benchmarks/one_row_walk.py --draw SEED --db DB   (on a GPU; a minute; then
      `shapewise results --db DB --export OUT.csv` and `--bench kernels --export OUT.json`)
  python benchmarks/one_row_walk.py --judge OUT.csv [--census OUT.json] [--gpu h100]   (on the CPU; without a
  census, as on a CPU that names no kernel, the kernels are not said)
"""

import argparse
import collections
import csv
import dataclasses
import glob
import gzip
import json
import re
from pathlib import Path

import numpy as np

from shapewise.cases import Case, gemm_cases
from shapewise.cost import predict_gemm
from shapewise.exports import open_export
from shapewise.params import WALK_BANDS, WALK_MAX_K, WALK_ROWS
from shapewise.profile import cost_model

R = "benchmarks/results"
KERNEL = re.compile(r"nvjet_sm90_tst_(\d+x\d+)_\d+x\d+_(\dx\d)_v_bz_")


def few_row_gemms() -> dict:
    """(m, n, k, layout) -> median ms of the unbatched bf16 GEMMs of at most 16 rows measured on H200s."""
    times = collections.defaultdict(list)
    for path in sorted(glob.glob(f"{R}/h200-*/*.csv.gz")):
        with open_export(path) as f:
            reader = csv.DictReader(f)
            if "p_m" not in (reader.fieldnames or ()):
                continue
            for r in reader:
                if r["bench"] not in ("gemm", "op") or r.get("p_kind", "gemm") not in ("gemm", "") or r["error"] \
                        or not r["median_ms"] or (r.get("p_dtype") or "bf16") != "bf16":
                    continue
                try:
                    m, n, k, batch = int(r["p_m"]), int(r["p_n"]), int(r["p_k"]), int(r.get("p_batch") or 1)
                except ValueError:
                    continue
                if m <= 16 and batch == 1:
                    times[m, n, k, r["p_layout"]].append(float(r["median_ms"]))
    return {key: float(np.median(value)) for key, value in times.items()}


def kernels_named() -> dict:
    """(m, n, k, layout) -> the first kernel the census named for it (models seeds' census and the draws' kernels)."""
    named = {}
    for path in sorted(glob.glob(f"{R}/h200-*/*census.json.gz")):
        with gzip.open(path, "rt") as f:
            for row in json.load(f):
                case, metrics = json.loads(row["params"]["of"]), row.get("metrics") or {}
                if "m" in case and metrics.get("kernels"):
                    named[case["m"], case["n"], case["k"], case.get("layout", "nt")] = metrics["kernels"][0]
    for path in sorted(glob.glob(f"{R}/h200-*/kernels*.csv.gz")):
        with gzip.open(path, "rt") as f:
            for r in csv.DictReader(f):
                case = json.loads(r["key"]) if r.get("key", "").startswith("{") else {}
                if "m" in case and r.get("kernels"):
                    named.setdefault((case["m"], case["n"], case["k"], case.get("layout", "nt")), r["kernels"])
    return named


def ways(m, n, k, layout) -> int:
    """The ways the walk splits k for this call, 0 where it is in no band (cost.one_row_walk_ms's rule)."""
    few = m <= WALK_ROWS and n % 8 == 0 and k % 8 == 0 and k <= WALK_MAX_K and layout == "nt"
    return next((w for over, upto, w in WALK_BANDS if few and over < n <= upto), 0)


def drawn(seed: int) -> list[Case]:
    """Fresh calls for the judgement: 60 in the bands (1-3 rows; n aligned, half of them at the shards
    real models have, 768, 896 and 1024; k aligned up to WALK_MAX_K) and 60 around them (n under and
    over the bands, 4-8 rows, k past WALK_MAX_K, the `nn` layout), none of them in the fit's data."""
    rng = np.random.default_rng(seed)
    low, high = WALK_BANDS[0][0], WALK_BANDS[-1][1]
    aligned = lambda lo, hi: int(rng.integers(lo // 8 + 1, hi // 8 + 1)) * 8  # noqa: E731  (lo, hi]
    shapes = []
    for i in range(60):
        n = (768, 896, 1024)[i % 6 // 2] if i % 2 else aligned(low, high)
        shapes.append((int(rng.integers(1, WALK_ROWS + 1)), n, aligned(0, WALK_MAX_K), "nt"))
    for i in range(60):
        m, n, k, layout = int(rng.integers(1, WALK_ROWS + 1)), aligned(low, high), aligned(8, WALK_MAX_K), "nt"
        kind = i % 5
        if kind == 0:
            n = aligned(low - 128, low) if i % 2 else aligned(high, high + 128)
        elif kind == 1:
            m = int(rng.integers(WALK_ROWS + 1, 9))
        elif kind == 2:
            k = aligned(WALK_MAX_K, 2 * WALK_MAX_K)
        elif kind == 3:
            layout = "nn"
        else:
            n = aligned(low - 320, low - 128)
        shapes.append((m, n, k, layout))
    return [case for m, n, k, layout in shapes for case in gemm_cases([m], [n], [k], layouts=(layout,))]


def draw(seed: int, db: str, device: str) -> int:
    from shapewise.bench import kernel_census, sweep
    from shapewise.store import Store

    store = Store(db)
    cases = drawn(seed)
    result = sweep(cases, store=store, device=device, warmup_ms=25)
    named = kernel_census(cases, store=store, device=device, env=result.environment)
    print(f"{len(result.rows)} of {len(cases)} calls measured; {named} named")
    return 0


def judge(export: str, census_path: str | None, gpu: str) -> int:
    """A draw's calls priced as `gpu`'s profile has it, with the H200's walk and without any, in the bands
    and around them; and the kernels cuBLAS ran."""
    measured = {}
    with open_export(export) as f:
        for r in csv.DictReader(f):
            if r["bench"] == "gemm" and r["median_ms"] and not r["error"]:
                measured[int(r["p_m"]), int(r["p_n"]), int(r["p_k"]), r["p_layout"]] = float(r["median_ms"])
    named = {}
    if census_path:  # a CPU's draw names no kernel: `results --bench kernels --export` refuses an empty export
        with open_export(census_path) as f:
            named = {tuple(json.loads(row["params"]["of"])[d] for d in ("m", "n", "k", "layout")):
                     (row.get("metrics") or {}).get("kernels") or [""] for row in json.load(f)}
    keys = list(measured)
    m, n, k = (np.array([key[i] for key in keys]) for i in range(3))
    layout = np.array([key[3] for key in keys])
    ms = np.array(list(measured.values()))
    model, lender = cost_model(gpu), cost_model("h200").params

    def walk(fixed, per_k):
        return dataclasses.replace(model, params=dataclasses.replace(model.params, walk_fixed_ms=fixed, walk_per_k_ms=per_k))

    priced = {name: np.asarray(predict_gemm(m, n, k, layout=layout, gpu=cm).time_ms)
              for name, cm in ((f"as the {gpu} has it", model), ("with the walk", walk(lender.walk_fixed_ms, lender.walk_per_k_ms)),
                               ("without", walk(0.0, 0.0)))}
    band = np.array([ways(*key) > 0 for key in keys])
    print(f"{len(ms)} calls measured ({band.sum()} in the bands)")
    for where, chosen in (("in the bands", band), ("around them", ~band)):
        for name, p in priced.items():
            error = p[chosen] / ms[chosen] - 1
            print(f"  {where:12} priced {name:18}: |error| median {np.median(np.abs(error)):.1%}, "
                  f"p90 {np.quantile(np.abs(error), 0.9):.1%}, signed median {np.median(error):+.1%}")
    runs = collections.Counter()
    for i, key in enumerate(keys):
        found = KERNEL.search(named.get(key, [""])[0])
        runs["in the bands" if band[i] else "around them", f"{found.group(1)} cluster {found.group(2)}" if found else "other"] += 1
    print("  kernels cuBLAS ran (calls):")
    for (where, kernel), count in sorted(runs.items()):
        print(f"    {where:12} {kernel:24} {count}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draw", type=int, metavar="SEED", help="measure the drawn calls on this GPU into --db")
    parser.add_argument("--db", help="the results store --draw measures into")
    parser.add_argument("--device", default="cuda", help="where --draw measures (cpu: to try the script)")
    parser.add_argument("--judge", metavar="EXPORT", help="price a --draw's export (with --census, the kernels named)")
    parser.add_argument("--write", metavar="PROFILE", help="write the fitted line into this profile (the H200's)")
    parser.add_argument("--gpu", default="h200", help="the GPU the judged draw ran on (h100: the profile it borrows)")
    parser.add_argument("--census", metavar="JSON", help="the --draw's kernel census (`results --bench kernels --export`)")
    args = parser.parse_args()
    if args.draw is not None:
        if not args.db:
            parser.error("--draw needs --db")
        return draw(args.draw, args.db, args.device)
    if args.judge:
        missing = [path for path in (args.judge, args.census) if path and not Path(path).is_file()]
        if missing:
            parser.error(f"{missing[0]}: no such file")
        return judge(args.judge, args.census, args.gpu)
    measured, named = few_row_gemms(), kernels_named()
    print(f"{len(measured)} unbatched GEMMs of 1-16 rows measured on H200s; {sum(key in named for key in measured)} "
          "with the kernel named")
    # The rule's evidence: the kernel cuBLAS ran, by band of n, for aligned `nt` GEMMs of 1-3 rows and k ≤ WALK_MAX_K.
    edges = sorted({0, 2048, *(edge for over, upto, _ in WALK_BANDS for edge in (over, upto))})
    runs = collections.Counter()
    for (m, n, k, layout), _ in measured.items():
        kernel = named.get((m, n, k, layout))
        found = KERNEL.search(kernel or "")
        if kernel and m <= WALK_ROWS and layout == "nt" and n % 8 == 0 and k % 8 == 0 and k <= WALK_MAX_K and n <= 2048:
            over = max(edge for edge in edges if edge < n)
            band = f"n {over + 1}-{min(edge for edge in edges if edge >= n)}"
            runs[over, band, f"{found.group(1)} cluster {found.group(2)}" if found else kernel.split("(")[0][-40:]] += 1
    print(f"kernels of aligned `nt` GEMMs of 1-{WALK_ROWS} rows, k ≤ {WALK_MAX_K} (calls):")
    for (_, band, kernel), count in sorted(runs.items()):
        print(f"  {band:12} {kernel:44} {count}")
    band = [key for key in measured if ways(*key)]
    m, n, k = (np.array([key[i] for key in band]) for i in range(3))
    ms = np.array([measured[key] for key in band])
    walked = k / np.array([ways(*key) for key in band])
    # The line, fitted in relative terms (each call weighs the same whatever its time).
    a = np.stack([np.ones_like(walked), walked], axis=1) / ms[:, None]
    fixed, per_k = np.linalg.lstsq(a, np.ones_like(ms), rcond=None)[0]
    if args.write:
        from shapewise.profile import load, save

        held = load(args.write)
        params = dataclasses.replace(held.params, walk_fixed_ms=round(float(fixed), 8), walk_per_k_ms=round(float(per_k), 11))
        save(dataclasses.replace(held, params=params, fit={**held.fit, "one_row_walk": dict(
            calls=len(band), bands=[list(b) for b in WALK_BANDS], by="benchmarks/one_row_walk.py")}), args.write)
        print(f"wrote the line into {args.write}")
    model = cost_model("h200")
    print(f"\nthe bands: {len(band)} calls; line fitted: {fixed * 1e3:.2f} µs + {per_k * 1e6:.2f} ns × k / ways "
          f"(the H200 profile: {model.params.walk_fixed_ms * 1e3:.2f} µs + {model.params.walk_per_k_ms * 1e6:.2f} ns)")
    without = dataclasses.replace(model, params=dataclasses.replace(model.params, walk_fixed_ms=0.0, walk_per_k_ms=0.0))
    layout = np.full(len(band), "nt")
    priced = {name: np.asarray(predict_gemm(m, n, k, layout=layout, gpu=cm).time_ms)
              for name, cm in (("with the walk", model), ("without", without))}
    for name, p in priced.items():
        error = p / ms - 1
        print(f"  priced {name:14}: |error| median {np.median(np.abs(error)):.1%}, p90 {np.quantile(np.abs(error), 0.9):.1%}, "
              f"signed median {np.median(error):+.1%}")
    print("  m × n × k (ways): measured µs; priced with the walk, without")
    for i in np.lexsort((k, n)):
        print(f"    {m[i]} × {n[i]} × {k[i]} ({ways(m[i], n[i], k[i], 'nt')}): {ms[i] * 1e3:.1f}; "
              f"{priced['with the walk'][i] * 1e3:.1f}, {priced['without'][i] * 1e3:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
