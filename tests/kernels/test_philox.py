"""The dropout RNG written out (Philox4x64-10) reproduces NumPy's Philox generator, so the
CUDA kernel, which follows the same steps, can reproduce the reference's masks."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from aicf_induct.ir.ops import OpContext
from aicf_induct.kernels.cuda.philox import uniform


# seeds from 2**31 put a key word at 2**63 or more, which a Python list gave NumPy's Philox
# through float64: the step's low bits were lost, and the masks repeated from step to step
@pytest.mark.parametrize("seed,step,node", [(0, 0, "d"), (3, 17, "drop1"), (7, 2**32 - 1, "x"),
                                             (2**31 - 1, 12345, "blocks.2.dropout"),
                                             (2**31, 1, "d"), (3_000_000_000, 7, "d"),
                                             (2**32 - 1, 2**32 - 1, "x")])
def test_uniform_matches_the_reference_generator(seed: int, step: int, node: str) -> None:
    ctx = OpContext(seed=seed, step=step, node_id=node)
    ref = ctx.rng().random(1003)
    key = (((seed & 0xFFFFFFFF) << 32) | (step & 0xFFFFFFFF), zlib.crc32(node.encode()))
    np.testing.assert_array_equal(uniform(key, 1003), ref)


def test_short_draws_are_prefixes() -> None:
    a, b = uniform((5, 6), 3), uniform((5, 6), 11)
    np.testing.assert_array_equal(a, b[:3])


@pytest.mark.parametrize("seed", [0, 2**31 - 1, 2**31, 2**32 - 1])
def test_every_step_draws_another_mask_whatever_the_seed(seed: int) -> None:
    draws = {OpContext(seed=seed, step=step, node_id="d").rng().random(4).tobytes()
             for step in range(16)}
    assert len(draws) == 16
