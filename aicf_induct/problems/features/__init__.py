"""Problem meta-features: what the induction layer correlates with structure outcomes.

`extract_features(problem)` returns a flat {name: float} dict, computed on the problem's
training split (nothing from val/test labels; the raw table's facts below aside), every
value finite. Groups and names:

- `simple.*`: rows, features, classes, ratios, class frequencies (of the training split:
  `simple.log_n_rows` is log10 of its rows), plus facts about the raw table over all its
  rows, no labels among them (`simple.n_rows`, missing fraction, categorical fraction,
  columns dropped);
- `stat.*`: skewness, kurtosis, |correlation|, high-correlation fraction, outliers,
  sparsity, IQR, MAD (mean/sd over columns); regression adds the target's shape and its
  |correlation| with the features;
- `info.*`: class entropy, attribute/joint entropy, mutual information, equivalent
  number of features, noise-to-signal ratio (regression: on the binned target);
- `landmark.*`: 10-fold CV scores of 1-NN, a decision stump, naive Bayes, LDA
  (classification accuracy), or 1-NN, stump, ridge (regression R², names end in `_r2`);
  and, one name for both tasks, a depth-4 tree, 10-NN, and how far the better of those two
  gets past a linear model (`landmark.nonlinearity`; `landmarks.py`);
- `complexity.*`: principal components for 95 % of the variance (count, per feature,
  per row).

Class-based features (class frequencies, naive Bayes, LDA) do not exist for regression and
are omitted there; `simple.is_classification` tells the two apart.

Bounded time and memory: above `FeatureConfig.row_budget` rows (default 5,000) everything
but the `simple.*` counts is computed on a stratified random sample of that many rows, and
above `column_budget` columns (default 1,000) on a random subset of columns, so neither
grows with the table past them. The sample itself is rows x columns x 8 bytes (40 MB at the
defaults); the landmarks' learners hold working copies of it on top (LDA's the largest).
On a sample of 250,000 entries or more the landmarks' folds fit in threads, each with its
own working memory (`FeatureConfig.fold_threads`). Measured at the budgets (5,000 of
20,000 rows, 1,000 columns; `benchmarks/features_bench.py --rows 20000 --cols 1000`,
benchmarks/RESULTS.md "Problem features"): 125 MB above the start one fold at a time, 216
MB with the folds in 2 threads; a wider table adds its training split's column subset.
`simple.sampled_rows` says how many rows were used.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from threadpoolctl import threadpool_limits

from aicf_induct.errors import ConfigError
from aicf_induct.problems.features.info import discretise, info_features, n_bins
from aicf_induct.problems.features.stats import (
    complexity_features,
    simple_features,
    statistical_features,
    target_features,
)
from aicf_induct.problems.problem import Problem
from aicf_induct.problems.splits import sample_indices

if TYPE_CHECKING:
    from aicf_induct.records import Recorder


@dataclass(frozen=True)
class FeatureConfig:
    row_budget: int | None = 5_000  # rows used beyond the simple counts; None: all rows
    column_budget: int | None = 1_000  # columns used likewise; None: all columns
    seed: int = 0  # for the row/column samples and the stump's tie-breaking
    # BLAS threads while extracting: our matrices are small, and a multi-threaded BLAS on a
    # busy machine (parallel extractions, training next door) runs them 10x slower. None:
    # leave the BLAS setting alone.
    blas_threads: int | None = 1
    # threads the landmarks' folds fit in (the values do not depend on it): None, one per
    # core on a large sample and 1 on a small one (`landmarks.fold_threads`)
    fold_threads: int | None = None


def _sample_rows(X: np.ndarray, y: np.ndarray, classification: bool,
                 budget: int | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if budget is None or len(X) <= budget:
        return X, y
    strata = y if classification and np.bincount(y).min() >= 2 else None
    idx = sample_indices(len(X), budget, strata, seed, min_per_class=2)
    return X[idx], y[idx]


def compute_features(X: np.ndarray, y: np.ndarray, classification: bool,
                     config: FeatureConfig | None = None) -> dict[str, float]:
    """Meta-features of a numeric matrix and target (class ids 0..k-1, or floats)."""
    cfg = config or FeatureConfig()
    if cfg.blas_threads is None:
        return _compute(X, y, classification, cfg)
    with threadpool_limits(limits=cfg.blas_threads, user_api="blas"):
        return _compute(X, y, classification, cfg)


def _compute(X: np.ndarray, y: np.ndarray, classification: bool,
             cfg: FeatureConfig) -> dict[str, float]:
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    y = np.asarray(y, dtype=np.int64 if classification else np.float64)
    n_classes = len(np.unique(y)) if classification else 0
    out = simple_features(n, d, y if classification else None, n_classes)
    Xs, ys = _sample_rows(X, y, classification, cfg.row_budget, cfg.seed)
    if cfg.column_budget is not None and d > cfg.column_budget:
        cols = np.sort(np.random.default_rng(cfg.seed).choice(d, cfg.column_budget,
                                                              replace=False))
        Xs = Xs[:, cols]
    out["simple.sampled_rows"] = float(len(Xs))
    out |= statistical_features(Xs)
    out |= complexity_features(Xs, n_rows=n)
    bins = n_bins(n)  # of the whole dataset: a row sample estimates the same quantities
    y_codes = ys if classification else discretise(ys[:, None], bins)[:, 0]
    out |= info_features(Xs, y_codes, bins)
    if not classification:
        out |= target_features(Xs, ys)
    # here: the landmarks' scikit-learn models load when features are computed, not when
    # the package is imported (a command's `--help`, `FeatureConfig`'s defaults)
    from aicf_induct.problems.features.landmarks import landmark_features

    out |= landmark_features(Xs, ys, classification, seed=cfg.seed, threads=cfg.fold_threads)
    return {k: float(v) for k, v in out.items() if np.isfinite(v)}  # never NaN or inf


def extract_features(problem: Problem, config: FeatureConfig | None = None) -> dict[str, float]:
    """Meta-features of a problem, on its training split (see the module docstring)."""
    if not isinstance(problem, Problem):  # a name ("wine") failed at `problem.task`
        shown = f" {problem!r}" if isinstance(problem, str) else ""
        raise ConfigError(f"extract_features takes a Problem, e.g. load_problem('wine'), got "
                          f"{type(problem).__name__}{shown}")
    classification = problem.task == "classification"
    out = compute_features(problem.train.X, problem.train.y, classification, config)
    raw = problem.raw
    kinds = raw.get("n_numeric_columns", 0.0) + raw.get("n_categorical_columns", 0.0)
    # the table's facts, over all its rows (as the corpus's were); the rest is of the
    # training split (simple.log_n_rows: log10 of its rows)
    out["simple.n_rows"] = float(problem.n_rows)
    out["simple.missing_fraction"] = float(raw.get("missing_fraction", 0.0))
    out["simple.categorical_fraction"] = (raw.get("n_categorical_columns", 0.0) / kinds
                                          if kinds else 0.0)
    out["simple.dropped_columns"] = float(raw.get("n_dropped_columns", 0.0))
    return out


def log_problem_features(recorder: Recorder, problems: Iterable[Problem],
                         config: FeatureConfig | None = None) -> int:
    """Extract each problem's features and log problem + features through `recorder`
    (`recorder.problem(problem.record(features))`). Returns how many were logged."""
    count = 0
    for problem in problems:
        recorder.problem(problem.record(extract_features(problem, config)))
        count += 1
    return count


__all__ = ["FeatureConfig", "compute_features", "extract_features", "log_problem_features"]
