"""The committed H200 validation, re-judged from its CSV export: the recorded summary must follow."""

import json
from pathlib import Path

import pytest

from helpers import run

RESULTS = Path(__file__).parent.parent / "benchmarks" / "results" / "h200-calibration"


@pytest.mark.parametrize("seed, export, judged", [(2, "validation.csv", "validate.json"),
                                                  (3, "validation-seed3.csv", "validate-seed3.json"),
                                                  (4, "validation-seed4.csv", "validate-seed4.json"),
                                                  (5, "validation-seed5.csv", "validate-seed5.json"),
                                                  (6, "validation-seed6.csv", "validate-seed6.json"),
                                                  (7, "validation-seed7.csv", "validate-seed7.json"),
                                                  (8, "validation-seed8.csv", "validate-seed8.json"),
                                                  (9, "validation-seed9.csv", "validate-seed9.json"),
                                                  (10, "validation-seed10.csv", "validate-seed10.json"),
                                                  (11, "validation-seed11.csv", "validate-seed11.json"),
                                                  (12, "validation-seed12.csv", "validate-seed12.json"),
                                                  (13, "validation-seed13.csv", "validate-seed13.json"),
                                                  (14, "validation-seed14.csv", "validate-seed14.json"),
                                                  (15, "validation-seed15.csv", "validate-seed15.json"),
                                                  (16, "validation-seed16.csv", "validate-seed16.json"),
                                                  (17, "validation-seed17.csv", "validate-seed17.json"),
                                                  (18, "validation-seed18.csv", "validate-seed18.json"),
                                                  (19, "validation-seed19.csv", "validate-seed19.json"),
                                                  (2, "validation-live.csv", "validate-live.json"),
                                                  (4, "validation-live-seed4.csv", "validate-live-seed4.json")])
def test_validation_reproduces_from_the_committed_export(capsys, tmp_path, seed, export, judged):
    db = str(tmp_path / "v.db")
    assert run(capsys, "results", "--import", str(RESULTS / export), "--db", db)[0] == 0
    code, out, err = run(capsys, "validate", "--seed", str(seed), "--from-db", "--db", db, "--gpu", "h200", "--json")
    assert code == 0, err
    recorded = {(r["category"], r["model"]): r for r in json.loads((RESULTS / judged).read_text())["summary"]}
    now = {(r["category"], r["model"]): r for r in json.loads(out)["summary"]}
    assert set(now) == set(recorded)
    # the shipped profile and the cost model still give the recorded figures, to the rounding of the
    # profile's neighbour weights (single precision, summed in double: a time moves by up to 4e-7 with
    # which points beyond reach a query's block meets). The roofline counts a causal call's query-key pairs
    # exactly since 2026-12-06 (L(L+1)/2, not L²/2; the fused kernel's model is unmoved by it), which moves
    # the figures of every set with attention in it by about 1/L.
    for key, row in now.items():
        slack = 1e-3 if key[1].startswith("roofline") else 1e-6
        assert abs(row["median_ape"] - recorded[key]["median_ape"]) < slack, key
    layers = now[("layer", "calibrated")]
    assert layers["n"] == 14 and layers["max_ape"] <= 0.10  # issue 4's layer target, held by this test
