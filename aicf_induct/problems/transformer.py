"""The columns' encoder `preprocess.prepare` fits on the train rows: numeric columns imputed
(median, with a missing-indicator column) and scaled, categorical ones given a level for
missing values and one-hot encoded. A module of its own, imported by `prepare` when it runs:
with the landmarks, it is where the problems layer imports scikit-learn, and importing the
layer (a command's `--help`) does not."""

from __future__ import annotations

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler


def make_transformer(numeric: list[str], categorical: list[str], *, missing_level: str,
                     max_categories: int) -> ColumnTransformer:
    """The encoder of `numeric` and `categorical` columns: a missing category is the level
    `missing_level`, and each categorical column takes at most `max_categories` one-hot
    columns (rarer levels share an "infrequent" one)."""
    num = Pipeline([("impute", SimpleImputer(strategy="median", add_indicator=True)),
                    ("scale", StandardScaler())])
    cat = Pipeline([("impute", SimpleImputer(strategy="constant", fill_value=missing_level)),
                    ("onehot", OneHotEncoder(handle_unknown="infrequent_if_exist",
                                             max_categories=max_categories,
                                             sparse_output=False, dtype=np.float64))])
    return ColumnTransformer([("num", num, numeric), ("cat", cat, categorical)],
                             sparse_threshold=0.0)
