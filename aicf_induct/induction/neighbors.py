"""Nearest corpus problems by meta-features, as auto-sklearn 1.0's warm start measures them:
features MinMax-scaled on the corpus problems, L1 distance.

A feature one problem has and the other lacks (class features of a regression problem)
adds 1, the largest scaled difference; a feature both lack adds 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from aicf_induct.induction.meta_dataset import FEATURE_PREFIX


class Neighbors(BaseEstimator):
    """Fit on a problem table (rows: problems; `f.*` columns); `nearest` ranks them."""

    def __init__(self, n_neighbors: int = 5) -> None:
        self.n_neighbors = n_neighbors

    def fit(self, problems: pd.DataFrame, y: object = None) -> Neighbors:
        self.feature_names_ = [c for c in problems.columns if c.startswith(FEATURE_PREFIX)]
        X = problems[self.feature_names_].to_numpy(float)
        self.min_, self.max_ = minmax_bounds(X)
        self.index_ = list(problems.index)
        self.X_ = self.scale(X)
        return self

    def scale(self, X: np.ndarray) -> np.ndarray:
        return minmax_scaled(X, self.min_, self.max_)

    def query_vector(self, features: Mapping[str, float]) -> np.ndarray:
        """A problem's features (names with or without the `f.` prefix) as one row."""
        def get(name: str) -> float:
            v = features.get(name, features.get(name[len(FEATURE_PREFIX):], np.nan))
            return float(v) if v is not None else np.nan
        return np.array([get(n) for n in self.feature_names_], dtype=float)

    def distances(self, features: Mapping[str, float] | np.ndarray) -> np.ndarray:
        """L1 distance of one problem to every fitted problem."""
        q = features if isinstance(features, np.ndarray) else self.query_vector(features)
        return l1(self.X_, self.scale(q[None, :])[0])

    def nearest(self, features: Mapping[str, float] | np.ndarray,
                k: int | None = None) -> list[tuple[str, float]]:
        """(problem index, distance) of the k nearest, nearest first (ties: table order)."""
        d = self.distances(features)
        order = np.argsort(d, kind="stable")[: k or self.n_neighbors]
        return [(self.index_[i], float(d[i])) for i in order]


def minmax_bounds(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's (min, max) over its finite values; a column with none: (inf, -inf)."""
    ok = np.isfinite(X)
    return (np.min(np.where(ok, X, np.inf), axis=0, initial=np.inf),
            np.max(np.where(ok, X, -np.inf), axis=0, initial=-np.inf))


def minmax_scaled(X: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """X scaled to 0..1 by `minmax_bounds`' (lo, hi); a missing value stays NaN, a constant
    column (or one no row had) is shifted only."""
    span = hi - lo
    span = np.where(np.isfinite(span) & (span > 0), span, 1.0)
    return (np.where(np.isfinite(X), X, np.nan) - np.where(np.isfinite(lo), lo, 0.0)) / span


def l1(X: np.ndarray, q: np.ndarray) -> np.ndarray:
    """L1 distances of the rows of X to q with the missing-value rule above."""
    both = np.isfinite(X) & np.isfinite(q)[None, :]
    one = np.isfinite(X) != np.isfinite(q)[None, :]
    diff = np.where(both, np.abs(np.where(both, X, 0.0) - np.where(both, q, 0.0)), 0.0)
    return np.asarray(diff.sum(axis=1) + one.sum(axis=1))



# a near-duplicate's distance, as a share of the least distance between two corpus groups
NEAR_DUPLICATE_SHARE = 0.5


def closest_other_group(problems: pd.DataFrame) -> pd.Series:
    """Per problem of a problem table (with a `group` column): the distance to its nearest
    problem of another group, as `Neighbors` fitted on the table measures it."""
    knn = Neighbors().fit(problems)
    groups = problems["group"].astype(str).to_numpy()
    out = [float(np.min(d[groups != groups[i]], initial=np.inf))
           for i, d in enumerate(l1(knn.X_, q) for q in knn.X_)]
    return pd.Series(out, index=problems.index, name="distance")


def nearest_problems(corpus: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Per problem of `new` (a problem table): its nearest problem of `corpus` (one too) by
    `Neighbors`' distance fitted on the corpus. Columns: problem_id, problem, task, nearest,
    distance."""
    knn = Neighbors(1).fit(corpus)
    rows = []
    for pid, row in new.iterrows():
        feats = {str(c): float(v) for c, v in row.items() if str(c).startswith(FEATURE_PREFIX)}
        (near, dist), = knn.nearest(feats, 1)
        rows.append({"problem_id": pid, "problem": row["problem"], "task": row.get("task"),
                     "nearest": corpus.at[near, "problem"], "distance": dist})
    return pd.DataFrame(rows, columns=["problem_id", "problem", "task", "nearest", "distance"])


def near_duplicates(corpus: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """The problems of `new` (a problem table) at most half as far from a corpus problem
    (`corpus`, one too) as the two nearest corpus problems of different groups are from
    each other: the same data under another package's name (a case the corpus's groups,
    same package and columns, cannot see), found by its meta-features. One row each:
    problem, nearest corpus problem, distance, threshold. A corpus of fewer than 2 groups
    has no distance between groups to judge by: no problem is called a near-duplicate."""
    if corpus["group"].nunique() < 2:  # the threshold would be half of infinity
        return pd.DataFrame(columns=["problem_id", "problem", "nearest", "distance",
                                     "threshold"])
    threshold = NEAR_DUPLICATE_SHARE * float(closest_other_group(corpus).min())
    near = nearest_problems(corpus, new)
    out = near[near["distance"] < threshold].drop(columns="task").reset_index(drop=True)
    return out.assign(threshold=threshold)
