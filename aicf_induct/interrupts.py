"""Ctrl-C and SIGTERM as one way to stop: what a command, a run or a sweep does on either.

`sigterm_interrupts` makes SIGTERM (`kill`, `timeout`, a scheduler, `docker stop`) a
KeyboardInterrupt, as Ctrl-C is, so that what cleans up after Ctrl-C (a run logged
`interrupted`, a temporary file removed) runs on SIGTERM too; `interrupts_deferred` holds
both until a block that must not stop half-way is done; `sigint_ignored` starts child
processes deaf to Ctrl-C, which their parent handles. Only the main thread handles
signals: elsewhere these are no-ops.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM stops the block as Ctrl-C does, with a KeyboardInterrupt; the previous
    handler comes back after."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread handles signals
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("SIGTERM")

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if old is None else old)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is done (they are delivered right after it):
    for steps that must not stop half-way, like flushing the log and writing a checkpoint.

    The handlers are swapped, not the signal mask: a process-directed signal goes to any
    thread that does not block it (the warehouse writer's), and Python then runs the handler
    in the main thread all the same."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread handles signals
        return
    held = (signal.SIGINT, signal.SIGTERM)
    came: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: came.append(signum)) for s in held}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        for signum in dict.fromkeys(came):  # each held signal once, as a blocked one would be
            signal.raise_signal(signum)


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """Processes started inside ignore SIGINT from their first instruction (Python keeps a
    SIGINT it starts with ignored), and Ctrl-C is this process's to handle."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
