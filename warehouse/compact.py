"""Compaction: merge a partition's small parts into one, atomically, while writers run.

For a group of visible small parts of one partition:
  1. write the merged rows as `cpart-<id>.parquet` (atomic write; not yet visible, since a
     cpart without a committed marker is ignored by readers);
  2. commit `_compactions/<id>.json` naming the output and the inputs (atomic write): in this
     one step readers stop seeing the inputs and start seeing the output;
  3. delete the inputs once the marker is `grace_s` old (now, when grace_s is 0; else on a
     later `compact`), so a reader that listed files just before the commit can still open
     them. Markers go once their output and inputs are gone.
Writers never wait: they only add new `part-` files, which a compaction never touches unless
it listed them. Two compactions exclude each other with a lock file (flock).
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.errors import WarehouseError
from warehouse.layout import (
    MARKERS,
    TMP_PREFIX,
    TMP_SUFFIX,
    Marker,
    atomic_write,
    check_root,
    ensure_dir,
    fsync_dir,
    list_parquet,
    read_markers,
    table_dir,
    tables_on_disk,
    visible_parts,
)
from warehouse.lease import collect_dead
from warehouse.parts import mark_unreadable, warn_skipped
from warehouse.schema import mismatch
from warehouse.writer import write_parquet

LOCK_FILE = "_compact.lock"
STALE_S = 3600.0  # temp files and uncommitted cparts older than this are debris of a crash


@dataclass
class CompactReport:
    merged_parts: int = 0  # inputs replaced
    new_parts: int = 0
    rows: int = 0  # rows moved into new parts
    deleted_files: int = 0  # superseded parts, stale temporaries and orphans removed
    per_table: dict[str, int] = field(default_factory=dict)  # table -> parts merged


# part files past which a writer says to compact: every read lists (and opens the footer
# of) every part, ~0.6 ms each: 26,000 parts made a query take a minute, 5 after `compact` 2 s
MANY_PARTS = 5000


def part_files(root: Path) -> int:
    """How many part files the warehouse's tables hold (visible or superseded)."""
    return sum(len(list_parquet(table_dir(root, t))) for t in tables_on_disk(root))


def compaction_note(root: Path) -> str | None:
    """A line telling to compact a warehouse of `MANY_PARTS` part files or more; None below."""
    n = part_files(root)
    if n < MANY_PARTS:
        return None
    return (f"note: {root} holds {n:,} part files (a sweep writes about 5 a run), and every "
            f"read lists them: `aicf-induct warehouse compact --warehouse {root}` merges "
            f"them, and queries get faster")


@contextmanager
def excluded(root: Path) -> Iterator[bool]:
    """Hold compaction off `root` if none is running: yields whether it is held (False: a
    compaction runs now, or its lock file cannot be made). Not waiting, as `compact` does
    not: the holder must not take long."""
    with ExitStack() as stack:
        try:
            f = stack.enter_context(open(root / LOCK_FILE, "a+b"))
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # BlockingIOError: held by a compaction
            held = False
        else:
            held = True
            stack.callback(fcntl.flock, f.fileno(), fcntl.LOCK_UN)
        yield held


@contextmanager
def _exclusive(root: Path) -> Iterator[None]:
    with open(root / LOCK_FILE, "a+b"):  # made here, so a failure to make it is said as is
        pass
    with excluded(root) as held:
        if not held:
            raise WarehouseError(f"another compaction of {root} is running")
        yield


def compact(root: str | Path, *, grace_s: float = 60.0, small_bytes: int = 32 << 20,
            target_rows: int = 2_000_000, tables: list[str] | None = None,
            progress: Callable[[int], object] | None = None) -> CompactReport:
    """Merge small parts of every partition; collect what earlier compactions superseded.
    `progress(n)`: n more small parts looked at (a progress bar's `update`)."""
    root = check_root(Path(root))
    if not root.is_dir():
        raise WarehouseError(f"no warehouse at {root}")
    report = CompactReport()
    try:
        _compact_all(root, report, grace_s, small_bytes, target_rows, tables,
                     progress or (lambda n: None))
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(err):
            # (pyarrow's write error carries no errno: its text names it) the merged part's
            # temp file is removed; the parts it would have replaced are untouched
            raise WarehouseError(f"warehouse {root}: the disk is full (or over quota); "
                                 "nothing was merged from the part being written") from None
        if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        raise WarehouseError(f"warehouse {root} is not writable: {err.strerror}: "
                             f"{err.filename}") from None
    return report


def _compact_all(root: Path, report: CompactReport, grace_s: float, small_bytes: int,
                 target_rows: int, tables: list[str] | None,
                 progress: Callable[[int], object]) -> None:
    with _exclusive(root):
        for t in tables or tables_on_disk(root):
            report.deleted_files += collect(root, t, grace_s)
            _compact_table(root, t, grace_s, small_bytes, target_rows, report, progress)
            if grace_s == 0:
                report.deleted_files += collect(root, t, 0)
        collect_dead(root)  # leases of writers that died: their runs are abandoned anyway
        report.deleted_files += collect_root_temporaries(root, time.time())


def collect_root_temporaries(root: Path, now: float, stale_s: float = STALE_S) -> int:
    """Delete the warehouse folder's own stale temporaries: a `warehouse rebuild` killed
    outright leaves its catalog's (274 kB, and its .wal), which the tables' sweep never saw."""
    removed = 0
    for pattern in (f"{TMP_PREFIX}*{TMP_SUFFIX}", f"{TMP_PREFIX}*{TMP_SUFFIX}.wal"):
        removed += sum(_unlink(p) for p in root.glob(pattern) if _older(p, now, stale_s))
    return removed


def _compact_table(root: Path, table: str, grace_s: float, small_bytes: int,
                   target_rows: int, report: CompactReport,
                   progress: Callable[[int], object]) -> None:
    tdir = table_dir(root, table)
    by_partition: dict[Path, list[Path]] = {}
    for p in visible_parts(root, table):
        if p.stat().st_size < small_bytes:
            by_partition.setdefault(p.parent, []).append(p)
    for parts in by_partition.values():
        for group in _groups(root, table, parts, target_rows, progress):
            rows = _merge(root, tdir, group)
            if rows is None:
                continue  # a part of the group is damaged: left alone, named on stderr
            report.merged_parts += len(group)
            report.new_parts += 1
            report.rows += rows
            report.per_table[table] = report.per_table.get(table, 0) + len(group)


def _unreadable(root: Path, p: Path, err: Exception) -> None:
    mark_unreadable(p, str(err))
    warn_skipped(root, p, str(err))


def _groups(root: Path, table: str, parts: list[Path], target_rows: int,
            progress: Callable[[int], object]) -> Iterator[list[Path]]:
    """Consecutive runs of parts up to target_rows rows; only groups of two or more."""
    group: list[Path] = []
    rows = 0
    for p in parts:
        progress(1)
        try:
            f = pq.ParquetFile(p)
            n = f.metadata.num_rows
        except (OSError, pa.ArrowException) as err:
            _unreadable(root, p, err)
            continue
        if mismatch(table, f.schema_arrow):
            continue  # another table's file: merged, it could not be quarantined (check)
        if group and rows + n > target_rows:
            if len(group) > 1:
                yield group
            group, rows = [], 0
        group.append(p)
        rows += n
    if len(group) > 1:
        yield group


def _merge(root: Path, tdir: Path, group: list[Path]) -> int | None:
    """Merge `group` into one committed cpart; None (nothing written) if a part fails."""
    tables = []
    for p in group:
        try:
            # checksums verified: a part whose bytes flipped on disk is left for `check` to
            # quarantine, not merged into a new part (which would carry its values as good)
            tables.append(pq.read_table(p, page_checksum_verification=True))
        except (OSError, pa.ArrowException) as err:
            _unreadable(root, p, err)
            return None
    try:
        merged = pa.concat_tables(tables, promote_options="permissive")
    except pa.ArrowException as err:  # extra columns of types no promotion joins (check says)
        print(f"warning: compact left {len(group)} parts of {tdir.name} unmerged: "
              f"{' '.join(str(err).split())} (`aicf-induct warehouse check` names them)",
              file=sys.stderr)
        return None
    cid = uuid.uuid4().hex
    out = group[0].parent / f"cpart-{cid}.parquet"
    atomic_write(out, lambda p: write_parquet(merged, p))
    marker = Marker(cid, _rel(tdir, out), tuple(_rel(tdir, p) for p in group), time.time())
    ensure_dir(tdir / MARKERS)
    atomic_write(tdir / MARKERS / f"{cid}.json", lambda p: _write_bytes(p, marker.to_json()))
    return merged.num_rows


def _write_bytes(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _rel(tdir: Path, p: Path) -> str:
    return p.relative_to(tdir).as_posix()


def collect(root: Path, table: str, grace_s: float, stale_s: float = STALE_S) -> int:
    """Delete what no reader may see any more; returns the number of files removed."""
    tdir = table_dir(root, table)
    now = time.time()
    removed = 0
    dirty: set[Path] = set()
    markers = read_markers(tdir)
    for m in markers.values():
        if now - m.committed_at >= grace_s:
            for rel in m.inputs:
                if _unlink(tdir / rel):
                    removed += 1
                    dirty.add((tdir / rel).parent)
    # a marker keeps its output visible: it goes only once its output and inputs are gone
    for name, m in markers.items():
        gone = not any((tdir / rel).exists() for rel in (m.output, *m.inputs))
        if gone and _unlink(tdir / MARKERS / name):
            dirty.add(tdir / MARKERS)
    outputs = {m.output for m in read_markers(tdir).values()}
    for rel in list_parquet(tdir):
        p = tdir / rel
        if p.name.startswith("cpart-") and rel not in outputs and _older(p, now, stale_s):
            removed += _unlink(p)  # an uncommitted compaction's output
            dirty.add(p.parent)
    for p in stale_temporaries(tdir, now, stale_s):
        removed += _unlink(p)
        dirty.add(p.parent)
    for d in dirty:
        fsync_dir(d)
    return removed


def stale_temporaries(tdir: Path, now: float, stale_s: float) -> list[Path]:
    """Temp files left by writers that died mid-commit (never visible to readers)."""
    out = []
    for d in [tdir, *(p for p in tdir.glob("*") if p.is_dir())]:
        out += [p for p in d.glob(f"{TMP_PREFIX}*{TMP_SUFFIX}") if _older(p, now, stale_s)]
    return out


def _older(p: Path, now: float, age_s: float) -> bool:
    try:
        return now - p.stat().st_mtime >= age_s
    except FileNotFoundError:
        return False


def _unlink(p: Path) -> bool:
    try:
        os.unlink(p)
        return True
    except FileNotFoundError:
        return False
