"""One sweep run, as a worker process executes it: load, build, train under a time budget,
log into the warehouse through the process's own recorder, never raise.

Local workers and Ray tasks call the same `run_task`. Each process opens one
`WarehouseRecorder` (one writer per process, no lock) and flushes it after every run, so a
run's end is on disk before the parent counts it. Whatever goes wrong inside a run ends up
in the warehouse as a run end with status `failed` (or `timeout`) and its error. A local
worker stopped by SIGTERM (the parent's Ctrl-C, or the parent gone) logs its run's end as
`interrupted`, flushes and exits.
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NoReturn

from aicf_induct.errors import AicfError, ConfigError
from aicf_induct.induction.space import Candidate
from aicf_induct.problems import load_problem
from aicf_induct.problems.problem import Problem
from aicf_induct.records import FanoutRecorder, Recorder, RunEndRecord, RunStartRecord
from aicf_induct.runtime.runs import log_unstarted
from aicf_induct.runtime.trainer import TrainConfig, Trainer

ORIGIN = "sweep"
# what every run worker imports, once in the fork server rather than in each worker: a
# spawned worker spent about 3 s importing scikit-learn, pandas and pyarrow before its first
# run. The modules that import scikit-learn when a problem is prepared or featurised are
# named: importing the layers does not load them (so that `--help` does not).
PRELOAD = [__name__, "warehouse", "aicf_induct.problems.transformer",
           "aicf_induct.problems.features.landmarks"]
ORPHAN_POLL_S = 0.1  # how often a process not started by multiprocessing checks its parent
STOP_GRACE_S = 10.0  # an orphan that has not exited this long after its SIGTERM is killed


@dataclass(frozen=True)
class Task:
    """One (problem, candidate, seed) triple of a sweep, with what a worker needs to run it.
    A subclass runs other work through the sweep's machinery (`adaptive_corpus.AdaptiveJob`:
    its own `origin`, `extra_config` and `fit`)."""

    origin: ClassVar[str] = ORIGIN

    problem: str  # name for load_problem
    problem_id: str  # content id the parent saw; the triple's identity
    candidate: Candidate
    seed: int
    train: TrainConfig  # epochs, patience, schedule, ...; the candidate's recipe overrides
    budget_s: float  # wall-clock budget of the run; 0: none
    root: str  # warehouse directory, or the service's URL
    sweep: dict[str, Any] = field(default_factory=dict)  # sweep_id, protocol
    api_key: str | None = field(default=None, repr=False)  # write key, with a URL root

    @property
    def triple(self) -> tuple[str, str, int]:
        return (self.problem_id, self.candidate.key, self.seed)

    def config(self) -> TrainConfig:
        r = self.candidate.recipe
        return dataclasses.replace(self.train, optimizer=r.optimizer, lr=r.lr,
                                   weight_decay=r.weight_decay, batch_size=r.batch_size,
                                   seed=self.seed, max_wall_s=self.budget_s)

    def run_config(self) -> dict[str, Any]:
        """What goes under the run config's "sweep" key: the triple and the sweep."""
        return {**self.sweep, "problem": self.problem, "problem_id": self.problem_id,
                "candidate": self.candidate.key,
                "structure_key": self.candidate.structure_key, "seed": self.seed}

    def extra_config(self) -> dict[str, Any]:
        """What the run's config carries besides its training settings."""
        return run_extra(self)

    def fit(self, problem: Problem, log: Recorder, run_id: str) -> None:
        """Train the run on its loaded problem, logging through `log` as `run_id`."""
        task_trainer(self, problem, log, run_id).fit()


@dataclass(frozen=True)
class Outcome:
    triple: tuple[str, str, int]
    status: str  # completed | early_stopped | failed | timeout | interrupted
    run_id: str
    wall_s: float
    error: str | None = None


class RunLog(FanoutRecorder):
    """Forwards to the process's recorder; remembers whether the run started and ended."""

    def __init__(self, inner: Recorder) -> None:
        super().__init__(inner)
        self.started = self.ended = False
        self.end: RunEndRecord | None = None

    def run_start(self, rec: RunStartRecord) -> None:
        self.started = True
        super().run_start(rec)

    def run_end(self, rec: RunEndRecord) -> None:
        self.ended, self.end = True, rec
        super().run_end(rec)

    def close(self) -> None:  # the process's recorder outlives the run
        pass


def is_remote(root: str | Path) -> bool:
    """Whether a sweep's `root` is the service's URL rather than a warehouse directory."""
    return str(root).startswith(("http://", "https://"))


def open_recorder(root: str | Path, api_key: str | None = None) -> Any:
    """The recorder a sweep process logs with: the warehouse's, or the service's at a URL."""
    if not is_remote(root):
        import warehouse

        return warehouse.open_recorder(root)
    from aicf_induct.runtime.remote_recorder import RemoteLogError, RemoteRecorder

    if not api_key:
        raise ConfigError(f"logging through {root} needs a write key")
    try:
        return RemoteRecorder(str(root), api_key)
    except RemoteLogError as err:
        raise ConfigError(str(err)) from None


# -- per-process state ---------------------------------------------------------------------------
_RECORDERS: dict[str, Any] = {}


def process_recorder(root: str, api_key: str | None = None) -> Any:
    """This process's recorder for `root` (a WarehouseRecorder, or a RemoteRecorder for the
    service's URL), opened once and closed at exit."""
    rec = _RECORDERS.get(root)
    if rec is None:
        import multiprocessing.util

        rec = _RECORDERS[root] = open_recorder(root, api_key)
        # multiprocessing children skip atexit; their finalizers still run
        multiprocessing.util.Finalize(rec, functools.partial(_close_at_exit, rec),
                                      exitpriority=10)
    return rec


def _close_at_exit(rec: Any) -> None:
    """Close a worker's recorder as the worker exits; rows it cannot write (a full disk) are
    one line on stderr, not the traceback multiprocessing prints for a finalizer's error."""
    try:
        rec.close()
    except AicfError as err:
        print(f"error: {err}", file=sys.stderr)


def close_process_recorders() -> None:
    """Close this process's recorders (tests and in-process callers; workers close at exit)."""
    while _RECORDERS:
        _RECORDERS.popitem()[1].close()


def stop_processes(procs: list[Any], grace_s: float) -> None:
    """SIGTERM each process (a sweep's worker logs its run as interrupted and exits), wait
    up to `grace_s` for all of them, then kill and reap what is left."""
    for proc in procs:
        proc.terminate()  # nothing for one already gone
    deadline = time.monotonic() + grace_s
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.kill()
            proc.join()


def _limit_threads() -> None:
    # W workers on W cores: BLAS threads would oversubscribe them (Ray sets this itself)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:  # pragma: no cover - scikit-learn brings threadpoolctl
        pass


@functools.lru_cache(maxsize=4)
def _problem(name: str, seed: int) -> Problem:
    return load_problem(name, seed=seed)


_IN_RUN = False  # a local worker is inside run_task (SIGTERM interrupts the run)
_FLUSHING = False  # ... committing the run's rows: an interrupt now would lose them
_DEFERRED = False  # a SIGTERM came while flushing: exit once the rows are on disk


def _on_sigterm(signum: int, frame: Any) -> None:
    """The parent stops this worker (Ctrl-C on the sweep) or the parent is gone: interrupt
    the run, which logs its end as `interrupted`; idle, exit (finalizers flush)."""
    global _IN_RUN, _DEFERRED
    # Once stopping, further SIGTERMs are ignored: when the first worker exits, the pool's
    # manager thread takes the pool for broken and terminates every other worker again,
    # which must not kill one still logging its run's end (the parent SIGKILLs a worker
    # that outlives STOP_GRACE_S, and an orphan exits by itself after it)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if not _IN_RUN:
        raise SystemExit(0)  # idle, in the pool's loop: the process exits through its finalizers
    _IN_RUN = False
    if _FLUSHING:
        _DEFERRED = True
        return
    raise KeyboardInterrupt


def _flush(rec: Any) -> None:
    global _FLUSHING
    _FLUSHING = True
    try:
        rec.flush()
    finally:
        _FLUSHING = False


def watch_parent(parent_pid: int, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM this process as soon as its parent is gone (killed, so it could not stop its
    children), and end it `grace_s` later if it has not exited: an orphan stops as a stopped
    sweep does, its runs logged `interrupted`, instead of finishing runs that a restarted
    sweep runs again. A multiprocessing child waits on its parent's sentinel (a fork
    server's child is the server's, not the parent's: its parent pid says nothing); any
    other process polls its parent pid, `parent_pid`."""
    parent = multiprocessing.parent_process()

    def watch() -> None:
        if parent is not None:
            parent.join()  # returns once the parent's end of the sentinel pipe is closed
        else:
            while os.getppid() == parent_pid:
                time.sleep(ORPHAN_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)  # log the run as interrupted, then exit
        time.sleep(grace_s)
        os._exit(70)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of `workers` run workers, forked from a server process that imported `PRELOAD`
    once (no fork of this process and its writer thread). Each worker takes this process's
    environment as it is now: the server kept the one it started with."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)  # no effect once this process's server runs
    return ProcessPoolExecutor(workers, mp_context=ctx, initializer=init_local_worker,
                               initargs=(os.getpid(), dict(os.environ)))


def init_local_worker(parent_pid: int, environ: Mapping[str, str] | None = None) -> None:
    """Pool initializer: take the parent's `environ`, and stop (as on SIGTERM) as soon as the
    parent is gone (`watch_parent`)."""
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    watch_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, _on_sigterm)
    _limit_threads()


def run_local_task(task: Task) -> Outcome:
    """`run_task` in a pool worker: an interrupted worker logs its run's end and exits (the
    pool must not hand it another task)."""
    global _IN_RUN
    _IN_RUN = True
    try:
        out = run_task(task)
    except KeyboardInterrupt:
        _exit_now()
    finally:
        _IN_RUN = False
    if _DEFERRED:
        _exit_now()
    return out


def _exit_now() -> NoReturn:
    """Leave the pool's loop at once, running what a normal exit of a multiprocessing child
    runs: its finalizers close the recorder (flush, lease) and free semaphores (tqdm's), which
    the resource tracker would otherwise report as leaked."""
    import multiprocessing.util

    multiprocessing.util._exit_function()  # type: ignore[attr-defined]
    os._exit(0)


# -- one run -------------------------------------------------------------------------------------
def run_task(task: Task) -> Outcome:
    """Train one triple and log it; every failure becomes a logged `failed` run."""
    t0 = time.perf_counter()
    rec = process_recorder(task.root, task.api_key)
    log = RunLog(rec)
    run_id = uuid.uuid4().hex
    kind = ""  # the problem's task, once it is loaded
    try:
        problem = _problem(task.problem, task.seed)
        kind = problem.task
        task.fit(problem, log, run_id)
    except Exception as err:
        log_failure(log, task, f"{type(err).__name__}: {err}", run_id, kind,
                    time.perf_counter() - t0)
    except KeyboardInterrupt:
        if log.started and not log.ended:  # the trainer did not log the end itself
            log.run_end(RunEndRecord(run_id, "interrupted", 0, time.perf_counter() - t0))
        raise
    finally:
        _flush(rec)  # the run's end is on disk before the parent counts it
    end = log.end
    assert end is not None
    return Outcome(task.triple, end.status, run_id, time.perf_counter() - t0, end.error)


def tuning_store(root: str) -> Any:
    """The GPU autotuner's store: the warehouse's (none for a sweep through the service)."""
    if is_remote(root):
        return None
    from warehouse.tuning_store import WarehouseTuningStore

    return WarehouseTuningStore(root)


def task_trainer(task: Task, problem: Problem, log: Recorder, run_id: str) -> Trainer:
    """The trainer of a triple on its loaded problem (refused if the problem's content changed
    since the sweep planned it), logging as a sweep run. One tuning store per warehouse, so
    one autotuner per process (runtime.backend caches the backend by it): a shape's step body
    is timed once, its choice shared by every run."""
    if problem.problem_id != task.problem_id:
        raise RuntimeError(f"problem '{task.problem}' changed: id {problem.problem_id}, "
                           f"the sweep planned {task.problem_id}")
    graph = task.candidate.graph(problem.n_features, problem.n_outputs)
    return Trainer(problem, graph, task.config(), recorder=log, origin=ORIGIN, run_id=run_id,
                   extra_config=run_extra(task), tuning=tuning_store(task.root))


def run_extra(task: Task) -> dict[str, Any]:
    return {"model": task.candidate.spec.to_string(), "sweep": task.run_config()}


def _problem_id(task: Task) -> str:
    """The id of a task planned by its problem's name alone; "" when it does not load."""
    try:
        return _problem(task.problem, task.seed).problem_id
    except Exception:  # the failure being logged may be this one
        return ""


def log_failure(log: RunLog, task: Task, error: str, run_id: str | None = None,
                kind: str = "", wall: float = 0.0) -> str:
    """Make sure a failed run has a start and an end in the warehouse; returns its run id."""
    run_id = run_id or uuid.uuid4().hex
    if not log.started:  # failed before the trainer logged its start
        config = {"train": dataclasses.asdict(task.train), **task.extra_config()}
        log_unstarted(log, run_id, task.problem_id or _problem_id(task), task.problem, kind,
                      config, task.seed, task.origin, error, wall)
    elif not log.ended:
        log.run_end(RunEndRecord(run_id, "failed", 0, wall, error))
    return run_id
