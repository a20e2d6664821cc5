"""The learned rewrite proposer: each transform's effect at a trigger, with an interval, from
the rewrite history (`rewrite_history`), conditioned on the dynamics and the problem.

**Condition** of a decision: the trigger's kind (schedule, plateau, instability), the
regime (`overfit` when the generalisation gap (val − train) / train exceeds 0.10, as the rule
policy reads it, else `fit`), the task and the problem's size (`small` below 1,000 rows,
else `large`). Cells nest in three levels: the transform alone; × trigger kind × regime;
× task × size.

**Estimate** (a shrunk per-condition mean, normal–normal empirical Bayes): an effect is an
observation with the within-cell variance s² pooled over the history's deepest cells
(ddof 1; with fewer than 10 degrees of freedom, the variance of all effects; floored at 1e-3). A
transform's mean starts from a sceptical prior centred on 0 with variance τ² = s² / k
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
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm
from sklearn.base import BaseEstimator

from aicf_induct.errors import ConfigError
from aicf_induct.ir.graph import Graph
from aicf_induct.runtime.transforms import TRANSFORMS, RewriteError, make_transform

CONTROL = "none"
GAP_TOLERANCE = 0.10  # the rule policy's: a gap above it is overfitting
SMALL_ROWS = 1000
KEYS = ("trigger_kind", "regime", "task", "size")
LEVELS: tuple[tuple[str, ...], ...] = ((), ("trigger_kind", "regime"), KEYS)
TABLE_COLUMNS = ("level", "transform", *KEYS, "n", "mean", "var", "kept", "harm", "unstable",
                 "options")
ANY = "*"
MIN_VAR = 1e-3  # floor of s²: effects are relative changes, an sd under 0.03 is not believed
MIN_DF = 10  # degrees of freedom the pooled within-cell variance needs to be used


def regime(gap: float) -> str:
    return "overfit" if math.isfinite(gap) and gap > GAP_TOLERANCE else "fit"


def size(n_rows: float) -> str:
    if not math.isfinite(n_rows):
        return ANY
    return "small" if n_rows < SMALL_ROWS else "large"


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
        self.cells_ = {_key(r): r for r in _records(t)}
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
            make_transform(transform, **opts)
        except (ValueError, RewriteError):
            return {}
        return opts if isinstance(opts, dict) else {}

    def _verdicts(self, transform: str) -> dict[str, int]:
        cell = self.cells_.get((0, transform, *[ANY] * len(KEYS)))
        if not cell:
            return {"keep": 0, "harm": 0, "unstable": 0}
        return {"keep": int(cell["kept"]), "harm": int(cell["harm"]),
                "unstable": int(cell["unstable"])}


def noise_variance(table: pd.DataFrame) -> float:
    """s² of the module docstring, from an aggregate table."""
    deepest = table[table["level"] == len(LEVELS) - 1]
    df = float((deepest["n"] - 1).clip(lower=0).sum())
    if df >= MIN_DF:
        return max(float((deepest["n"] * deepest["var"]).sum()) / df, MIN_VAR)
    top = table[table["level"] == 0]
    n = float(top["n"].sum())
    if n < 2:
        return MIN_VAR * 100  # no history to speak of: a wide prior noise (sd 0.32)
    mean = float((top["n"] * top["mean"]).sum()) / n
    second = float((top["n"] * (top["var"] + top["mean"] ** 2)).sum()) / n
    return max((second - mean ** 2) * n / (n - 1), MIN_VAR)


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


# -- the aggregate table ---------------------------------------------------------------------
def conditions_of(history: pd.DataFrame) -> pd.DataFrame:
    """The history with its condition columns (regime, size; task filled)."""
    h = history.copy()
    h["regime"] = [regime(float(g)) for g in h["gap"]]
    h["size"] = [size(float(n)) for n in h["n_rows"]]
    h["task"] = h["task"].fillna("").replace("", ANY).astype(str)
    return h


def aggregate(history: pd.DataFrame) -> pd.DataFrame:
    """Per level and cell: n, mean and (population) variance of the effect, guard verdicts,
    and at level 0 the options used most (ties: the first in sorted order)."""
    h = conditions_of(history)
    h = h[np.isfinite(h["effect"].astype(float))]
    rows = []
    for lvl, keys in enumerate(LEVELS):
        for key, g in h.groupby(["transform", *keys], sort=True):
            key = key if isinstance(key, tuple) else (key,)
            cell = dict(zip(["transform", *keys], key, strict=True))
            e = g["effect"].to_numpy(float)
            v = g["verdict"].astype(str)
            opts = g["options"].astype(str).value_counts()
            rows.append({"level": lvl, **{k: str(cell.get(k, ANY)) for k in KEYS},
                         "transform": str(cell["transform"]), "n": len(e),
                         "mean": float(e.mean()), "var": float(e.var()),
                         "kept": int((v == "keep").sum()), "harm": int((v == "harm").sum()),
                         "unstable": int((v == "unstable").sum()),
                         "options": str(sorted(opts[opts == opts.max()].index)[0])
                         if lvl == 0 else None})
    return _typed(pd.DataFrame(rows, columns=list(TABLE_COLUMNS)))


def _typed(t: pd.DataFrame) -> pd.DataFrame:
    t = t.astype({"level": "int64", "n": "int64", "mean": float, "var": float, "kept": "int64",
                  "harm": "int64", "unstable": "int64"})
    return t.sort_values(["level", "transform", *KEYS]).reset_index(drop=True)


def combine_tables(*tables: pd.DataFrame) -> pd.DataFrame:
    """Cell-wise pooling of aggregate tables (counts add; means and variances combine as
    one sample would give; options: the first table's that has them)."""
    frames = [t for t in tables if t is not None and len(t)]
    if not frames:
        return _typed(pd.DataFrame(columns=list(TABLE_COLUMNS)))
    allrows = pd.concat(frames, ignore_index=True)
    out = []
    for _, g in allrows.groupby(["level", "transform", *KEYS], sort=True):
        n = g["n"].to_numpy(float)
        mean = float((n * g["mean"]).sum() / n.sum())
        second = float((n * (g["var"] + g["mean"] ** 2)).sum() / n.sum())
        first = g.iloc[0]
        opts = next((o for o in g["options"] if isinstance(o, str)), None)
        out.append({**{c: first[c] for c in ("level", "transform", *KEYS)}, "n": int(n.sum()),
                    "mean": mean, "var": max(second - mean ** 2, 0.0),
                    "kept": int(g["kept"].sum()), "harm": int(g["harm"].sum()),
                    "unstable": int(g["unstable"].sum()), "options": opts})
    return _typed(pd.DataFrame(out, columns=list(TABLE_COLUMNS)))


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in r.items()} for r in table.to_dict("records")]


def table_records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The table as JSON-ready rows (NaN as null)."""
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in _records(table)]


def table_from_records(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    return _typed(pd.DataFrame(list(rows), columns=list(TABLE_COLUMNS)))


def learned_effects(pack: Any = None, warehouse_root: str | Path | None = None,
                    **params: Any) -> tuple[RewriteEffects, dict[str, Any]]:
    """The learned rewrite proposer of a knowledge pack's rewrite table (a loaded `Pack`, a
    path, or None: the shipped pack, when there is one) pooled with the rewrite history of
    the warehouse at `warehouse_root` (when given and present); and where its evidence came
    from. A missing shipped pack is no error: the warehouse's history alone is used."""
    from aicf_induct.induction.pack import DEFAULT_PACK, Pack, load_pack
    from aicf_induct.induction.rewrite_history import load_rewrite_history

    tables: list[pd.DataFrame] = []
    source: dict[str, Any] = {"pack": None, "pack_decisions": 0, "warehouse": None,
                              "warehouse_decisions": 0}
    if isinstance(pack, Pack) or pack is not None or DEFAULT_PACK.is_file():
        p = pack if isinstance(pack, Pack) else load_pack(pack)
        tables.append(p.rewrites)
        source["pack"] = str(p.path) if p.path else None
        source["pack_decisions"] = int(p.rewrites["n"][p.rewrites["level"] == 0].sum()) \
            if len(p.rewrites) else 0
    if warehouse_root is not None and Path(warehouse_root).is_dir():
        history = load_rewrite_history(warehouse_root)
        if len(history):
            tables.append(aggregate(history))
        source["warehouse"] = str(warehouse_root)
        source["warehouse_decisions"] = len(history)
    return RewriteEffects.from_table(combine_tables(*tables), **params), source
