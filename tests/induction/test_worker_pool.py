"""The sweep's worker pool: workers forked from a server process that outlives each pool
still run in the environment of the process that opened their pool, as spawned ones did."""

from __future__ import annotations

import os

import pytest

from aicf_induct.induction.sweep_worker import worker_pool


def test_a_worker_takes_the_environment_its_pool_was_opened_in(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AICF_POOL_PROBE_GONE", "set when the server may have started")
    with worker_pool(1) as pool:  # starts this process's fork server, if none runs yet
        parent = pool.submit(os.getppid).result(timeout=120)
    monkeypatch.delenv("AICF_POOL_PROBE_GONE")
    monkeypatch.setenv("AICF_POOL_PROBE", "set after the server started")
    with worker_pool(1) as pool:
        assert pool.submit(os.getenv, "AICF_POOL_PROBE").result(timeout=120) == \
            "set after the server started"
        assert pool.submit(os.getenv, "AICF_POOL_PROBE_GONE").result(timeout=120) is None
        # forked by the same server, not by this process (nothing here is forked)
        assert pool.submit(os.getppid).result(timeout=120) == parent != os.getpid()


def _imported(names: tuple[str, ...]) -> list[str]:
    import sys

    return [n for n in names if n in sys.modules]


def test_a_worker_starts_with_what_a_run_imports_already_imported() -> None:
    """The layers import scikit-learn only when a problem is prepared or featurised (so that
    a command's `--help` does not): the fork server preloads those modules by name, and a
    worker pays for none of them before its first run."""
    wanted = ("sklearn.compose", "sklearn.tree", "sklearn.neighbors", "pandas", "duckdb",
              "aicf_induct.runtime.trainer")
    with worker_pool(1) as pool:
        assert pool.submit(_imported, wanted).result(timeout=120) == list(wanted)
