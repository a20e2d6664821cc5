"""The cuda tier of `runtime/runs.py`: a run on the GPU, adaptive or not, is logged with the
GPU it ran on (the adaptive loop once logged every run as `cpu (numpy)`)."""

from __future__ import annotations

import pytest

from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
from aicf_induct.runtime.backend import select_backend
from aicf_induct.runtime.guard import GuardConfig
from aicf_induct.runtime.policies import TargetSizePolicy
from aicf_induct.runtime.trainer import TrainConfig, Trainer
from tests.runtime.test_adaptive_fixtures import toy_graph, toy_problem

pytestmark = pytest.mark.cuda


def test_gpu_runs_are_logged_with_their_gpu() -> None:
    problem = toy_problem(n=300)
    config = TrainConfig(epochs=2, backend="cupy")
    gpu = select_backend("cupy").description
    assert gpu.startswith("cuda:")
    rec = MemoryRecorder()
    Trainer(problem, toy_graph(problem), config, recorder=rec).fit()
    AdaptiveRun(problem, toy_graph(problem, "mlp:depth=1,width=4"), config,
                # a guard of 20 steps: the widen at step 10 has 30 left (one needing more
                # than the run has left is let pass)
                AdaptConfig(steps=40, warmup_steps=10, guard=GuardConfig(steps=20)),
                TargetSizePolicy(),
                recorder=rec).run()
    assert [(r.origin, r.device) for r in rec.runs] == [("python", gpu), ("adapt", gpu)]
    assert [e.status for e in rec.run_ends] == ["completed", "completed"]
    assert len(rec.problems) == 2 and all(p.features for p in rec.problems)
    assert any(e.kind == "rewrite" and e.name == "widen" for e in rec.events)  # on the GPU
