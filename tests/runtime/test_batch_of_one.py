"""No training step of a model with batchnorm sees one row (its variance over one row is 0;
PyTorch refuses such a batch in training): batch_size 1 or a training split of one row is
refused when the trainer is built (in one line from the CLI), a rewrite that would bring
batchnorm to such a run is not adopted, and a data-parallel rank's share of a batch is
never one row (`shard_bounds(least=2)`), full batches and an epoch's short last one alike."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from aicf_induct.cli.main import main
from aicf_induct.errors import ConfigError
from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.problems.problem import Split
from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
from aicf_induct.runtime.guard import GuardConfig
from aicf_induct.runtime.parallel import shard_bounds
from aicf_induct.runtime.policies import Proposal, ProposalPolicy
from aicf_induct.runtime.ranks import run_ranks
from aicf_induct.runtime.trainer import TrainConfig, Trainer
from tests.runtime.parallel_rank import BN_STEPS, batchnorm_shares
from tests.runtime.test_adaptive_fixtures import toy_graph, toy_problem

BN = "mlp:depth=2,width=8,norm=batchnorm"


def test_batch_size_1_with_batchnorm_is_refused_in_one_line() -> None:
    problem = toy_problem(n=60)
    with pytest.raises(ConfigError, match=r"^batch_size 1: the model has batchnorm") as err:
        Trainer(problem, toy_graph(problem, BN), TrainConfig(batch_size=1))
    assert "\n" not in str(err.value) and "batch_size 2 or more" in str(err.value)


def test_batch_size_1_without_batchnorm_still_trains() -> None:
    problem = toy_problem(n=60)
    res = Trainer(problem, toy_graph(problem), TrainConfig(batch_size=1, epochs=1)).fit()
    assert res.steps == len(problem.train)


def test_a_training_split_of_one_row_with_batchnorm_is_refused() -> None:
    problem = toy_problem(n=60)
    one = dataclasses.replace(problem, train=Split(problem.train.X[:1], problem.train.y[:1]))
    with pytest.raises(ConfigError, match="train split: one row: the model has batchnorm"):
        Trainer(one, toy_graph(one, BN), TrainConfig(batch_size=8))
    Trainer(one, toy_graph(one), TrainConfig(batch_size=8))  # without batchnorm: fine


@pytest.mark.parametrize("command", ["train", "adapt"])
def test_the_cli_says_it_in_one_line(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--no-log", "--quiet", "--dataset", "iris", "--model",
                 "mlp:depth=1,width=8,norm=batchnorm", "--batch-size", "1"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: batch_size 1: the model has batchnorm")
    assert err.count("\n") == 1
    assert out == ""  # adapt's header does not say it starts what it refuses


def test_a_rewrite_bringing_batchnorm_to_batches_of_one_is_not_adopted() -> None:
    problem = toy_problem(n=100)
    start = toy_graph(problem)

    def batchnorm_at_warmup(obs):  # type: ignore[no-untyped-def]
        if obs.fired.trigger == "warmup":
            return [Proposal("normalize", "blocks.0.linear", {"kind": "batchnorm"}, 1.0, "test")]
        return []

    rec = MemoryRecorder()
    run = AdaptiveRun(problem, start, TrainConfig(lr=1e-2, batch_size=1), AdaptConfig(
        steps=30, warmup_steps=10, guard=GuardConfig(steps=5)),
        ProposalPolicy(batchnorm_at_warmup), recorder=rec)
    res = run.run()
    rewrites = [e for e in rec.events if e.kind == "rewrite"]
    assert [e.name for e in rewrites] == ["normalize"]
    assert "batch_size 1: the model has batchnorm" in rewrites[0].detail["error"]
    assert res.rewrites == 0 and fingerprint(res.graph) == fingerprint(start)


@pytest.mark.parametrize("n", range(0, 20))
@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_batchnorm_shares_are_never_one_row(n: int, size: int) -> None:
    sizes = [b - a for a, b in (shard_bounds(n, r, size, least=2) for r in range(size))]
    starts = [shard_bounds(n, r, size, least=2)[0] for r in range(size)]
    assert starts == [sum(sizes[:r]) for r in range(size)] and sum(sizes) == n  # contiguous
    held = [s for s in sizes if s]
    assert sizes == sorted(sizes, reverse=True) and max(held, default=0) - min(held, default=0) <= 1
    if n >= 2:  # as many ranks hold rows as can hold two each
        assert min(held) >= 2 and len(held) == min(size, n // 2)
    # least=1 is the even split every rank shares
    assert [shard_bounds(n, r, size) for r in range(size)] == \
        [shard_bounds(n, r, size, least=1) for r in range(size)]


def test_pipe_ranks_never_train_batchnorm_on_one_row() -> None:
    # batches of 5 over 4 ranks (an even split: 2/1/1/1) and an epoch's last batch of 4
    # (1/1/1/1): with batchnorm, 3/2/0/0 and 2/2/0/0
    rows, losses = run_ranks(4, lambda comm: batchnorm_shares(comm, BN_STEPS),
                             batchnorm_shares, BN_STEPS)
    assert rows.shape == (4, BN_STEPS) and np.isfinite(losses).all()
    assert 1 not in rows
    assert rows.sum(axis=0).tolist() == [5, 5, 5, 5, 4] * (BN_STEPS // 5)
    assert rows[:, 0].tolist() == [3, 2, 0, 0] and rows[:, 4].tolist() == [2, 2, 0, 0]
