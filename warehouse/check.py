"""`warehouse check`: every visible part readable, schemas compatible, debris reported."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.compact import STALE_S, stale_temporaries
from warehouse.errors import WarehouseError
from warehouse.layout import (
    check_root,
    list_parquet,
    read_markers,
    table_dir,
    visible_parts,
)
from warehouse.schema import TABLES


@dataclass
class CheckReport:
    parts: dict[str, int] = field(default_factory=dict)  # table -> visible parts
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows
    problems: list[str] = field(default_factory=list)  # anything that makes the check fail
    notes: list[str] = field(default_factory=list)  # harmless: debris, pending deletions

    @property
    def ok(self) -> bool:
        return not self.problems


def check(root: str | Path, deep: bool = True) -> CheckReport:
    """Open every visible part (deep: decode every page too) and compare its schema with the
    table's: a known column must keep its type; extra columns must agree across parts."""
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
        for path in visible_parts(root, name):
            rel = path.relative_to(root).as_posix()
            try:
                f = pq.ParquetFile(path)
                schema = f.schema_arrow
                rows = f.metadata.num_rows
                if deep:
                    f.read()
            except (OSError, pa.ArrowException) as err:
                rep.problems.append(f"{rel}: unreadable: {err}")
                continue
            for fld in schema:
                want = types.setdefault(fld.name, fld.type)  # extras: first part sets it
                if fld.type != want and not pa.types.is_null(fld.type):
                    rep.problems.append(f"{rel}: column '{fld.name}' is {fld.type}, "
                                        f"expected {want}")
            rep.parts[name] += 1
            rep.rows[name] += rows
        _debris(root, tdir, rep)
    return rep


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
