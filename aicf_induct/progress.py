"""Progress bars: the one rule for a transient bar, so that every command shows them alike."""

from __future__ import annotations

import sys
from typing import Any

from tqdm.auto import tqdm


def transient(iterable: Any = None, *, enabled: bool = True, **options: Any) -> tqdm:
    """A bar cleared when its work ends (`leave=False`), drawn only when its file (stderr
    unless `options` name another) is a terminal: a pipe or a log file would keep every
    redraw of it (tqdm's `disable=None`; a notebook's bar is always drawn)."""
    return tqdm(iterable, disable=None if enabled else True, leave=False, **options)


LOG_EVERY_S = 300.0  # how often long work's progress is written as a line to a log file


def lasting(iterable: Any = None, *, enabled: bool = True, **options: Any) -> tqdm:
    """A bar for long work (a sweep, `induce fit`): on a terminal as tqdm draws it; written to
    a pipe or log file instead as a line every `LOG_EVERY_S` seconds and one at the end, so a
    log of an hours-long build says how far it got without a redraw per run."""
    file = options.get("file") or sys.stderr
    if enabled and not _is_terminal(file):
        options = {**options, "mininterval": LOG_EVERY_S, "maxinterval": LOG_EVERY_S,
                   "bar_format": "{desc}: {n}/{total} {unit}s, {elapsed} elapsed, "
                                 "~{remaining} left\n", "leave": True}
    return tqdm(iterable, disable=not enabled, **options)


def _is_terminal(file: Any) -> bool:
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError):  # closed, or not a file
        return False
