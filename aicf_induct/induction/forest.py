"""A fitted histogram-gradient-boosting regressor as plain arrays, predicted with NumPy.

The knowledge pack ships the meta-model's three fitted ensembles this way, so `propose`
neither refits them (seconds) nor unpickles scikit-learn objects (version-bound, and not
data). `TreeEnsemble.from_hgb` reads a fitted `HistGradientBoostingRegressor`'s trees
(its `_predictors` and `_baseline_prediction`: private attributes, read only when a pack is
built; tests/induction/test_forest.py holds the NumPy predictions equal to scikit-learn's,
so a change there fails loudly, not silently). Prediction follows scikit-learn's tree walk:
a NaN goes to the side the node learned for missing values, else `x <= threshold` goes
left; numerical features only (the meta-model has no categorical ones); identity link
(squared-error and quantile losses).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

NODE_FIELDS = ("feature", "threshold", "missing_left", "left", "right", "leaf", "value")


@dataclass(frozen=True)
class TreeEnsemble:
    """All trees' nodes concatenated (children as global node indices), each tree's root,
    and the constant the trees' outputs are added to."""

    feature: np.ndarray  # int64 (N,)
    threshold: np.ndarray  # float64 (N,)
    missing_left: np.ndarray  # bool (N,)
    left: np.ndarray  # int64 (N,)
    right: np.ndarray  # int64 (N,)
    leaf: np.ndarray  # bool (N,)
    value: np.ndarray  # float64 (N,)
    roots: np.ndarray  # int64 (T,)
    baseline: float

    @classmethod
    def from_hgb(cls, model: Any) -> TreeEnsemble:
        """The trees of a fitted single-output HistGradientBoostingRegressor."""
        if getattr(model, "n_trees_per_iteration_", 1) != 1:
            raise ValueError("only single-output regressors can be exported")
        parts, roots, offset = [], [], 0
        for (tree,) in model._predictors:
            nodes = tree.nodes
            if nodes["is_categorical"].any():
                raise ValueError("categorical splits cannot be exported")
            leaf = nodes["is_leaf"].astype(bool)
            parts.append((nodes["feature_idx"].astype(np.int64),
                          nodes["num_threshold"].astype(np.float64),
                          nodes["missing_go_to_left"].astype(bool),
                          np.where(leaf, 0, nodes["left"]).astype(np.int64) + offset,
                          np.where(leaf, 0, nodes["right"]).astype(np.int64) + offset,
                          leaf, nodes["value"].astype(np.float64)))
            roots.append(offset)
            offset += len(nodes)
        cols = {f: np.concatenate(c) for f, c in zip(NODE_FIELDS, zip(*parts, strict=True),
                                                     strict=True)}
        return cls(**cols, roots=np.array(roots, dtype=np.int64),
                   baseline=float(np.ravel(model._baseline_prediction)[0]))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Sum of every tree's leaf value for each row of X, plus the baseline."""
        X = np.asarray(X, dtype=np.float64)
        rows = np.arange(len(X))
        node = np.repeat(self.roots[:, None], len(X), axis=1)  # (trees, rows)
        while True:
            inner = ~self.leaf[node]
            if not inner.any():
                break
            x = X[rows[None, :], self.feature[node]]
            go_left = np.where(np.isnan(x), self.missing_left[node], x <= self.threshold[node])
            node = np.where(inner, np.where(go_left, self.left[node], self.right[node]), node)
        return self.baseline + self.value[node].sum(axis=0)

    def to_record(self) -> dict[str, Any]:
        """JSON-ready columns (Python floats round-trip exactly through JSON)."""
        return {"baseline": self.baseline, "roots": self.roots.tolist(),
                **{f: getattr(self, f).tolist() for f in NODE_FIELDS}}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> TreeEnsemble:
        dtypes = {"feature": np.int64, "threshold": np.float64, "missing_left": bool,
                  "left": np.int64, "right": np.int64, "leaf": bool, "value": np.float64}
        cols = {f: np.asarray(rec[f], dtype=dtypes[f]) for f in NODE_FIELDS}
        n = len(cols["feature"])
        if any(len(c) != n for c in cols.values()):
            raise ValueError("node columns of different lengths")
        roots = np.asarray(rec["roots"], dtype=np.int64)
        inner = ~cols["leaf"]
        own = np.arange(n)[inner]
        for idx in (roots, cols["left"][inner], cols["right"][inner]):
            if idx.size and (idx.min() < 0 or idx.max() >= n):
                raise ValueError("a node index points outside the ensemble")
        # children come after their parent, so a walk always ends (a damaged pack could loop)
        if (cols["left"][inner] <= own).any() or (cols["right"][inner] <= own).any():
            raise ValueError("a node's child does not follow it")
        return cls(**cols, roots=roots, baseline=float(rec["baseline"]))
