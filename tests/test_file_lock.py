"""The lock file of `aicf_induct.file_lock`: released whatever happens to its folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aicf_induct.file_lock import acquire, release


def test_a_lock_whose_file_cannot_be_removed_is_still_released(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint folder that became unwritable mid-run: the checkpoint's write failed, and
    the lock's release, failing to remove its file, raised in its place ("ck/.lock: Operation
    not permitted") and left the lock held."""
    lock = tmp_path / ".lock"
    fd = acquire(lock)
    assert fd is not None

    def refused(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError(1, "Operation not permitted", str(self))

    with monkeypatch.context() as m:
        m.setattr(Path, "unlink", refused)
        release(lock, fd)  # no error of its own
    with pytest.raises(OSError):
        os.fstat(fd)  # closed: the lock let go
    again = acquire(lock, wait=False)  # the file left behind locks nothing
    assert again is not None
    release(lock, again)
    assert not lock.exists()
