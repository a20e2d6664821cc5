"""The warehouse a command reads a corpus from; kept apart so that `propose`, which never
reads one, does not import the sweep's modules to get it."""

from __future__ import annotations

from pathlib import Path


def corpus_root(path: str | None) -> Path:
    """`path`, else $AICF_WAREHOUSE, else ./aicf_warehouse; one that does not exist is an
    error (reading must not create it)."""
    import warehouse

    return warehouse.existing_warehouse(path, "build a corpus first: aicf-induct corpus build")
