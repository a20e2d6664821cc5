"""`warehouse check`: every visible part readable, schemas compatible, runs without a writer
and debris reported; `repair` quarantines unreadable, mismatched and stray parts, then ends
abandoned runs."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.catalog import QUARANTINE, require_warehouse, with_retry
from warehouse.compact import STALE_S, stale_temporaries
from warehouse.errors import WarehouseError
from warehouse.ingest import last_record_at
from warehouse.layout import (
    atomic_write,
    check_root,
    ensure_dir,
    fsync_dir,
    list_parquet,
    listed_parts,
    read_markers,
    stray_files,
    table_dir,
)
from warehouse.parts import frame_problem, mark_unreadable, problem_of
from warehouse.schema import RUN_TABLES, TABLES, mismatch, same_type


@dataclass(frozen=True)
class BadPart:
    """A visible part that cannot be read, and what it held as far as is known."""

    path: str  # relative to the warehouse root
    table: str  # "" for a stray in the root itself
    size: int  # bytes
    rows: int | None  # from its footer, when the footer is readable
    reason: str

    def describe(self) -> str:
        rows = "rows unknown" if self.rows is None else f"{self.rows} rows"
        table = f"table {self.table}, " if self.table else ""
        return f"{self.path} ({table}{self.size} bytes, {rows}): {self.reason}"


@dataclass(frozen=True)
class AbandonedRun:
    """A run with no end whose writer's lease is gone or dead, or (`silent_s` set) a run the
    service ingests, still `running` under the server's live lease, whose client has sent
    nothing for that many seconds (killed outright, its node lost)."""

    run_id: str
    problem_name: str | None
    origin: str | None
    writer_id: str | None
    started_at: str
    silent_s: float | None = None

    def why(self) -> str:
        if self.silent_s is None:
            return f"its writer {self.writer_id} is gone"
        return f"nothing from its client for {self.silent_s / 60:.0f} min"


@dataclass
class CheckReport:
    parts: dict[str, int] = field(default_factory=dict)  # table -> readable visible parts
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows
    problems: list[str] = field(default_factory=list)  # anything that makes the check fail
    notes: list[str] = field(default_factory=list)  # harmless: debris, pending deletions
    unreadable: list[BadPart] = field(default_factory=list)
    mismatched: list[BadPart] = field(default_factory=list)  # not this table's columns
    stray: list[BadPart] = field(default_factory=list)  # `*.parquet` not named as a part
    abandoned: list[AbandonedRun] = field(default_factory=list)  # stale ones included
    quarantined: list[BadPart] = field(default_factory=list)  # moved by this repair
    ended: list[str] = field(default_factory=list)  # run ids this repair ended as abandoned

    @property
    def ok(self) -> bool:
        return not self.problems


def check(root: str | Path, deep: bool = True, repair: bool = False,
          stale_s: float | None = None,
          progress: Callable[[int], object] | None = None) -> CheckReport:
    """Open every visible part (deep: decode every page too, verifying page checksums) and
    compare its schema with the table's: a known column must keep its type, the table's key
    columns must be there, extra columns must agree across parts. Lists stray files, abandoned
    runs and rows of runs that have no `runs` row; stale_s: also the service's `running` runs
    whose client has sent nothing for that long, as abandoned. repair: move unreadable,
    mismatched and stray parts to `_quarantine/`, then end abandoned runs with status
    `abandoned`; the report then says what was moved and ended. `progress(n)`: n more parts
    opened (a progress bar's `update`)."""
    root = check_root(Path(root))
    if not root.is_dir():
        raise WarehouseError(f"no warehouse at {root}")
    require_warehouse(root)
    rep = CheckReport()
    for entry in sorted(root.iterdir()):
        if entry.is_dir() and entry.name not in TABLES and not entry.name.startswith((".", "_")):
            rep.notes.append(f"{entry.name}/: not a warehouse table (ignored)")
    for name in TABLES:
        tdir = table_dir(root, name)
        if tdir.is_dir():
            _check_table(root, name, deep, rep, progress or (lambda n: None))
            _debris(root, tdir, rep)
    rep.stray += [BadPart(f, f.split("/")[0] if "/" in f else "", _size(root / f), None,
                          STRAY) for f in stray_files(root)]
    # quarantined first: a bogus run read from a mismatched part must not be ended
    _settle(root, rep, rep.unreadable + rep.mismatched + rep.stray, repair)
    rep.abandoned, orphans = _run_facts(root)
    if stale_s is not None:
        rep.abandoned += silent_runs(root, stale_s)
    # a quick check reads no pages: the query above may have found a damaged one
    _settle(root, rep, _found_by_readers(root, rep), repair)
    rep.notes += orphans
    if repair:
        rep.ended = end_abandoned(root, rep.abandoned)
    return rep


def _check_table(root: Path, name: str, deep: bool, rep: CheckReport,
                 progress: Callable[[int], object]) -> None:
    known = set(TABLES[name].column_names)
    extras: dict[str, pa.DataType] = {}  # the first part with an extra column sets its type
    rep.parts[name], rep.rows[name] = 0, 0
    for path in listed_parts(root, name):
        progress(1)
        bad, schema, rows = _open(root, name, path, deep)
        if bad is not None:
            rep.unreadable.append(bad)
            continue
        if schema is None:
            continue  # collected by a compaction meanwhile
        rel = path.relative_to(root).as_posix()
        wrong = mismatch(name, schema)
        if wrong is not None:
            mark_unreadable(path, f"wrong columns: {wrong}", reported=True)  # named here
            rep.mismatched.append(BadPart(rel, name, _size(path), rows, wrong))
            continue
        for fld in (f for f in schema if f.name not in known):
            want = extras.get(fld.name)
            if want is None or pa.types.is_null(want):
                extras[fld.name] = fld.type
            elif not same_type(fld.type, want):
                rep.problems.append(f"{rel}: extra column '{fld.name}' is {fld.type}, "
                                    f"{want} in other parts")
        rep.parts[name] += 1
        rep.rows[name] += rows


STRAY = ("not a part file (parts are <table>/date=YYYY-MM-DD/part-<id>-<seq>.parquet or "
         "cpart-<id>.parquet): readers ignore it")


def _rows(path: Path) -> int | None:
    try:
        return pq.read_metadata(path).num_rows
    except (OSError, pa.ArrowException):
        return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _settle(root: Path, rep: CheckReport, bad: list[BadPart], repair: bool) -> None:
    """Quarantine `bad` (repair) or report each as a problem."""
    if repair:
        rep.quarantined += [quarantine(root, b) for b in bad]
        return
    for b in bad:
        what = "unreadable part" if b in rep.unreadable else \
            "stray file" if b in rep.stray else "part with wrong columns"
        rep.problems.append(f"{what} {b.describe()} (`--repair` moves it to {QUARANTINE}/)")


def _found_by_readers(root: Path, rep: CheckReport) -> list[BadPart]:
    """Parts the check opened as fine but a query since failed on and marked unreadable."""
    out = []
    known = {b.path for b in rep.unreadable + rep.mismatched + rep.stray}
    for name in rep.parts:
        for path in listed_parts(root, name):
            if path.relative_to(root).as_posix() in known:
                continue
            try:
                reason = problem_of(path, name)
            except FileNotFoundError:
                continue
            if reason is not None:
                rep.parts[name] -= 1
                rows = _rows(path)
                rep.rows[name] -= rows or 0
                bad = BadPart(path.relative_to(root).as_posix(), name, _size(path), rows,
                              reason)
                rep.unreadable.append(bad)
                out.append(bad)
    return out


def _open(root: Path, table: str, path: Path,
          deep: bool) -> tuple[BadPart | None, pa.Schema | None, int]:
    """(BadPart when unreadable, its schema, its rows); (None, None, 0) when it vanished."""
    rel = path.relative_to(root).as_posix()
    try:
        size = path.stat().st_size
        reason = frame_problem(path)
    except FileNotFoundError:
        return None, None, 0
    if reason is not None:
        mark_unreadable(path, reason, reported=True)  # the report names it: no warning
        return BadPart(rel, table, size, None, reason), None, 0
    rows: int | None = None
    try:
        # checksums catch flipped bytes that still decompress; parts without them pass
        f = pq.ParquetFile(path, page_checksum_verification=True)
        rows = f.metadata.num_rows
        schema = f.schema_arrow
        if deep:
            f.read()
    except FileNotFoundError:
        return None, None, 0
    except (OSError, pa.ArrowException) as err:
        mark_unreadable(path, str(err), reported=True)  # readers here skip it, silently
        return BadPart(rel, table, size, rows, str(err).splitlines()[0]), None, 0
    return None, schema, rows


def quarantine(root: Path, bad: BadPart) -> BadPart:
    """Move a part readers must not read (unreadable, wrong columns, a stray) to
    `<root>/_quarantine/<same relative path>`, beside a JSON note of what it held; no reader
    lists that folder."""
    src = root / bad.path
    dst = root / QUARANTINE / bad.path
    ensure_dir(dst.parent)
    note = json.dumps({"path": bad.path, "table": bad.table, "size": bad.size,
                       "rows": bad.rows, "reason": bad.reason,
                       "quarantined_at": time.time()}, indent=1).encode()
    atomic_write(dst.with_name(dst.name + ".json"), lambda p: p.write_bytes(note))
    os.replace(src, dst)
    fsync_dir(src.parent)
    fsync_dir(dst.parent)
    return bad


ABANDONED_SQL = """
SELECT run_id, problem_name, origin, writer_id, CAST(started_at AS VARCHAR)
FROM runs WHERE status = 'abandoned' AND ended_at IS NULL ORDER BY started_at
"""


ORPHANS_SQL = "WITH o AS (" + " UNION ALL ".join(
    f"SELECT '{t}' AS t, run_id FROM raw_{t} x WHERE NOT EXISTS "
    f"(SELECT 1 FROM raw_runs r WHERE r.run_id = x.run_id)" for t in RUN_TABLES) + \
    ") SELECT t, count(*), (SELECT count(DISTINCT run_id) FROM o) FROM o GROUP BY t ORDER BY t"


def abandoned_runs(root: Path) -> list[AbandonedRun]:
    return _run_facts(root)[0]


def _run_facts(root: Path) -> tuple[list[AbandonedRun], list[str]]:
    """Abandoned runs, and a note on rows of runs that have no `runs` row (orphans: their runs
    part was quarantined or lost), one query."""

    def read(c: duckdb.DuckDBPyConnection) -> tuple[list[Any], list[Any]]:
        return c.execute(ABANDONED_SQL).fetchall(), c.execute(ORPHANS_SQL).fetchall()

    abandoned, orphans = with_retry(root, read)
    notes = [f"orphaned rows of {orphans[0][2]} run(s) that have no row in runs (their runs "
             f"part was quarantined or lost): {', '.join(f'{t} {n}' for t, n, _ in orphans)}"
             ] if orphans else []
    return [AbandonedRun(*r) for r in abandoned], notes


RUNNING_SQL = """
SELECT run_id, problem_name, origin, writer_id, CAST(started_at AS VARCHAR)
FROM runs WHERE status = 'running' ORDER BY started_at
"""


def silent_runs(root: Path, stale_s: float, now: float | None = None) -> list[AbandonedRun]:
    """The `running` runs the service ingests whose last record it committed more than
    stale_s seconds ago (a local writer's run is never one: its lease says whether its
    process lives)."""
    now = time.time() if now is None else now
    out = []
    for run_id, name, origin, writer_id, started_at in with_retry(
            root, lambda c: c.execute(RUNNING_SQL).fetchall()):
        last = last_record_at(root, run_id)
        if last is not None and now - last > stale_s:
            out.append(AbandonedRun(run_id, name, origin, writer_id, started_at, now - last))
    return out


def end_abandoned(root: Path, runs: list[AbandonedRun]) -> list[str]:
    """Log a `run_ends` row with status `abandoned` for each run; returns their ids."""
    if not runs:
        return []
    from warehouse.writer import Writer

    with Writer(root) as w:
        for r in runs:
            how = ("process killed or closed without ending the run" if r.silent_s is None
                   else "client killed or cut off; its own end, if it comes, wins")
            w.append("run_ends", {"run_id": r.run_id, "status": "abandoned",
                                  "error": f"{r.why()} ({how})",
                                  "ended_at": datetime.now(UTC), "writer_id": w.writer_id})
    return [r.run_id for r in runs]


def _debris(root: Path, tdir: Path, rep: CheckReport) -> None:
    markers = read_markers(tdir)
    files = set(list_parquet(tdir))
    for m in markers.values():
        if m.output not in files and any(i in files for i in m.inputs):
            rep.problems.append(f"{tdir.name}: compaction {m.id} lost its output {m.output}")
    pending = sum(i in files for m in markers.values() for i in m.inputs)
    if pending:
        rep.notes.append(f"{tdir.name}: {pending} superseded part(s) awaiting deletion "
                         "(next `warehouse compact`)")
    temps = stale_temporaries(tdir, time.time(), 0)
    if temps:
        old = len(stale_temporaries(tdir, time.time(), STALE_S))
        rep.notes.append(f"{tdir.name}: {len(temps)} temporary file(s) not visible to "
                         f"readers ({old} older than {STALE_S:.0f} s: a writer died "
                         "mid-commit; `compact` removes them)")
