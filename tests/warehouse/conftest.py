from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aicf_induct.records import (
    EventRecord,
    ProblemRecord,
    ResultRecord,
    RunEndRecord,
    RunStartRecord,
    SnapshotRecord,
    StepRecord,
)
from warehouse import WarehouseRecorder

WRITER_PROC = Path(__file__).with_name("writer_proc.py")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "wh"


def spawn_writer(root: Path, run_id: str, steps: int, flush_s: float,
                 pause_every: int = 0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER_PROC), str(root), run_id, str(steps), str(flush_s),
         str(pause_every)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def one_run_warehouse(root: Path) -> Path:
    """A warehouse at `root` holding one small finished run, run-a on problem p1."""
    rec = WarehouseRecorder(root)
    log_run(rec, "run-a", problem("p1"), 0.9, "fp", {"depth": 2.0})
    rec.close()
    return root


def log_run(rec: WarehouseRecorder, run_id: str, problem: ProblemRecord, score: float,
            fingerprint: str, patterns: dict[str, float], steps: int = 10,
            end: bool = True, rewrites: tuple[tuple[str, dict[str, float],
                                                    dict[str, float]], ...] = (),
            test: bool = True) -> None:
    """One small synthetic run, through the recorder interface like the runtime does
    (`test`: with a test result beside its validation one)."""
    rec.problem(problem)
    rec.run_start(RunStartRecord(run_id, problem.problem_id, problem.name, problem.task,
                                 {"hidden": [8]}, 0, "cpu", {"numpy": "2"}, "test"))
    rec.snapshot(SnapshotRecord(run_id, 0, "start", '{"format": "aicf.ir/1"}', "fp-start",
                                5, {"depth": 1.0}))
    for s in range(steps):
        rec.step(StepRecord(run_id, s, 0, 1.0 / (s + 1), 0.5, 0.01, 0.1, 1e-3, 16))
    for name, before, after in rewrites:
        rec.event(EventRecord(run_id, steps // 2, "rewrite", name, {"at": "l1"}, before, after))
    rec.snapshot(SnapshotRecord(run_id, steps, "final", "{}", fingerprint,
                                int(patterns.get("params", 10)), patterns))
    metric = "r2" if problem.task == "regression" else "accuracy"
    rec.result(ResultRecord(run_id, steps, 0, "val", metric, score - 0.01, True))
    if test:
        rec.result(ResultRecord(run_id, steps, 0, "test", metric, score, True))
        rec.result(ResultRecord(run_id, steps, 0, "test", "loss", 0.3, False))
    if end:
        rec.run_end(RunEndRecord(run_id, "completed", steps, 0.5))


def problem(pid: str, task: str = "classification", **features: float) -> ProblemRecord:
    return ProblemRecord(pid, f"name-{pid}", "synthetic", task, 100, 4,
                         3 if task == "classification" else 0, "y", features)
