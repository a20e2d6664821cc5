"""The GPU sweep engine: many (problem, candidate, seed) runs trained at once in this
process, interleaved on one GPU (`runtime.many`).

It serves the sweep (`sweep.dispatch`) through the same small interface as the process pool
and Ray (`sweep_engines.Engine`): `submit` starts a claimed triple's run (its problem split by
the seed and its meta-features made once, by helper processes while the GPU trains, its
splits put on the device once and shared by its runs), `wait` turns the
round robin (each run in flight: read its last epoch back, log it, queue its next) until runs
end, flushes their rows and hands their outcomes back, so each claim ends with its run's
status after the run's end is on disk. A run that raises (when it starts or later) is
logged as `failed` and dropped, the others go on; `interrupt` logs every run in flight as
`interrupted`. Runs are logged as a solo sweep run is (`sweep_worker`: origin, config, the
same recorder machinery), through this process's recorder.

One engine uses the current GPU; a machine with several runs one sweep per GPU
(CUDA_VISIBLE_DEVICES) on the same warehouse, and their claims split the triples. On the CPU
(backend numpy) the engine runs its runs one epoch at a time each, interleaved, in this
process: no faster than the process pool, but the same bookkeeping without a GPU.
"""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

from aicf_induct.induction.sweep_worker import (
    Outcome,
    RunLog,
    Task,
    log_failure,
    process_recorder,
    task_trainer,
    worker_pool,
)
from aicf_induct.problems import load_problem
from aicf_induct.problems.problem import Problem
from aicf_induct.runtime.epoch_gpu import FELL_BACK
from aicf_induct.runtime.runs import problem_meta_features_with_seed, remember_features

Ended = tuple[Task, Outcome | None, str | None]
MODELS = 128  # runs in flight on one GPU by default: small models leave most of it idle
# processes loading problems (and their meta-features) while the GPU trains
PREPARERS = min(4, os.cpu_count() or 1)
GATHER_S = 0.5  # wait() gathers the ends of this long after the first (one flush for them)
MetaFeatures = tuple[dict[str, float], int]  # a problem's meta-features, their split's seed
Loaded = tuple[Problem, Any]  # a problem split by a seed, its splits on the device (or None)


def prepare_problem(name: str, seed: int) -> tuple[Problem, MetaFeatures]:
    """In a helper process: the problem split by `seed` and its meta-features (seed 0's
    split's: `problems.meta_features`) with their split's seed, the two slow parts of a
    run's start (seconds on a large table), done there so that the engine's process keeps
    feeding the GPU meanwhile."""
    problem = load_problem(name, seed=seed)
    return problem, problem_meta_features_with_seed(problem)  # once per (problem, split)


class _Live:
    """A run in flight: its task, its run (runtime.many.ModelRun), its log, its start."""

    def __init__(self, task: Task, run: Any, log: RunLog, t0: float) -> None:
        self.task, self.run, self.log, self.t0 = task, run, log, t0


class GpuEngine:
    """Runs of many triples at once in this process, `capacity` at most (see the module
    docstring)."""

    def __init__(self, capacity: int) -> None:
        # the runs' streams map onto this many hardware queues (CUDA's default, 8, makes
        # independent streams wait on each other); read when the CUDA context is made
        os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
        self.capacity = capacity
        self._live: list[_Live] = []
        self._ended: list[Ended] = []
        self._problems: dict[tuple[str, int], Loaded | BaseException] = {}
        self._loading: dict[tuple[str, int], Future[tuple[Problem, MetaFeatures]]] = {}
        self._waiting: list[tuple[Task, float]] = []  # submitted, their problem loading
        self._pool: ProcessPoolExecutor | None = None
        self._recorder: Any = None
        self._fell_back_before = FELL_BACK.copy()  # the process's count as this engine began

    # -- the Engine interface ----------------------------------------------------------------
    def submit(self, task: Task) -> None:
        """Start the triple's run and queue its first epoch, or, when its problem is not
        loaded yet, have a helper process load it and start the run once it is."""
        self._recorder = self._recorder or process_recorder(task.root, task.api_key)
        key = (task.problem, task.seed)
        if key not in self._problems and key not in self._loading:
            if self._pool is None:
                self._pool = worker_pool(PREPARERS)
            self._loading[key] = self._pool.submit(prepare_problem, *key)
        self._waiting.append((task, time.perf_counter()))
        self._start_ready(block=False)

    def _start_ready(self, block: bool) -> None:
        """Start the waiting runs whose problem is loaded (`block`: wait for one first)."""
        if block and self._loading:
            wait_futures(list(self._loading.values()), return_when=FIRST_COMPLETED)
        for key, fut in list(self._loading.items()):
            if fut.done():
                del self._loading[key]
                try:
                    problem, (features, split_seed) = fut.result()
                    remember_features(problem, features, split_seed)
                    self._problems[key] = (problem, None)
                except Exception as err:  # its runs fail with this error
                    self._problems[key] = err
        waiting, self._waiting = self._waiting, []
        for task, t0 in waiting:
            if (task.problem, task.seed) in self._problems:
                self._launch(task, t0)
            else:
                self._waiting.append((task, t0))

    def _launch(self, task: Task, t0: float) -> None:
        """Start the run and queue its first epoch; a run that cannot start is logged as
        failed and ends at once."""
        log, run_id, run = RunLog(self._recorder), uuid.uuid4().hex, None
        try:
            run = self._start(task, log, run_id)
            if not run.launch():
                run.finish()
                self._end(_Live(task, run, log, t0))
                return
        except Exception as err:
            if run is not None:
                run.abort(err)
            else:  # logs a start too where the run did not log one
                loaded = self._problems.get((task.problem, task.seed))
                kind = loaded[0].task if isinstance(loaded, tuple) else ""
                log_failure(log, task, f"{type(err).__name__}: {err}", run_id, kind,
                            time.perf_counter() - t0)
            self._end(_Live(task, run, log, t0))
            return
        self._live.append(_Live(task, run, log, t0))

    def wait(self) -> list[Ended]:
        """Turn the round robin until runs end; their rows are on disk when this returns.
        After the first end it turns on a little (GATHER_S, or until an eighth of the
        capacity ended), so that one flush and one refill serve several ends."""
        first_end = 0.0
        while self._live or self._waiting:
            if self._ended:
                first_end = first_end or time.perf_counter()
                if (not self._live or len(self._ended) >= max(1, self.capacity // 8)
                        or time.perf_counter() - first_end >= GATHER_S):
                    break
            self._start_ready(block=not self._live)
            if self._live:
                self._round()
        self._evict()
        if self._recorder is not None:
            self._recorder.flush()
        out, self._ended = self._ended, []
        return out

    def interrupt(self) -> None:
        """Log every run in flight as `interrupted` (once) and flush."""
        live, self._live, self._waiting = self._live, [], []
        for item in live:
            item.run.abort(KeyboardInterrupt())
        if self._recorder is not None:
            self._recorder.flush()
        self._stop_pool()

    def slower_paths(self) -> dict[str, int]:
        """This engine's runs that took a slower path (`epoch_gpu.FELL_BACK`), by path."""
        return dict(FELL_BACK - self._fell_back_before)

    def close(self) -> None:
        if self._recorder is not None:
            self._recorder.flush()
        self._stop_pool()

    def _stop_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._loading.clear()

    # -- inside ------------------------------------------------------------------------------
    def _round(self) -> None:
        """Each run in flight: read back its epoch, log it, queue the next or end the run.
        While the host reads one run, the GPU runs the epochs queued for the others."""
        still = []
        for item in self._live:
            try:
                if not item.run.advance():
                    still.append(item)
                    continue
                item.run.finish()
            except Exception as err:  # this run only: logged failed, the others go on
                item.run.abort(err)
            self._end(item)
        self._live = still

    def _evict(self) -> None:
        """Drop the problems (host and device copies) no run in flight or waiting needs: a
        sweep goes problem by problem, and a corpus's would not all fit at once."""
        needed = {(i.task.problem, i.task.seed) for i in self._live}
        needed |= {(t.problem, t.seed) for t, _ in self._waiting}
        for key in [k for k in self._problems if k not in needed]:
            del self._problems[key]

    def _end(self, item: _Live) -> None:
        end = item.log.end
        assert end is not None, "a run left the engine without its end"
        self._ended.append((item.task, Outcome(item.task.triple, end.status, end.run_id,
                                               time.perf_counter() - item.t0, end.error),
                            None))

    def _start(self, task: Task, log: RunLog, run_id: str) -> Any:
        from aicf_induct.runtime.many import model_run

        loaded = self._problems[(task.problem, task.seed)]
        if isinstance(loaded, BaseException):
            raise loaded
        problem, data = loaded
        trainer = task_trainer(task, problem, log, run_id)
        if trainer.backend.is_gpu and data is None:
            from aicf_induct.runtime.epoch_gpu import DeviceData

            data = DeviceData(problem)
            self._problems[(task.problem, task.seed)] = (problem, data)
        return model_run(trainer, data)
