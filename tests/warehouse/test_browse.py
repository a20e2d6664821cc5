"""warehouse/browse.py: pages of a run's steps are a total order, so that a client paging
through a run whose rollback replayed steps gets every row once; a run's children come in one
query."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from aicf_induct.records import EventRecord, RunEndRecord, RunStartRecord, StepRecord
from tests.warehouse.conftest import log_run, problem
from warehouse import WarehouseRecorder, connect
from warehouse.browse import get_run, list_runs, run_children, run_steps


def test_steps_pages_of_a_run_with_replayed_steps_neither_overlap_nor_skip(
        tmp_path: Path) -> None:
    """Ordered by `step` alone, a rolled-back branch's rows and their replay's (the same step
    numbers) came in an order that changed between pages: paging one row at a time missed
    some rows and repeated others."""
    root = tmp_path / "wh"
    for part in range(3):  # three parts: the rows of one step lie in several files
        rec = WarehouseRecorder(root)
        if part == 0:
            log_run(rec, "rolled", problem("p1"), 0.9, "fp", {"depth": 1.0}, steps=40)
        else:  # a replay of steps 10-39, other values, logged later
            for s in range(10, 40):
                rec.step(StepRecord("rolled", s, 0, 0.3 + part / 10 + s / 1000, 0.4, 0.01,
                                    0.1, 1e-3, 16))
        rec.close()
    conn = connect(root)
    whole, total = run_steps(conn, "rolled", limit=10_000)
    assert total == len(whole) == 100
    for size in (1, 3, 7):
        paged: list[dict] = []
        while len(paged) < total:
            page, _ = run_steps(conn, "rolled", limit=size, offset=len(paged))
            paged += page
        assert paged == whole, size
    assert [r["step"] for r in whole] == sorted(r["step"] for r in whole)


def test_a_page_counts_what_its_filters_match_past_the_end_too(tmp_path: Path) -> None:
    """The total comes with the page's rows (a window), or from a count of its own when the
    page is empty past the start: the same number either way."""
    root = tmp_path / "wh"
    rec = WarehouseRecorder(root)
    for i in range(5):
        log_run(rec, f"r{i}", problem("p1" if i < 3 else "p2"), 0.9, "fp", {"depth": 1.0},
                steps=4, end=i != 4)
    rec.close()
    conn = connect(root)
    for filters, want in (({}, 5), ({"problem": "name-p1"}, 3), ({"status": "completed"}, 4),
                          ({"problem": "nothing"}, 0)):
        for offset in (0, 2, 5, 9):
            page, total = list_runs(conn, limit=2, offset=offset, **filters)
            assert total == want, (filters, offset)
            assert len(page) == max(0, min(2, want - offset))
            assert all("page_total__" not in r for r in page)
    for offset in (0, 3, 4, 50):
        page, total = run_steps(conn, "r0", limit=3, offset=offset)
        assert total == 4 and len(page) == max(0, min(3, 4 - offset))
    assert run_steps(conn, "no such run", limit=3) == ([], 0)


class _Counting:
    """A connection that counts the queries made on it."""

    def __init__(self, conn: duckdb.DuckDBPyConnection) -> None:
        self.conn, self.queries = conn, 0

    def sql(self, *args: Any, **kwargs: Any) -> Any:
        self.queries += 1
        return self.conn.sql(*args, **kwargs)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self.queries += 1
        return self.conn.execute(*args, **kwargs)


def test_a_run_s_children_come_in_one_query_each_at_the_step_it_branched_at(
        tmp_path: Path) -> None:
    """The runs naming it as parent (not their own children), oldest first, each at the
    earlier of its first step row and its `fork start` event (a child that logged no step
    yet has the event alone, one started outside `AdaptiveRun` rows alone; none: neither),
    with its rows on the path it took (a rollback's dropped branch left out): in one query,
    whatever their number."""
    root = tmp_path / "wh"
    rec = WarehouseRecorder(root)
    p1 = problem("p1")
    log_run(rec, "parent", p1, 0.9, "fp", {"depth": 1.0}, steps=10)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def start(run_id: str, parent: str, second: int) -> None:
        rec.run_start(RunStartRecord(run_id, p1.problem_id, p1.name, p1.task, {}, 0, "cpu", {},
                                     "fork", parent, t0 + timedelta(seconds=second)))

    def step(run_id: str, s: int, trajectory: int = 0) -> None:
        rec.step(StepRecord(run_id, s, 0, 0.5, 0.5, 0.01, 0.1, 1e-3, 16, trajectory))

    start("rows", "parent", 1)  # no fork start; steps 4-9, back to 6, steps 6-7 again
    for s in range(4, 10):
        step("rows", s)
    rec.event(EventRecord("rows", 10, "rollback", "requested",
                          {"from_step": 10, "to_step": 6, "trajectory": 1}))
    for s in (6, 7):
        step("rows", s, 1)
    rec.run_end(RunEndRecord("rows", "completed", 8, 0.1))
    start("started", "parent", 3)  # its fork start only: no step logged yet
    rec.event(EventRecord("started", 7, "fork", "start", {"parent_run_id": "parent"}))
    start("both", "parent", 2)  # its rows from 5, its (resumed) fork start logged at 8 too
    rec.event(EventRecord("both", 8, "fork", "start", {"parent_run_id": "parent"}))
    for s in range(5, 9):
        step("both", s)
    rec.run_end(RunEndRecord("both", "failed", 9, 0.1, "boom"))
    start("nothing", "parent", 4)
    start("grandchild", "rows", 5)
    step("grandchild", 8)
    rec.close()
    conn = connect(root)
    counting = _Counting(conn)
    kids = run_children(counting, "parent", count_steps=True)  # type: ignore[arg-type]
    assert counting.queries == 1
    assert kids == [
        {"run_id": "rows", "origin": "fork", "status": "completed", "from_step": 4,
         "live_steps": 4},
        {"run_id": "both", "origin": "fork", "status": "failed", "from_step": 5,
         "live_steps": 4},
        {"run_id": "started", "origin": "fork", "status": "abandoned", "from_step": 7,
         "live_steps": 0},
        {"run_id": "nothing", "origin": "fork", "status": "abandoned", "from_step": None,
         "live_steps": 0}]
    counting.queries = 0
    assert run_children(counting, "parent") == [  # type: ignore[arg-type]
        {k: v for k, v in kid.items() if k != "live_steps"} for kid in kids]
    assert counting.queries == 1
    run = get_run(conn, "parent")
    assert run is not None and run["children"] == run_children(conn, "parent")
    assert run_children(conn, "rows") == [{"run_id": "grandchild", "origin": "fork",
                                           "status": "abandoned", "from_step": 8}]
    assert run_children(conn, "grandchild") == run_children(conn, "no-such-run") == []
    assert "children" not in (get_run(conn, "parent", children=False) or {})
