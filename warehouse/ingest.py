"""Ingest for remote runtimes: batches of records in, each written exactly once, atomically.

A batch carries records of any kinds (the fields of `aicf_induct.records`' record types, as
JSON) or an Arrow table of steps, and a client-chosen id. `commit` validates every value
against the table schemas (`IngestError` names the offending field, e.g. `steps[3].loss: not a
number`), then commits the batch in three steps, all under `<root>/_ingest/` (outside every
table directory, so no reader ever globs it):

  1. each table's rows are written (and fsynced) as `staging/<key>/<table>.parquet`;
  2. `staging/<key>/plan.json` is written atomically (its directory fsync also keeps the
     staged files' entries): the commit point;
  3. roll forward: each staged file is renamed into its table as
     `date=<day>/part-ingest-<key>-<n>.parquet`, then the plan is renamed to
     `batches/<key[:2]>/<key>.json` (the ledger entry) and the staging directory removed.

`<key>` is a hash of the batch id (never a path built from user input). A retried batch whose
ledger entry exists is not written again, also after a restart; `recover` (run when the service
starts) rolls forward every planned batch a killed server left and deletes unplanned staging,
so after a crash a batch is either wholly in the warehouse or not at all. A roll-forward that
fails with the server alive (a refused rename, a full disk) moves its parts back and drops the
plan, so the failed request wrote nothing, unless a compaction has merged a moved part
meanwhile: then the batch stays planned, for its retry or `recover` to complete.

A run is started once: a batch holding `runs` rows commits under one more lock, refused
(`RunExists`) when one of its run ids was started through the service before, under another
batch id (`runs/<hash of the run id>` under `_ingest/`, written after the batch is in the
warehouse; a run of a batch committed before a crash between the two is not guarded).

A batch that ends runs is checked against their ends and committed under `ends_locked` (the
service's route holds it): two ends of one run sent at once are checked one after the other.
A roll-forward that finds a planned part neither staged nor in place accepts it when a
committed compaction marker names it among its inputs (moved, then merged and collected).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from aicf_induct import file_lock
from aicf_induct.json_values import MAX_DEPTH, json_depth
from aicf_induct.records import RESUMED, RUN_STATUSES
from warehouse.compact import excluded
from warehouse.errors import WarehouseError
from warehouse.layout import atomic_write, ensure_dir, fsync_dir, read_markers, table_dir
from warehouse.schema import RUN_TABLES, TABLES
from warehouse.writer import write_parquet

INGEST_DIR = "_ingest"
MAX_BATCH_ID = 128


class IngestError(WarehouseError):
    """A batch that cannot be written as sent; `field` names the offending value."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)  # "": the whole body
        self.field = field
        self.message = message


class RunExists(IngestError):
    """A batch starting a run the service has started before (`index`: its row in the
    batch's `runs`)."""

    def __init__(self, run_id: str, index: int, earlier_row: int | None = None) -> None:
        where = ("was started before (another batch id)" if earlier_row is None else
                 f"is started twice in this batch (runs[{earlier_row}] too)")
        super().__init__(f"runs[{index}].run_id",
                         f"run '{run_id}' {where}; a run is started once: append to it, or "
                         "start a run of another id")
        self.run_id, self.index = run_id, index


@dataclass(frozen=True)
class Committed:
    batch_id: str
    written: bool  # False: the batch was committed before (a retry), nothing written now
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows in the batch


# -- validation: JSON records -> typed columns --------------------------------------------------

# A field's kind: "str", "int", "float", "bool", "ts" (ISO 8601), "count" (an integer, not
# negative), "json" (an object, or its JSON text: what a warehouse row holds, as `push` sends
# it), "map" (object of name -> number). Optional fields may be null or absent.
@dataclass(frozen=True)
class F:
    name: str
    kind: str
    optional: bool = False


KINDS: dict[str, tuple[F, ...]] = {  # the record types' fields, by batch key
    "problems": (F("problem_id", "str"), F("name", "str"), F("source", "str"), F("task", "str"),
                 F("n_rows", "count"), F("n_features", "count"), F("n_classes", "count"),
                 F("target", "str"), F("features", "map", True),
                 F("features_split_seed", "int", True)),
    "runs": (F("run_id", "str"), F("problem_id", "str"), F("problem_name", "str"),
             F("task", "str"), F("config", "json"), F("seed", "int"), F("device", "str"),
             F("library_versions", "json"), F("origin", "str"), F("parent_run_id", "str", True),
             F("started_at", "ts", True)),
    "snapshots": (F("run_id", "str"), F("step", "int"), F("reason", "str"),
                  F("ir_json", "str"), F("fingerprint", "str"), F("param_count", "int"),
                  F("patterns", "map", True)),
    "steps": (F("run_id", "str"), F("step", "int"), F("epoch", "int"), F("loss", "float"),
              F("grad_norm", "float"), F("update_ratio", "float"), F("lr", "float"),
              F("step_time_s", "float"), F("batch_size", "int"), F("trajectory", "int", True)),
    "events": (F("run_id", "str"), F("step", "int"), F("kind", "str"), F("name", "str"),
               F("detail", "json", True), F("metrics_before", "json", True),
               F("metrics_after", "json", True), F("at", "ts", True)),
    "results": (F("run_id", "str"), F("step", "int"), F("epoch", "int"), F("split", "str"),
                F("metric", "str"), F("value", "float"), F("final", "bool", True),
                F("trajectory", "int", True)),
    "run_ends": (F("run_id", "str"), F("status", "str"), F("steps", "int"),
                 F("wall_time_s", "float"), F("error", "str", True), F("ended_at", "ts", True)),
}

_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "count": (int,),
                                       "float": (float, int), "bool": (bool,), "ts": (str,),
                                       "json": (dict, str), "map": (dict,)}
_SAY = {"str": "not a string", "int": "not an integer", "count": "not an integer",
        "float": "not a number", "bool": "not a boolean", "ts": "not an ISO 8601 time",
        "json": "not a JSON object", "map": "not an object of numbers"}


def _columns(kind: str, records: Any) -> dict[str, list[Any]]:
    """`records` (a list of objects) as checked columns, one list per field."""
    fields = KINDS[kind]
    if not isinstance(records, list):
        raise IngestError(kind, "not a list of records")
    names = {f.name for f in fields}
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            raise IngestError(f"{kind}[{i}]", "not an object")
        if r.keys() - names:
            raise IngestError(f"{kind}[{i}].{sorted(r.keys() - names)[0]}", "unknown field")
    cols: dict[str, list[Any]] = {}
    for f in fields:
        col = [r.get(f.name) for r in records]
        ok = _TYPES[f.kind] + ((type(None),) if f.optional else ())
        if not {type(v) for v in col} <= set(ok):  # one pass in C; the slow scan only on error
            i, v = next((i, v) for i, v in enumerate(col) if type(v) not in ok)
            raise IngestError(f"{kind}[{i}].{f.name}", "missing" if v is None else _SAY[f.kind])
        if f.kind == "json":
            _check_json(kind, f.name, col)
        if f.kind == "ts":
            col = [_time(kind, i, f.name, v) for i, v in enumerate(col)]
        elif f.kind == "float":
            col = [_float(v, f"{kind}[{i}].{f.name}") if type(v) is int else v
                   for i, v in enumerate(col)]
        elif f.kind == "map":
            for i, v in enumerate(col):
                for k, x in (v or {}).items():
                    if type(x) not in (float, int):
                        raise IngestError(f"{kind}[{i}].{f.name}.{k}", "not a number")
                    if type(x) is int:
                        _float(x, f"{kind}[{i}].{f.name}.{k}")
        elif f.kind in ("int", "count") and _outside_int64([v for v in col if v is not None]):
            i = next(i for i, v in enumerate(col) if v is not None and not _INT64[0] <= v <=
                     _INT64[1])
            raise IngestError(f"{kind}[{i}].{f.name}", "out of the int64 range")
        if f.kind == "count" and any(v is not None and v < 0 for v in col):
            i = next(i for i, v in enumerate(col) if v is not None and v < 0)
            raise IngestError(f"{kind}[{i}].{f.name}", "negative")
        cols[f.name] = col
    return cols


_INT64 = (-(2**63), 2**63 - 1)


def _check_json(kind: str, name: str, col: list[Any]) -> None:
    """A JSON field is an object, or text that holds one: other text was stored as it was
    and broke every reader that parses the column in SQL (one event's `metrics_before` of
    "not json" failed the `rewrite_effects` report for good). Nested deeper than the readers
    pass on as a value (`MAX_DEPTH`: answers and pages would recurse into it), refused too."""
    for i, v in enumerate(col):
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except RecursionError:
                raise IngestError(f"{kind}[{i}].{name}",
                                  f"nested deeper than {MAX_DEPTH} levels") from None
            except ValueError as err:
                raise IngestError(f"{kind}[{i}].{name}",
                                  f"text that is not JSON ({err})") from None
            if not isinstance(v, dict):
                raise IngestError(f"{kind}[{i}].{name}", "JSON text of no object")
        if json_depth(v) > MAX_DEPTH:
            raise IngestError(f"{kind}[{i}].{name}", f"nested deeper than {MAX_DEPTH} levels")


def _outside_int64(col: list[int]) -> bool:
    return bool(col) and (min(col) < _INT64[0] or max(col) > _INT64[1])


def _float(v: int, field: str) -> float:
    """A JSON integer sent for a number: as a float, or refused when float64 cannot hold it
    (Arrow would fail on it when the table is made)."""
    try:
        return float(v)
    except OverflowError:
        raise IngestError(field, "out of the float64 range") from None


# the times a run's records may carry (UTC): a time outside them is a clock or a client gone
# wrong, and one outside Python's datetime would break every later read of its table
TIME_RANGE = (datetime(1970, 1, 1, tzinfo=UTC), datetime(2200, 1, 1, tzinfo=UTC))


def _time(kind: str, i: int, name: str, v: str | None) -> datetime:
    if v is None:
        return datetime.now(UTC)
    field = f"{kind}[{i}].{name}"
    try:
        t = datetime.fromisoformat(v)
        t = t if t.tzinfo is not None else t.replace(tzinfo=UTC)
        utc = t.astimezone(UTC)
    except ValueError:
        raise IngestError(field, _SAY["ts"]) from None
    except OverflowError:  # the offset takes it past year 1 or 9999
        utc = None
    if utc is None or not TIME_RANGE[0] <= utc < TIME_RANGE[1]:
        raise IngestError(field, f"{v!r} is outside {TIME_RANGE[0].year}-"
                                 f"{TIME_RANGE[1].year} (UTC)")
    return t


def _json(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v if v is not None else {}, sort_keys=True)


def _trajectories(kind: str, col: list[int | None]) -> list[int]:
    """A trajectory column (a count of rollbacks), 0 where none was sent: a client that
    never rolled back, or predates the field, sends none."""
    for i, v in enumerate(col):
        if v is not None and v < 0:
            raise IngestError(f"{kind}[{i}].trajectory", "negative")
    return [0 if v is None else v for v in col]


def _table(name: str, cols: Mapping[str, list[Any]]) -> pa.Table:
    schema = TABLES[name].schema
    return pa.Table.from_arrays([pa.array(cols[f.name], type=f.type) for f in schema],
                                schema=schema)


def tables_of(batch: Mapping[str, Any], writer_id: str) -> dict[str, pa.Table]:
    """The warehouse rows of a JSON batch (keys: `KINDS`), as Arrow tables by table name.
    Raises `IngestError` naming the first invalid value."""
    unknown = sorted(set(batch) - set(KINDS))
    if unknown:
        raise IngestError(unknown[0], f"unknown record kind (kinds: {', '.join(KINDS)})")
    out: dict[str, pa.Table] = {}
    now = datetime.now(UTC)
    for kind, records in batch.items():
        c = _columns(kind, records)
        n = len(records)
        if not n:
            continue
        if kind == "problems":
            out["problems"] = _table("problems", {**c, "recorded_at": [now] * n})
            feats = [(p, k, float(v), seed)
                     for p, fs, seed in zip(c["problem_id"], c["features"],
                                            c["features_split_seed"], strict=True)
                     for k, v in (fs or {}).items()]
            out["problem_features"] = _table("problem_features", {
                "problem_id": [f[0] for f in feats], "feature": [f[1] for f in feats],
                "value": [f[2] for f in feats], "split_seed": [f[3] for f in feats],
                "recorded_at": [now] * len(feats)})
        elif kind == "runs":
            _check_run_ids(c["run_id"])
            out["runs"] = _table("runs", {
                **c, "config": [_json(v) for v in c["config"]],
                "library_versions": [_json(v) for v in c["library_versions"]],
                "writer_id": [writer_id] * n})
        elif kind == "snapshots":
            out["ir_snapshots"] = _table("ir_snapshots", {**c, "recorded_at": [now] * n})
            seen: dict[str, dict[str, Any]] = {}
            for fp, pats in zip(c["fingerprint"], c["patterns"], strict=True):
                seen.setdefault(fp, pats or {})
            pats = [(fp, k, float(v)) for fp, ps in seen.items() for k, v in ps.items()]
            out["ir_patterns"] = _table("ir_patterns", {
                "fingerprint": [p[0] for p in pats], "pattern": [p[1] for p in pats],
                "value": [p[2] for p in pats]})
        elif kind == "events":
            out["events"] = _table("events", {**c, **{k: [_json(v) for v in c[k]] for k in (
                "detail", "metrics_before", "metrics_after")}})
        elif kind == "results":
            out["results"] = _table("results", {**c, "final": [bool(v) for v in c["final"]],
                                                "trajectory": _trajectories(kind, c["trajectory"])})
        elif kind == "steps":
            out["steps"] = _table("steps", {**c,
                                            "trajectory": _trajectories(kind, c["trajectory"])})
        else:  # run_ends: the fields are the columns, and the writer that logs them
            _check_ends(c)
            out[kind] = _table(kind, {**c, "writer_id": [writer_id] * n})
    return {k: t for k, t in out.items() if t.num_rows}


# what a client may end a run with ("running" is no end; "abandoned" is `check --repair`'s)
END_STATUSES = tuple(s for s in RUN_STATUSES if s not in ("running", "abandoned"))
# what a client's run_ends row may say: an end, or that a run it resumed goes on
END_ROW_STATUSES = (*END_STATUSES, RESUMED)


def no_end_status(status: str, allowed: tuple[str, ...]) -> str:
    """What is wrong with an end's `status` that is not one of `allowed`."""
    return f"'{status}' is no end status (one of {', '.join(allowed)})"


def _check_ends(c: Mapping[str, list[Any]]) -> None:
    """A run end's status is one the readers know (a `banana` status was shown, and no
    status filter could select it) and its counts are not negative."""
    for i, (status, steps, wall) in enumerate(zip(c["status"], c["steps"], c["wall_time_s"],
                                                  strict=True)):
        if status not in END_ROW_STATUSES:
            raise IngestError(f"run_ends[{i}].status", no_end_status(status, END_ROW_STATUSES))
        if steps < 0:
            raise IngestError(f"run_ends[{i}].steps", "negative")
        if wall is not None and not 0 <= wall < math.inf:  # NaN too
            raise IngestError(f"run_ends[{i}].wall_time_s", "negative, infinite or not a number")


# A run id names its run in URLs (/v1/runs/<id>, the dashboard's /runs/<id>): a `/`, `?`,
# `#` or `%` in it, or an id of dots, reached another page or none. Ours are uuid4 hex.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def _check_run_ids(ids: list[str]) -> None:
    first: dict[str, int] = {}
    for i, rid in enumerate(ids):
        if not RUN_ID.fullmatch(rid):
            raise IngestError(f"runs[{i}].run_id", "letters, digits, '.', '_' and '-' only, "
                                                   "1 to 200, the first a letter or digit")
        if first.setdefault(rid, i) != i:
            raise RunExists(rid, i, first[rid])


def steps_table(t: pa.Table, run_id: str) -> pa.Table:
    """An Arrow table of steps (one run's; a `run_id` column, if sent, must say `run_id`)
    cast to the `steps` schema. Raises `IngestError` naming the offending column or row."""
    schema = TABLES["steps"].schema
    twice = sorted({c for c in t.column_names if t.column_names.count(c) > 1})
    if twice:
        raise IngestError(f"steps.{twice[0]}", "column given twice")
    extra = [c for c in t.column_names if c not in schema.names]
    if extra:
        raise IngestError(f"steps.{extra[0]}", "unknown column")
    cols = []
    for f in schema:
        if f.name == "run_id" and f.name not in t.column_names:
            cols.append(pa.array([run_id] * t.num_rows, type=f.type))
            continue
        if f.name == "trajectory" and f.name not in t.column_names:  # no rollback: all 0
            cols.append(pa.array([0] * t.num_rows, type=f.type))
            continue
        if f.name not in t.column_names:
            raise IngestError(f"steps.{f.name}", "missing column")
        col = t.column(f.name)
        ok = (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)
              if pa.types.is_floating(f.type) else pa.types.is_integer(col.type)
              if pa.types.is_integer(f.type) else pa.types.is_string(col.type)
              or pa.types.is_large_string(col.type))
        if not ok:
            raise IngestError(f"steps.{f.name}", f"column of type {col.type}, expected {f.type}")
        try:
            col = col.cast(f.type)  # safe cast: an int64 overflow is an error, not a wrap
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise IngestError(f"steps.{f.name}", str(err).splitlines()[0]) from None
        if col.null_count:
            i = next(i for i, v in enumerate(col.is_null().to_pylist()) if v)
            raise IngestError(f"steps[{i}].{f.name}", "missing")
        if f.name == "trajectory":
            _trajectories("steps", col.to_pylist())
        cols.append(col)
    out = pa.Table.from_arrays(cols, schema=schema)
    if "run_id" in t.column_names:
        wrong = [i for i, v in enumerate(out.column("run_id").to_pylist()) if v != run_id]
        if wrong:
            raise IngestError(f"steps[{wrong[0]}].run_id", f"not the run '{run_id}' of the path")
    return out


# -- committing ---------------------------------------------------------------------------------

def batch_key(batch_id: str) -> str:
    """The file-name key of a batch id (a hash: no path is ever built from the id)."""
    if not batch_id or len(batch_id) > MAX_BATCH_ID or not batch_id.isprintable():
        raise IngestError("batch_id", f"1 to {MAX_BATCH_ID} printable characters")
    return hashlib.sha256(batch_id.encode()).hexdigest()[:32]


def _idir(root: Path) -> Path:
    return Path(root) / INGEST_DIR


def _ledger(root: Path, key: str) -> Path:
    return _idir(root) / "batches" / key[:2] / f"{key}.json"


def _staging(root: Path, key: str) -> Path:
    return _idir(root) / "staging" / key


def is_committed(root: Path, batch_id: str) -> bool:
    return _ledger(root, batch_key(batch_id)).is_file()


@contextlib.contextmanager
def _locked(root: Path, key: str) -> Iterator[None]:
    """One commit of a key at a time, across threads and server workers (flock on one of
    256 stripe files, so the lock files do not grow with the batches)."""
    ldir = _idir(root) / "locks"
    ensure_dir(ldir)
    with open(ldir / f"{key[:2]}.lock", "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _run_key(run_id: str) -> str:
    """The file-name key of a run id (a hash, as for batch ids)."""
    return hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _run_marker(root: Path, run_id: str) -> Path:
    key = _run_key(run_id)
    return _idir(root) / "runs" / key[:2] / key


@contextlib.contextmanager
def ends_locked(root: str | Path, run_ids: Iterable[str]) -> Iterator[None]:
    """Held by a batch that ends runs (`run_ends` rows) across reading those runs' ends from
    the part files and committing: one such batch per run at a time, across threads and
    server workers, so two contradicting ends sent at once cannot both pass the check
    (the service's 409 `run-ended`). An flock per run id on `ends/<hash>.lock` under
    `_ingest/` (`file_lock`: removed when released), taken in sorted order, so batches
    ending several runs do not deadlock; apart from the commit's own lock files. No run
    ids: no lock, nothing made."""
    keys = sorted({_run_key(r) for r in run_ids})
    held: list[tuple[Path, int]] = []
    try:
        if keys:
            ldir = _idir(Path(root)) / "ends"
            ensure_dir(ldir)
            for key in keys:
                lock = ldir / f"{key}.lock"
                fd = file_lock.acquire(lock)
                if fd is not None:  # (None only when not waiting)
                    held.append((lock, fd))
        yield
    finally:
        for lock, fd in reversed(held):
            file_lock.release(lock, fd)


def _new_runs(root: Path, tables: Mapping[str, pa.Table]) -> list[str]:
    """The batch's run ids, each refused (`RunExists`) when it was started before or
    repeats in the batch."""
    ids = tables["runs"].column("run_id").to_pylist()
    for i, rid in enumerate(ids):
        if rid in ids[:i] or _run_marker(root, rid).exists():
            raise RunExists(rid, i)
    return ids


def _row_runs(tables: Mapping[str, pa.Table]) -> set[str]:
    """The run ids the batch's rows of run tables belong to (runs themselves aside)."""
    ids: set[str] = set()
    for name in RUN_TABLES:
        if name in tables:
            ids.update(tables[name].column("run_id").unique().to_pylist())
    return ids


def unstarted(root: str | Path, tables: Mapping[str, pa.Table],
              also: str | None = None) -> list[str]:
    """The run ids the batch's rows belong to (and `also`, a run a route names however few
    rows it sends) that neither the batch starts nor the service started before (by its run
    markers; a run of a batch committed before a crash between the two, or of a warehouse
    older than the markers, has none: the caller may look it up)."""
    starting = set(tables["runs"].column("run_id").to_pylist()) if "runs" in tables else set()
    ids = _row_runs(tables) | ({also} if also is not None else set())
    return sorted(i for i in ids - starting if not _run_marker(Path(root), i).exists())


def last_record_at(root: str | Path, run_id: str) -> float | None:
    """When the service last committed a record of the run (unix time: its run marker's mtime,
    touched by every batch that carries the run's rows), or None for a run the service did
    not start (a local writer's: its lease says whether it lives)."""
    try:
        return _run_marker(Path(root), run_id).stat().st_mtime
    except FileNotFoundError:
        return None


def _touch_runs(root: Path, ids: set[str]) -> None:
    """Mark the runs as heard from now (`last_record_at`): a client killed outright leaves
    its run without an end while the server, whose lease the run carries, lives on."""
    for rid in ids:
        with contextlib.suppress(FileNotFoundError):  # a run of a warehouse older than markers
            os.utime(_run_marker(root, rid))


class BatchReused(IngestError):
    """A batch id committed before, sent again with other records."""

    def __init__(self, batch_id: str) -> None:
        super().__init__("batch_id", f"batch '{batch_id}' was committed before with other "
                                     "records: a retry sends the same records; new records "
                                     "need a new batch id")


def same_batch(root: str | Path, batch_id: str, digest: str) -> None:
    """Refuse (`BatchReused`) a committed batch id sent with a body of another digest (its
    records were dropped as a retry's, silently). Ledger entries of older servers hold no
    digest, or one of another kind: not compared."""
    try:
        kept = json.loads(_ledger(Path(root), batch_key(batch_id)).read_bytes()).get("digest")
    except (OSError, ValueError):
        return
    if kept is not None and _scheme(kept) == _scheme(digest) and kept != digest:
        raise BatchReused(batch_id)


def _scheme(digest: str) -> str:
    """What a digest is of (`rows:` the rows, `content_digest`; no prefix: the body's bytes,
    as older servers kept every digest)."""
    return digest.partition(":")[0] if ":" in digest else ""


# what the server adds to a client's rows, or fills when a client leaves it out (a time: now)
SERVER_COLUMNS = ("writer_id", "recorded_at", "started_at", "at", "ended_at")


def content_digest(tables: Mapping[str, pa.Table]) -> str:
    """A digest of the rows a batch carries, the columns the server adds or may fill left
    out: a retry gives the same one however the client serialised it again (JSON keys in
    another order, other spacing or number spelling, an Arrow stream cut into other record
    batches). Each table hashed as one Arrow IPC stream (zero-padded buffers: equal rows,
    equal bytes), ~10 ms for 50,000 steps, where re-serialising the JSON took 0.2 s."""
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(tables):
        t = tables[name].drop_columns([c for c in SERVER_COLUMNS
                                       if c in tables[name].column_names]).combine_chunks()
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as writer:
            writer.write_table(t)
        h.update(name.encode() + b"\0")
        h.update(sink.getvalue())
    return "rows:" + h.hexdigest()


def commit(root: str | Path, batch_id: str, tables: Mapping[str, pa.Table],
           digest: str | None = None) -> Committed:
    """Write the batch's tables into the warehouse once (see the module docstring)."""
    root = Path(root)
    key = batch_key(batch_id)
    if _ledger(root, key).is_file():
        return _committed_before(root, batch_id, key, digest)
    if "runs" not in tables:
        done = _commit_once(root, batch_id, key, tables, digest)
    else:
        with _locked(root, "runs"):  # batches that start runs: one at a time, so two
            # batches cannot both start one run
            if _ledger(root, key).is_file():  # this batch, committed by a concurrent retry
                return _committed_before(root, batch_id, key, digest)
            started = _new_runs(root, tables)
            done = _commit_once(root, batch_id, key, tables, digest)
            if done.written:
                for rid in started:
                    marker = _run_marker(root, rid)
                    ensure_dir(marker.parent)
                    marker.touch()
    if done.written:
        _touch_runs(root, _row_runs(tables))
    return done


def _committed_before(root: Path, batch_id: str, key: str, digest: str | None) -> Committed:
    """A batch id found in the ledger: a retry's (nothing written), or `BatchReused` when
    its rows differ (a concurrent request with other rows lost the race for the id)."""
    if digest is not None:
        same_batch(root, batch_id, digest)
    return Committed(batch_id, False, _ledger_rows(root, key))


def _commit_once(root: Path, batch_id: str, key: str, tables: Mapping[str, pa.Table],
                 digest: str | None = None) -> Committed:
    rows = {name: t.num_rows for name, t in tables.items()}
    with _locked(root, key):
        if _ledger(root, key).is_file():  # committed by a concurrent request meanwhile
            return _committed_before(root, batch_id, key, digest)
        stage = _staging(root, key)
        if not (stage / "plan.json").is_file():
            shutil.rmtree(stage, ignore_errors=True)  # an unplanned attempt's debris
            ensure_dir(stage)
            day = datetime.now(UTC).strftime("%Y-%m-%d")
            parts: dict[str, str] = {}
            for n, (name, t) in enumerate(sorted(tables.items())):
                _write_synced(stage / f"{name}.parquet", t)
                parts[name] = f"date={day}/part-ingest-{key}-{n:08d}.parquet"
            plan = {"batch_id": batch_id, "rows": rows, "parts": parts,
                    **({"digest": digest} if digest else {})}
            atomic_write(stage / "plan.json", _bytes(json.dumps(plan).encode()))
        _roll_forward(root, key)
    return Committed(batch_id, True, rows)


def _write_synced(path: Path, t: pa.Table) -> None:
    # no temp name needed: staging is invisible, and a file the plan does not cover is debris
    write_parquet(t, path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _bytes(data: bytes) -> Callable[[Path], None]:
    def write(p: Path) -> None:
        p.write_bytes(data)
    return write


def _ledger_rows(root: Path, key: str) -> dict[str, int]:
    try:
        rows: dict[str, int] = json.loads(_ledger(root, key).read_bytes())["rows"]
        return rows
    except (OSError, ValueError, KeyError):
        return {}


def _roll_forward(root: Path, key: str) -> None:
    """Move a planned batch's staged parts into their tables, then record it in the ledger.
    Idempotent: a part already moved (by an attempt that died half-way) is skipped. The plan
    is written only once every staged part is synced, and nothing but this move takes a
    staged part away, so a planned part missing from staging was moved into place: it may
    not be there any more, since compactions may have merged and collected it since (as
    often as they ran before this server restarted, so no marker need still name it).
    A move that fails (a refused rename, a full disk making a partition's folder) takes
    back what this call moved and the plan with it (`_take_back`), so the batch is not
    half visible while the server lives on: the request fails, wholly unwritten."""
    stage = _staging(root, key)
    plan = json.loads((stage / "plan.json").read_bytes())
    # every part staged: no earlier attempt moved any, so a failure here can take back all
    whole = all((stage / f"{name}.parquet").exists() for name in plan["parts"])
    moved: list[tuple[str, Path, Path]] = []
    try:
        for name, rel in plan["parts"].items():
            final = table_dir(root, name) / rel
            staged = stage / f"{name}.parquet"
            if staged.exists():
                ensure_dir(final.parent)
                os.replace(staged, final)
                moved.append((name, staged, final))
                fsync_dir(final.parent)
        ledger = _ledger(root, key)
        ensure_dir(ledger.parent)
        os.replace(stage / "plan.json", ledger)  # the plan, done, is the ledger entry
    except Exception:
        # (an interrupt, like a crash, leaves it planned: `recover` rolls it forward)
        if whole:
            _take_back(root, stage, moved)
        raise
    fsync_dir(ledger.parent)
    shutil.rmtree(stage, ignore_errors=True)


def _take_back(root: Path, stage: Path, moved: list[tuple[str, Path, Path]]) -> None:
    """Move the parts a failed roll-forward moved back into staging and drop the plan: the
    batch as if never sent (a reader that listed a part meanwhile lists again, as after a
    compaction). Only while no compaction runs and none has merged a moved part (its rows
    are in the table for good then); else the plan is kept, to be rolled forward. Killed
    half-way, it leaves the plan and parts staged or in place: `recover` completes it."""
    with excluded(root) as held:
        if not held or any(_merged(root, name, final) for name, _, final in moved):
            return
        if not (stage / "plan.json").is_file():
            return  # the ledger entry was made: the batch is in
        try:
            for _, staged, final in reversed(moved):
                os.replace(final, staged)
            (stage / "plan.json").unlink()
        except OSError:
            return  # what is left is planned: moved again, the rest skipped as moved
    shutil.rmtree(stage, ignore_errors=True)


def _merged(root: Path, table: str, part: Path) -> bool:
    tdir = table_dir(root, table)
    rel = part.relative_to(tdir).as_posix()
    return any(rel in m.inputs for m in read_markers(tdir).values())


def recover(root: str | Path) -> int:
    """Finish what a killed server left: roll forward every planned batch, delete unplanned
    staging. Returns how many batches were rolled forward."""
    sdir = _idir(Path(root)) / "staging"
    done = 0
    if not sdir.is_dir():
        return 0
    for stage in sorted(sdir.iterdir()):
        with _locked(Path(root), stage.name):
            if (stage / "plan.json").is_file():
                _roll_forward(Path(root), stage.name)
                done += 1
            else:
                shutil.rmtree(stage, ignore_errors=True)
    return done
