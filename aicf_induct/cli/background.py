"""`aicf-induct serve` in a subprocess on a free loopback port for as long as a block runs:
the one way `make demo` and the service tests start the real server (uvicorn), wait until it
answers, and stop it.

The server's output goes to a temporary file, not a pipe: a pipe nobody reads fills up and
blocks the server. It is kept in `Background.output` once the server has stopped.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

HOST = "127.0.0.1"
HEALTH = "/v1/health"
START_S = 60.0  # a cold start imports torch, DuckDB and FastAPI: seconds on a busy machine
STOP_S = 10.0  # then SIGKILL
SOURCE = Path(__file__).resolve().parents[2]  # the folder holding this aicf_induct


class ServiceDidNotStart(RuntimeError):
    """The server exited at start, or did not answer within START_S; says which."""


@dataclass
class Background:
    url: str
    proc: subprocess.Popen[str]
    output: str = ""  # what the server printed, once it has stopped


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def serve_args(root: Path, port: int, *extra: str) -> list[str]:
    """The `aicf-induct` arguments that serve `root` on `port` (and `extra` options)."""
    return ["serve", "--warehouse", str(root), "--port", str(port), *extra]


@contextlib.contextmanager
def serving(root: Path, *extra: str, port: int | None = None,
            env: Mapping[str, str] | None = None) -> Iterator[Background]:
    """`aicf-induct serve` of `root` (with `extra` options and `env` over this process's
    environment) on `port` or a free one, up and answering until the block ends; then
    terminated (killed after STOP_S). ServiceDidNotStart, with its output, if it does not
    come up."""
    port = free_port() if port is None else port
    with running([sys.executable, "-m", "aicf_induct", *serve_args(root, port, *extra)],
                 f"http://{HOST}:{port}", env) as served:
        yield served


@contextlib.contextmanager
def running(argv: list[str], url: str, env: Mapping[str, str] | None = None,
            cwd: Path | None = None) -> Iterator[Background]:
    """Any command that serves the app at `url` (`serving`'s, or uvicorn's own with the
    factory), started with `env` over this process's environment and this aicf_induct on
    the path, up and answering until the block ends; then stopped as `serving` stops it."""
    # this aicf_induct, whatever the working directory
    path = os.pathsep.join(p for p in (str(SOURCE), os.environ.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(argv, cwd=cwd, env={**os.environ, "PYTHONPATH": path,
                                                    **(env or {})},
                                stdout=log, stderr=subprocess.STDOUT, text=True)
        served = Background(url, proc)
        try:
            _wait_up(served, log)
            yield served
        finally:
            stop(proc)
            served.output = _read(log)


def stop(proc: subprocess.Popen[str]) -> None:
    """End a server process: SIGTERM (uvicorn's graceful shutdown), SIGKILL after STOP_S."""
    proc.terminate()
    try:
        proc.wait(STOP_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_up(served: Background, log: IO[str]) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if served.proc.poll() is not None:
            raise ServiceDidNotStart(f"the service exited at start:\n{_read(log)[-2000:]}")
        with contextlib.suppress(OSError), \
                urllib.request.urlopen(served.url + HEALTH, timeout=2) as r:
            if r.status == 200:
                return
        time.sleep(0.1)
    raise ServiceDidNotStart(f"the service did not start within {START_S:.0f} s")


def _read(log: IO[str]) -> str:
    log.seek(0)
    return log.read()
