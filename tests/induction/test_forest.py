"""The pack's NumPy tree ensembles predict what scikit-learn's fitted models predict."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

from aicf_induct.induction.forest import TreeEnsemble


@pytest.mark.parametrize("loss", [("squared_error", None), ("quantile", 0.1),
                                  ("quantile", 0.9)])
def test_exported_trees_predict_as_sklearn_with_missing_values(loss: tuple) -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 6))
    X[rng.random(X.shape) < 0.15] = np.nan  # NaNs in training: learned missing sides
    y = np.nan_to_num(X[:, 0]) * 2 + np.nan_to_num(X[:, 3]) ** 2 + rng.normal(size=600)
    model = HistGradientBoostingRegressor(loss=loss[0], quantile=loss[1], max_iter=60,
                                          max_leaf_nodes=15, random_state=0).fit(X, y)
    trees = TreeEnsemble.from_hgb(model)
    fresh = rng.normal(size=(300, 6))
    fresh[rng.random(fresh.shape) < 0.2] = np.nan
    fresh[:5, 2] = np.nan  # a column whose NaNs the model may never have seen split
    np.testing.assert_allclose(trees.predict(fresh), model.predict(fresh), rtol=0, atol=1e-12)
    again = TreeEnsemble.from_record(json.loads(json.dumps(trees.to_record())))
    np.testing.assert_array_equal(again.predict(fresh), trees.predict(fresh))


def test_damaged_records_are_refused() -> None:
    X = np.arange(40, dtype=float)[:, None]
    trees = TreeEnsemble.from_hgb(HistGradientBoostingRegressor(max_iter=3).fit(X, X[:, 0]))
    rec = trees.to_record()
    inner = rec["leaf"].index(False)
    looped = {**rec, "left": [*rec["left"]]}
    looped["left"][inner] = inner  # a node that is its own child would walk forever
    with pytest.raises(ValueError, match="does not follow it"):
        TreeEnsemble.from_record(looped)
    short = {**rec, "value": rec["value"][:-1]}
    with pytest.raises(ValueError, match="different lengths"):
        TreeEnsemble.from_record(short)
