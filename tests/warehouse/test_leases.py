"""Writer leases: a run is `running` only while its writer lives; then `abandoned`, which
`check` reports and `check --repair` makes final."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from aicf_induct.cli import main as cli_main
from aicf_induct.records import RunStartRecord
from tests.warehouse.conftest import log_run, problem
from warehouse import WarehouseRecorder, Writer, check, compact, connect
from warehouse.lease import LEASE_TIMEOUT_S, lease_path, live_writers, read_lease


def _status(root: Path) -> list[tuple[str, str]]:
    return connect(root).execute("SELECT run_id, status FROM runs ORDER BY 1").fetchall()


def test_a_run_is_running_while_its_writer_lives_then_abandoned(
        root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rec = WarehouseRecorder(root)
    log_run(rec, "done", problem("p1"), 0.9, "fp", {"depth": 1.0})
    log_run(rec, "open", problem("p1"), 0.8, "fp", {"depth": 1.0}, end=False)
    rec.flush()
    wid = rec.writer.writer_id
    assert live_writers(root) == {wid}
    assert _status(root) == [("done", "completed"), ("open", "running")]
    assert check(root).abandoned == []
    rec.close()  # closed without ending "open": it never will
    assert not lease_path(root, wid).exists()
    assert _status(root) == [("done", "completed"), ("open", "abandoned")]
    rep = check(root)
    assert rep.ok and [r.run_id for r in rep.abandoned] == ["open"]
    assert cli_main.main(["warehouse", "check", "--warehouse", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith("abandoned: run open (test, name-p1, started ") and \
        out[-2].endswith(f"its writer {wid} is gone")
    assert out[-1] == "ok; 1 abandoned run(s) (`--repair` ends them)"
    assert cli_main.main(["warehouse", "check", "--repair", "--warehouse", str(root)]) == 0
    assert "ended as abandoned: run open" in capsys.readouterr().out
    rep = check(root)
    assert rep.ok and rep.abandoned == []  # ended for good, with its reason
    err = connect(root).execute("SELECT status, error FROM runs WHERE run_id = 'open'")
    assert err.fetchall() == [("abandoned", f"its writer {wid} is gone (process killed or "
                                            "closed without ending the run)")]


def _forge(root: Path, writer_id: str, **changes: object) -> Path:
    """A lease as another writer would leave it (this process's, with some fields changed)."""
    with Writer(root, writer_id="model") as w:
        data = json.loads(lease_path(root, w.writer_id).read_text())
    path = lease_path(root, writer_id)
    path.write_text(json.dumps({**data, "writer_id": writer_id, **changes}))
    return path


def test_lease_liveness_rules(root: Path) -> None:
    root.mkdir()
    _forge(root, "me")  # this process: alive
    _forge(root, "reused", pid_start="1")  # our pid, another start time: a reused pid
    _forge(root, "gone", pid=2**22 + 1)  # no such process on this host
    _forge(root, "remote", host="elsewhere")  # another host: heartbeat only
    stale = _forge(root, "remote-stale", host="elsewhere")
    old = time.time() - LEASE_TIMEOUT_S - 1
    os.utime(stale, (old, old))
    assert live_writers(root) == {"me", "remote"}
    compact(root)  # collects dead leases
    assert sorted(p.stem for p in (root / "_leases").iterdir()) == ["me", "remote"]


def test_the_flush_thread_refreshes_the_heartbeat(root: Path, monkeypatch) -> None:
    import warehouse.writer as writer_mod

    monkeypatch.setattr(writer_mod, "HEARTBEAT_S", 0.05)
    w = Writer(root, flush_interval_s=30)
    path = lease_path(root, w.writer_id)
    old = time.time() - LEASE_TIMEOUT_S - 1
    os.utime(path, (old, old))
    assert w.writer_id not in live_writers(root)
    deadline = time.monotonic() + 5
    while w.writer_id not in live_writers(root) and time.monotonic() < deadline:
        time.sleep(0.02)
    lease = read_lease(root, w.writer_id)
    assert lease is not None and time.time() - lease.heartbeat_at < 5
    path.unlink()  # collected while we were stopped: taken again
    deadline = time.monotonic() + 5
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists()
    w.close()
    assert not path.exists()


def test_a_run_start_without_writer_id_is_abandoned(root: Path) -> None:
    """Rows of an older warehouse (or another tool) name no writer: never `running`."""
    with Writer(root) as w:
        w.append("runs", {"run_id": "x", "problem_id": "p", "writer_id": None})
    assert _status(root) == [("x", "abandoned")]
    rec = WarehouseRecorder(root)
    rec.run_start(RunStartRecord("y", "p", "p", "regression", {}, 0, "cpu", {}, "test"))
    rec.flush()
    assert _status(root) == [("x", "abandoned"), ("y", "running")]
    rec.close()


def test_a_resumed_run_reads_by_its_resuming_writer_until_its_next_end(root: Path) -> None:
    """A `resumed` row is no end: the run's earlier end holds no longer; it is `running` while
    the resuming writer lives, `abandoned` once it is gone (and after `--repair`, with that
    end), and its next end of its own wins; a part written before `run_ends` had a writer
    column reads as before."""
    from datetime import UTC, datetime, timedelta

    from aicf_induct.records import RESUMED, RunEndRecord

    t0 = datetime.now(UTC) - timedelta(minutes=10)

    def at(minutes: int) -> datetime:
        return t0 + timedelta(minutes=minutes)

    def row(run_id: str) -> tuple[object, ...]:
        return connect(root).execute(
            "SELECT status, steps_taken, error FROM runs WHERE run_id = ?", [run_id]).fetchone()

    first = WarehouseRecorder(root)
    log_run(first, "r", problem("p1"), 0.9, "fp", {"depth": 1.0}, end=False)
    first.run_end(RunEndRecord("r", "interrupted", 40, 1.0, "KeyboardInterrupt", at(1)))
    first.close()
    # a part of an older writer: no writer_id column at all
    with Writer(root) as w:
        w.append_batch("run_ends", {"run_id": ["old"], "status": ["completed"], "steps": [7],
                                    "wall_time_s": [0.1], "ended_at": [at(0)]})
        w.append("runs", {"run_id": "old", "problem_id": "p1"})
    assert row("r") == ("interrupted", 40, "KeyboardInterrupt")

    resuming = WarehouseRecorder(root)
    resuming.run_end(RunEndRecord("r", RESUMED, 40, 0.0, ended_at=at(2)))
    resuming.flush()
    assert row("r") == ("running", None, None)
    assert connect(root).execute("SELECT from_step, writer_id FROM run_resumes").fetchall() \
        == [(40, resuming.writer.writer_id)]
    resuming.close()  # gone without an end
    assert row("r") == ("abandoned", None, None)
    rep = check(root, repair=True)
    assert [r.run_id for r in rep.abandoned] == ["r"] and check(root).abandoned == []
    assert row("r")[0] == "abandoned" and "is gone" in str(row("r")[2])

    again = WarehouseRecorder(root)  # resumed again, to its end
    again.run_end(RunEndRecord("r", RESUMED, 40, 0.0))
    again.flush()
    assert row("r") == ("running", None, None)
    again.run_end(RunEndRecord("r", "completed", 100, 2.0))
    again.close()
    assert row("r") == ("completed", 100, None)
    assert row("old") == ("completed", 7, None)
    assert connect(root).execute("SELECT count(*) FROM run_ends").fetchone() == (2,)
    # the older part and the newer ones merge, and read the same
    assert check(root).ok
    compact(root, grace_s=0)
    assert (row("r"), row("old")) == (("completed", 100, None), ("completed", 7, None))
