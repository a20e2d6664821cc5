"""`with_new_features`: a corpus swept by an older featurizer gains the features it lacks."""

from __future__ import annotations

import pandas as pd
import pytest

from aicf_induct.errors import DataError
from aicf_induct.induction.new_features import problem_features, with_new_features


def _meta() -> pd.DataFrame:
    """Two problems × two candidates, one feature each already has, one pattern."""
    return pd.DataFrame({
        "problem_id": ["a", "a", "b", "b"], "problem": ["pa", "pa", "pb", "pb"],
        "candidate": ["c1", "c2", "c1", "c2"], "f.old": [1.0, 1.0, 2.0, 2.0],
        "p.depth": [1.0, 2.0, 1.0, 2.0], "test_norm_error": [0.1, 0.2, 0.3, 0.4]})


def test_adds_only_the_missing_columns_each_problem_its_own() -> None:
    computed = {"pa": {"f.old": 9.0, "f.new_b": 3.0, "f.new_a": 5.0},
                "pb": {"f.old": 9.0, "f.new_a": 6.0}}  # pb lacks new_b (another task's)
    calls: list[str] = []

    def features_of(name: str) -> dict[str, float]:
        calls.append(name)
        return computed[name]

    out, added = with_new_features(_meta(), features_of=features_of)
    assert added == ["f.new_a", "f.new_b"] and sorted(calls) == ["pa", "pb"]
    assert out["f.old"].tolist() == [1.0, 1.0, 2.0, 2.0]  # kept, not recomputed
    assert out["f.new_a"].tolist() == [5.0, 5.0, 6.0, 6.0]
    assert out["f.new_b"].iloc[:2].tolist() == [3.0, 3.0] and out["f.new_b"].iloc[2:].isna().all()
    # the meta-dataset's column order: ids and scores, features sorted, then patterns
    assert list(out.columns) == ["problem_id", "problem", "candidate", "test_norm_error",
                                 "f.new_a", "f.new_b", "f.old", "p.depth"]
    again, none = with_new_features(out, features_of=features_of)
    assert none == [] and again is out


def test_replace_recomputes_every_feature_it_is_given_and_keeps_the_rest() -> None:
    """`replace=True` (`induce fit --refeaturise`): the stored values of the features
    computed now are replaced, a feature a problem's split leaves undefined becomes NaN
    there, and a column the featurizer does not give is kept as it was."""
    meta = _meta().assign(**{"f.gone": [7.0, 7.0, 8.0, 8.0]})
    computed = {"pa": {"f.old": 10.0, "f.new": 1.0}, "pb": {"f.new": 2.0}}  # pb: no f.old
    out, written = with_new_features(meta, features_of=computed.__getitem__, replace=True)
    assert written == ["f.new", "f.old"]
    assert out["f.old"].iloc[:2].tolist() == [10.0, 10.0] and out["f.old"].iloc[2:].isna().all()
    assert out["f.new"].tolist() == [1.0, 1.0, 2.0, 2.0]
    assert out["f.gone"].tolist() == [7.0, 7.0, 8.0, 8.0]
    assert list(out.columns) == ["problem_id", "problem", "candidate", "test_norm_error",
                                 "f.gone", "f.new", "f.old", "p.depth"]


def test_a_real_problem_gets_what_extraction_gives_on_seed_0() -> None:
    from aicf_induct.problems import extract_features, load_problem

    meta = _meta().assign(problem=["iris", "iris", "wine", "wine"])
    out, added = with_new_features(meta)
    expected = extract_features(load_problem("wine", seed=0))
    assert "f.landmark.nonlinearity" in added and "f.old" not in added
    assert out.loc[2, "f.landmark.nonlinearity"] == expected["landmark.nonlinearity"]
    assert out.loc[2, "f.stat.skewness_mean"] == expected["stat.skewness_mean"]


def test_a_problem_that_cannot_be_loaded_is_named() -> None:
    with pytest.raises(DataError, match="corpus problem 'no_such_problem'"):
        problem_features("no_such_problem")
