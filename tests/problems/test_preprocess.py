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


@pytest.mark.parametrize("gap", ["target", "cell"])
def test_a_row_counter_is_an_identifier_with_rows_or_cells_missing(
        good_frame: pd.DataFrame, gap: str) -> None:
    """A 1..n counter with rows without a target dropped (or a missing cell) had gaps, and
    was kept as a feature: in a table sorted by its target it gave the target away."""
    frame = good_frame.sort_values("label", kind="stable").reset_index(drop=True)
    counter = pd.array(np.arange(1, len(frame) + 1), dtype="Int64")
    if gap == "target":
        frame.loc[[10, 50], "label"] = np.nan
    else:
        counter[7] = pd.NA
    p = prepare(table(frame.assign(n=counter), "label"))
    assert "n" not in p.feature_names
    assert ("n", "row identifier (counts 1 per row)") in p.dropped
    # a column that only climbs is no counter when it skips
    skips = frame.assign(n=np.arange(len(frame)) * 2)
    assert "n" in prepare(table(skips, "label")).feature_names


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
    assert f["c"].isna().tolist() == [False, False, True]
    # Re-pinned in issue 12: the old value hashed the gap as the string "nan" (pandas 2.2
    # and 3.x alike); this is the id of the table with its gap, the same under both.
    assert content_id(f, np.array([0.0, 1.0, 0.0]), "classification", "t") == \
        "9de7f78cc48883a6"


def test_content_id_folds_the_sign_of_zero() -> None:
    """-0.0 is 0.0: the id must not hang on how a pandas release hashes it (3.0 told the two
    apart, 3.1 does not, and quantreg/uis got another id on each) nor on the target's bytes."""
    f = pd.DataFrame({"a": [0.0, 1.0], "c": ["x", "y"]})
    signed = pd.DataFrame({"a": [-0.0, 1.0], "c": ["x", "y"]})
    y = np.array([0.0, 1.0])
    one = content_id(f, y, "regression", "t")
    assert content_id(signed, y, "regression", "t") == one
    assert content_id(f, np.array([-0.0, 1.0]), "regression", "t") == one
    assert np.signbit(signed["a"].iloc[0])  # the caller's frame is left as it was
    assert content_id(f.assign(a=[0.5, 1.0]), y, "regression", "t") != one


def _missing_text_frames(good_frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The same table, its text column's gaps spelled every way pandas 2.x and 3.x give
    them: object cells None / NaN / pd.NA, the nullable "string" dtype, the `str` dtype
    (pandas 3's default for text, NaN-backed; plain object under pandas 2), categoricals."""
    gaps = good_frame.index % 8 == 0  # 15 of 120 rows
    text = good_frame["color"].astype(object)
    kinds: dict[str, pd.Series] = {
        "object-None": text.where(~gaps, None),
        "object-nan": text.where(~gaps, np.nan),
        "object-NA": text.where(~gaps, pd.NA),
        "object-mixed": pd.Series([[None, np.nan, pd.NA][i % 3] if gap else v for i, (v, gap)
                                   in enumerate(zip(text, gaps, strict=True))], dtype=object),
        "string": text.where(~gaps, None).astype("string"),
        "str": pd.Series(text.where(~gaps, None).tolist(), dtype="str"),
        "category": text.where(~gaps, None).astype("category"),
    }
    if hasattr(pd, "StringDtype") and "na_value" in pd.StringDtype.__init__.__code__.co_varnames:
        kinds["string-nan"] = text.where(~gaps, None).astype(pd.StringDtype(na_value=np.nan))
    return {k: good_frame.assign(color=v.to_numpy() if k.startswith("object") else v)
            for k, v in kinds.items()}


def test_missing_text_cells_are_missing_under_every_dtype(good_frame: pd.DataFrame) -> None:
    """A gap in a text column is the "(missing)" level and counts in missing_fraction,
    never a level "nan" / "None" / "<NA>" (pandas 3 made empty CSV cells such a level)."""
    ids = set()
    for kind, frame in _missing_text_frames(good_frame).items():
        p = prepare(table(frame, "label"))
        colors = sorted(f for f in p.feature_names if f.startswith("color_"))
        assert colors == ["color_(missing)", "color_blue", "color_green", "color_red"], kind
        assert p.raw["missing_fraction"] == pytest.approx((12 + 15) / (120 * 3)), kind
        ids.add(p.problem_id)
    assert len(ids) == 1  # one content, one id, whichever way the gaps were spelled


def test_empty_csv_cells_in_a_text_column_are_missing(write_csv, good_frame: pd.DataFrame
                                                      ) -> None:
    from aicf_induct.problems import load_problem
    from aicf_induct.problems.features import extract_features

    frame = good_frame.copy()
    frame.loc[::8, "color"] = None  # written as empty cells
    path = write_csv(frame)
    assert ",," in path.read_text()
    p = load_problem(f"file:{path}?target=label")
    assert "color_nan" not in p.feature_names and "color_(missing)" in p.feature_names
    expected = (12 + 15) / (120 * 3)
    assert p.raw["missing_fraction"] == pytest.approx(expected)
    assert extract_features(p)["simple.missing_fraction"] == pytest.approx(expected)
    assert p.problem_id == prepare(table(_missing_text_frames(good_frame)["str"],
                                         "label")).problem_id


def test_too_few_rows_is_said_before_any_column_check(good_frame: pd.DataFrame) -> None:
    # one row makes every column constant: the row count is the error to give
    with pytest.raises(DataError, match=r"t: too few rows: 1 with a target; need at least 20"):
        prepare(table(good_frame.iloc[:1], "label"))


def test_a_target_with_a_class_per_row_is_refused(good_frame: pd.DataFrame) -> None:
    frame = good_frame.assign(label=[f"c{i}" for i in range(120)])
    with pytest.raises(DataError, match=r"target 'label' has 120 classes in 120 rows"):
        prepare(table(frame, "label"))
    halves = good_frame.assign(label=[f"c{i // 2}" for i in range(120)])  # 2 rows a class
    assert prepare(table(halves, "label")).n_classes == 60


@pytest.mark.parametrize("seed", [-1, 2**32, 5_000_000_000])
def test_a_seed_outside_what_numpy_and_sklearn_take_is_a_config_error(
        good_frame: pd.DataFrame, seed: int) -> None:
    from aicf_induct.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"seed must be an integer in 0..4294967295, "
                                          rf"got {seed}"):
        prepare(table(good_frame, "label"), seed=seed)
    assert prepare(table(good_frame, "label"), seed=2**32 - 1).n_rows == 120
