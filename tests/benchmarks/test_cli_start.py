"""benchmarks/cli_start.py times `aicf-induct --help` and every command's `--help` from fresh
processes, against a second checkout where given. No figure is checked here (timings are the
benchmark's, never a test's): what is checked is that every command line is timed in every
tree, with what it imported, and that a bad tree is one line."""

from __future__ import annotations

import re
from pathlib import Path

from tests.benchmarks.scripts import run_script

REPO = Path(__file__).resolve().parents[2]


def test_every_command_line_is_timed_in_both_trees(tmp_path: Path) -> None:
    # a second tree: this one's package, linked (the benchmark compares whatever it is given)
    other = tmp_path / "other"
    other.mkdir()
    (other / "aicf_induct").symlink_to(REPO / "aicf_induct")
    (other / "warehouse").symlink_to(REPO / "warehouse")
    done = run_script("cli_start.py", "--runs", "1", "--compare", str(other), "--commands",
                      "train,sql", timeout=600)
    assert done.returncode == 0, done.stderr
    for line in ["--help", "train --help", "sql --help"]:
        row = re.search(rf"^\| `aicf-induct {re.escape(line)}` \| ([0-9.]+) s \| ([0-9.]+) s "
                        r"\| ([-+][0-9.]+) s \| ([a-z, ]+) \| ([a-z, ]+) \|$", done.stdout, re.M)
        assert row, (line, done.stdout)
        assert "sklearn" not in row.group(4) and "scipy" not in row.group(4)
    assert done.stdout.count("| `aicf-induct ") == 3  # the commands asked for, no other


def test_a_compared_tree_without_the_package_is_one_line(tmp_path: Path) -> None:
    done = run_script("cli_start.py", "--runs", "1", "--compare", str(tmp_path))
    assert done.returncode == 2
    assert str(tmp_path) in done.stderr and "Traceback" not in done.stderr


def test_runs_below_one_and_an_unknown_command_are_refused() -> None:
    done = run_script("cli_start.py", "--runs", "0")
    assert done.returncode == 2 and "--runs" in done.stderr
    done = run_script("cli_start.py", "--commands", "train,frobnicate")
    assert done.returncode == 2 and "frobnicate: not a command" in done.stderr
    assert "Traceback" not in done.stderr
