"""A warehouse with an unreadable part: health says degraded, reads answer 503 problems
naming the part, and nothing is a 500."""

from __future__ import annotations

import shutil
from pathlib import Path

from api.app import create_app
from api.settings import Settings
from tests.api.conftest import serve_in_thread
from tests.api.test_service import problem


def test_an_unreadable_part_is_503_not_500(warehouse_root: tuple[Path, dict],
                                           tmp_path: Path) -> None:
    root = tmp_path / "wh"
    shutil.copytree(warehouse_root[0], root)
    part = sorted((root / "runs").rglob("*.parquet"))[0]
    part.write_bytes(b"not parquet at all")
    with serve_in_thread(create_app(Settings(warehouse=root))) as c:
        health = c.get("/v1/health").json()
        assert health["status"] == "degraded" and health["warehouse"]["readable"] is False
        assert part.name in health["warehouse"]["error"]
        for r in (c.get("/v1/runs"), c.get("/v1/reports/leaderboard"),
                  c.post("/v1/sql", json={"sql": "SELECT 1"})):
            body = problem(r, 503)
            assert body["type"].endswith("warehouse-unavailable") and part.name in body["detail"]
