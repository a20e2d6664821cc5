"""A catalog connection kept between reads, rebuilt when the warehouse's parts change.

`connect` lists every part and registers the views: ~100 ms, too much for every request of
a server. `CachedCatalog.read(fn)` runs `fn` on a cursor of one kept read-only connection
(DuckDB connections are not thread-safe; each read takes its own cursor, which shares the
views), and first checks, cheaply, whether what the views were built from has changed:

  * the modification times of the table directories, their partition directories and
    their compaction markers' directories (a new part, a new date, a compaction), and
  * the set of live writers (a writer that died turns its runs from `running` to
    `abandoned`; its lease file does not change when it dies).

A directory's modification time is taken from a coarse clock, so a part written within the
same tick as the last change leaves it unchanged: a stamp is trusted only once the newest
time in it is `SETTLE_S` older than the listing it was checked against; until then every
read compares the exact part lists (what `connect` would list, ~2 ms) instead. A read whose
part vanished (a compaction collected it) or is damaged is retried on a rebuilt connection,
as `catalog.with_retry` does.

A replaced connection is not closed: reads still running on its cursors finish on it, and
it is freed when the last of them is.
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

from warehouse.catalog import ATTEMPTS, _recover, connect, one_line, part_error
from warehouse.errors import WarehouseError
from warehouse.layout import check_root, visible_parts
from warehouse.lease import live_writers
from warehouse.schema import TABLES

T = TypeVar("T")
SETTLE_S = 0.2  # well past the coarse clock's tick (1-10 ms) and any NFS attribute skew

Stamp = tuple[tuple[int, ...], frozenset[str]]


@dataclass
class _Built:
    conn: duckdb.DuckDBPyConnection
    stamp: Stamp
    parts: tuple[tuple[Path, ...], ...]
    trusted: bool  # the stamp alone says whether the parts changed


class CachedCatalog:
    """See the module docstring. `read_only`: the connection is sandboxed as `connect`'s."""

    def __init__(self, root: str | Path, read_only: bool = True) -> None:
        self.root = Path(root)
        self.read_only = read_only
        self.rebuilds = 0  # connections built so far (tests and benchmarks look)
        self._lock = threading.Lock()
        self._built: _Built | None = None

    def read(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        check_root(self.root)
        for attempt in range(ATTEMPTS):
            cur = self._cursor()
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
            built = self._current()
            return built.conn.cursor()

    def _current(self) -> _Built:
        stamp = self._stamp()
        built = self._built
        if built is not None and built.trusted and stamp == built.stamp:
            return built
        listed_at = time.time()
        parts = self._parts()  # listed before `connect` lists: its views hold at least these
        if built is None or parts != built.parts or stamp[1] != built.stamp[1]:
            conn = connect(self.root, read_only=self.read_only)
            self.rebuilds += 1
        else:
            conn = built.conn
        newest = max(stamp[0], default=0) / 1e9
        self._built = _Built(conn, stamp, parts, trusted=listed_at - newest > SETTLE_S)
        return self._built

    def _parts(self) -> tuple[tuple[Path, ...], ...]:
        return tuple(tuple(visible_parts(self.root, t)) for t in TABLES)

    def _stamp(self) -> Stamp:
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


def _mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return 0
