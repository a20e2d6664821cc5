"""One rank of a data-parallel training run, for tests/runtime/test_parallel.py (CPU) and
test_parallel_gpu.py (GPUs, NCCL): the toy problem, an MLP, `steps` steps in the trainer's
batch order, a widen rewrite before step `widen_at` (the same one on every rank: the same
rng). Returns (losses, final parameters on the host)."""

from __future__ import annotations

from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from aicf_induct.runtime.model_state import capture, install
from aicf_induct.runtime.parallel import DataParallel, PipeCommunicator, SoloCommunicator
from aicf_induct.runtime.trainer import TrainConfig, Trainer
from aicf_induct.runtime.transforms import make_transform
from tests.runtime.test_adaptive_fixtures import run_steps, toy_graph, toy_problem

SPEC = "mlp:depth=2,width=8"


def train_rank(rank: int, size: int, links: list[Connection], steps: int,
               widen_at: int, rows: int = 400, backend: str = "numpy",
               parallel: bool = True) -> tuple[list[float], np.ndarray]:
    """`backend` cupy: rank r on GPU r, the ranks' sum over NCCL (`parallel` False: no
    DataParallel at all, the plain one-GPU run)."""
    problem = toy_problem(n=rows)
    comm: Any = SoloCommunicator() if size == 1 else PipeCommunicator(rank, size, links)
    if backend == "cupy":
        import cupy

        from aicf_induct.runtime.parallel import NcclCommunicator

        cupy.cuda.Device(rank).use()
        comm = NcclCommunicator(comm)
    tr = Trainer(problem, toy_graph(problem, SPEC),
                 TrainConfig(lr=3e-3, batch_size=32, backend=backend, seed=0),
                 parallel=DataParallel(comm) if parallel else None)
    losses: list[float] = []
    for step in range(steps):
        if step == widen_at:
            new = make_transform("widen", units=5).apply(capture(tr, with_grads=True),
                                                         "blocks.0.linear",
                                                         np.random.default_rng(7))
            install(tr, new)
        losses += run_steps(tr, 1)
    comm.barrier()
    return losses, tr.backend.to_host(tr.store.data).copy()


def rank_main(rank: int, size: int, link: Connection, result: Connection, steps: int,
              widen_at: int, rows: int, backend: str = "numpy") -> None:
    """A rank other than 0, in its own process: its result back through `result`."""
    result.send(train_rank(rank, size, [link], steps, widen_at, rows, backend))


def failing_rank(comm: Any, payload: str) -> None:
    """A rank that joins one sum, then fails (`payload` "raise") or dies ("exit")."""
    comm.allreduce_sum_(np.ones(1))
    if payload == "raise":
        raise ValueError("boom on this rank")
    import os

    os._exit(3)


def summing_rank(comm: Any, payload: float) -> None:
    comm.allreduce_sum_(np.full(2, payload))


def opinionated_trainer(comm: Any, worsening: bool) -> Trainer:
    """A data-parallel trainer (toy problem, patience 1, 6 epochs) whose own evaluation says
    the validation loss falls every epoch, or (`worsening`) rises: left to itself, the
    worsening one stops after two epochs, the other never."""
    problem = toy_problem(n=200)
    tr = Trainer(problem, toy_graph(problem, SPEC),
                 TrainConfig(epochs=6, patience=1, batch_size=32, backend="numpy"),
                 parallel=DataParallel(comm))
    calls = iter(range(1000))

    def evaluate(split: Any) -> tuple[float, float]:
        k = next(calls)
        return (float(k) if worsening else 1.0 / (k + 1)), 0.5

    tr.evaluate = evaluate  # type: ignore[method-assign]
    return tr


def worsening_rank(comm: Any, payload: None) -> None:
    opinionated_trainer(comm, worsening=True).fit()


BN_STEPS = 10  # two epochs of 24 training rows in batches of 5: four of 5, one of 4


@dataclass
class CountingShares(DataParallel):
    """A rank's DataParallel that counts the rows of each share it takes."""

    rows: list[int] = field(default_factory=list)

    def shard(self, x: Any, y: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        xs, ys = super().shard(x, y, *args, **kwargs)
        self.rows.append(len(xs))
        return xs, ys


def batchnorm_shares(comm: Any, steps: int, backend: str = "numpy",
                     batch_size: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """A batchnorm MLP trained `steps` steps in batches of `batch_size` on 24 training rows;
    on rank 0, every rank's (rank, step) share rows and losses (summed over the ranks: each
    fills its own row)."""
    problem = toy_problem(n=40)
    dp = CountingShares(comm)
    tr = Trainer(problem, toy_graph(problem, "mlp:depth=2,width=8,norm=batchnorm"),
                 TrainConfig(lr=3e-3, batch_size=batch_size, backend=backend, seed=0),
                 parallel=dp)
    losses = run_steps(tr, steps)
    out = np.zeros((2, comm.size, steps))
    out[0, comm.rank], out[1, comm.rank] = dp.rows, losses
    comm.allreduce_sum_(out)
    return out[0].astype(int), out[1]


def gpu_batchnorm_shares(comm: Any, payload: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """`batchnorm_shares` on the GPUs: payload (steps, batch size)."""
    return batchnorm_shares(comm, payload[0], "cupy", payload[1])


class _FailingTrainer(Trainer):
    """A trainer that fails at step 5 ("mid") or in its final evaluation ("end")."""

    fail_at = "mid"

    def train_step(self, x: Any, y: Any, epoch: int) -> Any:
        if self.fail_at == "mid" and self.step_count == 5:
            raise MemoryError("out of memory on this rank (simulated)")
        return super().train_step(x, y, epoch)

    def final_metrics(self, evaluate: Any = None) -> dict[str, float]:
        if self.fail_at == "end":
            raise MemoryError("out of memory evaluating (simulated)")
        return super().final_metrics(evaluate)


def iris_trainer(comm: Any, recorder: Any = None, fail_at: str | None = None) -> Trainer:
    """A small data-parallel trainer on iris; with `fail_at` one that fails there."""
    from aicf_induct.frontend.families import parse_spec, spec_graph
    from aicf_induct.problems import load_problem

    p = load_problem("iris", seed=0)
    g = spec_graph(parse_spec("mlp:depth=1,width=8"), p.n_features, p.n_outputs)
    cls = Trainer
    if fail_at is not None:
        cls = type("Failing", (_FailingTrainer,), {"fail_at": fail_at})
    return cls(p, g, TrainConfig(epochs=3, batch_size=16, backend="numpy"),
               recorder=recorder, parallel=DataParallel(comm))


def failing_trainer_rank(comm: Any, fail_at: str) -> None:
    iris_trainer(comm, fail_at=fail_at).fit()


def talking_rank(comm: Any, payload: None) -> None:
    """A rank that prints, warns and then sums: rank 0 speaks for the run, not it."""
    import sys
    import warnings

    print("a note from rank 1")
    print("note: on stderr from rank 1", file=sys.stderr)
    warnings.warn("a warning from rank 1", RuntimeWarning, stacklevel=1)
    comm.allreduce_sum_(np.ones(1))


def stopping_rank(comm: Any, payload: None) -> None:
    """A rank that joins one sum, then stops itself (SIGSTOP, as a debugger or Ctrl-Z would)."""
    import os
    import signal

    comm.allreduce_sum_(np.ones(1))
    os.kill(os.getpid(), signal.SIGSTOP)
