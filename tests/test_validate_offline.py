"""The committed H200 validation, re-judged from its CSV export: the recorded summary must follow."""

import json
from pathlib import Path

from helpers import run

RESULTS = Path(__file__).parent.parent / "benchmarks" / "results" / "h200-calibration"


def test_validation_reproduces_from_the_committed_export(capsys, tmp_path):
    db = str(tmp_path / "v.db")
    assert run(capsys, "results", "--import", str(RESULTS / "validation.csv"), "--db", db)[0] == 0
    code, out, err = run(capsys, "validate", "--from-db", "--db", db, "--gpu", "h200", "--json")
    assert code == 0, err
    recorded = {(r["category"], r["model"]): r for r in json.loads((RESULTS / "validate.json").read_text())["summary"]}
    now = {(r["category"], r["model"]): r for r in json.loads(out)["summary"]}
    assert set(now) == set(recorded)
    for key, row in now.items():  # the shipped profile and the cost model still give the recorded figures
        assert abs(row["median_ape"] - recorded[key]["median_ape"]) < 1e-9, key
    layers = now[("layer", "calibrated")]
    assert layers["n"] == 14 and layers["max_ape"] <= 0.10  # issue 4's layer target, held by this test
