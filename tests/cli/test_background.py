"""`serving` (aicf_induct.cli.background), the one way the demo and the service tests start the
real server: up and answering inside the block, stopped after it with its output kept; a server
that cannot start is an error carrying what it printed. The demo's `service` prints its lines
around it."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from aicf_induct import demo
from aicf_induct.cli.background import SOURCE, ServiceDidNotStart, free_port, serving


def test_the_server_answers_inside_the_block_and_is_stopped_after(tmp_path: Path) -> None:
    with serving(tmp_path / "wh") as served:
        with urllib.request.urlopen(served.url + "/v1/health", timeout=5) as r:
            assert r.status == 200
        assert served.proc.poll() is None
    assert served.proc.returncode is not None
    assert "Uvicorn running on" in served.output  # uvicorn's log, read back after the stop
    # a warehouse not there yet (a typo?) is served empty, and said so
    assert f"note: no warehouse at {tmp_path / 'wh'} yet" in served.output


@pytest.mark.parametrize("case", ["parent missing", "not a warehouse"])
def test_serve_refuses_a_warehouse_path_that_is_not_one(tmp_path: Path, case: str) -> None:
    """A typo'd --warehouse was served empty (and the first run logged made a warehouse
    there): a path whose parent directory is missing, or a directory holding other things,
    is now one `error:` line naming it, exit status 2, and nothing made or changed."""
    if case == "parent missing":
        root = tmp_path / "typo" / "wh"
        why = (f"error: --warehouse: no warehouse at {root}, nor a directory {root.parent} "
               "to make it in: is the path right? (the service makes only the warehouse's "
               "own directory, at the first run logged)\n")
    else:
        root = tmp_path / "src"
        root.mkdir()
        (root / "notes.txt").write_text("not a warehouse")
        why = (f"error: --warehouse: {root} is not a warehouse (no table directory such as "
               "runs/ or steps/ in it)\n")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    port = str(free_port())
    done = subprocess.run([sys.executable, "-m", "aicf_induct", "serve", "--warehouse",
                           str(root), "--port", port], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60,  # (it served, before: killed at the timeout)
                          env={**os.environ, "PYTHONPATH": str(SOURCE)})
    assert (done.returncode, done.stderr) == (2, why)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a warehouse")
    with pytest.raises(ServiceDidNotStart, match="exited at start") as err, \
            serving(tmp_path / "file"):
        pass
    assert "--warehouse: " in str(err.value) and "is not a directory" in str(err.value)


def test_the_demo_service_prints_its_start_and_stop(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "wh"
    with demo.service(root, None) as url, \
            urllib.request.urlopen(url + "/v1/health", timeout=5) as r:
        assert r.status == 200
    lines = capsys.readouterr().out.splitlines()
    port = url.rsplit(":", 1)[1]
    assert lines[0] == f"$ aicf-induct serve --warehouse {root} --port {port}  (in the background)"
    assert lines[1].startswith(f"service up at {url} (pid ")
    assert lines[-1] == f"service at {url} stopped"
    (tmp_path / "file").write_text("not a warehouse")
    with pytest.raises(demo.DemoError, match="exited at start"), \
            demo.service(tmp_path / "file", None):
        pass
