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
import signal
import threading
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from aicf_induct.errors import ConfigError, ExecutionError
from aicf_induct.runtime.parallel import (
    Communicator,
    NcclCommunicator,
    PipeCommunicator,
    SoloCommunicator,
    pipe_ranks,
)

T = TypeVar("T")
JOIN_S = 30.0  # how long the other ranks may take to finish after rank 0 has
FAILED_WORD_S = 2.0  # after a failure: how long to wait for a rank's error message


def communicator(rank: int, size: int, links: list[Connection], gpus: bool) -> Communicator:
    """Rank `rank`'s communicator: pipes, and over them NCCL on GPU `rank` with `gpus`."""
    host: Communicator = SoloCommunicator() if size == 1 else PipeCommunicator(rank, size,
                                                                                 links)
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


def _rank_process(rank: int, size: int, link: Connection, result: Connection, gpus: bool,
                  worker: Callable[[Communicator, Any], object], payload: Any) -> None:
    # rank 0 stops the others with SIGTERM (Ctrl-C is rank 0's: they start ignoring it): a
    # SystemExit, so that the process exits through multiprocessing's finalizers, which
    # free its semaphores (killed, it left them to the resource tracker's "leaked" warning)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        worker(communicator(rank, size, [link], gpus), payload)
        result.send(None)
    except SystemExit:
        pass
    except BaseException as err:  # reported to rank 0, which raises it
        with contextlib.suppress(OSError):  # rank 0 gone already: nobody to tell
            result.send(f"{type(err).__name__}: {err}")


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the way out is not cut short
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Processes started inside ignore SIGINT from their first instruction (Python keeps a
    SIGINT it starts with ignored): a terminal's Ctrl-C reaches the whole group, and a rank
    still importing printed its KeyboardInterrupt's traceback. Rank 0 stops them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


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
    with _sigint_ignored():
        for p in procs:
            p.start()
    for c in far + [w for _, w in results]:
        c.close()  # this process keeps its own ends only: a rank's death reads as EOF
    ok = False
    try:
        try:
            out = main(communicator(0, size, links, gpus))
        except (EOFError, BrokenPipeError, ConnectionResetError) as err:
            why = (_first_error(results, FAILED_WORD_S)
                   or "a rank finished before rank 0: the ranks fell out of step")
            raise ExecutionError(f"data parallel: {why} (rank 0 saw {type(err).__name__})"
                                 ) from None
        failed = _first_error(results, JOIN_S)
        if failed:
            raise ExecutionError(f"data parallel: {failed}")
        ok = True
        return out
    finally:
        for p in procs:  # after a failure the others may wait on rank 0: stop them
            p.join(JOIN_S if ok else 0)
            if p.is_alive():
                p.terminate()
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
