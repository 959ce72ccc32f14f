"""Does an H100's cuBLAS run the kernels an H200's runs for the same GEMMs? The wide seeds' misaligned and
aligned GEMMs and batched GEMMs named on H200s (every census and kernels export of results/h200-*) against
the same cases named on an H100 (results/h100-names/names-wide*.json.gz, `benchmarks/judge_kernels.py`
there): how often the first kernel is the same by name, and by CUTLASS configuration (family, tile,
partials) where both ran a CUTLASS kernel. If they agree, an H100 can name shapes for the H200's chooser.

python benchmarks/archive/names_apart.py   (on the CPU; seconds)
"""

import collections
import glob
import gzip
import importlib.util
import json
from pathlib import Path

from shapewise.fit import cutlass_config

spec = importlib.util.spec_from_file_location("wide_tail", Path(__file__).with_name("wide_tail.py"))
wide_tail = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wide_tail)


def compact_rows(pattern: str):
    """(case key, kernel names) of every named row of the compact exports (rows of key, name indexes,
    grids, error), file by file."""
    for path in sorted(glob.glob(pattern)):
        with gzip.open(path, "rt") as f:
            doc = json.load(f)
        for key, idx, _grids, _error in doc["rows"]:
            if idx:
                yield key, [doc["names"][i] for i in idx]


def compact_names(pattern: str) -> dict:
    """Case key (canonical) -> kernel names, from the compact exports."""
    return {wide_tail.canonical(key): names for key, names in compact_rows(pattern)}


def short(name: str) -> str:
    """A kernel name without its argument list."""
    return name.split("(")[0].replace("void ", "")


def main() -> int:
    h200 = {k: v[0] for k, v in wide_tail.kernel_names().items()}
    h100 = compact_names(f"{wide_tail.R}/h100-names/names-wide*.json.gz")
    both = sorted(set(h200) & set(h100))
    for batched in (False, True):
        keys = [k for k in both if (json.loads(k).get("batch", 1) > 1) == batched]
        same = sum(short(h200[k][0]) == short(h100[k][0]) for k in keys)
        configs = [(cutlass_config(h200[k][0]), cutlass_config(h100[k][0])) for k in keys]
        cut = [(a, b) for a, b in configs if a and b]
        agree = sum(a[:4] == b[:4] for a, b in cut)
        print(f"{'batched GEMMs' if batched else 'GEMMs'}: {len(keys)} cases named on both; the same first kernel "
              f"for {same} ({same / max(len(keys), 1):.1%}); of {len(cut)} where both ran a CUTLASS-family kernel, "
              f"the same configuration (family, tile, partials) for {agree} ({agree / max(len(cut), 1):.1%})")
        pairs = collections.Counter((short(h200[k][0])[:60], short(h100[k][0])[:60]) for k in keys
                                    if short(h200[k][0]) != short(h100[k][0]))
        for (a, b), n in pairs.most_common(6):
            print(f"    {n:4d}  H200 {a}  |  H100 {b}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
