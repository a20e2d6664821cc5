"""The adaptive loop: rewrites logged with metrics and IR snapshots, injected NaN and loss
spikes rolled back with the run completing, harmful rewrites rolled back and blacklisted,
forks as child runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun, FaultInjection
from aicf_induct.runtime.guard import GuardConfig
from aicf_induct.runtime.policies import Proposal, ProposalPolicy, RuleBasedPolicy, RuleConfig
from aicf_induct.runtime.trainer import TrainConfig
from tests.runtime.test_adaptive_fixtures import (
    prune_at_warmup,
    toy_graph,
    toy_problem,
    until_the_control_arm_wins,
)

CONFIG = TrainConfig(lr=1e-2, batch_size=32, seed=0)
GROWING = RuleBasedPolicy(RuleConfig(gap_tolerance=0.5))  # the toy data's gap is noisy


def _adapt(**kw: object) -> AdaptConfig:
    base = {"steps": 240, "warmup_steps": 12, "plateau_patience": 2,
            "plateau_min_delta": 0.02, "guard": GuardConfig(steps=12, blacklist_steps=1000)}
    return AdaptConfig(**{**base, **kw})  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def problem():  # type: ignore[no-untyped-def]
    return toy_problem("classification", n=300, seed=2)


def _kinds(rec: MemoryRecorder) -> list[str]:
    return [e.kind for e in rec.events]


def test_rule_policy_grows_a_small_model_and_logs_every_step_of_it(problem) -> None:
    rec = MemoryRecorder()
    run = AdaptiveRun(problem, toy_graph(problem, "mlp:depth=1,width=2"), CONFIG, _adapt(),
                      GROWING, recorder=rec)
    res = run.run()
    assert res.status == "completed" and res.steps == 240
    rewrites = [e for e in rec.events if e.kind == "rewrite"]
    assert rewrites and rewrites[0].name == "widen"
    for kind in ("trigger", "decision", "rewrite", "guard"):
        assert kind in _kinds(rec)
    for e in rewrites:
        assert {"val_loss", "train_loss", "param_count"} <= set(e.metrics_before)
        if e.name == "widen":
            assert e.metrics_after["param_count"] > e.metrics_before["param_count"]
        assert e.detail["pause_ms"] > 0 and e.detail["fingerprint_before"] != \
            e.detail["fingerprint_after"]
    reasons = [s.reason for s in rec.snapshots]
    assert reasons[0] == "start" and reasons[-1] == "final"
    assert reasons.count("rewrite") == len(rewrites)
    assert res.graph.param_count() > toy_graph(problem, "mlp:depth=1,width=2").param_count()
    assert len(res.pause_ms) == res.rewrites == len(rewrites)
    assert rec.run_ends[-1].status == "completed" and rec.runs[0].origin == "adapt"
    assert all(math.isfinite(v) for v in res.metrics.values())


@pytest.mark.parametrize("kind", ["nan", "spike"])
def test_injected_fault_rolls_back_and_training_completes(problem, kind: str) -> None:
    rec = MemoryRecorder()
    run = AdaptiveRun(problem, toy_graph(problem), CONFIG, _adapt(warmup_steps=0),
                      ProposalPolicy(lambda obs: []), recorder=rec,  # no rewrites here
                      hooks=[FaultInjection(at_work=100, kind=kind, factor=1e3)])
    res = run.run()
    assert res.status == "completed" and res.steps == 240 and res.work > 240
    triggers = [e for e in rec.events if e.kind == "trigger" and e.name == kind]
    rollbacks = [e for e in rec.events if e.kind == "rollback" and e.name == kind]
    assert len(triggers) == 1 and len(rollbacks) == 1
    rb = rollbacks[0]
    assert rb.detail["to_step"] < rb.detail["from_step"] and rb.detail["lr_scale"] == 0.5
    assert math.isfinite(rb.metrics_after["val_loss"])
    assert np.isfinite(rec.steps[-1].loss) and rec.steps[-1].lr == CONFIG.lr / 2
    assert all(math.isfinite(v) for v in res.metrics.values())
    assert res.metrics["val_loss"] < 1.0
    assert [s.reason for s in rec.snapshots].count("rollback") == 1
    skips = [e for e in rec.events if e.kind == "skip"]  # the replay left the batch out
    assert len(skips) == 1 and res.work == 240 + 101 - rb.detail["to_step"]  # 101 ran


def test_a_run_that_gives_up_ends_failed_saying_why(problem) -> None:
    rec = MemoryRecorder()
    run = AdaptiveRun(problem, toy_graph(problem), CONFIG, _adapt(warmup_steps=0,
                      max_rollbacks=0), ProposalPolicy(lambda obs: []), recorder=rec,
                      hooks=[FaultInjection(at_work=50, kind="nan")])
    res = run.run()
    assert res.status == "failed" and rec.run_ends[-1].status == "failed"
    assert rec.run_ends[-1].error == "gave up: more than 0 rollbacks (the last: nan at step 51)"
    assert [e.name for e in rec.events if e.kind == "rollback"] == ["give_up"]


def test_harmful_rewrite_is_rolled_back_and_blacklisted(problem) -> None:
    asked: list[tuple[str, frozenset[str]]] = []

    def proposer(obs):  # type: ignore[no-untyped-def]
        asked.append((obs.fired.trigger, obs.blocked))
        if obs.fired.trigger == "warmup":
            # a trained model: cutting 7 of 8 units hurts
            return [Proposal("prune", "blocks.0.linear", {"units": 7}, 1.0, "test")]
        return []

    rec = MemoryRecorder()
    start = toy_graph(problem)
    run = AdaptiveRun(problem, start, CONFIG, _adapt(steps=150, warmup_steps=60),
                      ProposalPolicy(proposer), recorder=rec)
    res = run.run()
    guard = [e for e in rec.events if e.kind == "guard"]
    assert guard and guard[0].detail["verdict"] == "harm"
    rb = next(e for e in rec.events if e.kind == "rollback")
    assert rb.name == "guard" and rb.detail["blacklisted"] == "prune"
    assert rb.detail["to_step"] == 60
    assert fingerprint(res.graph) == fingerprint(start)  # the rewrite is gone
    assert res.rewrites == 1 and res.status == "completed"  # blacklisted: never again
    later = asked[[t for t, _ in asked].index("warmup") + 1:]
    assert later and all("prune" in b for _, b in later)


def test_fork_continues_as_a_child_run(problem) -> None:
    rec = MemoryRecorder()
    run = AdaptiveRun(problem, toy_graph(problem), CONFIG, _adapt(steps=120),
                      RuleBasedPolicy(), recorder=rec)
    run.start()
    for _ in range(50):
        run.step()
    child = run.fork()
    res = child.run()
    assert child.run_id != run.run_id and res.status == "completed"
    start = next(r for r in rec.runs if r.run_id == child.run_id)
    assert start.parent_run_id == run.run_id and start.origin == "fork"
    assert any(e.kind == "fork" and e.detail["child_run_id"] == child.run_id
               for e in rec.events if e.run_id == run.run_id)
    child_steps = [s.step for s in rec.steps if s.run_id == child.run_id]
    assert child_steps[0] == 50 and child_steps[-1] == 119
    parent_steps = [s for s in rec.steps if s.run_id == run.run_id]
    assert len(parent_steps) == 50  # the parent did not move


def _quiet(problem, rec: MemoryRecorder, steps: int) -> AdaptiveRun:
    """A run that never rewrites (nor rolls back by itself)."""
    return AdaptiveRun(problem, toy_graph(problem), CONFIG, _adapt(steps=steps, warmup_steps=0),
                       ProposalPolicy(lambda obs: []), recorder=rec)


def test_a_started_run_goes_back_with_rollback_logged_as_its_own_are(problem,
                                                                     tmp_path) -> None:
    """`load`, the only public way back before, is how a run is set up: on a started one it
    rewound `work` (a checkpoint's serial then collided) and logged no rollback."""
    rec = MemoryRecorder()
    run = AdaptiveRun(problem, toy_graph(problem), CONFIG,
                      _adapt(steps=120, warmup_steps=0, checkpoint_steps=40),
                      ProposalPolicy(lambda obs: []), recorder=rec, checkpoint_dir=tmp_path)
    for _ in range(50):
        run.step()
    snap = run.snapshot()
    for _ in range(30):  # a checkpoint at 80 executed steps
        run.step()
    with pytest.raises(ConfigError, match=r"load\(\) sets up a run before it starts.*"
                                          r"rollback\(snapshot\)"):
        run.load(snap)
    other = _quiet(problem, MemoryRecorder(), 120)
    with pytest.raises(ConfigError, match=f"the snapshot is of run {other.run_id}, not "
                                          f"{run.run_id}: fork"):
        run.rollback(other.snapshot())
    on_trial = run.snapshot()
    on_trial.meta["controller"]["guard"]["active"] = True
    with pytest.raises(ConfigError, match="during the trial of a rewrite"):
        run.rollback(on_trial)
    run.rollback(snap, "try another way")
    assert (run.trainer.step_count, run.work, run.rollbacks) == (50, 80, 1)
    res = run.run()
    assert (res.status, res.steps, res.work, res.rollbacks) == ("completed", 120, 150, 1)
    (rb,) = [e for e in rec.events if e.kind == "rollback"]
    assert (rb.name, rb.detail["reason"], rb.detail["from_step"], rb.detail["to_step"]) == \
        ("requested", "try another way", 80, 50)
    assert [s.reason for s in rec.snapshots].count("rollback") == 1
    assert [s.step for s in rec.steps] == [*range(80), *range(50, 120)]
    saves = [e.detail["path"] for e in rec.events if e.kind == "checkpoint"]
    assert len(saves) == len(set(saves)) == 4  # at 40, 80 and 120 executed steps, and the
    assert saves[-1] == str(tmp_path / "final")  # final state, to branch from


def test_an_ended_run_logs_nothing_more_and_a_fork_goes_further(problem) -> None:
    """After `run()` it logged steps past its end, a second end, and a fork event."""
    rec = MemoryRecorder()
    run = _quiet(problem, rec, 60)
    run.run()

    def parents() -> list[int]:
        return [len([r for r in rows if r.run_id == run.run_id])
                for rows in (rec.steps, rec.events, rec.results, rec.snapshots, rec.run_ends)]

    logged = parents()
    for call in (run.step, run.run, lambda: run.rollback(run.snapshot())):
        with pytest.raises(ConfigError, match=rf"run {run.run_id} ended completed at step 60 "
                                              r"and logs nothing more: fork\(\) branches"):
            call()
    with pytest.raises(ConfigError, match=r"at step 60, the end of the run's 60 steps: "
                                          r"fork\(adapt=AdaptConfig\(steps=...\)\)"):
        run.fork()
    child = run.fork(adapt=_adapt(steps=100, warmup_steps=0))
    res = child.run()
    assert parents() == logged
    assert res.status == "completed" and res.steps == 100
    child_steps = [s.step for s in rec.steps if s.run_id == child.run_id]
    assert child_steps == list(range(60, 100))
    start = next(r for r in rec.runs if r.run_id == child.run_id)
    assert start.parent_run_id == run.run_id and start.origin == "fork"
    assert "ended completed" in repr(run) and "running" not in repr(child)


def test_a_step_past_the_runs_steps_is_refused_and_run_ends_it(problem) -> None:
    """It trained and logged steps past `adapt.steps`, off the end of the schedule."""
    rec = MemoryRecorder()
    run = _quiet(problem, rec, 30)
    for _ in range(20):
        run.step()
    snap = run.snapshot()
    for _ in range(10):
        run.step()
    for _ in range(2):  # refused again: nothing logged by the first refusal
        with pytest.raises(ConfigError, match=rf"^step\(\): run {run.run_id} is at step 30, "
                                              r"the end of its 30 steps: run\(\) ends it, "
                                              r"fork\(adapt=AdaptConfig\(steps=...\)\) gives "
                                              r"a branch more$"):
            run.step()
    assert len(rec.steps) == 30 and not rec.run_ends
    run.rollback(snap)  # back within its steps: it goes on
    run.step()
    assert run.trainer.step_count == 21
    res = run.run()
    assert (res.status, res.steps) == ("completed", 30)
    assert [s.step for s in rec.steps] == [*range(30), *range(20, 30)]


def test_a_fork_during_a_rewrites_trial_takes_the_trial_along(problem) -> None:
    """The child's guard judged the rewrite with no snapshot to go back to: a harmful one
    crashed it."""
    rec = MemoryRecorder()
    run = AdaptiveRun(problem, toy_graph(problem), CONFIG, _adapt(steps=150, warmup_steps=60),
                      ProposalPolicy(prune_at_warmup), recorder=rec)
    while not run.guard.active:
        run.step()
    with pytest.raises(ConfigError, match=r"fork\(\): the snapshot was taken at step 60, "
                                          "during the trial of a rewrite"):
        run.fork(run.snapshot())
    child = run.fork()
    assert child.run().status == "completed"
    rollbacks = [e for e in rec.events if e.run_id == child.run_id and e.kind == "rollback"]
    assert [(e.name, e.detail["to_step"]) for e in rollbacks] == [("guard", 60)]


def test_counterfactual_guard_goes_on_from_the_run_without_the_rewrite(problem) -> None:
    """The harmful prune loses to its control arm; the run goes on from that arm, which is
    exactly the run that never rewrote, at the same step (no step repeated)."""
    run, plain, rec = until_the_control_arm_wins(problem, CONFIG)
    guard = next(e for e in rec.events if e.kind == "guard")
    rb = next(e for e in rec.events if e.kind == "rollback")
    assert guard.detail["verdict"] == "harm" and "control arm" in guard.detail["reason"]
    assert rb.detail["to"] == "control arm" and rb.detail["blacklisted"] == "prune"
    assert rb.detail["from_step"] == rb.detail["to_step"] == 72 == run.trainer.step_count
    assert run.work == 72 + 12  # the control arm's steps are counted, and logged once it wins:
    # the rewritten arm's 60..71 under trajectory 0, then the control arm's under 1
    assert [(s.step, s.trajectory) for s in rec.steps] == \
        [(i, 0) for i in range(72)] + [(i, 1) for i in range(60, 72)]
    # the path taken (trajectory 0 before the control arm's first step, then 1) is the run
    # that never rewrote, row for row
    taken = [s for s in rec.steps if s.trajectory == 1 or s.step < 60]
    never = plain.logged.inner.steps
    assert [s.step for s in taken] == [s.step for s in never] == list(range(72))
    assert [s.loss for s in taken] == [s.loss for s in never]
    assert fingerprint(run.trainer.graph) == fingerprint(plain.trainer.graph)
    np.testing.assert_array_equal(run.trainer.store.data, plain.trainer.store.data)
    assert guard.detail["val_control"] == pytest.approx(plain.measure()["val_loss"], rel=1e-12)
    assert guard.detail["val_after"] > guard.detail["val_control"]
    res = run.run()
    assert res.status == "completed" and res.rewrites == 1


def test_counterfactual_guard_returns_to_the_rewritten_arm_when_it_wins(problem) -> None:
    # a bar every finite loss clears: the keep path, back on the rewritten arm
    cf = _adapt(steps=150, warmup_steps=60,
                guard=GuardConfig(steps=12, counterfactual=True, min_gain=-1.0))
    rec = MemoryRecorder()
    start = toy_graph(problem)
    run = AdaptiveRun(problem, start, CONFIG, cf, ProposalPolicy(prune_at_warmup),
                      recorder=rec)
    run.start()
    while not any(e.kind == "guard" for e in rec.events):
        run.step()
    guard = next(e for e in rec.events if e.kind == "guard")
    assert guard.detail["verdict"] == "keep" and math.isfinite(guard.detail["val_control"])
    assert not any(e.kind == "rollback" for e in rec.events)
    assert fingerprint(run.trainer.graph) != fingerprint(start)  # the pruned model goes on
    assert run.trainer.step_count == 72 and run.work == 72 + 12
    assert run.measure()["val_loss"] == pytest.approx(guard.detail["val_after"], rel=1e-12)
    assert run.run().status == "completed"


class BestWatch:
    """Records (live step, best step, best val loss) before every executed step."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def before_step(self, run, x, y):  # type: ignore[no-untyped-def]
        self.seen.append((run.trainer.step_count, run.best_step))
        return x, y


def test_a_rollback_rewinds_the_best_model_so_far(problem) -> None:
    """A NaN in a rewrite's trial rolls back to before the rewrite: the best model that trial
    found goes with it, so early stopping never counts from it and the run never ends on
    the blacklisted rewrite."""
    def widen_at_warmup(obs):  # type: ignore[no-untyped-def]
        if obs.fired.trigger == "warmup":
            return [Proposal("widen", "blocks.0.linear", {"units": 8, "init": "fresh"}, 1.0)]
        return []

    start, watch, rec = toy_graph(problem, "mlp:depth=1,width=4"), BestWatch(), MemoryRecorder()
    run = AdaptiveRun(problem, start, CONFIG, _adapt(steps=150, warmup_steps=60, eval_every=2,
                                                     guard=GuardConfig(steps=12)),
                      ProposalPolicy(widen_at_warmup), recorder=rec,
                      hooks=[FaultInjection(at_work=70, kind="nan"), watch])
    res = run.run()
    rb = next(e for e in rec.events if e.kind == "rollback")
    assert rb.name == "nan" and rb.detail["to_step"] == 60 and rb.detail["blacklisted"] == "widen"
    # the trial evaluated (and improved) before the NaN: a best the rollback discarded
    assert any(h["step"] > 60 and h["work"] < 70 for h in run.history)
    assert all(best <= step for step, best in watch.seen)  # never a best from the future
    assert fingerprint(res.graph) == fingerprint(start)  # not the rolled-back widen
    assert res.best_step <= res.steps


@pytest.mark.parametrize("setting,why", [
    ({"guard": {"counterfactual": True}}, "guard must be a GuardConfig, got dict"),
    ({"steps": 1.5}, "steps must be an integer, got 1.5"),
    ({"steps": "200"}, "steps must be an integer, got '200'"),
    ({"plateau_smoothing": 2.0}, r"plateau_smoothing must be in \[0, 1\), got 2"),
    ({"spike_k": -1.0}, "spike_k must be > 0, got -1"),
    ({"plateau_min_delta": math.nan}, "plateau_min_delta must be a finite number, got nan"),
    ({"lr_backoff": 0.0}, r"lr_backoff must be in \(0, 1\], got 0"),
])
def test_adapt_settings_are_checked_when_made(setting: dict, why: str) -> None:
    """As TrainConfig's are: a bad value is a ConfigError naming it, not a failure mid-run."""
    with pytest.raises(ConfigError, match=f"^{why}$"):
        AdaptConfig(**setting)


def test_when_the_control_arm_wins_its_evaluations_are_the_run_s(problem) -> None:
    """The control arm's evaluations inside the trial were never counted: the run went on
    with the best model and patience of before the rewrite, so it could end on an older
    model than the run that never rewrote (an audit's wine run: val loss 0.762 against
    0.591), and its path had no results rows inside the trial."""
    run, plain, rec = until_the_control_arm_wins(problem, CONFIG, eval_every=5)
    assert any(e.kind == "rollback" and e.detail.get("to") == "control arm"
               for e in rec.events)
    assert (run.best_val, run.best_step, run.since_best) == \
        (plain.best_val, plain.best_step, plain.since_best)
    got, want = run.run(), plain.run()
    assert got.metrics == want.metrics and got.steps == want.steps

    def path(rows, cut):  # the run's evaluations on the path it took: up to the rewrite,
        return [(r.step, r.split, r.metric, r.value) for r in rows  # then the control arm's
                if not r.final and (r.trajectory == 1 or r.step <= cut)]
    rb = next(e for e in rec.events if e.kind == "rollback")
    rewrite_step = rb.detail["to_step"] - 12  # the trial's 12 steps
    mine = [r for r in rec.results if r.run_id == run.run_id]
    assert any(rewrite_step < r.step < rb.detail["to_step"] and r.trajectory == 1
               for r in mine)  # the control arm's evaluations, inside the trial
    assert path(mine, rewrite_step) == path(plain.logged.inner.results, 10**9)


def test_a_snapshot_keeps_the_history_as_it_was_and_the_result_hands_out_copies(
        problem) -> None:
    """Snapshots share the history's entries with the run (each evaluation's snapshot once
    copied the whole history through JSON: quadratic in the run's evaluations), so what
    each holds is checked here: the history up to its evaluation, not what came after, and
    a result whose entries a caller changes leaves the snapshots as they were."""
    run = AdaptiveRun(problem, toy_graph(problem), CONFIG, _adapt(steps=120, eval_every=10),
                      ProposalPolicy(lambda obs: []), recorder=MemoryRecorder())
    for _ in range(30):
        run.step()
    early = run.snapshot()
    assert len(early.meta["run"]["history"]) == 3
    before = [dict(h) for h in early.meta["run"]["history"]]
    res = run.run()
    assert len(res.history) == 12 and res.history[:3] == before
    for h in res.history:
        h["val_loss"] = -1.0
    assert early.meta["run"]["history"] == before
    assert [h["val_loss"] for h in run.snapshot().meta["run"]["history"]] == [
        h["val_loss"] for h in run.history] != [-1.0] * 12
    branch = run.fork(early, adapt=_adapt(steps=40, eval_every=10))
    assert branch.history == before
    assert branch.history[0] is not early.meta["run"]["history"][0]  # the branch's own
