"""Learning-rate schedules against torch.optim.lr_scheduler, step by step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.runtime.schedules import (
    ConstantLR,
    CosineLR,
    Schedule,
    WarmupLR,
    lr_range,
    make_schedule,
)


def _torch_lrs(lr: float, steps: int, make: Callable[[Any, Any], Any]) -> list[float]:
    """The lr torch's optimizer uses at each of `steps` steps under scheduler `make`."""
    torch = pytest.importorskip("torch")
    opt = torch.optim.SGD([torch.zeros(1, dtype=torch.float64, requires_grad=True)], lr=lr)
    sched = make(torch.optim.lr_scheduler, opt)
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


def _ours(schedule: Schedule, steps: int) -> list[float]:
    return [schedule.lr(t) for t in range(steps)]


def _assert_close(ours: list[float], theirs: list[float], lr: float) -> None:
    # absolute in units of the peak lr: torch's recursive forms drift where lr nears 0
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12 * lr)


def test_constant() -> None:
    assert _ours(ConstantLR(0.1), 5) == [0.1] * 5
    assert make_schedule("constant", 0.1, 10).lr(9) == 0.1


@pytest.mark.torch
@pytest.mark.parametrize(("total", "min_lr"), [(100, 0.0), (37, 1e-3)])
def test_cosine_matches_cosine_annealing(total: int, min_lr: float) -> None:
    theirs = _torch_lrs(0.1, total + 1, lambda s, o: s.CosineAnnealingLR(o, total, min_lr))
    ours = _ours(CosineLR(0.1, total, min_lr), total + 1)
    _assert_close(ours, theirs, 0.1)
    assert ours[0] == 0.1 and ours[-1] == pytest.approx(min_lr, abs=1e-15)


def test_cosine_stays_at_min_after_total() -> None:
    schedule = CosineLR(0.1, 10, 0.01)
    assert schedule.lr(10) == schedule.lr(11) == schedule.lr(1000) == pytest.approx(0.01)


@pytest.mark.torch
@pytest.mark.parametrize(("total", "warmup", "min_lr"), [(100, 10, 0.0), (50, 1, 1e-4)])
def test_warmup_cosine_matches_sequential_lr(total: int, warmup: int, min_lr: float) -> None:
    def make(s: Any, o: Any) -> Any:
        ramp = s.LinearLR(o, start_factor=1 / (warmup + 1), end_factor=1.0, total_iters=warmup)
        cosine = s.CosineAnnealingLR(o, total - warmup, min_lr)
        return s.SequentialLR(o, [ramp, cosine], milestones=[warmup])

    theirs = _torch_lrs(0.1, total, make)
    _assert_close(_ours(make_schedule("cosine", 0.1, total, warmup, min_lr), total), theirs, 0.1)


@pytest.mark.torch
def test_warmup_constant_matches_linear_lr() -> None:
    theirs = _torch_lrs(0.2, 30, lambda s, o: s.LinearLR(o, 1 / 9, 1.0, total_iters=8))
    _assert_close(_ours(make_schedule("constant", 0.2, 30, warmup_steps=8), 30), theirs, 0.2)


def test_warmup_ramp_shape() -> None:
    lrs = _ours(WarmupLR(ConstantLR(1.0), 4), 6)
    assert lrs == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0, 1.0])  # no zero step, one peak
    assert _ours(WarmupLR(ConstantLR(1.0), 0), 3) == [1.0] * 3


def test_negative_step_raises() -> None:
    with pytest.raises(ValueError, match="step"):
        CosineLR(0.1, 10).lr(-1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("linear", 0.1, 10), "unknown schedule 'linear'"),
        (("cosine", -0.1, 10), "learning rate"),
        (("cosine", 0.1, 0), "total_steps"),
        (("cosine", 0.1, 10.5), "total_steps"),
        (("cosine", 0.1, 10, -1), "warmup_steps"),
        (("cosine", 0.1, 10, 10), "below total_steps"),
        (("cosine", 0.1, 10, 0, 0.2), "min_lr"),
        (("constant", float("inf"), 10), "learning rate"),
    ],
)
def test_bad_schedule_raises_config_error(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_schedule(*args)


@pytest.mark.parametrize("schedule", [ConstantLR(0.01), CosineLR(0.1, 20, 0.001),
                                      WarmupLR(CosineLR(0.1, 20), 5), WarmupLR(ConstantLR(0.3), 3)])
def test_a_range_of_learning_rates_is_the_per_step_ones_bit_for_bit(schedule) -> None:
    for start, n in ((0, 30), (7, 5), (25, 0)):
        expected = [schedule.lr(start + k) for k in range(n)]
        assert lr_range(schedule, start, n).tolist() == expected
    with pytest.raises(ValueError, match="step must be >= 0"):
        lr_range(schedule, -1, 3)
