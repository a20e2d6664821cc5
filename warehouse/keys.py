"""API keys for the service, stored hashed in one JSON file (by default in the warehouse root,
outside every table directory, so the SQL sandbox cannot read it).

    key = create_key(path, "write")      # shown once; only its SHA-256 is stored
    store = KeyStore(path); store.scope_of(key)  -> "write"
    list_keys(path)                      # id, scope, created_at of each (never the key)
    revoke_key(path, key_id)             # refused from then on, by a running server too

A key is 32 random bytes (URL-safe base64) behind a prefix. Only the SHA-256 of the whole key
is kept: the file leaks nothing a client could present, and a plain hash is enough because the
key is random, not a password. Lookups compare every stored hash in constant time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from aicf_induct.file_lock import acquire, release
from warehouse.errors import WarehouseError
from warehouse.layout import atomic_write, ensure_dir

KEYS_FILE = "_service_keys.json"
PREFIX = "aicf_"
SCOPES = ("read", "write")  # write includes read


def default_path(root: str | Path) -> Path:
    return Path(root) / KEYS_FILE


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _load(path: Path) -> list[dict[str, str]]:
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as err:
        raise WarehouseError(f"key file '{path}' is unreadable: {err}") from None
    keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(keys, list) or not all(
            isinstance(k, dict) and k.get("scope") in SCOPES and isinstance(k.get("sha256"), str)
            for k in keys):
        raise WarehouseError(f"key file '{path}' is not a key list")
    return keys


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the key file's lock: `<file>.lock` beside it (`file_lock`: removed before it is
    released, so nothing is left behind)."""
    lock = path.with_name(path.name + ".lock")
    fd = acquire(lock)
    assert fd is not None  # waited for
    try:
        yield
    finally:
        release(lock, fd)


def _rewrite(path: Path, change: Callable[[list[dict[str, str]]], list[dict[str, str]]]
             ) -> None:
    """The key file replaced by `change` of its keys, atomically and under a lock, so
    concurrent changes keep each other's; owner-only, as it was made. Its directory is made
    if missing (the CLI refuses a missing one first: from a user, it is a typo)."""

    def write(tmp: Path) -> None:
        with open(os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600), "wb") as f:
            f.write(body)

    try:
        ensure_dir(path.parent)
        with _locked(path):
            body = json.dumps({"keys": change(_load(path))}, indent=1).encode()
            atomic_write(path, write)
    except OSError as err:  # named by the file given, not by its lock's or temporary's name
        raise WarehouseError(f"cannot write the key file {path}: "
                             f"{err.strerror or type(err).__name__}") from None


def create_key(path: str | Path, scope: str) -> str:
    """Add a new key with `scope` to the file at `path` and return it (the only time it is
    shown); `list_keys` names it by its id."""
    if scope not in SCOPES:
        raise WarehouseError(f"unknown key scope '{scope}' (scopes: {', '.join(SCOPES)})")
    key = PREFIX + secrets.token_urlsafe(32)
    entry = {"id": secrets.token_hex(4), "scope": scope, "sha256": digest(key),
             "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    _rewrite(Path(path), lambda keys: [*keys, entry])
    return key


def _public(entry: dict[str, str]) -> dict[str, str]:
    """A stored key's id, scope and creation time (the hash stays in the file: it is no key,
    but nothing needs it shown)."""
    return {"id": entry.get("id", ""), "scope": entry["scope"],
            "created_at": entry.get("created_at", "")}


def list_keys(path: str | Path) -> list[dict[str, str]]:
    """Each stored key's `_public` entry, oldest first."""
    return [_public(k) for k in _load(Path(path))]


def id_of(path: str | Path, key: str) -> str | None:
    """The id of the stored key `key`, or None."""
    want = digest(key)
    return next((k.get("id") for k in _load(Path(path)) if hmac.compare_digest(k["sha256"], want)),
                None)


def revoke_key(path: str | Path, key_id: str) -> dict[str, str]:
    """Remove the key with this id (`list_keys`); its entry as `list_keys` gave it. A server
    reading the file refuses the key from its next request on."""
    path = Path(path)
    if not path.is_file():
        raise WarehouseError(f"no key file at {path}: no key to revoke")
    gone: list[dict[str, str]] = []

    def without(keys: list[dict[str, str]]) -> list[dict[str, str]]:
        gone.extend(k for k in keys if k.get("id") == key_id)
        if not gone:
            ids = ", ".join(k.get("id", "?") for k in keys) or "none"
            raise WarehouseError(f"no key with id '{key_id}' in {path} (ids: {ids})")
        return [k for k in keys if k.get("id") != key_id]

    _rewrite(path, without)
    return _public(gone[0])


class KeyStore:
    """The keys in a file, re-read when the file changes (a key created while the server runs
    works at once)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._keys: list[dict[str, str]] = []

    def _current(self) -> list[dict[str, str]]:
        try:
            st = self.path.stat()
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_ino)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                self._keys = _load(self.path) if stamp else []
                self._stamp = stamp
            return self._keys

    def count(self) -> int:
        return len(self._current())

    def scope_of(self, key: str) -> str | None:
        """The key's scope, or None when no stored key matches."""
        want = digest(key)
        found = None
        for k in self._current():  # no early exit: the time does not depend on which matched
            if hmac.compare_digest(k["sha256"], want):
                found = k["scope"]
        return found
