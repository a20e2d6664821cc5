"""A user's DataFrame as a problem (`problem_from_frame`): the checks and preparation a `file:`
name gets, the same problem as the file's, and errors that say how to go on from Python."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aicf_induct.errors import ConfigError, DataError
from aicf_induct.problems import load_problem, problem_from_frame
from aicf_induct.problems.preprocess import (
    Table,
    TargetError,
    UnknownDropColumn,
    UnusableColumn,
    prepare,
)

Writer = Callable[[pd.DataFrame, str], Path]


def test_a_frame_is_the_problem_its_file_is(write_csv: Writer,
                                            good_frame: pd.DataFrame) -> None:
    by_file = load_problem(f"file:{write_csv(good_frame, 'ok.csv')}?target=label")
    by_frame = problem_from_frame(good_frame, target="label", name="ok")
    assert by_frame.problem_id == by_file.problem_id  # same content, same id
    assert np.array_equal(by_frame.train.X, by_file.train.X)
    assert (by_frame.source, by_frame.name, by_frame.task) == ("frame", "ok", "classification")
    seed3 = problem_from_frame(good_frame, target="label", seed=3, drop="color")
    assert seed3.split_seed == 3 and ("color", "dropped by request") in seed3.dropped


def test_arrays_go_through_a_frame_of_them() -> None:
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(100, 3)), rng.normal(size=100)
    p = problem_from_frame(pd.DataFrame(X).assign(y=y), target="y")  # columns 0, 1, 2
    assert (p.task, p.n_features, p.feature_names) == ("regression", 3, ("0", "1", "2"))


def test_frame_errors_say_how_to_go_on_from_python(good_frame: pd.DataFrame) -> None:
    text = good_frame.assign(comment=[f"note {i}" for i in range(len(good_frame))])
    with pytest.raises(UnusableColumn, match=r"frame 'churn': column 'comment' is free text"
                                             r".*leave it out with drop=\['comment'\]"):
        problem_from_frame(text, target="label", name="churn")
    with pytest.raises(DataError, match=r"no column 'nope' to use as the target"):
        problem_from_frame(good_frame, target="nope")
    with pytest.raises(UnknownDropColumn, match="cannot drop unknown column 'zz'"):
        problem_from_frame(good_frame, target="label", drop=["zz"])
    with pytest.raises(ConfigError, match="task must be classification or regression, not "
                                          "'classify'"):
        problem_from_frame(good_frame, target="label", task="classify")  # type: ignore[arg-type]
    twice = pd.concat([good_frame, good_frame[["a"]]], axis=1)
    with pytest.raises(DataError, match="column 'a' appears twice"):
        problem_from_frame(twice, target="label")
    for bad, words in [(good_frame.to_numpy(), "frame must be a pandas DataFrame"),
                       ("ok.csv", "frame must be a pandas DataFrame")]:
        with pytest.raises(ConfigError, match=words):
            problem_from_frame(bad, target="label")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_rows must be an integer >= 20"):
        problem_from_frame(good_frame, target="label", max_rows=5)


def test_prepare_refuses_a_task_it_does_not_know(good_frame: pd.DataFrame) -> None:
    """'classify' was prepared as a regression: 0/1 labels standardised, n_classes 0."""
    X, y = good_frame.drop(columns="label"), good_frame["label"]
    with pytest.raises(ConfigError, match=r"mydf: task must be classification or regression, "
                                          r"not 'classify'"):
        prepare(Table("mydf", "file", X, y, "classify", "label"))  # type: ignore[arg-type]


@pytest.mark.parametrize("name, words", [
    (42, "a problem name is a string such as 'wine' .*, got int 42$"),
    (None, "got NoneType None$"),
    (pd.DataFrame({"a": [1]}), "got DataFrame: a DataFrame goes through problem_from_frame"),
])
def test_a_name_that_is_no_string_is_a_config_error(name: object, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        load_problem(name)  # type: ignore[arg-type]


def test_reprs_describe_the_problem_without_its_data() -> None:
    """A notebook cell showing a problem printed every array (15 kB for wine)."""
    p = load_problem("wine")
    text = repr(p)
    assert len(text) < 600, text
    assert "Problem(name='wine'" in text and "train=Split(X=float64[" in text
    assert repr(p.train) == f"Split(X=float64[{len(p.train)}, 13], y=int64[{len(p.train)}])"


def test_a_text_column_of_numbers_is_numbers(good_frame: pd.DataFrame) -> None:
    """An object or str column whose every value is a number is read as numbers, as a CSV
    reads it: the same problem as the float column (it was an IndexError in pandas)."""
    want = problem_from_frame(good_frame, target="label")
    a_text = good_frame["a"].map(lambda v: np.nan if np.isnan(v) else str(v))
    for a in (good_frame["a"].astype(object), a_text):
        got = problem_from_frame(good_frame.assign(a=a), target="label")
        assert got.problem_id == want.problem_id and got.feature_names == want.feature_names
    few = good_frame.assign(k=[str(i % 3) for i in range(len(good_frame))])  # not one-hot
    assert "k" in problem_from_frame(few, target="label").feature_names
    flags = good_frame.assign(k=[bool(i % 2) for i in range(len(good_frame))]).astype(
        {"k": object})  # booleans stay two levels
    assert "k_True" in problem_from_frame(flags, target="label").feature_names


def test_a_complex_column_is_refused_naming_it(good_frame: pd.DataFrame) -> None:
    """It lost its imaginary part with only numpy's ComplexWarning."""
    z = good_frame["b"].to_numpy() + 1j
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        for cells in (z, z.astype(object)):
            with pytest.raises(UnusableColumn, match=r"column 'z' is complex-valued.*drop=\['z'\]"):
                problem_from_frame(good_frame.assign(z=cells), target="label")
        with pytest.raises(TargetError, match=r"target 'z' is complex-valued"):
            problem_from_frame(good_frame.assign(z=z), target="z", task="regression")


def test_multiindex_columns_are_a_data_error(good_frame: pd.DataFrame) -> None:
    """They were a TypeError about a tuple (a column name is a string)."""
    wide = good_frame.copy()
    wide.columns = pd.MultiIndex.from_tuples([("x", c) for c in good_frame.columns])
    with pytest.raises(DataError, match=r"frame 'frame': columns must be single-level names, "
                                        r"not a MultiIndex \(2 levels, e.g. \('x', 'a'\)\): "
                                        r"flatten them"):
        problem_from_frame(wide, target="label")
