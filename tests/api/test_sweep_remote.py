"""`aicf-induct sweep --log-to URL`: a small real sweep whose parent and worker processes log
through a real server lands in the served warehouse; run again it skips what finished, and
with one more seed it runs only the new triples (the resume semantics of a local sweep)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import warehouse
from aicf_induct.cli.main import main
from tests.api.conftest import REPO, cli, serve

SWEEP = ["sweep", "--problems", "iris", "--space", "depth=1;act=relu,tanh;width=8",
         "--epochs", "2", "--workers", "1", "--json", "--quiet"]


def sweep(url: str, key: str, *extra: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "aicf_induct", *SWEEP, *extra, "--log-to", url],
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO),
                                        "AICF_API_KEY": key},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "remote log" not in out.stderr, out.stderr  # nothing dropped, nothing retried
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def test_a_sweep_logs_through_the_service_and_resumes(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    key = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
    with serve(root) as url:
        first = sweep(url, key)
        assert (first["planned"], first["skipped"], first["ran"]) == (2, 0, 2)
        assert first["statuses"] == {"completed": 2} and first["warehouse"] == url
        again = sweep(url, key)
        assert (again["planned"], again["skipped"], again["ran"]) == (2, 2, 0)
        more = sweep(url, key, "--seeds", "2")
        assert (more["planned"], more["skipped"], more["ran"]) == (4, 2, 2)
    conn = warehouse.connect(root)
    runs = conn.execute(
        "SELECT json_extract_string(config, '$.sweep.candidate'), seed, status, steps_taken, "
        "(SELECT count(*) FROM steps s WHERE s.run_id = r.run_id) FROM runs r "
        "WHERE origin = 'sweep'").fetchall()
    assert len(runs) == 4 and len({(c, s) for c, s, *_ in runs}) == 4  # each triple once
    assert all(status == "completed" and taken == logged > 0
               for _, _, status, taken, logged in runs)
    problems = conn.execute("SELECT name FROM problems").fetchall()
    assert ("iris",) in problems  # the parent's problem row came through the service too


@pytest.mark.parametrize("argv, words", [
    (["--log-to", "http://127.0.0.1:9", "--warehouse", "wh"], "drop --warehouse"),
    (["--log-to", "http://127.0.0.1:9"], "needs a write key"),
])
def test_log_to_errors_are_one_line(argv: list[str], words: str,
                                    monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("AICF_API_KEY", raising=False)
    assert main(["sweep", "--problems", "iris", "--space", "tiny3", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
