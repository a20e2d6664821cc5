"""`adapt --log-to` killed outright, then resumed through the service: the resume reads what
the service holds of the run (its rows past the checkpoint are not logged twice; the run,
`running` under the server's lease, goes on), and a run the service never held is refused
before anything trains."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

import warehouse
from aicf_induct.cli.main import main
from aicf_induct.runtime import snapshot as disk
from api.app import create_app
from api.settings import Settings
from tests.api.conftest import REPO, serve_in_thread
from warehouse.keys import create_key

# digits: 0.4-2 ms a step, so the kill lands long before the end; a checkpoint every 1.2 s
# or more, longer than the recorder's 0.5 s flush, so that steps past one reach the service
# before the next (what a resume must not log again)
STEPS, EVERY = 12000, 3000
ARGS = ["adapt", "--dataset", "digits", "--steps", str(STEPS), "--checkpoint-steps",
        str(EVERY), "--patience", "0", "--json"]


def _past_checkpoint(root: Path, ckpt: Path) -> bool:
    """Whether the service's warehouse holds more steps than the latest checkpoint took."""
    latest = disk.latest(ckpt) if ckpt.is_dir() else None
    if latest is None or not (root / "steps").is_dir():
        return False
    taken = int(latest.name.split("-")[1])
    # the parts' footers: a poll as quick as the run's steps (a catalog takes 0.1 s)
    return sum(pq.ParquetFile(f).metadata.num_rows
               for f in warehouse.visible_parts(root, "steps")) > taken


def test_a_remote_run_killed_then_resumed_through_the_service_logs_each_step_once(
        tmp_path: Path, capsys) -> None:
    root, ckpt = tmp_path / "wh", tmp_path / "ckpt"
    settings = Settings(warehouse=root)
    key = create_key(settings.key_path(), "write")
    with serve_in_thread(create_app(settings)) as client:
        url = str(client.base_url)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen([sys.executable, "-m", "aicf_induct", *ARGS, "--log-to", url,
                                 "--api-key", key, "--checkpoint-dir", str(ckpt)], cwd=REPO,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        # killed once the service holds steps past the latest checkpoint (what a resume
        # must not log again)
        while not _past_checkpoint(root, ckpt):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no steps past a checkpoint within 120 s"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        conn = warehouse.connect(root)
        ((run_id, status),) = conn.execute("SELECT run_id, status FROM runs").fetchall()
        assert status == "running"  # the server's lease: nothing has ended it
        conn.close()
        assert main(["adapt", "--dataset", "digits", "--json", "--log-to", url, "--api-key",
                     key, "--resume", str(ckpt)]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["run_id"] == run_id and out["steps"] == STEPS
        conn = warehouse.connect(root)
        assert conn.execute("SELECT status FROM runs").fetchall() == [("completed",)]
        # the resume said through the service that the run went on (the run read `running`
        # meanwhile, under the server's writer, not the end it had before)
        assert conn.execute("SELECT count(*) FROM raw_run_ends WHERE status = 'resumed' AND "
                            "writer_id IS NOT NULL").fetchone() == (1,)
        assert [s for (s,) in conn.execute(
            "SELECT DISTINCT step FROM steps ORDER BY 1").fetchall()] == list(range(STEPS))
        # the steps and events logged between the checkpoint and the kill, not logged again
        assert conn.execute("SELECT count(*) FROM (SELECT step, loss, grad_norm, count(*) "
                            "AS n FROM steps GROUP BY ALL) WHERE n > 1").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM (SELECT step, kind, name, detail::VARCHAR, "
                            "count(*) AS n FROM events GROUP BY ALL) WHERE n > 1"
                            ).fetchone() == (0,)
        conn.close()
        # resumed once more: the run has ended
        assert main(["adapt", "--dataset", "digits", "--log-to", url, "--api-key", key,
                     "--resume", str(ckpt)]) == 2
        assert capsys.readouterr().err == (
            f"error: run {run_id} already completed at step {STEPS}; --fork {ckpt} --steps N "
            f"branches a new run from its final state\n")
        # a service that never held the run: refused before anything trains
        other = Settings(warehouse=tmp_path / "other")
        other_key = create_key(other.key_path(), "write")
        with serve_in_thread(create_app(other)) as elsewhere:
            assert main(["adapt", "--dataset", "digits", "--log-to", str(elsewhere.base_url),
                         "--api-key", other_key, "--resume", str(ckpt)]) == 2
            err = capsys.readouterr().err
            assert err.startswith(f"error: run {run_id} is not in the warehouse of the "
                                  "service at") and err.count("\n") == 1
