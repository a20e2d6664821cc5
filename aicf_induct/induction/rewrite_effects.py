"""The learned rewrite proposer: each transform's effect at a trigger, with an interval, from
the rewrite history (`rewrite_history`), conditioned on the dynamics and the problem.

Each decision's **condition** (trigger kind × regime × task × size, three nested levels) and
the aggregate table are defined in `rewrite_table.py`.

**Estimate** (a shrunk per-condition mean, normal–normal empirical Bayes): an effect is an
observation with the within-cell variance s² pooled over the history's deepest cells
(ddof 1; with fewer than 10 degrees of freedom, the variance of all effects; floored at
1e-3). A transform's mean starts from a sceptical prior centred on 0 with variance τ² = s² / k
(`prior_n` = k pseudo-observations), and each level's mean is the precision-weighted
average of the cell's own mean (n observations) and its parent's estimate (its variance
plus τ²). With little data a cell says what its parent says, with none the prior (0).
The **uplift** of a transform is its estimate minus the control arm's (`none`: the model
left alone, estimated the same way in the same cell), its variance the sum; with no control
in the history at all the baseline is 0 and the evidence says so. A transform is proposed
only when the lower end of its interval (normal, at `level`, default 80 %) is above 0 and it
has at least `min_n` observations; otherwise the answer is "no change".

`RewriteEffects().fit(history)` learns `table_` (per level and cell: n, mean, variance,
guard verdicts, the most used options), the aggregate the knowledge pack ships; `from_table`
rebuilds the estimator from it and `combine` adds tables (a shipped pack's and a local
warehouse's). `propose(query)` ranks the transforms for a run's current IR and condition:
each with a site (widen: the narrowest hidden layer; deepen, residual, dropout: the last
place it applies; others: the first), the options used most in the history, the expected
uplift, its interval and the evidence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd
from scipy.stats import norm
from sklearn.base import BaseEstimator

from aicf_induct.errors import ConfigError
from aicf_induct.induction.rewrite_table import (
    ANY,
    KEYS,
    LEVELS,
    TABLE_COLUMNS,
    aggregate,
    combine_tables,
    noise_variance,
    records,
    regime,
    size,
)
from aicf_induct.ir.graph import Graph
from aicf_induct.runtime.transforms import TRANSFORMS, RewriteError, make_transform

CONTROL = "none"  # the control arm: the model left alone

@dataclass(frozen=True)
class RewriteQuery:
    """What the proposer is asked about: a run's current IR and its condition."""

    graph: Graph
    trigger_kind: str = "plateau"  # schedule | plateau | instability
    gap: float = math.nan  # (val - train) / train at the trigger
    task: str = ""
    n_rows: float = math.nan  # the problem's rows (simple.n_rows)
    blocked: frozenset[str] = frozenset()  # blacklisted transforms

    def condition(self) -> dict[str, str]:
        return {"trigger_kind": self.trigger_kind, "regime": regime(self.gap),
                "task": self.task or ANY, "size": size(self.n_rows)}


@dataclass(frozen=True)
class Estimate:
    mean: float
    var: float
    n: tuple[int, ...]  # observations at each level (transform, dynamics, problem)


@dataclass(frozen=True)
class RewriteProposal:
    transform: str
    site: str
    options: dict[str, Any]
    expected_effect: float  # uplift over leaving the model alone (relative val-loss fall)
    low: float
    high: float
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RewriteAnswer:
    decision: str  # "rewrite" | "none"
    reason: str
    condition: dict[str, str]
    level: float
    rewrites: list[RewriteProposal]  # proposed, best first (empty for "none")
    considered: list[RewriteProposal]  # every transform that applies, best first
    history: int  # decisions in the history the estimate learned from

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class RewriteEffects(BaseEstimator):
    """See the module docstring."""

    def __init__(self, prior_n: float = 5.0, level: float = 0.8, min_n: int = 3) -> None:
        self.prior_n = prior_n
        self.level = level
        self.min_n = min_n

    # -- learning ----------------------------------------------------------------------------
    def fit(self, history: pd.DataFrame, y: Any = None) -> RewriteEffects:
        missing = [c for c in ("transform", "effect", "verdict", "trigger_kind", "gap", "task",
                               "n_rows", "options") if c not in history.columns]
        if missing:
            raise ConfigError(f"rewrite history lacks column(s) {', '.join(missing)}")
        return self._set(aggregate(history))

    @classmethod
    def from_table(cls, table: pd.DataFrame, **params: Any) -> RewriteEffects:
        return cls(**params)._set(table)

    def combine(self, table: pd.DataFrame) -> RewriteEffects:
        """A new estimator of this one's table and `table` pooled (cell by cell)."""
        return RewriteEffects(**self.get_params())._set(combine_tables(self.table_, table))

    def _set(self, table: pd.DataFrame) -> RewriteEffects:
        t = table.reindex(columns=list(TABLE_COLUMNS)).reset_index(drop=True)
        self.table_ = t
        self.s2_ = noise_variance(t)
        self.history_ = int(t.loc[t["level"] == 0, "n"].sum())
        self.cells_ = {_key(r): r for r in records(t)}
        return self

    # -- estimating ----------------------------------------------------------------------------
    def estimate(self, transform: str, cond: Mapping[str, str]) -> Estimate:
        """The shrunk mean effect of `transform` (or the control) in the condition."""
        tau2 = self.s2_ / self.prior_n
        mean, var, ns = 0.0, tau2, []
        for lvl, keys in enumerate(LEVELS):
            cell = self.cells_.get((lvl, transform, *[cond.get(k, ANY) if k in keys else ANY
                                                      for k in KEYS]))
            n, cell_mean = (int(cell["n"]), float(cell["mean"])) if cell else (0, 0.0)
            ns.append(n)
            prior_var = var + (tau2 if lvl else 0.0)  # the parent's estimate, plus the spread
            if n:  # of cells around it
                prec = n / self.s2_ + 1 / prior_var
                mean = (n * cell_mean / self.s2_ + mean / prior_var) / prec
                var = 1 / prec
            else:
                var = prior_var
        return Estimate(mean, var, tuple(ns))

    def propose(self, query: RewriteQuery, top_k: int = 3) -> RewriteAnswer:
        """Ranked rewrites for the query (see the module docstring)."""
        cond = query.condition()
        z = float(norm.ppf(0.5 + self.level / 2))
        ctrl = self.estimate(CONTROL, cond)
        has_control = self.history_ and any(ctrl.n)
        base_mean, base_var = (ctrl.mean, ctrl.var) if has_control else (0.0, 0.0)
        considered = []
        for name in sorted(TRANSFORMS):
            if name in query.blocked:
                continue
            options = self._options(name)
            site = choose_site(name, options, query.graph)
            if site is None:
                continue
            est = self.estimate(name, cond)
            up, sd = est.mean - base_mean, math.sqrt(est.var + base_var)
            verdicts = self._verdicts(name)
            considered.append(RewriteProposal(name, site, options, up, up - z * sd, up + z * sd, {
                "condition": cond, "n": {"transform": est.n[0], "dynamics": est.n[1],
                                         "problem": est.n[2]},
                "effect": est.mean, "control_effect": base_mean,
                "baseline": "control arm (no change) in the same condition" if has_control
                else "none measured: 0", "guard": verdicts}))
        considered.sort(key=lambda p: (-p.expected_effect, p.transform))
        chosen = [p for p in considered if p.low > 0 and p.evidence["n"]["transform"]
                  >= self.min_n][:top_k]
        if chosen:
            reason = (f"{chosen[0].transform}: expected uplift {chosen[0].expected_effect:+.3f} "
                      f"[{chosen[0].low:+.3f}, {chosen[0].high:+.3f}] over no change")
        elif not self.history_:
            reason = "no change: the rewrite history is empty"
        else:
            reason = (f"no change: no transform's uplift is above 0 at {self.level:.0%} "
                      f"confidence with >= {self.min_n} observations")
        return RewriteAnswer("rewrite" if chosen else "none", reason, cond, self.level, chosen,
                             considered, self.history_)

    def _options(self, transform: str) -> dict[str, Any]:
        cell = self.cells_.get((0, transform, *[ANY] * len(KEYS)))
        if not cell or not isinstance(cell["options"], str):
            return {}
        try:
            opts = json.loads(cell["options"])
            if not isinstance(opts, dict):
                return {}
            make_transform(transform, **opts)
        except (ValueError, TypeError, RecursionError, RewriteError):
            return {}  # options no transform takes (a remote client's row): the defaults
        return opts

    def _verdicts(self, transform: str) -> dict[str, int]:
        cell = self.cells_.get((0, transform, *[ANY] * len(KEYS)))
        if not cell:
            return {"keep": 0, "harm": 0, "unstable": 0}
        return {"keep": int(cell["kept"]), "harm": int(cell["harm"]),
                "unstable": int(cell["unstable"])}


def _key(r: Mapping[str, Any]) -> tuple[Any, ...]:
    return (int(r["level"]), str(r["transform"]), *[str(r[k]) for k in KEYS])


def choose_site(transform: str, options: Mapping[str, Any], graph: Graph) -> str | None:
    """Where the transform goes in `graph` (see the module docstring); None: nowhere."""
    try:
        sites = make_transform(transform, **options).sites(graph)
    except RewriteError:
        return None
    if not sites:
        return None
    if transform == "widen":
        return min(sites, key=lambda s: int(graph.node(s).attrs.get("out_features", 0)))
    return sites[-1] if transform in ("deepen", "residual", "dropout") else sites[0]
