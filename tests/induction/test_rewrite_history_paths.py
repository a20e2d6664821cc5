"""The rewrite history reads each decision on the path its run had taken, its trajectories
started as the warehouse's views start them (`warehouse.run_view.rollback_starts`): at a
rollback's target even when no row of the trajectory follows (a rollback directly followed
by another), and at the trajectory a rollback names (a fork that rolled back before its
first row). A warehouse logged before the `trajectory` column reads as one path, as it did.
Rows and events are written through the real recorder (and `Writer`, for parts without the
column) and read back by `load_rewrite_history` over DuckDB."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import warehouse
from aicf_induct.induction.rewrite_history import load_rewrite_history
from aicf_induct.records import EventRecord, ResultRecord, RunStartRecord, StepRecord
from warehouse.writer import Writer

T0 = datetime(2026, 1, 1, tzinfo=UTC)
K = 10  # the runs' guard window: a control's outcome is the first val loss at step + K


def _start(rec: warehouse.WarehouseRecorder, run_id: str, parent: str | None = None) -> None:
    rec.run_start(RunStartRecord(run_id, "p", "prob", "regression",
                                 {"adapt": {"guard": {"steps": K}}}, 0, "cpu", {},
                                 "fork" if parent else "adapt", parent))


def _steps(rec: warehouse.WarehouseRecorder, run_id: str, steps: range, trajectory: int,
           grad: float) -> None:
    for s in steps:
        rec.step(StepRecord(run_id, s, 0, 1.0, grad, 1e-3, 1e-2, 1e-4, 8, trajectory))


def _val(rec: warehouse.WarehouseRecorder, run_id: str, step: int, value: float,
         trajectory: int) -> None:
    rec.result(ResultRecord(run_id, step, 0, "val", "loss", value, trajectory=trajectory))


def _event(rec: warehouse.WarehouseRecorder, run_id: str, n: int, step: int, kind: str,
           name: str, **detail: object) -> None:
    """The n-th event of the run (its time orders it)."""
    before = {"val_loss": 1.0} if kind == "decision" else {}
    rec.event(EventRecord(run_id, step, kind, name, {"trigger": "plateau", **detail}, before,
                          at=T0 + timedelta(seconds=n)))


def _assert_history(root: Path, run_id: str, expected: dict[int, tuple[float, float]]) -> None:
    """The run's decisions in the history are at `expected`'s steps, with its (grad_norm,
    effect)."""
    h = load_rewrite_history(root)
    got = {int(s): (float(g), float(e)) for s, g, e in
           h.loc[h["run_id"] == run_id, ["step", "grad_norm", "effect"]].itertuples(index=False)}
    assert sorted(got) == sorted(expected)
    for step, want in expected.items():
        assert got[step] == pytest.approx(want), step


def test_a_decision_between_two_rollbacks_reads_no_row_of_the_branch_dropped(
        tmp_path: Path) -> None:
    """Steps 0-79; at 80 a NaN rolls back to 50 (trajectory 1) and a `none` decision is
    taken there; before any step a rollback by request goes back to 30 (2); steps 30-119,
    a `none` at 60. The decision at 50 was made on a path cut at 50: the dropped branch's
    validation loss at 70 (2.0) is not what came of it, and it had no K steps of its own:
    left out. The one at 60 reads trajectory 2 (grad 1.0, 0.5 at 70); the one at 40, the
    first path (0.9 at 50)."""
    root = tmp_path / "wh"
    rec = warehouse.open_recorder(root)
    _start(rec, "r")
    _steps(rec, "r", range(80), 0, 100.0)
    _val(rec, "r", 50, 0.9, 0)
    _val(rec, "r", 70, 2.0, 0)
    _event(rec, "r", 0, 40, "decision", "none")
    _event(rec, "r", 1, 50, "rollback", "nan", from_step=80, to_step=50, trajectory=1)
    _event(rec, "r", 2, 50, "decision", "none")
    _event(rec, "r", 3, 30, "rollback", "requested", from_step=50, to_step=30, trajectory=2)
    _event(rec, "r", 4, 60, "decision", "none")
    _steps(rec, "r", range(30, 120), 2, 1.0)
    _val(rec, "r", 70, 0.5, 2)
    rec.close()
    _assert_history(root, "r", {40: (100.0, 0.1), 60: (1.0, 0.5)})


def test_a_fork_s_decision_reads_the_trajectory_its_rollback_named(tmp_path: Path) -> None:
    """A fork (of a parent that never rolled back) rolls back to 20 before its first row,
    beginning trajectory 1; steps 20-59, a `none` decision at 45; back to 40 (2), steps
    40-99. The decision is of trajectory 1: its grad norm is of 1's steps 35-44 (100.0) and
    its outcome 1's loss at 55 (0.8), not the replay's (1.0, 0.6): placed by order, the
    fork's count starting at its first row's, the first rollback would begin 2."""
    root = tmp_path / "wh"
    rec = warehouse.open_recorder(root)
    _start(rec, "fork", parent="parent")
    _event(rec, "fork", 0, 20, "fork", "start", parent_run_id="parent")
    _event(rec, "fork", 1, 20, "rollback", "requested", from_step=20, to_step=20,
           trajectory=1)
    _steps(rec, "fork", range(20, 60), 1, 100.0)
    _event(rec, "fork", 2, 45, "decision", "none")
    _val(rec, "fork", 55, 0.8, 1)
    _event(rec, "fork", 3, 40, "rollback", "requested", from_step=60, to_step=40,
           trajectory=2)
    _steps(rec, "fork", range(40, 100), 2, 1.0)
    _val(rec, "fork", 55, 0.6, 2)
    rec.close()
    _assert_history(root, "fork", {45: (100.0, 0.2)})


def test_a_warehouse_logged_before_the_trajectory_column_reads_as_one_path(
        tmp_path: Path) -> None:
    """Parts without the column (as versions before it wrote them), and a rollback event
    with its target, as every version logged it: the rollback cuts nothing, and a decision
    after it reads the rows of both branches at its steps, as the history always read such
    a warehouse (what the shipped pack's rewrite table was built from)."""
    root = tmp_path / "wh"
    rec = warehouse.open_recorder(root)
    _start(rec, "old")
    _event(rec, "old", 0, 40, "decision", "none")
    _event(rec, "old", 1, 50, "rollback", "nan", from_step=80, to_step=50)
    _event(rec, "old", 2, 60, "decision", "none")
    rec.close()
    steps = [*range(80), *range(50, 120)]
    with Writer(root) as w:
        w.append_batch("steps", pa.table({
            "run_id": ["old"] * len(steps), "step": steps, "epoch": [0] * len(steps),
            "loss": [1.0] * len(steps), "grad_norm": [100.0] * 80 + [1.0] * 70,
            "update_ratio": [1e-3] * len(steps)}))
        w.append_batch("results", pa.table({
            "run_id": ["old"] * 3, "step": [50, 70, 75], "epoch": [0] * 3,
            "split": ["val"] * 3, "metric": ["loss"] * 3, "value": [0.9, 2.0, 0.5],
            "final": [False] * 3}))
    conn = warehouse.connect(root)
    assert conn.execute("SELECT count(*) FROM steps WHERE trajectory IS NULL").fetchone() == \
        (len(steps),)
    # 60: steps 50-59 of both branches; its outcome the first loss at 70 or later, 2.0
    _assert_history(root, "old", {40: (100.0, 0.1), 60: ((100.0 + 1.0) / 2, -1.0)})


def test_rows_of_the_wrong_type_are_left_out_not_raised(tmp_path: Path) -> None:
    """The service ingests what remote clients send: a guard whose `rewrite_step` is a
    string, a float or a bool judges no rewrite (once one made `POST /v1/rewrites` answer
    500 to every client), and metrics that are not numbers read as missing. The rewrite at
    20 is judged by the one well-formed guard (effect (1.0 - 0.5) / 1.0); the one at 40 by
    none (left out); the control at 10 reads a metrics `val_loss` of "1.0": no effect."""
    root = tmp_path / "wh"
    rec = warehouse.open_recorder(root)
    _start(rec, "r")
    _steps(rec, "r", range(80), 0, 1.0)
    _val(rec, "r", 20, 0.8, 0)
    rec.event(EventRecord("r", 10, "decision", "none", {"trigger": "plateau"},
                          {"val_loss": "1.0"}, at=T0))
    _event(rec, "r", 1, 20, "decision", "widen", site="h", options=[1, 2])
    _event(rec, "r", 2, 30, "guard", "widen", rewrite_step="20", val_before=1.0,
           val_after=0.1, verdict="keep")
    _event(rec, "r", 3, 30, "guard", "widen", rewrite_step=20.0, val_before=1.0,
           val_after=0.2, verdict="keep")
    _event(rec, "r", 4, 30, "guard", "widen", rewrite_step=True, val_before=1.0,
           val_after=0.3, verdict="keep")
    _event(rec, "r", 5, 30, "guard", "widen", rewrite_step=20, val_before=1.0,
           val_after=0.5, verdict="keep")
    _event(rec, "r", 6, 40, "decision", "widen", site="h")
    _event(rec, "r", 7, 50, "guard", "widen", rewrite_step="abc", val_before="1",
           val_after=0.5, verdict="keep")
    rec.close()
    h = load_rewrite_history(root)
    assert h["step"].tolist() == [20]
    assert h["effect"].tolist() == [pytest.approx(0.5)]


def test_a_decision_reads_the_window_before_it_and_the_first_loss_after_k_steps(
        tmp_path: Path) -> None:
    """The windows are read by binary search in step order (a mask over the whole run per
    decision was quadratic in a long run's decisions): the grad norm is the mean over
    steps [s - K, s) that are not NaN, the effect the first validation loss at or past
    s + K, however many decisions and rows come before and after."""
    root = tmp_path / "wh"
    rec = warehouse.open_recorder(root)
    _start(rec, "w")
    for s in range(300):  # grad norm = the step, NaN at each step 5 past a multiple of 50
        rec.step(StepRecord("w", s, 0, 1.0, math.nan if s % 50 == 5 else float(s), 1e-3,
                            1e-2, 1e-4, 8, 0))
    for s in range(0, 300, 7):
        _val(rec, "w", s, 1.0 - s / 1000, 0)
    for n, s in enumerate(range(20, 280, 20)):
        _event(rec, "w", n, s, "decision", "none")
    rec.close()
    expected = {}
    for s in range(20, 280, 20):
        window = [float(t) for t in range(s - K, s) if t % 50 != 5]
        first = next(t for t in range(s + K, 300) if t % 7 == 0)
        expected[s] = (sum(window) / len(window), 1.0 - (1.0 - first / 1000))
    _assert_history(root, "w", expected)
