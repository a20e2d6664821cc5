"""Reads on a kept catalog connection (`warehouse.cached.CachedCatalog`, what the service's
reads use): not rebuilt while nothing changes; new parts (a run logged by another process,
an ingested batch), a compaction and a writer that died are seen by the next read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from api.app import create_app
from api.settings import Settings
from tests.api.conftest import TRAIN, Server, cli, serve_in_thread
from tests.api.test_ingest import RUN
from tests.warehouse.conftest import log_run, problem
from warehouse import WarehouseRecorder, compact
from warehouse.cached import KEPT_VIEWS, MEMORY_ROWS, SETTLE_S, CachedCatalog


def _runs(cat: CachedCatalog) -> list[tuple[str, str]]:
    return cat.read(lambda c: c.execute("SELECT run_id, status FROM runs ORDER BY 1")
                    .fetchall())


@pytest.mark.parametrize("memory_rows", [MEMORY_ROWS, 0], ids=["in-memory", "on-files"])
def test_kept_until_the_parts_or_the_live_writers_change(tmp_path: Path,
                                                         memory_rows: int) -> None:
    import time

    root = tmp_path / "wh"
    rec = WarehouseRecorder(root)
    log_run(rec, "a", problem("p1"), 0.9, "fp", {"depth": 1.0})
    log_run(rec, "open", problem("p1"), 0.8, "fp", {"depth": 1.0}, end=False)
    rec.flush()
    cat = CachedCatalog(root, memory_rows=memory_rows)
    assert _runs(cat) == [("a", "completed"), ("open", "running")]
    time.sleep(SETTLE_S)  # past the coarse clock: the stamp alone is trusted
    for _ in range(5):
        assert _runs(cat) == [("a", "completed"), ("open", "running")]
    assert cat.rebuilds == 1
    log_run(rec, "b", problem("p2"), 0.7, "fp", {"depth": 2.0})
    rec.flush()
    assert [r for r, _ in _runs(cat)] == ["a", "b", "open"]  # at once
    steps = cat.read(lambda c: c.execute("SELECT count(*) FROM steps").fetchone())
    assert steps == (30,)  # each part once
    # new parts are appended to the copies in memory; tables on files are listed again
    assert (cat.rebuilds, cat.appends > 0) == ((1, True) if memory_rows else (2, False))
    rec.close()  # its writer is gone without ending "open"
    before = cat.rebuilds
    assert dict(_runs(cat))["open"] == "abandoned"
    assert cat.rebuilds == before  # the live writers' view replaced, nothing rebuilt
    compact(root, grace_s=0)  # parts merged, inputs collected
    assert [r for r, _ in _runs(cat)] == ["a", "b", "open"]
    assert cat.rebuilds == before + 1


def _views(read: object) -> dict[str, list[tuple]]:
    return {v: read.execute(f"SELECT * FROM {v} ORDER BY ALL").fetchall()  # type: ignore
            for v in (*KEPT_VIEWS, "run_scores")}


def test_the_kept_views_are_the_views_after_every_change(tmp_path: Path) -> None:
    """`runs`, `run_ends`, `problems` and `problem_features` are kept as tables and computed
    again when what they read changes: after each change, every one (and a view over them)
    holds what a fresh connection's views hold."""
    import warehouse

    root = tmp_path / "wh"
    rec = WarehouseRecorder(root)
    cat = CachedCatalog(root)
    log_run(rec, "a", problem("p1", n=1.0), 0.9, "fp", {"depth": 1.0})
    log_run(rec, "open", problem("p1", n=2.0), 0.8, "fp", {"depth": 1.0}, end=False)
    rec.flush()

    def same() -> None:
        assert cat.read(_views) == _views(warehouse.connect(root))

    same()
    log_run(rec, "b", problem("p2", task="regression", n=3.0), 0.7, "fp", {"depth": 2.0})
    log_run(rec, "c", problem("p1", n=4.0), 0.6, "fp", {"depth": 2.0})  # p1 logged again
    rec.flush()
    same()
    assert cat.read(lambda c: c.execute("SELECT count(*) FROM problems").fetchone()) == (2,)
    rec.close()  # "open" is abandoned now: only the live writers changed
    same()
    assert dict(cat.read(lambda c: c.execute("SELECT run_id, status FROM runs")
                         .fetchall()))["open"] == "abandoned"
    compact(root, grace_s=0)
    same()
    assert cat.appends > 0 and cat.rebuilds == 2


def test_the_service_sees_new_runs_at_once(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    cli("train", "--dataset", "iris", "--seed", "1", *TRAIN, "--warehouse", str(root))
    key = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
    app = create_app(Settings(warehouse=root))
    with serve_in_thread(app) as c:
        assert c.get("/v1/runs").json()["total"] == 1
        rebuilt = app.state.warehouse.catalog.rebuilds
        for _ in range(5):
            assert c.get("/v1/runs").json()["total"] == 1
        assert app.state.warehouse.catalog.rebuilds == rebuilt
        auth = {"Authorization": f"Bearer {key}"}
        r = c.post("/v1/ingest/runs", json={"batch_id": "r1", "run": RUN}, headers=auth)
        assert r.status_code == 200, r.text
        assert c.get(f"/v1/runs/{RUN['run_id']}").json()["status"] == "running"
        cli("train", "--dataset", "wine", "--seed", "1", *TRAIN, "--warehouse", str(root))
        page = c.get("/v1/runs").json()
        assert page["total"] == 3 and {r["problem_name"] for r in page["items"]} == {
            "iris", "wine", "toy"}


def test_the_docs_page_loads_only_local_files(server: Server) -> None:
    with server.client() as c:
        page = c.get("/docs")
        assert page.status_code == 200 and "SwaggerUIBundle" in page.text
        urls = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        urls += re.findall(r"""url: ?['"]([^'"]+)['"]""", page.text)
        assert len(urls) >= 4, urls  # script, style, icon, the OpenAPI document
        assert "http" not in page.text.replace("http-equiv", "")
        for url in urls:
            assert url.startswith("/") and not url.startswith("//"), url
            assert c.get(url).status_code == 200, url
