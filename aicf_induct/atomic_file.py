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
from collections.abc import Callable, Sequence
from pathlib import Path

from aicf_induct.interrupts import interrupts_deferred

TMP_PREFIX = ".tmp-"
TMP_SUFFIX = ".partial"


NAME_MAX = 255  # bytes of a file name on the file systems we write to


def temp_path(final: Path) -> Path:
    """A temporary sibling of `final`, unique to this call; `final`'s name is cut short in
    it where the whole would pass NAME_MAX (a legal 250-byte name must stay writable)."""
    tail = f"-{os.getpid()}-{uuid.uuid4().hex[:8]}{TMP_SUFFIX}"
    room = NAME_MAX - len(TMP_PREFIX.encode()) - len(tail.encode())
    name = final.name.encode()[:room].decode(errors="ignore")
    return final.with_name(f"{TMP_PREFIX}{name}{tail}")


def unwritable(path: str | os.PathLike[str]) -> str | None:
    """Why a file cannot be written at `path` as `atomic_write` writes one (a temporary
    sibling renamed into place), or None: said before the work whose result it is, not
    after. A probe file is made and removed in the folder: `os.access` says yes to root for
    folders no one may write in (/proc)."""
    text = os.fspath(path)
    if not text:
        return "empty file name"
    folder = os.path.dirname(os.path.abspath(text))
    if os.path.isdir(text):
        return "is a folder, not a file"
    if os.path.exists(text) and not os.path.isfile(text):  # a device, a pipe: written in place
        return None if os.access(text, os.W_OK) else "cannot write it"
    if not os.path.exists(folder):  # said of a file on the way (a/x.png, a a file) too
        above = next((p for p in _parents(folder) if os.path.exists(p)), None)
        if above is not None and not os.path.isdir(above):
            return f"{above} is a file, not a folder"
        return f"the folder {folder} does not exist"
    if not os.path.isdir(folder):
        return f"{folder} is a file, not a folder"
    if len(os.path.basename(text).encode()) > NAME_MAX:
        return f"the file name is longer than {NAME_MAX} bytes"
    probe = temp_path(Path(folder) / os.path.basename(text))
    try:
        probe.touch(exist_ok=False)
        probe.unlink()
    except OSError as err:
        return f"cannot write in the folder {folder} ({err.strerror or err})"
    return None


def _parents(path: str) -> list[str]:
    """`path` and the folders above it, nearest first."""
    out = [path]
    while os.path.dirname(out[-1]) != out[-1]:
        out.append(os.path.dirname(out[-1]))
    return out


def fsync_path(path: Path) -> None:
    """fsync a file or a folder (a folder's entries: after a rename into it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


fsync_dir = fsync_path  # the name its callers know it by, for a folder


def atomic_write(final: Path, write: Callable[[Path], object], durable: bool = True) -> None:
    """Replace `final` with what `write(tmp)` writes to a temporary path. `durable` fsyncs the
    file before the rename and the folder after it, so the new content survives a crash
    (a cache that can be recomputed skips it). The temporary file is removed on any failure;
    errors are `write`'s own or the OSError of the rename, for the caller to name."""
    tmp = temp_path(final)
    try:
        write(tmp)
        if durable:
            fsync_path(tmp)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(final.parent)


def write_output(final: Path, write: Callable[[Path], object], durable: bool = True) -> None:
    """`atomic_write`, but where `final` is a device or a pipe (/dev/stdout, a FIFO), written
    in place: a rename would put a regular file where it was (as root, even /dev/full)."""
    if _in_place(final):
        write(final)
    else:
        atomic_write(final, write, durable)


def _in_place(final: Path) -> bool:
    """A device or a pipe, written where it is: no temporary is renamed over it."""
    return final.exists() and not final.is_file()


def atomic_write_all(files: Sequence[tuple[Path, Callable[[Path], object]]]) -> None:
    """Replace several files together (a pack and its provenance, an IR and its values): each
    `write(tmp)` to its own temporary file, then every temporary renamed into place, Ctrl-C
    and SIGTERM held until the renames are done. A rename that fails puts back the files
    renamed before it, so the set is all new or all old, never a new file beside an old one
    it must match. A device or a pipe among them is written in place (`write_output`).
    Durable as `atomic_write`; errors are `write`'s or the rename's."""
    renamed: list[tuple[Path, Path]] = []  # (temporary, final)
    try:
        for final, write in files:
            if _in_place(final):
                write(final)
                continue
            renamed.append((temp_path(final), final))
            write(renamed[-1][0])
            fsync_path(renamed[-1][0])
        with interrupts_deferred():
            _replace_all(renamed)
    finally:
        for tmp, _ in renamed:
            tmp.unlink(missing_ok=True)
    for folder in dict.fromkeys(final.parent for _, final in renamed):
        fsync_dir(folder)


def _replace_all(pairs: list[tuple[Path, Path]]) -> None:
    """Each temporary renamed over its final name; on a failure, those done are undone: each
    file replaced comes back from a hard link kept of it, each file new is removed (one whose
    file system takes no hard link stays replaced: the best that can be done there)."""
    done: list[tuple[Path, Path | None, bool]] = []  # (final, link to its old content, new)
    kept: list[Path] = []
    try:
        for tmp, final in pairs:
            old, new = None, not final.exists()
            if final.is_file():
                old = temp_path(final)
                try:
                    os.link(final, old)
                    kept.append(old)
                except OSError:
                    old = None
            os.replace(tmp, final)
            done.append((final, old, new))
    except BaseException:
        for final, old, new in reversed(done):
            if old is not None:
                os.replace(old, final)
            elif new:
                final.unlink(missing_ok=True)
        raise
    finally:
        for old in kept:
            old.unlink(missing_ok=True)
