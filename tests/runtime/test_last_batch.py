"""No training step on a batch of one row when the split has more (runtime.data.BatchStream
leaves a last batch of one row out of its epoch): batchnorm over one row has no variance,
and PyTorch refuses such a batch in training. The Trainer, AdaptiveRun and the GPU epoch
engine all train on the stream's batches; `batches_per_epoch` counts what it yields."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
from aicf_induct.runtime.data import BatchStream
from aicf_induct.runtime.policies import ProposalPolicy
from aicf_induct.runtime.trainer import TrainConfig, Trainer
from tests.graphs import mlp
from tests.oracle import torch_forward
from tests.runtime.test_adaptive_fixtures import toy_problem

BATCH = 32
CONFIG = TrainConfig(epochs=6, batch_size=BATCH, lr=3e-3, patience=0, seed=0)


@pytest.fixture(scope="module")
def problem():  # type: ignore[no-untyped-def]
    p = toy_problem(n=162, seed=3)  # 97 training rows: three batches of 32 and one row
    assert len(p.train) % BATCH == 1
    return p


def _batchnorm(problem):  # type: ignore[no-untyped-def]
    return mlp(problem.n_features, problem.n_outputs, depth=2, width=16, norm="batchnorm")


@pytest.mark.parametrize("batch", [1, 2, 3, 8, 32])
def test_an_epoch_yields_what_batches_per_epoch_counts_and_no_batch_of_one(batch: int) -> None:
    for n in range(1, 100):
        s = BatchStream(n, batch, seed=n)
        got = list(s.epoch(0))
        assert len(got) == s.batches_per_epoch() and [len(b) for b in got] == s.sizes()
        assert all(len(b) > 1 for b in got) or n == 1 or batch == 1
        rows = np.concatenate(got)
        assert len(set(rows.tolist())) == len(rows) >= n - 1  # at most one row left out
        for start in range(len(got) + 1):
            assert [b.tolist() for b in s.epoch(0, start)] == [b.tolist() for b in got[start:]]


def test_the_row_left_out_differs_from_epoch_to_epoch() -> None:
    s = BatchStream(33, BATCH, seed=0)
    left = {int(np.setdiff1d(np.arange(33), np.concatenate(list(s.epoch(e))))[0])
            for e in range(10)}
    assert len(left) > 5  # shuffled back in: no row is never trained on


def test_batchnorm_trains_as_pytorch_trains_it_with_no_batch_of_one(problem) -> None:
    """PyTorch refused the last batch of each epoch: 'Expected more than 1 value per channel
    when training'."""
    torch = pytest.importorskip("torch")
    trainer = Trainer(problem, _batchnorm(problem), CONFIG)
    tg = trainer.executor.training_graph
    tensors = {k: torch.tensor(v.copy(), requires_grad=True)
               for k, v in trainer.store.params.items()}
    opt = torch.optim.Adam(list(tensors.values()), lr=CONFIG.lr)
    tensors |= {k: torch.tensor(v.copy()) for k, v in trainer.store.buffers.items()}
    ours, theirs = [], []
    for epoch in range(3):
        for idx in trainer.stream.epoch(epoch):
            x, y = problem.train.X[idx], problem.train.y[idx]
            ours.append(trainer.train_step(x, y, epoch).loss)
            opt.zero_grad()
            loss = torch_forward(tg.graph, tensors, {"x": x, "labels": y}, training=True)["loss"]
            loss.backward()
            opt.step()
            theirs.append(loss.item())
    assert len(ours) == 3 * trainer.stream.batches_per_epoch() == 3 * 3
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)


def test_a_fit_logs_as_many_steps_as_it_counts_none_of_one_row(problem) -> None:
    rec = MemoryRecorder()
    trainer = Trainer(problem, _batchnorm(problem), CONFIG, recorder=rec)
    res = trainer.fit()
    bpe = trainer.stream.batches_per_epoch()
    assert bpe == len(problem.train) // BATCH
    assert res.steps == trainer.total_steps == len(rec.steps) == CONFIG.epochs * bpe
    assert [s.epoch for s in rec.steps] == [e for e in range(CONFIG.epochs) for _ in range(bpe)]
    assert {s.batch_size for s in rec.steps} == {BATCH}
    losses = [h["train_loss"] for h in res.history]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    assert res.metrics["test_accuracy"] > 1 / problem.n_classes  # better than chance


def test_an_adaptive_run_counts_its_epochs_by_the_same_batches(problem) -> None:
    """Its epoch ends (an evaluation each) fell one step later: after the batch of one."""
    rec = MemoryRecorder()
    bpe = len(problem.train) // BATCH
    run = AdaptiveRun(problem, _batchnorm(problem), CONFIG,
                      AdaptConfig(steps=4 * bpe, warmup_steps=0),
                      ProposalPolicy(lambda obs: []), recorder=rec)
    res = run.run()
    assert res.status == "completed" and res.steps == len(rec.steps) == 4 * bpe
    assert {s.batch_size for s in rec.steps} == {BATCH}
    assert [s.epoch for s in rec.steps] == [e for e in range(4) for _ in range(bpe)]
    assert [h["step"] for h in res.history] == [bpe * (e + 1) for e in range(4)]
    assert all(math.isfinite(h["train_loss"]) for h in res.history)


def test_a_position_past_the_epochs_batches_goes_on_at_the_next_epoch(problem) -> None:
    """A checkpoint written when the row was still trained on may sit at its batch."""
    rec = MemoryRecorder()
    bpe = len(problem.train) // BATCH
    run = AdaptiveRun(problem, _batchnorm(problem), CONFIG, AdaptConfig(steps=10, warmup_steps=0),
                      ProposalPolicy(lambda obs: []), recorder=rec)
    run.position = (0, bpe)
    run.step()
    assert (rec.steps[0].epoch, rec.steps[0].batch_size, run.position) == (1, BATCH, (1, 1))


@pytest.mark.cuda
def test_the_gpu_epoch_engine_trains_on_the_batches_the_solo_run_trains_on(problem) -> None:
    """`DeviceEpochs` builds its batch sizes from the stream: the runs trained together log
    what they log alone on the GPU, no step of one row in either."""
    from aicf_induct.runtime.epoch_gpu import DeviceData, DeviceEpochs
    from tests.runtime.many_cases import SPECS, alone, together, trainer
    from tests.runtime.test_many_gpu import same

    cfg = dataclasses.replace(CONFIG, epochs=4, backend="cupy")
    probe = DeviceEpochs(trainer(problem, SPECS[0], cfg, MemoryRecorder()), DeviceData(problem))
    assert probe.sizes == [BATCH] * 3 and probe.n_batches == 3
    cases = [(problem, SPECS[i], dataclasses.replace(cfg, seed=i)) for i in (0, 5)]
    for a, b in zip(alone(cases), together(cases), strict=True):
        same(a, b)
        assert {s.batch_size for s in b.steps} == {BATCH} and len(b.steps) == 4 * 3
