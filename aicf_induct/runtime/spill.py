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
from pathlib import Path
from typing import TextIO

from aicf_induct.errors import AicfError
from aicf_induct.records import BaseRecorder, ProblemRecord, Record, Recorder, send
from aicf_induct.runtime.remote_recorder import RemoteRecorder


def spill_root(root: Path, run_id: str) -> Path:
    """Where a run the service took in part is logged whole: `root`, unless `root` holds the
    run already. Then it is the warehouse the service logs into (the same folder given to
    `serve` and to the runtime, as both default to ./aicf_warehouse), which took part of
    the run: the whole run written there too would log it twice. It goes to a warehouse
    beside it instead, `ROOT-spill-RUN8`, from which `push` sends the service the rest."""
    import warehouse

    if not (root / "runs").is_dir():
        return root
    try:
        held = warehouse.with_retry(root, lambda c: c.execute(
            "SELECT count(*) FROM raw_runs WHERE run_id = ?", [run_id]).fetchone())
    except AicfError:
        return root  # not a warehouse it can read: opening it says why
    return root if not held or not held[0] else root.with_name(f"{root.name}-spill-{run_id[:8]}")


class SpillRecorder(BaseRecorder):
    def __init__(self, remote: RemoteRecorder, local: Callable[[str], tuple[Recorder, str]],
                 stream: TextIO | None = None) -> None:
        self.remote = remote
        remote.report_losses = False  # what it did not deliver is logged locally: said here
        # opens the local warehouse's recorder for the run (its id): (recorder, where)
        self.local = local
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
        run = next((r.run_id for r in self.kept if not isinstance(r, ProblemRecord)), "RUN")
        recorder, where = self.local(run)
        try:
            for rec in self.kept:
                send(recorder, rec)
        finally:
            recorder.close()
        self.spilled_to = where
        why = f" ({self.remote.stats.errors[-1]})" if self.remote.stats.errors else ""
        print(f"note: the service at {self.remote.url} took {sent} of the run's "
              f"{len(self.kept)} records{why}; the whole run is logged locally to {where} "
              f"instead (`aicf-induct push {run} --to {self.remote.url} --warehouse {where}` "
              f"sends the service the rest)", file=self.stream, flush=True)
