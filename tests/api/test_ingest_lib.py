"""warehouse/ingest.py without HTTP: a process killed at each step of a commit leaves a batch
that `recover` makes wholly visible (planned) or wholly absent (not planned), and a retry
writes it once. And the RemoteRecorder against a server that is down, comes up late, or
refuses a batch."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
import time
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

import pytest

import warehouse
import warehouse.ingest
from aicf_induct.cli.background import free_port
from aicf_induct.records import RunEndRecord, RunStartRecord, StepRecord
from aicf_induct.runtime.remote_recorder import KEYS, RemoteLogError, RemoteRecorder
from api.app import create_app
from api.settings import Settings
from tests.api.conftest import REPO, serve_in_thread
from warehouse.ingest import INGEST_DIR, KINDS, commit, is_committed, recover, tables_of
from warehouse.keys import create_key

# A child process that commits a batch of 2 tables (steps and runs) and dies (os._exit, no
# cleanup) at the N-th call of the file operation named by argv[2].
CHILD = r"""
import os, sys, json
import warehouse.ingest as ing
root, where, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
batch = json.loads(sys.argv[4])
real = {"replace": os.replace, "atomic_write": ing.atomic_write,
        "write_parquet": ing.write_parquet}
calls = dict.fromkeys(real, 0)
def dying(name):
    def f(*a, **k):
        calls[name] += 1
        if calls[name] == n:
            os._exit(9)
        return real[name](*a, **k)
    return f
if where == "replace":
    ing.os.replace = dying("replace")
else:
    setattr(ing, where, dying(where))
ing.commit(root, "b-1", ing.tables_of(batch, "w"))
"""

BATCH = {"runs": [{"run_id": "r", "problem_id": "p", "problem_name": "n", "task": "t",
                   "config": {}, "seed": 0, "device": "cpu", "library_versions": {},
                   "origin": "test"}],
         "steps": [{"run_id": "r", "step": s, "epoch": 0, "loss": 0.5, "grad_norm": 1.0,
                    "update_ratio": 0.1, "lr": 0.1, "step_time_s": 0.0, "batch_size": 8}
                   for s in range(30)]}


def counts(root: Path, views: str = "") -> tuple[int, int]:
    """Rows of runs and steps (`views="raw_"`: the rows stored, a run's repeats too)."""
    conn = warehouse.connect(root)
    try:
        return (conn.execute(f"SELECT count(*) FROM {views}runs").fetchone()[0],  # type: ignore[index]
                conn.execute(f"SELECT count(*) FROM {views}steps").fetchone()[0])  # type: ignore[index]
    finally:
        conn.close()


# (where the child dies, at which call, what is visible after recovery)
CRASHES = [("write_parquet", 1, (0, 0)),  # staging the first table
           ("write_parquet", 2, (0, 0)),  # staging the second
           ("atomic_write", 1, (0, 0)),  # writing the plan: not committed
           ("replace", 2, (1, 30)),  # planned; one table moved in, the other not
           ("replace", 3, (1, 30))]  # both moved in, the plan not yet the ledger entry


@pytest.mark.parametrize("where,n,visible", CRASHES, ids=[f"{c[0]}-{c[1]}" for c in CRASHES])
def test_a_commit_killed_anywhere_is_all_or_nothing(tmp_path: Path, where: str, n: int,
                                                    visible: tuple[int, int]) -> None:
    root = tmp_path / "wh"
    child = subprocess.run([sys.executable, "-c", CHILD, str(root), where, str(n),
                            json.dumps(BATCH)], cwd=REPO, env={"PYTHONPATH": str(REPO)},
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 9, child.stderr
    assert not is_committed(root, "b-1")
    recover(root)  # what the service does as it starts
    assert counts(root) == visible
    assert list((root / INGEST_DIR / "staging").iterdir()) == []
    assert is_committed(root, "b-1") == (visible != (0, 0))
    # the client retries: written now if it was not, never twice
    done = commit(root, "b-1", tables_of(BATCH, "w"))
    assert done.written == (visible == (0, 0))
    assert counts(root) == (1, 30)
    assert warehouse.check(root).ok


def _refusing(real: Any, table: str, before: Any = None) -> Any:
    """os.replace that refuses a move into `table`'s folder (as a folder made immutable
    does), after calling `before` once."""
    def replace(src: Any, dst: Any) -> None:
        if Path(dst).parent.parent.name == table:
            if before is not None:
                before()
            raise PermissionError(1, "Operation not permitted", str(dst))
        real(src, dst)
    return replace


class _NextYear(datetime):
    @classmethod
    def now(cls, tz: tzinfo | None = None) -> _NextYear:
        return cls(datetime.now(tz).year + 1, 1, 2, tzinfo=tz)


# (the table whose folder refuses the batch's part: the parts move runs then steps, so
# `steps` fails with the runs part moved in; the ledger's folder, with both moved in)
REFUSALS = ["runs", "steps", "batches"]


@pytest.mark.parametrize("table", REFUSALS)
def test_a_roll_forward_that_fails_takes_the_batch_back_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str) -> None:
    root = tmp_path / "wh"
    real = os.replace
    monkeypatch.setattr(os, "replace", _refusing(real, table))
    with pytest.raises(PermissionError):
        commit(root, "b-1", tables_of(BATCH, "w"))
    # nothing of it is visible while the server lives on, nor planned for a restart
    assert counts(root) == (0, 0)
    assert not is_committed(root, "b-1")
    assert list((root / INGEST_DIR / "staging").iterdir()) == []
    monkeypatch.setattr(os, "replace", real)
    assert recover(root) == 0
    done = commit(root, "b-1", tables_of(BATCH, "w"))  # the client's retry: written once
    assert done.written
    assert counts(root) == (1, 30)
    assert warehouse.check(root).ok


@pytest.mark.parametrize("grace_s", [0.0, 60.0])
def test_a_part_a_compaction_merged_is_not_taken_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grace_s: float) -> None:
    # b-1's runs part moves in, a compaction merges it with b-0's (and collects it at once,
    # or leaves it superseded for the grace period), then the steps move fails: the runs
    # row is in the table for good, so the batch stays planned and a retry completes it
    root = tmp_path / "wh"
    first = json.loads(json.dumps(BATCH).replace('"r"', '"r0"'))
    commit(root, "b-0", tables_of(first, "w"))
    real = os.replace
    monkeypatch.setattr(os, "replace", _refusing(
        real, "steps", before=lambda: warehouse.compact(root, grace_s=grace_s, tables=["runs"])))
    with pytest.raises(PermissionError):
        commit(root, "b-1", tables_of(BATCH, "w"))
    monkeypatch.setattr(os, "replace", real)
    assert counts(root, "raw_") == (2, 30)  # b-1's run, merged; its steps not yet
    # the retry comes the next day: a batch staged again would go to another partition,
    # under a part name no compaction marker hides
    monkeypatch.setattr(warehouse.ingest, "datetime", _NextYear)
    assert commit(root, "b-1", tables_of(BATCH, "w")).written
    assert counts(root, "raw_") == (2, 60)  # each row once, not only once per key
    assert warehouse.check(root).ok


def test_the_batch_fields_are_the_records_fields() -> None:
    # the service checks what the RemoteRecorder sends: one list of fields for both
    for rtype, key in KEYS.items():
        assert [f.name for f in KINDS[key]] == [f.name for f in dataclasses.fields(rtype)]


def step(i: int, run: str = "rr") -> StepRecord:
    return StepRecord(run, i, 0, 1.0 / (i + 1), 0.5, 1e-3, 0.01, 1e-4, 16)


def _delivered(root: Path, steps_sql: str) -> tuple[list[tuple], list[tuple]]:
    """What the warehouse holds: `steps_sql`'s rows, and the run ends' statuses."""
    conn = warehouse.connect(root)
    try:
        return (conn.execute(steps_sql).fetchall(),
                conn.execute("SELECT status FROM run_ends").fetchall())
    finally:
        conn.close()


def started(rec: RemoteRecorder, run: str = "rr") -> RemoteRecorder:
    """`rec` with run `run` started (the service refuses rows of a run it never started)."""
    rec.run_start(RunStartRecord(run, "p", "name-p", "classification", {}, 0, "cpu", {}, "test"))
    return rec


def test_remote_recorder_with_the_server_down_warns_once_caps_and_counts(tmp_path: Path) -> None:
    err = io.StringIO()
    rec = RemoteRecorder(f"http://127.0.0.1:{free_port()}", "k", max_buffered=10,
                         flush_interval_s=0.05, backoff_s=0.01, close_timeout_s=0.5,
                         stream=err)
    t0 = time.perf_counter()
    for i in range(25):
        rec.step(step(i))  # never blocks on the network
    assert time.perf_counter() - t0 < 0.5
    time.sleep(0.2)  # a few sends failed: the server is known to be down
    t0 = time.perf_counter()
    rec.flush()  # what a checkpoint calls: it does not wait on a server that is down
    assert time.perf_counter() - t0 < 0.3  # (close_timeout_s, what it would wait, is 0.5)
    rec.close()
    text = err.getvalue()
    assert text.count("cannot reach") == 1, text
    assert rec.stats.dropped == 25 and rec.stats.retries > 1
    assert "25 record(s) not delivered" in text


def test_remote_recorder_buffers_until_the_server_comes_up(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    settings = Settings(warehouse=root)
    key = create_key(settings.key_path(), "write")
    port = free_port()
    err = io.StringIO()
    rec = started(RemoteRecorder(f"http://127.0.0.1:{port}", key, flush_interval_s=0.05,
                                 backoff_s=0.02, max_backoff_s=0.1, stream=err))
    for i in range(100):
        rec.step(step(i))
    time.sleep(0.2)  # a few failed sends, retried with the same batch id
    with serve_in_thread(create_app(settings), port):
        for i in range(100, 150):
            rec.step(step(i))
        rec.run_end(RunEndRecord("rr", "completed", 150, 1.0))
        rec.flush()
        rec.close()
    assert rec.stats.retries >= 1 and rec.stats.dropped == 0
    assert "not delivered" not in err.getvalue()
    got, ends = _delivered(root, "SELECT step, loss FROM steps ORDER BY step")
    assert got == [(i, 1.0 / (i + 1)) for i in range(150)] and ends == [("completed",)]


def test_remote_recorder_refusals(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    settings = Settings(warehouse=root)
    write = create_key(settings.key_path(), "write")
    read = create_key(settings.key_path(), "read")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serve_in_thread(create_app(settings), port):
        with pytest.raises(RemoteLogError, match="403"):
            RemoteRecorder(url, read)
        with pytest.raises(RemoteLogError, match="401"):
            RemoteRecorder(url, "aicf_wrong")
        err = io.StringIO()
        rec = RemoteRecorder(url, write, stream=err)
        rec.step(StepRecord("rr", 0, 0, "low", 0.5, 1e-3, 0.01, 1e-4, 16))  # type: ignore[arg-type]
        rec.close()  # a batch the server refuses is not retried forever
    assert rec.stats.dropped == 1
    assert "422 steps[0].loss: not a number" in err.getvalue()
    assert not os.path.exists(root / "steps")


def test_a_key_revoked_mid_run_is_said_once_and_nothing_more_is_sent(tmp_path: Path) -> None:
    """Every batch after the revocation was refused (401) and said in a line of its own, one
    each half second for the rest of the run; the refusal is said once now, no later batch is
    sent, and close counts every record not delivered."""
    from warehouse.keys import id_of, revoke_key

    root = tmp_path / "wh"
    settings = Settings(warehouse=root)
    key = create_key(settings.key_path(), "write")
    port = free_port()
    err = io.StringIO()
    with serve_in_thread(create_app(settings), port):
        rec = started(RemoteRecorder(f"http://127.0.0.1:{port}", key, stream=err))
        rec.step(step(0))
        rec.flush()
        key_id = id_of(settings.key_path(), key)
        assert key_id is not None
        revoke_key(settings.key_path(), key_id)
        for i in range(1, 6):
            rec.step(step(i))
            rec.flush()  # a batch each
        sent = rec.stats.sent_batches
        rec.close()
    text = err.getvalue()
    assert text.count("remote log: dropped") == 1, text
    assert "401" in text and "the rest of the run is not sent" in text
    assert "5 record(s) not delivered" in text and rec.stats.dropped == 5
    assert rec.stats.sent_batches == sent
    got, _ = _delivered(root, "SELECT step FROM steps")
    assert got == [(0,)]


def test_a_backlog_goes_in_batches_the_server_takes(tmp_path: Path) -> None:
    """After an outage the whole backlog went as one batch; past the server's body limit it
    was refused (413, or the connection reset while sending) and dropped at close: two thirds
    of a run's steps were lost while the run read completed. Now it goes in batches of at most
    `batch_rows`, a batch too large for the server is halved, and the run's end comes last."""
    root = tmp_path / "wh"
    settings = Settings(warehouse=root, max_ingest_bytes=200_000)  # about 900 step records
    key = create_key(settings.key_path(), "write")
    port = free_port()
    err = io.StringIO()
    rec = started(RemoteRecorder(f"http://127.0.0.1:{port}", key, flush_interval_s=0.05,
                                 backoff_s=0.02, max_backoff_s=0.1, batch_rows=3000,
                                 stream=err))
    n = 8000
    for i in range(n):  # the server is down: all of it buffers
        rec.step(step(i))
    rec.run_end(RunEndRecord("rr", "completed", n, 1.0))
    time.sleep(0.2)
    with serve_in_thread(create_app(settings), port):
        rec.flush()
        rec.close()
    assert rec.stats.dropped == 0 and "not delivered" not in err.getvalue(), err.getvalue()
    assert rec.stats.sent_batches >= n // 900  # batches under the server's limit
    got, ends = _delivered(root, "SELECT count(*), count(DISTINCT step) FROM steps")
    assert got == [(n, n)] and ends == [("completed",)]


def test_a_run_s_end_goes_in_the_batch_that_empties_the_buffer() -> None:
    from aicf_induct.runtime.remote_recorder import _halves

    rec = RemoteRecorder("http://127.0.0.1:9", "k", check=False, batch_rows=3,
                         flush_interval_s=3600)
    with rec._lock:  # the sender thread waits an hour: the buffer is ours
        # a run started after another's steps were buffered: its start still goes first
        rec._buffer = {"steps": [{"s": i} for i in range(6)], "run_ends": [{"e": 0}],
                       "runs": [{"r": 0}]}
        rec._n = 8
        taken = [rec._take() for _ in range(3)]
    assert [n for _, n in taken] == [3, 3, 2] and rec._n == 0
    assert taken[0][0] == {"runs": [{"r": 0}], "steps": [{"s": 0}, {"s": 1}]}
    assert taken[1][0] == {"steps": [{"s": 2}, {"s": 3}, {"s": 4}]}  # the end waits
    assert taken[2][0] == {"steps": [{"s": 5}], "run_ends": [{"e": 0}]}
    halves = _halves({"run_ends": [{"e": 0}], "steps": [{"s": 0}, {"s": 1}],
                      "runs": [{"r": 0}]})
    assert halves == [({"runs": [{"r": 0}], "steps": [{"s": 0}]}, 2),
                      ({"steps": [{"s": 1}], "run_ends": [{"e": 0}]}, 2)]
    rec._stop.set()
    rec._closed = True


def test_a_service_that_cannot_write_refuses_the_run_before_it_trains(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only (or otherwise unwritable) warehouse passed the key check: the client
    trained to the end and lost every record, exit status 0."""
    import api.routes.ingest as ingest_route
    from warehouse import WarehouseError

    def read_only(root: object) -> None:
        raise WarehouseError(f"warehouse {root} is not writable: Read-only file system")

    monkeypatch.setattr(ingest_route, "check_writable", read_only)
    root = tmp_path / "wh"
    settings = Settings(warehouse=root)
    key = create_key(settings.key_path(), "write")
    port = free_port()
    with serve_in_thread(create_app(settings), port), pytest.raises(
            RemoteLogError, match=r"cannot take the run: 503 warehouse .* is not writable: "
                                  r"Read-only file system"):
        RemoteRecorder(f"http://127.0.0.1:{port}", key)


def test_a_client_gone_silent_is_ended_by_repair_stale_and_its_own_end_still_wins(
        tmp_path: Path, capsys) -> None:
    """A client killed outright (SIGKILL, a lost node) left its run `running` for as long as
    the server lived: the run carries the server's lease, so `check --repair` could not end
    it. `--stale MINUTES` counts the runs whose client has sent nothing that long."""
    from aicf_induct.cli.main import main
    from warehouse.ingest import _run_marker, last_record_at

    root = tmp_path / "wh"
    settings = Settings(warehouse=root)
    key = create_key(settings.key_path(), "write")
    with serve_in_thread(create_app(settings)) as client:
        rec = started(RemoteRecorder(str(client.base_url), key, flush_interval_s=0.05))
        rec.step(step(0))
        rec.flush()
        started_at = last_record_at(root, "rr")
        assert started_at is not None
        os.utime(_run_marker(root, "rr"), (started_at - 600, started_at - 600))
        rec.step(step(1))  # a later batch of its steps: heard from again
        rec.flush()
        heard = last_record_at(root, "rr")
        assert heard is not None and heard > started_at - 60
        rec.close()  # the client dies without ending its run
        assert main(["warehouse", "check", "--warehouse", str(root), "--stale", "5"]) == 0
        assert "abandoned" not in capsys.readouterr().out  # heard from a moment ago
        os.utime(_run_marker(root, "rr"), (heard - 600, heard - 600))
        assert main(["warehouse", "check", "--warehouse", str(root), "--repair"]) == 0
        assert "abandoned" not in capsys.readouterr().out  # without --stale: the lease lives
        assert main(["warehouse", "check", "--warehouse", str(root), "--stale", "5"]) == 0
        assert capsys.readouterr().out.endswith(
            "ok; 1 abandoned run(s) (`--repair --stale` ends them)\n")
        assert main(["warehouse", "check", "--warehouse", str(root), "--repair",
                     "--stale", "5"]) == 0
        out = capsys.readouterr().out
        assert "ended as abandoned: run rr (test, name-p, started" in out
        assert "nothing from its client for 10 min" in out
        assert _delivered(root, "SELECT 1")[1] == [("abandoned",)]
        late = RemoteRecorder(str(client.base_url), key, flush_interval_s=0.05)
        late.run_end(RunEndRecord("rr", "completed", 2, 1.0))  # its end, after all
        late.close()
    assert _delivered(root, "SELECT 1")[1] == [("completed",)]


def test_a_ledger_digest_of_an_older_server_is_compared_only_with_its_kind(
        tmp_path: Path) -> None:
    """Older servers kept the digest of a body's bytes; this one keeps its rows' (`rows:`).
    A retry that spans the upgrade must not be taken for a reused batch id."""
    from warehouse.ingest import BatchReused, same_batch

    root = tmp_path / "wh"
    commit(root, "b-old", tables_of(BATCH, "w"), digest="0f" * 16)  # an older server's
    same_batch(root, "b-old", "rows:" + "aa" * 16)  # this server's digest of the retry
    same_batch(root, "b-old", "0f" * 16)
    with pytest.raises(BatchReused):
        same_batch(root, "b-old", "1e" * 16)  # bytes of another body (an Arrow stream's kind)
