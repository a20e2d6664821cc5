"""A low-rank order: the problem × candidate error matrix's leading components, predicted
from the meta-features. A variant the benchmarks score beside the proposer
(`LopoConfig.orders`, "lowrank<r>"); not adopted (benchmarks/RESULTS.md, "Induction").

The meta-model (`metamodel.py`) learns each (problem, candidate) cell on its own, from the
problem's features and the candidate's patterns. The matrix itself has structure it does
not use: on the corpus, candidates that do well together on one problem do well together
on others (a wide and a deep net, a low and a high learning rate), so a problem's row of
32 errors is close to a few numbers, its coordinates on the matrix's leading components.
Predicting those few from the features, rather than 32 cells, pools what every candidate
says about the problem and drops the cells' seed noise with the discarded components: the
collaborative-filtering view of algorithm selection (Fusi et al., "Probabilistic matrix
factorization for automated machine learning", 2018; OBOE, Yang et al., 2019), here
zero-shot, the coordinates regressed on meta-features.

`LowRankOrder(r)`: the training problems' normalized errors (a missing one counts as 1,
as the baselines count it), each candidate's mean removed; the SVD's first `r` components;
a ridge regression (its penalty chosen by leave-one-out over the training problems) from
the meta-features, MinMax-scaled as `Neighbors` scales them (a feature the problem lacks:
0, with one 0/1 column per feature saying so), to the problem's `r` coordinates. A new
problem's predicted row is the candidates' means plus its predicted coordinates times the
components; the order is that row, best first. `r` = 0 would be best-on-average.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from sklearn.linear_model import RidgeCV

from aicf_induct.errors import ConfigError

ALPHAS = tuple(float(a) for a in np.logspace(-2, 4, 13))  # the ridge penalties tried
_NAME = re.compile(r"^(lowrank|blend)(\d+)$")


def parse_order(name: str) -> tuple[str, int]:
    """An order's name -> (kind, rank): "lowrank4" -> ("lowrank", 4), "blend4" -> ("blend",
    4), the rank >= 1."""
    m = _NAME.match(name)
    if m is None or int(m.group(2)) < 1:
        raise ConfigError(f"unknown order {name!r} (valid: lowrank<r> or blend<r>, r >= 1)")
    return m.group(1), int(m.group(2))


def blended(first: list[str], second: list[str]) -> list[str]:
    """Two orders of the same candidates as one, by their mean position (ties: `first`'s
    order): two recommenders weighed alike, whatever the scales of their predictions."""
    if sorted(first) != sorted(second):
        raise ConfigError("blended orders must hold the same candidates")
    at = {c: i for i, c in enumerate(second)}
    return sorted(first, key=lambda c: (first.index(c) + at[c], first.index(c)))


def _design(X: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Scaled features with a missing one as 0, then a 0/1 column per feature of `missing`
    (those some training problem lacks) saying the row lacks it."""
    gone = ~np.isfinite(X)
    return np.hstack([np.where(gone, 0.0, X), gone[:, missing].astype(float)])


class LowRankOrder:
    """Fit on training errors and their scaled meta-features; `order` ranks candidates."""

    def __init__(self, rank: int) -> None:
        if rank < 1:
            raise ConfigError(f"a low-rank order needs rank >= 1, got {rank}")
        self.rank = rank

    def fit(self, errors: pd.DataFrame, X: np.ndarray) -> LowRankOrder:
        """`errors`: problems × candidates normalized errors; `X`: the same problems'
        scaled meta-features (rows in `errors`' order; NaN where a problem lacks one)."""
        if len(errors) != len(X):
            raise ConfigError(f"{len(errors)} problems' errors but {len(X)} feature rows")
        E = np.nan_to_num(errors.to_numpy(float), nan=1.0, posinf=1.0).clip(max=1.0)
        self.columns_ = [str(c) for c in errors.columns]
        self.means_ = E.mean(axis=0)
        U, S, Vt = np.linalg.svd(E - self.means_, full_matrices=False)
        r = min(self.rank, len(S))
        self.components_ = Vt[:r]
        self.missing_ = ~np.isfinite(X).all(axis=0)
        self.ridge_ = RidgeCV(alphas=ALPHAS).fit(_design(X, self.missing_), U[:, :r] * S[:r])
        return self

    def predict(self, x: np.ndarray) -> pd.Series:
        """One problem's predicted normalized error per candidate, from its scaled
        meta-features `x` (one row, the fit's columns)."""
        # (1, r); RidgeCV gives a one-column target back as (1,)
        z = np.reshape(self.ridge_.predict(_design(x[None, :], self.missing_)), (1, -1))
        return pd.Series(self.means_ + (z @ self.components_)[0], index=self.columns_)

    def order(self, x: np.ndarray, ok: list[str]) -> list[str]:
        """The candidates of `ok` by predicted error, best first (ties: `ok`'s order)."""
        pred = self.predict(x).reindex(ok).fillna(np.inf).to_numpy(float)
        return [ok[i] for i in np.argsort(pred, kind="stable")]
