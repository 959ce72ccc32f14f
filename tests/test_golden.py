"""Op tables of real models, held against reviewed golden files.

A change to the op mapping shows up here as a diff. To accept one after review:
    SHAPEWISE_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py
"""

import json
import os
from pathlib import Path

import pytest

from shapewise import Workload, model_ops
from shapewise.presets import get_model

GOLDEN = Path(__file__).parent / "golden"
CASES = {
    "gpt2": Workload(batch=4, seq=1024),
    "llama2-7b": Workload(batch=1, seq=4096, tp=2),
    "mixtral-8x7b": Workload(batch=1, seq=4096, tp=2),
    "llama3-8b-decode": Workload(batch=16, seq=8192, mode="decode"),
}


def table(name: str) -> list[dict]:
    model = name.removesuffix("-decode")
    return [{"op": op.label, "kind": op.kind, "layout": op.layout, "batch": op.batch, "m": op.m, "n": op.n,
             "k": op.k, "count": op.count, "flops": op.flops, "bytes": op.bytes}
            for op in model_ops(get_model(model), CASES[name])]


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_table_matches_golden(name):
    path = GOLDEN / f"{name}.json"
    got = table(name)
    if os.environ.get("SHAPEWISE_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=1) + "\n")
    assert got == json.loads(path.read_text())
