"""`warehouse rebuild` (catalog.rebuild): stopped part-way, it leaves the old catalog and no
temporary file."""

from __future__ import annotations

from pathlib import Path

import pytest

from warehouse import catalog


def test_an_interrupted_rebuild_leaves_no_temporary(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the views were built (DuckDB's "Query interrupted", or a SIGTERM) left
    `.tmp-<pid>_catalog.duckdb.partial` in the warehouse, one per interrupt, that nothing swept."""
    root = tmp_path / "wh"
    first = catalog.rebuild(root)
    before = first.read_bytes()

    def stopped(conn: object, where: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(catalog, "build_views", stopped)
    with pytest.raises(KeyboardInterrupt):
        catalog.rebuild(root)
    assert first.read_bytes() == before
    assert [p.name for p in root.iterdir() if p.name.startswith(".tmp-")] == []
