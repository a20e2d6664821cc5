"""Starting and ending a run: the one path every entry point logs a run through.

`train`, `sweep`, `adapt` (and the service) start a run with `start_run(trainer)` and end
it through the `LoggedRun` it returns, so every run gets the same rows, written the same
way: its problem with the problem's meta-features, a run start with the device the trainer
really runs on, the IR at the start, the final results, the final IR and a run end. Used as
a context manager, a `LoggedRun` ends the run `failed` when an exception leaves the block
and `interrupted` when Ctrl-C (KeyboardInterrupt) or SystemExit does, before either goes on.

    with start_run(trainer) as run:
        ...train...
        run.finish("completed", trainer.final_metrics(), epoch)
"""

from __future__ import annotations

import platform
import time
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from aicf_induct import __version__
from aicf_induct.ir.canonical import to_json
from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.patterns import patterns
from aicf_induct.problems.features_cache import split_key
from aicf_induct.problems.problem import Problem
from aicf_induct.records import (
    RESUMED,
    ProblemRecord,
    Recorder,
    ResultRecord,
    RunEndRecord,
    RunStartRecord,
    SnapshotRecord,
    keeps_problems,
)

if TYPE_CHECKING:
    from aicf_induct.runtime.backend import Backend


class _Seeded(Protocol):
    @property
    def seed(self) -> int: ...


class RunOwner(Protocol):
    """What a logged run reads of the trainer whose run it logs (`runtime.trainer.Trainer`;
    a protocol, so that this module, which the trainer imports, need not import it)."""

    @property
    def problem(self) -> Problem: ...
    @property
    def graph(self) -> Graph: ...
    @property
    def recorder(self) -> Recorder: ...
    @property
    def run_id(self) -> str: ...
    @property
    def step_count(self) -> int: ...
    @property
    def trajectory(self) -> int: ...
    @property
    def origin(self) -> str: ...
    @property
    def parent_run_id(self) -> str | None: ...
    @property
    def config(self) -> _Seeded: ...
    @property
    def backend(self) -> Backend: ...
    def run_config(self) -> dict[str, Any]: ...

NOT_STARTED = "none (failed before training)"  # device label of a run that never trained

# (problem_id, training split's digest) -> meta-features (seed 0's split's:
# `problems.meta_features`) and their split's seed, once per process and split, kept under
# the key of the problem asked about and of the split featurised, so that every seed's split
# of one table extracts them once (and `features_cache` keeps them on disk for the next
# process). The id alone is not enough: it is whatever a hand-made
# problem says, and two such problems may share one.
_FEATURES: dict[tuple[str, str], tuple[dict[str, float], int]] = {}


def library_versions() -> dict[str, str]:
    import scipy
    import sklearn

    return {"aicf_induct": __version__, "numpy": np.__version__, "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__, "python": platform.python_version()}


def snapshot_record(run_id: str, step: int, reason: str, graph: Graph) -> SnapshotRecord:
    return SnapshotRecord(run_id=run_id, step=step, reason=reason, ir_json=to_json(graph),
                          fingerprint=fingerprint(graph), param_count=graph.param_count(),
                          patterns=patterns(graph))


def problem_record(problem: Problem, recorder: Recorder) -> ProblemRecord:
    """The problem with its meta-features (`problem_meta_features`) and the seed of the
    split they are of, only for a recorder that keeps problem rows (they take a second or
    two on a large table)."""
    if not keeps_problems(recorder):
        return problem.record()
    features, split_seed = problem_meta_features_with_seed(problem)
    return problem.record(features, features_split_seed=split_seed)


def problem_meta_features(problem: Problem) -> dict[str, float]:
    """Seed 0's split's meta-features whatever split `problem` trains on
    (`problems.meta_features`), computed once per process per problem and split."""
    return problem_meta_features_with_seed(problem)[0]


def remember_features(problem: Problem, features: Mapping[str, float],
                      split_seed: int) -> None:
    """`problem`'s meta-features (`problems.meta_features`, of the split of `split_seed`)
    computed elsewhere (another process), kept for `problem_record`, which then computes
    nothing."""
    _FEATURES[split_key(problem)] = (dict(features), split_seed)


def problem_meta_features_with_seed(problem: Problem) -> tuple[dict[str, float], int]:
    """`problem_meta_features` and the seed of the split they are of."""
    key = split_key(problem)
    found = _FEATURES.get(key)
    if found is None:
        from aicf_induct.problems.features_cache import cached_features
        from aicf_induct.problems.meta_features import featurised_split

        base = featurised_split(problem)  # loading a table costs less than featurising it
        base_key = key if base is problem else split_key(base)
        found = _FEATURES.get(base_key)
        if found is None:
            found = _FEATURES[base_key] = (cached_features(base, base_key), base.split_seed)
        _FEATURES[key] = found
    return dict(found[0]), found[1]


def run_start_record(run_id: str, problem_id: str, problem_name: str, task: str,
                     config: dict[str, Any], seed: int, device: str, origin: str,
                     parent_run_id: str | None = None) -> RunStartRecord:
    return RunStartRecord(run_id=run_id, problem_id=problem_id, problem_name=problem_name,
                          task=task, config=config, seed=seed, device=device,
                          library_versions=library_versions(), origin=origin,
                          parent_run_id=parent_run_id)


def end_status(err: BaseException) -> str:
    """`failed` for an error, `interrupted` for Ctrl-C, SystemExit and the like."""
    return "failed" if isinstance(err, Exception) else "interrupted"


class LoggedRun:
    """A started run of `trainer` (its recorder, run id and step count), to end once."""

    def __init__(self, trainer: RunOwner) -> None:
        self.trainer = trainer
        self.t0 = time.perf_counter()
        self.end: RunEndRecord | None = None

    @property
    def recorder(self) -> Recorder:
        return self.trainer.recorder

    @property
    def run_id(self) -> str:
        return self.trainer.run_id

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def results(self, epoch: int, metrics: Mapping[str, float], final: bool = False,
                step: int | None = None) -> None:
        """Metrics keyed "<split>_<metric>" (e.g. "val_loss") at the current step (or
        `step`: an evaluation logged after it was made, a control arm's)."""
        at = self.trainer.step_count if step is None else step
        for key, value in metrics.items():
            split, metric = key.split("_", 1)
            self.recorder.result(ResultRecord(self.run_id, at, epoch, split, metric,
                                              float(value), final, self.trainer.trajectory))

    def finish(self, status: str, metrics: Mapping[str, float], epoch: int,
               error: str | None = None) -> float:
        """The final results (of the model the run reports), its IR and the run's end;
        returns the run's wall time."""
        self.results(epoch, metrics, final=True)
        tr = self.trainer
        self.recorder.snapshot(snapshot_record(self.run_id, tr.step_count, "final", tr.graph))
        return self._end(status, error)

    def went_on(self) -> None:
        """Say that this resumed run goes on, in this process: until its next end the
        warehouse reads it `running` while this process's writer lives (not by the end it
        had before: `interrupted`)."""
        self.recorder.run_end(RunEndRecord(self.run_id, RESUMED, self.trainer.step_count, 0.0))

    def abort(self, err: BaseException) -> None:
        """End the run for an exception or interrupt that stops it (once)."""
        if self.end is None:
            self._end(end_status(err), f"{type(err).__name__}: {err}".rstrip(": "))

    def _end(self, status: str, error: str | None) -> float:
        wall = self.elapsed()
        self.end = RunEndRecord(self.run_id, status, self.trainer.step_count, wall, error)
        self.recorder.run_end(self.end)
        return wall

    def __enter__(self) -> LoggedRun:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> None:
        if err is not None:
            self.abort(err)
        elif self.end is None:
            self._end("failed", "the run stopped without its final results")


def start_run(trainer: RunOwner) -> LoggedRun:
    """Log the start of `trainer`'s run: problem (with meta-features), run start (config,
    seed, the trainer's device, library versions, origin, parent) and the IR at start."""
    rec, p = trainer.recorder, trainer.problem
    rec.problem(problem_record(p, rec))
    rec.run_start(run_start_record(
        trainer.run_id, p.problem_id, p.name, p.task, trainer.run_config(), trainer.config.seed,
        trainer.backend.description, trainer.origin, trainer.parent_run_id))
    rec.snapshot(snapshot_record(trainer.run_id, trainer.step_count, "start", trainer.graph))
    return LoggedRun(trainer)


def resume_run(trainer: RunOwner) -> LoggedRun:
    """A run started earlier (its start is in the log), going on in this process."""
    return LoggedRun(trainer)


def log_unstarted(recorder: Recorder, run_id: str, problem_id: str, problem_name: str,
                  task: str, config: dict[str, Any], seed: int, origin: str, error: str,
                  wall: float = 0.0) -> None:
    """A run that failed before it had a trainer (its problem did not load, its model could
    not be built): a start with no device and a `failed` end, so it is counted."""
    recorder.run_start(run_start_record(run_id, problem_id, problem_name, task, config, seed,
                                        NOT_STARTED, origin))
    recorder.run_end(RunEndRecord(run_id, "failed", 0, wall, error))
