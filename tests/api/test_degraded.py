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


def test_a_full_disk_is_a_503_a_client_retries_and_a_gone_client_one_log_line(
        tmp_path: Path, monkeypatch, caplog) -> None:
    """A full disk answered ingest with a generic 500 (not retried: the batch dropped) and
    two tracebacks per request; a client that went away mid-upload, two more."""
    import errno
    import logging

    from starlette.requests import ClientDisconnect

    import warehouse.ingest as ingest
    from warehouse.keys import create_key

    def full(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ingest, "write_parquet", full)
    settings = Settings(warehouse=tmp_path / "wh")
    key = create_key(settings.key_path(), "write")
    app = create_app(settings)

    @app.post("/gone")
    def gone() -> None:
        raise ClientDisconnect()

    from tests.api.test_ingest import RUN

    batch = {"batch_id": "b1", "runs": [{**RUN, "run_id": "r"}],
             "run_ends": [{"run_id": "r", "status": "completed", "steps": 1,
                           "wall_time_s": 1.0}]}
    with caplog.at_level(logging.INFO, logger="api"), serve_in_thread(app) as c:
        r = c.post("/v1/ingest/batches", json=batch, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 503 and r.json()["type"].endswith(":warehouse-full"), r.text
        assert c.post("/gone").status_code == 400
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert any("client went away during POST /gone" in rec.getMessage()
               for rec in caplog.records)
