"""Many real writer processes, readers and compaction at once; a writer killed mid-run."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import duckdb

from tests.warehouse.conftest import spawn_writer
from warehouse import check, compact, connect, with_retry

STEPS = 10_000


def _no_duplicates(conn: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    got = conn.execute("SELECT count(*), count(DISTINCT (run_id, step)) FROM steps").fetchone()
    assert got is not None
    return int(got[0]), int(got[1])


def _wait_all(procs: list[subprocess.Popen[str]], timeout: float = 600) -> None:
    for p in procs:
        _, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err


def _assert_complete(root: Path, runs: int) -> None:
    """Every (run, step) exactly once, with the loss the writer logged for it."""
    conn = connect(root)
    assert _no_duplicates(conn) == (runs * STEPS, runs * STEPS)
    per_run = conn.execute(
        "SELECT run_id, count(*), min(step), max(step), "
        "  max(abs(loss - (CAST(split_part(run_id, '-', 2) AS INT) + 1.0 / (step + 1)))) "
        "FROM steps GROUP BY run_id ORDER BY run_id").fetchall()
    assert [(n, lo, hi) for _, n, lo, hi, _ in per_run] == [(STEPS, 0, STEPS - 1)] * runs
    assert all(err == 0 for *_, err in per_run)
    assert conn.execute("SELECT count(*) FROM runs WHERE status = 'completed'").fetchone() \
        == (runs,)


class Readers:
    """Threads querying the warehouse in a loop; any duplicate or error is recorded."""

    def __init__(self, root: Path, n: int = 2) -> None:
        self.root = root
        self.stop = threading.Event()
        self.queries = 0
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._loop) for _ in range(n)]
        for t in self.threads:
            t.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                total, distinct = with_retry(self.root, _no_duplicates)
                if total != distinct:
                    self.errors.append(f"saw {total} rows, {distinct} distinct")
                self.queries += 1
            except Exception as err:
                self.errors.append(repr(err))
            time.sleep(0.02)  # leave the 2 cores mostly to the writers

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()


def test_16_writers_with_concurrent_readers(root: Path) -> None:
    root.mkdir()
    readers = Readers(root)
    procs = [spawn_writer(root, f"run-{i}", STEPS, 0.05, pause_every=500) for i in range(16)]
    _wait_all(procs)
    readers.finish()
    assert readers.errors == []
    assert readers.queries > 5
    _assert_complete(root, 16)
    rep = check(root)
    assert rep.ok, rep.problems
    assert rep.rows["steps"] == 16 * STEPS


def test_sigkill_loses_at_most_the_unflushed_rows(root: Path) -> None:
    root.mkdir()
    proc = spawn_writer(root, "run-7", 10_000_000, 0.1, pause_every=200)
    committed = 0
    assert proc.stdout is not None
    for line in proc.stdout:
        committed = int(line.split()[1])
        if committed >= 20_000:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)  # reap it and close its pipes
    rep = check(root)
    assert rep.ok, rep.problems
    conn = connect(root)
    n, lo, hi = conn.execute("SELECT count(*), min(step), max(step) FROM steps").fetchone() \
        or (0, 0, 0)
    # what was reported committed is there, as a gap-free prefix, with nothing twice
    assert n >= committed and (lo, hi) == (0, n - 1)
    assert _no_duplicates(conn) == (n, n)
    # the writer is gone without ending its run: abandoned, not running forever
    assert conn.execute("SELECT status FROM runs").fetchall() == [("abandoned",)]
    assert [r.run_id for r in rep.abandoned] == ["run-7"]
    assert list(root.rglob("*.parquet"))  # and no temporary file is a visible part
    assert all(p.name.startswith(("part-", "cpart-")) for p in root.rglob("*.parquet"))


def test_compaction_during_writes_keeps_every_row_once(root: Path) -> None:
    root.mkdir()
    readers = Readers(root, n=1)
    procs = [spawn_writer(root, f"run-{i}", STEPS, 0.02, pause_every=200) for i in range(6)]
    merged = 0
    while any(p.poll() is None for p in procs):
        merged += compact(root, grace_s=0, small_bytes=1 << 30).merged_parts
        time.sleep(0.05)
    _wait_all(procs)
    merged += compact(root, grace_s=0, small_bytes=1 << 30).merged_parts
    readers.finish()
    assert readers.errors == []
    assert merged > 10  # compaction really ran while writing
    _assert_complete(root, 6)
    # every partition of steps ended as one part, and nothing superseded is left behind
    assert len(list((root / "steps").rglob("*.parquet"))) == 1
    rep = check(root)
    assert rep.ok and not rep.notes, (rep.problems, rep.notes)
