"""Snapshots of a training run, in memory or on disk.

A snapshot holds everything the next step depends on: the graph, every parameter and
buffer, the optimizer state (slots and per-parameter step counts), the step count, the seed
and the data position. RNG state needs nothing more: dropout masks come from a
counter-based generator keyed by (seed, step, node id) and batch order from (seed, epoch),
so step, seed and position reproduce them. `meta` carries the caller's JSON-able state (the
adaptive loop's triggers, guard, policy, learning-rate scale) and `extras` further model
states (the best one so far).

On disk a snapshot is a directory `ckpt-<serial>/` with `arrays.npz` (every array, keys
`a0, a1, ...`) and `snapshot.json` (the canonical IR, the index of the arrays, the rest).
It is written under a temporary name, every file and the directory fsynced, then renamed
into place: a reader, or a run resumed after a crash, sees a whole checkpoint or none. A run
that ended leaves its final state beside its checkpoints as `final/` (`save_final`): not a
checkpoint to resume (the run has ended) but the state a new run branches from (`adapt
--fork`).

The process whose run goes on in a checkpoint directory (a run writing its checkpoints, a
resume) holds it (`hold`: an exclusive flock on `DIR/.lock`): two processes going on with one
run would log its steps twice and collide on its checkpoints' serials.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from aicf_induct import file_lock
from aicf_induct.atomic_file import fsync_dir
from aicf_induct.errors import AicfError
from aicf_induct.interrupts import interrupts_deferred
from aicf_induct.ir.canonical import from_dict, to_dict
from aicf_induct.runtime.model_state import ModelState, capture, graph_size, install

if TYPE_CHECKING:
    from aicf_induct.runtime.trainer import Trainer

FORMAT = "aicf.snapshot/1"
PREFIX = "ckpt-"
FINAL = "final"  # an ended run's final state, beside its checkpoints
LOCK = ".lock"  # flocked by the process whose run goes on in the directory (`hold`)


class SnapshotError(AicfError):
    """A checkpoint that cannot be read or does not fit the run."""


class UnreadableCheckpoint(SnapshotError):
    """A checkpoint whose files are missing, truncated or malformed (an older one may do)."""


class DirectoryBusy(SnapshotError):
    """A checkpoint directory another process holds: its run goes on there."""


# what a damaged checkpoint raises while it is parsed: truncated or empty npz files
# (BadZipFile, EOFError), JSON of the wrong shape (AttributeError, TypeError, KeyError),
# bad numbers (ValueError), a damaged graph (AicfError: invalid IR)
DAMAGE = (OSError, EOFError, ValueError, KeyError, IndexError, TypeError, AttributeError,
          zipfile.BadZipFile, AicfError)


@dataclass
class Snapshot:
    state: ModelState
    step: int  # optimizer steps taken: keys the next step's dropout masks and learning rate
    epoch: int  # data position: the next batch is batch `batch` of epoch `epoch`
    batch: int
    seed: int
    meta: dict[str, Any] = field(default_factory=dict)  # JSON-able caller state
    extras: dict[str, ModelState] = field(default_factory=dict)  # e.g. "best"

    def __repr__(self) -> str:
        # the arrays and the run's state run to hundreds of kB: sizes and names instead
        return (f"Snapshot(step={self.step}, epoch={self.epoch}, batch={self.batch}, "
                f"seed={self.seed}, graph=<{graph_size(self.state.graph)}>, "
                f"meta={sorted(self.meta)}, extras={sorted(self.extras)})")

    @classmethod
    def capture(cls, trainer: Trainer, epoch: int, batch: int,
                meta: dict[str, Any] | None = None) -> Snapshot:
        return cls(capture(trainer), trainer.step_count, epoch, batch, trainer.config.seed,
                   json.loads(json.dumps(meta or {})))  # a private, JSON-checked copy

    def restore(self, trainer: Trainer, compile_batch: int = 0) -> None:
        """Put `trainer` back at this snapshot (its graph, values, optimizer, step)."""
        if trainer.config.seed != self.seed:
            raise SnapshotError(f"snapshot was taken with seed {self.seed}, the trainer has "
                                f"{trainer.config.seed}")
        install(trainer, self.state.copy(), compile_batch)
        trainer.step_count = self.step


# -- disk ------------------------------------------------------------------------------------

def _state_doc(state: ModelState, prefix: str, arrays: dict[str, np.ndarray],
               index: dict[str, list[str]]) -> dict[str, Any]:
    def put(kind: str, name: str, slot: str, arr: np.ndarray) -> None:
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(arr)
        index[key] = [prefix, kind, name, slot]

    for name, arr in state.values.items():
        put("value", name, "", arr)
    opt = None
    if state.optimizer is not None:
        for name, slots in state.optimizer.get("slots", {}).items():
            for slot, arr in slots.items():
                put("slot", name, slot, arr)
        opt = {"kind": state.optimizer["kind"], "config": state.optimizer.get("config", {}),
               "steps": state.optimizer.get("steps", {}),
               "slot_params": list(state.optimizer.get("slots", {}))}
    return {"graph": to_dict(state.graph), "optimizer": opt}


def path_of(directory: str | Path, serial: int) -> Path:
    """Where `save` writes checkpoint `serial` in `directory`."""
    return Path(directory) / f"{PREFIX}{serial:09d}"


def save(snap: Snapshot, directory: str | Path, serial: int) -> Path:
    """Write `snap` atomically as `directory/ckpt-<serial>`; return that path."""
    return _write(snap, path_of(directory, serial))


def save_final(snap: Snapshot, directory: str | Path) -> Path:
    """Write an ended run's final state atomically as `directory/final` (`final_of`), in
    place of the one a run resumed past its end (`--no-log`) left before."""
    return _write(snap, Path(directory) / FINAL, replace=True)


def final_of(directory: str | Path) -> Path | None:
    """The final state an ended run left in `directory`, or None."""
    path = Path(directory) / FINAL
    return path if (path / "snapshot.json").is_file() else None


def _write(snap: Snapshot, final: Path, replace: bool = False) -> Path:
    root = final.parent
    root.mkdir(parents=True, exist_ok=True)
    if final.exists() and not replace:
        raise SnapshotError(f"checkpoint {final} exists already")
    tmp = root / f".tmp-{PREFIX}{final.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        arrays: dict[str, np.ndarray] = {}
        index: dict[str, list[str]] = {}
        doc = {"format": FORMAT, "step": snap.step, "epoch": snap.epoch, "batch": snap.batch,
               "seed": snap.seed, "meta": snap.meta,
               "state": _state_doc(snap.state, "state", arrays, index),
               "extras": {k: _state_doc(s, f"extra:{k}", arrays, index)
                          for k, s in snap.extras.items()},
               "arrays": index}
        with open(tmp / "arrays.npz", "wb") as f:
            cast(Any, np.savez)(f, **arrays)  # numpy's stub types **kwds as allow_pickle
            f.flush()
            os.fsync(f.fileno())
        with open(tmp / "snapshot.json", "w", encoding="utf-8") as f:
            f.write(json.dumps(doc))
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(tmp)
        if final.exists():  # (replace) moved aside first: a directory is not renamed over
            old = root / f".tmp-{PREFIX}old-{uuid.uuid4().hex[:8]}"
            with interrupts_deferred():  # no moment without a checkpoint under `final`
                os.rename(final, old)
                try:
                    os.rename(tmp, final)
                except BaseException:
                    os.rename(old, final)
                    raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, final)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _load_state(doc: dict[str, Any], prefix: str, index: dict[str, list[str]],
                npz: Any) -> ModelState:
    graph = from_dict(doc["graph"])
    values: dict[str, np.ndarray] = {}
    slots: dict[str, dict[str, np.ndarray]] = {}
    for key, (pre, kind, name, slot) in index.items():
        if pre != prefix:
            continue
        if kind == "value":
            values[name] = npz[key]
        else:
            slots.setdefault(name, {})[slot] = npz[key]
    values = {name: values[name] for name in graph.params}  # the graph's order
    opt = None
    if doc["optimizer"] is not None:
        o = doc["optimizer"]
        opt = {"kind": o["kind"], "config": o["config"], "steps": dict(o["steps"]),
               "slots": {name: slots.get(name, {}) for name in o["slot_params"]}}
    state = ModelState(graph, values, opt)
    state.check()
    return state


def load(path: str | Path) -> Snapshot:
    """Read a checkpoint directory written by `save`; `UnreadableCheckpoint` if it is
    damaged, whatever the damage."""
    path = Path(path)
    try:
        doc = json.loads((path / "snapshot.json").read_text(encoding="utf-8"))
        fmt = doc.get("format") if isinstance(doc, dict) else None
        if fmt != FORMAT:
            raise UnreadableCheckpoint(f"cannot read checkpoint {path}: not a snapshot "
                                       f"(format {fmt!r})")
        if not isinstance(doc["meta"], dict):
            raise TypeError(f"meta is {type(doc['meta']).__name__}, not an object")
        with np.load(path / "arrays.npz") as npz:
            index = doc["arrays"]
            state = _load_state(doc["state"], "state", index, npz)
            extras = {k: _load_state(d, f"extra:{k}", index, npz)
                      for k, d in doc["extras"].items()}
        return Snapshot(state, int(doc["step"]), int(doc["epoch"]), int(doc["batch"]),
                        int(doc["seed"]), doc["meta"], extras)
    except UnreadableCheckpoint:
        raise
    except DAMAGE as err:
        raise unreadable(path, err) from None


def unreadable(path: Path, err: BaseException) -> UnreadableCheckpoint:
    """The one-line error for a damaged checkpoint (a KeyError says which key is missing)."""
    why = f"missing {err}" if isinstance(err, KeyError) else str(err) or type(err).__name__
    return UnreadableCheckpoint(f"cannot read checkpoint {path}: {why}")


def read_meta(path: str | Path) -> dict[str, Any]:
    """The caller state of a checkpoint (its `meta`) without its arrays; {} if unreadable."""
    try:
        meta = json.loads((Path(path) / "snapshot.json").read_text(encoding="utf-8"))["meta"]
    except DAMAGE:
        return {}
    return meta if isinstance(meta, dict) else {}


def prepare_dir(directory: str | Path) -> str | None:
    """Create `directory` if need be; why checkpoints cannot be written there, or None.
    (Found before a run starts: the first checkpoint comes after a paid-for interval.)"""
    root = Path(directory)
    if root.exists() and not root.is_dir():
        return "not a directory"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"cannot create it ({err.strerror or err})"
    try:
        probe = root / f".tmp-{PREFIX}probe-{uuid.uuid4().hex[:8]}"
        probe.mkdir()
        probe.rmdir()
    except OSError as err:
        return f"cannot write there ({err.strerror or err})"
    return None


def set_aside(path: Path) -> Path:
    """Rename a damaged checkpoint out of the run's way (kept, no longer a checkpoint: the
    run resumed before it will write its serial again)."""
    aside = path.with_name(f".unreadable-{path.name}-{uuid.uuid4().hex[:8]}")
    os.rename(path, aside)
    return aside


def checkpoints(directory: str | Path) -> list[Path]:
    """Complete checkpoints in `directory`, oldest first (temporary ones are ignored)."""
    root = Path(directory)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir()
                  if p.is_dir() and p.name.startswith(PREFIX) and p.name[len(PREFIX):].isdigit())


def latest(directory: str | Path) -> Path | None:
    found = checkpoints(directory)
    return found[-1] if found else None


def prune(directory: str | Path, keep: int = 2) -> None:
    """Delete all but the newest `keep` checkpoints and any leftover temporary ones."""
    root = Path(directory)
    for p in checkpoints(root)[:-keep] if keep > 0 else checkpoints(root):
        shutil.rmtree(p, ignore_errors=True)
    for p in root.glob(f".tmp-{PREFIX}*"):
        shutil.rmtree(p, ignore_errors=True)


# checkpoint directories this process holds: resolved path -> [lock file's fd, holders]
_HELD: dict[Path, list[int]] = {}


def hold(directory: str | Path) -> Callable[[], None]:
    """Hold `directory` (which exists) for this process's run: an exclusive flock on its
    `.lock` file, which the OS releases if the process dies (no stale lock after a kill).
    `DirectoryBusy` if another process holds it; this process may hold it again (the CLI
    before the run it starts). Returns the release; the last one removes the file.

    The file is removed before its lock is released (`aicf_induct.file_lock`)."""
    key = Path(directory).resolve()
    if key in _HELD:
        _HELD[key][1] += 1
        return _releaser(key)
    path = key / LOCK
    try:
        fd = file_lock.acquire(path, wait=False, mode=0o644)
    except OSError as err:
        raise SnapshotError(f"checkpoint directory {directory}: cannot lock it "
                            f"({err.strerror or err})") from None
    if fd is None:
        try:
            holder = path.read_text(errors="replace").strip()
        except OSError:  # let go of meanwhile
            holder = ""
        pid = f" (pid {holder})" if holder.isdigit() else ""
        raise DirectoryBusy(f"checkpoint directory {directory}: another process{pid} "
                            f"holds it, going on with its run there")
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())  # who holds it, for the refusal
    _HELD[key] = [fd, 1]
    return _releaser(key)


def _releaser(key: Path) -> Callable[[], None]:
    """One holder's release (a second call does nothing)."""
    done = False

    def release() -> None:
        nonlocal done
        held = _HELD.get(key)
        if done or held is None:
            return
        done = True
        held[1] -= 1
        if held[1] == 0:
            del _HELD[key]
            file_lock.release(key / LOCK, held[0])

    return release
