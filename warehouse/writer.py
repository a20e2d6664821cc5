"""Buffered, lock-free appends to the warehouse: rows in, immutable Parquet parts out.

Each `Writer` has its own id; its parts are named `part-<writer id>-<seq>.parquet`, so any
number of processes write into one warehouse with no coordination. Appends only touch an
in-memory buffer; a background thread commits the buffers as parts every `flush_interval_s`
(or sooner once a table holds `max_rows` rows), so a training step never waits on I/O.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.errors import WarehouseError
from warehouse.layout import atomic_write, check_root, ensure_dir, table_dir
from warehouse.lease import HEARTBEAT_S, describe_self, lease_path
from warehouse.schema import table as table_spec

BatchLike: TypeAlias = pa.Table | pa.RecordBatch | Mapping[str, Sequence[Any]]


@dataclass
class _Buffer:
    ncols: int
    rows: list[tuple[Any, ...]] = field(default_factory=list)  # in schema column order
    tables: list[pa.Table] = field(default_factory=list)  # batched appends, already cast
    n: int = 0


@dataclass
class WriterStats:
    parts: int = 0
    rows: dict[str, int] = field(default_factory=dict)  # committed rows per table
    failures: int = 0  # commits that failed (retried at the next flush)
    dropped: int = 0  # rows that could not be converted to the table's types


class Writer:
    """Per-table buffered appends committed as Parquet parts by a background thread.

    `append(table, row)` takes a dict, `append_row(table, values)` a tuple in the table's column
    order (the fast path the recorder uses), `append_batch(table, batch)` an Arrow table/batch
    or a dict of columns. `flush()` commits now and waits; `close()` flushes everything.
    """

    def __init__(self, root: str | Path, *, flush_interval_s: float = 1.0,
                 max_rows: int = 100_000, compression: str = "zstd",
                 writer_id: str | None = None) -> None:
        if flush_interval_s <= 0 or max_rows <= 0:
            raise WarehouseError("flush_interval_s and max_rows must be positive")
        self.root = check_root(Path(root))
        self.writer_id = writer_id or uuid.uuid4().hex
        self.flush_interval_s = flush_interval_s
        self.max_rows = max_rows
        self.compression = compression
        self.stats = WriterStats()
        self._buffers: dict[str, _Buffer] = {}
        self._lock = threading.Lock()  # guards _buffers; held only to append or swap
        self._flush_lock = threading.Lock()  # one flush at a time keeps parts in order
        self._wake = threading.Event()
        self._closed = False
        self._seq = 0
        self._error: BaseException | None = None
        self._pending: list[tuple[str, pa.Table]] = []  # parts that failed to commit
        self._lease = lease_path(self.root, self.writer_id)
        try:
            ensure_dir(self.root)
            self._take_lease()
        except OSError as err:
            raise WarehouseError(f"warehouse {self.root} is not writable: "
                                 f"{err.strerror or err}") from None
        self._heartbeat = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"warehouse-{self.writer_id[:8]}",
                                        daemon=True)
        self._thread.start()
        _OPEN.add(self)

    # -- appends (any thread; never touch the disk) -----------------------------------------

    def append_row(self, table: str, values: tuple[Any, ...]) -> None:
        """One row as a tuple in the table's column order."""
        with self._lock:
            self._check_open()
            buf = self._buffers.get(table) or self._new_buffer(table)
            if len(values) != buf.ncols:
                raise WarehouseError(f"table '{table}' has {buf.ncols} columns, "
                                     f"got a row of {len(values)}")
            buf.rows.append(values)
            buf.n += 1
            full = buf.n >= self.max_rows
        if full:
            self._wake.set()

    def append(self, table: str, row: Mapping[str, Any]) -> None:
        """One row as a dict; missing columns are NULL. (Extra keys: use `append_batch`.)"""
        cols = table_spec(table).column_names
        unknown = set(row) - set(cols)
        if unknown:
            raise WarehouseError(f"table '{table}' has no column(s) {sorted(unknown)}")
        self.append_row(table, tuple(row.get(c) for c in cols))

    def append_rows(self, table: str, rows: Iterable[Mapping[str, Any]]) -> None:
        for r in rows:
            self.append(table, r)

    def append_batch(self, table: str, batch: BatchLike) -> None:
        """Columns at once: cast to the table's types; missing columns become NULL, extra
        columns are kept (a column that appears later is still queryable)."""
        t = _conform(table, _as_table(batch))
        with self._lock:
            self._check_open()
            buf = self._buffers.get(table) or self._new_buffer(table)
            buf.tables.append(t)
            buf.n += t.num_rows
            full = buf.n >= self.max_rows
        if full:
            self._wake.set()

    # -- flushing ---------------------------------------------------------------------------

    def request_flush(self) -> None:
        """Ask the background thread to commit soon; returns at once."""
        self._wake.set()

    def flush(self) -> None:
        """Commit everything buffered now, in the caller's thread; raises if a part fails."""
        self._flush()
        if self._pending:
            raise WarehouseError(f"warehouse {self.root}: could not commit "
                                 f"{len(self._pending)} part(s): {self._error}")

    def close(self) -> None:
        """Flush everything and stop the thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._wake.set()
        self._thread.join()
        _OPEN.discard(self)
        try:
            self.flush()
        finally:
            self._lease.unlink(missing_ok=True)  # its runs without an end are now abandoned

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _new_buffer(self, table: str) -> _Buffer:
        # unknown table names fail here, in the caller, not in the flush thread
        buf = self._buffers[table] = _Buffer(len(table_spec(table).columns))
        return buf

    def _check_open(self) -> None:
        if self._closed:
            raise WarehouseError("writer is closed")

    def _take_lease(self) -> None:
        ensure_dir(self._lease.parent)
        data = json.dumps(describe_self(self.writer_id)).encode()
        atomic_write(self._lease, lambda p: p.write_bytes(data))

    def _touch_lease(self) -> None:
        """The heartbeat: readers take a lease untouched for LEASE_TIMEOUT_S as dead."""
        if time.monotonic() - self._heartbeat < HEARTBEAT_S:
            return
        try:
            os.utime(self._lease)
        except FileNotFoundError:
            self._take_lease()  # collected while this process was stopped: take it again
        self._heartbeat = time.monotonic()

    def _run(self) -> None:
        next_flush = time.monotonic() + self.flush_interval_s
        while not self._closed:
            due = min(next_flush, self._heartbeat + HEARTBEAT_S) - time.monotonic()
            woken = self._wake.wait(max(due, 0.0))
            self._wake.clear()
            if self._closed:
                return  # close() does the last flush in its own thread
            try:
                self._touch_lease()
            except OSError as err:
                self._error = err
            if not woken and time.monotonic() < next_flush:
                continue  # woke for the heartbeat only
            try:
                self._flush()
            except Exception as err:  # keep the thread alive; close() reports it
                self._error = err
            next_flush = time.monotonic() + self.flush_interval_s

    def _flush(self) -> None:
        with self._flush_lock:
            with self._lock:
                bufs, self._buffers = self._buffers, {}
            work = list(self._pending)
            for name, b in bufs.items():
                if not b.n:
                    continue
                try:
                    t = _to_arrow(name, b)
                except (pa.ArrowException, TypeError, ValueError) as err:
                    # rows of the wrong type can never be written: drop them, keep the rest
                    self._error = err
                    self.stats.dropped += b.n
                    print(f"warehouse: dropped {b.n} row(s) of '{name}': {err}",
                          file=sys.stderr)
                    continue
                # parts of at most max_rows rows (zero-copy slices)
                work += [(name, t.slice(i, self.max_rows))
                         for i in range(0, t.num_rows, self.max_rows)]
            self._pending = []
            for i, (name, t) in enumerate(work):
                try:
                    self._commit(name, t)
                except Exception as err:
                    self._error = err
                    self.stats.failures += 1
                    self._pending = work[i:]  # retried at the next flush, in order
                    print(f"warehouse: commit of '{name}' failed, will retry: {err}",
                          file=sys.stderr)
                    return

    def _commit(self, name: str, t: pa.Table) -> None:
        day = datetime.now(UTC).strftime("%Y-%m-%d")
        pdir = table_dir(self.root, name) / f"date={day}"
        ensure_dir(pdir)
        self._seq += 1
        final = pdir / f"part-{self.writer_id}-{self._seq:08d}.parquet"
        atomic_write(final, lambda p: write_parquet(t, p, self.compression))
        self.stats.parts += 1
        self.stats.rows[name] = self.stats.rows.get(name, 0) + t.num_rows


def write_parquet(t: pa.Table, path: Path, compression: str = "zstd",
                  page_checksum: bool = True) -> None:
    """Parquet as every engine reads it. Floats use BYTE_STREAM_SPLIT instead of a dictionary:
    metrics are nearly all distinct, and split bytes compress and decode faster (measured on
    step rows: 11 % smaller, 2x faster to write, 1.5x faster to scan). Each page carries a
    CRC32 so that `warehouse check` sees bytes flipped on disk that still decode."""
    floats = [f.name for f in t.schema if pa.types.is_floating(f.type)]
    others = [f.name for f in t.schema if f.name not in floats]
    pq.write_table(t, path, compression=compression, use_dictionary=others,
                   column_encoding=dict.fromkeys(floats, "BYTE_STREAM_SPLIT"),
                   write_page_checksum=page_checksum)


def _as_table(batch: BatchLike) -> pa.Table:
    if isinstance(batch, pa.Table):
        return batch
    if isinstance(batch, pa.RecordBatch):
        return pa.Table.from_batches([batch])
    return pa.table(dict(batch))


def _conform(name: str, t: pa.Table) -> pa.Table:
    """Cast known columns to the schema's types, in schema order, then any extra columns."""
    schema = table_spec(name).schema
    cols: list[pa.ChunkedArray | pa.Array] = []
    for f in schema:
        if f.name in t.column_names:
            try:
                cols.append(t.column(f.name).cast(f.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                raise WarehouseError(f"table '{name}', column '{f.name}': {err}") from None
        else:
            cols.append(pa.nulls(t.num_rows, f.type))
    extra = [c for c in t.column_names if c not in schema.names]
    fields = list(schema) + [t.schema.field(c) for c in extra]
    return pa.Table.from_arrays(cols + [t.column(c) for c in extra], schema=pa.schema(fields))


def _to_arrow(name: str, buf: _Buffer) -> pa.Table:
    tables = list(buf.tables)
    if buf.rows:
        schema = table_spec(name).schema
        columns = list(zip(*buf.rows, strict=True))
        tables.insert(0, pa.Table.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)],
            schema=schema))
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="default")


# Writers still open when the interpreter exits get flushed: a script that forgets close()
# loses nothing. (A SIGKILL loses at most the rows since the last flush.)
_OPEN: weakref.WeakSet[Writer] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for w in list(_OPEN):
        try:
            w.close()
        except Exception as err:
            print(f"warehouse: flush at exit failed: {err}", file=sys.stderr)
