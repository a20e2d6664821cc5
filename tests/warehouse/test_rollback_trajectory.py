"""A rollback that takes a run back names the trajectory it begins (`trajectory` in its
detail), the one the rows after it carry, on each path that logs one: by request, an
instability, the counterfactual guard's control arm. `trajectory_cuts` and the run page's
twin read it, so a fork that rolls back before its first row keeps its path (placed by
order, its rollback began the trajectory after its first row's); a rollback logged before
the field, or with one that is not a number, is still placed by order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import warehouse
from aicf_induct.records import (
    BaseRecorder,
    EventRecord,
    FanoutRecorder,
    Record,
    ResultRecord,
    RunStartRecord,
    StepRecord,
)
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun, FaultInjection
from aicf_induct.runtime.guard import GuardConfig
from aicf_induct.runtime.policies import ProposalPolicy
from aicf_induct.runtime.trainer import TrainConfig
from tests.runtime.test_adaptive_fixtures import prune_at_warmup, toy_graph, toy_problem
from tests.warehouse.test_trajectories import _live, _view_agrees
from warehouse.run_view import rollback_target, run_view

CONFIG = TrainConfig(lr=1e-2, batch_size=32, seed=0)


class _InOrder(BaseRecorder):
    """Every record, in the order the run logged it."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def record(self, rec: Record) -> None:
        self.records.append(rec)


@pytest.mark.parametrize("counterfactual", [True, False])
def test_every_rollback_names_the_trajectory_the_rows_after_it_carry(
        tmp_path: Path, counterfactual: bool) -> None:
    """The guard finds a prune at step 60 harmful at 72 (the counterfactual guard's control
    arm wins, and the run goes on from it; the level guard rolls back to 60), a NaN injected
    at work 110 rolls back to the last good snapshot, and the test takes the run back to its
    snapshot at 120 from 130: three rollbacks, each naming the trajectory (1, 2, 3) that
    every step and result row logged after it, up to the next, carries."""
    problem = toy_problem("classification", n=300, seed=2)
    in_order, wh = _InOrder(), warehouse.open_recorder(tmp_path / "wh")
    adapt = AdaptConfig(steps=180, warmup_steps=60, plateau_patience=2, plateau_min_delta=0.02,
                        guard=GuardConfig(steps=12, counterfactual=counterfactual))
    run = AdaptiveRun(problem, toy_graph(problem), CONFIG, adapt,
                      ProposalPolicy(prune_at_warmup), recorder=FanoutRecorder(wh, in_order),
                      hooks=[FaultInjection(at_work=110, kind="nan")])
    run.start()
    while run.trainer.step_count < 130 or run.rollbacks < 2:
        if run.trainer.step_count == 120 and run.rollbacks == 2:
            snap = run.snapshot()
        run.step()
    run.rollback(snap, "by the test")
    assert run.run().status == "completed"
    wh.close()

    records = in_order.records
    at = [i for i, r in enumerate(records) if isinstance(r, EventRecord) and r.kind == "rollback"]
    rollbacks = [records[i] for i in at]
    arm = "control arm" if counterfactual else None
    assert [(r.name, r.detail.get("to"), r.detail["trajectory"]) for r in rollbacks] == \
        [("guard", arm, 1), ("nan", None, 2), ("requested", None, 3)]
    assert (rollbacks[0].detail["from_step"], rollbacks[0].detail["to_step"]) == \
        (72, 72 if counterfactual else 60)

    def rows(lo: int, hi: int) -> list[int]:
        """The trajectories of the step and result rows logged between two records."""
        return [r.trajectory for r in records[lo + 1:hi]
                if isinstance(r, StepRecord | ResultRecord)]

    for k, (i, rb) in enumerate(zip(at, rollbacks, strict=True)):
        end = at[k + 1] if k + 1 < len(at) else len(records)
        assert rows(i, end) and set(rows(i, end)) == {rb.detail["trajectory"]}
    # the control arm's steps, and its evaluations' results (at their steps, inside the
    # trial), are logged when it wins: after the guard's verdict, before it
    guard = max(j for j in range(at[0]) if getattr(records[j], "kind", None) == "guard")
    between = records[guard + 1:at[0]]
    steps = [r for r in between if isinstance(r, StepRecord)]
    results = [r for r in between if isinstance(r, ResultRecord)]
    assert [(r.step, r.trajectory) for r in steps] == \
        ([(s, 1) for s in range(60, 72)] if counterfactual else [])
    assert all(r.trajectory == 1 and 60 < r.step <= 72 for r in results)
    assert len(results) == (3 * len({r.step for r in results}) if counterfactual else 0)
    assert bool(results) == counterfactual  # the trial holds an evaluation here
    assert set(rows(-1, guard)) == {0}
    conn = warehouse.connect(tmp_path / "wh")
    assert [s for _, s in _live(conn, run.run_id)] == list(range(180))
    _view_agrees(conn, run.run_id)


@pytest.fixture(scope="module")
def forked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A parent steps to 60, rolls back to its snapshot at 30 and steps to 50; its fork,
    from there, rolls back to its own snapshot at 50 before logging any step (the rollback
    begins trajectory 2, the parent's count being 1), then steps 50-119. The parent goes on
    to 120. (root, parent's run id, fork's run id)."""
    root = tmp_path_factory.mktemp("fork") / "wh"
    rec = warehouse.open_recorder(root)
    problem = toy_problem("classification", n=300, seed=2)
    parent = AdaptiveRun(problem, toy_graph(problem), CONFIG, AdaptConfig(steps=120,
                         warmup_steps=0), ProposalPolicy(lambda obs: []), recorder=rec)
    parent.start()
    while parent.trainer.step_count < 60:
        if parent.trainer.step_count == 30:
            at_30 = parent.snapshot()
        parent.step()
    parent.rollback(at_30, "back")
    while parent.trainer.step_count < 50:
        parent.step()
    child = parent.fork()
    child.rollback(child.snapshot(), "at once")
    assert child.run().status == parent.run().status == "completed"
    rec.close()
    return root, parent.run_id, child.run_id


def test_a_fork_that_rolls_back_before_its_first_row_keeps_its_path(
        forked: tuple[Path, str, str]) -> None:
    root, parent, child = forked
    conn = warehouse.connect(root)
    assert conn.execute("SELECT trajectory, min(step), max(step), count(*) FROM steps "
                        "WHERE run_id = ? GROUP BY 1", [child]).fetchall() == [(2, 50, 119, 70)]
    assert _live(conn, child) == [(2, s) for s in range(50, 120)]
    assert conn.execute("SELECT count(*) FROM trajectory_cuts WHERE run_id = ?",
                        [child]).fetchone() == (0,)
    results = conn.execute("SELECT count(*) FROM results WHERE run_id = ?", [child]).fetchone()
    assert conn.execute("SELECT count(*) FROM live_results WHERE run_id = ?",
                        [child]).fetchone() == results != (0,)
    assert _live(conn, parent) == [(0, s) for s in range(30)] + [(1, s) for s in range(30, 120)]
    for run_id in (parent, child):
        _view_agrees(conn, run_id)
    # the fork's events before its rollback are of trajectory 1, of which it logged no row
    view = run_view(conn, child)
    assert view is not None and view.discarded_steps == 0
    (rb,) = [e for e in view.events if e["kind"] == "rollback"]
    assert rb["detail"]["trajectory"] == 2 and rb["loss"] is None
    assert all(e["loss"] is not None for e in view.events if e["kind"] == "trigger")


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _step(run_id: str, step: int, trajectory: int) -> StepRecord:
    return StepRecord(run_id, step, 0, 1.0 / (step + 1), 1.0, 1e-3, 1e-2, 1e-4, 8, trajectory)


def test_a_named_trajectory_wins_over_the_order_and_one_not_a_number_falls_back(
        tmp_path: Path) -> None:
    """Rows and events through the real recorder, as forks of a parent rolled back twice
    log them: rolled back at once to 5 (trajectory 3), steps 5-9, back to 7 (4), steps
    7-8. Named, the path is 5-6 of 3 and 7-8 of 4; placed by order (`old`: no field;
    `garbled`: a field that is not an integer) the first rollback is guessed to begin 4,
    which cuts all of 3 and the second's target all of 4."""
    root = tmp_path / "wh"
    rec = warehouse.open_recorder(root)
    fields = {"named": (3, 4), "old": (None, None), "garbled": ("3", True)}
    for run_id, (first, second) in fields.items():
        rec.run_start(RunStartRecord(run_id, "p", "p", "classification", {}, 0, "cpu", {},
                                     "fork", "parent"))
        named = [{} if t is None else {"trajectory": t} for t in (first, second)]
        rec.event(EventRecord(run_id, 5, "rollback", "requested",
                              {"from_step": 5, "to_step": 5, **named[0]}, at=T0))
        for s in range(5, 10):
            rec.step(_step(run_id, s, 3))
        rec.event(EventRecord(run_id, 7, "rollback", "requested",
                              {"from_step": 10, "to_step": 7, **named[1]},
                              at=T0 + timedelta(seconds=1)))
        for s in (7, 8):
            rec.step(_step(run_id, s, 4))
    rec.close()
    conn = warehouse.connect(root)
    assert _live(conn, "named") == [(3, 5), (3, 6), (4, 7), (4, 8)]
    assert conn.execute("SELECT trajectory, cut FROM trajectory_cuts WHERE run_id = 'named'"
                        ).fetchall() == [(3, 7)]
    for run_id in ("old", "garbled"):
        assert _live(conn, run_id) == []
    for run_id in fields:
        _view_agrees(conn, run_id)


@pytest.mark.parametrize("to_step, cut", [(2, 2), ("2", None), (1.5, None), (2.0, None),
                                          (2**63, None), (True, None)])
def test_the_view_and_its_twin_take_only_a_json_integer_as_a_rollback_s_target(
        tmp_path: Path, to_step: object, cut: int | None) -> None:
    """Steps 0-4, then a rollback naming trajectory 1 and the run ends: with a target it
    cuts trajectory 0 there (a run that ended right after a rollback); a `to_step` that is
    not a JSON integer of BIGINT's range (a string, a fraction the cast would round to 2, a
    whole number written as a float, one past BIGINT, a boolean) is no target, in the
    `trajectory_cuts` view as in `run_view`'s twin: the rollback went nowhere, cut nothing."""
    root = tmp_path / "wh"
    rec = warehouse.open_recorder(root)
    rec.run_start(RunStartRecord("r", "p", "p", "classification", {}, 0, "cpu", {}, "test"))
    for s in range(5):
        rec.step(_step("r", s, 0))
    rec.event(EventRecord("r", 5, "rollback", "requested",
                          {"from_step": 5, "to_step": to_step, "trajectory": 1}, at=T0))
    rec.close()
    conn = warehouse.connect(root)
    assert conn.execute("SELECT trajectory, cut FROM trajectory_cuts").fetchall() == \
        ([] if cut is None else [(0, cut)])
    assert _live(conn, "r") == [(0, s) for s in range(5 if cut is None else cut)]
    view = run_view(conn, "r")
    assert view is not None
    (rb,) = [e for e in view.events if e["kind"] == "rollback"]
    assert rollback_target(rb) == (None if cut is None else to_step)
    _view_agrees(conn, "r")
