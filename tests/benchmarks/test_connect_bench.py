"""benchmarks/connect_bench.py: the catalog's scan and the baseline read the same rows of a
many-part warehouse, and the report times both."""

from __future__ import annotations

from tests.benchmarks.scripts import run_script


def test_the_connect_benchmark_times_both_scans() -> None:
    out = run_script("connect_bench.py", "--sessions", "12", "--reps", "1")
    assert out.returncode == 0, out.stderr
    assert "12 writer sessions, 60 parts; each scan measured 1 time" in out.stdout
    rows = [line.split(" | ")[0] for line in out.stdout.splitlines() if line.startswith("| ")]
    assert rows[1:] == ["| signature", "| union_by_name"]


def test_bad_options_are_one_line() -> None:
    out = run_script("connect_bench.py", "--sessions", "0")
    assert out.returncode == 2 and "--sessions and --reps: 1 or more" in out.stderr
    assert "Traceback" not in out.stderr
