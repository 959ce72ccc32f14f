"""The results store: every measurement shapewise makes, in one SQLite file.

Schema (PRAGMA user_version = 1):

    environments  one row per machine + software stack: id, fingerprint (UNIQUE), device,
                  gpu_name, driver, torch, cuda, cublas, cudnn, first_seen_utc, and env_json,
                  the full measure.environment() dict as first seen (clocks, temperature ...).
    results       one row per (env_id, bench, key): params_json, the timing's median_ms, q25_ms,
                  q75_ms, iqr_ms, num_reps and samples_json (every sample), flops, bytes, the
                  derived tflops and gbps, metrics_json, error (NULL when the case succeeded)
                  and created_utc.

Resume rule: a case is identified by its environment, its bench and its key (case_key(params)).
A sweep asks done_keys(env_id, bench) and skips those keys; failed cases are retried unless the
caller skips failed_keys() too. Recording a key again (a forced re-measure, or a retry of a
failed case) replaces its row. The environment fingerprint hashes only what identifies the
machine and its software (device, gpu_name, driver, torch, cuda, cublas), never clocks,
temperature or timestamps, so a sweep restarted on the same machine and stack picks up where it
stopped.

Each record() commits on its own and the database runs in WAL mode, so a crash or Ctrl-C keeps
every row recorded before it.

import_csv() reads an export back in (results measured elsewhere, shared as CSV or JSON), refusing
a file with a row no measurement can have (exports.row_problem). An export lacks the device, so
imported rows live in environments of their own (device unknown: a local sweep never skips a case
because of them); a CSV also lacks the samples and metrics (samples_ms [], metrics None). A row the store
holds already as the same measurement (same case, machine and stack as an export names them, and the same
numbers and created_utc) is not stored twice: a store's own export read back into it changes nothing.

A damaged file never ends in a traceback: every SQLite error becomes one ShapewiseError naming the
file and what to do (check_integrity() runs SQLite's own check; export() saves what is still
readable of a damaged store, row by row; implausible_rows() finds rows no measurement can have). A
row whose cells are not of the kinds shapewise writes (text where a number belongs, a BLOB key, params
that are no JSON object, an environment the store does not hold) is refused by name, never read as
something it is not; a store lacking a column of the schema is refused on opening.

A new store is made only in a folder that exists (a mistyped --db would start one unnoticed), but for
the default store, whose folder shapewise makes itself.

Standard library only: the store must work where torch and numpy are not installed.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path

from .errors import ShapewiseError, argument, listed
from .exports import (
    _FLOAT_COLUMNS,
    ENV_COLUMNS,
    SQLITE_MAGIC,
    Imported,
    _now_utc,
    _rate,
    _shown,
    _write_csv,
    finite_json,
    json_rows,
    read_export,
    row_problem,
)

SCHEMA_VERSION = 1
EXPORT_FORMATS = ("csv", "json")

# The environment fields that make up the fingerprint, each with the measure.environment() keys
# it is read from, first found wins. On a CPU there is no gpu_name: the processor model stands in.
IDENTITY_FIELDS = {
    "device": ("device",),
    "gpu_name": ("gpu_name", "processor"),
    "driver": ("driver_version",),
    "torch": ("torch_version",),
    "cuda": ("cuda_version",),
    "cublas": ("cublas_version",),
}

_SCHEMA = """
CREATE TABLE environments (
    id             INTEGER PRIMARY KEY,
    fingerprint    TEXT NOT NULL UNIQUE,
    device         TEXT,
    gpu_name       TEXT,
    driver         TEXT,
    torch          TEXT,
    cuda           TEXT,
    cublas         TEXT,
    cudnn          TEXT,
    first_seen_utc TEXT NOT NULL,
    env_json       TEXT NOT NULL
);
CREATE TABLE results (
    id           INTEGER PRIMARY KEY,
    env_id       INTEGER NOT NULL REFERENCES environments(id),
    bench        TEXT NOT NULL,
    key          TEXT NOT NULL,
    params_json  TEXT NOT NULL,
    median_ms    REAL,
    q25_ms       REAL,
    q75_ms       REAL,
    iqr_ms       REAL,
    num_reps     INTEGER,
    samples_json TEXT,
    flops        REAL,
    bytes        REAL,
    tflops       REAL,
    gbps         REAL,
    metrics_json TEXT,
    error        TEXT NULL,
    created_utc  TEXT NOT NULL,
    UNIQUE (env_id, bench, key)
);
"""


@functools.cache
def _columns() -> dict[str, tuple[str, ...]]:
    """Each table's columns, as _SCHEMA makes them: a store lacking one was altered by hand or damaged."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(_SCHEMA)
        return {table: tuple(r[1] for r in conn.execute(f"PRAGMA table_info({table})"))
                for table in ("environments", "results")}
    finally:
        conn.close()


def default_path() -> Path:
    """$SHAPEWISE_DB, else $XDG_CACHE_HOME/shapewise/results.db, else ~/.cache/shapewise/results.db."""
    explicit = os.environ.get("SHAPEWISE_DB")
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME")
    base = Path(cache).expanduser() if cache else Path.home() / ".cache"
    return base / "shapewise" / "results.db"


def case_key(params: dict) -> str:
    """The canonical string of a case's parameters: compact JSON with sorted keys, so that the
    same case always gets the same key whatever order its parameters were given in."""
    return _to_json(params, sort_keys=True)


def _to_json(value, sort_keys: bool = False) -> str:
    try:
        return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ShapewiseError(f"cannot store {value!r}: only JSON values (str, numbers, bool, None, "
                             f"lists, dicts with str keys) can be stored ({err})") from None


def _text(value) -> str | None:
    return None if value is None else str(value)


def _identity(env: dict) -> dict[str, str | None]:
    """The fields of an environment that identify it, as text (cudnn_version is an int)."""
    identity = {}
    for field, keys in IDENTITY_FIELDS.items():
        identity[field] = next((_text(env[k]) for k in keys if env.get(k) is not None), None)
    return identity


def fingerprint(env: dict) -> str:
    """A stable hash of an environment's identity fields (not its clocks or timestamp)."""
    canonical = json.dumps(_identity(env), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _advice(path: Path, err: sqlite3.Error, *, read_only: bool = False) -> str:
    """One line for an SQLite error on the store at `path`: what went wrong and what to do (read_only: the
    command only reads a store, so a new path is no way out)."""
    text = str(err)
    low = text.lower()
    other = "or use another store (--db PATH or $SHAPEWISE_DB)"
    if "malformed" in low or "not a database" in low or "corrupt" in low or "could not decode" in low:
        return _damage(path, text, read_only=read_only)
    if "locked" in low or "busy" in low:
        return (f"the results store {path} is locked by another process ({text}): wait for it (a sweep still "
                f"running?) {other}")
    if "readonly" in low or "read-only" in low:
        return f"cannot write to the results store {path} ({text}): make it and its folder writable {other}"
    if "unable to open" in low or "disk i/o" in low or "full" in low:
        return f"cannot use the results store {path} ({text}): check the file, its folder and the disk, {other}"
    return f"the results store {path} failed: {text[:200]}; check the file {other}"


def _damage(path: Path, text: str, *, read_only: bool = False) -> str:
    """The advice for a file that SQLite cannot read: not a database at all, a database nothing of
    which reads (truncated), or one with damaged pages, whose other rows an export still saves."""
    if "could not decode" in text.lower():
        text = "a text column is not UTF-8"  # SQLite's message quotes the damaged bytes themselves
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        head = SQLITE_MAGIC
    if not head.startswith(SQLITE_MAGIC):
        return (f"{path} is not a results store: it is {_what_file(head)}, not a SQLite database; give --db the "
                f".db file that `shapewise bench` or `shapewise calibrate` wrote"
                + ("" if read_only else " (or a new path to start a store)"))
    if not _any_table_reads(path):
        return (f"the results store {path} is damaged beyond reading ({text}; truncated or overwritten?): no row "
                f"of it can be saved; restore it from a copy, or move it away and give --db a new path "
                f"(an export of it, if one was made, reads into the new store with `shapewise results --import`)")
    return (f"the results store {path} is damaged ({text}): save what is still readable with `shapewise "
            f"results --db {path} --export rows.csv`, then move the file away and start a new store, "
            f"into which `shapewise results --import rows.csv` reads the rows back")


def _what_file(head: bytes) -> str:
    """What a file that is not a database looks like from its first bytes, in a few words."""
    try:
        text = head.decode("utf-8").lstrip()
    except UnicodeDecodeError:
        return "binary data"
    if not text:
        return "blank"
    if text[0] in "{[":
        return "JSON (a config or a --json output?)"
    if text.startswith("bench,key"):
        return "a CSV export (read it into a store with `shapewise results --import`)"
    return "text"


def _any_table_reads(path: Path) -> bool:
    """Whether SQLite reads the store's schema and results table at all (export() saves rows only then)."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        conn.execute("SELECT name FROM sqlite_master").fetchall()
        conn.execute("SELECT id FROM results LIMIT 1").fetchall()
        return True
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _guarded(method):
    """Store methods raise ShapewiseError, never sqlite3.Error: a damaged page can surface in any query."""
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as err:
            raise ShapewiseError(_advice(self.path, err, read_only=self.read_only)) from None
    return guarded


class Store:
    """One SQLite file of results. Use as a context manager, or call close().

    read_only: open an existing store to read it (results, plots, reports): nothing is created,
    and a missing file is an error."""

    def __init__(self, path: str | os.PathLike | None = None, *, read_only: bool = False):
        if path is not None and not os.fspath(path).strip():
            raise ShapewiseError("the path of the results store is empty: give --db a file, e.g. results.db, or leave "
                                 "--db out for the default store")
        self.path = Path(path).expanduser() if path is not None else default_path()
        self.read_only = read_only
        self.unreadable_rows = 0  # rows the last export() could not read (a damaged store)
        self.already_stored_rows = 0  # rows the last import held already (replaced by the file's)
        self.repeated_rows = 0  # rows the last import's file held more than once (its last copy kept)
        self.same_rows = 0  # rows the last import found stored already as the same measurement (not stored twice)
        if self.path.is_dir():
            raise ShapewiseError(f"the results store {self.path} is a folder: give a file, e.g. {self.path / 'results.db'}")
        if read_only and not self.path.is_file():  # a path given is checked, not told to be given
            advice = ("check the path; `shapewise bench` and `shapewise calibrate` make a store" if path is not None
                      else "measure first (`shapewise bench`), or give --db PATH")
            given = f" ({argument('path', '--db')})" if path is not None else ""  # as the caller named it
            raise ShapewiseError(f"no results store at {self.path}{given}: {advice}")
        if not read_only:
            self._folder()
        self._new = not read_only and not self.path.exists()  # made by this Store: taken back if refused (__exit__)
        try:
            # isolation_level=None: no implicit transactions; each statement commits on its own
            # unless we open one explicitly. timeout: wait for another process's write, as when
            # two sweeps on two GPUs share one store.
            target = f"{self.path.resolve().as_uri()}?mode=ro" if read_only else str(self.path)
            self._conn = sqlite3.connect(target, timeout=30, isolation_level=None, uri=read_only)
        except sqlite3.Error as err:
            raise ShapewiseError(_advice(self.path, err, read_only=self.read_only)) from None
        try:
            self._conn.row_factory = sqlite3.Row
            if read_only:
                self._check_schema(self._conn.execute("PRAGMA user_version").fetchone()[0])
            else:
                self._setup_when_free()
                # Writing into a damaged file can spread the damage: a writer checks the pages first
                # (quick_check: the b-trees' structure, not the indexes' contents; a second or so
                # for a store of a few hundred MB).
                verdict = self._conn.execute("PRAGMA quick_check(1)").fetchone()[0]
                if verdict != "ok":
                    raise sqlite3.DatabaseError(f"database disk image is malformed: {' '.join(verdict.split())}")
        except sqlite3.Error as err:
            # "file is not a database" and the like come from the first statement, not connect()
            self._conn.close()
            raise ShapewiseError(_advice(self.path, err, read_only=self.read_only)) from None
        except ShapewiseError:
            self._conn.close()
            raise

    def _folder(self) -> None:
        """The store's folder: made for the default store, else it must exist, as a typo in --db would
        otherwise start a new store unnoticed (and the measurements would seem lost)."""
        folder = self.path.parent
        found = next((p for p in (folder, *folder.parents) if p.exists()), None)
        if found is not None and not found.is_dir():
            raise ShapewiseError(f"cannot make the results store {self.path}: {found} is a file, not a folder; "
                                 f"check the path")
        if folder.is_dir():
            return
        if self.path.absolute() != default_path().absolute():
            raise ShapewiseError(f"the folder {folder} of the results store {self.path} does not exist: check the path "
                                 f"(a mistyped one would start a new store), or make the folder first")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ShapewiseError(f"cannot make the folder of the results store {self.path}: "
                                 f"{err.strerror or err}") from None

    def _setup_when_free(self, seconds: float = 30.0) -> None:
        """_setup, waiting out another process that opens the same new store at the same moment:
        switching a new file to WAL can report "locked" at once rather than wait (several ranks
        of one sweep under torchrun open the store together)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                return self._setup()
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _setup(self) -> None:
        conn = self._conn
        # WAL: a committed row survives a crash of this process, and readers don't block writers.
        conn.execute("PRAGMA journal_mode=WAL")
        # FULL syncs each commit: one fsync per measured case is cheap next to measuring it.
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        # IMMEDIATE: two processes opening a new store at once must not both create the schema.
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if not self._check_schema(version):  # a new, empty file
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def _check_schema(self, version: int) -> bool:
        """Raise unless the file is a shapewise store this code reads; False for an empty file."""
        if version == 0:
            tables = [r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            if tables:
                raise ShapewiseError(
                    f"{self.path} is a SQLite database but not a shapewise results store "
                    f"(it has tables {', '.join(sorted(tables))[:200]}); point SHAPEWISE_DB or --db elsewhere")
            if self.read_only:
                raise ShapewiseError(f"{self.path} is an empty results store: nothing measured yet")
            return False
        if version > SCHEMA_VERSION:
            raise ShapewiseError(
                f"{self.path} has schema version {version}, newer than this shapewise "
                f"understands ({SCHEMA_VERSION}); upgrade shapewise or use another store")
        if version != SCHEMA_VERSION:
            raise ShapewiseError(f"{self.path} has unknown schema version {version}: not a store this "
                                 f"shapewise wrote; point SHAPEWISE_DB or --db elsewhere")
        for table, columns in _columns().items():
            held = {r[1] for r in self._conn.execute(f"PRAGMA table_info({table})")}
            missing = [c for c in columns if c not in held]
            if missing:
                what = f"has no {table} table" if not held else f"lacks the column {listed(missing, 'and')} of its {table} table"
                raise ShapewiseError(f"the results store {self.path} {what}: altered by hand, or not written by "
                                     f"shapewise; restore it from a copy, or point --db or SHAPEWISE_DB elsewhere")
        return True

    def _rollback(self) -> None:
        """Undo the open transaction; SQLite may have ended it already (a damaged page rolls back)."""
        try:
            self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    # ---- lifetime ------------------------------------------------------------------------------

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind, *exc) -> None:
        self.close()
        if self._new and kind is not None and issubclass(kind, ShapewiseError):
            self._take_back()

    def _take_back(self) -> None:
        """Remove the store this Store made where the command was refused before anything was stored in it: a
        refusal leaves no new empty store behind (which `shapewise results` would then call one)."""
        try:
            with sqlite3.connect(self.path) as conn:
                held = conn.execute("SELECT (SELECT COUNT(*) FROM environments) + (SELECT COUNT(*) FROM results)")
                if held.fetchone()[0]:
                    return
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        except (sqlite3.Error, OSError):  # kept where it cannot be read or removed: nothing is lost by keeping it
            pass

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # ---- environments --------------------------------------------------------------------------

    @_guarded
    def environment_id(self, env: dict) -> int:
        """The id of this environment, inserted on first sight. Only its identity fields decide
        which row it is; the env_json kept is the first one seen."""
        identity = _identity(env)
        fp = fingerprint(env)
        env_json = json.dumps(env, sort_keys=True, default=str)  # default: a stray non-JSON value
        self._conn.execute(
            "INSERT OR IGNORE INTO environments (fingerprint, device, gpu_name, driver, torch, cuda, "
            "cublas, cudnn, first_seen_utc, env_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (fp, identity["device"], identity["gpu_name"], identity["driver"], identity["torch"],
             identity["cuda"], identity["cublas"], _text(env.get("cudnn_version")), _now_utc(),
             env_json))
        row = self._conn.execute("SELECT id FROM environments WHERE fingerprint = ?", (fp,)).fetchone()
        return row[0]

    # ---- results -------------------------------------------------------------------------------

    def done_keys(self, env_id: int, bench: str) -> set[str]:
        """Keys of the cases of `bench` that succeeded in this environment: a resumed sweep skips them."""
        return self._keys(env_id, bench, "error IS NULL")

    def failed_keys(self, env_id: int, bench: str) -> set[str]:
        """Keys of the cases of `bench` that were recorded with an error in this environment."""
        return self._keys(env_id, bench, "error IS NOT NULL")

    @_guarded
    def _keys(self, env_id: int, bench: str, condition: str) -> set[str]:
        cur = self._conn.execute(
            f"SELECT key FROM results WHERE env_id = ? AND bench = ? AND {condition}", (env_id, bench))
        return {r[0] for r in cur}

    @_guarded
    def record(self, *, env_id: int, bench: str, key: str, params: dict, timing=None,
               flops: float | None = None, bytes: float | None = None,
               metrics: dict | None = None, error: str | None = None) -> None:
        """Store one case's result, replacing any earlier row of the same (env_id, bench, key).

        timing is a measure.Timing (or None for a case that failed before it was timed); flops
        and bytes are the work the case does, from which tflops and gbps follow at the median.
        The row is committed before this returns."""
        median = timing.median_ms if timing is not None else None
        values = (
            env_id, bench, key, _to_json(params),
            median,
            timing.q25_ms if timing is not None else None,
            timing.q75_ms if timing is not None else None,
            timing.iqr_ms if timing is not None else None,
            timing.num_reps if timing is not None else None,
            _to_json(list(timing.samples_ms)) if timing is not None else None,
            flops, bytes,
            _rate(flops, median, 1e12), _rate(bytes, median, 1e9),
            _to_json(metrics) if metrics is not None else None,
            _text(error), _now_utc(),
        )
        try:
            # One statement outside any transaction: SQLite commits it on its own, atomically.
            self._conn.execute(
                "INSERT OR REPLACE INTO results (env_id, bench, key, params_json, median_ms, q25_ms, "
                "q75_ms, iqr_ms, num_reps, samples_json, flops, bytes, tflops, gbps, metrics_json, "
                "error, created_utc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                values)
        except sqlite3.IntegrityError as err:
            raise ShapewiseError(f"cannot record {bench} {key} in {self.path}: {err} "
                                 f"(is env_id {env_id} from environment_id()?)") from None

    @_guarded
    def rows(self, *, bench: str | None = None, env_id: int | None = None,
             include_errors: bool = True) -> list[dict]:
        """Results in the order they were recorded, with params, metrics and samples_ms decoded
        and the environment's device ("cpu", "cuda:0"; None for rows imported from an export), gpu_name
        (on a CPU, the processor), driver, torch, cuda and cublas joined in."""
        conditions, args = [], []
        if bench is not None:
            conditions.append("r.bench = ?")
            args.append(bench)
        if env_id is not None:
            conditions.append("r.env_id = ?")
            args.append(env_id)
        if not include_errors:
            conditions.append("r.error IS NULL")
        where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        cur = self._conn.execute(f"{_ROWS} {where} ORDER BY r.id", args)
        return [_decode(row, self.path) for row in cur]

    @_guarded
    def summary(self) -> dict:
        """{"path", "environments": count, "benches": {bench: {"ok": n, "failed": n}}}."""
        benches = {}
        cur = self._conn.execute(
            "SELECT bench, SUM(error IS NULL), SUM(error IS NOT NULL) FROM results "
            "GROUP BY bench ORDER BY bench")
        for bench, ok, failed in cur:
            benches[bench] = {"ok": ok, "failed": failed}
        environments = self._conn.execute("SELECT COUNT(*) FROM environments").fetchone()[0]
        return {"path": str(self.path), "environments": environments, "benches": benches}

    # ---- export --------------------------------------------------------------------------------

    @_guarded
    def export(self, path: str | os.PathLike, *, fmt: str = "csv", bench: str | None = None) -> int:
        """Write the results (of one bench, or all) to `path`; return the number of rows.

        json: a list of rows() dicts, samples_ms included, each row's fields in the CSV's order
        (exports.json_rows), then samples_ms, metrics and the store's own device, id and env_id.
        csv: one line per result with columns bench, key, then one column per parameter named
        p_<name> (the union over the rows, in order of first appearance; empty where a row lacks
        it; strings as they are, other values as JSON, e.g. true, [1, 2]), then median_ms, q25_ms,
        q75_ms, iqr_ms, num_reps, flops, bytes, tflops, gbps, error, gpu_name, driver, torch, cuda, cublas,
        created_utc. The prefix keeps a parameter from clashing with a fixed column (a parameter
        named "key" or "bytes" would otherwise do so). Samples and metrics are in JSON only.
        No rows to write (none of `bench`, or none at all) is refused, and nothing is written.
        """
        if fmt not in EXPORT_FORMATS:
            raise ShapewiseError(f"unsupported export format {fmt!r}: use one of {', '.join(EXPORT_FORMATS)}")
        rows, self.unreadable_rows = self._readable_rows(bench)
        path = Path(path).expanduser()
        if not rows:  # a header alone, which --import refuses, and over a file of that name perhaps an earlier export
            what = f"no rows of bench {bench}" if bench else "no rows"
            raise ShapewiseError(f"the results store {self.path} holds {what}: nothing to export, {path} not written")
        # Written beside it and renamed: a write that fails halfway leaves no truncated export behind.
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        try:
            opener = gzip.open if path.name.lower().endswith(".gz") else open  # NAME.csv.gz, as import reads it
            with opener(partial, "wt", newline="" if fmt == "csv" else None, encoding="utf-8") as out:
                if fmt == "json":
                    json.dump(finite_json(json_rows(rows)), out, indent=1, allow_nan=False)
                    out.write("\n")
                else:
                    _write_csv(rows, out)
            os.replace(partial, path)
        except OSError as err:
            raise ShapewiseError(f"cannot write {path}: {err.strerror or err}") from None
        finally:
            partial.unlink(missing_ok=True)
        return len(rows)


    # ---- import --------------------------------------------------------------------------------

    def import_csv(self, path: str | os.PathLike) -> int:
        """Read an export (the CSV export() writes, that CSV gzipped as NAME.csv.gz, or the JSON
        export) into the store; return the number of rows imported. See import_rows."""
        return self.import_rows(read_export(path), source=path)

    @_guarded
    def import_rows(self, rows: list[Imported], *, source) -> int:
        """Store rows read by exports.read_export (checked there: a file with a row no measurement
        can have imports nothing); return how many the file holds. same_rows: how many of them the store
        holds already as the same measurement (see _SAME_MEASUREMENT), kept as they are, not stored twice;
        already_stored_rows: how many name a case the store holds in the file's environment but measured
        otherwise, now replaced by the file's; repeated_rows: how many the file itself holds more than
        once (its last copy is kept).

        Environments: one per distinct (gpu_name, driver, torch, cuda, cublas) of the file, with no
        device (an export does not say which one), so imported rows never mix with, or make a sweep
        skip, the cases measured here; env_json notes the file they came from. A row the store holds
        already, from a sweep here or an earlier import, is not stored again: a store's own export read
        back into it changes nothing.
        Params: the key is the canonical JSON of {"bench": ..., params..., mode flags...}; params
        are the key's fields minus "bench" and minus mode flags such as cuda_graph (fields that have
        no p_ value in the row).
        Timings: median, quartiles, IQR, num_reps, flops, bytes, tflops, gbps, error and
        created_utc as exported. A CSV has no samples: samples_ms is [] for a timed row (num_reps
        says how many there were) and None for a failed one, as record() leaves it; metrics None.
        A JSON export keeps both. Importing a file twice changes nothing. The import is one
        transaction."""
        conn = self._conn
        self.already_stored_rows = self.repeated_rows = self.same_rows = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            env_ids: dict = {}
            seen = set()
            for row in rows:
                numbers = row.numbers
                if (row.identity, row.bench, row.key) in seen:
                    self.repeated_rows += 1
                    repeated = True
                else:
                    seen.add((row.identity, row.bench, row.key))
                    repeated = False
                if conn.execute(_SAME_SQL, (row.bench, row.key, *(numbers[c] for c in _SAME_MEASUREMENT),
                                            *row.identity)).fetchone() is not None:
                    self.same_rows += not repeated
                    continue
                if row.identity not in env_ids:
                    env = {"device": None, **dict(zip(("gpu_name", "driver_version", "torch_version",
                                                         "cuda_version", "cublas_version"), row.identity)),
                           "imported_from": str(source), "imported_utc": _now_utc()}
                    env_ids[row.identity] = self.environment_id(env)
                env_id = env_ids[row.identity]
                if not repeated:
                    self.already_stored_rows += conn.execute(
                        "SELECT COUNT(*) FROM results WHERE env_id = ? AND bench = ? AND key = ?",
                        (env_id, row.bench, row.key)).fetchone()[0]
                samples = row.samples_ms if row.samples_ms is not None else (
                    [] if numbers["median_ms"] is not None else None)
                conn.execute(
                    "INSERT OR REPLACE INTO results (env_id, bench, key, params_json, median_ms, q25_ms, "
                    "q75_ms, iqr_ms, num_reps, samples_json, flops, bytes, tflops, gbps, metrics_json, "
                    "error, created_utc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (env_id, row.bench, row.key, _to_json(row.params), numbers["median_ms"], numbers["q25_ms"],
                     numbers["q75_ms"], numbers["iqr_ms"], numbers["num_reps"],
                     None if samples is None else _to_json(samples), numbers["flops"], numbers["bytes"],
                     numbers["tflops"], numbers["gbps"], None if row.metrics is None else _to_json(row.metrics),
                     numbers["error"], numbers["created_utc"]))
            conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        return len(rows)

    # ---- damage --------------------------------------------------------------------------------

    @_guarded
    def check_integrity(self, *, limit: int = 20) -> list[str]:
        """SQLite's PRAGMA integrity_check, every environment's env_json and every row's cells (_unreadable:
        of the kinds shapewise writes, its JSON an object or list as written, its environment held): the
        problems found (at most `limit`), [] for a sound store."""
        try:
            found = [r[0] for r in self._conn.execute(f"PRAGMA integrity_check({int(limit)})")]
        except sqlite3.DatabaseError as err:
            return [str(err)]
        problems = [] if found == ["ok"] else [" ".join(str(p).split()) for p in found]
        try:
            for env_id, text in self._conn.execute("SELECT id, env_json FROM environments ORDER BY id"):
                if not isinstance(_json_or_none(text), dict):
                    problems.append(f"environment {env_id}: env_json is not the JSON object shapewise writes")
            for row in self._conn.execute(f"{_ROWS} ORDER BY r.id"):
                if len(problems) >= limit:
                    break
                problem = _unreadable(dict(row))
                if problem:
                    problems.append(f"result {row['id']}: {problem}")
        except sqlite3.DatabaseError as err:
            problems.append(str(err))
        return problems[:limit]

    @_guarded
    def implausible_rows(self, *, limit: int = 20) -> list[str]:
        """Rows that read but no measurement can have (exports.row_problem: a time that is not
        positive, quartiles out of order, a rate past the GPU's peak ...), said one each (at most
        `limit`); [] where every row is plausible. Such rows got in before import_csv checked."""
        problems = []
        for row in self.rows():
            problem = row_problem(row)
            if problem:
                problems.append(f"result {row['id']} ({row['bench']}): {problem}")
                if len(problems) >= limit:
                    break
        return problems

    def _readable_rows(self, bench: str | None) -> tuple[list[dict], int]:
        """rows(bench=...), or, where the store is damaged, every row that still reads on its own,
        and how many could not be read."""
        try:
            return self.rows(bench=bench), 0
        except ShapewiseError as err:
            damaged = err
        ids = self._row_ids()
        if not ids:  # not even the rows' ids read: nothing to save, said as rows() says it, not as an empty store
            raise damaged
        rows, lost = [], 0
        for row_id in ids:
            try:
                row = self._conn.execute(f"{_ROWS} WHERE r.id = ?", (row_id,)).fetchone()
                if row is not None and (bench is None or row["bench"] == bench):
                    rows.append(_decode(row, self.path))
            except (sqlite3.Error, ShapewiseError):
                lost += 1
        return rows, lost

    def _row_ids(self) -> list[int]:
        """The ids of the results, from the table's own b-tree if it reads, else every id up to the
        largest the primary key has handed out (a damaged page hides some; each is tried alone)."""
        try:
            return [r[0] for r in self._conn.execute("SELECT id FROM results ORDER BY id")]
        except sqlite3.Error:
            pass
        try:
            top = self._conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'results'").fetchone()
        except sqlite3.Error:
            top = None
        if top is None:
            try:
                top = self._conn.execute("SELECT max(id) FROM results").fetchone()
            except sqlite3.Error:
                top = None
        return list(range(1, (top[0] or 0) + 1)) if top else []

# A result row as rows() reads it: the environment joined in (fingerprint, NOT NULL in its table, is NULL
# where the row names an environment the store does not hold: refused by _unreadable, never dropped).
_ROWS = ("SELECT r.*, e.fingerprint, e.device, e.gpu_name, e.driver, e.torch, e.cuda, e.cublas "
         "FROM results r LEFT JOIN environments e ON e.id = r.env_id")
# An imported row is the same measurement as a stored one when it names the same case (bench, key) on the
# same machine and stack as an export names them (ENV_COLUMNS: an export lacks the device) and every
# number it carries agrees: the timing, the work (flops, bytes; the rates follow from them), the error and
# when it was measured (created_utc, to the second). A case measured again differs at least in created_utc.
# Samples and metrics are not compared: a CSV lacks them, and they are the same measurement's details.
_SAME_MEASUREMENT = ("median_ms", "q25_ms", "q75_ms", "iqr_ms", "num_reps", "flops", "bytes", "error", "created_utc")
_SAME_SQL = ("SELECT 1 FROM results r JOIN environments e ON e.id = r.env_id WHERE r.bench = ? AND r.key = ? AND "
             + " AND ".join(f"r.{c} IS ?" for c in _SAME_MEASUREMENT) + " AND "
             + " AND ".join(f"e.{c} IS ?" for c in ENV_COLUMNS) + " LIMIT 1")
# What each column holds as shapewise writes it (SQLite keeps whatever a hand-made UPDATE puts in a cell).
_NUMBERS = _FLOAT_COLUMNS
_TEXTS = ("bench", "key", "created_utc")
_OPTIONAL_TEXTS = ("error", "device", *ENV_COLUMNS)


def _decode(row: sqlite3.Row, path: Path) -> dict:
    """A result as rows() gives it (params, metrics and samples_ms decoded), or a ShapewiseError naming
    what in it is not as shapewise writes it."""
    d = dict(row)
    problem = _unreadable(d)
    if problem:
        raise ShapewiseError(f"result {d.get('id')} of the results store {path}: {problem}; the store is damaged: "
                             f"`shapewise results --db {path} --check` lists the damage")
    return d


def _unreadable(d: dict) -> str | None:
    """What in a row (a dict of _ROWS, decoded in place) is not of the kind shapewise writes, in words; None
    where every cell is."""
    if d.pop("fingerprint", "") is None:
        return f"its env_id {_shown(d.get('env_id'))} names no environment of the store"
    for column in _NUMBERS:
        if d[column] is not None and type(d[column]) not in (int, float):
            return f"{column} is {_shown(d[column])}, not a number"
    if d["num_reps"] is not None and type(d["num_reps"]) is not int:
        return f"num_reps is {_shown(d['num_reps'])}, not a whole number"
    for column in (*_TEXTS, *_OPTIONAL_TEXTS):
        if (d[column] is not None or column in _TEXTS) and not isinstance(d[column], str):
            return f"{column} is {_shown(d[column])}, not text"
    d["params"], d["metrics"], d["samples_ms"] = (_json_or_none(d.pop(c)) for c in
                                                 ("params_json", "metrics_json", "samples_json"))
    if not isinstance(d["params"], dict):
        return "params_json is not the JSON object shapewise writes"
    if d["metrics"] is not None and not isinstance(d["metrics"], dict):
        return "metrics_json is not the JSON object shapewise writes"
    samples = d["samples_ms"]
    if samples is not None and not (isinstance(samples, list) and all(type(v) in (int, float) for v in samples)):
        return "samples_json is not the JSON list of times shapewise writes"
    return None


_NOT_JSON = object()  # what _json_or_none gives for a cell that is no JSON at all


def _json_or_none(text):
    """A JSON column's cell read (None for NULL), or _NOT_JSON where it does not parse."""
    if text is None:
        return None
    try:
        return json.loads(text) if isinstance(text, str) else _NOT_JSON
    except (ValueError, RecursionError):
        return _NOT_JSON
