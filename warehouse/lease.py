"""Writer leases: which writers are alive, so that a run whose writer is gone is seen as such.

Every `Writer` holds a lease, `<root>/_leases/<writer id>.json` (host, boot id, pid and the
pid's start time), from its opening to its `close()`; its flush thread touches the file every
`HEARTBEAT_S`. A lease is *alive* while its file exists, its heartbeat (the file's mtime) is
younger than `LEASE_TIMEOUT_S`, and, when it was taken on this host (same host name and boot),
its process still exists. A writer killed with SIGKILL leaves its lease behind, dead at once
on this host and after the timeout elsewhere. A run logged by a writer that is not alive and
that has no end is *abandoned* (the `runs` view says so); sweep claims use the same rule.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

LEASES = "_leases"
HEARTBEAT_S = 5.0  # how often a writer touches its lease
LEASE_TIMEOUT_S = 60.0  # a lease untouched this long is dead (a writer on another host)


@cache
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _pid_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (tells a reused pid apart), or ""
    where /proc is missing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        raise ProcessLookupError(pid) from None
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


@dataclass(frozen=True)
class Lease:
    writer_id: str
    host: str
    boot_id: str
    pid: int
    pid_start: str
    heartbeat_at: float  # unix time of the last touch (the file's mtime)

    def on_this_host(self) -> bool:
        return self.host == socket.gethostname() and self.boot_id == _boot_id()

    def alive(self, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        if now - self.heartbeat_at > LEASE_TIMEOUT_S:
            return False
        return not self.on_this_host() or process_alive(self.pid, self.pid_start)


def process_alive(pid: int, start: str) -> bool:
    """Whether process `pid`, started at `start` (see `_pid_start`), still runs here."""
    try:
        now_start = _pid_start(pid)
        if not now_start:
            os.kill(pid, 0)  # no /proc: existence only
            return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, another user's
    if not start or now_start != start:
        return False  # the pid now names another process
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited


def lease_path(root: Path, writer_id: str) -> Path:
    return Path(root) / LEASES / f"{writer_id}.json"


def describe_self(writer_id: str) -> dict[str, object]:
    pid = os.getpid()
    return {"writer_id": writer_id, "host": socket.gethostname(), "boot_id": _boot_id(),
            "pid": pid, "pid_start": _pid_start(pid), "taken_at": time.time()}


def _parse(path: Path) -> Lease | None:
    try:
        st = path.stat()
        d = json.loads(path.read_bytes())
        return Lease(str(d["writer_id"]), str(d["host"]), str(d["boot_id"]), int(d["pid"]),
                     str(d["pid_start"]), st.st_mtime)
    except FileNotFoundError:
        return None  # released meanwhile
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not a lease we wrote: no writer holds it


def read_lease(root: Path, writer_id: str) -> Lease | None:
    return _parse(lease_path(root, writer_id))


def read_leases(root: Path) -> dict[str, Lease]:
    out: dict[str, Lease] = {}
    try:
        names = sorted(os.listdir(Path(root) / LEASES))
    except FileNotFoundError:
        return out
    for n in names:
        if n.endswith(".json") and not n.startswith("."):
            lease = _parse(Path(root) / LEASES / n)
            if lease is not None:
                out[lease.writer_id] = lease
    return out


def live_writers(root: Path) -> set[str]:
    now = time.time()
    return {w for w, lease in read_leases(root).items() if lease.alive(now)}


def writer_alive(root: Path, writer_id: str) -> bool:
    lease = read_lease(root, writer_id)
    return lease is not None and lease.alive()


def collect_dead(root: Path) -> int:
    """Delete dead writers' leases (their runs stay abandoned: no lease is as dead as a dead
    one); returns how many."""
    now = time.time()
    n = 0
    for w, lease in read_leases(root).items():
        if not lease.alive(now):
            try:
                lease_path(root, w).unlink()
                n += 1
            except FileNotFoundError:
                pass
    return n
