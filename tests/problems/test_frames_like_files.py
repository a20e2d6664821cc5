"""A DataFrame and the same table as a CSV give the same problem, or the same refusal, whatever
the frame's index (`problem_from_frame` against `load_problem("file:...")`); synthetic options
that make no table are refused naming them; the inferred task is said where a user looks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aicf_induct.cli.main import main
from aicf_induct.errors import ConfigError
from aicf_induct.problems import load_problem, problem_from_frame
from aicf_induct.problems.preprocess import UnusableColumn

Writer = Callable[[pd.DataFrame, str], Path]


def _numbers_as_text_with_a_gap(n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    b = pd.Series([str(v) for v in rng.integers(0, 50, n)], dtype=object)
    b[5] = None  # a missing cell: the column's present values are fewer than its rows
    return pd.DataFrame({"a": rng.normal(size=n), "b": b, "y": rng.integers(0, 2, n)})


@pytest.mark.parametrize("column", ["b", "y"])  # a feature of text numbers, and the target
def test_repeated_index_labels_load_as_the_file_does(write_csv: Writer, column: str) -> None:
    frame = _numbers_as_text_with_a_gap()
    if column == "y":  # the target as text numbers with a missing cell
        frame = frame.assign(y=frame["y"].astype(str).astype(object))
        frame.loc[7, "y"] = None
    twice = pd.concat([frame, frame])  # index 0..39, 0..39
    assert twice.index.has_duplicates
    by_frame = problem_from_frame(twice, "y")  # was: ValueError, cannot reindex
    by_file = load_problem(f"file:{write_csv(twice, 'twice.csv')}?target=y")
    assert by_frame.problem_id == by_file.problem_id
    assert by_frame.feature_names == by_file.feature_names
    # the index is no data: any labels give the problem a fresh one gives
    shuffled = twice.set_axis(np.random.default_rng(1).permutation(len(twice)) * 7 + 3)
    assert problem_from_frame(shuffled, "y").problem_id == by_frame.problem_id


def test_a_data_row_is_the_rows_position_not_its_index_label(write_csv: Writer) -> None:
    rng = np.random.default_rng(0)
    n = 60
    b = pd.Series([str(v) for v in rng.integers(0, 50, n)], dtype=object)
    b[7] = "?"  # the 8th data row
    frame = pd.DataFrame({"a": rng.normal(size=n), "b": b, "y": rng.integers(0, 2, n)})
    with pytest.raises(UnusableColumn, match=r"'\?' in data row 8\b") as from_file:
        load_problem(f"file:{write_csv(frame, 'q.csv')}?target=y")
    shifted = frame.set_axis(frame.index + 1000)  # was reported as "data row 1008"
    with pytest.raises(UnusableColumn, match=r"'\?' in data row 8\b") as from_frame:
        problem_from_frame(shifted, "y")
    assert from_file.value.reason == from_frame.value.reason
    labelled = frame.set_axis([f"r{i}" for i in range(n)])  # labels that are no numbers
    with pytest.raises(UnusableColumn, match=r"'\?' in data row 8\b"):
        problem_from_frame(labelled, "y")


def _dated(n: int, days: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    dates = np.resize(pd.date_range("2020-01-01", periods=days).astype(str), n)
    return pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                         "d": pd.Series(dates, dtype=object), "y": rng.integers(0, 3, n)})


@pytest.mark.parametrize("days", [4, 100])  # few levels (was one-hot), many (was free text)
def test_iso_date_text_is_a_date_column_in_a_frame_as_in_a_csv(write_csv: Writer,
                                                                days: int) -> None:
    frame = _dated(100, days)
    with pytest.raises(UnusableColumn) as from_file:
        load_problem(f"file:{write_csv(frame, 'dates.csv')}?target=y")
    with pytest.raises(UnusableColumn) as from_frame:
        problem_from_frame(frame, "y")
    assert from_frame.value.column == from_file.value.column == "d"
    assert from_frame.value.reason == from_file.value.reason
    assert "date/time column" in str(from_frame.value)
    assert "drop=['d']" in str(from_frame.value)  # said as Python leaves it out
    # a Parquet file's text column of ISO dates too (its timestamps always were)
    parquet = Path(write_csv(frame, "dates.csv")).with_suffix(".parquet")
    frame.to_parquet(parquet)
    with pytest.raises(UnusableColumn) as from_parquet:
        load_problem(f"file:{parquet}?target=y")
    assert from_parquet.value.reason == from_file.value.reason
    with_gap = frame.assign(d=frame["d"].where(frame.index != 3, None))  # a missing date
    with pytest.raises(UnusableColumn, match="date/time column"):
        problem_from_frame(with_gap, "y")
    # left out, the frame is its file's problem
    kept = problem_from_frame(frame, "y", drop=["d"])
    path = write_csv(frame, "dates2.csv")
    assert kept.problem_id == load_problem(f"file:{path}?target=y&drop=d").problem_id


def test_a_categorical_of_dates_stays_the_levels_the_user_chose() -> None:
    frame = _dated(100, 4)
    problem = problem_from_frame(frame.assign(d=frame["d"].astype("category")), "y")
    assert [f for f in problem.feature_names if f.startswith("d_")] == [
        f"d_2020-01-0{i}" for i in range(1, 5)]


@pytest.mark.parametrize("name, words", [
    ("synthetic:regression?noise=inf", r"noise=inf must be a finite number >= 0"),
    ("synthetic:friedman1?noise=nan", r"noise=nan must be a finite number >= 0"),
    ("synthetic:moons?noise=-1", r"noise=-1.0 must be a finite number >= 0"),
    ("synthetic:classification?noise=2", r"noise=2.0 must be within 0..1"),
    ("synthetic:classification?sep=inf", r"sep=inf must be a finite number > 0"),
    ("synthetic:classification?n=100&weights=-0.5,0.5",
     r"weights=-0.5,0.5: each weight must be within \(0, 1\), not -0.5"),
    ("synthetic:classification?weights=1", r"weights=1: each weight must be within \(0, 1\)"),
    ("synthetic:classification?weights=0,1", r"each weight must be within \(0, 1\), not 0"),
    ("synthetic:classification?weights=0.7,0.6", r"weights=0.7,0.6 sum to 1.3: they must "
                                                 r"sum to at most 1"),
    ("synthetic:classification?classes=3&weights=0.5,0.5",
     r"weights=0.5,0.5 sum to 1: with 2 for classes=3 they must sum to less than 1"),
    ("synthetic:classification?weights=0.2,0.2,0.2", r"weights=0.2,0.2,0.2 gives 3 values: "
                                                     r"classes=2 takes 2 \(or 1"),
])
def test_synthetic_options_that_make_no_table_are_refused_naming_them(name: str,
                                                                      words: str) -> None:
    with pytest.raises(ConfigError, match=words) as err:
        load_problem(name)
    assert "\n" not in str(err.value)
    assert str(err.value).startswith(f"synthetic:{name.split(':')[1].split('?')[0]}: ")


@pytest.mark.parametrize("name", [
    "synthetic:classification?n=200&weights=0.9,0.1",
    "synthetic:classification?n=200&weights=0.9",
    "synthetic:classification?n=300&classes=3&weights=0.7,0.2,0.1",  # sums to 1 + an ulp
    "synthetic:classification?n=200&noise=1",
    "synthetic:regression?n=200&noise=0",
])
def test_synthetic_options_within_the_rules_still_load(name: str) -> None:
    assert load_problem(name).n_rows >= 200


def test_the_inferred_task_is_said_in_help_and_show(write_csv: Writer,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["problems", "show", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "integers with at most 20 distinct values are classification" in help_text
    assert "task=regression or task=classification overrides it" in help_text
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=60), "y": rng.integers(0, 5, 60)})
    path = write_csv(frame, "t.csv")
    assert main(["problems", "show", f"file:{path}?target=y"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "task classification, 5 classes (inferred: text, booleans and integers" in shown
    assert "&task=TASK in the name overrides it" in shown
    assert main(["problems", "show", f"file:{path}?target=y&task=regression"]) == 0
    shown = capsys.readouterr().out
    assert "task        regression" in shown and "(inferred:" not in shown
