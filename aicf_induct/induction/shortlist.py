"""Train the top proposals for a problem and keep the best by validation.

This is the use of the proposer that the leave-one-problem-out evaluation supports best: the
top-3 proposals, each trained once and the one with the best validation score kept, scored
as well on held-out problems as the full search of the space's 32 candidates picked the
same way (mean normalized error 0.435 against 0.441 over every split of the seeds;
benchmarks/RESULTS.md, "Induction: leave-one-problem-out evaluation").

Every candidate trains on the same split (the config's seed), with its own recipe
(optimizer, learning rate, weight decay, batch size) and the config's epochs and early
stopping; each is one logged run. The pick is the highest validation score (accuracy or
R², the corpus's measure); between equal scores (small validation splits tie often) the
lower validation loss, then the better-ranked proposal. A run without a finite validation
score is never picked while another has one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aicf_induct.errors import ConfigError
from aicf_induct.induction.mainjob import StartPoint, start_point
from aicf_induct.problems.problem import Problem
from aicf_induct.runtime.metrics import score_name
from aicf_induct.runtime.trainer import TrainConfig, TrainResult


@dataclass(frozen=True)
class Trained:
    """One trained proposal: what was proposed and what its run gave."""

    start: StartPoint
    result: TrainResult

    @property
    def rank(self) -> int:
        return int(self.start.record["rank"])

    def score(self, split: str, task: str) -> float:
        return float(self.result.metrics.get(f"{split}_{score_name(task)}", math.nan))

    def as_dict(self, task: str) -> dict[str, Any]:
        r = self.start.record
        return {"rank": self.rank, "candidate": r["candidate"],
                "structure_key": r["structure_key"], "model": self.start.model,
                "recipe": dict(self.start.recipe),
                "expected_norm_error": r["expected_norm_error"], "interval": r["interval"],
                "run_id": self.result.run_id, "status": self.result.status,
                "epochs": self.result.epochs, "best_epoch": self.result.best_epoch,
                "val_score": self.score("val", task), "test_score": self.score("test", task),
                "metrics": dict(self.result.metrics)}


@dataclass(frozen=True)
class Shortlist:
    """The trained proposals, best-ranked first, and which one validation picked."""

    task: str
    trained: tuple[Trained, ...]
    pick: int  # index into `trained`

    @property
    def picked(self) -> Trained:
        return self.trained[self.pick]

    def as_dict(self) -> dict[str, Any]:
        return {"score": score_name(self.task), "picked_rank": self.picked.rank,
                "picked_run_id": self.picked.result.run_id,
                "trained": [t.as_dict(self.task) for t in self.trained]}


def pick_by_validation(val_scores: Sequence[float], val_losses: Sequence[float]) -> int:
    """Index of the highest finite validation score, the lowest validation loss between
    equal scores, the first of equals; 0 when no score is finite (every run diverged: the
    best-ranked proposal stands)."""
    def key(i: int) -> tuple[float, float, int]:
        loss = val_losses[i]
        return (-val_scores[i], loss if math.isfinite(loss) else math.inf, i)

    finite = [i for i, v in enumerate(val_scores) if math.isfinite(v)]
    return min(finite, key=key) if finite else 0


Train = Callable[[StartPoint, TrainConfig], TrainResult]


def shortlist_size(proposal: Mapping[str, Any], top: int) -> int:
    """How many candidates `train_shortlist` trains: `top`, or all the proposal holds if
    fewer (one at least: a proposal without candidates starts from its first start point,
    which says it has none). A `top` below 1 is a ConfigError: it trained one silently."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ConfigError(f"top must be an integer >= 1, got {top!r}")
    return max(1, min(top, len(proposal.get("candidates") or [])))


def train_shortlist(proposal: Mapping[str, Any], problem: Problem, config: TrainConfig,
                    train: Train, *, top: int, source: str,
                    announce: Callable[[int, StartPoint], None] | None = None) -> Shortlist:
    """Train the first `top` candidates of `proposal` (fewer if it holds fewer) one after
    another with `train(start, config)` and pick one by validation score.

    `train` runs and logs one candidate (the caller's recorder, device and progress bar);
    `config` is the recipe's base: each candidate's optimizer, lr, weight decay and batch
    size replace its own."""
    starts = [start_point(proposal, problem, source, i)
              for i in range(shortlist_size(proposal, top))]
    trained = []
    for i, start in enumerate(starts):
        if announce is not None:
            announce(i, start)
        trained.append(Trained(start, train(start, start.configure(config))))
    pick = pick_by_validation([t.score("val", problem.task) for t in trained],
                              [float(t.result.metrics.get("val_loss", math.nan))
                               for t in trained])
    return Shortlist(problem.task, tuple(trained), pick)


__all__ = ["Shortlist", "Trained", "pick_by_validation", "shortlist_size", "train_shortlist"]
