"""Triggers: the moments at which the adaptive loop considers a rewrite or a rollback.

The loop feeds every trigger `Observation`s: one per optimizer step (`kind="step"`: batch
loss, gradient norm), one per validation evaluation (`"eval"`: validation loss) and one at
each epoch's end (`"epoch_end"`). A trigger answers with a `Fired` or None.

- `WarmupTrigger(n)`: once, after the n-th step.
- `EpochEndTrigger(every)`: at the end of every `every`-th epoch.
- `PlateauTrigger(patience, min_delta, smoothing)`: the validation loss, smoothed by an
  exponential moving average, has not improved on its best by a relative `min_delta` for
  `patience` evaluations. It re-arms after firing.
- `InstabilityTrigger(spike_k, window, grad_factor, spike_ratio)`: a non-finite loss or
  gradient norm (`nan`), a loss above mean + k standard deviations of the last `window`
  losses and above `spike_ratio` times their mean (`spike`), or a gradient norm above
  `grad_factor` times their median (`grad_explosion`); a short last batch of an epoch is
  checked for non-finite values only.

Each trigger's state is a JSON-able dict (`state_dict` / `load_state_dict`), so a
snapshot restores it and a resumed run fires exactly where the uninterrupted one would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class Observation:
    kind: str  # "step" | "eval" | "epoch_end"
    step: int  # optimizer steps taken so far
    epoch: int
    loss: float = math.nan  # step: the batch's training loss
    grad_norm: float = math.nan  # step: before clipping
    val_loss: float = math.nan  # eval
    partial: bool = False  # step: a short (last) batch, too noisy for spike statistics


@dataclass(frozen=True)
class Fired:
    trigger: str  # "warmup" | "epoch_end" | "plateau" | "nan" | "spike" | "grad_explosion"
    kind: str  # "schedule" | "plateau" | "instability"
    step: int
    detail: dict[str, Any] = field(default_factory=dict)


class Trigger(Protocol):
    name: str

    def observe(self, obs: Observation) -> Fired | None: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class WarmupTrigger:
    name = "warmup"

    def __init__(self, steps: int) -> None:
        self.steps = steps  # fire once this many steps have been taken
        self.fired = False

    def observe(self, obs: Observation) -> Fired | None:
        if obs.kind != "step" or self.fired or obs.step < self.steps:
            return None
        self.fired = True
        return Fired("warmup", "schedule", obs.step, {"after_steps": self.steps})

    def state_dict(self) -> dict[str, Any]:
        return {"fired": self.fired}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fired = bool(state["fired"])


class EpochEndTrigger:
    name = "epoch_end"

    def __init__(self, every: int = 1) -> None:
        self.every = every  # fire at the end of epochs every-1, 2*every-1, ...

    def observe(self, obs: Observation) -> Fired | None:
        if obs.kind != "epoch_end" or (obs.epoch + 1) % self.every:
            return None
        return Fired("epoch_end", "schedule", obs.step, {"epoch": obs.epoch})

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class PlateauTrigger:
    name = "plateau"

    def __init__(self, patience: int = 3, min_delta: float = 0.01,
                 smoothing: float = 0.5) -> None:
        self.patience = patience  # evaluations without improvement before firing
        self.min_delta = min_delta  # relative improvement of the smoothed loss that counts
        self.smoothing = smoothing  # EMA weight of the past: s = a * s + (1 - a) * loss
        self.ema = math.nan
        self.best = math.inf
        self.wait = 0

    def observe(self, obs: Observation) -> Fired | None:
        if obs.kind != "eval" or not math.isfinite(obs.val_loss):
            return None
        a = self.smoothing
        self.ema = obs.val_loss if math.isnan(self.ema) else a * self.ema + (1 - a) * obs.val_loss
        if self.ema < self.best * (1 - self.min_delta) or math.isinf(self.best):
            self.best, self.wait = self.ema, 0
            return None
        self.wait += 1
        if self.wait < self.patience:
            return None
        detail = {"smoothed_val_loss": self.ema, "best_smoothed": self.best,
                  "evaluations": self.wait}
        self.wait, self.best = 0, self.ema  # re-arm from here
        return Fired("plateau", "plateau", obs.step, detail)

    def state_dict(self) -> dict[str, Any]:
        return {"ema": self.ema, "best": self.best, "wait": self.wait}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ema, self.best, self.wait = float(state["ema"]), float(state["best"]), \
            int(state["wait"])


class InstabilityTrigger:
    name = "instability"

    def __init__(self, spike_k: float = 6.0, window: int = 50, min_history: int = 20,
                 grad_factor: float = 20.0, spike_ratio: float = 10.0) -> None:
        self.spike_k = spike_k  # a loss this many standard deviations above the mean
        self.spike_ratio = spike_ratio  # ... and this many times the mean (batch losses of
        # a well-fit model are heavy-tailed: a hard batch is 5 sigma out, a blow-up 10x)
        self.window = window  # recent steps the statistics cover
        self.min_history = min_history  # no spike or explosion verdict before this many
        self.grad_factor = grad_factor  # gradient norm over this times the median
        self.losses: list[float] = []
        self.grad_norms: list[float] = []

    def reset_history(self) -> None:
        """Forget the statistics (after a rewrite: the loss's distribution is new)."""
        self.losses, self.grad_norms = [], []

    def observe(self, obs: Observation) -> Fired | None:
        if obs.kind != "step":
            return None
        if not (math.isfinite(obs.loss) and math.isfinite(obs.grad_norm)):
            return Fired("nan", "instability", obs.step,
                         {"loss": obs.loss, "grad_norm": obs.grad_norm})
        if obs.partial:
            return None
        if len(self.losses) >= self.min_history:
            mean, std = float(np.mean(self.losses)), float(np.std(self.losses))
            limit = max(mean + self.spike_k * max(std, 1e-3 * abs(mean)),
                        self.spike_ratio * mean)
            if obs.loss > limit:
                return Fired("spike", "instability", obs.step,
                             {"loss": obs.loss, "mean": mean, "std": std, "k": self.spike_k,
                              "ratio": self.spike_ratio})
            median = float(np.median(self.grad_norms))
            if median > 0 and obs.grad_norm > self.grad_factor * median:
                return Fired("grad_explosion", "instability", obs.step,
                             {"grad_norm": obs.grad_norm, "median": median,
                              "factor": self.grad_factor})
        self.accept(obs)
        return None

    def accept(self, obs: Observation) -> None:
        """Count a fired step as ordinary (the loop judged it harmless): the statistics then
        learn the tail of the loss's distribution."""
        self.losses = [*self.losses, obs.loss][-self.window:]
        self.grad_norms = [*self.grad_norms, obs.grad_norm][-self.window:]

    def state_dict(self) -> dict[str, Any]:
        return {"losses": list(self.losses), "grad_norms": list(self.grad_norms)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.losses = [float(v) for v in state["losses"]]
        self.grad_norms = [float(v) for v in state["grad_norms"]]
