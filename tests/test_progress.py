"""The transient progress bar: drawn on a terminal only, and cleared when its work ends."""

from __future__ import annotations

import io

from aicf_induct.progress import transient


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_transient_bar_is_drawn_on_a_terminal_and_cleared_at_its_end() -> None:
    out = Terminal()
    assert list(transient(range(3), file=out, desc="work", mininterval=0)) == [0, 1, 2]
    drawn = out.getvalue()
    assert "work" in drawn and "3/3" in drawn
    assert drawn.endswith("\r") and drawn.split("\r")[-2].strip() == ""  # the line cleared


def test_a_pipe_or_log_file_gets_no_bar_and_disabled_gets_none() -> None:
    pipe = io.StringIO()
    assert list(transient(range(3), file=pipe, desc="work")) == [0, 1, 2]
    assert pipe.getvalue() == ""
    tty = Terminal()
    assert list(transient(range(3), file=tty, enabled=False)) == [0, 1, 2]
    assert tty.getvalue() == ""
