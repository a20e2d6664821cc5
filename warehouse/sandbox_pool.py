"""Sandbox queries in worker processes, so that the time limit holds for every query.

The sandbox's timer interrupts a query at its time limit, but DuckDB acts on an interrupt only
between vectors and operators: one long expression (`list_sort` of a list of millions, nested
in a `list_transform`) runs to its end, holding its slot and a core. Here each query runs in a
worker process (one per slot, started on first use and kept), and a worker whose answer has
not come `GRACE_S` after the time limit is killed: the query ends as `time_limit` whatever it
was doing, and the next query starts a fresh worker.

    pool = SandboxPool(slots=2)
    result = pool.run(root, "SELECT count(*) FROM steps", Limits(time_limit_s=5), wait_s=1)
"""

from __future__ import annotations

import multiprocessing
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from warehouse.errors import WarehouseError
from warehouse.sandbox import Limits, Result, SandboxError, past_time_limit, run_sql

GRACE_S = 2.0  # past the time limit: the interrupt's own answer comes first when it can
# how long the views may take to build before the query starts (their cost grows with the
# warehouse's part files, ~0.6 ms each, not with the query: not the query's time limit)
OPEN_S = 120.0
_SPAWN = multiprocessing.get_context("spawn")  # no fork of a threaded server


class SandboxBusy(WarehouseError):
    """Every slot stayed taken for the wait."""


def _serve(conn: Connection) -> None:
    """A worker: queries in, answers out, until the server closes its end."""
    while True:
        try:
            root, sql, limits = conn.recv()
        except (EOFError, OSError):
            return
        answer: tuple[str, Any]
        try:
            answer = ("ok", run_sql(root, sql, limits,
                                    started=lambda: conn.send(("started", None))))
        except SandboxError as err:
            answer = ("sandbox", (err.reason, str(err)))
        except WarehouseError as err:  # an unreadable part: the service's 503
            answer = ("warehouse", str(err))
        except Exception as err:  # said to the server, which raises it
            answer = ("crash", f"{type(err).__name__}: {err}")
        conn.send(answer)


class _Worker:
    def __init__(self) -> None:
        self.conn, child = _SPAWN.Pipe()
        self.process = _SPAWN.Process(target=_serve, args=(child,), daemon=True,
                                      name="aicf-sql-sandbox")
        self.process.start()
        child.close()

    def kill(self) -> None:
        self.process.kill()
        self.process.join(5)
        self.conn.close()


class SandboxPool:
    """At most `slots` queries at once, each in a worker process of its own."""

    def __init__(self, slots: int, grace_s: float = GRACE_S, open_s: float = OPEN_S) -> None:
        self.slots = threading.BoundedSemaphore(slots)
        self.grace_s = grace_s
        self.open_s = open_s
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def run(self, root: str | Path, sql: str, limits: Limits, wait_s: float) -> Result:
        """`run_sql` in a worker; SandboxBusy when no slot frees within `wait_s`."""
        if not self.slots.acquire(timeout=wait_s):
            raise SandboxBusy("too many SQL queries at once")
        try:
            return self._run(str(root), sql, limits)
        finally:
            self.slots.release()

    def _run(self, root: str, sql: str, limits: Limits) -> Result:
        worker = self._take()
        try:
            worker.conn.send((root, sql, limits))
            if not worker.conn.poll(self.open_s):
                raise WarehouseError(f"opening the warehouse's views took over "
                                     f"{self.open_s:g} s, before the query could start: "
                                     f"`aicf-induct warehouse compact` merges its part files")
            kind, value = worker.conn.recv()
            if kind == "started":  # the query's own time starts now
                if not worker.conn.poll(limits.time_limit_s + self.grace_s):
                    raise past_time_limit(limits)
                kind, value = worker.conn.recv()
        except (EOFError, OSError):  # the worker died under the query (the OOM killer)
            worker.kill()
            raise SandboxError("memory_limit", "the query's process ended before it answered "
                                               "(the server ran short of memory)") from None
        except BaseException:
            worker.kill()  # stopped mid-query: never handed out again
            raise
        with self._lock:
            self._idle.append(worker)
        if kind == "ok":
            result: Result = value
            return result
        if kind == "sandbox":
            raise SandboxError(*value)
        if kind == "warehouse":
            raise WarehouseError(value)
        raise RuntimeError(f"the SQL sandbox's worker failed: {value}")

    def _take(self) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.process.is_alive():
                    return worker
                worker.kill()
        return _Worker()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()
