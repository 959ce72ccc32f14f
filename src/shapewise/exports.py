"""The results store's exports: the CSV's columns, writing rows, reading a CSV or JSON export back,
and what makes a row one no measurement can have (row_problem: an import refuses such a file, and
`results --check` finds such rows in a store).

A CSV export is one row per measurement: bench and key, the case's parameters as p_ columns, then the
numbers and the environment; a JSON export is a list of Store.rows() dicts (store.Store.export writes
both, store.Store.import_csv reads them back).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .errors import ShapewiseError
from .hardware import find_gpu
from .limits import GEMM_DIM, LONGEST_NUMBER, json_int

# What the store's rows are of: the measuring commands' benches and the kernel census (cases.KERNELS).
BENCHES = ("gemm", "bmm", "attention", "op", "layer", "comm", "kernels")
# A row whose rate passes its GPU's datasheet peak by this much was not measured: the best measured
# rows reach about 0.86 of the dtype's peak (benchmarks/results), clocks above boost a few percent more.
PEAK_MARGIN = 1.5
PARAM_PREFIX = "p_"  # CSV column prefix of a case's parameters: see Store.export()
ENV_COLUMNS = ("gpu_name", "driver", "torch", "cuda", "cublas")  # joined into rows() and exports

# The parameters of a bench that are sizes: whole numbers from 1 to a GEMM dim's bound (cuBLAS's 32-bit
# int), as every bench measures them (an op row's where its kind is a GEMM's). A row with another, say an
# m of 1e300, measured no such case: priced by calibrate or drawn in a figure it would mislead.
SIZES = {"gemm": ("m", "n", "k", "batch"), "bmm": ("m", "n", "k", "batch"),
         "attention": ("batch", "heads", "kv_heads", "head_dim", "seq")}
MAX_REPS = 2**63 - 1  # SQLite's largest integer: a count past it cannot be stored

CSV_HEAD = ("bench", "key")
CSV_TAIL = ("median_ms", "q25_ms", "q75_ms", "iqr_ms", "num_reps", "flops", "bytes", "tflops", "gbps", "error",
            *ENV_COLUMNS, "created_utc")
JSON_TAIL = ("samples_ms", "metrics", "device", "id", "env_id")  # the JSON export's fields past the CSV's


def open_export(path):
    """An export opened for reading as text: a CSV, or a CSV gzipped (NAME.csv.gz) as larger ones are kept."""
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", newline="", encoding="utf-8")
    return open(path, newline="", encoding="utf-8")


def _now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _utc(text: str | None, where: str) -> str:
    """An imported created_utc as shapewise writes it (ISO 8601 in UTC; one without an offset is UTC, as the column
    says), now where it is empty; a ShapewiseError for one that is no time (the report picks a case's latest
    measurement by it, and text compares as no time does)."""
    if text is None:
        return _now_utc()
    try:
        when = datetime.fromisoformat(text.strip())
        return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).astimezone(timezone.utc).isoformat()
    except (ValueError, OverflowError):  # OverflowError: a time of year 1 moved past the calendar's start
        raise ShapewiseError(f"{where}: created_utc is {_shown(text)}, not an ISO 8601 time (as "
                             f"{_now_utc()}); nothing imported") from None


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


def _param_names(rows: list[dict]) -> list[str]:
    """The parameters of an export's rows, the union in order of first appearance: its p_ columns."""
    return list(dict.fromkeys(name for row in rows for name in row["params"]))


def json_rows(rows: list[dict]) -> list[dict]:
    """rows (Store.rows() dicts) as the JSON export writes them, every row's fields in one order, the CSV's:
    bench, key, params (in the p_ columns' order), the numbers, error, the environment and created_utc, then
    what only the JSON carries (samples_ms, metrics) and last the store's own (device, id, env_id), which an
    import does not read."""
    names = _param_names(rows)
    ordered = []
    for row in rows:
        params = row["params"]
        first = {**{c: row[c] for c in CSV_HEAD}, "params": {n: params[n] for n in names if n in params},
                 **{c: row[c] for c in (*CSV_TAIL, *JSON_TAIL)}}
        ordered.append({**first, **{k: v for k, v in row.items() if k not in first}})
    return ordered


def _write_csv(rows: list[dict], out) -> None:
    param_names = _param_names(rows)
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

@dataclass(frozen=True)
class Imported:
    """One row of an export read back, as Store.import_rows stores it."""

    identity: tuple  # (gpu_name, driver, torch, cuda, cublas)
    bench: str
    key: str
    params: dict
    numbers: dict  # median_ms ... gbps, num_reps, error, created_utc
    samples_ms: list | None = None  # only a JSON export has them
    metrics: dict | None = None


SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file (a results store)


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def read_export(path) -> list[Imported]:
    """The rows of an export (CSV, CSV gzipped, or the JSON export), each checked: a row no
    measurement can have (row_problem) is refused, naming its line, and so is the whole file."""
    if not str(path).strip():  # Path("") is the working folder: not what was meant
        raise ShapewiseError("give the export to import: --import FILE (a .csv, .json, .csv.gz or .json.gz that "
                             "`shapewise results --export` wrote)")
    path = Path(path).expanduser()
    if path.is_dir():
        raise ShapewiseError(f"{path} is a folder: give the export in it to import (a .csv, .json, .csv.gz or "
                             ".json.gz that `shapewise results --export` wrote)")
    try:
        with open_export(path) as f:
            text = f.read()
    except (gzip.BadGzipFile, EOFError) as err:  # BadGzipFile is an OSError
        raise ShapewiseError(f"{path} is not a CSV export of the results store, gzipped ({err})") from None
    except UnicodeDecodeError:
        if _is_sqlite(path):  # another store, to merge: it is exported first
            raise ShapewiseError(f"{path} is a SQLite database (a results store?), not an export: export it first, "
                                 f"`shapewise results --db {path} --export FILE.json`, and import that") from None
        raise ShapewiseError(f"{path} is not an export of the results store (the CSV or JSON that `shapewise "
                             "results --export` writes): not a text file (not UTF-8)") from None
    except OSError as err:
        raise ShapewiseError(f"cannot read {path}: {err.strerror or err}") from None
    if not text.strip():
        raise ShapewiseError(f"{path} is empty: expected a CSV or JSON written by `shapewise results --export`")
    try:  # JSON of any kind (null, 5) is read as JSON, not as a CSV
        data = json.loads(text, parse_int=json_int)
    except (ValueError, RecursionError) as err:
        if text.lstrip()[:1] in ("[", "{"):  # meant as JSON: its own error, not a CSV's
            raise ShapewiseError(f"{path} is not a JSON export of the results store ({err})") from None
        rows, what = _read_csv(path, text), "a CSV header and no rows"
    else:
        rows, what = _read_json(path, data), "an empty list"
    if not rows:  # an export of a store holds its rows: a file of none is not what was meant to be imported
        raise ShapewiseError(f"{path} is {what}: nothing to import; "
                             "`shapewise results --export FILE` writes a store's rows")
    return rows


def _shown(value) -> str:
    """A value as a message quotes it, cut short (a cell may hold thousands of characters); a BLOB said so."""
    if isinstance(value, bytes):
        return f"binary data ({len(value):,} bytes)"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}... ({len(str(value)):,} characters)"


def _read_csv(path, text: str) -> list[Imported]:
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader, None)
        lines = list(reader)
    except csv.Error as err:
        raise ShapewiseError(f"{path} is not a CSV export of the results store ({err})") from None
    # flops and bytes joined the export later: older files lack them, and they are derived below.
    missing = [c for c in (*CSV_HEAD, *CSV_TAIL) if c not in header and c not in ("flops", "bytes")]
    if missing:
        what = ("its header lacks " if set(header) & {*CSV_HEAD, *CSV_TAIL} else "it is not one at all: no ")
        raise ShapewiseError(f"{path} is not a CSV export of the results store: {what}column "
                             f"{', '.join(missing)} (`shapewise results --export FILE.csv` writes one)")
    param_columns = [c for c in header if c.startswith(PARAM_PREFIX)]
    rows = []
    for number, cells in enumerate(lines, start=2):
        if not any(cells):
            continue  # a blank line
        where = f"{path}, line {number}"
        if len(cells) != len(header):
            raise ShapewiseError(f"{where}: {len(cells)} cells, but the header has {len(header)}")
        row = dict(zip(header, cells))
        # A key that is no JSON object (fields None) is refused by row_problem below, once the numbers have
        # said their own errors: its parameters are never kept, so none ({}) stand in for them until then.
        fields = _key_fields(row["key"])
        mismatch = param_mismatch(row, param_columns, fields or {})
        if mismatch:
            raise ShapewiseError(f"{where}: {mismatch}; nothing imported")
        rows.append(_checked(Imported(_import_identity(row), row["bench"], row["key"],
                                      _import_params(row, param_columns, fields or {}), _import_numbers(row, where)),
                             where, fields))
    return rows


def _read_json(path, data) -> list[Imported]:
    """The JSON export, read: a list of Store.rows() dicts, samples and metrics included."""
    if not isinstance(data, list):
        kind = {dict: "an object", str: "a string", bool: "true or false"}.get(type(data), "a number")
        raise ShapewiseError(f"{path} is JSON ({'null' if data is None else kind}) but not a shapewise export: that "
                             f"is a list of rows (`shapewise results --export FILE.json` writes one)")
    rows = []
    for number, item in enumerate(data, start=1):
        where = f"{path}, row {number}"
        if not isinstance(item, dict) or not all(isinstance(item.get(c), str) for c in CSV_HEAD) \
                or not isinstance(item.get("params"), dict):
            raise ShapewiseError(f"{where}: not a row of the export (an object with bench, key and params); "
                                 f"nothing imported")
        # checked by _checked; a whole number of a float column stored as one (SQLite holds no int past 2^63)
        numbers = {column: float(v) if type(v) is int else v for column, v in
                   ((c, item.get(c)) for c in _FLOAT_COLUMNS)}
        numbers["num_reps"] = reps = item.get("num_reps")
        if _is_number(reps) and math.isfinite(reps) and reps != int(reps):
            raise ShapewiseError(f"{where}: num_reps is {_shown(reps)}, not a whole number; nothing imported")
        samples, metrics = item.get("samples_ms"), item.get("metrics")
        if samples is not None and not (isinstance(samples, list) and all(
                _is_number(v) and math.isfinite(v) and v > 0 for v in samples)):
            raise ShapewiseError(f"{where}: samples_ms is not a list of positive times; nothing imported")
        if metrics is not None and not isinstance(metrics, dict):
            raise ShapewiseError(f"{where}: metrics is not an object; nothing imported")
        numbers["error"] = _text_or_none(item.get("error"))
        numbers["created_utc"] = _utc(_text_or_none(item.get("created_utc")), where)
        identity = tuple(_text_or_none(item.get(c)) for c in ENV_COLUMNS)
        rows.append(_checked(Imported(identity, item["bench"], item["key"], item["params"], numbers, samples, metrics),
                             where, _key_fields(item["key"])))
    return rows


def _text_or_none(value) -> str | None:
    return None if value in (None, "") else str(value)


def _checked(row: Imported, where: str, fields: dict | None) -> Imported:
    """row, unless row_problem finds it one no measurement can have; fields: its key read (_key_fields)."""
    problem = _row_problem({"bench": row.bench, "key": row.key, "params": row.params, **row.numbers,
                            "gpu_name": row.identity[0]}, fields)
    if problem:
        raise ShapewiseError(f"{where}: {problem}; nothing imported")
    return row


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


def _import_params(row: dict, param_columns: list[str], fields: dict) -> dict:
    """A CSV row's parameters: the fields of its key (fields, read) that its p_ cells say are parameters."""
    if not param_columns:  # no p_ columns at all: nothing tells parameters from mode flags
        return {name: value for name, value in fields.items() if name != "bench"}
    params = {}
    for name, value in fields.items():
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
    for column in (*_FLOAT_COLUMNS, "num_reps"):
        text, whole = row.get(column, "").strip(), column == "num_reps"
        if len(text) > LONGEST_NUMBER:
            raise ShapewiseError(f"{where}: {column} is {_shown(text)}, longer than any number shapewise writes; "
                                 f"nothing imported")
        try:
            numbers[column] = (int if whole else float)(text) if text else None
        except ValueError:
            raise ShapewiseError(f"{where}: {column} is {_shown(text)}, not a {'whole ' if whole else ''}number; "
                                 f"nothing imported") from None
        if numbers[column] is not None and not math.isfinite(numbers[column]):
            raise ShapewiseError(f"{where}: {column} is {_shown(text)}, not a finite number; nothing imported")
    for amount, rate, scale in (("flops", "tflops", 1e12), ("bytes", "gbps", 1e9)):
        if numbers[amount] is None and numbers[rate] is not None and numbers["median_ms"] is not None:
            numbers[amount] = round(numbers[rate] * scale * numbers["median_ms"] * 1e-3)  # an older export
    if numbers["tflops"] is None:
        numbers["tflops"] = _rate(numbers["flops"], numbers["median_ms"], 1e12)
    if numbers["gbps"] is None:
        numbers["gbps"] = _rate(numbers["bytes"], numbers["median_ms"], 1e9)
    numbers["error"] = row["error"] or None
    numbers["created_utc"] = _utc(row["created_utc"] or None, where)
    return numbers


def param_mismatch(row: dict, param_columns: list[str], fields: dict) -> str | None:
    """The first p_ cell of an exported row that disagrees with the row's key (fields, read), said in words;
    None where they agree (the key is what a sweep matches, the p_ cells what a reader sees)."""
    for column in param_columns:
        name, cell = column[len(PARAM_PREFIX):], row[column]
        if cell != "" and name in fields and cell != fields[name] and _cell_value(cell) != fields[name]:
            return f"{column} is {_shown(cell)} but the key says {name} is {_shown(fields[name])}"
    return None


def _key_fields(key) -> dict | None:
    """A row's key read: the JSON object shapewise writes, or None where it is none (not JSON, or JSON of
    another kind, or nested past what the parser can follow)."""
    try:
        fields = json.loads(key, parse_int=json_int) if isinstance(key, str) else None
    except (ValueError, RecursionError):
        return None
    return fields if isinstance(fields, dict) else None


def row_problem(row: dict) -> str | None:
    """What makes a result row one no measurement can have, in words, or None for a plausible row.
    row: as Store.rows() gives it (bench, key, params, the numbers, error, gpu_name)."""
    return _row_problem(row, _key_fields(row.get("key")))


def _row_problem(row: dict, fields: dict | None) -> str | None:
    """row_problem, the row's key read already (_key_fields)."""
    bench, key = row.get("bench"), row.get("key")
    if bench not in BENCHES:
        return f"bench {_shown(bench)} is none of shapewise's ({', '.join(BENCHES)})"
    if fields is None:
        return f"key {str(key)[:60]!r} is not the JSON object shapewise writes"
    if fields.get("bench", bench) != bench:
        return f"bench is {bench!r} but the key says {_shown(fields['bench'])}"
    params = row.get("params")
    if isinstance(params, dict):
        for name, value in params.items():
            if name in fields and fields[name] != value:
                return f"parameter {name} is {_shown(value)} but the key says {_shown(fields[name])}"
        kind = params.get("kind") if bench == "op" else bench
        sizes = SIZES.get(kind, ()) if isinstance(kind, str) else ()
        for name in (n for n in sizes if n in params):
            size = params[name]
            if not (_is_number(size) and 1 <= size <= GEMM_DIM.high and size == int(size)):
                return (f"parameter {name} is {_shown(size)}: a {bench} size is a whole number from 1 to "
                        f"{GEMM_DIM.high:,} ({GEMM_DIM.reason})")
    for column in (*_FLOAT_COLUMNS, "num_reps"):
        value = row.get(column)
        if value is not None and not (_is_number(value) and math.isfinite(value)):
            return f"{column} is {_shown(value)}, not a finite number"
    median, q25, q75, reps = row.get("median_ms"), row.get("q25_ms"), row.get("q75_ms"), row.get("num_reps")
    if median is None:
        if any(row.get(c) is not None for c in ("q25_ms", "q75_ms", "num_reps")):
            return "median_ms is missing, though the row has quartiles or repetitions"
        return None
    if median <= 0:
        return f"median_ms is {median:g}: a time must be positive"
    if reps is not None and reps < 1:
        return f"num_reps is {reps}: a median needs one repetition or more"
    if reps is not None and reps > MAX_REPS:
        return f"num_reps is {reps:.4g}: more repetitions than a store can count"
    negative = next((c for c in _FLOAT_COLUMNS if row.get(c) is not None and row[c] < 0), None)
    if negative:
        return f"{negative} is {row[negative]:g}: it cannot be negative"
    if q25 is not None and q75 is not None and not q25 <= median <= q75:
        return f"median_ms {median:g} is not between its quartiles (q25_ms {q25:g}, q75_ms {q75:g})"
    # 1e-3: an older export has no flops column, and the flops derived from its rate are rounded
    for amount, rate, scale in (("flops", "tflops", 1e12), ("bytes", "gbps", 1e9)):
        derived = _rate(row.get(amount), median, scale)
        given = row.get(rate)
        if derived is not None and given is not None and not math.isclose(given, derived, rel_tol=1e-3):
            return f"{rate} is {given:g}, but {amount} / median_ms gives {derived:g}"
    return _over_peak(row, fields.get("dtype"))


def finite_json(value):
    """value with every NaN or infinite float as None, through dicts and lists: JSON has no such numbers
    (json.dump would write NaN or Infinity, which JSON readers refuse)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_json(v) for v in value]
    return value


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _over_peak(row: dict, dtype) -> str | None:
    """Where the row names a GPU the table knows: its TFLOP/s against that GPU's datasheet peak."""
    tflops, name = row.get("tflops"), row.get("gpu_name")
    if not tflops or not name:
        return None
    gpu = find_gpu(name)
    if gpu is None:
        return None  # a CPU, or a GPU the table lacks: no peak to hold it to
    peak = gpu.tflops.get(dtype) or max(gpu.tflops.values())
    if tflops > PEAK_MARGIN * peak:
        return (f"{tflops:,.4g} TFLOP/s is {tflops / peak:,.4g}× the {gpu.name}'s datasheet peak of {peak:,g} "
                f"TFLOP/s{f' ({dtype})' if dtype in gpu.tflops else ''}: not a measurement")
    return None
