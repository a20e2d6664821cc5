"""cuda tier: data parallel over NCCL (`runtime.parallel.NcclCommunicator`, the ranks' sum
inside the captured step). On one GPU, a one-rank NCCL run is the plain run, bit for bit; on
two or more GPUs (skipped with fewer), ranks as processes train the one-GPU run, to float64
rounding, across a widen rewrite, and hold the same parameters bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.parallel_rank import BN_STEPS, gpu_batchnorm_shares, train_rank
from tests.runtime.test_parallel import STEPS, WIDEN_AT, run_ranks

pytestmark = pytest.mark.cuda
cp = pytest.importorskip("cupy")


def test_one_rank_over_nccl_is_the_plain_gpu_run() -> None:
    plain = train_rank(0, 1, [], 60, 30, backend="cupy", parallel=False)
    nccl = train_rank(0, 1, [], 60, 30, backend="cupy")
    assert nccl[0] == plain[0]
    assert nccl[1].tobytes() == plain[1].tobytes()


def test_the_sum_is_inside_the_captured_step() -> None:
    from aicf_induct.runtime.parallel import DataParallel, NcclCommunicator, SoloCommunicator
    from aicf_induct.runtime.trainer import TrainConfig, Trainer
    from tests.runtime.test_adaptive_fixtures import run_steps, toy_graph, toy_problem

    problem = toy_problem(n=400)
    tr = Trainer(problem, toy_graph(problem), TrainConfig(backend="cupy", batch_size=32),
                 parallel=DataParallel(NcclCommunicator(SoloCommunicator())))
    run_steps(tr, 3)
    assert tr._gpu_step.captured, tr._gpu_step.graph_error


@pytest.mark.skipif(cp.cuda.runtime.getDeviceCount() < 2, reason="needs 2 GPUs")
def test_two_gpus_train_the_one_gpu_run_across_a_widen() -> None:
    solo_losses, solo_params = train_rank(0, 1, [], STEPS, WIDEN_AT, backend="cupy",
                                          parallel=False)
    ranks = run_ranks(2, backend="cupy")
    for losses, params in ranks:
        assert losses == ranks[0][0]
        assert params.tobytes() == ranks[0][1].tobytes()
    np.testing.assert_allclose(ranks[0][0], solo_losses, rtol=1e-9, atol=0)
    np.testing.assert_allclose(ranks[0][1], solo_params, rtol=0, atol=1e-9)


@pytest.mark.skipif(cp.cuda.runtime.getDeviceCount() < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize("batch,per_step", [(3, [[3, 0]] * 8),
                                             (5, [[3, 2]] * 4 + [[2, 2]])])
def test_two_gpus_with_batchnorm_share_no_row_alone(batch: int,
                                                    per_step: list[list[int]]) -> None:
    """With batchnorm no rank takes one row (24 training rows): batches of 3 go to rank 0
    alone from the first step on (rank 1 must still build its step and join the ranks' first
    sum: the run hung before), batches of 5 split 3/2 and an epoch's last of 4 rows 2/2."""
    from aicf_induct.runtime.ranks import run_ranks as gpu_ranks

    payload = (BN_STEPS, batch)
    rows, losses = gpu_ranks(2, lambda comm: gpu_batchnorm_shares(comm, payload),
                             gpu_batchnorm_shares, payload, gpus=True)
    assert np.isfinite(losses).all()
    assert rows.T.tolist() == (per_step * 2)[:BN_STEPS]
