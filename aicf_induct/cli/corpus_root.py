"""The warehouse a command reads a corpus from; kept apart so that `propose`, which never
reads one, does not import the sweep's modules to get it."""

from __future__ import annotations

from pathlib import Path

from aicf_induct.errors import ConfigError


def corpus_root(path: str | None) -> Path:
    """`path`, else $AICF_WAREHOUSE, else ./aicf_warehouse; one that does not exist is an
    error (reading must not create it)."""
    import warehouse

    root = Path(path) if path is not None else warehouse.default_root()
    if not root.is_dir():
        raise ConfigError(f"no warehouse at {root} (build a corpus first: aicf-induct corpus "
                          "build)")
    warehouse.require_warehouse(root)
    return root
