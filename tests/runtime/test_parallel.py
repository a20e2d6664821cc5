"""Data parallel on the CPU (`runtime.parallel`): ranks as processes joined by pipes train
the one-rank run, to float64 rounding, across a widen rewrite, and hold the same parameters
bit for bit, a rank with an empty share included; the shares cover every row once."""

from __future__ import annotations

import multiprocessing
import zlib

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.runtime.parallel import (
    PipeCommunicator,
    pipe_ranks,
    shard_bounds,
)
from tests.runtime.parallel_rank import rank_main, train_rank

STEPS, WIDEN_AT = 200, 100


@pytest.mark.parametrize("n", [0, 1, 2, 7, 16, 32, 33])
@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_shares_cover_every_row_once_and_differ_by_one_at_most(n: int, size: int) -> None:
    bounds = [shard_bounds(n, r, size) for r in range(size)]
    rows = [i for a, b in bounds for i in range(a, b)]
    assert rows == list(range(n))
    sizes = [b - a for a, b in bounds]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def run_ranks(size: int, rows: int = 400, backend: str = "numpy"
              ) -> list[tuple[list[float], np.ndarray]]:
    """Rank 0 here, ranks 1.. in spawned processes: each one's (losses, parameters)."""
    ctx = multiprocessing.get_context("spawn")
    root_links, links = pipe_ranks(size, ctx)
    results = [ctx.Pipe(duplex=False) for _ in range(size - 1)]
    procs = [ctx.Process(target=rank_main, args=(r + 1, size, links[r], results[r][1],
                                                   STEPS, WIDEN_AT, rows, backend),
                         daemon=True)
             for r in range(size - 1)]
    for p in procs:
        p.start()
    try:
        out = [train_rank(0, size, root_links, STEPS, WIDEN_AT, rows, backend)]
        out += [recv.recv() for recv, _ in results]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs)
    return out


@pytest.mark.parametrize("size,rows", [(2, 400), (3, 400), (2, 375)])
def test_ranks_train_the_one_rank_run_across_a_widen(size: int, rows: int) -> None:
    solo_losses, solo_params = train_rank(0, 1, [], STEPS, WIDEN_AT, rows)
    ranks = run_ranks(size, rows)
    # 240 training rows: batches of 32 and an epoch's last of 16 split 16/16 or 11/11/10 and
    # 6/5/5; 225 rows: the last row alone is left out of its epoch (`BatchStream._last`)
    for losses, params in ranks:
        assert losses == ranks[0][0]  # every rank reduces to the same numbers
        assert params.tobytes() == ranks[0][1].tobytes()
    np.testing.assert_allclose(ranks[0][0], solo_losses, rtol=1e-10, atol=0)
    np.testing.assert_allclose(ranks[0][1], solo_params, rtol=0, atol=1e-10)
    assert ranks[0][1].size > 8 * 8 + 8 + 8 * 3 + 3  # the widen happened


def test_links_must_match_the_rank() -> None:
    with pytest.raises(ConfigError, match="rank 0 of 3 needs 2 link"):
        PipeCommunicator(0, 3, [])


def test_every_rank_follows_rank_0s_evaluation() -> None:
    # rank 1's own evaluation would stop it after two epochs, while rank 0 goes on: the
    # ranks must take rank 0's word, or rank 0 waits on a rank that has finished
    from aicf_induct.runtime.ranks import run_ranks
    from tests.runtime.parallel_rank import opinionated_trainer, worsening_rank

    result = run_ranks(2, lambda comm: opinionated_trainer(comm, worsening=False).fit(),
                       worsening_rank, None)
    assert (result.status, result.epochs) == ("completed", 6)


def test_each_rank_draws_its_own_dropout_masks_and_rank_0_those_of_one_rank() -> None:
    """Every rank keyed its masks by (seed, step, node) alone, so with equal shares each
    rank dropped the same units of its rows as every other: the ranks' masks were one mask
    repeated. The rank is in the key now, above the node's word; rank 0's key, and so a
    one-rank run's masks, are what they were."""
    from multiprocessing import Pipe

    from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
    from aicf_induct.ir.ops.base import OpContext
    from aicf_induct.problems import load_problem
    from aicf_induct.runtime.executor import Executor, store_for
    from aicf_induct.runtime.parallel import DataParallel
    from aicf_induct.runtime.trainer import TrainConfig, Trainer

    def mask(rank: int) -> np.ndarray:
        return OpContext(seed=3, step=5, node_id="drop", rank=rank).rng().random(64)

    assert not np.array_equal(mask(0), mask(1))
    was = np.random.Generator(np.random.Philox(key=[(3 << 32) | 5, zlib.crc32(b"drop")]))
    np.testing.assert_array_equal(mask(0), was.random(64))  # rank 0: the key as it was

    p = load_problem("iris", seed=0)
    g = mlp_graph(parse_model_spec("mlp:dropout=0.5"), p.n_features, p.n_outputs)
    x, y = p.train.X[:32], p.train.y[:32]
    losses = {}
    for rank in (None, 0, 1):
        kw = {} if rank is None else {"rank": rank}
        ex = Executor(g, store_for(g, seed=0), seed=0, **kw)
        losses[rank] = ex.train_step(x, y, 0)
    assert losses[None] == losses[0] != losses[1]
    a, _ = Pipe()
    trainer = Trainer(p, g, TrainConfig(epochs=1),
                      parallel=DataParallel(PipeCommunicator(1, 2, [a])))
    assert trainer.executor.rank == 1
