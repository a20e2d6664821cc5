"""Ingest crash safety: SIGKILL the server while 8 clients send batches; restart it; the
clients retry (and re-send batches acknowledged before the kill): every batch is in the
warehouse exactly once, and nothing of a batch is left half-done."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx

import warehouse
from aicf_induct.cli.background import free_port, serving
from tests.api.conftest import LIMITS, cli
from tests.api.test_ingest import INGEST_ENV, RUN, step_rows
from warehouse.ingest import INGEST_DIR

CLIENTS, BATCHES, ROWS = 8, 25, 200


def test_sigkill_during_concurrent_ingest_loses_and_duplicates_nothing(
        tmp_path: Path) -> None:
    root = tmp_path / "wh"
    key = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    acked: list[list[int]] = [[] for _ in range(CLIENTS)]  # batch numbers acknowledged
    resent: list[bool] = []
    errors: list[str] = []
    deadline = time.monotonic() + 90

    def send(c: httpx.Client, client: int, b: int) -> bool:
        """POST one batch until the server answers 200 (retrying through the crash)."""
        body = {"batch_id": f"crash-{client}-{b}",
                "steps": step_rows(f"crash-{client}", b * ROWS, ROWS),
                # the first batch starts the run (ingest refuses rows of a run never started)
                **({"runs": [{**RUN, "run_id": f"crash-{client}"}]} if b == 0 else {})}
        while time.monotonic() < deadline:
            try:
                r = c.post("/v1/ingest/batches", json=body)
            except httpx.TransportError:
                time.sleep(0.05)
                continue
            if r.status_code == 200:
                return bool(r.json()["written"])
            errors.append(r.text)
            return False
        errors.append(f"client {client}: batch {b} not acknowledged in time")
        return False

    def client(n: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                          timeout=10) as c:
            for b in range(BATCHES):
                send(c, n, b)
                acked[n].append(b)

    env = {**LIMITS, **INGEST_ENV}
    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    with serving(root, port=port, env=env) as first:
        for t in threads:
            t.start()
        while sum(map(len, acked)) < CLIENTS * BATCHES // 4:  # well into the ingest
            time.sleep(0.01)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        before_kill = [list(a) for a in acked]
    with serving(root, port=port, env=env) as second:  # recovery runs as the app starts
        for t in threads:
            t.join(100)
        # batches acknowledged before the kill, sent again after it: not written again
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                          timeout=10) as c:
            for n in range(CLIENTS):
                resent += [send(c, n, b) for b in before_kill[n][:2]]
    text = first.output + second.output
    assert not errors, errors[:3]
    assert "Traceback" not in text, text
    assert all(len(a) == BATCHES for a in acked)
    assert resent and not any(resent)
    conn = warehouse.connect(root)
    try:
        per_client = conn.execute(
            "SELECT run_id, count(*), count(DISTINCT step) FROM steps GROUP BY run_id "
            "ORDER BY run_id").fetchall()
        dup = conn.execute("SELECT run_id, step // ?, count(*) FROM steps GROUP BY ALL "
                           "HAVING count(*) <> ?", [ROWS, ROWS]).fetchall()
    finally:
        conn.close()
    assert per_client == [(f"crash-{n}", BATCHES * ROWS, BATCHES * ROWS)
                          for n in range(CLIENTS)]
    assert dup == []  # every batch's rows exactly once
    assert list((root / INGEST_DIR / "staging").iterdir()) == []
    assert warehouse.check(root).ok
