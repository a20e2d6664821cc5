"""An exclusive lock held on a file of its own: flocked, and removed before it is released, so
nothing is left behind. A waiter that then gets the lock of the removed file sees the name gone
(or another file under it) and locks again. The OS releases a lock whose holder dies; a holder
killed outright leaves the file, which locks nothing: the next holder takes it over.

`warehouse/keys.py` (a key file's changes, waiting their turn), `runtime/snapshot.py` (a
checkpoint directory's run, refused while another process goes on with it) and `cache.py` (a
cached value computed once while other processes wait for it) hold theirs so."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def acquire(lock: Path, wait: bool = True, mode: int = 0o600) -> int | None:
    """The open descriptor of `lock`, made if missing (`mode`) and flocked; None when not
    `wait`ing and another process holds it. OSError when it cannot be opened or locked."""
    while True:
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, mode)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            st, now = os.fstat(fd), _identity(lock)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if now == (st.st_dev, st.st_ino):
            return fd
        os.close(fd)  # removed by the holder we waited for: take the lock of the next file


def release(lock: Path, fd: int) -> None:
    """Let go of `lock` (`acquire`'s descriptor): the file removed first, then the lock. A
    file that cannot be removed (its folder no longer writable) stays, locking nothing once
    released, as a killed holder's does: an error here would hide the one being raised, a
    checkpoint's failing write in that same folder."""
    try:
        lock.unlink(missing_ok=True)
    except OSError:
        pass
    finally:
        os.close(fd)  # closing releases the lock


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino
