"""cuda tier: the kernels of the ops beyond MLPs (attention's fused core, embedding, the
numeric tokenizer, conv2d, pool, mean/sum, concat, batched matmul, reshape/transpose) against
the op table's reference on fresh random inputs (new_op_cases.py: fp32 to 1e-5 relative, fp64
to 1e-12, outputs poisoned with NaN), eagerly and replayed from a captured CUDA graph. The
same cases run on the CPU emulator in test_cuda_emulated.py."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.kernels import REGISTRY, KernelQuery
from tests.kernels.cuda_helpers import assert_close
from tests.kernels.new_op_cases import (
    CASES,
    PLAN_SPECS,
    Case,
    embedding_out_of_range,
    plan_steps,
    replay_case,
    run_case,
)

pytestmark = pytest.mark.cuda
cp = pytest.importorskip("cupy")

IDS = [c.id for c in CASES]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_kernel_matches_the_reference(case: Case, dtype: str) -> None:
    run_case(cp, case, dtype)
    cp.cuda.get_current_stream().synchronize()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_and_backward_replay_from_a_cuda_graph(case: Case) -> None:
    """Each kernel is registered capturable: it allocates and synchronises nothing."""
    replay_case(cp, case)


def test_embedding_ids_out_of_range() -> None:
    embedding_out_of_range(cp)


@pytest.mark.parametrize("op,shapes,attrs", [
    ("attention", ((256, 9, 192),), {"heads": 8, "dropout": 0.2, "bias": True}),
    ("attention", ((64, 64, 128),), {"heads": 2, "dropout": 0.0, "bias": True}),
    ("conv2d", ((128, 1, 8, 8),), {"out_channels": 16, "kernel_size": [3, 3],
                                   "stride": [1, 1], "padding": [1, 1], "bias": True}),
    ("matmul", ((32, 8, 9, 24), (32, 8, 24, 9)), {}),
])
def test_the_registry_picks_the_cuda_kernels(op: str, shapes: tuple, attrs: dict) -> None:
    for dtype in ("float32", "float64"):
        for direction in ("fwd", "vjp"):
            k = REGISTRY.select(KernelQuery(op, direction, "cuda", dtype, shapes, attrs))
            assert k.name == f"{op}.{direction}.cuda" and k.capturable


@pytest.mark.parametrize("spec,n_in", PLAN_SPECS)
def test_family_plans_match_the_numpy_plans(spec: str, n_in: int) -> None:
    plan_steps(cp, spec, n_in, steps=3)


@pytest.mark.parametrize("spec,n_in", PLAN_SPECS)
def test_family_steps_are_captured_whole_and_match_numpy(spec: str, n_in: int) -> None:
    """FT-Transformer and CNN training steps (forward, loss, backward, Adam) run as one CUDA
    graph replay each and move the parameters as the NumPy runtime does."""
    from aicf_induct.frontend.families import parse_spec, spec_graph
    from aicf_induct.runtime.cuda_step import CudaStep
    from aicf_induct.runtime.executor import Executor, store_for
    from aicf_induct.runtime.optimizers import make_optimizer

    graph = spec_graph(parse_spec(spec), n_in, 3)
    ref = Executor(graph, store_for(graph, seed=1), loss="cross_entropy", seed=4)
    gpu = Executor(graph, store_for(graph, seed=1, xp=cp), loss="cross_entropy", seed=4,
                   device="cuda", xp=cp, fuse=True)
    o_ref, o_gpu = make_optimizer("adam", lr=0.01), make_optimizer("adam", lr=0.01)
    step = CudaStep(gpu, o_gpu, clip_norm=0.0, graphs=True)
    rng = np.random.default_rng(0)
    for k in range(4):
        x, y = rng.normal(size=(24, n_in)), rng.integers(0, 3, size=24)
        loss_ref = ref.train_step(x, y, k)
        o_ref.step(ref.store, 0.01)
        s = step.run(x, y, k, 0.01)
        assert s is not None
        np.testing.assert_allclose(s.loss, loss_ref, rtol=1e-10)
        assert_close(gpu.store.data, ref.store.data, 1e-10, f"{spec} theta after step {k}")
    assert step.captured, step.graph_error
