"""Several GPU-engine processes for one sweep on this machine (`run_sweep(processes=N)`).

One GPU engine (`sweep_gpu`) drives its runs from one Python thread, and on small tables
that host side can limit it before the GPU does, so a machine may train faster with a few
engine processes per GPU (benchmarks/RESULTS.md measures it). The sweep's parent plans the
triples (problems loaded, finished triples skipped) once; then N spawned processes each run
the engine's dispatch over the same list, each in its own order (the problems dealt round
them, its own first: `dealt`), claiming every triple before it runs: the claims, as between
any sweeps on one warehouse, make sure no triple runs twice. Process i sees GPU i mod G of
the G visible ones (CUDA_VISIBLE_DEVICES). The parent's progress bar counts the runs every
process ends, and its report is the sum of theirs, with what no process finished read back
from the warehouse.

Ctrl-C (or SIGTERM on the parent) stops every process as it stops one sweep: runs in flight
end logged as `interrupted`, their claims say so, and the same command run again trains
what is missing. A parent killed outright (SIGKILL) cannot stop them: each process stops the
same way once it sees its parent gone.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from aicf_induct.errors import ConfigError
from aicf_induct.induction.sweep_worker import Task, stop_processes, watch_parent

POLL_S = 0.5  # how often the parent reads the shared counter into its bar
STOP_GRACE_S = 60.0  # after a stop, how long the processes get to log their runs' ends


def visible_gpus(backend: str) -> list[str]:
    """The GPUs the engine processes are spread over (CUDA_VISIBLE_DEVICES's entries, else
    every device CuPy counts); none with backend numpy, where the engine runs on the CPU."""
    if backend == "numpy":
        return []
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip()]
    import cupy

    return [str(i) for i in range(int(cupy.cuda.runtime.getDeviceCount()))]


def dealt(todo: Sequence[Task], index: int, processes: int) -> list[Task]:
    """Process `index`'s order: the problems dealt round the processes, its own (the
    index-th, then every processes-th) first, then everyone else's, each in the list's
    order. Each process trains whole problems, and the processes together go down the list
    in its order, so a sweep cut short by a time limit has finished its first problems."""
    problems = list(dict.fromkeys(t.problem for t in todo))
    mine = {p for k, p in enumerate(problems) if k % processes == index}
    return [t for t in todo if t.problem in mine] + [t for t in todo if t.problem not in mine]


@dataclass
class ProcessesOutcome:
    """What the processes did together: their runs' statuses, the slower paths they took,
    and whether the time limit left work for the next invocation."""

    statuses: Counter[str]
    slower_paths: dict[str, int]
    left_any: bool


class SharedBar:
    """A progress bar stand-in for a child: each run's end adds one to the parent's counter
    (a triple another process ended is that process's count, not this one's)."""

    def __init__(self, counter: Any) -> None:
        self._counter = counter

    def update(self, n: int = 1) -> None:
        with self._counter.get_lock():
            self._counter.value += n

    def set_postfix(self, **_: Any) -> None:
        pass


def put_result(results: Any, index: int, statuses: dict[str, int] | None,
               slower_paths: dict[str, int] | None, left: int, error: str | None) -> None:
    """A child's last word to the parent: its runs' statuses, slower paths and how many
    triples the time limit left it, or the error (or "interrupted") that stopped it."""
    results.put((index, statuses, slower_paths, left, error))


@contextmanager
def stop_once() -> Iterator[None]:
    """In a child: the first SIGINT or SIGTERM raises KeyboardInterrupt and later ones do
    nothing, so that a Ctrl-C to the group followed by the parent's SIGTERM does not cut the
    logging of the runs' ends short."""
    stopped = False

    def handler(signum: int, frame: Any) -> None:
        nonlocal stopped
        if not stopped:  # (not SIG_IGN: a signal already pending would then be reported)
            stopped = True
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGINT, handler), signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old[0])
        signal.signal(signal.SIGTERM, old[1])


@contextmanager
def _gpu_env(gpu: str | None) -> Iterator[None]:
    """CUDA_VISIBLE_DEVICES for a child started inside (spawned children copy the env)."""
    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old


def run_processes(target: Callable[..., None], todo: Sequence[Task], common: tuple[Any, ...],
                  *, processes: int, backend: str, stop_at: float | None,
                  bar: Any) -> ProcessesOutcome:
    """Run `todo` with `processes` spawned children (see the module docstring): child i
    calls `target(its order of todo, seconds left before stop_at or None, the shared
    run counter, the results queue, i, *common)` and ends with `put_result`. `stop_at` is a
    time.perf_counter() deadline for starting runs, `bar` the parent's progress bar."""
    if processes < 1:
        raise ConfigError(f"processes must be >= 1, got {processes}")
    gpus = visible_gpus(backend)
    ctx = multiprocessing.get_context("spawn")  # no fork of the parent's writer thread
    counter = ctx.Value("q", 0)
    results = ctx.Queue()
    procs = []
    for i in range(processes):
        left_s = None if stop_at is None else max(0.0, stop_at - time.perf_counter())
        proc = ctx.Process(target=_child, name=f"sweep-engine-{i}", args=(
            os.getpid(), target, dealt(todo, i, processes), left_s, counter, results, i,
            *common))
        with _gpu_env(gpus[i % len(gpus)] if gpus else None):
            proc.start()
        procs.append(proc)
    got: dict[int, tuple[Any, ...]] = {}
    try:
        _collect(procs, results, counter, bar, got)
    except BaseException:
        _stop(procs, results, got)
        raise
    return _merged(got, processes)


def _child(parent_pid: int, target: Callable[..., None], *args: Any) -> None:
    """A child's life: `target(*args)`, stopped as a Ctrl-C stops it if the parent dies
    (SIGKILLed, it cannot stop its children: they trained on as orphans, on a GPU for as long
    as their runs took)."""
    watch_parent(parent_pid, STOP_GRACE_S)
    target(*args)


def _collect(procs: list[Any], results: Any, counter: Any, bar: Any,
             got: dict[int, tuple[Any, ...]]) -> None:
    """Wait for every child's result, moving the bar as their runs end. A child that dies
    without one (killed for memory, say) leaves the others to finish; then it is named."""
    shown, dead = 0, set[int]()
    while len(got) + len(dead) < len(procs):
        try:
            item = results.get(timeout=POLL_S)
            got[item[0]] = item
        except queue.Empty:
            # a child that exited has flushed its result to the pipe: look once more
            gone = {i for i, p in enumerate(procs) if i not in got and not p.is_alive()}
            if gone and results.empty():
                time.sleep(POLL_S)
                dead |= {i for i in gone if results.empty()}
        now = counter.value
        if now > shown:
            bar.update(now - shown)
            shown = now
    for proc in procs:
        proc.join()
    if dead:
        names = ", ".join(f"{procs[i].name} (exit code {procs[i].exitcode})"
                          for i in sorted(dead))
        raise ConfigError(f"sweep engine process(es) died: {names}; the others finished, and "
                          "the same command run again trains what is missing")


def _stop(procs: list[Any], results: Any, got: dict[int, tuple[Any, ...]]) -> None:
    """Stop the children as one sweep stops (SIGTERM: each logs its runs as interrupted),
    wait for them, kill what outlives the grace."""
    stop_processes(procs, STOP_GRACE_S)
    while True:  # drain, so the queue's feeder threads let the children exit
        try:
            item = results.get_nowait()
            got[item[0]] = item
        except queue.Empty:
            return


def _merged(got: dict[int, tuple[Any, ...]], processes: int) -> ProcessesOutcome:
    errors = [f"engine process {i}: {got[i][4]}" for i in sorted(got) if got[i][4]]
    if any(got[i][4] == "interrupted" for i in got):
        raise KeyboardInterrupt
    if errors:
        raise ConfigError("; ".join(errors))
    statuses: Counter[str] = Counter()
    slower: Counter[str] = Counter()
    for i in range(processes):
        statuses.update(got[i][1])
        slower.update(got[i][2])
    return ProcessesOutcome(statuses, dict(slower), any(got[i][3] for i in got))
