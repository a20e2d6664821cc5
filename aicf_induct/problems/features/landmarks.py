"""Landmarkers: cross-validated scores of cheap learners.

Classification (accuracy, mean over folds, as pymfe's landmarking group with its defaults:
10 stratified folds, not shuffled): `one_nn` (1-nearest neighbour, Euclidean),
`stump` (pymfe best_node: a depth-1 decision tree), `naive_bayes` (Gaussian), `linear`
(pymfe linear_discr: linear discriminant analysis). Regression (R², same folds unstratified):
`one_nn_r2`, `stump_r2`, `linear_r2` (ridge, alpha 1).

Both tasks, on the same folds, one name per feature (accuracy for classification, R² for
regression): `tree_depth4` (a depth-4 decision tree), `knn10` (10 nearest neighbours),
`nonlinearity` (the better of those two less a linear model's score: logistic regression,
or the ridge above) and `tree_minus_knn`. They say how much a learner that bends gains over
a straight one, and of which kind: what tells apart the problems where a deeper or wider
network pays from those where the default is as good as any (benchmarks/RESULTS.md, "Four
landmarks of non-linearity").

1-NN does not refit per fold: one pass over row blocks computes all distances with a
matrix product and masks each row's own fold, so every row finds its nearest neighbour
outside its fold, which is exactly the 1-NN prediction of that fold's model (memory:
one block of `BLOCK_ENTRIES` distances at a time).

The other learners fit their 10 folds in threads on a large sample (`fold_threads`):
scikit-learn's trees fit without the GIL, so a 4,500 x 300 sample's features take a
fraction of their sequential time on a machine with cores to spare. Each fold's model and
score are the same either way, and the mean is taken in fold order, so the values do not
depend on the threads.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

N_FOLDS = 10  # pymfe num_cv_folds
BLOCK_ENTRIES = 1 << 22  # distances per block (32 MB of float64), whatever the row count
TREE_DEPTH = 4
NEIGHBORS = 10
# sample entries (rows x columns) from which the folds fit in threads: below it a fold
# takes milliseconds and a pool's start would cost more than it saves (e.g. wine: 2,300)
PARALLEL_ENTRIES = 250_000


def fold_threads(n_entries: int, requested: int | None = None) -> int:
    """Threads the folds of a sample of `n_entries` fit in: `requested` if given, else one
    per core (at most one per fold) for a large sample and 1 for a small one."""
    if requested is not None:
        return max(1, requested)
    return min(N_FOLDS, os.cpu_count() or 1) if n_entries >= PARALLEL_ENTRIES else 1


def fold_ids(y: np.ndarray, classification: bool, n_folds: int = N_FOLDS) -> np.ndarray:
    """(n,) fold number of each row: pymfe's StratifiedKFold(10) without shuffling; fewer
    folds when the smallest class is smaller than that."""
    n = len(y)
    if classification:
        smallest = int(np.bincount(y)[np.bincount(y) > 0].min())
        k = min(n_folds, smallest)
        splitter: StratifiedKFold | KFold = StratifiedKFold(k) if k >= 2 else KFold(
            min(n_folds, n))
    else:
        splitter = KFold(min(n_folds, n))
    folds = np.empty(n, dtype=np.int64)
    for f, (_, test) in enumerate(splitter.split(np.zeros((n, 1)), y)):
        folds[test] = f
    return folds


def _folds(folds: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for f in range(int(folds.max()) + 1):
        yield np.flatnonzero(folds != f), np.flatnonzero(folds == f)


def nearest_out_of_fold(X: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """(n,) index of each row's nearest neighbour among rows of other folds."""
    n = len(X)
    half_sq = 0.5 * np.einsum("ij,ij->i", X, X)
    nearest = np.empty(n, dtype=np.int64)
    block = max(1, BLOCK_ENTRIES // n)
    for start in range(0, n, block):
        stop = min(start + block, n)
        # |a-b|^2 / 2 - |a|^2 / 2 = |b|^2 / 2 - a.b: same argmin over b, one (b, n) buffer
        d = X[start:stop] @ X.T
        np.subtract(half_sq[None, :], d, out=d)
        d[folds[start:stop, None] == folds[None, :]] = np.inf
        nearest[start:stop] = np.argmin(d, axis=1)
    return nearest


def _cv_score(make: Callable[[], object], X: np.ndarray, y: np.ndarray, folds: np.ndarray,
              score: Callable[[np.ndarray, np.ndarray], float], threads: int = 1) -> float:
    def fold_score(split: tuple[np.ndarray, np.ndarray]) -> float:
        train, test = split
        model = make()
        model.fit(X[train], y[train])  # type: ignore[attr-defined]
        return score(y[test], model.predict(X[test]))  # type: ignore[attr-defined]

    if threads > 1:
        with ThreadPoolExecutor(threads) as pool:  # map keeps the folds' order
            return float(np.mean(list(pool.map(fold_score, _folds(folds)))))
    return float(np.mean([fold_score(split) for split in _folds(folds)]))


def _lda_score(X: np.ndarray, y: np.ndarray, folds: np.ndarray, threads: int = 1) -> float:
    """LDA's accuracy; NaN (the feature left out) where a fold has no more training rows than
    classes, which LDA cannot fit (a small row budget over many classes)."""
    if not _every_fold(folds, y, lambda train_y: len(train_y) > len(np.unique(train_y))):
        return float("nan")
    return _cv_score(LinearDiscriminantAnalysis, X, y, folds, _accuracy, threads)


def _every_fold(folds: np.ndarray, y: np.ndarray, fits: Callable[[np.ndarray], bool]) -> bool:
    """Whether every fold's training targets are ones a learner can fit (`fits`)."""
    return all(fits(y[train]) for train, _ in _folds(folds))


def _accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.mean(y == pred))


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    return float(r2_score(y, pred)) if np.ptp(y) > 0 else 0.0


def landmark_features(X: np.ndarray, y: np.ndarray, classification: bool,
                      seed: int = 0, threads: int | None = None) -> dict[str, float]:
    """The landmarks of a (sampled) table; `threads`: see `fold_threads` (None: by size)."""
    folds = fold_ids(y, classification)
    nn = nearest_out_of_fold(X, folds)
    t = fold_threads(X.size, threads)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # collinear columns in LDA, tiny folds, lbfgs's stops
        if classification:
            out = {
                "landmark.one_nn": float(np.mean([_accuracy(y[te], y[nn[te]])
                                                  for _, te in _folds(folds)])),
                "landmark.stump": _cv_score(
                    lambda: DecisionTreeClassifier(max_depth=1, random_state=seed),
                    X, y, folds, _accuracy, t),
                "landmark.naive_bayes": _cv_score(GaussianNB, X, y, folds, _accuracy, t),
                "landmark.linear": _lda_score(X, y, folds, t),
            }
            return out | _bending(X, y, folds, True, _logistic_score(X, y, folds, t), seed, t)
        out = {
            "landmark.one_nn_r2": float(np.mean([_r2(y[te], y[nn[te]])
                                                 for _, te in _folds(folds)])),
            "landmark.stump_r2": _cv_score(
                lambda: DecisionTreeRegressor(max_depth=1, random_state=seed),
                X, y, folds, _r2, t),
            "landmark.linear_r2": _cv_score(lambda: Ridge(alpha=1.0), X, y, folds, _r2, t),
        }
        return out | _bending(X, y, folds, False, out["landmark.linear_r2"], seed, t)


def _logistic_score(X: np.ndarray, y: np.ndarray, folds: np.ndarray,
                    threads: int = 1) -> float:
    """Logistic regression's accuracy; NaN where a fold's training rows hold one class."""
    if not _every_fold(folds, y, lambda train_y: len(np.unique(train_y)) > 1):
        return float("nan")
    return _cv_score(lambda: LogisticRegression(max_iter=300), X, y, folds, _accuracy,
                     threads)


def _bending(X: np.ndarray, y: np.ndarray, folds: np.ndarray, classification: bool,
             linear: float, seed: int, threads: int = 1) -> dict[str, float]:
    """The non-linearity landmarks (module docstring), `linear` the linear model's score."""
    score = _accuracy if classification else _r2
    tree_type = DecisionTreeClassifier if classification else DecisionTreeRegressor
    knn_type = KNeighborsClassifier if classification else KNeighborsRegressor
    fewest = min(len(train) for train, _ in _folds(folds))  # a tiny table: fewer neighbours
    tree = _cv_score(lambda: tree_type(max_depth=TREE_DEPTH, random_state=seed),
                     X, y, folds, score, threads)
    knn = _cv_score(lambda: knn_type(n_neighbors=min(NEIGHBORS, fewest)), X, y, folds, score,
                    threads)
    return {"landmark.tree_depth4": tree, "landmark.knn10": knn,
            "landmark.nonlinearity": max(tree, knn) - linear,
            "landmark.tree_minus_knn": tree - knn}
