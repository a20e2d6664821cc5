"""A live rewrite is held to the model ceilings the run's first graph was
(`executor.check_size`): a widen past them is not adopted; the run goes on with its graph,
and the refused rewrite is a `rewrite` event with its `error`, as any rewrite that cannot
apply, its transform blacklisted as a harmful one's is."""

from __future__ import annotations

import pytest

from aicf_induct.frontend import specs
from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
from aicf_induct.runtime.guard import GuardConfig
from aicf_induct.runtime.policies import Proposal, ProposalPolicy
from aicf_induct.runtime.trainer import TrainConfig
from tests.runtime.test_adaptive_fixtures import toy_graph, toy_problem


def widen_at_warmup(obs):  # type: ignore[no-untyped-def]
    if obs.fired.trigger == "warmup":
        return [Proposal("widen", "blocks.0.linear", {"units": 5}, 1.0, "test")]
    return []


def _run(problem, start) -> tuple[AdaptiveRun, MemoryRecorder]:  # type: ignore[no-untyped-def]
    rec = MemoryRecorder()
    run = AdaptiveRun(problem, start, TrainConfig(lr=1e-2, batch_size=32),
                      AdaptConfig(steps=40, warmup_steps=10, guard=GuardConfig(steps=12)),
                      ProposalPolicy(widen_at_warmup), recorder=rec)
    return run, rec


# the toy MLP: 8 inputs, hidden layers of 8, 3 outputs; the widen gives its first layer 13
@pytest.mark.parametrize(("ceiling", "says"), [
    ("MAX_PARAMS", "trainable parameters; the ceiling is"),
    ("MAX_VALUES_PER_EXAMPLE", "values per example; the ceiling is 8"),
])
def test_a_widen_past_a_ceiling_leaves_the_graph_and_says_why(
        ceiling: str, says: str, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = toy_problem(n=200, seed=2)
    start = toy_graph(problem)
    monkeypatch.setattr(specs, ceiling, start.param_count() if ceiling == "MAX_PARAMS" else 8)
    run, rec = _run(problem, start)
    res = run.run()
    rewrites = [e for e in rec.events if e.kind == "rewrite"]
    assert [e.name for e in rewrites] == ["widen"]
    assert rewrites[0].detail["error"].startswith("widen at 'blocks.0.linear': ")
    assert says in rewrites[0].detail["error"]
    assert res.status == "completed" and res.steps == 40
    assert res.rewrites == 0 and fingerprint(res.graph) == fingerprint(start)
    assert fingerprint(run.trainer.graph) == fingerprint(start)
    assert "rewrite" not in [s.reason for s in rec.snapshots]


def test_a_widen_within_the_ceiling_is_adopted(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = toy_problem(n=200, seed=2)
    start = toy_graph(problem)
    monkeypatch.setattr(specs, "MAX_PARAMS", start.param_count() + 5 * (8 + 1 + 8))
    run, rec = _run(problem, start)
    run.run()
    rewrites = [e for e in rec.events if e.kind == "rewrite"]
    assert [e.name for e in rewrites] == ["widen"] and "error" not in rewrites[0].detail
    assert run.rewrites == 1


def widen_at_every_trigger(obs):  # type: ignore[no-untyped-def]
    if "widen" in obs.blocked:
        return []
    return [Proposal("widen", "blocks.0.linear", {"units": 5}, 1.0, "test")]


def test_a_refused_widen_is_blacklisted_not_proposed_at_every_trigger(
        monkeypatch: pytest.MonkeyPatch) -> None:
    problem = toy_problem(n=200, seed=2)
    start = toy_graph(problem)
    monkeypatch.setattr(specs, "MAX_PARAMS", start.param_count())
    rec = MemoryRecorder()
    run = AdaptiveRun(problem, start, TrainConfig(lr=1e-2, batch_size=32),
                      AdaptConfig(steps=120, warmup_steps=10, epoch_trigger=1,
                                  guard=GuardConfig(steps=12, blacklist_steps=1000)),
                      ProposalPolicy(widen_at_every_trigger), recorder=rec)
    run.run()
    assert len([e for e in rec.events if e.kind == "trigger"]) > 2  # it was asked again
    refused = [e for e in rec.events if e.kind == "rewrite"]
    assert len(refused) == 1 and refused[0].detail["blacklisted"] == "widen"
