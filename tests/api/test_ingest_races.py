"""Ingest under races, each forced into its bad interleaving deterministically, on the real
app and the real DuckDB: two contradicting ends of one run sent at once (the second is a 409
`run-ended`, as it is when sent after), and a server killed between moving a batch's part
into its table and its ledger entry, whose part a compaction then merged and collected (the
server starts again and finishes the batch)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

import warehouse
from aicf_induct import file_lock
from api.app import create_app
from api.settings import Settings
from tests.api.conftest import REPO, serve_in_thread
from warehouse import ingest
from warehouse.catalog import with_retry
from warehouse.ingest import INGEST_DIR, is_committed, recover
from warehouse.keys import create_key
from warehouse.layout import read_markers
from warehouse.writer import Writer

RUN = {"run_id": "remote-1", "problem_id": "p1", "problem_name": "toy", "task": "regression",
       "config": {}, "seed": 0, "device": "cpu", "library_versions": {}, "origin": "api"}


def test_two_contradicting_ends_sent_at_once_one_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End A passes its check, and before it commits, end B (another status) is sent. B ran
    its check against the ends A had not written yet: both were taken. Now B waits for A's
    run lock, then finds A's end and is a 409."""
    root = tmp_path / "wh"
    settings = Settings(warehouse=root)
    key = create_key(settings.key_path(), "write")
    auth = {"Authorization": f"Bearer {key}"}
    answers: dict[str, httpx.Response] = {}
    b_reached = threading.Event()  # B waits for the run's lock, or has its answer
    in_a = threading.Event()  # A is between its check and its commit
    real_commit, real_acquire = ingest.commit, file_lock.acquire

    def acquire(lock: Path, *args: Any, **kwargs: Any) -> int | None:
        if in_a.is_set() and lock.parent.name == "ends":
            b_reached.set()  # B, about to wait for the lock A holds
        return real_acquire(lock, *args, **kwargs)

    def end(client: httpx.Client, status: str, steps: int) -> None:
        answers[status] = client.post(f"/v1/ingest/runs/{RUN['run_id']}/end", headers=auth,
                                      json={"batch_id": f"end-{status}", "status": status,
                                            "steps": steps, "wall_time_s": 1.0})

    with serve_in_thread(create_app(settings)) as client:
        r = client.post("/v1/ingest/runs", headers=auth,
                        json={"batch_id": "start", "run": RUN})
        assert r.status_code == 200, r.text

        def send_b() -> None:
            with httpx.Client(base_url=str(client.base_url), timeout=60) as other:
                end(other, "early_stopped", 5)
            b_reached.set()

        def commit(root: Any, batch_id: str, tables: Any, digest: str | None = None) -> Any:
            if "run_ends" in tables and not in_a.is_set():  # A, checked, not committed
                in_a.set()
                b.start()
                assert b_reached.wait(60), "end B neither answered nor waited for A"
            return real_commit(root, batch_id, tables, digest)

        b = threading.Thread(target=send_b, daemon=True)
        monkeypatch.setattr(ingest, "commit", commit)
        monkeypatch.setattr(file_lock, "acquire", acquire)
        end(client, "completed", 10)  # A
        b.join(60)  # B's answer (with the lock: once A has committed)
        codes = {s: a.status_code for s, a in answers.items()}
        assert codes == {"completed": 200, "early_stopped": 409}, \
            {s: a.text for s, a in answers.items()}
        body = answers["early_stopped"].json()
        assert body["type"] == "urn:aicf-induct:problem:run-ended"
        assert "ended completed at step 10" in body["detail"]
        # the same end again, under another batch id, is still a retry that is taken
        monkeypatch.setattr(ingest, "commit", real_commit)
        again = client.post(f"/v1/ingest/runs/{RUN['run_id']}/end", headers=auth,
                            json={"batch_id": "end-again", "status": "completed",
                                  "steps": 10, "wall_time_s": 1.0})
        assert again.status_code == 200, again.text
    ends = with_retry(root, lambda c: c.execute(
        "SELECT DISTINCT status, steps FROM raw_run_ends").fetchall())
    assert ends == [("completed", 10)]
    assert not list((root / INGEST_DIR / "ends").iterdir())  # the lock files are gone


# Commits one batch of steps and dies (os._exit: no cleanup, as a SIGKILL) right after the
# part is moved into its table, before the plan becomes the ledger entry.
KILLED = r"""
import os, sys
from warehouse import ingest
root = sys.argv[1]
real = os.replace
def replace(a, b):
    real(a, b)
    if str(b).endswith(".parquet"):
        os._exit(9)
ingest.os.replace = replace
t = ingest.tables_of({"steps": [{"run_id": "r", "step": 0, "epoch": 0, "loss": 1.0,
    "grad_norm": 1.0, "update_ratio": 0.1, "lr": 0.1, "step_time_s": 0.1,
    "batch_size": 1}]}, "w")
ingest.commit(root, "batch-1", t)
"""


def test_a_batch_whose_moved_part_was_compacted_away_rolls_forward(tmp_path: Path) -> None:
    """The server died between moving the part and the ledger entry; before it restarted,
    a compaction merged that part with a local run's and collected it, and a second one
    merged that output again and collected the marker that had named the part. The
    roll-forward said "part steps lost from staging" and the server could not start (after
    one compaction until the forty-second sitting, after two until the forty-third)."""
    root = tmp_path / "wh"
    root.mkdir()
    p = subprocess.run([sys.executable, "-c", KILLED, str(root)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 9, p.stderr
    assert not is_committed(root, "batch-1")
    (plan,) = (root / INGEST_DIR / "staging").glob("*/plan.json")
    rel = json.loads(plan.read_bytes())["parts"]["steps"]
    assert (root / "steps" / rel).is_file()  # moved into place
    with Writer(root) as w:  # a local run logs into the same partition
        w.append("steps", {"run_id": "local", "step": 0})
    report = warehouse.compact(root, grace_s=0)
    assert report.per_table == {"steps": 2}
    assert not (root / "steps" / rel).exists()  # merged, then collected
    # a second local run, and a second compaction: it merges the first one's output, and
    # collects its marker, the last record that named the batch's part
    with Writer(root) as w:
        w.append("steps", {"run_id": "local2", "step": 0})
    assert warehouse.compact(root, grace_s=0).per_table == {"steps": 2}
    assert not any(rel in m.inputs for m in read_markers(root / "steps").values())
    # the server starts again: `create_app` rolls the batch forward
    with serve_in_thread(create_app(Settings(warehouse=root))) as client:
        assert is_committed(root, "batch-1")
        assert not (root / INGEST_DIR / "staging" / plan.parent.name).exists()
        health = client.get("/v1/health")
        assert health.status_code == 200, health.text
        assert health.json()["warehouse"]["steps"] == 3
    assert recover(root) == 0
    steps = with_retry(root, lambda c: c.execute(
        "SELECT run_id, step FROM raw_steps ORDER BY run_id").fetchall())
    assert steps == [("local", 0), ("local2", 0), ("r", 0)]  # each once
    # the client's retry of the batch finds it done
    again = ingest.commit(root, "batch-1", ingest.tables_of({"steps": [
        {"run_id": "r", "step": 0, "epoch": 0, "loss": 1.0, "grad_norm": 1.0,
         "update_ratio": 0.1, "lr": 0.1, "step_time_s": 0.1, "batch_size": 1}]}, "w"))
    assert not again.written
