"""benchmarks/sweep_rate.py counts the runs a build finished in a window of its time line,
read from a real warehouse by DuckDB."""

from __future__ import annotations

from pathlib import Path

import warehouse
from tests.benchmarks.scripts import run_script


def _rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines()
            if line.startswith("| ") and not line.startswith("| warehouse")]


def test_counts_the_runs_that_end_in_the_window(dashboard_warehouse, tmp_path: Path) -> None:
    root = dashboard_warehouse.root
    with warehouse.connect(root) as conn:
        runs = conn.sql("SELECT started_at, wall_time_s FROM runs "
                        "WHERE wall_time_s IS NOT NULL").df()
    start = (runs["started_at"] - runs["started_at"].min()).dt.total_seconds()
    end = start + runs["wall_time_s"]
    cut = float(end.median())  # a window that holds the earlier half of the ends
    out = run_script("sweep_rate.py", str(root), str(root), "--window", f"0,{cut}")
    assert out.returncode == 0, out.stderr
    first, second = _rows(out.stdout)
    assert first == second and first[0] == str(root) and first[1] == str(len(runs))
    finished = int((end < cut).sum())
    assert 0 < finished < len(runs) and first[2] == str(finished)
    assert first[3] == f"{3600 * finished / cut:,.0f}"
    assert first[4] == f"{runs['wall_time_s'].mean():.1f} s"
    # a window past the last run's end: a rate over time the build did not run (it said 0
    # runs an hour; one reaching past the end, a rate too low)
    for window in (f"{end.max() + 1},{end.max() + 9}", f"0,{end.max() + 9}"):
        out = run_script("sweep_rate.py", str(root), "--window", window)
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr.startswith(f"error: {root}: its last run ended ") and \
            out.stderr.strip().endswith(f"pick TO <= {end.max():.0f}"), out.stderr


def test_bad_window_and_no_warehouse_are_one_line_each(tmp_path: Path) -> None:
    for window, said in (("80", "--window must be FROM,TO in seconds, got '80'"),
                         ("200,80", "--window needs 0 <= FROM < TO, got '200,80'")):
        out = run_script("sweep_rate.py", str(tmp_path), "--window", window)
        assert out.returncode == 2 and out.stderr.strip() == f"error: {said}"
    out = run_script("sweep_rate.py", str(tmp_path / "none"))
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: {tmp_path / 'none'}: no warehouse with runs here"
