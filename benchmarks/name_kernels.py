"""Name the kernels cuBLAS runs for many misaligned GEMMs and batched GEMMs, without timing them: the data
a chooser of CUTLASS configurations learns from (benchmarks/RESULTS.md, "the wide set's tail: where it comes
from (a lead)": a forest gains about 4 points of held-out accuracy a doubling of named shapes). The shapes
come from calibration's own draws (draws.DRAWS) at the seeds given, of which only the misaligned ones are
kept (the aligned ones run nvjet kernels the chooser does not choose among); each is named by one call
under the profiler (bench.kernel_census) and stored; the census is exported as JSON.

PYTHONPATH=src python3 benchmarks/name_kernels.py --draw batched:10 --draw batched:11 --draw extended:10 \
    --db DB --export CENSUS.json   (on a GPU, its rate not yet measured; --device cpu draws and names nothing)
"""

import argparse

from shapewise.bench import kernel_census
from shapewise.cases import is_gemm
from shapewise.cost import align_classes
from shapewise.draws import DRAWS, drawn_beside
from shapewise.measure import environment
from shapewise.store import Store


def name_seed(text: str) -> tuple[str, int]:
    """A draw as NAME:SEED (batched:10); a bad one is argparse's one-line error."""
    name, _, seed = text.partition(":")
    if name not in DRAWS or not seed.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME:SEED, NAME one of {', '.join(DRAWS)}")
    return name, int(seed)


def misaligned(draws: list[tuple[str, int]]) -> list:
    """The misaligned GEMM and batched GEMM cases of the draws, each once."""
    cases, seen = [], set()
    for name, seed in draws:
        for case in drawn_beside(**{name: seed}):
            p = case.params
            if not is_gemm(case) or case.key in seen:
                continue
            class_a, class_n = align_classes(p["m"], p["n"], p["k"], p["layout"], p.get("dtype", "bf16"), 16)
            if max(int(class_a), int(class_n)) > 0:
                seen.add(case.key)
                cases.append(case)
    return cases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draw", type=name_seed, action="append", required=True, metavar="NAME:SEED")
    ap.add_argument("--db", required=True, help="the results store the names go into")
    ap.add_argument("--export", help="write the store's census (every shape named so far) to this JSON file")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    cases = misaligned(args.draw)
    with Store(args.db) as store:
        named = kernel_census(cases, store=store, device=args.device, env=environment(args.device))
        print(f"{len(cases)} misaligned shapes drawn; {named} named now")
        if args.export:
            print(f"wrote {store.export(args.export, fmt='json', bench='kernels')} rows to {args.export}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
