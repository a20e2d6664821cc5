"""The cuda tier of `runtime.many`: runs trained together on the GPU (each epoch queued on the
run's own stream, batches drawn on the device, one graph replay a step) log the losses,
results and ends each logs trained alone on the GPU (`Trainer.fit`, one step at a time), to
relative 1e-5 (the same kernels in the same order: equal unless the autotuner's choice of a
step body differs between the two, which moves fp32 sums in their last bits), for every
act/norm/residual/dropout option of the corpus space, in float64 (what sweeps train) and
float32; a diverging or failing run does not disturb the others."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.backend import select_backend
from aicf_induct.runtime.many import train_many
from aicf_induct.runtime.trainer import TrainConfig
from tests.runtime.many_cases import SPECS, alone, rows, together, trainer
from tests.runtime.test_adaptive_fixtures import toy_problem

pytestmark = pytest.mark.cuda

CONFIG = TrainConfig(epochs=5, batch_size=32, patience=2, backend="cupy")
RTOL, ATOL = 1e-5, 1e-6  # fp32: the same kernels in the same order, up to the last bits


def same(a: MemoryRecorder, b: MemoryRecorder) -> None:
    ra, rb = rows(a), rows(b)
    for key in ("snapshots", "ends", "starts"):
        assert ra[key] == rb[key], key
    for key in ("steps", "results"):
        assert len(ra[key]) == len(rb[key]), key
        for x, y in zip(ra[key], rb[key], strict=True):
            nums = [(u, v) for u, v in zip(x, y, strict=True) if isinstance(u, float)]
            assert [u for u in x if not isinstance(u, float)] == \
                   [v for v in y if not isinstance(v, float)], (key, x, y)
            np.testing.assert_allclose([u for u, _ in nums], [v for _, v in nums], rtol=RTOL,
                                       atol=ATOL, err_msg=f"{key}: {x} vs {y}")


def cases() -> list:
    clf, reg = toy_problem(n=330), toy_problem("regression", n=300, seed=1)
    out = []
    for i, spec in enumerate(SPECS):
        cfg = dataclasses.replace(CONFIG, seed=i % 3, lr=0.003 if i % 2 else 0.001)
        out.append((clf, spec, cfg))
        out.append((reg, spec, dataclasses.replace(cfg, seed=cfg.seed + 1)))
    for spec in (SPECS[0], SPECS[4]):  # float32 models too: the same kernels, in fp32
        out.append((clf, spec + "|float32", CONFIG))
    out.append((clf, SPECS[1], dataclasses.replace(CONFIG, epochs=40, patience=1, lr=0.05)))
    out.append((reg, SPECS[0], dataclasses.replace(CONFIG, max_steps=11)))
    return out


def test_runs_trained_together_log_what_they_log_alone_on_the_gpu() -> None:
    c = cases()
    solo, many = alone(c), together(c)
    gpu = select_backend("cupy").description
    for a, b in zip(solo, many, strict=True):
        assert b.runs[0].device == gpu
        same(a, b)
    assert {r.run_ends[0].status for r in many} >= {"completed", "early_stopped"}


def test_a_diverging_or_failing_run_does_not_disturb_the_others() -> None:
    problem = toy_problem(n=300)
    good = [(problem, SPECS[2], CONFIG), (problem, SPECS[0], CONFIG)]
    recs = [MemoryRecorder() for _ in range(4)]
    wild = trainer(problem, SPECS[4], dataclasses.replace(CONFIG, lr=1e4, optimizer="sgd"),
                   recs[2])
    bad = dataclasses.replace(problem, problem_id="broken",
                              val=dataclasses.replace(problem.val, X=problem.val.X[:, :3]))
    with pytest.raises(ConfigError, match="val split: x: expected shape"):
        trainer(bad, SPECS[3], CONFIG, MemoryRecorder())  # refused before a run is logged
    broken = trainer(problem, SPECS[3], CONFIG, recs[3])
    broken.problem = bad  # so that it fails while the others train
    results = train_many([trainer(*good[0], recs[0]), wild, broken,
                          trainer(*good[1], recs[1])])
    assert isinstance(results[2], Exception)
    assert [e.status for e in recs[3].run_ends] == ["failed"]
    for a, b in zip(alone(good), recs[:2], strict=True):
        same(a, b)
    losses = np.array([s.loss for s in recs[2].steps])
    assert not np.all(np.isfinite(losses)) or losses.max() > 100  # it diverged


def test_a_validation_split_of_several_chunks_evaluates_as_alone(monkeypatch) -> None:
    # the eval graph holds one plan per chunk size (here 25 rows and the rest): the run
    # trained together logs the validation losses and scores the solo run logs
    import aicf_induct.runtime.epoch_gpu as epoch_gpu
    import aicf_induct.runtime.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "EVAL_CHUNK", 25)
    monkeypatch.setattr(epoch_gpu, "EVAL_CHUNK", 25)
    c = [(toy_problem(n=330), SPECS[i], dataclasses.replace(CONFIG, seed=i)) for i in (0, 3)]
    c.append((toy_problem("regression", n=300, seed=1), SPECS[2], CONFIG))
    for a, b in zip(alone(c), together(c), strict=True):
        same(a, b)


def test_full_batch_steps_replay_k_at_a_time_as_alone_either_way(monkeypatch, capsys) -> None:
    # the multi-step graph is the step's graph repeated as child nodes; where the driver
    # cannot build that, the steps are captured k at a time: both log what the solo run logs
    import aicf_induct.kernels.cuda.graph_repeat as graph_repeat
    import aicf_induct.runtime.epoch_gpu as epoch_gpu
    from aicf_induct.runtime.epoch_gpu import DeviceData, DeviceEpochs

    problem = toy_problem(n=330)
    c = [(problem, SPECS[i], dataclasses.replace(CONFIG, seed=i)) for i in (0, 1)]
    probe = DeviceEpochs(trainer(problem, SPECS[0], CONFIG, MemoryRecorder()),
                         DeviceData(problem))
    assert probe.multi is not None and probe.multi_error == ""
    assert isinstance(probe.multi[1], graph_repeat.RepeatedGraph)
    assert probe.multi[0] == min(epoch_gpu.MULTI, probe.sizes.count(probe.sizes[0]))
    for a, b in zip(alone(c), together(c), strict=True):
        same(a, b)
    # more full batches than one repeated graph holds: MULTI at a time, then the rest's graph
    monkeypatch.setattr(epoch_gpu, "MULTI", 4)
    probe = DeviceEpochs(trainer(problem, SPECS[0], CONFIG, MemoryRecorder()),
                         DeviceData(problem))
    full = probe.sizes.count(probe.sizes[0])
    assert full > 4 and [k for k, _ in probe.repeats] == [4, full % 4][:1 + (full % 4 >= 2)]
    counts = [count for _, count in probe._sequence(probe.n_batches)]
    assert sum(counts) == probe.n_batches and counts[:full // 4] == [4] * (full // 4)
    for a, b in zip(alone(c), together(c), strict=True):
        same(a, b)
    monkeypatch.setattr(graph_repeat, "repeated", lambda graph, k: (None, "refused"))
    monkeypatch.setattr(epoch_gpu, "MULTI_CAPTURED", 4)
    monkeypatch.setattr(epoch_gpu, "FELL_BACK", collections.Counter())
    capsys.readouterr()
    probe = DeviceEpochs(trainer(problem, SPECS[0], CONFIG, MemoryRecorder()),
                         DeviceData(problem))
    assert probe.multi is not None and probe.multi[0] == 4 and probe.multi_error == "refused"
    # the slower path is said, once a process: a user sees why a sweep runs slower
    assert capsys.readouterr().err.count("cannot be repeated as child nodes (refused); its "
                                         "full-batch steps are captured 4 at a time") == 1
    DeviceEpochs(trainer(problem, SPECS[0], CONFIG, MemoryRecorder()), DeviceData(problem))
    assert "captured" not in capsys.readouterr().err
    # and counted a run each, which a GPU-engine sweep's report gives
    assert epoch_gpu.FELL_BACK == {"multi": 2} and probe.fell_back == {"multi"}
    for a, b in zip(alone(c), together(c), strict=True):
        same(a, b)
