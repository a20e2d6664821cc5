"""The real service for the API tests: a warehouse with runs logged by the real CLI
(`aicf-induct train`), keys made by `aicf-induct keys create`, and `aicf-induct serve` (uvicorn)
in a subprocess on a free loopback port (`aicf_induct.cli.background`, as `make demo` starts
it), driven over HTTP with httpx."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from aicf_induct.cli.background import free_port, serving
from aicf_induct.cli.main import main

REPO = Path(__file__).resolve().parents[2]

# Tight limits so the escape corpus runs fast; docs/service.md gives the defaults.
LIMITS = {"AICF_SERVICE_SQL_TIME_LIMIT_S": "1", "AICF_SERVICE_SQL_MAX_ROWS": "1000",
          "AICF_SERVICE_SQL_MEMORY_LIMIT": "256MB", "AICF_SERVICE_MAX_BODY_BYTES": "65536"}
TRAIN = ["--epochs", "2", "--model", "mlp:depth=1,width=8", "--quiet", "--json"]


def cli(*argv: str) -> str:
    """Run `aicf-induct ARGV` in this process; its standard output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0, argv
    return out.getvalue()


@dataclass(frozen=True)
class Server:
    url: str
    root: Path
    runs: dict[str, dict]  # run_id -> the train command's JSON
    write_key: str
    read_key: str
    pack: Path | None = None  # the knowledge pack it proposes from

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def file_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@contextlib.contextmanager
def serve(root: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`aicf-induct serve` on a free port, with the tests' LIMITS, until the block ends;
    yields its base URL."""
    with serving(root, *extra, env={**LIMITS, **(env or {})}) as served:
        yield served.url
    # the catch-all handler logs an unexpected error; none may have happened
    text = served.output
    assert "Traceback" not in text and "unhandled error" not in text, text


@contextlib.contextmanager
def serve_in_thread(app: Any, port: int | None = None) -> Iterator[httpx.Client]:
    """`app` served by uvicorn in a thread of this process (for apps a test builds itself) on
    `port` or a free one; yields a client on it."""
    port = free_port() if port is None else port
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.02)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield client
    finally:
        srv.should_exit = True
        thread.join(10)


@pytest.fixture(scope="session")
def warehouse_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    root = tmp_path_factory.mktemp("service") / "wh"
    runs = {}
    for dataset, seed in (("iris", "1"), ("iris", "2"), ("wine", "1")):
        out = json.loads(cli("train", "--dataset", dataset, "--seed", seed, *TRAIN,
                             "--warehouse", str(root)))
        runs[out["run_id"]] = {**out, "dataset": dataset}
    return root, runs


@pytest.fixture(scope="session")
def pack_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real knowledge pack: the induction tests' tiny corpus (a real sweep), packed
    by `aicf-induct induce fit`."""
    from tests.induction.helpers import build_tiny_corpus

    root = build_tiny_corpus(tmp_path_factory.mktemp("corpus") / "wh")
    out = root.parent / "pack.parquet"
    cli("induce", "fit", "--warehouse", str(root), "--min-problems", "2", "--bootstrap", "200",
        "--no-write", "--quiet", "-o", str(out))
    return out


@pytest.fixture(scope="session")
def server(warehouse_root: tuple[Path, dict[str, dict]], pack_path: Path) -> Iterator[Server]:
    root, runs = warehouse_root
    write_key = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
    read_key = cli("keys", "create", "--scope", "read", "--warehouse", str(root)).strip()
    with serve(root, "--pack", str(pack_path)) as url:
        yield Server(url, root, runs, write_key, read_key, pack_path)
