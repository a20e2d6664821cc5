"""`uvicorn --factory api.app:create_app`, the documented way besides `aicf-induct serve`,
checks the warehouse path (AICF_SERVICE_WAREHOUSE) as serve checks --warehouse: a typo is
one error line at start, not a server of an empty warehouse that makes directories later."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from aicf_induct.cli.background import (
    HOST,
    SOURCE,
    START_S,
    Background,
    free_port,
    running,
)


def _uvicorn(port: int) -> list[str]:
    return [sys.executable, "-m", "uvicorn", "--factory", "api.app:create_app",
            "--host", HOST, "--port", str(port)]


def _env(root: Path) -> dict[str, str]:
    return {"AICF_SERVICE_WAREHOUSE": str(root)}


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@contextlib.contextmanager
def factory_serving(root: Path, cwd: Path) -> Iterator[Background]:
    """uvicorn with the factory on `root`, up and answering /v1/health inside the block."""
    port = free_port()
    with running(_uvicorn(port), f"http://{HOST}:{port}", _env(root), cwd) as served:
        yield served


@pytest.mark.parametrize("case", ["parent missing", "not a warehouse", "a file"])
def test_the_factory_refuses_a_warehouse_path_that_is_not_one(tmp_path: Path,
                                                              case: str) -> None:
    """It served (and logging a run made the typo's directories): now it exits at start with
    the project's error naming the setting and the path, and makes nothing."""
    root = tmp_path / "src"
    if case == "parent missing":
        root = tmp_path / "typo" / "wh"
    elif case == "not a warehouse":
        root.mkdir()
        (root / "notes.txt").write_text("not a warehouse")
    else:
        root.write_text("not a warehouse")
    before = _tree(tmp_path)
    done = subprocess.run(_uvicorn(free_port()), cwd=tmp_path,
                          env={**os.environ, **_env(root), "PYTHONPATH": str(SOURCE)},
                          capture_output=True, text=True, timeout=START_S)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]  # uvicorn prints the exception, then exits
    assert last.startswith("warehouse.errors.WarehouseError: AICF_SERVICE_WAREHOUSE: "), last
    assert str(root) in last
    assert _tree(tmp_path) == before


def test_the_factory_serves_a_warehouse_and_a_new_one(
        tmp_path: Path, warehouse_root: tuple[Path, dict]) -> None:
    """A warehouse is served; a directory not made yet in one that exists is served empty,
    with the note serve gives, and still not made until a run is logged."""
    root, runs = warehouse_root
    with factory_serving(root, tmp_path) as served:
        listed = httpx.get(served.url + "/v1/runs").json()
    assert set(runs) <= {r["run_id"] for r in listed["items"]}
    new = tmp_path / "wh"
    with factory_serving(new, tmp_path) as served:
        assert httpx.get(served.url + "/v1/runs").json()["total"] == 0
    assert f"note: no warehouse at {new} yet" in served.output
    assert not new.exists()
