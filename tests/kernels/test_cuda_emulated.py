"""The new ops' CUDA launchers and kernels run on the CPU emulator (cuda_emulator.py: the
sources built for the host against cuda_emu.h, GEMMs as cuBLAS's contract in NumPy) against
the op table's reference: the cases the cuda tier runs on the GPU (new_op_cases.py), so
indexing, layout and argument mistakes show without a device."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.kernels.cuda_emulator import cache_dir, compiler, emulated
from tests.kernels.new_op_cases import (
    CASES,
    PLAN_SPECS,
    Case,
    embedding_out_of_range,
    plan_steps,
    replay_case,
    run_case,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dev() -> Iterator[Any]:
    if compiler() is None:
        pytest.skip("no host C++ compiler")
    with emulated(cache_dir()) as cp:  # builds kept between runs
        yield cp


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_kernel_matches_the_reference(dev: Any, case: Case, dtype: str) -> None:
    run_case(dev, case, dtype)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_replay_from_a_captured_graph(dev: Any, case: Case) -> None:
    """The emulator records what a capture would (launches, GEMMs, fills, copies), refuses
    allocation during it, and replays."""
    replay_case(dev, case)


def test_embedding_ids_out_of_range(dev: Any) -> None:
    embedding_out_of_range(dev)


@pytest.mark.parametrize("spec,n_in", PLAN_SPECS)
def test_family_plans_match_the_numpy_plans(dev: Any, spec: str, n_in: int) -> None:
    plan_steps(dev, spec, n_in, steps=1)  # one step: emulated threads are slow
