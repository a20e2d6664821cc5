"""The run page on runs that drew nothing before, with no note: one step, a loss that is NaN
every other step (a line through isolated points is invisible), a snapshot whose IR cannot
be read."""

from __future__ import annotations

import math
from pathlib import Path

from aicf_induct.records import (
    EventRecord,
    RunEndRecord,
    RunStartRecord,
    SnapshotRecord,
    StepRecord,
)
from api.app import create_app
from api.pages.ir_graph import diffs, snapshot_title
from api.pages.run_charts import _step_mode
from api.settings import Settings
from tests.api.conftest import serve_in_thread
from tests.warehouse.conftest import problem
from warehouse import WarehouseRecorder


def test_isolated_points_are_drawn_as_markers() -> None:
    assert _step_mode([0.5]) == "markers"
    assert _step_mode([0.5, math.nan, 0.4, math.nan, 0.3]) == "markers"
    assert _step_mode([0.5, 0.4, math.nan, 0.3]) == "lines"


def test_an_unreadable_snapshot_says_so_in_its_title_and_diff() -> None:
    good = {"step": 0, "reason": "start", "param_count": 5,
            "ir": {"nodes": [{"id": "x", "op": "input", "inputs": [], "attrs": {}}]}}
    bad = {"step": 7, "reason": "rewrite", "param_count": 9, "ir": "not json"}
    assert snapshot_title(bad, diffs([good, bad])[1]).endswith("its IR cannot be read "
                                                                "(no aicf.ir nodes)")
    assert diffs([good, bad])[1].lines() == [
        "the IR of the snapshot at step 7 cannot be read (no aicf.ir nodes): no diff"]


def test_the_run_page_of_a_one_step_run_with_an_unreadable_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    rec = WarehouseRecorder(root)
    p = problem("p1")
    rec.problem(p)
    rec.run_start(RunStartRecord("one", p.problem_id, p.name, p.task, {}, 0, "cpu", {}, "test"))
    rec.snapshot(SnapshotRecord("one", 0, "start", "{not json", "fp", 5, {}))
    rec.step(StepRecord("one", 0, 0, 0.7, 0.5, 0.01, 0.1, 1e-3, 16))
    rec.run_end(RunEndRecord("one", "completed", 1, 0.1))
    rec.close()
    with serve_in_thread(create_app(Settings(warehouse=root))) as client:
        page = client.get("/runs/one")
    assert page.status_code == 200
    assert '"mode": "markers"' in page.text or '"mode":"markers"' in page.text
    assert "its IR cannot be read" in page.text


def test_the_run_page_of_a_run_whose_rollback_names_no_numeric_origin(tmp_path: Path) -> None:
    """A rollback logged through the service with a `from_step` of another type: the page
    draws it, with no rolled-back span (it used to answer 500)."""
    root = tmp_path / "wh"
    rec = WarehouseRecorder(root)
    p = problem("p1")
    rec.problem(p)
    rec.run_start(RunStartRecord("odd", p.problem_id, p.name, p.task, {}, 0, "cpu", {}, "test"))
    for step in range(4):
        rec.step(StepRecord("odd", step, 0, 0.7 - 0.1 * step, 0.5, 0.01, 0.1, 1e-3, 16))
    rec.event(EventRecord("odd", 4, "rollback", "spike",
                          {"to_step": 2, "from_step": "four", "trajectory": 1}, {}, {}))
    rec.step(StepRecord("odd", 2, 0, 0.6, 0.5, 0.01, 0.1, 1e-3, 16, trajectory=1))
    rec.run_end(RunEndRecord("odd", "completed", 3, 0.1))
    rec.close()
    with serve_in_thread(create_app(Settings(warehouse=root))) as client:
        page = client.get("/runs/odd")
    assert page.status_code == 200, page.text[-500:]
    assert "rollback" in page.text
