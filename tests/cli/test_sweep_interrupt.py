"""A sweep stopped with runs in flight counts what happened to each, as the warehouse holds
it: a run that finished as the signal came is completed (and so is its claim), one that was
stopped is interrupted, one that never started is no run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aicf_induct.frontend.specs import MLPSpec
from aicf_induct.induction.space import Candidate
from aicf_induct.induction.sweep import SweepReport, TripleClaims, dispatch
from aicf_induct.induction.sweep_engines import Ended
from aicf_induct.induction.sweep_state import END_STATUSES
from aicf_induct.induction.sweep_worker import Task
from aicf_induct.records import RunEndRecord, RunStartRecord
from aicf_induct.runtime.trainer import TrainConfig
from warehouse import WarehouseRecorder, Writer
from warehouse.claims import item_dir

PROTOCOL = "proto"


def _task(root: Path, width: int) -> Task:
    return Task("iris", "pid", Candidate(MLPSpec(depth=1, width=width)), 0, TrainConfig(),
                0.0, str(root), {"sweep_id": "s", "protocol": PROTOCOL})


def _log(root: Path, task: Task, status: str | None, run: str = "") -> None:
    """A run of `task` as its worker logs it: started, and ended with `status` (None: still
    running)."""
    rec = WarehouseRecorder(root)
    run_id = f"r-{task.candidate.key}{run}"
    rec.run_start(RunStartRecord(run_id, task.problem_id, "iris", "classification",
                                 {"sweep": task.run_config()}, task.seed, "cpu", {}, "sweep"))
    if status is not None:
        rec.run_end(RunEndRecord(run_id, status, 10, 0.1))
    rec.close()


class _StoppedEngine:
    """Three runs in flight when Ctrl-C comes: the first finished just before it (logged,
    not yet collected), the second is running (the interrupt logs it as interrupted), the
    third never started."""

    capacity = 3

    def __init__(self, root: Path) -> None:
        self.root, self.tasks = root, list[Task]()

    def submit(self, task: Task) -> None:
        self.tasks.append(task)

    def wait(self) -> list[Ended]:
        _log(self.root, self.tasks[0], "completed")
        _log(self.root, self.tasks[1], None)
        raise KeyboardInterrupt

    def interrupt(self) -> None:
        _log(self.root, self.tasks[1], "interrupted", run="-2")

    def close(self) -> None:
        pass

    def slower_paths(self) -> dict[str, int]:
        return {}


class _Bar:
    def update(self, n: int) -> None:
        pass

    def set_postfix(self, **kw: object) -> None:
        pass


def _claim_status(root: Path, task: Task) -> str | None:
    d = item_dir(root, PROTOCOL, json.dumps(task.triple))
    latest = max(d.glob("*.json"), key=lambda p: int(p.stem))
    return json.loads(latest.read_text()).get("status")


def test_an_interrupt_counts_each_run_in_flight_as_it_ended(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    done, cut, unstarted = (_task(root, w) for w in (8, 16, 32))
    _log(root, cut, "interrupted", run="-old")  # an earlier sweep's stopped run: not ours
    report = SweepReport("s", 3, 0)
    with Writer(root) as me:
        claims = TripleClaims(root, PROTOCOL, me.writer_id, END_STATUSES)
        with pytest.raises(KeyboardInterrupt):
            dispatch([done, cut, unstarted], _StoppedEngine(root), claims, me, report, _Bar())
    assert dict(report.statuses) == {"completed": 1, "interrupted": 1}
    assert report.left == 1  # not started: the next sweep's
    assert _claim_status(root, done) == "completed"
    assert _claim_status(root, cut) == "interrupted"
