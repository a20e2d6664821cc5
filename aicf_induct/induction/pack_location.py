"""Where the knowledge pack is: the shipped file, and the variable that names another. In a
module of their own so that a command's `--help` and the service's settings can name them
without loading the pack's reader (and scikit-learn with it)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_PACK = Path(__file__).resolve().parent / "data" / "knowledge_pack.parquet"
PACK_ENV = "AICF_PACK"  # the pack commands read when given none (a grown one, say)
