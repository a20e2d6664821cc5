"""Where a sweep's runs execute: a local process pool, Ray tasks or many runs at once on this
process's GPU (`sweep_gpu`), behind one small interface.

The sweep hands an engine one claimed task at a time (`submit`), never more than `capacity`
at once, and collects what ended (`wait`): an `Outcome`, or the error of a worker that died.
`interrupt` stops every run in flight so that each records its end as `interrupted`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, Protocol

from aicf_induct.errors import ConfigError
from aicf_induct.induction.sweep_worker import (
    STOP_GRACE_S,
    Outcome,
    Task,
    run_local_task,
    stop_processes,
    worker_pool,
)
from aicf_induct.kernels.autotune import BUDGET_ENV

Ended = tuple[Task, Outcome | None, str | None]  # (task, outcome, error of a dead worker)


class Engine(Protocol):
    capacity: int

    def submit(self, task: Task) -> None: ...
    def wait(self) -> list[Ended]: ...
    def interrupt(self) -> None: ...
    def close(self) -> None: ...
    # runs that took a slower path, by path (the GPU engine's; the others report none)
    def slower_paths(self) -> dict[str, int]: ...


class LocalEngine:
    """A process pool on this machine (`worker_pool`); a worker death (segfault, OOM kill)
    fails the runs in flight and the next `submit` starts a fresh pool."""

    def __init__(self, workers: int) -> None:
        self.capacity = workers
        self._pool = worker_pool(workers)
        self._broken = False
        self._interrupted = False
        self._futures: dict[Future[Outcome], Task] = {}

    def submit(self, task: Task) -> None:
        if self._broken:
            self._pool.shutdown(wait=False)
            self._pool, self._broken = worker_pool(self.capacity), False
        self._futures[self._pool.submit(run_local_task, task)] = task

    def wait(self) -> list[Ended]:
        done, _ = wait(list(self._futures), return_when=FIRST_COMPLETED)
        out: list[Ended] = []
        for fut in done:
            task = self._futures.pop(fut)
            try:
                out.append((task, fut.result(), None))
            except BrokenProcessPool:
                self._broken = True
                out.append((task, None, "worker process died while running this triple"))
        return out

    def interrupt(self) -> None:
        """SIGTERM every worker: each logs its run as `interrupted`, flushes and exits. Once:
        a second SIGTERM would kill a worker in the middle of its flush."""
        if self._interrupted:
            return
        self._interrupted = True
        procs = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        stop_processes(procs, STOP_GRACE_S)
        self._futures.clear()
        self._broken = True  # nothing more runs in this pool

    def slower_paths(self) -> dict[str, int]:
        return {}  # one run a worker, through the trainer: none of the GPU engine's paths

    def close(self) -> None:
        # after `interrupt` too: the pool's manager sees its dead workers and stops; dropping
        # the pool frees its queues' semaphores now, not at exit (where the resource tracker
        # would warn of leaks when a Ctrl-C traceback still holds this engine)
        self._pool.shutdown(wait=True)
        self._futures.clear()
        del self._pool


RAY_CONNECT_TIMEOUT_S = 5.0


def check_ray_address(address: str) -> None:
    """A ConfigError when nothing answers at a "host:port" (or "ray://host:port") address:
    `ray.init` retried such an address without end, printing only Ray's own warnings (an
    audit's sweep waited 9.5 minutes). "auto" is Ray's to find."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return  # "auto", or a form Ray reads its own way
    try:
        with socket.create_connection((host.strip("[]"), int(port)),
                                      timeout=RAY_CONNECT_TIMEOUT_S):
            pass
    except (OSError, ValueError) as err:
        why = getattr(err, "strerror", None) or err
        raise ConfigError(f"--ray-address {address}: no Ray cluster answers there ({why}); "
                          "start one (`ray start --head`) or leave --ray-address out to start "
                          "Ray on this machine") from None


class RayEngine:
    """One Ray task per triple on a local Ray instance (`address` None: started here with
    `workers` CPUs) or an existing cluster (`address`: "auto" or "host:port")."""

    def __init__(self, workers: int, address: str | None) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError("--engine ray needs Ray: pip install 'aicf-induct[ray]'") from None
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            # the tuning budget reaches the workers, on any node (`run_sweep(repeatable=)`)
            budget = os.environ.get(BUDGET_ENV)
            env = {"env_vars": {BUDGET_ENV: budget}} if budget is not None else None
            if address is None:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                         runtime_env=env)
            else:
                check_ray_address(address)
                ray.init(address=address, log_to_driver=False, runtime_env=env)
        cpus = int(ray.cluster_resources().get("CPU", workers))
        self.capacity = max(workers, cpus) if address is not None else workers
        from aicf_induct.induction.sweep_worker import run_task

        self._remote = ray.remote(num_cpus=1, max_retries=0)(run_task)
        self._refs: dict[Any, Task] = {}

    def submit(self, task: Task) -> None:
        self._refs[self._remote.remote(task)] = task

    def wait(self) -> list[Ended]:
        ready, _ = self._ray.wait(list(self._refs), num_returns=1)
        out: list[Ended] = []
        for ref in ready:
            task = self._refs.pop(ref)
            try:
                out.append((task, self._ray.get(ref), None))
            except Exception as err:  # the worker died: run_task itself never raises
                first = str(err).splitlines()[0] if str(err) else ""
                out.append((task, None, f"ray task failed: {type(err).__name__}: {first}"))
        return out

    def interrupt(self) -> None:
        if not self._refs:
            return  # nothing in flight, or already interrupted
        for ref in self._refs:
            self._ray.cancel(ref)  # KeyboardInterrupt in the task: it logs `interrupted`
        if self._refs:
            self._ray.wait(list(self._refs), num_returns=len(self._refs),
                           timeout=STOP_GRACE_S)
        self._refs.clear()

    def slower_paths(self) -> dict[str, int]:
        return {}  # one run a worker, through the trainer: none of the GPU engine's paths

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()


@contextmanager
def open_engine(engine: str, workers: int, address: str | None) -> Iterator[Engine]:
    eng: Engine
    if engine == "gpu":
        from aicf_induct.induction.sweep_gpu import GpuEngine

        eng = GpuEngine(workers)
    else:
        eng = LocalEngine(workers) if engine == "local" else RayEngine(workers, address)
    try:
        yield eng
    except BaseException:
        eng.interrupt()  # Ctrl-C or an error here: stop the runs in flight, logged
        raise
    finally:
        eng.close()
