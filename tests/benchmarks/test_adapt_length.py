"""benchmarks/adapt_length.py times adaptive runs of several lengths from fresh processes,
against a second checkout where given. No figure is checked here (timings are the
benchmark's): what is checked is that every step count is timed in every tree, and that a bad
tree is one line."""

from __future__ import annotations

import re
from pathlib import Path

from tests.benchmarks.scripts import run_script

REPO = Path(__file__).resolve().parents[2]


def test_every_step_count_is_timed_in_both_trees(tmp_path: Path) -> None:
    other = tmp_path / "other"  # this tree's package, linked: the script compares any two
    other.mkdir()
    (other / "aicf_induct").symlink_to(REPO / "aicf_induct")
    done = run_script("adapt_length.py", "--steps", "20,40", "--runs", "1", "--compare",
                      str(other), timeout=600)
    assert done.returncode == 0, done.stderr
    rows = re.findall(r"^\| (this|compared) \| (\d+) \| [0-9.]+ s \| [0-9.]+ \|$",
                      done.stdout, re.M)
    assert sorted(rows) == [("compared", "20"), ("compared", "40"), ("this", "20"),
                            ("this", "40")], done.stdout


def test_a_compared_tree_without_the_package_and_no_runs_are_one_line(tmp_path: Path) -> None:
    for args in (["--compare", str(tmp_path)], ["--runs", "0"], ["--steps", "0"]):
        done = run_script("adapt_length.py", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr and "error:" in done.stderr
