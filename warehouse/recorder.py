"""The runtime's `Recorder`, writing into the warehouse.

Logs run start, every IR snapshot (start, each rewrite/rollback, final) with its patterns,
every step, events, results and the run's end. Everything goes through one `Writer`: the
training thread only appends to memory. Opening one checks first that the warehouse can be
written, so a run that could not log fails before it trains, naming the warehouse.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from aicf_induct.records import (
    BaseRecorder,
    EventRecord,
    ProblemRecord,
    ResultRecord,
    RunEndRecord,
    RunStartRecord,
    SnapshotRecord,
    StepBatch,
    StepRecord,
    utc_now,
)
from warehouse.errors import WarehouseError
from warehouse.layout import TMP_PREFIX, TMP_SUFFIX, ensure_dir
from warehouse.writer import Writer

# step rows of GPU epochs gathered before one append: casting a batch to the table's types
# costs about 0.4 ms however small it is, more than a GPU epoch's own host work
STEP_BATCH_ROWS = 8192


def _json(d: dict[str, Any]) -> str:
    # sort_keys: equal dicts give equal strings, so SQL can group by them
    return json.dumps(d, sort_keys=True, default=str)


def _utc(t: datetime) -> datetime:
    # naive datetimes are taken as UTC (the records' default factory is tz-aware)
    return t if t.tzinfo is not None else t.replace(tzinfo=utc_now().tzinfo)


def check_writable(root: str | Path) -> Path:
    """Make sure rows can be written under `root` (creating it if need be): a directory in
    which a file can be created. Raises one `WarehouseError` naming `root` otherwise."""
    path = Path(root)
    if path.exists() and not path.is_dir():
        raise WarehouseError(f"warehouse {path} is not a directory")
    probe = path / f"{TMP_PREFIX}probe-{uuid.uuid4().hex}{TMP_SUFFIX}"
    try:
        ensure_dir(path)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        probe.unlink()
    except OSError as err:
        raise WarehouseError(f"warehouse {path} is not writable: "
                             f"{err.strerror or err}") from None
    return path


class WarehouseRecorder(BaseRecorder):
    """Implements `aicf_induct.records.Recorder` on top of a `Writer`: each method appends
    rows in memory, the writer's thread writes them every `flush_interval_s` seconds (sooner
    once a table holds `max_rows`). Close it when done: what is buffered is written then."""

    def __init__(self, root: str | Path, flush_interval_s: float = 1.0,
                 max_rows: int = 100_000) -> None:
        check_writable(root)
        self.writer = Writer(root, flush_interval_s=flush_interval_s, max_rows=max_rows)
        self._problems: set[str] = set()  # problems already logged by this writer
        self._fingerprints: set[str] = set()  # patterns already logged by this writer
        self._steps: list[StepBatch] = []  # epochs' step rows not yet handed to the writer
        self._steps_n = 0

    @property
    def root(self) -> Path:
        return self.writer.root

    def __repr__(self) -> str:
        return f"WarehouseRecorder({str(self.root)!r})"

    def problem(self, rec: ProblemRecord) -> None:
        """The problem's row and its meta-features, once per problem and writer (every run
        of a sweep names the same problem)."""
        if rec.problem_id in self._problems:
            return
        self._problems.add(rec.problem_id)
        now = utc_now()
        self.writer.append_row("problems", (
            rec.problem_id, rec.name, rec.source, rec.task, rec.n_rows, rec.n_features,
            rec.n_classes, rec.target, now))
        for name, value in rec.features.items():
            self.writer.append_row("problem_features", (
                rec.problem_id, name, float(value), rec.features_split_seed, now))

    def run_start(self, rec: RunStartRecord) -> None:
        """The run's row: config, seed, device, library versions, origin, parent, and this
        writer's id (what tells an abandoned run from a running one)."""
        self.writer.append_row("runs", (
            rec.run_id, rec.problem_id, rec.problem_name, rec.task, _json(rec.config),
            rec.seed, rec.device, _json(rec.library_versions), rec.origin, rec.parent_run_id,
            _utc(rec.started_at), self.writer.writer_id))

    def snapshot(self, rec: SnapshotRecord) -> None:
        """An IR snapshot; the structure's patterns once per fingerprint and writer."""
        self.writer.append_row("ir_snapshots", (
            rec.run_id, rec.step, rec.reason, rec.fingerprint, rec.param_count, rec.ir_json,
            utc_now()))
        if rec.fingerprint not in self._fingerprints:
            self._fingerprints.add(rec.fingerprint)
            for name, value in rec.patterns.items():
                self.writer.append_row("ir_patterns", (rec.fingerprint, name, float(value)))

    def step(self, rec: StepRecord) -> None:
        """One training step's row (the hot path: one tuple append, no I/O)."""
        self.writer.append_row("steps", (
            rec.run_id, rec.step, rec.epoch, rec.loss, rec.grad_norm, rec.update_ratio, rec.lr,
            rec.step_time_s, rec.batch_size, rec.trajectory))

    def step_batch(self, batch: StepBatch) -> None:
        # an epoch of a GPU run as columns, gathered: handed over with the run's end, or
        # when STEP_BATCH_ROWS rows wait, in one append
        self._steps.append(batch)
        self._steps_n += len(batch)
        if self._steps_n >= STEP_BATCH_ROWS:
            self._send_steps()

    def _send_steps(self) -> None:
        pending, self._steps, self._steps_n = self._steps, [], 0
        if not pending:
            return
        counts = [len(b) for b in pending]

        def each(values: list[Any]) -> np.ndarray:
            return np.repeat(np.asarray(values), counts)

        def joined(column: str) -> np.ndarray:
            return np.concatenate([getattr(b, column) for b in pending])

        self.writer.append_batch("steps", {
            "run_id": pa.array(np.repeat(np.array([b.run_id for b in pending], dtype=object),
                                         counts), pa.string()),
            "step": joined("step"), "epoch": each([b.epoch for b in pending]),
            "loss": joined("loss"), "grad_norm": joined("grad_norm"),
            "update_ratio": joined("update_ratio"), "lr": joined("lr"),
            "step_time_s": each([float(b.step_time_s) for b in pending]),
            "batch_size": joined("batch_size"),
            "trajectory": np.zeros(sum(counts), np.int64)})  # no rollback in a GPU epoch

    def event(self, rec: EventRecord) -> None:
        """An adaptive run's event: its detail and metrics as sorted-key JSON."""
        self.writer.append_row("events", (
            rec.run_id, rec.step, rec.kind, rec.name, _json(rec.detail),
            _json(rec.metrics_before), _json(rec.metrics_after), _utc(rec.at)))

    def result(self, rec: ResultRecord) -> None:
        """One metric of one split at a step (per epoch, or final)."""
        self.writer.append_row("results", (
            rec.run_id, rec.step, rec.epoch, rec.split, rec.metric, rec.value, rec.final,
            rec.trajectory))

    def run_end(self, rec: RunEndRecord) -> None:
        """The run's end, its gathered steps handed over first (a run's steps are on disk
        no later than its end), and a flush asked for: a finished run shows up promptly."""
        self._send_steps()
        self.writer.append_row("run_ends", (
            rec.run_id, rec.status, rec.steps, rec.wall_time_s, rec.error, _utc(rec.ended_at),
            self.writer.writer_id))
        self.writer.request_flush()

    def flush(self) -> None:
        """Write every row given so far now (a checkpoint does this first, so that the log
        is never behind it)."""
        self._send_steps()
        self.writer.flush()

    def close(self) -> None:
        """Write what is buffered and stop the writer; the recorder takes no more rows."""
        self._send_steps()
        self.writer.close()
