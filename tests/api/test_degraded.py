"""A warehouse with an unreadable part: every read skips it and answers as usual (the rows of
the other parts), health says degraded and names the part, and nothing is a 500."""

from __future__ import annotations

import shutil
from pathlib import Path

from api.app import create_app
from api.settings import Settings
from tests.api.conftest import serve_in_thread


def test_an_unreadable_part_is_skipped_and_named_by_health(warehouse_root: tuple[Path, dict],
                                                           tmp_path: Path) -> None:
    root = tmp_path / "wh"
    shutil.copytree(warehouse_root[0], root)
    runs = warehouse_root[1]
    parts = sorted((root / "runs").rglob("*.parquet"))
    part = parts[0]
    part.write_bytes(b"not parquet at all")
    with serve_in_thread(create_app(Settings(warehouse=root))) as c:
        health = c.get("/v1/health").json()
        assert health["status"] == "degraded" and health["warehouse"]["readable"] is True
        skipped = health["warehouse"]["skipped_parts"]
        assert len(skipped) == 1 and part.name in skipped[0] and "not a Parquet file" in skipped[0]
        listed = c.get("/v1/runs", params={"limit": 100})
        assert listed.status_code == 200
        ids = {r["run_id"] for r in listed.json()["items"]}
        assert ids < set(runs) and len(ids) == len(runs) - 1  # the damaged part's run only
        assert c.get("/v1/reports/leaderboard").status_code == 200
        sql = c.post("/v1/sql", json={"sql": "SELECT count(*) AS n FROM runs"})
        assert sql.status_code == 200 and sql.json()["rows"] == [[len(runs) - 1]]


def test_a_warehouse_the_server_cannot_write_is_degraded(tmp_path: Path, monkeypatch) -> None:
    """Health said ok for a read-only warehouse while every ingest failed."""
    import os

    root = tmp_path / "wh"
    root.mkdir()
    access = os.access

    def read_only(path: object, mode: int, **kw: object) -> bool:
        return False if Path(str(path)) == root and mode & os.W_OK else access(path, mode)

    monkeypatch.setattr(os, "access", read_only)
    with serve_in_thread(create_app(Settings(warehouse=root))) as c:
        health = c.get("/v1/health").json()
    assert health["status"] == "degraded" and health["warehouse"]["writable"] is False
    assert health["warehouse"]["readable"] is True
