"""API keys for the service, stored hashed in one JSON file (by default in the warehouse root,
outside every table directory, so the SQL sandbox cannot read it).

    key = create_key(path, "write")      # shown once; only its SHA-256 is stored
    store = KeyStore(path); store.scope_of(key)  -> "write"

A key is 32 random bytes (URL-safe base64) behind a prefix. Only the SHA-256 of the whole key
is kept: the file leaks nothing a client could present, and a plain hash is enough because the
key is random, not a password. Lookups compare every stored hash in constant time.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import threading
from pathlib import Path

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


def create_key(path: str | Path, scope: str) -> str:
    """Add a new key with `scope` to the file at `path` and return it (the only time it is
    shown). The file is rewritten atomically under a lock, so concurrent creates keep all."""
    if scope not in SCOPES:
        raise WarehouseError(f"unknown key scope '{scope}' (scopes: {', '.join(SCOPES)})")
    path = Path(path)
    ensure_dir(path.parent)
    key = PREFIX + secrets.token_urlsafe(32)
    entry = {"id": secrets.token_hex(4), "scope": scope, "sha256": digest(key),
             "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    lock = path.with_name(path.name + ".lock")
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        keys = [*_load(path), entry]
        body = json.dumps({"keys": keys}, indent=1).encode()

        def write(tmp: Path) -> None:
            with open(os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600), "wb") as f:
                f.write(body)

        atomic_write(path, write)
    finally:
        os.close(fd)  # closing releases the lock
    return key


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
