"""Data parallel on the CPU (`runtime.parallel`): ranks as processes joined by pipes train
the one-rank run, to float64 rounding, across a widen rewrite, and hold the same parameters
bit for bit, a rank with an empty share included; the shares cover every row once."""

from __future__ import annotations

import multiprocessing

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
