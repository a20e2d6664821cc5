"""Step and result rows say which trajectory they are of (the run's rollbacks before them),
and `live_steps` / `live_results` keep the path a run took: a real adaptive run rolled back
twice, the second time past the first's target, logged into a real warehouse; the same run
ended right after its second rollback (its target cuts, with no row after it); ingest of the
field (sent, absent, negative); rows logged before the column; rollback events that went
nowhere or that a fork counts from its parent's; the run page's twin of the rule agreeing."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import warehouse
from aicf_induct.records import EventRecord, Recorder, ResultRecord, RunStartRecord, StepRecord
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun, StepHook
from aicf_induct.runtime.policies import ProposalPolicy
from aicf_induct.runtime.remote_recorder import record_json
from aicf_induct.runtime.trainer import TrainConfig
from tests.runtime.test_adaptive_fixtures import toy_graph, toy_problem
from warehouse.browse import get_run
from warehouse.ingest import IngestError, steps_table, tables_of
from warehouse.run_view import run_view
from warehouse.writer import Writer

STEPS = 120


def _rolled_back_twice(rec: Recorder, *hooks: StepHook) -> AdaptiveRun:
    """A run that steps to 80, rolls back to its snapshot at 50, steps to 90 and rolls back
    to its snapshot at 30 (of the first trajectory, before the first rollback's target):
    trajectory 0 logs steps 0-79, 1 logs 50-89."""
    problem = toy_problem("classification", n=300, seed=2)
    run = AdaptiveRun(problem, toy_graph(problem), TrainConfig(lr=1e-2, batch_size=32, seed=0),
                      AdaptConfig(steps=STEPS, warmup_steps=0),
                      ProposalPolicy(lambda obs: []), recorder=rec, hooks=hooks)
    snaps = {}
    while run.trainer.step_count < 80:
        if run.trainer.step_count in (30, 50):
            snaps[run.trainer.step_count] = run.snapshot()
        run.step()
    run.rollback(snaps[50], "first")
    while run.trainer.step_count < 90:
        run.step()
    run.rollback(snaps[30], "second")
    return run


@pytest.fixture(scope="module")
def rolled_back(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`_rolled_back_twice`, run to its end: trajectory 2 logs steps 30-119."""
    root = tmp_path_factory.mktemp("traj") / "wh"
    rec = warehouse.open_recorder(root)
    run = _rolled_back_twice(rec)
    assert run.run().status == "completed"
    rec.close()
    return root, run.run_id


class _Fail:
    """A step hook that stops the run before the step after its second rollback."""

    def before_step(self, run: AdaptiveRun, x: np.ndarray,
                    y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if run.rollbacks == 2:
            raise RuntimeError("stopped right after the rollback")
        return x, y


@pytest.fixture(scope="module")
def cut_short(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`_rolled_back_twice`, ended (failed) right after its second rollback, before any
    step of trajectory 2."""
    root = tmp_path_factory.mktemp("traj") / "wh"
    rec = warehouse.open_recorder(root)
    run = _rolled_back_twice(rec, _Fail())
    with pytest.raises(RuntimeError, match="right after the rollback"):
        run.run()
    rec.close()
    return root, run.run_id


def test_each_row_names_its_trajectory_and_live_steps_keep_the_path_taken(
        rolled_back: tuple[Path, str]) -> None:
    root, run_id = rolled_back
    conn = warehouse.connect(root)
    rows = conn.execute("SELECT trajectory, step FROM steps WHERE run_id = ? "
                        "ORDER BY trajectory, step", [run_id]).fetchall()
    assert rows == [(0, s) for s in range(80)] + [(1, s) for s in range(50, 90)] + \
        [(2, s) for s in range(30, STEPS)]
    live = conn.execute("SELECT trajectory, step FROM live_steps WHERE run_id = ? "
                        "ORDER BY step", [run_id]).fetchall()
    assert live == [(0, s) for s in range(30)] + [(2, s) for s in range(30, STEPS)]
    cuts = conn.execute("SELECT trajectory, cut FROM trajectory_cuts WHERE run_id = ? "
                        "ORDER BY 1", [run_id]).fetchall()
    assert cuts == [(0, 30), (1, 30)]
    # the report's losses are the path's; logged_steps counts every row, live_steps the path's
    summary = warehouse.run_report(conn, "run_summary").set_index("run_id").loc[run_id]
    assert summary["logged_steps"] == 80 + 40 + 90
    assert summary["live_steps"] == STEPS
    path = conn.execute("SELECT loss FROM live_steps WHERE run_id = ? ORDER BY step",
                        [run_id]).fetchall()
    assert summary["last_loss"] == path[-1][0]
    assert summary["min_loss"] == min(x for x, in path)


def test_live_results_drop_a_dropped_branch_s_evaluations(
        rolled_back: tuple[Path, str]) -> None:
    root, run_id = rolled_back
    conn = warehouse.connect(root)
    results = conn.execute("SELECT trajectory, step, split, metric FROM results WHERE "
                           "run_id = ?", [run_id]).fetchall()
    assert {t for t, *_ in results} == {0, 1, 2}
    live = set(conn.execute("SELECT trajectory, step, split, metric FROM live_results WHERE "
                            "run_id = ?", [run_id]).fetchall())
    # every result of the path taken, and none of a dropped branch past where it was cut
    assert live == {(t, s, sp, m) for t, s, sp, m in results
                    if t == 2 or (t in (0, 1) and s <= 30)}
    final = [r for r in results if r[1] == STEPS]
    assert final and all(r in live for r in final)


def test_a_record_with_no_rollback_before_it_is_sent_without_the_field() -> None:
    step = StepRecord("r", 3, 0, 0.5, 1.0, 1e-3, 1e-2, 1e-4, 16)
    assert "trajectory" not in record_json(step)  # a service older than the field takes it
    assert record_json(StepRecord("r", 3, 0, 0.5, 1.0, 1e-3, 1e-2, 1e-4, 16, 2))[
        "trajectory"] == 2
    assert "trajectory" not in record_json(ResultRecord("r", 3, 0, "val", "loss", 0.4))


def test_ingest_reads_an_absent_trajectory_as_0_and_refuses_a_negative_one() -> None:
    body = {"run_id": "r", "step": 0, "epoch": 0, "loss": 1.0, "grad_norm": 1.0,
            "update_ratio": 1e-3, "lr": 1e-3, "step_time_s": 1e-3, "batch_size": 8}
    got = tables_of({"steps": [body, {**body, "step": 1, "trajectory": 3}],
                     "results": [{"run_id": "r", "step": 1, "epoch": 0, "split": "val",
                                  "metric": "loss", "value": 0.5}]}, "w")
    assert got["steps"].column("trajectory").to_pylist() == [0, 3]
    assert got["results"].column("trajectory").to_pylist() == [0]
    with pytest.raises(IngestError, match=r"steps\[1\]\.trajectory: negative"):
        tables_of({"steps": [body, {**body, "trajectory": -1}]}, "w")
    arrow = pa.table({k: [v] for k, v in body.items() if k != "run_id"})
    assert steps_table(arrow, "r").column("trajectory").to_pylist() == [0]
    with pytest.raises(IngestError, match=r"steps\[0\]\.trajectory: negative"):
        steps_table(arrow.append_column("trajectory", pa.array([-2])), "r")


def test_rows_logged_before_the_column_read_as_trajectory_0(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    with Writer(root) as w:  # a part without the column, as an older version wrote them
        w.append_batch("steps", pa.table({"run_id": ["old"] * 3, "step": [0, 1, 2],
                                          "loss": [1.0, 0.9, 0.8]}))
    conn = warehouse.connect(root)
    assert conn.execute("SELECT step, trajectory FROM live_steps ORDER BY step").fetchall() == \
        [(0, None), (1, None), (2, None)]
    assert conn.execute("SELECT count(*) FROM trajectory_cuts").fetchone() == (0,)


def test_a_control_arm_s_win_logs_its_steps_and_the_page_shades_the_dropped_arm(
        tmp_path: Path) -> None:
    """The counterfactual guard's control arm beats a harmful prune at step 72 (rewrite at
    60, a guard of 12): the rewritten arm's 60-71 stay under trajectory 0, the control
    arm's are logged under 1, the path taken holds those, and the run page's span is the
    dropped arm's (the rollback event itself is at 72 and 72)."""
    from aicf_induct.runtime.guard import GuardConfig
    from tests.runtime.test_adaptive_fixtures import prune_at_warmup
    from warehouse.run_view import run_view

    problem = toy_problem("classification", n=300, seed=2)
    rec = warehouse.open_recorder(tmp_path / "wh")
    adapt = AdaptConfig(steps=150, warmup_steps=60, plateau_patience=2, plateau_min_delta=0.02,
                        guard=GuardConfig(steps=12, counterfactual=True))
    run = AdaptiveRun(problem, toy_graph(problem), TrainConfig(lr=1e-2, batch_size=32, seed=0),
                      adapt, ProposalPolicy(prune_at_warmup), recorder=rec)
    assert run.run().status == "completed"
    rec.close()
    conn = warehouse.connect(tmp_path / "wh")
    (rb,) = conn.execute("SELECT step FROM events WHERE kind = 'rollback'").fetchall()
    assert rb == (72,)
    assert conn.execute("SELECT min(step), max(step), count(*) FROM steps WHERE trajectory = 1 "
                        "AND step < 72").fetchone() == (60, 71, 12)
    live = conn.execute("SELECT trajectory, step FROM live_steps ORDER BY step").fetchall()
    assert [s for _, s in live] == list(range(150))
    assert {t for t, s in live if 60 <= s < 72} == {1}
    view = run_view(conn, run.run_id)
    assert view is not None and view.rollback_windows == [(60, 72)]
    assert [s.tolist() for s, _ in view.dropped] == [list(range(60, 72))]


def _live(conn: duckdb.DuckDBPyConnection, run_id: str) -> list[tuple[int, int]]:
    return conn.execute("SELECT coalesce(trajectory, 0), step FROM live_steps WHERE run_id = ? "
                        "ORDER BY step, 1", [run_id]).fetchall()


def _view_agrees(conn: duckdb.DuckDBPyConnection, run_id: str) -> None:
    """The run page's curves are `live_steps`, its counts the browse's and the report's."""
    view = run_view(conn, run_id)
    assert view is not None
    steps, loss = view.curves["loss"]
    live = conn.execute("SELECT step, loss FROM live_steps WHERE run_id = ? ORDER BY step",
                        [run_id]).fetchall()
    assert list(zip(steps.tolist(), loss.tolist(), strict=True)) == live
    run = get_run(conn, run_id)
    assert run is not None
    assert (view.logged_steps, view.logged_steps - view.discarded_steps) == \
        (run["logged_steps"], run["live_steps"]) == (view.run["logged_steps"],
                                                     view.run["live_steps"])
    assert run["live_steps"] == len(live)


def test_a_run_that_ends_right_after_a_rollback_drops_the_branch_it_went_back_from(
        cut_short: tuple[Path, str]) -> None:
    root, run_id = cut_short
    conn = warehouse.connect(root)
    assert conn.execute("SELECT status FROM runs").fetchone() == ("failed",)
    rows = conn.execute("SELECT trajectory, step FROM steps ORDER BY trajectory, step").fetchall()
    assert rows == [(0, s) for s in range(80)] + [(1, s) for s in range(50, 90)]
    # the second rollback's target cuts both trajectories, though no row of 2 was logged
    assert conn.execute("SELECT trajectory, cut FROM trajectory_cuts ORDER BY 1").fetchall() \
        == [(0, 30), (1, 30)]
    assert _live(conn, run_id) == [(0, s) for s in range(30)]
    results = conn.execute("SELECT trajectory, step, split, metric FROM results").fetchall()
    live = set(conn.execute("SELECT trajectory, step, split, metric FROM live_results")
               .fetchall())
    assert live == {r for r in results if r[1] <= 30} and len(live) < len(results)
    summary = warehouse.run_report(conn, "run_summary").set_index("run_id").loc[run_id]
    assert (summary["logged_steps"], summary["live_steps"]) == (120, 30)
    _view_agrees(conn, run_id)
    view = run_view(conn, run_id)
    assert view is not None and view.rollback_windows == [(30, 80), (50, 90)]
    assert [s.tolist() for s, _ in view.dropped] == [list(range(30, 80)), list(range(50, 90))]


def _step(run_id: str, step: int, trajectory: int) -> StepRecord:
    return StepRecord(run_id, step, 0, 1.0 / (step + 1), 1.0, 1e-3, 1e-2, 1e-4, 8, trajectory)


def _rollback(run_id: str, step: int, name: str = "nan", **detail: object) -> EventRecord:
    return EventRecord(run_id, step, "rollback", name, {"reason": name, **detail})


def test_rollback_events_cut_only_what_their_run_went_back_from(tmp_path: Path) -> None:
    """Rows and events as the runtime logs them, through the real recorder: a give_up (no
    target) and a rollback of a run logged before the column cut nothing; a run's rollbacks
    count from 0 though it logged no row before the first; a fork's from its first row's
    trajectory (its parent's count)."""
    root = tmp_path / "wh"
    rec = warehouse.open_recorder(root)
    for run_id, parent in (("give-up", None), ("early", None), ("fork", "parent"),
                           ("old", None)):
        rec.run_start(RunStartRecord(run_id, "p", "p", "classification", {}, 0, "cpu", {},
                                     "test", parent))
    for s in range(10):
        rec.step(_step("give-up", s, 0))
    rec.event(_rollback("give-up", 9, "give_up"))  # more than max_rollbacks: the run fails
    # back to its snapshot at 0 before its first step, then on to 6
    rec.event(_rollback("early", 0, from_step=0, to_step=0))
    for s in range(6):
        rec.step(_step("early", s, 1))
    # a fork of a parent rolled back twice: steps 4-9, back to 6, steps 6-7, back to 5, ended
    for s in range(4, 10):
        rec.step(_step("fork", s, 2))
    rec.event(_rollback("fork", 6, from_step=10, to_step=6))
    for s in range(6, 8):
        rec.step(_step("fork", s, 3))
    rec.event(_rollback("fork", 5, from_step=8, to_step=5))
    rec.event(EventRecord("old", 3, "rollback", "nan", {"from_step": 5, "to_step": 3}))
    rec.close()
    with Writer(root) as w:  # a part without the column, as an older version wrote them
        w.append_batch("steps", pa.table({"run_id": ["old"] * 8,
                                          "step": [0, 1, 2, 3, 4, 3, 4, 5],
                                          "loss": [1.0] * 8}))
    conn = warehouse.connect(root)
    assert _live(conn, "give-up") == [(0, s) for s in range(10)]
    assert _live(conn, "early") == [(1, s) for s in range(6)]
    assert _live(conn, "fork") == [(2, 4)]
    assert conn.execute("SELECT trajectory, cut FROM trajectory_cuts WHERE run_id = 'fork' "
                        "ORDER BY 1").fetchall() == [(2, 5), (3, 5)]
    assert [s for _, s in _live(conn, "old")] == [0, 1, 2, 3, 3, 4, 4, 5]
    for run_id in ("give-up", "early", "fork", "old"):
        _view_agrees(conn, run_id)
