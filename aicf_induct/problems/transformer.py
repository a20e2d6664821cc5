"""The columns' encoder `preprocess.prepare` fits on the train rows: numeric columns imputed
(median, with a missing-indicator column) and scaled, categorical ones given a "(missing)"
level and one-hot encoded. Its own module because it is the problems layer's one use of
scikit-learn at load time: `prepare` imports it when it runs, so that importing the layer
(a command's `--help`) does not import scikit-learn."""

from __future__ import annotations

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from aicf_induct.problems.preprocess import MAX_CATEGORIES, MISSING_LEVEL


def make_transformer(numeric: list[str], categorical: list[str]) -> ColumnTransformer:
    num = Pipeline([("impute", SimpleImputer(strategy="median", add_indicator=True)),
                    ("scale", StandardScaler())])
    cat = Pipeline([("impute", SimpleImputer(strategy="constant", fill_value=MISSING_LEVEL)),
                    ("onehot", OneHotEncoder(handle_unknown="infrequent_if_exist",
                                             max_categories=MAX_CATEGORIES,
                                             sparse_output=False, dtype=np.float64))])
    return ColumnTransformer([("num", num, numeric), ("cat", cat, categorical)],
                             sparse_threshold=0.0)
