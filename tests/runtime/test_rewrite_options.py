"""Rewrites a live run cannot make are failed rewrites, not a failed run: bad options are a
`RewriteError` naming the option and its value when the transform is made (so a
`rewrite` event carries the `error`, the transform is blacklisted, nothing is applied and
the run goes on); `prune by="gradient"` refuses the all-zero gradients an install leaves;
and a rollback followed by the same decision makes the same rewrite, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.frontend.families import parse_spec, spec_graph
from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.ir.graph import Graph
from aicf_induct.problems.problem import Problem
from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun, FaultInjection
from aicf_induct.runtime.guard import GuardConfig
from aicf_induct.runtime.model_state import capture, install
from aicf_induct.runtime.policies import (
    Decision,
    PolicyObservation,
    Proposal,
    ProposalPolicy,
    StackPolicy,
    make_policy,
)
from aicf_induct.runtime.trainer import TrainConfig
from aicf_induct.runtime.transforms import Deepen, Prune, RewriteError, make_transform
from tests.runtime.test_adaptive_fixtures import make_trainer, run_steps, toy_graph, toy_problem

MLP, FTT = "mlp:depth=2,width=8", "ftt:depth=1,d_token=8,heads=2"
STEPS = 40


class DecideAtWarmup:
    """A policy that decides one rewrite, as given, at the warm-up trigger (as a proposer's
    or a learned history's options reach `AdaptiveRun.rewrite`: unchecked)."""

    name = "test"

    def __init__(self, transform: str, site: str, options: dict[str, object]) -> None:
        self.decision = Decision(transform, site, dict(options), "test", "test")

    def decide(self, obs: PolicyObservation) -> Decision | None:
        return self.decision if obs.fired.trigger == "warmup" else None


class Never:
    name = "never"

    def decide(self, obs: PolicyObservation) -> Decision | None:
        return None


def _graph(problem: Problem, spec: str) -> Graph:
    return spec_graph(parse_spec(spec), problem.n_features, problem.n_outputs)


def _run(problem: Problem, spec: str, policy: object) -> tuple[AdaptiveRun, MemoryRecorder]:
    rec = MemoryRecorder()
    run = AdaptiveRun(problem, _graph(problem, spec), TrainConfig(lr=3e-3, batch_size=32),
                      AdaptConfig(steps=STEPS, warmup_steps=10, guard=GuardConfig(steps=12)),
                      policy, recorder=rec)  # type: ignore[arg-type]
    return run, rec


@pytest.fixture(scope="module")
def problem() -> Problem:
    return toy_problem("classification", n=200)


@pytest.fixture(scope="module")
def untouched(problem: Problem) -> dict[str, list[float]]:
    """Each model's step losses in a run that never rewrites."""
    out = {}
    for spec in (MLP, FTT):
        run, rec = _run(problem, spec, Never())
        run.run()
        out[spec] = [s.loss for s in rec.steps]
    return out


# (transform, site, options, model, what the error must say: the option and its value)
BAD = [
    ("prune", "blocks.0.linear", {"units": 8, "min_units": 0}, MLP,
     "prune min_units must be an int >= 1, got 0"),
    ("prune", "blocks.0.linear", {"units": 20, "min_units": -5}, MLP,
     "prune min_units must be an int >= 1, got -5"),
    ("prune", "blocks.0.linear", {"units": 2.5}, MLP, "prune units must be an int, got 2.5"),
    ("prune", "blocks.0.linear", {"units": True}, MLP, "prune units must be an int, got True"),
    ("widen", "blocks.0.linear", {"units": 2.5}, MLP, "widen units must be an int, got 2.5"),
    ("widen", "blocks.0.linear", {"factor": float("inf")}, MLP,
     "widen factor must be a finite number, got inf"),
    ("deepen", "blocks.0.act", {"state": "x"}, MLP,
     "deepen state must be one of fresh, borrow, got 'x'"),
    ("widen_tokens", "tokenizer", {"factor": 100000}, FTT,
     "factor 100000 would grow token width 8 to 800000, past max_width 4096"),
]


@pytest.mark.parametrize(("transform", "site", "options", "spec", "says"), BAD,
                         ids=[f"{t}-{o}" for t, _, o, _, _ in BAD])
def test_bad_options_are_a_failed_rewrite_and_the_run_goes_on(
        problem: Problem, untouched: dict[str, list[float]], transform: str, site: str,
        options: dict[str, object], spec: str, says: str) -> None:
    """Before: a ShapeError (a 0-unit layer), a TypeError (a slice by 2.5), a ValueError
    (deepen's state) or a MemoryError (14 TiB of widened tokens) ended the run `failed`."""
    run, rec = _run(problem, spec, DecideAtWarmup(transform, site, options))
    start = fingerprint(run.trainer.graph)
    res = run.run()
    assert res.status == "completed" and res.steps == STEPS
    rewrites = [e for e in rec.events if e.kind == "rewrite"]
    assert [e.name for e in rewrites] == [transform]
    assert says in rewrites[0].detail["error"]
    assert rewrites[0].detail["blacklisted"] == transform
    # nothing half-applied: the graph is the start's, no rewrite IR logged, and every step
    # is the step of the run that never rewrote
    assert res.rewrites == 0 and fingerprint(run.trainer.graph) == start
    assert fingerprint(res.graph) == start
    assert "rewrite" not in [s.reason for s in rec.snapshots]
    assert [s.loss for s in rec.steps] == untouched[spec]


@pytest.mark.parametrize(("transform", "site", "options", "spec", "says"), BAD,
                         ids=[f"{t}-{o}" for t, _, o, _, _ in BAD])
def test_bad_options_are_refused_before_apply(
        problem: Problem, transform: str, site: str, options: dict[str, object], spec: str,
        says: str) -> None:
    """At `make_transform` (a proposal policy skips them there), else in `applicable` (the
    token width: before anything of it is allocated)."""
    graph = _graph(problem, spec)
    try:
        t = make_transform(transform, **options)
    except RewriteError as err:
        assert says in str(err)
        return
    assert t.applicable(graph, site) == says
    assert site not in t.sites(graph)


def test_a_bad_proposal_is_passed_over_for_the_next(problem: Problem) -> None:
    def proposer(obs):  # type: ignore[no-untyped-def]
        if obs.fired.trigger != "warmup":
            return []
        return [Proposal("prune", "blocks.0.linear", {"units": 8, "min_units": 0}, 2.0, "t"),
                Proposal("widen", "blocks.0.linear", {"units": 2.5}, 1.5, "t"),
                Proposal("widen", "blocks.0.linear", {"units": 4}, 1.0, "t")]

    run, rec = _run(problem, MLP, ProposalPolicy(proposer))
    res = run.run()
    assert res.status == "completed"
    rewrites = [e for e in rec.events if e.kind == "rewrite"]
    assert [(e.name, e.detail["options"]) for e in rewrites] == [("widen", {"units": 4})]


def test_integer_options_may_be_numpy_integers() -> None:
    """Options read back from a table (a pandas column) are NumPy integers: taken, as ints."""
    assert make_transform("widen", units=np.int64(4), max_width=np.int32(64)).options() == {
        "factor": 2.0, "units": 4, "noise": 0.0, "max_width": 64, "init": "split"}
    assert make_transform("prune", units=np.int64(2)).options()["units"] == 2
    assert make_transform("add_heads", heads=np.int64(2)).options() == {"heads": 2}
    assert make_transform("widen_tokens", factor=np.int64(3)).options()["factor"] == 3
    assert type(make_transform("widen", units=np.int64(4)).options()["units"]) is int


def test_deepen_state_is_checked_when_the_stack_policy_is_built() -> None:
    """Before: accepted, and the first plateau's deepen crashed the run."""
    with pytest.raises(RewriteError, match="stack deepen_state must be one of fresh, borrow, "
                                         "got 'x'"):
        StackPolicy(deepen_state="x")
    with pytest.raises(RewriteError, match="deepen_state must be one of fresh, borrow, got 'x'"):
        make_policy("stack", {"deepen_state": "x"})
    assert StackPolicy(deepen_state="borrow").options == {"state": "borrow"}
    with pytest.raises(RewriteError, match="state must be one of fresh, borrow"):
        Deepen(state="x")  # a ValueError before: it crashed the run


def test_prune_by_gradient_refuses_the_zeros_an_install_leaves(problem: Problem) -> None:
    tr = make_trainer(problem, toy_graph(problem))
    run_steps(tr, 5)
    prune = Prune(units=3, by="gradient")
    cut = prune.apply(capture(tr, with_grads=True), "blocks.0.linear",
                      np.random.default_rng(0))
    assert cut.graph.node("blocks.0.linear").attrs["out_features"] == 5
    install(tr, capture(tr))  # as a rewrite, a rollback or a restored snapshot does
    state = capture(tr, with_grads=True)
    assert state.grads is not None and not any(np.any(g) for g in state.grads.values())
    with pytest.raises(RewriteError, match=r"'blocks\.0\.linear' are all zero"):
        prune.apply(state, "blocks.0.linear", np.random.default_rng(0))
    run_steps(tr, 1)  # one step and they say something again
    prune.apply(capture(tr, with_grads=True), "blocks.0.linear", np.random.default_rng(0))


def test_prune_by_gradient_right_after_a_rollback_is_a_failed_rewrite() -> None:
    """The instability path rolls back and asks the policy at once: the freshly installed
    model's gradients are zero. Before: all units scored 0, units 0..2 were cut."""
    problem = toy_problem("classification", n=300)

    def proposer(obs):  # type: ignore[no-untyped-def]
        if obs.fired.kind != "instability":
            return []
        return [Proposal("prune", "blocks.0.linear", {"by": "gradient", "units": 3}, 1.0, "t")]

    rec = MemoryRecorder()
    run = AdaptiveRun(problem, toy_graph(problem), TrainConfig(lr=3e-3, batch_size=32),
                      AdaptConfig(steps=80, warmup_steps=0), ProposalPolicy(proposer),
                      recorder=rec, hooks=[FaultInjection(40, "nan")])
    res = run.run()
    assert res.status == "completed" and res.rollbacks == 1
    rewrites = [e for e in rec.events if e.kind == "rewrite"]
    assert [e.name for e in rewrites] == ["prune"]
    assert "prune by gradient needs the last step's gradients" in rewrites[0].detail["error"]
    assert "all zero" in rewrites[0].detail["error"]
    assert res.rewrites == 0
    assert run.trainer.graph.node("blocks.0.linear").attrs["out_features"] == 8


def _widen_at_warmup(obs):  # type: ignore[no-untyped-def]
    if obs.fired.trigger == "warmup":
        return [Proposal("widen", "blocks.0.linear", {"noise": 1.0}, 1.0, "t")]
    return []


def test_a_rollback_and_the_same_decision_make_the_same_rewrite() -> None:
    """The rewrite's random draws (split map, noise) are keyed on what a snapshot restores,
    not on `work`. Before: the same widen at the same step drew other copies and noise
    after the rollback (step 12: 1.02833 against 1.03003)."""
    problem = toy_problem("classification", n=300)
    rec = MemoryRecorder()
    run = AdaptiveRun(problem, toy_graph(problem), TrainConfig(lr=3e-3, batch_size=32, seed=3),
                      AdaptConfig(steps=120, warmup_steps=10, guard=GuardConfig(steps=10)),
                      ProposalPolicy(_widen_at_warmup), recorder=rec)
    for _ in range(5):
        run.step()
    snap = run.snapshot()  # step 5, before the warm-up's widen at step 10
    for _ in range(30):
        run.step()
    first = [s.loss for s in rec.steps if s.step >= 5]
    run.rollback(snap)
    n = len(rec.steps)
    for _ in range(30):
        run.step()
    again = [s.loss for s in rec.steps[n:]]
    widens = [e for e in rec.events if e.kind == "rewrite"]
    assert [e.name for e in widens] == ["widen", "widen"]
    assert widens[0].step == widens[1].step == 10
    assert widens[0].detail["fingerprint_after"] == widens[1].detail["fingerprint_after"]
    assert len(first) == len(again) == 30 and first == again
    # a fork from the snapshot goes on as both did (as it did before)
    child_rec = MemoryRecorder()
    child = run.fork(snap, recorder=child_rec)
    for _ in range(30):
        child.step()
    assert [s.loss for s in child_rec.steps] == first
