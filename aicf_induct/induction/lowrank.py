"""A low-rank order: the problem × candidate error matrix's leading components, predicted
from the meta-features; blended with the gain model's order, what `propose` ranks by
(`MetaModel(blend_rank=4)`, since the twenty-sixth sitting: benchmarks/RESULTS.md,
"Induction").

The meta-model's gain model (`metamodel.py`) learns each (problem, candidate) cell on its
own, from the problem's features and the candidate's patterns. The matrix itself has
structure it does not use: candidates that do well together on one problem do well together
on others, so a problem's row of 32 errors is close to a few numbers, its coordinates on the
matrix's leading components (on the shipped corpus, 183 × 32, the first 4 hold 73 % of the
centred matrix's variance). Predicting those few from the features, rather than 32 cells,
pools what every candidate says about the problem and drops the cells' seed noise with the
discarded components: the collaborative-filtering view of algorithm selection (Fusi et al.,
"Probabilistic matrix factorization for automated machine learning", 2018; OBOE, Yang et
al., 2019), here zero-shot, the coordinates regressed on meta-features.

`LowRankOrder(r)`: the training problems' normalized errors (a missing one counts as 1,
as the baselines count it), each candidate's mean removed; the SVD's first `r` components;
a ridge regression (its penalty chosen by leave-one-out over the training problems) from
the meta-features, MinMax-scaled on the training problems as `Neighbors` scales them (a
feature the problem lacks: 0, with one 0/1 column per feature saying so), to the problem's
`r` coordinates. A new problem's predicted row is the candidates' means plus its predicted
coordinates times the components. `r` = 0 would be best-on-average. `blended` sets
orders as one by mean position: on its own the low-rank order was level with the gain
model's; the two blended were ahead of either, on the corpus and on 193 problems neither
had seen (and level with the gain order on two fresh sets swept to check it: benchmarks/
RESULTS.md, "Induction"). `LopoConfig.orders` ("lowrank<r>") scores the low-rank order
alone beside the proposer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from aicf_induct.errors import ConfigError
from aicf_induct.induction.neighbors import minmax_bounds, minmax_scaled

ALPHAS = tuple(float(a) for a in np.logspace(-2, 4, 13))  # the ridge penalties tried


def blended(first: list[str], *others: list[str]) -> list[str]:
    """Orders of the same candidates as one, by their mean position (ties: `first`'s order):
    the recommenders weighed alike, whatever the scales of their predictions."""
    if not others:
        raise ConfigError("blended needs at least two orders")
    if any(sorted(first) != sorted(o) for o in others):
        raise ConfigError("blended orders must hold the same candidates")
    positions = [{c: i for i, c in enumerate(o)} for o in (first, *others)]
    return sorted(first, key=lambda c: (sum(p[c] for p in positions), positions[0][c]))


def _design(X: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Scaled features with a missing one as 0, then a 0/1 column per feature of `missing`
    (those some training problem lacks) saying the row lacks it."""
    gone = ~np.isfinite(X)
    return np.hstack([np.where(gone, 0.0, X), gone[:, missing].astype(float)])


class LowRankOrder:
    """Fit on training errors and their meta-features; `order` ranks candidates."""

    def __init__(self, rank: int) -> None:
        if rank < 1:
            raise ConfigError(f"a low-rank order needs rank >= 1, got {rank}")
        self.rank = rank

    def fit(self, errors: pd.DataFrame, X: np.ndarray) -> LowRankOrder:
        """`errors`: problems × candidates normalized errors; `X`: the same problems'
        meta-features (rows in `errors`' order; NaN where a problem lacks one)."""
        from sklearn.linear_model import RidgeCV  # fitting only: `propose` restores

        if len(errors) != len(X):
            raise ConfigError(f"{len(errors)} problems' errors but {len(X)} feature rows")
        E = np.nan_to_num(errors.to_numpy(float), nan=1.0, posinf=1.0).clip(max=1.0)
        self.columns_ = [str(c) for c in errors.columns]
        self.means_ = E.mean(axis=0)
        U, S, Vt = np.linalg.svd(E - self.means_, full_matrices=False)
        r = min(self.rank, len(S))
        self.components_ = Vt[:r]
        self.min_, self.max_ = minmax_bounds(X)  # as `Neighbors` scales
        scaled = self.scale(X)
        self.missing_ = ~np.isfinite(scaled).all(axis=0)
        # two problems of the same features and errors (a copy) leave a 0/0 in the
        # leave-one-out errors of a small penalty: that penalty is then not chosen
        with np.errstate(invalid="ignore", divide="ignore"):
            ridge = RidgeCV(alphas=ALPHAS).fit(_design(scaled, self.missing_), U[:, :r] * S[:r])
        self.coef_ = np.reshape(ridge.coef_, (r, -1))  # a one-column target gives (D,)
        self.intercept_ = np.reshape(ridge.intercept_, (r,))
        return self

    def scale(self, X: np.ndarray) -> np.ndarray:
        """Features MinMax-scaled on the training problems (`Neighbors.scale`'s rule)."""
        return minmax_scaled(X, self.min_, self.max_)

    def predict(self, x: np.ndarray) -> pd.Series:
        """One problem's predicted normalized error per candidate, from its meta-features
        `x` (one row, the fit's columns)."""
        z = _design(self.scale(x[None, :]), self.missing_) @ self.coef_.T + self.intercept_
        return pd.Series(self.means_ + (z @ self.components_)[0], index=self.columns_)

    def order(self, x: np.ndarray, ok: list[str]) -> list[str]:
        """The candidates of `ok` by predicted error, best first (ties: `ok`'s order)."""
        pred = self.predict(x).reindex(ok).fillna(np.inf).to_numpy(float)
        return [ok[i] for i in np.argsort(pred, kind="stable")]

    # -- shipped in the knowledge pack (`MetaModel.export`) ----------------------------------
    def to_record(self) -> dict[str, Any]:
        """The fitted order as JSON-ready data; `from_record` predicts the same numbers."""
        return {"rank": self.rank, "columns": self.columns_,
                **{name: np.asarray(getattr(self, f"{name}_"), float).tolist()
                   for name in ("means", "components", "min", "max", "coef", "intercept")},
                "missing": [bool(m) for m in self.missing_]}

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> LowRankOrder:
        """`to_record`'s data back as a fitted order (ValueError, KeyError or TypeError when
        it is damaged)."""
        out = cls(int(rec["rank"]))
        out.columns_ = [str(c) for c in rec["columns"]]
        for name in ("means", "components", "min", "max", "coef", "intercept"):
            setattr(out, f"{name}_", np.asarray(rec[name], dtype=float))
        out.missing_ = np.asarray(rec["missing"], dtype=bool)
        # the components kept: `rank`, or fewer when the matrix has fewer
        d, f = len(out.columns_), len(out.min_)
        r = len(out.components_) if out.components_.ndim == 2 else -1
        if not 1 <= r <= out.rank:
            raise ValueError(f"the low-rank order's components has shape "
                             f"{out.components_.shape}, not (1..{out.rank}, {d})")
        shapes = {"means": (d,), "components": (r, d), "max": (f,),
                  "coef": (r, f + int(out.missing_.sum())), "intercept": (r,)}
        for name, shape in shapes.items():
            if getattr(out, f"{name}_").shape != shape:
                raise ValueError(f"the low-rank order's {name} has shape "
                                 f"{getattr(out, f'{name}_').shape}, not {shape}")
        if out.missing_.shape != (f,):
            raise ValueError(f"the low-rank order's missing has {len(out.missing_)} entries, "
                             f"not {f}")
        return out
