"""How the one-kernel MLP step splits its GEMMs and which schedules it offers (CPU: pure
sizing arithmetic; the kernel itself is tested in the cuda tier)."""

from __future__ import annotations

import itertools

import pytest

from aicf_induct.kernels.cuda.mlp_step import (
    MAX_STAGES,
    TILE,
    StepLayer,
    StepSpec,
    cdiv,
    schedules_for,
    shared_layout,
    split_counts,
    stage_elements,
)


def _phase_cost(gemms, counts, split_cost) -> int:
    """The cost model split_counts minimises: a phase costs its dearest item."""
    return max(cdiv(ch, s) + (split_cost if s > 1 else 0)
               for (_, ch), s in zip(gemms, counts, strict=True))


@pytest.mark.parametrize("split_cost", [0, 6, 10])
@pytest.mark.parametrize("gemms,grid", [
    ([(4, 8)], 32), ([(64, 16), (128, 8)], 256), ([(128, 8)], 132), ([(1, 1)], 8),
    ([(16, 2), (16, 2), (2, 8)], 32), ([(500, 40)], 100), ([(16, 16)], 256),
    ([(8, 16), (128, 1)], 256),
])
def test_splits_are_the_cheapest_that_fill_one_wave(gemms, grid, split_cost) -> None:
    counts = split_counts(gemms, grid, split_cost)
    items = sum(t * s for (t, _), s in zip(gemms, counts, strict=True))
    for (_, chunks), s in zip(gemms, counts, strict=True):
        assert 1 <= s <= chunks
    if items > grid:  # only when even unsplit GEMMs overflow the wave
        assert counts == [1] * len(gemms) and sum(t for t, _ in gemms) > grid
        return
    # no other splits that fit the wave are cheaper (brute force over every choice)
    best = _phase_cost(gemms, counts, split_cost)
    for alt in itertools.product(*(range(1, ch + 1) for _, ch in gemms)):
        if sum(t * s for (t, _), s in zip(gemms, alt, strict=True)) <= grid:
            assert _phase_cost(gemms, list(alt), split_cost) >= best, (alt, counts)


def test_a_dear_reduction_keeps_tiles_whole() -> None:
    """Size 1 of step_gpu.py on 256 blocks: a hidden layer's forward (128 tiles of 8 chunks)
    is split in two when a reduction is free, kept whole when it costs 6 chunks; a lone
    16-chunk GEMM of 16 tiles is still split."""
    assert split_counts([(128, 8)], 256, 0) == [2]
    assert split_counts([(128, 8)], 256, 6) == [1]
    assert split_counts([(16, 16)], 256, 6) == [16]
    assert split_counts([(16, 16)], 256, 20) == [1]  # dearer than the chunks it saves


def _chain(batch: int, widths: list[int]) -> StepSpec:
    layers, at = [], 0
    for a, b in itertools.pairwise(widths):
        layers.append(StepLayer(a, b, at, at + a * b))
        at += a * b + b
    return StepSpec(batch, tuple(layers), "relu", {}, 0.0)


def test_schedules_offered_by_size_and_device() -> None:
    small, mid = _chain(256, [16, 64, 64, 2]), _chain(512, [64, 256, 256, 256, 256, 10])
    assert schedules_for(small, 80) == ["layers", "rows"]
    assert schedules_for(mid, 80) == ["layers"]
    # thread-block clusters from sm_90
    assert schedules_for(small, 90) == ["layers", "rows", "clusters"]
    assert schedules_for(mid, 90) == ["layers", "clusters"]
    assert schedules_for(_chain(4096, [256, 1024, 1024, 1024, 1024, 10]), 90) == []


@pytest.mark.parametrize("itemsize", [4, 8])
@pytest.mark.parametrize("schedule", ["layers", "rows", "clusters"])
@pytest.mark.parametrize("budget", [20 << 10, 48 << 10, 96 << 10, 192 << 10])
def test_stages_fill_the_budget_and_the_reductions_fit(itemsize, schedule, budget) -> None:
    n1, n2, nbytes = shared_layout(itemsize, budget, schedule)
    assert stage_elements(1) == 2 * TILE * (TILE + 8)  # the kernel's padded A and B tiles
    widths = {1: n1, 2: n2} if schedule == "rows" else {1: n1}
    if schedule != "rows":
        assert n2 == 1  # no 64-wide tiles: nothing reserved for them
    for nj, n in widths.items():
        assert 1 <= n <= MAX_STAGES
        assert n * stage_elements(nj) * itemsize <= nbytes
        if n < MAX_STAGES and n > 1:  # one more stage would not fit the budget
            assert (n + 1) * stage_elements(nj) * itemsize > budget
    assert nbytes >= (3 * TILE * (TILE + 1) + 4 * TILE) * itemsize
    assert nbytes <= max(budget, max(stage_elements(nj) for nj in widths) * itemsize,
                         (3 * TILE * (TILE + 1) + 4 * TILE) * itemsize)
