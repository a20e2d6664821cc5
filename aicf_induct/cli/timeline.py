"""`adapt`'s timeline: the run's events as they happen, one line each, on stdout (a
trigger and its decision on one line, quiet stretches folded), muted for good when its
reader goes away (`adapt ... | head`) so that the training goes on."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TextIO

from aicf_induct.records import RESUMED, BaseRecorder, EventRecord, RunEndRecord


class Timeline(BaseRecorder):
    """Prints triggers, decisions, rewrites, guard verdicts and rollbacks as they happen.
    A trigger the policy answered with nothing takes one line, and a run of such triggers
    with nothing else printed between them one line with counts (printed when something
    else happens or the run ends)."""

    keeps_problems = False

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.muted = False  # the reader went away (`adapt ... | head`): the run goes on
        self.pending: EventRecord | None = None  # a trigger waiting for its decision
        # unprinted "trigger -> why" lines: the first trigger, why, count per trigger name,
        # the last one's step
        self.idle: tuple[EventRecord, str, dict[str, int], int] | None = None

    def _print(self, step: int, kind: str, text: str) -> None:
        if not self.muted:
            self._guarded(lambda: print(f"  step {step:6d}  {kind:<9} {text}",
                                        file=self.stream))

    def line(self, text: str) -> None:
        """A line of the command's own (its header), muted with the timeline."""
        if not self.muted:
            self._guarded(lambda: print(text, file=self.stream, flush=True))

    def _guarded(self, write: Callable[[], None]) -> None:
        """Write, or mute the timeline for good when the pipe it writes to is closed: a
        closed pipe must not fail the training it narrates."""
        try:
            write()
        except BrokenPipeError:
            self.muted = True
            _discard_stdout(self.stream)

    def _say(self, rec: EventRecord, text: str) -> None:
        self._flush_idle()
        self._print(rec.step, rec.kind, text)

    def _flush_idle(self) -> None:
        if self.idle is None:
            return
        first, why, counts, last = self.idle
        self.idle = None
        if sum(counts.values()) == 1:
            self._print(first.step, first.kind, f"{first.name} -> {why}")
            return
        names = ", ".join(f"{n} x{c}" for n, c in counts.items())
        self._print(first.step, first.kind, f"{names} -> {why} (to step {last})")

    def _no_action(self, trig: EventRecord, why: str) -> None:
        if self.idle is not None and self.idle[1] != why:
            self._flush_idle()
        if self.idle is None:
            self.idle = (trig, why, {}, trig.step)
        first, _, counts, _ = self.idle
        counts[trig.name] = counts.get(trig.name, 0) + 1
        self.idle = (first, why, counts, trig.step)

    def event(self, rec: EventRecord) -> None:
        if self.pending is not None:
            trig, self.pending = self.pending, None
            if rec.kind == "decision" and rec.name in ("none", "wait"):
                # a policy's "no change" says why (the learned proposer's reason)
                self._no_action(trig, "guarding the last rewrite" if rec.name == "wait"
                                else str(rec.detail.get("reason") or "no action"))
                return
            self._say(trig, trig.name)
        d, mb, ma = rec.detail, rec.metrics_before, rec.metrics_after
        if rec.kind == "trigger":
            self.pending = rec
        elif rec.kind == "decision":
            self._say(rec, f"{rec.name} at {d.get('site')} ({d.get('reason', '')})")
        elif rec.kind == "rewrite" and "error" in d:
            self._say(rec, f"{rec.name} failed: {d['error']}")
        elif rec.kind == "rewrite":
            self._say(rec, f"{rec.name} {d['site']}: {mb['param_count']:.0f} -> "
                           f"{ma['param_count']:.0f} parameters, val loss "
                           f"{mb['val_loss']:.4f} -> {ma['val_loss']:.4f}, paused "
                           f"{d['pause_ms']:.1f} ms")
        elif rec.kind == "guard":
            self._say(rec, f"{rec.name}: {d['verdict']} ({d['reason']})")
        elif rec.kind == "rollback" and d.get("to") == "control arm":
            self._say(rec, f"{rec.name}: on from the control arm (the run without the "
                           f"rewrite, step {d.get('to_step')}), {d['blacklisted']} blacklisted")
        elif rec.kind == "rollback" and rec.name == "give_up":  # no target: the run fails
            self._say(rec, f"gave up: {d.get('reason', 'too many rollbacks')}")
        elif rec.kind == "rollback":
            extra = f", {d['blacklisted']} blacklisted" if d.get("blacklisted") else ""
            self._say(rec, f"{rec.name}: back to step {d.get('to_step')}, learning rate "
                           f"x{d.get('lr_scale', 1.0):g}{extra}")
        elif rec.kind == "skip":
            self._say(rec, f"batch {d['batch']} of epoch {d['epoch']} left out of the replay")
        elif rec.kind in ("early_stop", "fork") or (rec.kind, rec.name) == ("checkpoint",
                                                                            "resume"):
            self._say(rec, f"{rec.name} {d.get('path', '')}".rstrip())

    def run_end(self, rec: RunEndRecord) -> None:
        if rec.status == RESUMED:  # no end: the resume event said it
            return
        if self.pending is not None:  # a trigger at the very end, with no decision
            trig, self.pending = self.pending, None
            self._say(trig, trig.name)
        self._flush_idle()

    def flush(self) -> None:
        if not self.muted:
            self._guarded(self.stream.flush)

    def close(self) -> None:
        self._flush_idle()
        self.flush()


def _discard_stdout(stream: TextIO) -> None:
    """Point the process's stdout at /dev/null once its reader is gone, so that what is
    still buffered or printed later (the result lines) does not fail again."""
    if stream is not sys.stdout:
        return
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # not a real file (a test's capture)
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)
