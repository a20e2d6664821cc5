"""Replace a file so that no reader ever sees it half-written: the project's one way to do it.

The new content goes to a temporary sibling, then is renamed over the final name (a rename
within a folder is atomic on POSIX). The temporary name starts with `.` and ends in
`.partial`, so no `*.parquet`/`*.json` glob, nor a dataset reader that skips `.` names, ever
takes it for data, and `warehouse gc` can sweep the ones a crash leaves. It is unique to the
call, so two writers of one file never write into each other's temporary file.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

TMP_PREFIX = ".tmp-"
TMP_SUFFIX = ".partial"


def temp_path(final: Path) -> Path:
    """A temporary sibling of `final`, unique to this call."""
    return final.with_name(f"{TMP_PREFIX}{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
                           f"{TMP_SUFFIX}")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(final: Path, write: Callable[[Path], object], durable: bool = True) -> None:
    """Replace `final` with what `write(tmp)` writes to a temporary path. `durable` fsyncs the
    file before the rename and the folder after it, so the new content survives a crash
    (a cache that can be recomputed skips it). The temporary file is removed on any failure;
    errors are `write`'s own or the OSError of the rename, for the caller to name."""
    tmp = temp_path(final)
    try:
        write(tmp)
        if durable:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(final.parent)
