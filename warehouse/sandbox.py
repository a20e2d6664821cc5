"""The SQL sandbox: one read-only SELECT from a user, over the warehouse views, within limits.

    result = run_sql(root, "SELECT count(*) FROM steps", Limits(time_limit_s=5))

Layers, each enough on its own for what it stops:
  * the statement: DuckDB's parser must find exactly one statement, of type SELECT
    (`guard.check_sql`): no COPY, ATTACH, INSTALL/LOAD, SET, PRAGMA, CALL, EXPORT, DDL or DML;
  * the connection: `enable_external_access = false` with only the table directories in
    `allowed_directories` (not the warehouse root, where the service keeps its key file), no
    extension auto-loading, a memory limit and a thread count, then the configuration locked;
  * the run: a timer interrupts the query at the time limit, and rows are read in batches
    so that a result larger than the row or byte limit is refused without being materialised.

A query reads as every other reader does (`catalog.retry_reads`): when a part it listed
was collected by a compaction meanwhile, or turns out damaged (then marked unreadable and
skipped, as every read skips it), the views are built again over a fresh listing and the
query run again, within the one time limit; only an error left after that is the user's.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from warehouse.catalog import connect, one_line, part_error, retry_reads
from warehouse.errors import WarehouseError
from warehouse.guard import check_sql
from warehouse.layout import table_dir
from warehouse.schema import TABLES
from warehouse.sql_values import json_column


@dataclass(frozen=True)
class Limits:
    time_limit_s: float = 5.0  # wall time of execution and fetch; then the query is interrupted
    max_rows: int = 10_000  # more rows than this: refused (add a LIMIT), never truncated
    max_bytes: int = 16 * 2**20  # Arrow size of the result; a few huge values count too
    memory_limit: str = "512MB"  # DuckDB's memory_limit for the query's connection
    threads: int = 1  # DuckDB threads per query: a query may not take the whole machine


# Why a query was refused; the service maps each to its problem type.
REASONS = ("refused", "invalid", "time_limit", "row_limit", "memory_limit")


class SandboxError(WarehouseError):
    """A query the sandbox would not run or cut off; `reason` is one of REASONS."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Result:
    columns: list[tuple[str, str]]  # (name, DuckDB/Arrow type)
    rows: list[list[Any]]  # JSON-safe values, exact (see `sql_values.json_column`)
    elapsed_s: float


def sandbox_connect(root: str | Path, limits: Limits) -> duckdb.DuckDBPyConnection:
    """The warehouse views (built by `catalog.connect`) on a locked, file-fenced connection."""
    root = Path(root).resolve()
    conn = connect(root, read_only=False, missing_ok=True)  # served before any run
    # the trailing slash: /wh/steps/ must not also allow /wh/steps_evil/
    allowed = [str(table_dir(root, t)) + "/" for t in TABLES]
    try:
        for stmt, arg in (("SET allowed_directories = ?", allowed),
                          ("SET enable_external_access = false", None),
                          ("SET autoinstall_known_extensions = false", None),
                          ("SET autoload_known_extensions = false", None),
                          ("SET memory_limit = ?", limits.memory_limit),
                          ("SET threads = ?", limits.threads),
                          ("SET lock_configuration = true", None)):
            conn.execute(stmt, [arg] if arg is not None else None)
    except BaseException:
        conn.close()
        raise
    return conn


def run_sql(root: str | Path, sql: str, limits: Limits | None = None,
            started: Callable[[], None] | None = None) -> Result:
    """Run one user SELECT in the sandbox; SandboxError says why when it will not. A part
    collected or found damaged under the query lists the parts again and runs it again
    (`catalog.retry_reads`), all within `limits.time_limit_s` of the query's start: once
    the views are built (their cost grows with the part files, not with the query) and the
    SQL checked, when `started` is called."""
    limits = limits or Limits()
    root = Path(root).resolve()
    deadline: float | None = None

    def attempt() -> Result:
        nonlocal deadline
        conn = sandbox_connect(root, limits)
        try:
            try:
                check_sql(conn, sql)
            except WarehouseError as err:
                kind = "invalid" if str(err).startswith("bad SQL") else "refused"
                raise SandboxError(kind, str(err)) from None
            if deadline is None:
                deadline = time.perf_counter() + limits.time_limit_s
                if started is not None:
                    started()
            left = deadline - time.perf_counter()
            if left <= 0:  # the retries took the time
                raise past_time_limit(limits)
            return _run(conn, sql, limits, left)
        finally:
            conn.close()

    # a part error that listing again cannot help is the user's (a file the SQL names)
    return retry_reads(root, attempt, lambda err: _why(err, False, limits))


def _run(conn: duckdb.DuckDBPyConnection, sql: str, limits: Limits,
         time_left_s: float) -> Result:
    """The query on `conn`, interrupted after `time_left_s`. A DuckDB error about a part is
    raised as it is, for `retry_reads` to list again; any other refusal is a SandboxError."""
    fired = threading.Event()

    def interrupt() -> None:
        fired.set()
        with contextlib.suppress(duckdb.Error):  # the query may just have finished
            conn.interrupt()

    timer = threading.Timer(time_left_s, interrupt)
    t0 = time.perf_counter()
    timer.start()
    try:
        rel = conn.sql(sql)
        types = rel.types  # DuckDB's: a UHUGEINT's values need it (`json_column`)
        reader = rel.to_arrow_reader(limits.max_rows + 1)
        batches = _read(reader, limits)
        schema = reader.schema
    except SandboxError:
        raise
    # an interrupt or error while Arrow pulls batches arrives as a pyarrow error (OSError)
    except (duckdb.Error, pa.ArrowException, OSError) as err:
        if not fired.is_set():
            part = _duckdb_error(err)
            if part is not None and part_error(part):
                raise part from None  # a part collected or damaged: list again
        raise _why(err, fired.is_set(), limits) from None
    finally:
        timer.cancel()
        timer.join()  # an interrupt in flight lands before the caller closes the connection
    if fired.is_set():  # one long expression, which the interrupt cannot stop, ran past it
        raise past_time_limit(limits)
    columns = [(f.name, str(f.type)) for f in schema]
    # column by column, by position: two result columns may share a name (`SELECT 1 AS a,
    # 2 AS a`, a join's `*`), which rows read as dicts would fold into one
    rows: list[list[Any]] = []
    for b in batches:
        values = [json_column(b.column(i), types[i]) for i in range(b.num_columns)]
        rows += [list(r) for r in zip(*values, strict=True)] if values else \
            [[] for _ in range(b.num_rows)]
    return Result(columns, rows, time.perf_counter() - t0)


# DuckDB's error classes by the prefix of their message, for an error that reached us through
# Arrow's stream as an OSError (a part that fails after the first batch)
_PREFIXES: tuple[tuple[str, type[duckdb.Error]], ...] = (
    ("IO Error: ", duckdb.IOException),
    ("Invalid Input Error: ", duckdb.InvalidInputException),
    ("Invalid Error: ", duckdb.Error),  # the Parquet decoders' untyped errors
)


def _duckdb_error(err: BaseException) -> duckdb.Error | None:
    """`err` as the DuckDB error it is or carries (None: not one `part_error` may know)."""
    if isinstance(err, duckdb.Error):
        return err
    text = str(err)
    for prefix, cls in _PREFIXES:
        if text.startswith(prefix):
            return cls(text if cls is not duckdb.Error else text[len(prefix):])
    return None


def past_time_limit(limits: Limits) -> SandboxError:
    return SandboxError("time_limit", f"the query ran past the time limit of "
                                      f"{limits.time_limit_s:g} s")


def _why(err: BaseException, timed_out: bool, limits: Limits) -> SandboxError:
    text = one_line(err)
    if timed_out or isinstance(err, duckdb.InterruptException):
        return past_time_limit(limits)
    if isinstance(err, duckdb.OutOfMemoryException) or "Out of Memory" in text:
        return SandboxError("memory_limit", f"the query needs more than the memory limit of "
                                            f"{limits.memory_limit}")
    if isinstance(err, duckdb.PermissionException) or "Permission Error" in text:
        return SandboxError("refused", text)
    return SandboxError("invalid", text)


def _read(reader: pa.RecordBatchReader, limits: Limits) -> list[pa.RecordBatch]:
    batches: list[pa.RecordBatch] = []
    n = size = 0
    for batch in reader:
        n += batch.num_rows
        size += batch.nbytes
        if n > limits.max_rows:
            raise SandboxError("row_limit", f"the result has more than {limits.max_rows} "
                                            "rows; add a LIMIT or aggregate")
        if size > limits.max_bytes:
            raise SandboxError("row_limit", f"the result is larger than {limits.max_bytes} "
                                            "bytes; select fewer columns or rows")
        batches.append(batch)
    return batches
