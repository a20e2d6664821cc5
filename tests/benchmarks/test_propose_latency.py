"""benchmarks/propose_latency.py times `aicf-induct propose` from fresh processes of the
installed script, for a named dataset and a user's CSV, and says where the imports go. No
figure is checked here (timings are the benchmark's, never a test's): what is checked is that
both commands answer and every part of the report is there."""

from __future__ import annotations

import re

from tests.benchmarks.scripts import run_script


def test_the_latency_benchmark_times_both_datasets_and_breaks_the_imports_down() -> None:
    done = run_script("propose_latency.py", "--runs", "1", "--import-runs", "1",
                      timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "- this: Python " in out and "scipy " in out
    for dataset in ("wine", "my.csv"):
        timed = re.search(rf"^\| this \| {re.escape(dataset)} \| ([0-9.]+) s \|.*\| "
                          r"(\d) of 1 \| ([0-9.]+) s \| (-?[0-9.]+) s \|$", out, re.M)
        assert timed, out
        wall, own = float(timed.group(1)), float(timed.group(3))
        assert 0 < own < wall  # propose's own work is part of the process's wall time
        imports = re.search(rf"^\| this \| {re.escape(dataset)} \|( [0-9.]+ \|){{8}}$", out,
                            re.M)
        assert imports, out


def test_a_compared_environment_without_the_script_is_named() -> None:
    done = run_script("propose_latency.py", "--runs", "1", "--import-runs", "1", "--compare",
                      "/nonexistent/bin/python", timeout=300)
    assert done.returncode != 0
    assert "/nonexistent/bin/python" in done.stderr and "Traceback" not in done.stderr
