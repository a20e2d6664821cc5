"""Which visible parts can be read: a cheap Parquet frame check and the part's columns against
its table's, cached, one warning per file.

A part is committed atomically, so a bad one comes from outside this package (a disk error, a
copy cut short, a file copied in under a part's name). One bad file must not stop every reader,
nor be read as rows it does not hold, so readers read only the parts that pass `readable` and
say once per process which file they skipped. The check reads 4 bytes at each end and the
footer length (a truncated, empty or non-Parquet file fails it), then the footer's schema (a
part with another table's columns, or a known column of another type, fails it:
`schema.mismatch`); it is cached by (file identity, size, mtime), so a process that
reconnects often pays it once per part. A part that passes it but fails later inside DuckDB
or pyarrow (damaged pages) is reported through `mark_unreadable` and skipped from then on.
`warehouse check --repair` moves such parts to `<root>/_quarantine/` (see check.py).
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.schema import mismatch

MAGIC = b"PAR1"
MIN_SIZE = 12  # magic + footer length + magic: the smallest frame a Parquet file can have

_lock = threading.Lock()
# (device, inode) -> ((size, mtime_ns), None when readable else the reason); the inode, not
# the path, so that a path spelt through a symlink (DuckDB's) finds the same entry
_verdicts: dict[tuple[int, int], tuple[tuple[int, int], str | None]] = {}
# a part's columns as its footer has them, (name, type) in order
Signature = tuple[tuple[str, str], ...]
# (device, inode, table) -> ((size, mtime_ns), None when the columns fit the table else why,
# the part's Signature)
_fits: dict[tuple[int, int, str], tuple[tuple[int, int], str | None, Signature]] = {}
_warned: set[tuple[int, int, int, int]] = set()


def _key(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _stamp(st: os.stat_result) -> tuple[int, int]:
    return st.st_size, st.st_mtime_ns


def frame_problem(path: Path) -> str | None:
    """Why `path` is not a complete Parquet file, or None when its frame looks whole.
    Raises FileNotFoundError when it vanished (a compaction collected it): not damage."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < MIN_SIZE:
            return f"{size} bytes: too small for Parquet"
        head = f.read(4)
        f.seek(size - 8)
        tail = f.read(8)
    if head != MAGIC:
        return "not a Parquet file (no magic bytes at its start)"
    if tail[4:] != MAGIC:
        return "truncated (no Parquet footer at its end)"
    (footer,) = struct.unpack("<i", tail[:4])
    if footer <= 0 or footer > size - MIN_SIZE:
        return f"damaged footer (length {footer} in a file of {size} bytes)"
    return None


def columns_problem(path: Path, table: str) -> tuple[str | None, Signature]:
    """Why the part's columns are not `table`'s (`schema.mismatch`), or why its footer does not
    parse (None when they fit), and its Signature (empty when the footer does not parse).
    Raises FileNotFoundError when it vanished."""
    try:
        schema = pq.read_schema(path)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as err:
        return f"damaged footer: {' '.join(str(err).split()) or type(err).__name__}", ()
    why = mismatch(table, schema)
    return (None if why is None else f"wrong columns: {why}",
            tuple((f.name, str(f.type)) for f in schema))


def _fit(path: Path, table: str, st: os.stat_result) -> tuple[str | None, Signature]:
    # the cached (columns_problem, Signature) of a part whose frame is whole
    key, stamp = _key(st), _stamp(st)
    with _lock:
        fit = _fits.get((*key, table))
    if fit is None or fit[0] != stamp:
        fit = (stamp, *columns_problem(path, table))
        with _lock:
            _fits[(*key, table)] = fit
    return fit[1], fit[2]


def part_columns(path: Path, table: str) -> Signature:
    """The part's columns and their types, as its footer has them; cached with its check, so
    a listed part costs nothing more. Parts of one signature can be read as one file list,
    without DuckDB opening every footer to unify their columns (`catalog.scan_sql`).
    FileNotFoundError when it vanished."""
    return _fit(path, table, os.stat(path))[1]


def problem_of(path: Path, table: str) -> str | None:
    """The cached verdict for `path`, a part of `table` (None: readable, and its columns are
    the table's). FileNotFoundError when it vanished."""
    st = os.stat(path)
    key, stamp = _key(st), _stamp(st)
    with _lock:
        hit = _verdicts.get(key)
    if hit is None or hit[0] != stamp:
        hit = (stamp, frame_problem(path))
        with _lock:
            _verdicts[key] = hit
    if hit[1] is not None:
        return hit[1]
    return _fit(path, table, st)[0]


def mark_unreadable(path: Path, reason: str, reported: bool = False) -> None:
    """A reader failed on `path` although its frame looked whole: skip it from now on.
    reported: the caller names the file itself (`warehouse check`): no warning."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    with _lock:
        _verdicts[_key(st)] = (_stamp(st), reason)
        if reported:
            _warned.add((*_key(st), *_stamp(st)))


class PartVanished(FileNotFoundError):
    """A listed part is gone: a compaction collected it after the listing (its rows are in a
    part that listing does not hold), or `warehouse check --repair` moved it away. The
    listing is stale: list again (`layout.visible_parts` does); skipping the part would
    drop its rows without a word."""


def readable(root: Path, table: str, files: list[Path]) -> list[Path]:
    """`files`, parts of `table`, without the unreadable ones and those whose columns are not
    the table's (each warned about once). PartVanished when one of them is gone."""
    out = []
    for p in files:
        try:
            reason = problem_of(p, table)
        except FileNotFoundError:
            raise PartVanished(2, "listed part vanished (collected after the listing)",
                               str(p)) from None
        if reason is None:
            out.append(p)
        else:
            warn_skipped(root, p, reason)
    return out


def warn_skipped(root: Path, path: Path, reason: str) -> None:
    """One line on stderr per unreadable file (and version of it) per process."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    key = (*_key(st), *_stamp(st))
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    print(f"warning: warehouse: skipped part {relative(root, path)}: {reason} "
          "(`aicf-induct warehouse check --repair` moves it to _quarantine/)", file=sys.stderr)


def relative(root: Path, path: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)
