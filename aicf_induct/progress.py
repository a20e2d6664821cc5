"""Progress bars: the one rule for a transient bar, so that every command shows them alike."""

from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm


def transient(iterable: Any = None, *, enabled: bool = True, **options: Any) -> tqdm:
    """A bar cleared when its work ends (`leave=False`), drawn only when its file (stderr
    unless `options` name another) is a terminal: a pipe or a log file would keep every
    redraw of it (tqdm's `disable=None`; a notebook's bar is always drawn)."""
    return tqdm(iterable, disable=None if enabled else True, leave=False, **options)
