"""What a resumed run must not log twice.

A run killed after its last checkpoint has logged the steps (and events, results, IR
snapshots) between that checkpoint and the kill; resumed, it replays them bit-exactly. The
warehouse's parts are append-only, so the resumed run leaves those records out instead:
`LogCounter` counts every record of the run by kind (the checkpoint keeps the counts), and
on resume drops, of each kind, as many records as the warehouse holds past the checkpoint's
count (the replay's first ones: the same records, in the same order), less the `checkpoint
resume` events of earlier resumes from that checkpoint or a later one (no replay logs them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aicf_induct.records import (
    BaseRecorder,
    EventRecord,
    Record,
    Recorder,
    ResultRecord,
    SnapshotRecord,
    StepRecord,
    keeps_problems,
    send,
)

# record type -> its kind: the warehouse table it lands in (a row per record)
KINDS: dict[type[Any], str] = {StepRecord: "steps", EventRecord: "events",
                                  ResultRecord: "results", SnapshotRecord: "ir_snapshots"}


class LogCounter(BaseRecorder):
    """Passes every record on to `inner`, counting them by kind; `skip` drops the next so
    many records of a kind (already logged by the run before it was resumed)."""

    def __init__(self, inner: Recorder, counts: Mapping[str, int] | None = None) -> None:
        self.inner = inner
        self.keeps_problems = keeps_problems(inner)
        self.counts = {k: int((counts or {}).get(k, 0)) for k in KINDS.values()}
        self.skip = dict.fromkeys(KINDS.values(), 0)
        self.skipped = 0  # records left out so far

    def past(self, logged: Mapping[str, int], resumes: int = 0) -> dict[str, int]:
        """What the log holds (`logged`: rows per kind) past the counts now: the records
        to leave out (`skip`). `resumes`: the log's `checkpoint resume` events among them
        (earlier resumes', which the replay does not log again)."""
        skip = {k: max(0, int(logged.get(k, 0)) - n) for k, n in self.counts.items()}
        skip["events"] = max(0, skip["events"] - resumes)
        return skip

    def record(self, rec: Record) -> None:
        kind = KINDS.get(type(rec))
        if kind is not None:
            self.counts[kind] += 1
            if self.skip[kind]:
                self.skip[kind] -= 1
                self.skipped += 1
                return
        send(self.inner, rec)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()
