"""`SpillRecorder` with the service down: the run is logged locally and that is said once,
in one line naming where (not "dropped" records: nothing is lost)."""

from __future__ import annotations

import io

from aicf_induct.records import MemoryRecorder, RunEndRecord
from aicf_induct.runtime.remote_recorder import RemoteRecorder
from aicf_induct.runtime.spill import SpillRecorder


def test_a_service_that_is_down_is_one_line_naming_the_local_warehouse() -> None:
    say, local = io.StringIO(), MemoryRecorder()
    remote = RemoteRecorder("http://127.0.0.1:1", "key", close_timeout_s=0.2, backoff_s=0.01,
                            timeout_s=0.5, stream=say)
    rec = SpillRecorder(remote, lambda: (local, "/tmp/local_wh"), stream=say)
    rec.run_end(RunEndRecord("r1", "completed", 3, 0.1, None))
    rec.close()
    lines = say.getvalue().splitlines()
    assert lines[0].startswith("remote log: cannot reach http://127.0.0.1:1")  # at the start
    assert lines[1:] == ["note: the service at http://127.0.0.1:1 took 0 of the run's 1 "
                         "records (server unreachable at close); the whole run is logged "
                         "locally to /tmp/local_wh instead (`aicf-induct push r1 --to "
                         "http://127.0.0.1:1 --warehouse /tmp/local_wh` sends the service the "
                         "rest)"]
    assert rec.spilled_to == "/tmp/local_wh" and len(local.run_ends) == 1
