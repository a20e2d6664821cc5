"""`warehouse check`: every visible part readable, schemas compatible, runs without a writer
and debris reported; `repair` quarantines unreadable parts and ends abandoned runs."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.compact import STALE_S, stale_temporaries
from warehouse.errors import WarehouseError
from warehouse.layout import (
    atomic_write,
    check_root,
    ensure_dir,
    fsync_dir,
    list_parquet,
    listed_parts,
    read_markers,
    table_dir,
)
from warehouse.parts import frame_problem, mark_unreadable
from warehouse.schema import TABLES

QUARANTINE = "_quarantine"


@dataclass(frozen=True)
class BadPart:
    """A visible part that cannot be read, and what it held as far as is known."""

    path: str  # relative to the warehouse root
    table: str
    size: int  # bytes
    rows: int | None  # from its footer, when the footer is readable
    reason: str

    def describe(self) -> str:
        rows = "rows unknown" if self.rows is None else f"{self.rows} rows"
        return f"{self.path} (table {self.table}, {self.size} bytes, {rows}): {self.reason}"


@dataclass(frozen=True)
class AbandonedRun:
    """A run with no end whose writer's lease is gone or dead."""

    run_id: str
    problem_name: str | None
    origin: str | None
    writer_id: str | None
    started_at: str


@dataclass
class CheckReport:
    parts: dict[str, int] = field(default_factory=dict)  # table -> readable visible parts
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows
    problems: list[str] = field(default_factory=list)  # anything that makes the check fail
    notes: list[str] = field(default_factory=list)  # harmless: debris, pending deletions
    unreadable: list[BadPart] = field(default_factory=list)
    abandoned: list[AbandonedRun] = field(default_factory=list)
    quarantined: list[BadPart] = field(default_factory=list)  # moved by this repair
    ended: list[str] = field(default_factory=list)  # run ids this repair ended as abandoned

    @property
    def ok(self) -> bool:
        return not self.problems


def check(root: str | Path, deep: bool = True, repair: bool = False) -> CheckReport:
    """Open every visible part (deep: decode every page too) and compare its schema with the
    table's: a known column must keep its type; extra columns must agree across parts. Lists
    abandoned runs. repair: move unreadable parts to `_quarantine/` and end abandoned runs
    with status `abandoned`; the report then says what was moved and ended."""
    root = check_root(Path(root))
    if not root.is_dir():
        raise WarehouseError(f"no warehouse at {root}")
    rep = CheckReport()
    for entry in sorted(root.iterdir()):
        if entry.is_dir() and entry.name not in TABLES and not entry.name.startswith((".", "_")):
            rep.notes.append(f"{entry.name}/: not a warehouse table (ignored)")
    for name, spec in TABLES.items():
        tdir = table_dir(root, name)
        if not tdir.is_dir():
            continue
        types = {f.name: f.type for f in spec.schema}
        rep.parts[name], rep.rows[name] = 0, 0
        for path in listed_parts(root, name):
            bad, schema, rows = _open(root, name, path, deep)
            if bad is not None:
                rep.unreadable.append(bad)
                continue
            if schema is None:
                continue  # collected by a compaction meanwhile
            rel = path.relative_to(root).as_posix()
            for fld in schema:
                want = types.setdefault(fld.name, fld.type)  # extras: first part sets it
                if fld.type != want and not pa.types.is_null(fld.type):
                    rep.problems.append(f"{rel}: column '{fld.name}' is {fld.type}, "
                                        f"expected {want}")
            rep.parts[name] += 1
            rep.rows[name] += rows
        _debris(root, tdir, rep)
    if repair:
        rep.quarantined = [quarantine(root, b) for b in rep.unreadable]
    else:
        rep.problems += [f"unreadable part {b.describe()} (`--repair` moves it to "
                         f"{QUARANTINE}/)" for b in rep.unreadable]
    rep.abandoned = abandoned_runs(root)
    if repair:
        rep.ended = end_abandoned(root, rep.abandoned)
    return rep


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
        f = pq.ParquetFile(path)
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
    """Move an unreadable part to `<root>/_quarantine/<same relative path>`, beside a JSON
    note of what it held; no reader lists that folder."""
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


def abandoned_runs(root: Path) -> list[AbandonedRun]:
    from warehouse.catalog import with_retry

    rows = with_retry(root, lambda c: c.execute(ABANDONED_SQL).fetchall())
    return [AbandonedRun(*r) for r in rows]


def end_abandoned(root: Path, runs: list[AbandonedRun]) -> list[str]:
    """Log a `run_ends` row with status `abandoned` for each run; returns their ids."""
    if not runs:
        return []
    from warehouse.writer import Writer

    with Writer(root) as w:
        for r in runs:
            w.append("run_ends", {"run_id": r.run_id, "status": "abandoned",
                                  "error": f"its writer {r.writer_id} is gone (process "
                                           "killed or closed without ending the run)",
                                  "ended_at": datetime.now(UTC)})
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
