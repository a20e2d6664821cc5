"""A catalog connection kept between reads, its tables held in memory and brought up to date
when the warehouse's parts change.

`connect` lists every part and registers the views: ~100 ms, and every query then reads the
part files again (tens of ms over a few hundred small parts). `CachedCatalog.read(fn)` runs
`fn` on a cursor of one kept read-only connection (DuckDB connections are not thread-safe;
each read takes its own cursor, which shares the database) whose `raw_<table>` views read
in-memory copies of the tables (`mem_<table>`; a table over `MEMORY_ROWS` rows stays on the
files), so a query reads no file. Before each read it checks, cheaply, whether what the
copies were made from has changed:

  * the modification times of the table directories, their partition directories and their
    compaction markers' directory (a new part, a new date, a compaction), and
  * the set of live writers (a writer that died turns its runs from `running` to
    `abandoned`; its lease file does not change when it dies).

On a change it lists the parts: parts only added (runs logging, ingest) are appended to the
copies; a part gone (a compaction, a part found damaged) rebuilds everything; new live
writers replace the `live_writers` view. A directory's modification time comes from a coarse
clock, so a part written within the tick of the last change leaves it unchanged: the stamp
is trusted only once its newest time is `SETTLE_S` older than the listing checked against
it; until then every read lists the parts (~2 ms).

The views whose queries cost more than their result (`KEPT_VIEWS`: a window over every end
row, a join) are kept as tables too, computed again when a table they read gains parts or
the live writers change: a page of runs then reads a table of runs, not the window and the
join (on 2 cores, ~7 ms a query over 32 runs, against ~0.3 ms).

A replaced connection is not closed: reads still running on its cursors finish on it, and it
is freed with the last of them.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import duckdb

from warehouse.catalog import (
    ATTEMPTS,
    _recover,
    connect,
    live_writers_sql,
    one_line,
    part_error,
    scan_sql,
)
from warehouse.errors import WarehouseError
from warehouse.layout import check_root, visible_parts
from warehouse.lease import live_writers
from warehouse.schema import TABLES

T = TypeVar("T")
SETTLE_S = 0.2  # well past the coarse clock's tick (1-10 ms) and any NFS attribute skew
MEMORY_ROWS = 2_000_000  # a table larger than this is read from its files (memory)

Parts = tuple[tuple[Path, ...], ...]  # per table, in TABLES order

LIVE = "live_writers"
# view -> the tables (and LIVE) it reads, in an order where a view reads only those before it
KEPT_VIEWS: dict[str, frozenset[str]] = {
    "run_ends": frozenset({"run_ends"}),
    "runs": frozenset({"runs", "run_ends", LIVE}),
    "problems": frozenset({"problems"}),
    "problem_features": frozenset({"problem_features"}),
}


@dataclass
class _Built:
    conn: duckdb.DuckDBPyConnection
    times: tuple[int, ...]
    live: frozenset[str]
    parts: Parts
    in_memory: frozenset[str]  # tables copied into memory
    trusted: bool  # the stamp alone says whether the parts changed


class CachedCatalog:
    """See the module docstring."""

    def __init__(self, root: str | Path, memory_rows: int = MEMORY_ROWS) -> None:
        self.root = Path(root)
        self.memory_rows = memory_rows
        self.rebuilds = 0  # connections built so far (tests and benchmarks look)
        self.appends = 0  # part sets appended to the copies
        self._lock = threading.Lock()
        self._built: _Built | None = None

    def read(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        check_root(self.root)
        for attempt in range(ATTEMPTS):
            try:
                cur = self._cursor()
            except duckdb.Error as err:  # a part vanished or is damaged while copying
                self.invalidate()
                if not part_error(err) or not _recover(err, self.root, attempt):
                    raise WarehouseError(one_line(err)) from None
                continue
            try:
                return fn(cur)
            except duckdb.Error as err:
                if not part_error(err):
                    raise
                self.invalidate()
                if not _recover(err, self.root, attempt):
                    raise WarehouseError(one_line(err)) from None
            finally:
                cur.close()
        raise AssertionError("unreachable")

    def invalidate(self) -> None:
        """Build a fresh connection on the next read."""
        with self._lock:
            self._built = None

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            return self._current().conn.cursor()

    def _current(self) -> _Built:
        times, live = self._stamp()
        built = self._built
        if built is not None and built.trusted and times == built.times and \
                live == built.live:
            return built
        listed_at = time.time()
        parts = self._parts()
        if built is None or not self._update(built, parts, live):
            built = self._build(parts)
        newest = max(times, default=0) / 1e9
        self._built = _Built(built.conn, times, live, parts, built.in_memory,
                             trusted=listed_at - newest > SETTLE_S)
        return self._built

    def _build(self, parts: Parts) -> _Built:
        """A new connection, its tables copied into memory (those small enough)."""
        conn = connect(self.root, missing_ok=True)  # the service may start before any run
        in_memory = []
        try:
            for table, files in zip(TABLES, parts, strict=True):
                # the copy holds exactly the parts listed (`connect` may have seen more)
                src = _scan(table, files) if files else f"(SELECT * FROM raw_{table} LIMIT 0)"
                (rows,) = conn.execute(f"SELECT count(*) FROM {src}").fetchone() or (0,)
                if rows > self.memory_rows:
                    continue
                conn.execute(f"CREATE TABLE mem_{table} AS SELECT * FROM {src}")
                conn.execute(f"CREATE OR REPLACE VIEW raw_{table} AS SELECT * FROM "
                             f"mem_{table}")
                in_memory.append(table)
            _keep_views(conn)
        except BaseException:
            conn.close()
            raise
        self.rebuilds += 1
        return _Built(conn, (), frozenset(live_writers(self.root)), parts,
                      frozenset(in_memory), trusted=False)

    def _update(self, built: _Built, parts: Parts, live: frozenset[str]) -> bool:
        """Bring `built` up to `parts` and `live` in place; False when only a rebuild can
        (a part gone, a table on files that gained parts, new columns)."""
        added: dict[str, list[Path]] = {}
        for table, old, new in zip(TABLES, built.parts, parts, strict=True):
            had = set(old)  # (once: a set per part made this quadratic in the parts)
            if not had <= set(new):
                return False  # a compaction, or a part found damaged
            more = [p for p in new if p not in had]
            if more and table not in built.in_memory:
                return False
            if more:
                added[table] = more
        conn = built.conn
        try:
            for table, files in added.items():
                conn.execute(f"INSERT INTO mem_{table} BY NAME SELECT * FROM "
                             f"{_scan(table, files)}")
                self.appends += 1
            if live != built.live:
                conn.execute(f"CREATE OR REPLACE VIEW live_writers AS "
                             f"{live_writers_sql(self.root)}")
            _refresh_views(conn, {*added, *([LIVE] if live != built.live else [])})
        except duckdb.Error:
            return False  # a new column, a part collected meanwhile: start over
        counts = conn.execute(" UNION ALL ".join(
            f"SELECT count(*) FROM mem_{t}" for t in sorted(added))).fetchall() if added \
            else []
        return all(n <= self.memory_rows for (n,) in counts)

    def _parts(self) -> Parts:
        return tuple(tuple(visible_parts(self.root, t)) for t in TABLES)

    def _stamp(self) -> tuple[tuple[int, ...], frozenset[str]]:
        times: list[int] = []
        for table in TABLES:
            tdir = self.root / table
            times.append(_mtime(tdir))
            try:
                with os.scandir(tdir) as it:  # partitions and the compaction markers' dir
                    times += [e.stat().st_mtime_ns for e in it if e.is_dir()]
            except (FileNotFoundError, NotADirectoryError):
                continue
        return tuple(times), frozenset(live_writers(self.root))


def _keep_views(conn: duckdb.DuckDBPyConnection) -> None:
    """Each of `KEPT_VIEWS` as a table (`kept_<view>`) read by its name, its query kept as
    `src_<view>` to compute it again."""
    for view in KEPT_VIEWS:
        row = conn.execute("SELECT sql FROM duckdb_views() WHERE view_name = ? AND "
                           "NOT internal", [view]).fetchone()
        prefix = f"CREATE VIEW {view} AS "
        if row is None or not str(row[0]).startswith(prefix):
            raise WarehouseError(f"cannot keep view '{view}': its definition is "
                                 f"{row[0] if row else 'missing'}")
        conn.execute(f"CREATE VIEW src_{view} AS {str(row[0])[len(prefix):]}")
        conn.execute(f"CREATE TABLE kept_{view} AS SELECT * FROM src_{view}")
        conn.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM kept_{view}")


def _refresh_views(conn: duckdb.DuckDBPyConnection, changed: set[str]) -> None:
    """Compute again the kept views that read a table of `changed` (or a view computed
    again before them), in one transaction: a read on another cursor sees all before or
    all after."""
    stale = set(changed)
    views = []
    for view, reads in KEPT_VIEWS.items():
        if reads & stale:
            views.append(view)
            stale.add(view)
    if not views:
        return
    conn.execute("BEGIN TRANSACTION")
    try:
        for view in views:
            conn.execute(f"DELETE FROM kept_{view}")
            conn.execute(f"INSERT INTO kept_{view} SELECT * FROM src_{view}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _scan(table: str, files: tuple[Path, ...] | list[Path]) -> str:
    """The parts we listed, as `catalog.raw_view_sql` reads them (a subquery)."""
    return f"({scan_sql(table, [p.resolve() for p in files])})"


def _mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return 0
