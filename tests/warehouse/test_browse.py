"""warehouse/browse.py: pages of a run's steps are a total order, so that a client paging
through a run whose rollback replayed steps gets every row once."""

from __future__ import annotations

from pathlib import Path

from aicf_induct.records import StepRecord
from tests.warehouse.conftest import log_run, problem
from warehouse import WarehouseRecorder, connect
from warehouse.browse import list_runs, run_steps


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
