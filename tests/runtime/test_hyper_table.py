"""The GPU engine's epoch table of optimizer terms (`cuda_step.fill_hyper_steps`) is the
per-step loop's (`fill_hyper` after raising the step counts), bit for bit: a pure NumPy
function, so it is checked here, without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.runtime.cuda_step import HYPER_FIXED, fill_hyper, fill_hyper_steps, segments
from aicf_induct.runtime.optimizers import make_optimizer
from aicf_induct.runtime.params import ParamStore

SHAPES = {"w1": (5, 3), "b1": (3,), "w2": (3, 2), "b2": (2,)}


def _bound(name: str, kw: dict, counts: list[int]):
    store = ParamStore.from_arrays({k: np.zeros(s) for k, s in SHAPES.items()})
    opt = make_optimizer(name, lr=0.01, **kw)
    opt.bind(store)
    opt._steps[:] = counts
    return opt, store


@pytest.mark.parametrize("name,kw", [("adam", {}), ("adamw", {"weight_decay": 0.01}),
                                     ("adam", {"betas": (0.8, 0.95), "weight_decay": 1e-4}),
                                     ("sgd", {"momentum": 0.9})])
@pytest.mark.parametrize("counts", [[0, 0, 0, 0], [7, 7, 7, 7], [4, 4, 0, 2]])
@pytest.mark.parametrize("n", [0, 1, 37, 2500])
def test_an_epochs_table_is_the_per_step_loops_bit_for_bit(name: str, kw: dict,
                                                          counts: list[int], n: int) -> None:
    loop_opt, store = _bound(name, kw, counts)
    table_opt, _ = _bound(name, kw, counts)
    segs = segments(loop_opt, store)
    width = HYPER_FIXED + 2 * len(segs)
    rng = np.random.default_rng()
    lrs = rng.uniform(1e-4, 1e-2, size=n)
    first = int(rng.integers(0, 10_000))
    want = np.zeros((max(n, 1), width))
    for k in range(n):
        loop_opt._steps += 1
        fill_hyper(want[k], loop_opt, store, segs, float(lrs[k]), first + k)
    got = np.zeros((max(n, 1), width))
    fill_hyper_steps(got, table_opt, store, segs, lrs, first)
    assert got.tobytes() == want.tobytes()
    assert list(table_opt._steps) == list(loop_opt._steps)
