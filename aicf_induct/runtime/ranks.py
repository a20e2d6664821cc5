"""The ranks of one data-parallel run as processes of this machine (`runtime.parallel`).

`run_ranks(size, main, worker, payload)` starts ranks 1..size-1 as processes (spawned: no
CUDA state is inherited), each running `worker(comm, payload)`, and runs `main(comm)` as
rank 0 in this process: rank 0 is the one that logs and reports. The ranks are joined by
pipes (`PipeCommunicator`); with `gpus`, rank r uses GPU r and the ranks sum over NCCL
(`NcclCommunicator`, its unique id carried by the pipes).

A rank that fails ends the run: its error comes back to rank 0 through its own pipe (or the
pipe's end, if the process died), and rank 0 raises `ExecutionError` naming the rank; if
rank 0 fails, the other ranks are stopped. Nothing is left running either way.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from aicf_induct.errors import ConfigError, ExecutionError
from aicf_induct.interrupts import sigint_ignored
from aicf_induct.runtime.parallel import (
    Communicator,
    NcclCommunicator,
    PipeCommunicator,
    SoloCommunicator,
    close_communicator,
    pipe_ranks,
)

T = TypeVar("T")
JOIN_S = 30.0  # how long the other ranks may take to finish after rank 0 has
FAILED_WORD_S = 2.0  # after a failure: how long to wait for a rank's error message
STOP_S = 10.0  # how long a rank may take to leave on SIGTERM before it is killed


def communicator(rank: int, size: int, links: list[Connection], gpus: bool,
                 results: list[tuple[Connection, Connection]] | None = None) -> Communicator:
    """Rank `rank`'s communicator: pipes, and over them NCCL on GPU `rank` with `gpus`. On
    rank 0, `results` (the other ranks' result pipes) make a broken pipe the failed rank's
    own error (`_Rank0Pipes`)."""
    host: Communicator = SoloCommunicator() if size == 1 else PipeCommunicator(rank, size,
                                                                                 links)
    if results is not None and size > 1:
        host = _Rank0Pipes(host, results)
    if not gpus:
        return host
    import cupy

    cupy.cuda.Device(rank).use()
    return NcclCommunicator(host)


def check_gpus(size: int) -> None:
    """Refuse, with one line, `size` GPU ranks on a machine with fewer GPUs."""
    try:
        import cupy

        have = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as err:  # no CuPy, no driver: no GPU to speak of
        raise ConfigError(f"--gpus {size}: no GPU is usable here ({type(err).__name__}: "
                          f"{err})") from None
    if have < size:
        raise ConfigError(f"--gpus {size}: this machine has {have} GPU(s)")


class _Rank0Pipes:
    """Rank 0's pipes, on which a rank's death or failure reads as EOF or a reset: raised as
    that rank's own error (its word on its result pipe), so that the run's logged end says
    why, not "ConnectionResetError" (the trainer logs the end before `run_ranks` could)."""

    def __init__(self, pipes: Communicator, results: list[tuple[Connection, Connection]]
                 ) -> None:
        self.pipes, self.results = pipes, results
        self.rank, self.size = pipes.rank, pipes.size

    def _call(self, op: Callable[..., T], *args: Any) -> T:
        try:
            return op(*args)
        except (EOFError, BrokenPipeError, ConnectionResetError) as err:
            raise ExecutionError(_broken(self.results, err)) from None

    def allreduce_sum_(self, buf: Any) -> None:
        self._call(self.pipes.allreduce_sum_, buf)

    def broadcast(self, obj: Any) -> Any:
        return self._call(self.pipes.broadcast, obj)

    def barrier(self) -> None:
        self._call(self.pipes.barrier)


def _broken(results: list[tuple[Connection, Connection]], err: BaseException) -> str:
    """What rank 0 says when a pipe to another rank broke under it (`err`)."""
    why = (_first_error(results, FAILED_WORD_S)
           or "a rank finished before rank 0: the ranks fell out of step")
    return f"data parallel: {why} (rank 0 saw {type(err).__name__})"


def _rank_process(rank: int, size: int, link: Connection, result: Connection, gpus: bool,
                  worker: Callable[[Communicator, Any], object], payload: Any) -> None:
    # rank 0 stops the others with SIGTERM (Ctrl-C is rank 0's: they start ignoring it): a
    # SystemExit, so that the process exits through multiprocessing's finalizers, which
    # free its semaphores (killed, it left them to the resource tracker's "leaked" warning)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    # no bar is drawn here: a thread lock for tqdm, whose default is a multiprocessing one,
    # a semaphore that a rank killed outright (the OOM killer) leaves to that warning
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())
    try:
        # rank 0 speaks for the run: the others' notes and warnings would repeat its own
        # (a note per rank, NumPy's overflow warnings of a diverging run); an error of theirs
        # goes to rank 0 through `result`
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), \
                contextlib.redirect_stderr(quiet):
            comm = communicator(rank, size, [link], gpus)
            worker(comm, payload)
        result.send(None)  # the word first: freeing NCCL's communicator waits for rank 0's
        close_communicator(comm)
    except SystemExit:
        pass
    except BaseException as err:  # reported to rank 0, which raises it
        with contextlib.suppress(OSError):  # rank 0 gone already: nobody to tell
            result.send(f"{type(err).__name__}: {err}")


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the way out is not cut short
    raise SystemExit(128 + signum)


def run_ranks(size: int, main: Callable[[Communicator], T],
              worker: Callable[[Communicator, Any], object], payload: Any, *,
              gpus: bool = False) -> T:
    """`main(comm)` as rank 0 here, `worker(comm, payload)` as ranks 1..size-1 in processes
    of their own (`worker` and `payload` picklable); rank 0's result."""
    if size < 1:
        raise ConfigError(f"data parallel needs at least one rank, got {size}")
    if gpus:
        check_gpus(size)
    if size == 1:
        return main(communicator(0, 1, [], gpus))
    ctx = multiprocessing.get_context("spawn")
    links, far = pipe_ranks(size, ctx)
    results = [ctx.Pipe(duplex=False) for _ in range(size - 1)]
    procs = [ctx.Process(target=_rank_process, daemon=True, name=f"rank-{r}",
                         args=(r, size, far[r - 1], results[r - 1][1], gpus, worker, payload))
             for r in range(1, size)]
    # started with SIGINT ignored: a terminal's Ctrl-C reaches the whole group, and a rank
    # still importing printed its KeyboardInterrupt's traceback; rank 0 stops them
    with sigint_ignored():
        for p in procs:
            p.start()
    for c in far + [w for _, w in results]:
        c.close()  # this process keeps its own ends only: a rank's death reads as EOF
    ok = False  # every rank's word came, and none failed: they are on their way out
    try:
        try:
            out = main(communicator(0, size, links, gpus, results))
        except (EOFError, BrokenPipeError, ConnectionResetError) as err:
            raise ExecutionError(_broken(results, err)) from None
        # rank 0 ended: every rank took part in every exchange, so what fails after it (a
        # rank's own final evaluation) changes nothing of the run, which rank 0 logged
        failed = _first_error(results, JOIN_S)
        if failed:
            print(f"note: data parallel: {failed} after the run's last exchange; the run's "
                  "results are rank 0's, as logged", file=sys.stderr)
        ok = not failed
        return out
    finally:
        for p in procs:  # after a failure the others may wait on rank 0: stop them
            p.join(JOIN_S if ok else 0)
            if p.is_alive():
                p.terminate()  # SIGTERM: leave through the finalizers
                p.join(STOP_S)
            if p.is_alive():  # stopped (SIGSTOP, a debugger) or blocked in C: no handler
                p.kill()  # runs there, and a join without a limit waited for good
                p.join()


def _first_error(results: list[tuple[Connection, Connection]], wait_s: float) -> str | None:
    """The first rank's error (rank order), waiting up to `wait_s` for each rank's word; a
    rank with no word then is reported as unfinished only when no rank reported an error."""
    silent = None
    for r, (read, _) in enumerate(results, start=1):
        try:
            if not read.poll(wait_s):
                silent = silent or f"rank {r} did not finish within {wait_s:g} s"
                continue
            msg = read.recv()
        except EOFError:
            return f"rank {r} ended without a word (its process died)"
        if msg is not None:
            return f"rank {r} failed: {msg}"
    return silent
