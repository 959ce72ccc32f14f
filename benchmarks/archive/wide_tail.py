"""The figures of benchmarks/RESULTS.md's "the wide set's tail: where it comes from (a lead)": the wide set's
GEMMs and batched GEMMs measured on H200s (results/h200-judges*/), pooled over every seed measured there and
priced by the shipped H200 profile, and the seeds whose kernels cuBLAS named (census.json.gz, kernels*.csv*):
1. the pool; 2. the cases measured on two H200s (is the tail noise?); 3. batched GEMMs priced as CUTLASS
kernels: the chooser's top choice against the configuration cuBLAS ran, and the batched GEMMs re-priced with
that configuration (the oracle); 4. group W, few-row GEMMs whose blocks each walk their k alone; 5. group
G1, short-k GEMMs run as fp32 partials and a reduction; 6. leave-one-seed-out estimates of what pricing the
groups as they run would give the p90; 7. the chooser made sharper or softer; 8. the calibration's choices
near the named cases, and a vote of the nearest against the chooser.

python benchmarks/archive/wide_tail.py    (from the repository root, on the CPU; about 8 s)

Where it counts otherwise than the first pass of that analysis did, the function says so (show_noise: only the
two H200s' pairs; group_of: no group G2).
"""

import collections
import csv
import dataclasses
import glob
import gzip
import json

import numpy as np

from shapewise import corrections
from shapewise.cost import LAYOUTS, align_classes, predict_gemm
from shapewise.exports import open_export
from shapewise.fit import cutlass_config
from shapewise.hardware import get_gpu
from shapewise.judges import wide_set
from shapewise.profile import cost_model

R = "benchmarks/results"
# export -> the wide seeds it measured (benchmarks/judge_fresh.py's LATER; results/h200-judges/log-*.txt);
# a judges-2 export is the same seed again on a second H200
EXPORTS = {
    "h200-judges/judges-1.csv.gz": (1, 2, 3), "h200-judges/judges-2.csv.gz": (11, 12),
    "h200-judges-fresh/judges.csv.gz": (21, 22), "h200-judges-fresh/judges-2.csv.gz": (21,),
    "h200-judges-fresh2/judges.csv.gz": (23, 24), "h200-judges-fresh3/judges.csv.gz": (25, 26),
    "h200-judges-fresh3/judges-2.csv.gz": (25,), "h200-judges-fresh5/judges.csv.gz": (27,),
    "h200-judges-fresh6/judges.csv.gz": (28,), "h200-judges-fresh6/judges-2.csv.gz": (28,),
    "h200-judges-fresh7/judges.csv.gz": (29,), "h200-judges-fresh8/judges.csv.gz": (30,),
    "h200-judges-fresh9/judges.csv.gz": (31,), "h200-judges-fresh9/judges-2.csv.gz": (31,),
    "h200-judges-fresh11/judges.csv.gz": (32,), "h200-judges-fresh11/judges-2.csv.gz": (32,),
    "h200-judges-fresh12/judges.csv.gz": (33,), "h200-judges-fresh13/judges.csv.gz": (34,),
    "h200-judges-fresh14/judges.csv.gz": (35,), "h200-judges-fresh15/judges.csv.gz": (36,),
    "h200-judges-fresh16/judges.csv.gz": (37,), "h200-judges-fresh17/judges.csv.gz": (38,),
}
NAMED_SEEDS = (1, 2, 3, 31, 32, 33, 36, 37, 38)  # the seeds whose kernels cuBLAS named
TAIL = {True: 0.12, False: 0.15}  # the wide targets' p90 (GEMMs; batched): an error past it is the tail
FAMILIES = ("T-a1", "A-a2", "A-wmma", "T-wmma", "xmma", "SN", "magma")  # corrections.CUTLASS_FAMILIES, short
SMS = get_gpu("h200").num_sms  # one wave of one block an SM
# Group W's kernels: the Turing CUTLASS 64x64 align1 kernels (with and without fp32 partials) and cuBLAS's
# few-row gemmSN ones, whose blocks each walk their share of k alone
WALKERS = ("T-a1 64x64", "T-a1 64x64 P", "SN 5x64", "SN 8x10")
K_PER_BLOCK = ((0, 128), (128, 512), (512, 2048), (2048, np.inf))


@dataclasses.dataclass
class Case:
    """One distinct GEMM or batched GEMM of the pool: its times, kernels and the shipped profile's price."""
    m: int
    n: int
    k: int
    batch: int
    layout: str
    runs: list  # (measured ms, export, seed), one per export that measured it
    kernels: list | None  # the kernel names cuBLAS ran, the main one first; None where not named
    grids: list
    predicted_ms: float = 0.0
    family: int = -1  # the chooser's likeliest CUTLASS configuration: family (-1: priced analytically), tile
    tile: tuple = (0, 0)
    split: int = 1

    @property
    def ms(self) -> float:
        """The measured time: the median of its runs."""
        return float(np.median([t for t, _, _ in self.runs]))

    @property
    def seed(self) -> int:
        """The lowest seed that drew it (a few shapes were drawn by two seeds)."""
        return min(s for _, _, s in self.runs)

    @property
    def err(self) -> float:
        """The shipped profile's error: priced / measured - 1."""
        return self.predicted_ms / self.ms - 1

    @property
    def gemm(self) -> bool:
        """A single GEMM, not a batched one."""
        return self.batch == 1

    @property
    def blocks(self) -> int:
        """The main kernel's thread blocks (every named case has its grids)."""
        return int(np.prod([int(x) for x in self.grids[0].split("x")]))

    @property
    def z(self) -> int:
        """The main kernel's grid z: the ways k is split (a single GEMM's)."""
        return int(self.grids[0].split("x")[2])

    @property
    def ran(self) -> str:
        """The CUTLASS configuration cuBLAS ran (family, tile as a sorted pair, P: fp32 partials), or "other"."""
        for name in self.kernels:
            found = cutlass_config(name)
            if found:
                return f"{FAMILIES[found[0]]} {min(found[1:3])}x{max(found[1:3])}{' P' if found[3] else ''}"
        return "other"

    @property
    def picked(self) -> str:
        """The chooser's top choice, or "analytic"."""
        return "analytic" if self.family < 0 else f"{FAMILIES[self.family]} {min(self.tile)}x{max(self.tile)}"

    @property
    def served(self) -> bool:
        """Priced as CUTLASS kernels by the chooser (a one-row shape may be priced by the one-row walk instead)."""
        return self.family >= 0 and min(self.m, self.n) > 1


def kernel_names() -> dict:
    """Case key -> (kernel names, grids) from every H200 census and kernels export."""
    out = {}
    for path in sorted(glob.glob(f"{R}/h200-*/*census*.json.gz")):
        with gzip.open(path, "rt") as f:
            for row in json.load(f):
                metrics = row.get("metrics") or {}
                if metrics.get("kernels"):
                    out.setdefault(canonical(row["params"]["of"]), (metrics["kernels"], metrics.get("grids") or []))
    for path in sorted(glob.glob(f"{R}/h200-*/kernels*.csv*")):
        with open_export(path) as f:
            for r in csv.DictReader(f):
                if r.get("kernels"):
                    grids = [s.strip() for s in r["grids"].split(" | ")] if r.get("grids") else []
                    out.setdefault(canonical(r["key"]), ([s.strip() for s in r["kernels"].split(" | ")], grids))
    return out


def canonical(key: str) -> str:
    """A case key as the census and the exports both write it."""
    return json.dumps(json.loads(key), sort_keys=True, separators=(",", ":"))


def load() -> list[Case]:
    """The pool: each distinct case of the exports' wide seeds, with its runs, kernels and price."""
    drawn = {s: {c.key for c in wide_set(seed=s).cases if c.bench in ("gemm", "bmm")}
             for s in sorted({s for seeds in EXPORTS.values() for s in seeds})}
    runs = collections.defaultdict(list)
    for export, seeds in EXPORTS.items():
        with open_export(f"{R}/{export}") as f:
            for r in csv.DictReader(f):
                mine = [s for s in seeds if r["key"] in drawn[s]]
                if r["bench"] in ("gemm", "bmm") and not r["error"] and r["median_ms"] and mine:
                    runs[r["key"]].append((float(r["median_ms"]), export, mine[0]))
    named = kernel_names()
    cases = []
    for key, measured in runs.items():
        c = json.loads(key)
        kernels, grids = named.get(canonical(key), (None, []))
        cases.append(Case(c["m"], c["n"], c["k"], c["batch"], c["layout"], measured, kernels, grids))
    m, n, k, b = (np.array([getattr(c, d) for c in cases]) for d in ("m", "n", "k", "batch"))
    res = predict_gemm(m, n, k, batch=b, layout=np.array([c.layout for c in cases]), gpu=cost_model("h200"))
    split = np.broadcast_to(res.split_k, m.shape)
    for i, c in enumerate(cases):
        c.predicted_ms, c.family, c.split = float(res.time_ms[i]), int(res.family[i]), int(split[i])
        c.tile = tuple(int(x) for x in res.tile[i])
    return cases


def p90(errors) -> float:
    """The 90th percentile of |error|."""
    return float(np.quantile(np.abs(errors), 0.9))


def tail(errors, gemm: bool) -> float:
    """The share of |error| past the target's p90."""
    return float(np.mean(np.abs(errors) > TAIL[gemm]))


def kind(gemm: bool) -> str:
    """The kind's name in the output."""
    return "GEMMs" if gemm else "batched GEMMs"


def show_pool(cases: list[Case]) -> None:
    """Figure 1: what was pooled, and the shipped profile's errors on it."""
    print("1. The pool: the wide set's GEMMs and batched GEMMs on H200s, priced by the shipped H200 profile")
    folders = collections.defaultdict(list)
    for export, seeds in EXPORTS.items():
        folders[export.split("/")[0]].append(f"{export.split('/')[1]} ({', '.join(map(str, seeds))})")
    for folder, exports in folders.items():
        print(f"   {folder}/: {'; '.join(exports)}")
    seeds = sorted({s for v in EXPORTS.values() for s in v})
    print(f"   {len(seeds)} seeds ({seeds[0]}-{seeds[-1]}, not all), {len(EXPORTS)} exports in {len(folders)} folders")
    for gemm in (True, False):
        mine = [c for c in cases if c.gemm == gemm]
        e = np.array([c.err for c in mine])
        named = np.array([c.err for c in mine if c.kernels])
        print(f"   {kind(gemm)}: {len(mine)} distinct; |error| median {np.median(np.abs(e)):.1%}, p90 {p90(e):.1%}, "
              f"tail (> {TAIL[gemm]:.0%}) {tail(e, gemm):.1%}; {len(named)} with kernel names: median "
              f"{np.median(np.abs(named)):.1%}, p90 {p90(named):.1%}, tail {tail(named, gemm):.1%}")
    strays = sorted(c.seed for c in cases if c.kernels and c.seed not in NAMED_SEEDS)
    print(f"   kernels named on seeds {', '.join(map(str, NAMED_SEEDS))}; and on {len(strays)} shapes that seeds "
          f"{', '.join(map(str, strays))} drew too (counted under those: a case's seed is the lowest that drew it)")


def show_noise(cases: list[Case]) -> None:
    """Figure 2: the cases measured on both H200s (a judges.csv.gz and its folder's judges-2.csv.gz).

    The first pass took the first two runs of every case measured twice: 2502 GEMMs (416 in the tail), 4 of them
    one shape drawn by two seeds, not the two H200s; its p90s and shares were the same as these."""
    print("\n2. Noise: the cases measured on two H200s (wide 21, 25, 28, 31, 32 again on a second H200)")
    for gemm in (True, False):
        both = []
        for c in cases:
            times = {export: t for t, export, _ in c.runs}
            second = [e for e in times if e.endswith("judges-2.csv.gz") and e.replace("-2.csv", ".csv") in times]
            if c.gemm == gemm and second:
                both.append((c, times[second[0].replace("-2.csv", ".csv")], times[second[0]]))
        apart = np.abs([second / first - 1 for _, first, second in both])
        tails = [(c.predicted_ms / a - 1, c.predicted_ms / b - 1) for c, a, b in both if abs(c.err) > TAIL[gemm]]
        on_both = np.mean([abs(a) > TAIL[gemm] and abs(b) > TAIL[gemm] for a, b in tails])
        same_sign = np.mean([np.sign(a) == np.sign(b) for a, b in tails])
        print(f"   {kind(gemm)}: {len(both)} cases; the second H200's time over the first's: |ratio - 1| median "
              f"{np.median(apart):.1%}, p90 {p90(apart):.1%}. Of the {len(tails)} in the tail (> {TAIL[gemm]:.0%}): "
              f"{on_both:.0%} in the tail on both, {same_sign:.0%} off the same way on both")


def chooser_blends(cases: list[Case]) -> dict:
    """Case index -> the chooser's view of it (corrections._cutlass_ms's own steps): the configurations of
    its calibration group (rows of the profile's cutlass_kernels), their probabilities, the log time the
    prediction blends from them, and each one's time at its fastest split (not limited to its range)."""
    p = cost_model("h200").params
    tables = corrections._tables(p)
    m, n, k, b = (np.array([getattr(c, d) for c in cases]) for d in ("m", "n", "k", "batch"))
    layout = np.array([c.layout for c in cases])
    class_a, class_n = align_classes(m, n, k, layout, "bf16", 16)
    worst = np.maximum(class_a, class_n)
    coords = np.log2(np.stack([m, n, k, b], axis=1).astype(float))
    group = (np.searchsorted(np.array(LAYOUTS), layout) * 3 + worst) * 2 + (b > 1)
    out = {}
    for code in np.unique(group[worst > 0]):
        mine = np.flatnonzero(group == code)
        if not (tables["choice_groups"] == code).any():
            continue
        configs, _, share = corrections.group_neighbours(p, tables, code, coords[mine])
        dims = (m[mine], n[mine], k[mine], b[mine])
        log_t, _, _, score = corrections.candidate_scores(p, tables, configs, *dims, coords[mine], share, SMS)
        unlimited, _ = corrections.kernel_times(tables["kernels"][configs], *dims, SMS)
        prob = np.exp(score - score.max(axis=1, keepdims=True))
        prob /= prob.sum(axis=1, keepdims=True)
        for j, i in enumerate(mine):
            out[i] = dict(rows=tables["kernels"][configs], prob=prob[j], log_blend=(prob[j] * log_t[j]).sum(),
                          ms=unlimited[j])
    return out


def oracle_errors(cases: list[Case]) -> np.ndarray:
    """Each case's error with the chooser's blend replaced by the time of the configuration cuBLAS ran (the
    same family, tile and partials; of several, the likeliest), every other factor of the price kept; the
    shipped error where it is not served or cuBLAS's configuration is not among its group's."""
    blends = chooser_blends(cases)
    out = np.array([c.err for c in cases])
    for i, c in enumerate(cases):
        found = [cutlass_config(name) for name in c.kernels if cutlass_config(name)]
        if i not in blends or not c.served or not found:
            continue
        d = blends[i]
        same = [j for j, row in enumerate(d["rows"]) if tuple(row[:4]) == tuple(found[0][:4])]
        if same:
            j = max(same, key=lambda q: d["prob"][q])
            out[i] = (1 + c.err) * np.exp(np.log(d["ms"][j]) - d["log_blend"]) - 1
    return out


def show_choice(cases: list[Case]) -> None:
    """Figure 3: batched GEMMs priced as CUTLASS kernels, the chooser's top choice against what cuBLAS ran."""
    named = [c for c in cases if not c.gemm and c.kernels]
    served = [c for c in named if c.served]
    missed = np.array([c.ran.split(" P")[0] != c.picked for c in served])
    e = np.array([c.err for c in served])
    print(f"\n3. Batched GEMMs with kernel names priced as CUTLASS kernels: {len(served)} of {len(named)}")
    print(f"   the chooser's top choice is not the configuration cuBLAS ran: {missed.sum()} ({missed.mean():.0%}); "
          f"tail (> {TAIL[False]:.0%}) {tail(e[missed], False):.0%} where it differs, {tail(e[~missed], False):.1%} "
          "where it matches")
    print("   ran / picked (8 cases or more; n; median error; tail):")
    pairs = collections.defaultdict(list)
    for c in served:
        pairs[c.ran, c.picked].append(c.err)
    for (ran, picked), errs in sorted(pairs.items(), key=lambda x: -len(x[1])):
        if len(errs) >= 8 and ran.split(" P")[0] != picked:
            print(f"     {ran:14s} / {picked:14s} {len(errs):3d} {np.median(errs):+6.1%} {tail(errs, False):4.0%}")
    oracle = oracle_errors(named)
    before = np.array([c.err for c in named])
    print(f"   the oracle: each re-priced with the configuration cuBLAS ran (at the kernel model's fastest split), "
          f"the batched GEMMs of the named seeds: p90 {p90(before):.1%} -> {p90(oracle):.1%}, "
          f"tail {tail(before, False):.1%} -> {tail(oracle, False):.1%}")
    seeds = np.array([c.seed for c in named])
    print("   by seed (p90 before -> after): " + "; ".join(
        f"{s}: {p90(before[seeds == s]):.1%} -> {p90(oracle[seeds == s]):.1%}" for s in np.unique(seeds)))


def walked(c: Case) -> bool:
    """Group W: a GEMM of 2-16 rows (n, k > 16) on a walking kernel, all its blocks in one wave."""
    return c.gemm and 2 <= c.m <= 16 and c.n > 16 and c.k > 16 and c.blocks <= SMS and c.ran in WALKERS


def walk_lines(group: list[Case]) -> np.ndarray:
    """Group W priced by a line per kernel configuration, t = a + b × k / z + c if a reduction follows, fitted
    leave-one-seed-out by relative least squares: each case's error."""
    x = np.array([[1.0, c.k / c.z, len(c.kernels) > 1] for c in group])
    t = np.array([c.ms * 1e3 for c in group])
    seeds, config = np.array([c.seed for c in group]), np.array([c.ran for c in group])
    line = np.full(len(group), np.nan)
    for s in np.unique(seeds):
        for cfg in np.unique(config[seeds == s]):
            fit, held = (seeds != s) & (config == cfg), (seeds == s) & (config == cfg)
            w = np.linalg.lstsq(x[fit] / t[fit, None], np.ones(fit.sum()), rcond=None)[0]
            line[held] = x[held] @ w
    return line / t - 1


def show_walked(cases: list[Case]) -> None:
    """Figure 4: group W, by k per block."""
    group = [c for c in cases if c.kernels and walked(c)]
    e, line = np.array([c.err for c in group]), walk_lines(group)
    per_block = np.array([c.k / c.z for c in group])
    print(f"\n4. Group W: GEMMs of 2-16 rows (n, k > 16) on {', '.join(WALKERS)}, at most {SMS} blocks: {len(group)}")
    print(f"   shipped: median {np.median(e):+.1%}, p90 {p90(e):.1%}, tail {tail(e, True):.0%}; "
          f"a line per kernel (leave-one-seed-out): p90 {p90(line):.1%}, tail {tail(line, True):.0%}")
    for lo, hi in K_PER_BLOCK:
        q = (per_block >= lo) & (per_block < hi)
        print(f"   k per block {f'[{lo}, {hi})':12s} {q.sum():3d}, median error {np.median(e[q]):+6.1%}, "
              f"tail {tail(e[q], True):4.0%}; the line's median {np.median(line[q]):+.1%}")


def partials_mb(c: Case) -> float:
    """A split GEMM's traffic through its partials: z fp32 partials written and read, the bf16 output."""
    return c.m * c.n * (4 * c.z + 2) / 1e6


def traffic(c: Case) -> str:
    """Group G1's bins of partials traffic."""
    mb = partials_mb(c)
    return "<0.5MB" if mb < 0.5 else "0.5-2MB" if mb < 2 else ">=2MB"


def short_k_split(c: Case) -> bool:
    """Group G1: k <= 64 run as CUTLASS fp32 partials and a reduction, which the profile prices unsplit."""
    return c.gemm and c.k <= 64 and len(c.kernels) > 1 and c.split == 1 and c.ran != "other"


def show_short_k(cases: list[Case]) -> None:
    """Figure 5: group G1, by its partials' traffic."""
    group = [c for c in cases if c.kernels and short_k_split(c)]
    e = np.array([c.err for c in group])
    print(f"\n5. Group G1: GEMMs of k <= 64 run as fp32 partials + splitKreduce (priced unsplit): {len(group)}, "
          f"median {np.median(e):+.1%}, tail {tail(e, True):.0%}")
    bins = np.array([traffic(c) for c in group])
    for b in ("<0.5MB", "0.5-2MB", ">=2MB"):
        print(f"   partials traffic {b:8s} {np.sum(bins == b):3d}, median error {np.median(e[bins == b]):+6.1%}, "
              f"tail {tail(e[bins == b], True):.0%}")


GROUPS = {"B1": "batched GEMMs whose chooser's top choice is not what cuBLAS ran: the median of each (ran, picked) "
                "pair with 3 cases or more, else of all",
          "B2": "batched GEMMs on A-a2 128x128, picked right: their median",
          "W": "group W priced by its lines (figure 4)",
          "G1": "group G1: the median of each traffic bin (figure 5)",
          "G3": "GEMMs on T-a1 128x128 (with or without partials), picked right: their median"}


def group_of(c: Case) -> tuple | None:
    """The systematic group a named case falls in, finest key first (None: none). Group W is priced apart."""
    # The first pass also divided out a group G2's median, gemmSN's GEMMs of k >= 256 under a wave: 19, 17 of them
    # in W, so only 2 (n <= 16) kept it. Without it the same p90s and named tail print, the pooled tail of
    # W + G1 + G3 15.9% (1820 of 11477) where the first pass gave 15.8% (1819).
    if c.gemm:
        if short_k_split(c):
            return "G1", traffic(c)
        if c.served and c.ran.split(" P")[0] == c.picked == "T-a1 128x128":
            return ("G3",)
        return None
    if c.served and c.ran.split(" P")[0] != c.picked:
        return "B1", c.ran.split(" P")[0], c.picked
    if c.served and c.ran == c.picked == "A-a2 128x128":
        return ("B2",)
    return None


def medians_removed(cases: list[Case], keep: set) -> np.ndarray:
    """Each case's error with its group's median log error (groups in `keep`) divided out, the median taken
    over the other seeds: of its finest key where 3 cases or more have it, else of the group's."""
    groups = [group_of(c) for c in cases]
    log_err, seeds = np.log1p([c.err for c in cases]), np.array([c.seed for c in cases])
    out = log_err.copy()
    for s in np.unique(seeds):
        finest, whole = collections.defaultdict(list), collections.defaultdict(list)
        for i in np.flatnonzero(seeds != s):
            g, v = groups[i], log_err[i]
            if g is not None:
                finest[g].append(v)
                whole[g[0]].append(v)
        for i in np.flatnonzero(seeds == s):
            g = groups[i]
            if g is None or g[0] not in keep:
                continue
            mine = finest.get(g, [])
            out[i] -= np.median(mine) if len(mine) >= 3 else np.median(whole[g[0]]) if whole[g[0]] else 0.0
    return np.expm1(out)


def show_estimates(cases: list[Case]) -> None:
    """Figure 6: the p90 with the groups priced as they run, leave-one-seed-out, on the named seeds and pooled
    (the seeds with no kernel names unchanged)."""
    print("\n6. Leave-one-seed-out estimates: each group's cases priced as fitted on the other seeds")
    for name, meaning in GROUPS.items():
        print(f"   {name}: {meaning}")
    print(f"     {'':20s} {'named seeds':>14s} {'pooled':>14s}   p90 (tail)")
    for gemm, rows in ((False, (("B1",), ("B2",), ("B1", "B2"))), (True, (("W",), ("G1",), ("G3",), ("W", "G1", "G3")))):
        named = [c for c in cases if c.gemm == gemm and c.kernels]
        others = [c.err for c in cases if c.gemm == gemm and not c.kernels]
        w = np.array([walked(c) for c in named]) if gemm else np.zeros(len(named), dtype=bool)
        line = walk_lines([c for c, x in zip(named, w) if x]) if gemm else []
        print(f"   {kind(gemm)} ({len(named)} named; {len(named) + len(others)} pooled)")
        for keep in ((), *rows):
            e = medians_removed(named, set(keep))
            if "W" in keep:
                e[w] = line
            pooled = e.tolist() + others
            print(f"     {' + '.join(keep) or 'shipped':20s} {p90(e):6.1%} ({tail(e, gemm):5.1%}) "
                  f"{p90(pooled):6.1%} ({tail(pooled, gemm):5.1%})")


def show_temperature(cases: list[Case]) -> None:
    """Figure 7: the chooser made sharper or softer (its scores, vote and sharpness times T), every case priced again."""
    print("\n7. The CUTLASS chooser's scores times T (T = 1: as fitted), every case of the pool priced again (p90)")
    model = cost_model("h200")
    m, n, k, batch = (np.array([getattr(c, d) for c in cases]) for d in ("m", "n", "k", "batch"))
    layout, ms = np.array([c.layout for c in cases]), np.array([c.ms for c in cases])
    for t in (0.25, 0.5, 1, 2, 4, 100):
        p = model.params
        scaled = dataclasses.replace(p, cutlass_chooser_sharpness=p.cutlass_chooser_sharpness * t,
                                     cutlass_chooser_vote=p.cutlass_chooser_vote * t,
                                     cutlass_chooser=tuple(tuple(x * t for x in row) for row in p.cutlass_chooser))
        error = np.asarray(predict_gemm(m, n, k, batch=batch, layout=layout,
                                        gpu=dataclasses.replace(model, params=scaled)).time_ms) / ms - 1
        print(f"   T = {t:<5}: GEMMs {p90(error[batch == 1]):.1%}, batched {p90(error[batch > 1]):.1%}")


def show_neighbours(cases: list[Case]) -> None:
    """Figure 8: how near the calibration's choices lie to the named CUTLASS-priced cases, and how often the
    configuration most of the nearest ran is the one cuBLAS ran, against the chooser's likeliest."""
    print("\n8. The calibration's CUTLASS choices near the named cases priced as CUTLASS kernels")
    tables = corrections._tables(cost_model("h200").params)
    kernels, choices = tables["kernels"], tables["choices"]
    for gemm in (True, False):
        named = [c for c in cases if c.gemm == gemm and c.kernels and c.served]
        right, near = collections.Counter(), 0
        for c in named:
            found = [cutlass_config(name) for name in c.kernels if cutlass_config(name)]
            worst = int(max(align_classes(c.m, c.n, c.k, c.layout, "bf16", 16)))
            theirs = np.flatnonzero(tables["choice_groups"] == (LAYOUTS.index(c.layout) * 3 + worst) * 2 + (not gemm))
            if not found or not len(theirs):
                continue
            apart = np.linalg.norm(choices[theirs, 2:6] - np.log2([c.m, c.n, c.k, c.batch]), axis=1)
            near += apart.min() < 0.25
            for count in (1, 5, 15):
                voted = collections.Counter(choices[theirs[np.argsort(apart)[:count]], 6].astype(int)).most_common(1)[0][0]
                right[count] += tuple(kernels[voted][:4]) == tuple(found[0][:4])
            right["chooser"] += c.ran.split(" P")[0] == c.picked
        print(f"   {kind(gemm)}: {len(named)}; {near} within a quarter octave of a calibration choice; right: the chooser "
              f"{right['chooser'] / len(named):.0%}, the vote of the nearest 1, 5, 15 "
              + ", ".join(f"{right[q] / len(named):.0%}" for q in (1, 5, 15)))


def main() -> int:
    cases = load()
    show_pool(cases)
    show_noise(cases)
    show_choice(cases)
    show_walked(cases)
    show_short_k(cases)
    show_estimates(cases)
    show_temperature(cases)
    show_neighbours(cases)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
