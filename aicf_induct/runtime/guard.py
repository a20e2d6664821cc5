"""The rewrite guard and the transform blacklist.

After a rewrite at step T the guard collects the next K training losses and compares them
with the K before T:

    harm  if  mean(post) > reference * (1 + tolerance) + z * std(pre) / sqrt(K)
          or  val_after  > val_before * (1 + val_tolerance)

where reference is the pre-rewrite level, mean(pre), extrapolated along the pre-rewrite
trend only when that trend was rising (a run that was already getting worse is not blamed
on the rewrite); the z standard errors absorb batch noise. A healthy run's loss goes down,
so a rewrite that leaves it as it was passes; one that lifts it is rolled back. The
validation losses are measured at T and after the K steps.

**Counterfactual mode** (`counterfactual=True`): the run measures against itself without
the rewrite. At the verdict the un-rewritten model is trained from the pre-rewrite snapshot
over the same K batches (the control arm), and the rewrite is kept only if its validation
loss is below the control's by more than `min_gain` (relative, default 5 %); non-finite
training losses are harm as before. On a run still converging, "not worse than before the
rewrite" passes nearly any rewrite; "better than the same run without it" measures the
rewrite's effect.
When the control wins, the run goes on from the control arm (no steps repeated).

A harmful transform is blacklisted by name for a number of executed steps (a counter that
rollbacks do not rewind), so the policy proposes something else meanwhile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from aicf_induct.words import counted

GUARDS = ("level", "counterfactual")  # what a rewrite is judged against (GuardConfig)


@dataclass(frozen=True)
class GuardConfig:
    steps: int = 50  # K: post-rewrite steps the verdict waits for
    tolerance: float = 0.05  # relative rise of the mean training loss that counts as harm
    z: float = 2.0  # standard errors of the pre-rewrite noise added to the allowance
    val_tolerance: float = 0.10  # relative rise of the validation loss that counts as harm
    blacklist_steps: int = 500  # executed steps a harmful transform stays blocked
    # judge against the run continued without the rewrite (a control arm over the same
    # batches) instead of against the level before it
    counterfactual: bool = False
    # counterfactual: the relative validation gain over the control arm a rewrite needs to be
    # kept. Kept with any gain, the main job's learned rewrites left the final model worse on
    # test than the run without them; past a 5 % gain they broke even (RESULTS.md, "Main job",
    # 2026-12-01: margins 0, 1, 2 and 5 %)
    min_gain: float = 0.05


@dataclass(frozen=True)
class Verdict:
    harm: bool
    reason: str
    metrics: dict[str, float]


def trend_slope(values: list[float]) -> float:
    """Least-squares slope per step (0 for fewer than 3 points)."""
    if len(values) < 3:
        return 0.0
    x = np.arange(len(values), dtype=float)
    return float(np.polyfit(x, np.asarray(values), 1)[0])


class Guard:
    """Watches the steps after one rewrite. `start`, then `observe` each loss until
    `done()`, then `verdict`. The pre-rewrite snapshot travels with it (in memory)."""

    def __init__(self, config: GuardConfig | None = None) -> None:
        self.config = config or GuardConfig()
        self.clear()

    def clear(self) -> None:
        self.active = False
        self.transform = ""
        self.site = ""
        self.step = 0
        self.pre: list[float] = []
        self.post: list[float] = []
        self.val_before = math.nan
        self.snapshot: Any = None  # the Snapshot to roll back to (not serialised)

    def start(self, step: int, transform: str, site: str, pre_losses: list[float],
              val_before: float, snapshot: Any) -> None:
        self.active, self.transform, self.site, self.step = True, transform, site, step
        self.pre = list(pre_losses)[-self.config.steps:]
        self.post = []
        self.val_before = val_before
        self.snapshot = snapshot

    def observe(self, loss: float) -> None:
        if self.active:
            self.post.append(loss)

    def done(self) -> bool:
        return self.active and len(self.post) >= self.config.steps

    def verdict(self, val_after: float, val_control: float = math.nan) -> Verdict:
        """Harm or keep; `val_control` (counterfactual mode) is the validation loss of the
        control arm, the un-rewritten model trained over the same K batches."""
        c = self.config
        post_mean = float(np.mean(self.post)) if self.post else math.nan
        if not self.pre:
            pre_mean = pre_std = slope = math.nan
            reference = math.inf
        else:
            pre_mean, pre_std = float(np.mean(self.pre)), float(np.std(self.pre))
            slope = trend_slope(self.pre)
            offset = (len(self.pre) + len(self.post)) / 2  # centre of pre to centre of post
            reference = pre_mean + max(slope, 0.0) * offset
        sem = pre_std / math.sqrt(max(len(self.pre), 1))
        allowance = reference * (1 + c.tolerance) + c.z * sem \
            if math.isfinite(reference) else math.inf
        metrics = {"pre_mean": pre_mean, "pre_std": pre_std, "pre_slope": slope,
                   "post_mean": post_mean, "allowance": allowance,
                   "val_before": self.val_before, "val_after": val_after}
        if c.counterfactual:
            return self._against_control(post_mean, val_after, val_control, metrics)
        if not math.isfinite(post_mean) or post_mean > allowance:
            return Verdict(True, f"training loss {post_mean:.4g} over the next {len(self.post)} "
                                 f"steps exceeds {allowance:.4g} (pre-rewrite {pre_mean:.4g})",
                           metrics)
        limit = self.val_before * (1 + c.val_tolerance)
        if math.isfinite(self.val_before) and not val_after <= limit:
            return Verdict(True, f"validation loss rose from {self.val_before:.4g} to "
                                 f"{val_after:.4g} (limit {limit:.4g})", metrics)
        return Verdict(False, f"training loss {post_mean:.4g} within {allowance:.4g}; "
                              f"validation {self.val_before:.4g} -> {val_after:.4g}", metrics)

    def _against_control(self, post_mean: float, val_after: float, val_control: float,
                         metrics: dict[str, float]) -> Verdict:
        metrics = {**metrics, "val_control": val_control}
        if not math.isfinite(post_mean) or not math.isfinite(val_after):
            return Verdict(True, f"non-finite loss after the rewrite (training {post_mean:.4g}, "
                                 f"validation {val_after:.4g})", metrics)
        if not math.isfinite(val_control):  # the control arm diverged: the rewrite wins
            return Verdict(False, f"validation {val_after:.4g}; the control arm's "
                                  f"{val_control:.4g}", metrics)
        gain = self.config.min_gain
        bar = val_control * (1 - gain)
        against = f"the control arm's {val_control:.4g}" + \
            (f" less {gain:.0%}, {bar:.4g}" if gain else "")
        over = f"over the same {counted(len(self.post), 'step')}"
        if val_after < bar:
            return Verdict(False, f"validation {val_after:.4g} below {against} {over}", metrics)
        return Verdict(True, f"validation {val_after:.4g} not below {against} {over}", metrics)

    def state_dict(self) -> dict[str, Any]:
        """JSON-able; the snapshot is not included (checkpoints wait for the verdict)."""
        return {"active": self.active, "transform": self.transform, "site": self.site,
                "step": self.step, "pre": self.pre, "post": self.post,
                "val_before": self.val_before}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.clear()
        self.active, self.transform, self.site = bool(state["active"]), state["transform"], \
            state["site"]
        self.step = int(state["step"])
        self.pre, self.post = list(state["pre"]), list(state["post"])
        self.val_before = float(state["val_before"])


class Blacklist:
    """Transform names blocked until a number of executed steps."""

    def __init__(self) -> None:
        self.until: dict[str, int] = {}

    def block(self, transform: str, now: int, steps: int) -> None:
        self.until[transform] = max(self.until.get(transform, 0), now + steps)

    def blocked(self, now: int) -> frozenset[str]:
        return frozenset(t for t, until in self.until.items() if now < until)

    def state_dict(self) -> dict[str, int]:
        return dict(self.until)

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.until = {k: int(v) for k, v in state.items()}
