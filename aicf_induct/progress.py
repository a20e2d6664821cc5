"""Progress bars: the one rule for a transient bar, so that every command shows them alike."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tqdm import tqdm as std_tqdm
from tqdm.auto import tqdm


def transient(iterable: Any = None, *, enabled: bool = True, **options: Any) -> tqdm:
    """A bar cleared when its work ends (`leave=False`), drawn only when its file (stderr
    unless `options` name another) is a terminal: a pipe or a log file would keep every
    redraw of it (tqdm's `disable=None`; a notebook's bar is always drawn)."""
    return tqdm(iterable, disable=None if enabled else True, leave=False, **options)


LOG_EVERY_S = 300.0  # how often long work's progress is written as a line to a log file


def lasting(iterable: Any = None, *, enabled: bool = True, **options: Any) -> std_tqdm:
    """A bar for long work (a sweep, `induce fit`): on a terminal as tqdm draws it; written to
    a pipe or log file instead as a line at its start, every `LOG_EVERY_S` seconds and at its
    end, so a log of an hours-long build says how far it got without a redraw per run."""
    file = options.get("file") or sys.stderr
    if enabled and not is_terminal(file):
        counts = "{n}/{total} {unit}s, {elapsed} elapsed, ~{remaining} left" \
            if options.get("total") is not None or hasattr(iterable, "__len__") else \
            "{n} {unit}s, {elapsed} elapsed"  # (no total: no share, nothing left to say)
        options = {**options, "mininterval": LOG_EVERY_S, "maxinterval": LOG_EVERY_S,
                   "bar_format": "{desc}: " + counts, "leave": True}
        return _LogLines(iterable, **options)
    return tqdm(iterable, disable=not enabled, **options)


@contextmanager
def counting(**options: Any) -> Iterator[Callable[[int], object]]:
    """An `update(n)` for work that counts its own steps (a library's `progress=`): the
    `lasting` bar appears at the first step, so work refused before it starts (a bad
    argument, a missing folder) prints its error alone, and closes at the end."""
    bar: list[std_tqdm] = []

    def update(n: int) -> object:
        if not bar:
            bar.append(lasting(**options))
        return bar[0].update(n)

    try:
        yield update
    finally:
        if bar:
            bar[0].close()


class _LogLines(std_tqdm):
    """tqdm for a pipe or log file: whole lines, each written when its interval is due (a new
    description is not a line of its own: the next line carries it)."""

    @staticmethod
    def status_printer(file: Any) -> Any:
        started = [False]

        def write(line: str) -> None:  # no carriage return, no padding over the last line;
            if not line:  # a clear (tqdm.write's): nothing to take back in a log
                return
            file.write(("\n" if started[0] else "") + line)  # the close ends the last one
            file.flush()
            started[0] = True

        return write

    def set_description(self, desc: str | None = None, refresh: bool | None = True) -> None:
        super().set_description(desc, refresh=False)

    def set_description_str(self, desc: str | None = None,
                            refresh: bool | None = True) -> None:
        super().set_description_str(desc, refresh=False)


def is_terminal(file: Any) -> bool:
    """Whether `file` is a terminal (False for a closed stream or no file at all)."""
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError):  # closed, or not a file
        return False
