"""Claims: processes that share a warehouse split work items so each is done exactly once.

A work item is an opaque key inside a namespace (a sweep's protocol and one of its triples).
Its claims are generations, `<root>/_claims/<namespace>/<key hash>/<generation>.json`:

  * to take a free item a process creates generation 1; to take an item whose holder died
    (its writer's lease is dead, see `lease`), or that ended without being done (say
    `interrupted`), it creates the next generation. Creation is exclusive (a hard link of a
    complete temporary file: exactly one of several racing processes succeeds, and nobody
    ever reads a half-written claim);
  * the holder ends its claim with the item's status (an atomic replace of the same file);
  * the latest generation says the item's state: done (its status is one the caller counts
    as done), held (no status, holder alive), or takeable.

A claim names its holder by writer id, so liveness is the holder's lease: a holder killed
with SIGKILL is dead at once on this host (its pid is gone) and after `LEASE_TIMEOUT_S` on
another. Nothing here knows what the items are.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from warehouse.layout import atomic_write, ensure_dir, fsync_dir, temp_path
from warehouse.lease import writer_alive

CLAIMS = "_claims"


class State(Enum):
    CLAIMED = "claimed"  # the caller holds it now
    DONE = "done"  # ended with a status the caller counts as done
    HELD = "held"  # another live holder has it


@dataclass(frozen=True)
class Claim:
    key: str
    path: Path
    generation: int
    holder: str  # writer id
    status: str | None  # None while held
    previous: dict[str, Any] | None  # the generation this one replaced (None for the first)


def item_dir(root: Path, namespace: str, key: str) -> Path:
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return Path(root) / CLAIMS / namespace / digest


def _latest(d: Path) -> tuple[int, dict[str, Any] | None]:
    try:
        gens = sorted(int(n[:-5]) for n in os.listdir(d)
                      if n.endswith(".json") and n[:-5].isdigit())
    except FileNotFoundError:
        return 0, None
    for g in reversed(gens):
        try:
            return g, json.loads((d / f"{g:08d}.json").read_bytes())
        except (FileNotFoundError, ValueError):
            continue  # never half-written; only a foreign file gets here
    return 0, None


def _create(path: Path, data: dict[str, Any]) -> bool:
    """Create `path` holding `data`, unless it exists: the exclusive step of a claim."""
    tmp = temp_path(path)
    try:  # the write too: a full disk or Ctrl-C in it left the temporary in _claims/
        tmp.write_bytes(json.dumps(data).encode())
        os.link(tmp, path)  # fails if path exists: one winner
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return True


def try_claim(root: Path, namespace: str, key: str, holder: str,
              done: Collection[str]) -> tuple[State, Claim | None]:
    """Take the item `key` for `holder` (a live writer's id) unless it is done or held."""
    d = item_dir(root, namespace, key)
    ensure_dir(d)
    while True:
        gen, latest = _latest(d)
        if latest is not None:
            status = latest.get("status")
            if status in done:
                return State.DONE, None
            if status is None and latest.get("holder") != holder and \
                    writer_alive(root, str(latest.get("holder"))):
                return State.HELD, None
        data = {"key": key, "holder": holder, "status": None, "claimed_at": time.time()}
        path = d / f"{gen + 1:08d}.json"
        if _create(path, data):
            return State.CLAIMED, Claim(key, path, gen + 1, holder, None, latest)
        # another process took this generation first: look again


def end_claim(claim: Claim, status: str) -> None:
    """Record how the claimed item ended; a status the callers count as done closes it."""
    data = {"key": claim.key, "holder": claim.holder, "status": status,
            "ended_at": time.time()}
    atomic_write(claim.path, lambda p: p.write_bytes(json.dumps(data).encode()))
