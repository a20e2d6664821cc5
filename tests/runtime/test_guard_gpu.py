"""The cuda tier of the counterfactual guard: the control arm replays on the GPU (the step a
CUDA graph) and the run goes on from it, the model the one a run without the rewrite has."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.runtime.trainer import TrainConfig
from tests.runtime.test_adaptive_fixtures import toy_problem, until_the_control_arm_wins

pytestmark = pytest.mark.cuda


def test_the_control_arm_wins_on_the_gpu_and_the_run_goes_on_from_it() -> None:
    problem = toy_problem("classification", n=300, seed=2)
    config = TrainConfig(lr=1e-2, batch_size=32, seed=0, backend="cupy")
    run, plain, rec = until_the_control_arm_wins(problem, config)
    guard = next(e for e in rec.events if e.kind == "guard")
    assert guard.detail["verdict"] == "harm" and run.trainer.step_count == 72
    assert fingerprint(run.trainer.graph) == fingerprint(plain.trainer.graph)
    ours = run.trainer.store.data.get()
    theirs = plain.trainer.store.data.get()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert guard.detail["val_control"] == pytest.approx(plain.measure()["val_loss"], rel=1e-5)
    assert run.run().status == "completed"
