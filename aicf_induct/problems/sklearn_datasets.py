"""scikit-learn's bundled datasets (no download): iris, wine, breast_cancer, digits, diabetes."""

from __future__ import annotations

import hashlib

import numpy as np
from sklearn import datasets
from sklearn.model_selection import train_test_split

from aicf_induct.errors import DataError
from aicf_induct.problems.problem import Problem, Split

_LOADERS = {
    "iris": (datasets.load_iris, "classification"),
    "wine": (datasets.load_wine, "classification"),
    "breast_cancer": (datasets.load_breast_cancer, "classification"),
    "digits": (datasets.load_digits, "classification"),
    "diabetes": (datasets.load_diabetes, "regression"),
}

SKLEARN_NAMES = tuple(_LOADERS)


def load_sklearn(name: str, seed: int = 0, val_frac: float = 0.15,
                 test_frac: float = 0.2) -> Problem:
    if name not in _LOADERS:
        raise DataError(f"unknown dataset '{name}'; bundled ones: {', '.join(_LOADERS)}")
    loader, task = _LOADERS[name]
    bunch = loader()
    X = np.asarray(bunch.data, dtype=np.float64)
    y_raw = np.asarray(bunch.target)
    strat = y_raw if task == "classification" else None
    X_tv, X_te, y_tv, y_te = train_test_split(X, y_raw, test_size=test_frac, random_state=seed,
                                              stratify=strat)
    strat_tv = y_tv if task == "classification" else None
    X_tr, X_va, y_tr, y_va = train_test_split(X_tv, y_tv, test_size=val_frac / (1 - test_frac),
                                              random_state=seed, stratify=strat_tv)
    mu, sd = X_tr.mean(0), X_tr.std(0)
    sd[sd == 0] = 1.0
    X_tr, X_va, X_te = ((a - mu) / sd for a in (X_tr, X_va, X_te))
    y_mean, y_std = 0.0, 1.0
    if task == "classification":
        ys = [a.astype(np.int64) for a in (y_tr, y_va, y_te)]
        n_classes = int(y_raw.max()) + 1
    else:
        y_mean, y_std = float(y_tr.mean()), float(y_tr.std())
        ys = [((a - y_mean) / y_std).astype(np.float64) for a in (y_tr, y_va, y_te)]
        n_classes = 0
    digest = hashlib.sha256(X.tobytes() + np.asarray(y_raw, np.float64).tobytes()).hexdigest()
    return Problem(
        problem_id=digest[:16], name=name, source="sklearn", task=task, target="target",
        feature_names=tuple(str(f) for f in getattr(bunch, "feature_names", range(X.shape[1]))),
        n_classes=n_classes, train=Split(X_tr, ys[0]), val=Split(X_va, ys[1]),
        test=Split(X_te, ys[2]), y_mean=y_mean, y_std=y_std,
    )
