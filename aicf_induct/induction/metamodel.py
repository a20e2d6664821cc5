"""The meta-model: predicts a candidate's normalized error on a problem, with an interval.

Inputs of one (problem, candidate) row: the problem's meta-features (`f.*`, NaN where not
defined), the candidate's IR patterns (`p.*`, the median over the corpus problems: only
parameter counts depend on the problem) and its recipe (log10 lr, weight decay, batch size,
one 0/1 column per optimizer). Target: the candidate's normalized error on the problem,
averaged over `seeds` (`target`, default the test split).

Scikit-learn histogram gradient-boosting models (they take NaN as is): the mean (squared
error) gives the expected normalized error; the (1 − level)/2 and (1 + level)/2 quantile
models give the `level` interval (80 % by default); with `ranking="rank"` a
fourth, the rank model, predicts the candidate's rank within its problem
(`within_problem_rank` of the normalized error, 0 best, 1 worst) and orders the
candidates. The rank weighs every problem alike, whatever its errors' spread; like the
normalized error it ties the candidates worse than the median (the order among those does
not matter to a top-k). `ranking="raw_rank"` ranks the raw error instead, telling the bad
from the very bad; on the 183-problem corpus it was level with "rank" (benchmarks/
RESULTS.md, "Induction: leave-one-problem-out evaluation", measures the three orders).
`ranking="error"` orders by the mean model, as packs from before the rank model do.
`ranking="gain"` (the default since the eighth sitting: on the full corpus at 6 seeds its
top-1 closed 80 % of the default → full-search gap where "rank"'s fell behind the default;
benchmarks/RESULTS.md, "Induction") is anchored on the **best-on-average candidate** of the
training problems (the lowest mean target; on the corpus, the default MLP): a fourth model,
the gain model,
predicts each candidate's target minus the anchor's on the same problem, the anchor's own
gain is 0 by definition, and the candidates are ordered by predicted gain, so the top-1
leaves the anchor only for a candidate predicted to beat it on this problem. A difference
within one problem drops what makes a problem hard for every candidate, which a level model
must learn and a ranking of levels carries as noise. With `blend_rank` r > 0 (4 by default
since the twenty-sixth sitting) that order is blended by mean position with the low-rank
order of the same target (`lowrank.py`: the training problems' matrix's first r components,
a problem's coordinates predicted from its features), which pools what every candidate says
about the problem: the blend's top-1 was ahead of the gain order's on the corpus and on 193
problems neither had seen, level with it on two fresh sets (benchmarks/RESULTS.md,
"Induction"). The
interval is for a mean over as many seeds as the target averages: trained on 4-seed means
and checked on 2-seed means, a nominal 80 % covered 62 % of held-out outcomes on a
synthetic corpus; trained on the same 2 seeds, 83 % (LOPO passes its score seeds). The mean
and rank models' target averages `rank_seeds` (all by default; LOPO passes its score seeds
unless told `rank_seeds="all"`). `conformal_folds` ≥ 2 adds conformalized quantile
regression on out-of-fold predictions, problem groups as folds (there it moved nothing, at
3x the fitting time, hence off by default). `evaluate` measures the coverage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from threadpoolctl import threadpool_limits

from aicf_induct.errors import ConfigError
from aicf_induct.induction.forest import TreeEnsemble
from aicf_induct.induction.lowrank import LowRankOrder, blended
from aicf_induct.induction.meta_dataset import (
    FEATURE_PREFIX,
    candidate_table,
    check_meta,
    feature_columns,
    pattern_columns,
    problem_table,
    score_matrix,
)

if TYPE_CHECKING:  # fitting only: `propose` restores the trees and never imports these
    from sklearn.ensemble import HistGradientBoostingRegressor

PREDICTION_COLUMNS = ("expected", "low", "high")  # normalized error: mean, interval bounds
ENSEMBLES = ("mean", "low", "high")  # the fitted models: `<name>_model_`, and "rank"
RANKINGS = ("rank", "raw_rank", "error", "gain")
RANK_MODELS = ("rank", "raw_rank")  # the orders a fourth model, the rank model, gives
# "raw_rank" ranks a normalized-error target's raw error (err = 1 − score)
RAW_ERROR = {"test_norm_error": "test_error", "val_norm_error": "val_error"}
# the low-rank order's rank the proposer blends with its own order (0: none); 4 was the
# corpus's best of 2, 4 and 8 (benchmarks/RESULTS.md, "Induction", twenty-sixth sitting)
BLEND_RANK = 4


def within_problem_rank(errors: np.ndarray) -> np.ndarray:
    """(P, C) errors -> each candidate's rank within its problem's row scaled to [0, 1] (0
    best, ties averaged; +inf, a run without a finite score, ranks last; 0.5 for a row's one
    scored value; NaN, unscored, stays NaN): a ranking target on one scale for every
    problem, whatever its errors' spread."""
    ranks = pd.DataFrame(errors).rank(axis=1, method="average").to_numpy(float)
    scored = ~np.isnan(errors)
    n = scored.sum(axis=1, keepdims=True).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 1, (ranks - 1) / (n - 1), np.where(scored, 0.5, np.nan))


def fold_labels(groups: np.ndarray, repeat: int, random_state: int = 0) -> np.ndarray:
    """The labels `GroupKFold` assigns the groups to folds by, for the conformal step's
    `repeat`-th assignment: the groups' own order for the first, shuffled (seeded by
    `random_state` and `repeat`) for the others. `GroupKFold` puts equal-sized groups in
    folds by their labels, so each order is another assignment."""
    names = np.unique(groups)
    order = np.random.default_rng([random_state, repeat]).permutation(len(names)) \
        if repeat else np.arange(len(names))
    return order[np.searchsorted(names, groups)]


class MetaModel(BaseEstimator):
    """Fit on a meta-dataset; `predict_problem(features)` scores every known candidate."""

    def __init__(self, target: str = "test_norm_error", level: float = 0.8,
                 max_iter: int = 200, learning_rate: float = 0.05, max_leaf_nodes: int = 15,
                 min_samples_leaf: int = 20, seeds: tuple[int, ...] | None = None,
                 rank_seeds: tuple[int, ...] | None = None, conformal_folds: int = 0,
                 threads: int | None = 1, random_state: int = 0,
                 ranking: str = "gain", conformal_repeats: int = 1,
                 blend_rank: int = BLEND_RANK) -> None:
        self.target = target
        self.level = level
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        # the target averages these seeds (None: all); LOPO passes the score seeds, so the
        # interval is one for the outcome it is checked against (a mean over as many seeds)
        self.seeds = seeds
        # the mean model's target averages these (None: all): the ranking learns from every
        # seed of the training problems (less noise), the interval from `seeds`
        self.rank_seeds = rank_seeds
        self.conformal_folds = conformal_folds
        # assignments of the groups to those folds whose out-of-fold scores are pooled:
        # `GroupKFold` assigns groups of equal size by their names, and one assignment's
        # margin moved by ~0.006 (sd) with the names (benchmarks/RESULTS.md, "The pack refit")
        self.conformal_repeats = conformal_repeats
        # OpenMP threads of the boosting: the matrices are small, and on a shared machine
        # the default (one per core) ran 30x slower than one thread. None: leave it alone.
        self.threads = threads
        self.random_state = random_state
        # what orders the candidates: "rank" / "raw_rank", a model of the candidate's rank
        # within its problem (`within_problem_rank`) of the normalized / the raw error, or
        # "error", the mean model's normalized error
        self.ranking = ranking
        # > 0: the order above blended by mean position with the low-rank order of this rank
        # (`lowrank.py`), fitted on the same target; 0: that order alone
        self.blend_rank = blend_rank

    def fit(self, meta: pd.DataFrame, y: Any = None) -> MetaModel:
        """Learn from a meta-dataset (`load_meta_dataset`): gradient boosting from a
        problem's meta-features and a candidate's patterns and recipe to its normalized
        error (the mean model), the ordering model `ranking` names, the quantile models of
        the `level` interval (widened by `conformal_folds`) and, with `blend_rank`, the
        low-rank order. Returns self."""
        check_meta(meta)
        if not 0 < self.level < 1:
            raise ConfigError(f"level must be in (0, 1), got {self.level}")
        if self.ranking not in RANKINGS:
            raise ConfigError(f"ranking must be one of {', '.join(RANKINGS)}, got "
                              f"{self.ranking!r}")
        if self.blend_rank < 0:
            raise ConfigError(f"blend_rank must be >= 0 (0: no blend), got {self.blend_rank}")
        probs = problem_table(meta)
        # a feature no training problem has tells nothing (and HGB's binning fails on it)
        self.feature_names_ = [f for f in feature_columns(meta)
                               if np.isfinite(probs[f].to_numpy(float)).any()]
        self.candidates_ = candidate_table(meta)
        self.optimizers_ = sorted(self.candidates_["optimizer"].astype(str).unique())
        self.pattern_names_ = pattern_columns(meta)
        def target(seeds: tuple[int, ...] | None, column: str = self.target) -> np.ndarray:
            return score_matrix(meta, column, seeds).reindex(
                index=probs.index, columns=self.candidates_.index).to_numpy(float).ravel()

        X_all = self.design(probs[self.feature_names_].to_numpy(float))  # (P * C, D)
        yv = target(self.seeds)
        ry = yv if self.rank_seeds == self.seeds else target(self.rank_seeds)
        ok, rank_ok = np.isfinite(yv), np.isfinite(ry)
        if ok.sum() < 2 or rank_ok.sum() < 2:
            raise ConfigError("the meta-model needs at least 2 scored (problem, candidate) "
                              "pairs")
        groups = np.repeat(probs["group"].to_numpy(str), len(self.candidates_))[ok]
        X, yv = X_all[ok], yv[ok]
        with threadpool_limits(self.threads, user_api="openmp"):
            self.mean_model_ = self._model("squared_error").fit(X_all[rank_ok], ry[rank_ok])
            if self.ranking in RANK_MODELS:  # "rank" ranks the target, where every
                # candidate worse than the median ties at 1; "raw_rank" the raw error
                ranked_of = target(self.rank_seeds, RAW_ERROR.get(self.target, self.target)) \
                    if self.ranking == "raw_rank" else ry
                rr = within_problem_rank(ranked_of.reshape(len(probs), -1)).ravel()
                ranked = np.isfinite(rr)
                self.rank_model_ = self._model("squared_error").fit(X_all[ranked],
                                                                    rr[ranked])
            elif self.ranking == "gain":
                self.anchor_, gain = self._gains(ry.reshape(len(probs), -1))
                kept = np.isfinite(gain)
                self.gain_model_ = self._model("squared_error").fit(X_all[kept], gain[kept])
            if self.blend_rank:  # the rank target's matrix, the features as the fit sees them
                self.lowrank_ = LowRankOrder(self.blend_rank).fit(
                    pd.DataFrame(ry.reshape(len(probs), -1), index=probs.index,
                                 columns=self.candidates_.index),
                    probs[self.feature_names_].to_numpy(float))
            self.low_model_, self.high_model_ = self._quantile_pair(X, yv)
            self.margin_ = self._conformal_margin(X, yv, groups)
        self.n_features_in_ = X.shape[1]
        return self

    def _gains(self, y: np.ndarray) -> tuple[str, np.ndarray]:
        """(P, C) targets -> the anchor (the candidate lowest on average) and every row's
        target minus the anchor's on its problem, flattened problem-major."""
        with np.errstate(invalid="ignore"):
            means = np.nanmean(np.where(np.isfinite(y), y, np.nan), axis=0)
        a = int(np.nanargmin(means))
        return str(self.candidates_.index[a]), (y - y[:, [a]]).ravel()

    def _quantile_pair(self, X: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
        a = (1 - self.level) / 2
        return (self._model("quantile", a).fit(X, y), self._model("quantile", 1 - a).fit(X, y))

    def _conformal_margin(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> float:
        """Conformalized quantile regression (Romano et al. 2019): how far the quantile
        models' interval must widen (or may shrink) to hold `level` of out-of-fold outcomes,
        folds by problem group, the scores of `conformal_repeats` assignments of the groups
        to the folds pooled. 0 with `conformal_folds` < 2 or too few groups."""
        k = min(self.conformal_folds, len(np.unique(groups)))
        if k < 2:
            return 0.0
        pooled = [self._out_of_fold_scores(X, y, fold_labels(groups, r, self.random_state), k)
                  for r in range(max(1, self.conformal_repeats))]
        q = min(1.0, self.level * (1 + 1 / len(y)))
        return float(np.quantile(np.concatenate(pooled), q))

    def _out_of_fold_scores(self, X: np.ndarray, y: np.ndarray, labels: np.ndarray,
                            k: int) -> np.ndarray:
        """Each row's nonconformity under quantile models fitted without its fold (`k`
        group folds of `labels`)."""
        from sklearn.model_selection import GroupKFold

        scores = np.empty(len(y))
        for fit_idx, cal_idx in GroupKFold(n_splits=k).split(X, y, labels):
            # a feature none of the fold's problems has tells nothing (and fails the binning)
            cols = np.isfinite(X[fit_idx]).any(axis=0)
            lo, hi = self._quantile_pair(X[fit_idx][:, cols], y[fit_idx])
            cal = X[cal_idx][:, cols]
            scores[cal_idx] = np.maximum(lo.predict(cal) - y[cal_idx],
                                         y[cal_idx] - hi.predict(cal))
        return scores

    def _model(self, loss: str, quantile: float | None = None) -> HistGradientBoostingRegressor:
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(
            loss=loss, quantile=quantile, max_iter=self.max_iter,
            learning_rate=self.learning_rate, max_leaf_nodes=self.max_leaf_nodes,
            min_samples_leaf=self.min_samples_leaf, random_state=self.random_state)

    # -- shipped in the knowledge pack -------------------------------------------------------
    def export(self) -> dict[str, Any]:
        """The fitted model as JSON-ready data: its parameters, what `fit` learned about the
        columns, and the three ensembles' trees (see `induction.forest`). `restore` with the
        same meta-dataset gives a model that predicts the same numbers."""
        params = {k: v for k, v in self.get_params().items()
                  if isinstance(v, int | float | str | bool)}
        anchor = {"anchor": self.anchor_} if self.ranking == "gain" else {}
        lowrank = {"lowrank": self.lowrank_.to_record()} if self.blend_rank else {}
        return {"params": params, "margin": float(self.margin_), **anchor, **lowrank,
                "feature_names": list(self.feature_names_),
                "optimizers": list(self.optimizers_),
                "pattern_names": list(self.pattern_names_),
                "models": {name: TreeEnsemble.from_hgb(getattr(self, f"{name}_model_"))
                           .to_record() for name in self._ensembles()}}

    def _ensembles(self) -> tuple[str, ...]:
        if self.ranking in RANK_MODELS:
            return (*ENSEMBLES, "rank")
        return (*ENSEMBLES, "gain") if self.ranking == "gain" else ENSEMBLES

    @classmethod
    def restore(cls, meta: pd.DataFrame, rec: Mapping[str, Any]) -> MetaModel:
        """A fitted model from `export`'s data and the meta-dataset it was fitted on (its
        candidates); no fitting."""
        # a pack from before the rank model ranked by the mean model's error, one from before
        # the blend by its order alone; a parameter this version does not know only mattered
        # to the fit, which restoring skips
        known = cls().get_params()
        mm = cls(**{"ranking": "error", "blend_rank": 0,
                    **{k: v for k, v in rec["params"].items() if k in known}})
        mm.feature_names_ = [str(f) for f in rec["feature_names"]]
        mm.optimizers_ = [str(o) for o in rec["optimizers"]]
        mm.pattern_names_ = [str(p) for p in rec["pattern_names"]]
        mm.candidates_ = candidate_table(meta)
        missing = [p for p in mm.pattern_names_ if p not in mm.candidates_.columns]
        if missing:
            raise ValueError(f"pattern column(s) {', '.join(missing)} not in the candidates")
        for name in mm._ensembles():
            if name not in rec["models"]:
                raise ValueError(f"the {name} model is missing (ranking {mm.ranking!r})")
            setattr(mm, f"{name}_model_", TreeEnsemble.from_record(rec["models"][name]))
        mm.margin_ = float(rec["margin"])
        if mm.blend_rank:
            if "lowrank" not in rec:
                raise ValueError(f"the low-rank order is missing (blend_rank {mm.blend_rank})")
            mm.lowrank_ = LowRankOrder.from_record(rec["lowrank"])
            if mm.lowrank_.columns_ != [str(c) for c in mm.candidates_.index]:
                raise ValueError("the low-rank order's candidates are not the pack's")
            if len(mm.lowrank_.min_) != len(mm.feature_names_):
                raise ValueError("the low-rank order's features are not the model's")
        if mm.ranking == "gain":
            mm.anchor_ = str(rec["anchor"])
            if mm.anchor_ not in mm.candidates_.index:
                raise ValueError(f"the gain model's anchor {mm.anchor_} is not a candidate")
        mm.n_features_in_ = len(mm.feature_names_) + mm.candidate_inputs().shape[1]
        return mm

    def candidate_inputs(self) -> np.ndarray:
        """(C, patterns + recipe) inputs of the candidates, in `candidates_` order."""
        c = self.candidates_
        recipe = np.column_stack([
            np.log10(np.clip(c["lr"].to_numpy(float), 1e-12, None)),
            c["weight_decay"].to_numpy(float), c["batch_size"].to_numpy(float),
            *[(c["optimizer"].astype(str) == o).to_numpy(float) for o in self.optimizers_]])
        return np.column_stack([c[self.pattern_names_].to_numpy(float), recipe])

    def design(self, feats: np.ndarray) -> np.ndarray:
        """Rows problem-major: (P, F) features × every candidate -> (P * C, F + D)."""
        cand = self.candidate_inputs()
        P, C = len(feats), len(cand)
        return np.column_stack([np.repeat(feats, C, axis=0), np.tile(cand, (P, 1))])

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Expected normalized error of design rows."""
        with threadpool_limits(self.threads, user_api="openmp"):
            return np.asarray(self.mean_model_.predict(X))

    def predict_interval(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) of design rows (`design`): the interval meant to hold the outcome at
        `level`, from the quantile models, widened by the conformal margin and, for a
        normalized error, clipped to [0, 1]."""
        with threadpool_limits(self.threads, user_api="openmp"):
            lo, hi = self.low_model_.predict(X), self.high_model_.predict(X)
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)  # quantile models may cross
        mid = (lo + hi) / 2  # a negative margin shrinks the interval, never past its middle
        lo, hi = np.minimum(lo - self.margin_, mid), np.maximum(hi + self.margin_, mid)
        if self.target.endswith("norm_error"):  # the outcome lives in [0, 1]: so does its
            lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)  # interval, widened or not
        return lo, hi

    def feature_vector(self, features: Mapping[str, float]) -> np.ndarray:
        """A problem's meta-features (names with or without `f.`) in the model's order; a
        name left out, NaN or None is missing. A value that is not a number, or infinite,
        is a ConfigError naming the feature (the boosting would fail on it far from it)."""
        out = np.full(len(self.feature_names_), np.nan)
        for i, n in enumerate(self.feature_names_):
            short = n[len(FEATURE_PREFIX):]
            value = features.get(n, features.get(short))
            if value is None:
                continue
            try:
                out[i] = float(value)
            except (TypeError, ValueError):
                raise ConfigError(f"meta-feature '{short}' must be a number, got "
                                  f"{value!r}") from None
            if np.isinf(out[i]):
                raise ConfigError(f"meta-feature '{short}' must be finite (NaN: missing), "
                                  f"got {value!r}")
        return out

    def predict_problem(self, features: Mapping[str, float] | np.ndarray,
                        among: Sequence[str] | None = None) -> pd.DataFrame:
        """Every candidate's (or only those of `among`: the ones that apply to the problem)
        expected normalized error and interval on one problem, best first (index: candidate
        key); with a rank model ("rank", "raw_rank"), also its expected rank within the
        problem (`rank`, 0 best), which orders them; with the gain model, its expected
        normalized error minus the anchor's (`gain`, the anchor's 0), which orders them.
        With `blend_rank`, also the low-rank order's predicted error (`lowrank`), and the
        order is that one blended with the low-rank one's (`lowrank.blended` of
        `member_orders`), among the candidates kept."""
        f = features if isinstance(features, np.ndarray) else self.feature_vector(features)
        X = self.design(f[None, :])
        lo, hi = self.predict_interval(X)
        out = pd.DataFrame({"expected": self.predict(X), "low": lo, "high": hi},
                           index=self.candidates_.index)
        if self.ranking == "gain":
            with threadpool_limits(self.threads, user_api="openmp"):
                out["gain"] = np.asarray(self.gain_model_.predict(X))
            out.loc[self.anchor_, "gain"] = 0.0
        elif self.ranking in RANK_MODELS:
            with threadpool_limits(self.threads, user_api="openmp"):
                out["rank"] = np.asarray(self.rank_model_.predict(X))
        if self.blend_rank:
            out["lowrank"] = self.lowrank_.predict(f).reindex(out.index).to_numpy(float)
        if among is not None:
            out = out[out.index.isin(list(among))]
        out = out.loc[blended(*self.member_orders(out))] if self.blend_rank \
            else out.loc[self.member_orders(out)[0]]
        # the mean model's estimate, said within its own interval (so within [0, 1] for a
        # normalized error): unclipped it could read 1.10 beside [0.42, 1.00]; after the
        # order, which it breaks ties of, so that no proposal moves
        out["expected"] = out["expected"].clip(out["low"], out["high"])
        return out

    def member_orders(self, pred: pd.DataFrame) -> list[list[str]]:
        """The orders the proposal blends, each of `pred`'s candidates (`predict_problem`'s
        frame, in any row order): this model's own (by gain, rank or expected error, ties in
        `candidates_` order) and, with `blend_rank`, the low-rank order's (ties in the
        first's order, as `LowRankOrder.order` breaks them)."""
        keys = {"gain": ["gain", "expected"], "error": ["expected", "low"]}.get(
            self.ranking, ["rank", "expected"])
        own = pred.loc[[c for c in self.candidates_.index if c in pred.index]] \
            .sort_values(keys, kind="stable")
        orders = [[str(c) for c in own.index]]
        if self.blend_rank:
            orders.append([str(c) for c in own.sort_values("lowrank", kind="stable").index])
        return orders
