"""Which visible parts can be read: a cheap Parquet frame check, cached, one warning per file.

A part is committed atomically, so a bad one comes from outside this package (a disk error, a
copy cut short, a file copied in under a part's name). One bad file must not stop every reader, so
readers read only the parts that pass `readable` and say once per process which file they
skipped. The check reads 4 bytes at each end and the footer length (a truncated, empty or
non-Parquet file fails it); it is cached by (file identity, size, mtime), so a process that
reconnects often pays it once per part. A part that passes it but fails later inside DuckDB
or pyarrow (a damaged footer or pages) is reported through `mark_unreadable` and skipped
from then on.
`warehouse check --repair` moves unreadable parts to `<root>/_quarantine/` (see check.py).
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from pathlib import Path

MAGIC = b"PAR1"
MIN_SIZE = 12  # magic + footer length + magic: the smallest frame a Parquet file can have

_lock = threading.Lock()
# (device, inode) -> ((size, mtime_ns), None when readable else the reason); the inode, not
# the path, so that a path spelt through a symlink (DuckDB's) finds the same entry
_verdicts: dict[tuple[int, int], tuple[tuple[int, int], str | None]] = {}
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


def problem_of(path: Path) -> str | None:
    """The cached verdict for `path` (None: readable). FileNotFoundError when it vanished."""
    st = os.stat(path)
    key = _key(st)
    with _lock:
        hit = _verdicts.get(key)
    if hit is not None and hit[0] == _stamp(st):
        return hit[1]
    reason = frame_problem(path)
    with _lock:
        _verdicts[key] = (_stamp(st), reason)
    return reason


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


def readable(root: Path, files: list[Path]) -> list[Path]:
    """`files` without the unreadable ones (warned about once) and those that vanished."""
    out = []
    for p in files:
        try:
            reason = problem_of(p)
        except FileNotFoundError:
            continue  # collected by a compaction after the listing
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
    print(f"warning: warehouse: skipped unreadable part {relative(root, path)}: {reason} "
          "(`aicf-induct warehouse check --repair` moves it to _quarantine/)", file=sys.stderr)


def relative(root: Path, path: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)
