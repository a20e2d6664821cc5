"""Shared helpers of the sweep tests: reading a sweep's runs back from the warehouse."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import warehouse

RUNS_SQL = """
SELECT json_extract_string(config, '$.sweep.problem_id'),
       json_extract_string(config, '$.sweep.candidate'), seed, status, error
FROM runs WHERE origin = 'sweep'
"""

ENDED = ("completed", "early_stopped", "failed", "timeout")


def sweep_runs(root: Path) -> list[tuple[str, str, int, str, str | None]]:
    """(problem_id, candidate key, seed, status, error) of every sweep run, ended or not."""
    if not root.exists():
        return []
    return warehouse.with_retry(root, lambda c: c.execute(RUNS_SQL).fetchall())


def ended_triples(root: Path) -> Counter[tuple[str, str, int]]:
    return Counter((p, c, s) for p, c, s, status, _ in sweep_runs(root) if status in ENDED)
