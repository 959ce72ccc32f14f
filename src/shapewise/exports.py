"""The results store's CSV format: the columns, writing rows, and reading an export back.

An export is one row per measurement: bench and key, the case's parameters as p_ columns, then the
numbers and the environment (store.Store.export writes it, store.Store.import_csv reads it back).
"""

from __future__ import annotations

import csv
import gzip
import json
from datetime import datetime, timezone

from .errors import ShapewiseError

PARAM_PREFIX = "p_"  # CSV column prefix of a case's parameters: see Store.export()
ENV_COLUMNS = ("gpu_name", "driver", "torch", "cuda", "cublas")  # joined into rows() and exports

CSV_HEAD = ("bench", "key")
CSV_TAIL = ("median_ms", "q25_ms", "q75_ms", "iqr_ms", "num_reps", "flops", "bytes", "tflops", "gbps", "error",
            *ENV_COLUMNS, "created_utc")


def open_export(path):
    """An export opened for reading as text: a CSV, or a CSV gzipped (NAME.csv.gz) as larger ones are kept."""
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", newline="", encoding="utf-8")
    return open(path, newline="", encoding="utf-8")


def _now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _rate(amount, median_ms, scale: float) -> float | None:
    """amount per second / scale, from a count and a time in ms; None where either is missing."""
    if amount is None or median_ms is None or median_ms <= 0:
        return None
    return amount / (median_ms * 1e-3) / scale


def _csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _write_csv(rows: list[dict], out) -> None:
    param_names = list(dict.fromkeys(name for row in rows for name in row["params"]))
    writer = csv.writer(out)
    writer.writerow([*CSV_HEAD, *(PARAM_PREFIX + name for name in param_names), *CSV_TAIL])
    for row in rows:
        params = row["params"]
        writer.writerow([
            *(row[c] for c in CSV_HEAD),
            *(_csv_cell(params.get(name)) for name in param_names),
            # csv writes a float with repr(): it reads back exactly
            *("" if row[c] is None else row[c] for c in CSV_TAIL),
        ])


# ---- reading exports back ----------------------------------------------------------------------

_FLOAT_COLUMNS = ("median_ms", "q25_ms", "q75_ms", "iqr_ms", "flops", "bytes", "tflops", "gbps")


def _import_identity(row: dict) -> tuple:
    """(gpu_name, driver, torch, cuda, cublas) of an exported row; empty cells are None."""
    return tuple(row[c] or None for c in ENV_COLUMNS)


def _cell_value(text: str):
    """A p_ cell as export() wrote it: JSON for non-strings, strings as they are."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _import_params(row: dict, param_columns: list[str]) -> dict:
    try:
        key = json.loads(row["key"])
    except ValueError:
        key = None
    if not isinstance(key, dict):
        return {c[len(PARAM_PREFIX):]: _cell_value(row[c]) for c in param_columns if row[c] != ""}
    if not param_columns:  # no p_ columns at all: nothing tells parameters from mode flags
        return {name: value for name, value in key.items() if name != "bench"}
    params = {}
    for name, value in key.items():
        if name == "bench":
            continue
        cell = row.get(PARAM_PREFIX + name)
        # A field of the key without a p_ value in this row is a mode flag (cuda_graph), not a
        # parameter; a None parameter is exported as an empty cell too, so keep those.
        if cell is None or (cell == "" and value not in (None, "")):
            continue
        params[name] = value
    return params


def _import_numbers(row: dict, where: str) -> dict:
    numbers = {}
    for column in _FLOAT_COLUMNS:
        text = row.get(column, "").strip()
        try:
            numbers[column] = float(text) if text else None
        except ValueError:
            raise ShapewiseError(f"{where}: {column} is {text!r}, not a number") from None
    text = row["num_reps"].strip()
    try:
        numbers["num_reps"] = int(text) if text else None
    except ValueError:
        raise ShapewiseError(f"{where}: num_reps is {text!r}, not a whole number") from None
    for amount, rate, scale in (("flops", "tflops", 1e12), ("bytes", "gbps", 1e9)):
        if numbers[amount] is None and numbers[rate] is not None and numbers["median_ms"] is not None:
            numbers[amount] = round(numbers[rate] * scale * numbers["median_ms"] * 1e-3)  # an older export
    if numbers["tflops"] is None:
        numbers["tflops"] = _rate(numbers["flops"], numbers["median_ms"], 1e12)
    if numbers["gbps"] is None:
        numbers["gbps"] = _rate(numbers["bytes"], numbers["median_ms"], 1e9)
    numbers["error"] = row["error"] or None
    numbers["created_utc"] = row["created_utc"] or _now_utc()
    return numbers
