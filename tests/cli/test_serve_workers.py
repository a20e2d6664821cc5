"""`aicf-induct serve --workers N` (uvicorn's worker processes, each building the app): what
the server says at start is said once, by `serve`, not once per worker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aicf_induct.cli.background import SOURCE, START_S, free_port, serve_args, stop

STARTED = "Application startup complete."  # uvicorn's line, once per worker


@pytest.mark.parametrize("workers", [1, 2])
def test_a_warehouse_not_made_yet_is_noted_once(tmp_path: Path, workers: int) -> None:
    """Each worker built the app and noted the warehouse not made yet: twice with two
    workers. `serve` notes it once, before the workers start (which note it no more)."""
    root, out = tmp_path / "wh", tmp_path / "serve.log"
    argv = serve_args(root, free_port(), "--workers", str(workers))
    with out.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "aicf_induct", *argv], cwd=tmp_path,
                                stdout=log, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONPATH": str(SOURCE)})
        try:  # every worker has built its app once its startup is complete
            deadline = time.monotonic() + START_S
            while out.read_text().count(STARTED) < workers:
                assert proc.poll() is None, out.read_text()
                assert time.monotonic() < deadline, out.read_text()
                time.sleep(0.1)
        finally:
            stop(proc)
    text = out.read_text()
    assert text.count(STARTED) == workers, text
    assert text.count(f"note: no warehouse at {root} yet") == 1, text
    assert text.index("note: no warehouse") < text.index("Started server process"), text
    assert not root.exists()
