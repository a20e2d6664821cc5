"""The run page on runs that drew nothing before, with no note: one step, a loss that is NaN
every other step (a line through isolated points is invisible), a snapshot whose IR cannot
be read."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from aicf_induct.json_values import MAX_DEPTH
from aicf_induct.records import (
    EventRecord,
    RunEndRecord,
    RunStartRecord,
    SnapshotRecord,
    StepRecord,
)
from api.app import create_app
from api.pages.ir_graph import diffs, snapshot_title
from api.pages.run_charts import step_mode
from api.settings import Settings
from tests.api.conftest import serve_in_thread
from tests.warehouse.conftest import problem
from warehouse import WarehouseRecorder


def _started(root: Path, run_id: str, config: dict | None = None) -> WarehouseRecorder:
    """A recorder on `root` that has logged problem p1 and started `run_id` on it."""
    rec = WarehouseRecorder(root)
    p = problem("p1")
    rec.problem(p)
    rec.run_start(RunStartRecord(run_id, p.problem_id, p.name, p.task, config or {}, 0, "cpu",
                                 {}, "test"))
    return rec


def test_isolated_points_are_drawn_as_markers() -> None:
    assert step_mode([0.5]) == "markers"
    assert step_mode([0.5, math.nan, 0.4, math.nan, 0.3]) == "markers"
    assert step_mode([0.5, 0.4, math.nan, 0.3]) == "lines"


def test_an_unreadable_snapshot_says_so_in_its_title_and_diff() -> None:
    good = {"step": 0, "reason": "start", "param_count": 5,
            "ir": {"nodes": [{"id": "x", "op": "input", "inputs": [], "attrs": {}}]}}
    bad = {"step": 7, "reason": "rewrite", "param_count": 9, "ir": "not json"}
    assert snapshot_title(bad, diffs([good, bad])[1]).endswith("its IR cannot be read "
                                                                "(not aicf.ir nodes)")
    assert diffs([good, bad])[1].lines() == [
        "the IR of the snapshot at step 7 cannot be read (not aicf.ir nodes): no diff"]


def test_the_run_page_of_a_one_step_run_with_an_unreadable_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    rec = _started(root, "one")
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
    rec = _started(root, "odd")
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


MALFORMED_NODES = [{"id": [1], "op": "input", "inputs": [], "attrs": {}},
                   {"id": "x", "op": "input", "inputs": 5, "attrs": {}},
                   {"id": "x", "op": "input", "inputs": [[1]], "attrs": {}},
                   {"id": "x", "op": "input", "inputs": [], "attrs": [1, 2]}]


@pytest.mark.parametrize("node", MALFORMED_NODES)
def test_a_snapshot_of_json_but_not_aicf_ir_nodes_is_named_not_a_500(
        tmp_path: Path, node: dict) -> None:
    """IR JSON whose node has a list for an id, an integer or nested list for its inputs,
    a list for its attributes (a remote client's snapshot) made the run page answer 500;
    the page now names the snapshot it cannot read and draws the rest."""
    root = tmp_path / "wh"
    rec = _started(root, "ir")
    good = {"format": "aicf.ir/1",
            "nodes": [{"id": "x", "op": "input", "inputs": [], "attrs": {}}]}
    rec.snapshot(SnapshotRecord("ir", 0, "start", json.dumps(good), "fp", 5, {}))
    bad = {"format": "aicf.ir/1", "nodes": [good["nodes"][0], node]}
    rec.snapshot(SnapshotRecord("ir", 1, "rewrite", json.dumps(bad), "fp2", 9, {}))
    rec.step(StepRecord("ir", 0, 0, 0.7, 0.5, 0.01, 0.1, 1e-3, 16))
    rec.run_end(RunEndRecord("ir", "completed", 1, 0.1))
    rec.close()
    with serve_in_thread(create_app(Settings(warehouse=root))) as client:
        page = client.get("/runs/ir")
    assert page.status_code == 200, page.text[-500:]
    assert "the IR of the snapshot at step 1 cannot be read" in page.text


def _nested(depth: int) -> dict:
    v: dict = {"leaf": 1}
    for _ in range(depth - 1):
        v = {"a": v}
    return v


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 300, 600, 900])
def test_json_nested_past_the_readers_depth_is_passed_on_as_text(
        tmp_path: Path, depth: int) -> None:
    """A config and an event detail nested deeper than `MAX_DEPTH` (JSON allows it; a
    remote client sent them before ingest refused them) made `GET /v1/runs/{id}` and the run
    page answer 500 (serialization depth, RecursionError); they now carry that value as its
    JSON text."""
    root = tmp_path / "wh"
    deep = _nested(depth)
    rec = _started(root, "deep", {"x": deep})
    rec.step(StepRecord("deep", 0, 0, 0.7, 0.5, 0.01, 0.1, 1e-3, 16))
    rec.event(EventRecord("deep", 0, "decision", "none", {"trigger": "plateau", "x": deep},
                          {"val_loss": deep}, {}))
    rec.run_end(RunEndRecord("deep", "completed", 1, 0.1))
    rec.close()
    with serve_in_thread(create_app(Settings(warehouse=root))) as client:
        detail = client.get("/v1/runs/deep")
        page = client.get("/runs/deep")
    assert detail.status_code == 200, detail.text[-500:]
    assert isinstance(detail.json()["config"], str)
    assert json.loads(detail.json()["config"]) == {"x": deep}
    assert page.status_code == 200, page.text[-500:]
    assert "decision" in page.text
