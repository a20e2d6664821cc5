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


def test_long_work_writes_a_log_file_lines_not_redraws() -> None:
    """A sweep's bar in a log file: a line now and then and one at the end, each whole (it
    was a redraw per run, all on one line)."""
    from aicf_induct.progress import lasting

    log = io.StringIO()
    with lasting(total=50, desc="sweep", unit="run", file=log) as bar:
        for _ in range(50):
            bar.update(1)
    lines = [line.strip("\r") for line in log.getvalue().split("\n") if line.strip("\r")]
    assert len(lines) <= 3 and lines[-1].startswith("sweep: 50/50 runs, ")
    tty = Terminal()
    with lasting(total=5, desc="sweep", unit="run", file=tty, mininterval=0) as bar:
        for _ in range(5):
            bar.update(1)
    assert tty.getvalue().count("\r") >= 5 and "5/5" in tty.getvalue()  # drawn in place
    quiet = Terminal()
    with lasting(total=5, file=quiet, enabled=False) as bar:
        bar.update(5)
    assert quiet.getvalue() == ""


def test_long_work_in_a_log_file_is_a_line_at_its_start_and_its_end_only() -> None:
    """`induce fit`'s stages: each new description was a line of its own, each starting with
    a carriage return (five lines for a fit of two minutes)."""
    from aicf_induct.progress import lasting

    log = io.StringIO()
    with lasting(total=4, desc="fit: reading", unit="step", file=log) as bar:
        for stage in ("mining", "writing the pack", "writing tables"):
            bar.update(1)
            bar.set_description_str(f"fit: {stage}")
        bar.update(1)
    text = log.getvalue()
    assert "\r" not in text
    assert text.splitlines() == [text.splitlines()[0], text.splitlines()[-1]]
    assert text.startswith("fit: reading: 0/4 steps") and "fit: writing tables: 4/4" in text


def test_counted_work_shows_its_bar_from_its_first_step_and_only_then() -> None:
    """`warehouse check` and `compact` read every part (minutes on a large warehouse) with
    nothing shown; their bar must not come before an error that refuses the work, nor say
    "None" of a total it does not know."""
    from aicf_induct.progress import counting

    log = io.StringIO()
    with counting(desc="check", unit="part", file=log):
        pass  # refused, or nothing to do: no line
    assert log.getvalue() == ""
    with counting(desc="check", unit="part", file=log) as update:
        for _ in range(3):
            update(1)
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("check: ") and lines[-1].startswith("check: 3 parts, ")
    assert "None" not in log.getvalue() and "left" not in log.getvalue()
