"""benchmarks/induction_calibration.py: a sample of the leave-one-out's folds, the same
intervals as the full run's on those problems."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.induction.lopo import LopoConfig, run_lopo, split_seeds
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.mining import Miner
from aicf_induct.induction.pack import build_pack, write_pack
from tests.benchmarks.scripts import run_script
from tests.induction.synthetic_meta import planted

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import induction_calibration

SMALL = MetaModel(max_iter=40, min_samples_leaf=10, conformal_folds=3, conformal_repeats=2)


def test_a_sample_of_the_folds_is_those_folds_of_the_full_run() -> None:
    meta = planted(P=16, seeds=4)
    config = LopoConfig(str(meta["candidate"].iloc[0]), *split_seeds(meta), (1, 3), 1, SMALL)
    held = induction_calibration.sample_groups(meta, 3)
    assert len(held) == 3 and held == induction_calibration.sample_groups(meta, 3)
    part = run_lopo(meta, config, held_groups=held).calibration
    full = run_lopo(meta, config).calibration
    assert set(part["problem_id"]) == set(meta.loc[meta["group"].isin(held), "problem_id"])
    pd.testing.assert_frame_equal(
        part.reset_index(drop=True),
        full[full["problem_id"].isin(set(part["problem_id"]))].reset_index(drop=True))
    with pytest.raises(ConfigError, match="no group nope"):
        run_lopo(meta, config, held_groups=["nope"])


def test_the_script_prints_coverage_and_the_compared_run(tmp_path: Path) -> None:
    meta = planted(P=16, seeds=4)
    pack = write_pack(build_pack(meta, Miner(n_bootstrap=100).fit(meta), conformal_folds=0),
                      tmp_path / "p.parquet", ["test"])
    args = ["--pack", str(pack), "--default", str(meta["candidate"].iloc[0]), "--sample", "4",
            "--conformal-folds", "3", "--conformal-repeats", "2"]
    done = run_script("induction_calibration.py", *args, "--save", str(tmp_path / "a.csv"))
    assert done.returncode == 0, done.stderr
    assert "4 of 16 groups held out in turn (4 problems)" in done.stdout
    assert "| 0.8 | top-1 | 4 |" in done.stdout
    again = run_script("induction_calibration.py", *args, "--compare", str(tmp_path / "a.csv"))
    assert again.returncode == 0, again.stderr
    assert "the same 4 problems:" in again.stdout
    rows = [line for line in again.stdout.splitlines() if line.startswith("| 0.8 |")]
    assert len(rows) == 8 and rows[:4] == rows[4:]  # this run's, and the saved one's


def test_an_unknown_default_is_a_one_line_error(tmp_path: Path) -> None:
    meta = planted(P=8, seeds=2)
    pack = write_pack(build_pack(meta, Miner(n_bootstrap=50).fit(meta), conformal_folds=0),
                      tmp_path / "p.parquet", ["test"])
    done = run_script("induction_calibration.py", "--pack", str(pack))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: the corpus has no default MLP")


def test_shards_split_the_groups_and_merge_to_the_whole(tmp_path: Path) -> None:
    groups = [f"g{i:02d}" for i in range(7)]
    parts = [induction_calibration.shard(groups, f"{i}/3") for i in (1, 2, 3)]
    assert parts[0] == ["g00", "g03", "g06"] and parts[2] == ["g02", "g05"]
    assert sorted(g for part in parts for g in part) == groups
    assert induction_calibration.shard(groups, None) == groups
    for bad, says in (("0/3", "between 1 and N"), ("4/3", "between 1 and N"),
                      ("two", "as I/N")):
        with pytest.raises(ConfigError, match=says):
            induction_calibration.shard(groups, bad)

    meta = planted(P=8, seeds=4)
    pack = write_pack(build_pack(meta, Miner(n_bootstrap=50).fit(meta), conformal_folds=0),
                      tmp_path / "p.parquet", ["test"])
    args = ["--pack", str(pack), "--default", str(meta["candidate"].iloc[0]),
            "--conformal-folds", "3", "--conformal-repeats", "1"]
    saved = []
    for spec in ("1/2", "2/2", "all"):
        out = tmp_path / f"{spec.replace('/', 'of')}.csv"
        done = run_script("induction_calibration.py", *args, "--save", str(out),
                          *(["--shard", spec] if spec != "all" else []))
        assert done.returncode == 0, done.stderr
        saved.append(out)
    merged = run_script("induction_calibration.py", "--merge", str(saved[0]), str(saved[1]))
    whole = run_script("induction_calibration.py", "--merge", str(saved[2]))
    assert merged.returncode == whole.returncode == 0, merged.stderr
    assert merged.stdout.startswith("2 files, 8 problems.")
    table = [line for line in merged.stdout.splitlines() if line.startswith("| 0.8 |")]
    assert len(table) == 4
    assert table == [line for line in whole.stdout.splitlines() if line.startswith("| 0.8 |")]
    twice = run_script("induction_calibration.py", "--merge", str(saved[0]), str(saved[0]))
    assert twice.returncode == 2 and "share a problem" in twice.stderr
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    other = run_script("induction_calibration.py", "--merge", str(tmp_path / "other.csv"))
    assert other.returncode == 2 and "not calibration rows" in other.stderr
    assert other.stderr.count("\n") == 1 and "Traceback" not in other.stderr
