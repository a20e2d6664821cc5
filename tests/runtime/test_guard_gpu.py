"""The cuda tier of the counterfactual guard: the control arm replays on the GPU (the step a
CUDA graph) and the run goes on from it, the model the one a run without the rewrite has."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
from aicf_induct.runtime.guard import GuardConfig
from aicf_induct.runtime.policies import Proposal, ProposalPolicy
from aicf_induct.runtime.trainer import TrainConfig
from tests.runtime.test_adaptive_fixtures import toy_graph, toy_problem

pytestmark = pytest.mark.cuda


def _prune_at_warmup(obs):  # type: ignore[no-untyped-def]
    if obs.fired.trigger == "warmup":  # a trained model: cutting 7 of 8 units hurts
        return [Proposal("prune", "blocks.0.linear", {"units": 7}, 1.0, "test")]
    return []


def test_the_control_arm_wins_on_the_gpu_and_the_run_goes_on_from_it() -> None:
    problem = toy_problem("classification", n=300, seed=2)
    config = TrainConfig(lr=1e-2, batch_size=32, seed=0, backend="cupy")
    cf = AdaptConfig(steps=150, warmup_steps=60, plateau_patience=2, plateau_min_delta=0.02,
                     guard=GuardConfig(steps=12, counterfactual=True))
    rec = MemoryRecorder()
    run = AdaptiveRun(problem, toy_graph(problem), config, cf, ProposalPolicy(_prune_at_warmup),
                      recorder=rec)
    plain = AdaptiveRun(problem, toy_graph(problem), config, cf, ProposalPolicy(lambda obs: []))
    run.start()
    plain.start()
    while not any(e.kind == "rollback" for e in rec.events):
        run.step()
    while plain.trainer.step_count < run.trainer.step_count:
        plain.step()
    guard = next(e for e in rec.events if e.kind == "guard")
    assert guard.detail["verdict"] == "harm" and run.trainer.step_count == 72
    assert fingerprint(run.trainer.graph) == fingerprint(plain.trainer.graph)
    ours = run.trainer.store.data.get()
    theirs = plain.trainer.store.data.get()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert guard.detail["val_control"] == pytest.approx(plain.measure()["val_loss"], rel=1e-5)
    assert run.run().status == "completed"
