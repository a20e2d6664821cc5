"""Preprocessing: imputation, one-hot with a cap, fitted on train only, content ids."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aicf_induct.errors import DataError
from aicf_induct.problems.preprocess import (
    MAX_CATEGORIES,
    Table,
    content_id,
    normalise,
    prepare,
)


def table(frame: pd.DataFrame, target: str, task: str = "classification") -> Table:
    return Table(name="t", source="file", frame=frame.drop(columns=[target]),
                 y=frame[target], task=task, target=target)  # type: ignore[arg-type]


def test_missing_values_imputed_with_indicator(good_frame: pd.DataFrame) -> None:
    p = prepare(table(good_frame, "label"))
    assert "missingindicator_a" in p.feature_names
    X = np.vstack([p.train.X, p.val.X, p.test.X])
    assert np.isfinite(X).all()
    assert p.raw["missing_fraction"] == pytest.approx(12 / (120 * 3))
    assert {"color_blue", "color_green", "color_red"} <= set(p.feature_names)
    assert p.n_classes == 2 and p.task == "classification"


def test_one_hot_is_capped_and_unseen_levels_do_not_fail() -> None:
    rng = np.random.default_rng(1)
    n = 600
    city = np.array([f"c{i}" for i in rng.integers(0, 60, size=n)])
    frame = pd.DataFrame({"city": city, "x": rng.normal(size=n),
                          "y": rng.choice(["a", "b"], size=n)})
    p = prepare(table(frame, "y"))
    city_cols = [f for f in p.feature_names if f.startswith("city_")]
    assert len(city_cols) == MAX_CATEGORIES
    assert "city_infrequent_sklearn" in city_cols
    # val/test rows with a level absent from train still get a (infrequent) column
    assert np.all(p.test.X[:, [p.feature_names.index(c) for c in city_cols]].sum(1) == 1)


def test_rows_with_missing_target_are_dropped_with_a_note(good_frame: pd.DataFrame) -> None:
    frame = good_frame.copy()
    frame.loc[:4, "label"] = np.nan
    p = prepare(table(frame, "label"))
    assert p.n_rows == 115
    assert any("5 rows with a missing target" in n for n in p.notes)


def test_regression_target_standardised_on_train(good_frame: pd.DataFrame) -> None:
    frame = good_frame.drop(columns=["label"]).assign(t=lambda f: 3 * f["b"] + 10)
    p = prepare(table(frame, "t", "regression"))
    assert p.n_classes == 0 and p.train.y.dtype == np.float64
    assert abs(p.train.y.mean()) < 1e-12
    assert p.y_mean == pytest.approx(10, abs=1.0)


def test_content_id_is_stable_and_content_sensitive(good_frame: pd.DataFrame) -> None:
    p1 = prepare(table(good_frame, "label"), seed=0)
    p2 = prepare(table(good_frame.copy(), "label"), seed=5)
    assert p1.problem_id == p2.problem_id and len(p1.problem_id) == 16
    changed = good_frame.copy()
    changed.loc[3, "b"] += 1.0
    assert prepare(table(changed, "label")).problem_id != p1.problem_id
    y = np.zeros(3)
    f = pd.DataFrame({"a": [1.0, 2.0, 3.0]})
    assert content_id(f, y, "regression", "t") != content_id(f, y, "classification", "t")
    assert content_id(f, y, "regression", "t") != content_id(f, y, "regression", "u")
    # a fixed value: the hash must not depend on the process (PYTHONHASHSEED) or machine
    assert content_id(f, y, "regression", "t") == content_id(f.copy(), y.copy(),
                                                             "regression", "t")


def test_policy_raise_names_the_column(good_frame: pd.DataFrame) -> None:
    frame = good_frame.assign(k=7.0)
    with pytest.raises(DataError, match=r"column 'k' is constant \(every value is 7.0\)"):
        prepare(table(frame, "label"), policy="raise")
    p = prepare(table(frame, "label"), policy="drop")
    assert ("k", "constant (every value is 7.0)") in p.dropped


def test_rare_class_falls_back_to_unstratified_split(good_frame: pd.DataFrame) -> None:
    frame = good_frame.copy()
    frame.loc[0, "label"] = "rare"
    p = prepare(table(frame, "label"))
    assert p.n_classes == 3
    assert any("not stratified" in n for n in p.notes)


def test_max_rows_subsamples_deterministically(good_frame: pd.DataFrame) -> None:
    a = prepare(table(good_frame, "label"), max_rows=60)
    b = prepare(table(good_frame, "label"), max_rows=60)
    assert a.n_rows == 60 and a.problem_id == b.problem_id
    assert a.problem_id != prepare(table(good_frame, "label")).problem_id


def test_infinite_values_are_treated_as_missing(good_frame: pd.DataFrame) -> None:
    frame = good_frame.copy()
    frame.loc[1, "b"] = np.inf
    frame.loc[2, "b"] = -np.inf
    p = prepare(table(frame, "label"))
    assert np.isfinite(np.vstack([p.train.X, p.val.X, p.test.X])).all()
    assert "2 infinite values treated as missing" in p.notes
    reg = good_frame.drop(columns=["label"]).assign(t=np.arange(120.0))
    reg.loc[0, "t"] = np.inf
    assert prepare(table(reg, "t", "regression")).n_rows == 119


def test_content_id_is_pinned() -> None:
    """The id is stored in the warehouse: the same content must keep its id across
    processes, machines and releases (a change here orphans every logged problem)."""
    f = normalise(pd.DataFrame({"a": [1.0, 2.0, 3.0], "c": ["x", "y", np.nan]}))
    assert content_id(f, np.array([0.0, 1.0, 0.0]), "classification", "t") == \
        "10f571ab1d77b532"
