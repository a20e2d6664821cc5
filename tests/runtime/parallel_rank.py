"""One rank of a data-parallel training run, for tests/runtime/test_parallel.py: the toy
problem, an MLP, `steps` steps in the trainer's batch order, a widen rewrite before step
`widen_at` (the same one on every rank: the same rng). Returns (losses, final parameters)."""

from __future__ import annotations

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
               widen_at: int, rows: int = 400) -> tuple[list[float], np.ndarray]:
    problem = toy_problem(n=rows)
    comm: Any = SoloCommunicator() if size == 1 else PipeCommunicator(rank, size, links)
    tr = Trainer(problem, toy_graph(problem, SPEC),
                 TrainConfig(lr=3e-3, batch_size=32, backend="numpy", seed=0),
                 parallel=DataParallel(comm))
    losses: list[float] = []
    for step in range(steps):
        if step == widen_at:
            new = make_transform("widen", units=5).apply(capture(tr, with_grads=True),
                                                         "blocks.0.linear",
                                                         np.random.default_rng(7))
            install(tr, new)
        losses += run_steps(tr, 1)
    comm.barrier()
    return losses, np.array(tr.store.data, copy=True)


def rank_main(rank: int, size: int, link: Connection, result: Connection, steps: int,
              widen_at: int, rows: int) -> None:
    """A rank other than 0, in its own process: its result back through `result`."""
    result.send(train_rank(rank, size, [link], steps, widen_at, rows))
