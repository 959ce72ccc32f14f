"""The `calibrate --quick` profiles kept in the results' folders, read whole or as factors only.

`calibrate --quick` writes a whole profile: the one it was fitted on top of (the shipped H200 profile of its
day, borrowed by an H100) with a few machine factors (machine_gemm, machine_bmm, ...). Its tables are that
shipped profile's, half a megabyte gzipped each time, so the folders keep most of these files as their
factors only (format FACTORS_ONLY: the machine_* parameters, the environment and the fit's record), and a
reader puts the factors on the shipped profile of its own commit, as the judging scripts always did
(with_machine_factors). Two folders keep theirs whole, for the tests that read a whole one.

python benchmarks/machine_files.py PROFILE.json[.gz] ...   writes each whole profile as its factors only, in place
(a folder's new profile, before it is committed: tests/test_machine_files.py holds every committed one to it; a
GPU call keeps its whole profile, which the call's later commands take as --profile)
"""

import dataclasses
import gzip
import json
import sys
from pathlib import Path

from shapewise.hardware import get_gpu
from shapewise.params import SPEC
from shapewise.profile import FORMAT, find, load, read_params

FACTORS_ONLY = "shapewise machine factors"
MACHINE = {f.name: getattr(SPEC, f.name) for f in dataclasses.fields(SPEC) if f.name.startswith("machine_")}
SLIMMED = ("calibrate --quick's profile with the tables of the profile it was fitted on top of (the shipped H200 "
           "profile of its day) left out: read it with benchmarks/machine_files.py, which puts these factors on "
           "the shipped profile of the commit reading it")


def _read(path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def machine_params(path) -> dict[str, float]:
    """Every machine_* parameter of a machine file, whole or factors only, read as shapewise reads a
    profile's (one left out is the spec's; a file without machine_stream has machine_gemm's)."""
    return _machine_params(_read(path), str(path))


def _machine_params(data: dict, where: str) -> dict[str, float]:
    return read_params(data["params"], MACHINE, where=where)  # shapewise's own reading


def with_machine_factors(profile, path):
    """`profile` with the machine factors of the file at `path` (its machine_* parameters only: the rest
    of that profile is the one it was fitted on top of)."""
    return dataclasses.replace(profile, params=dataclasses.replace(profile.params, **machine_params(path)))


def machine_profile_at(path, gpu: str = "h100"):
    """The profile a machine file stands for: a whole one as written; one kept as factors only, the shipped
    (or, for a GPU that borrows, the borrowed) profile of this commit with its factors, its machine and
    lender recorded as `calibrate --quick` records them."""
    data = _read(path)
    if data.get("format") == FORMAT:
        return load(path)
    if data.get("format") != FACTORS_ONLY:
        raise SystemExit(f"{path} is neither a shapewise profile nor a machine file's factors")
    base = find(get_gpu(data.get("gpu", gpu)))
    fit = {**base.fit, **data.get("fit", {})}
    if base.borrowed_for:
        fit["borrowed_from"] = base.gpu
    return dataclasses.replace(with_machine_factors(base, path), gpu=data.get("gpu", gpu), fit=fit, path=str(path),
                               borrowed_for="")


def slimmed(data: dict, where: str) -> dict:
    """A whole machine profile as its factors only: no table it shares with the profile it was fitted on top of."""
    fit = data.get("fit", {})
    keep = ("machine", "borrowed_from", "dtype")
    return {"format": FACTORS_ONLY, "about": SLIMMED, "gpu": data["gpu"], "environment": data.get("environment", {}),
            "created_utc": data.get("created_utc", ""), "params": _machine_params(data, where),
            "fit": {k: fit[k] for k in keep if k in fit}}


def main(paths: list[str]) -> int:
    for path in paths:
        data = _read(path)
        if data.get("format") != FORMAT:
            print(f"{path}: not a whole profile, left as it is")
            continue
        before, factors = Path(path).stat().st_size, slimmed(data, str(path))
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "wt", encoding="utf-8") as f:
            json.dump(factors, f, indent=1)
            f.write("\n")
        print(f"{path}: {before:,} → {Path(path).stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
