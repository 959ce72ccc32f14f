"""Reading a CSV export back reads each row's key once; a row whose key is no JSON object is refused
whatever its parameter cells say, after the numbers' own errors, as before."""

from __future__ import annotations

import csv
import io
import json

import pytest

from shapewise import exports
from shapewise.errors import ShapewiseError
from shapewise.exports import read_export
from shapewise.measure import Timing
from shapewise.store import Store

ENV = {"device": "cuda:0", "gpu_name": "NVIDIA H200", "cuda_version": "13.0", "torch_version": "2.11.0+cu130"}


@pytest.fixture
def export(tmp_path):
    """A CSV export of three GEMMs."""
    with Store(tmp_path / "s.db") as store:
        env = store.environment_id(ENV)
        for m in (64, 128, 256):
            params = dict(m=m, n=64, k=64, batch=1, layout="nn", dtype="bf16")
            store.record(env_id=env, bench="gemm", key=json.dumps({"bench": "gemm", **params}, sort_keys=True),
                         params=params, flops=2.0 * m * 64 * 64, bytes=2.0 * (m * 64 * 2 + 64 * 64),
                         timing=Timing(samples_ms=(0.01, 0.011)))
        store.export(tmp_path / "s.csv")
    return tmp_path / "s.csv"


def test_each_key_is_read_once(export, monkeypatch):
    keys = [row["key"] for row in csv.DictReader(open(export, newline=""))]
    read = []

    class CountingJson:
        dumps = staticmethod(json.dumps)

        @staticmethod
        def loads(text, **kwargs):
            read.append(text)
            return json.loads(text, **kwargs)

    monkeypatch.setattr(exports, "json", CountingJson)
    rows = read_export(export)
    assert [r.params["m"] for r in rows] == [64, 128, 256]
    assert [text for text in read if text in keys] == keys  # was each key three times


def _with(export, **cells) -> str:
    """The export's text with its first row's cells replaced."""
    lines = list(csv.reader(open(export, newline="")))
    for column, value in cells.items():
        lines[1][lines[0].index(column)] = value
    out = io.StringIO()
    csv.writer(out).writerows(lines)
    return out.getvalue()


@pytest.mark.parametrize("key", ["not json", "[1, 2]", "3", "null", '"gemm"'])
def test_a_key_that_is_no_json_object_is_refused_whatever_its_parameter_cells(export, tmp_path, key):
    path = tmp_path / "bad.csv"
    path.write_text(_with(export, key=key, p_m="999"))
    with pytest.raises(ShapewiseError, match=r"line 2: key .* is not the JSON object shapewise writes"):
        read_export(path)
    path.write_text(_with(export, key=key, median_ms="fast"))  # the numbers' errors come first, as before
    with pytest.raises(ShapewiseError, match="line 2: median_ms is 'fast', not a number"):
        read_export(path)
    path.write_text(_with(export, key=key, bench="gemmm"))  # and a bench shapewise never writes
    with pytest.raises(ShapewiseError, match="line 2: bench 'gemmm' is none of shapewise's"):
        read_export(path)


def test_a_key_nested_past_the_parser_is_refused_in_one_line(export, tmp_path):
    path = tmp_path / "deep.csv"
    path.write_text(_with(export, key="[" * 50_000 + "]" * 50_000))
    with pytest.raises(ShapewiseError, match="key"):
        read_export(path)
