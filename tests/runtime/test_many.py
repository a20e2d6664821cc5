"""`runtime.many` on the CPU: runs trained together, an epoch of each in turn, log exactly
what each logs trained alone (the same code steps them: equal to the last bit)."""

from __future__ import annotations

import dataclasses

import numpy as np

from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.many import train_many
from aicf_induct.runtime.trainer import TrainConfig
from tests.runtime.many_cases import SPECS, alone, rows, together, trainer
from tests.runtime.test_adaptive_fixtures import toy_problem

CONFIG = TrainConfig(epochs=4, batch_size=32, patience=2, backend="numpy")


def cases() -> list:
    clf, reg = toy_problem(n=250), toy_problem("regression", n=230, seed=1)
    out = []
    for i, spec in enumerate(SPECS):
        cfg = dataclasses.replace(CONFIG, seed=i % 2, lr=0.003 if i % 3 else 0.001)
        out.append((clf if i % 2 == 0 else reg, spec, cfg))
    # an early stop and a step cap among them
    out.append((clf, SPECS[0], dataclasses.replace(CONFIG, epochs=30, patience=1, lr=0.05)))
    out.append((reg, SPECS[2], dataclasses.replace(CONFIG, max_steps=9)))
    return out


def test_runs_trained_together_log_what_they_log_alone() -> None:
    c = cases()
    solo, many = alone(c), together(c)
    for a, b in zip(solo, many, strict=True):
        assert rows(a) == rows(b)
    ends = [r.run_ends[0].status for r in many]
    assert "early_stopped" in ends and "completed" in ends
    assert many[-1].run_ends[0].steps == 9


def test_a_failing_run_does_not_disturb_the_others() -> None:
    problem = toy_problem(n=200)
    good = [(problem, SPECS[2], CONFIG), (problem, SPECS[4], CONFIG)]
    recs = [MemoryRecorder() for _ in range(3)]
    trainers = [trainer(p, s, c, r) for (p, s, c), r in zip(good, recs[:2], strict=False)]
    broken = trainer(problem, SPECS[3], CONFIG, recs[2])
    broken.problem = dataclasses.replace(problem, val=dataclasses.replace(
        problem.val, X=problem.val.X[:, :3]))  # its evaluation fails at the first epoch's end
    results = train_many([trainers[0], broken, trainers[1]])
    assert isinstance(results[1], Exception)
    assert [e.status for e in recs[2].run_ends] == ["failed"]
    assert recs[2].run_ends[0].error  # the error that ended it
    assert [rows(r) for r in recs[:2]] == [rows(r) for r in alone(good)]


def test_diverging_runs_end_as_they_do_alone() -> None:
    problem = toy_problem(n=200)
    c = [(problem, SPECS[4], dataclasses.replace(CONFIG, lr=1e4, optimizer="sgd")),
         (problem, SPECS[2], CONFIG)]
    solo, many = alone(c), together(c)
    losses = np.array([s.loss for s in solo[0].steps])
    assert not np.all(np.isfinite(losses)) or losses.max() > 100  # it diverged
    assert [rows(r) for r in many] == [rows(r) for r in solo]
