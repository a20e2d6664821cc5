"""What a path that exists is when it is no regular file to read: a device, a pipe, a socket,
or a kernel file of /proc or /sys (whose size reads 0 though it has content). Reading one as a
table or an IR file waited forever on a pipe, or filled memory from /dev/zero."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def special_file(path: str | Path) -> str | None:
    """What a path is when it exists but is no regular file to read a table from (a device,
    a pipe, a socket, or a kernel file of /proc or /sys, whose size reads 0 though it has
    content); None otherwise."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # missing, unreadable, a NUL in the name: said elsewhere
        return None
    for test, what in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(st.st_mode):
            return what
    if stat.S_ISREG(st.st_mode) and st.st_size == 0:
        try:
            with open(path, "rb") as f:
                content = f.read(1)
        except OSError:
            return None
        if content:
            return "a kernel file whose size reads 0, as those of /proc and /sys"
    return None
