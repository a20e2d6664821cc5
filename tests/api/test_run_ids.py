"""Run ids name runs in URLs (/v1/runs/<id>, the dashboard's /runs/<id>): ingest refuses ids
that a URL cannot carry as one path segment, and the dashboard's links encode what they
carry."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.app import create_app
from api.settings import Settings
from tests.api.conftest import serve_in_thread
from tests.warehouse.conftest import log_run, problem
from warehouse import WarehouseRecorder
from warehouse.keys import create_key

RUN = {"problem_id": "p1", "problem_name": "toy", "task": "regression", "config": {},
       "seed": 0, "device": "cpu", "library_versions": {}, "origin": "api"}


@pytest.mark.parametrize("run_id", ["q?x=1", "h#x", "s/l", "..", "pct%2F", "a b", "",
                                    "-lead", "x" * 201])
def test_ingest_refuses_a_run_id_a_url_cannot_carry(tmp_path: Path, run_id: str) -> None:
    """`s/l` could not be read back through any route, `..` linked to the runs list, `q?x=1`
    and `h#x` to other runs."""
    settings = Settings(warehouse=tmp_path / "wh")
    key = create_key(settings.key_path(), "write")
    with serve_in_thread(create_app(settings)) as client:
        r = client.post("/v1/ingest/runs", headers={"Authorization": f"Bearer {key}"},
                        json={"batch_id": "b1", "run": {**RUN, "run_id": run_id}})
        assert r.status_code == 422, r.text
        assert r.json()["field"] == "body.run.run_id"
        ok = client.post("/v1/ingest/runs", headers={"Authorization": f"Bearer {key}"},
                         json={"batch_id": "b2", "run": {**RUN, "run_id": "r-1.a_B"}})
        assert ok.status_code == 200, ok.text


def test_dashboard_links_encode_the_run_id(tmp_path: Path) -> None:
    """A run of an older warehouse (or a local writer) whose id holds `%`, `?` or `#` linked to
    another run's page."""
    root = tmp_path / "wh"
    rec = WarehouseRecorder(root)
    log_run(rec, "odd%2F?#", problem("p1"), 0.9, "fp", {"depth": 1.0})
    rec.close()
    with serve_in_thread(create_app(Settings(warehouse=root))) as client:
        page = client.get("/")
        assert 'href="/runs/odd%252F%3F%23"' in page.text
        assert client.get("/runs/odd%252F%3F%23").status_code == 200
