"""Learning-rate schedules: `lr(step)` for the 0-based optimizer step about to be taken.

Closed forms, not torch's recursive ones; they agree with torch's schedulers to rounding:
- ConstantLR(lr): lr (torch: no scheduler).
- CosineLR(lr, T, min_lr): min_lr + (lr - min_lr) * (1 + cos(pi * t / T)) / 2 for t <= T,
  min_lr after (torch: CosineAnnealingLR(T_max=T, eta_min=min_lr), which rises again).
- WarmupLR(inner, w): inner.lr(0) * (t + 1) / (w + 1) for t < w, then inner.lr(t - w):
  a linear ramp that never takes a zero step and reaches the peak once, at t = w
  (torch: SequentialLR([LinearLR(start_factor=1/(w+1), total_iters=w), inner], [w])).
"""

from __future__ import annotations

import math
import numbers
from typing import Protocol

import numpy as np

from aicf_induct.errors import ConfigError


class Schedule(Protocol):
    def lr(self, step: int) -> float:
        """The learning rate of 0-based optimizer step `step`."""
        ...


def _check_step(step: int) -> None:
    if step < 0:
        raise ValueError(f"schedule step must be >= 0, got {step}")


def _check_lr(field: str, value: float) -> None:
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (real and math.isfinite(value) and value >= 0):
        raise ConfigError(f"{field} must be a finite number >= 0, got {value!r}")


def _check_count(field: str, value: int, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{field} must be an integer >= {low}, got {value!r}")


class ConstantLR:
    def __init__(self, lr: float) -> None:
        _check_lr("learning rate", lr)
        self.base_lr = float(lr)

    def lr(self, step: int) -> float:
        _check_step(step)
        return self.base_lr

    def __repr__(self) -> str:
        return f"ConstantLR({self.base_lr})"


class CosineLR:
    """Half a cosine from `lr` at step 0 to `min_lr` at `total_steps`, flat after."""

    def __init__(self, lr: float, total_steps: int, min_lr: float = 0.0) -> None:
        _check_lr("learning rate", lr)
        _check_lr("min_lr", min_lr)
        _check_count("cosine total_steps", total_steps, 1)
        if min_lr > lr:
            raise ConfigError(f"min_lr ({min_lr}) must not exceed the learning rate ({lr})")
        self.base_lr, self.total_steps, self.min_lr = float(lr), total_steps, float(min_lr)

    def lr(self, step: int) -> float:
        _check_step(step)
        t = min(step, self.total_steps)
        cos = (1 + math.cos(math.pi * t / self.total_steps)) / 2
        return self.min_lr + (self.base_lr - self.min_lr) * cos

    def __repr__(self) -> str:
        return f"CosineLR({self.base_lr}, {self.total_steps}, min_lr={self.min_lr})"


class WarmupLR:
    """A linear ramp over `warmup_steps` steps up to `inner`'s first rate, then `inner`
    (shifted: inner's step 0 is this schedule's step `warmup_steps`)."""

    def __init__(self, inner: Schedule, warmup_steps: int) -> None:
        _check_count("warmup_steps", warmup_steps, 0)
        self.inner, self.warmup_steps = inner, warmup_steps

    def lr(self, step: int) -> float:
        _check_step(step)
        w = self.warmup_steps
        if step >= w:
            return self.inner.lr(step - w)
        return self.inner.lr(0) * (step + 1) / (w + 1)

    def __repr__(self) -> str:
        return f"WarmupLR({self.inner!r}, {self.warmup_steps})"


SCHEDULES = ("constant", "cosine")


def make_schedule(
    name: str, lr: float, total_steps: int, warmup_steps: int = 0, min_lr: float = 0.0
) -> Schedule:
    """A schedule over a run of `total_steps` steps, the first `warmup_steps` of them
    warm-up; "cosine" decays over the remaining steps to `min_lr`."""
    if name not in SCHEDULES:
        raise ConfigError(f"unknown schedule {name!r}; choose one of {list(SCHEDULES)}")
    _check_count("total_steps", total_steps, 1)
    _check_count("warmup_steps", warmup_steps, 0)
    if warmup_steps >= total_steps:
        raise ConfigError(
            f"warmup_steps ({warmup_steps}) must be below total_steps ({total_steps})"
        )
    inner: Schedule
    if name == "constant":
        inner = ConstantLR(lr)
    else:
        inner = CosineLR(lr, total_steps - warmup_steps, min_lr)
    return WarmupLR(inner, warmup_steps) if warmup_steps else inner


def lr_range(schedule: Schedule, start: int, n: int) -> np.ndarray:
    """The learning rates of steps `start` .. `start + n - 1`, as `schedule.lr` gives them one
    by one (a constant schedule's without the per-step call: the GPU engine fills an epoch's
    table at a time)."""
    if isinstance(schedule, ConstantLR):
        _check_step(start)
        return np.full(n, schedule.base_lr, dtype=np.float64)
    return np.array([schedule.lr(start + k) for k in range(n)], dtype=np.float64)
