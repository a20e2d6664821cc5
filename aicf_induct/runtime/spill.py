"""A remote log that cannot lose a run: `SpillRecorder` sends every record through the
service's recorder (`RemoteRecorder`) and keeps a copy; if, when the run closes, the service
has not taken every record (it went down, or refused a batch), the whole run is written to a
local warehouse instead and that is said once, naming the command that sends the service
the rest (`aicf-induct push RUN --to URL`, `runtime/push.py`). The copy costs memory (one
record per step: ~100 bytes each), which is why only a run, not a sweep, logs through it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from aicf_induct.records import BaseRecorder, ProblemRecord, Record, Recorder, send
from aicf_induct.runtime.remote_recorder import RemoteRecorder


class SpillRecorder(BaseRecorder):
    def __init__(self, remote: RemoteRecorder, local: Callable[[], tuple[Recorder, str]],
                 stream: TextIO | None = None) -> None:
        self.remote = remote
        remote.report_losses = False  # what it did not deliver is logged locally: said here
        self.local = local  # opens the local warehouse's recorder: (recorder, where)
        self.stream = stream or sys.stderr
        self.kept: list[Record] = []
        self.spilled_to: str | None = None  # the local warehouse, once the run went there

    def record(self, rec: Record) -> None:
        self.kept.append(rec)
        send(self.remote, rec)

    def flush(self) -> None:
        self.remote.flush()

    def close(self) -> None:
        self.remote.close()
        sent = self.remote.stats.sent_records
        if sent >= len(self.kept) or self.spilled_to is not None:
            return
        recorder, where = self.local()
        try:
            for rec in self.kept:
                send(recorder, rec)
        finally:
            recorder.close()
        self.spilled_to = where
        why = f" ({self.remote.stats.errors[-1]})" if self.remote.stats.errors else ""
        run = next((r.run_id for r in self.kept if not isinstance(r, ProblemRecord)), "RUN")
        print(f"note: the service at {self.remote.url} took {sent} of the run's "
              f"{len(self.kept)} records{why}; the whole run is logged locally to {where} "
              f"instead (`aicf-induct push {run} --to {self.remote.url} --warehouse {where}` "
              f"sends the service the rest)", file=self.stream, flush=True)
