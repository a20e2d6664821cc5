"""A run killed with SIGKILL and resumed from its on-disk checkpoint continues bit-exactly:
every step after the checkpoint (rewrites, guard verdicts and a rollback among them)
has the same loss as in the uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from aicf_induct.records import MemoryRecorder, Recorder
from aicf_induct.runtime import snapshot as disk
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun, FaultInjection, StepHook
from aicf_induct.runtime.guard import GuardConfig
from aicf_induct.runtime.policies import RuleBasedPolicy, RuleConfig
from aicf_induct.runtime.trainer import TrainConfig
from tests.runtime.test_adaptive_fixtures import toy_graph, toy_problem

ROOT = Path(__file__).resolve().parents[2]
KILL_AT = 150  # executed steps
POLICY = RuleBasedPolicy(RuleConfig(gap_tolerance=0.5))  # grows on the toy data
SPIKE_AT = 200  # after the kill: the resumed run must roll it back the same way


class Stall:
    """Before executed step `at`, announce it in `marker` and wait to be killed."""

    def __init__(self, at: int, marker: str) -> None:
        self.at, self.marker = at, marker

    def before_step(self, run, x, y):  # type: ignore[no-untyped-def]
        if run.work == self.at:
            Path(self.marker).write_text(str(run.work))
            time.sleep(120)
        return x, y


def hooks() -> list[StepHook]:
    return [FaultInjection(SPIKE_AT, "spike", 1e3)]


def build(checkpoint_dir: str, recorder: Recorder,
          extra_hooks: Sequence[StepHook] = ()) -> AdaptiveRun:
    problem = toy_problem("classification", n=300, seed=2)
    adapt = AdaptConfig(steps=240, warmup_steps=12, plateau_patience=2, plateau_min_delta=0.02,
                        guard=GuardConfig(steps=12), checkpoint_steps=12)
    return AdaptiveRun(problem, toy_graph(problem, "mlp:depth=1,width=2,dropout=0.1"),
                       TrainConfig(lr=1e-2, batch_size=32, seed=3), adapt, POLICY,
                       recorder=recorder, checkpoint_dir=checkpoint_dir,
                       hooks=[*hooks(), *extra_hooks])


CHILD = """
import sys
from tests.runtime.test_adaptive_resume import Stall, build
from aicf_induct.records import NullRecorder
build(sys.argv[1], NullRecorder(), [Stall(int(sys.argv[2]), sys.argv[3])]).run()
"""


def test_sigkilled_run_resumes_bit_exactly(tmp_path: Path) -> None:
    full = MemoryRecorder()
    build(str(tmp_path / "uninterrupted"), full).run()

    ckpt, marker = tmp_path / "killed", tmp_path / "stalled"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(ckpt), str(KILL_AT), str(marker)],
                            cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, "the child exited before it was killed"
            assert time.monotonic() < deadline, "the child never reached the kill point"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    latest = disk.latest(ckpt)
    assert latest is not None
    resumed_rec = MemoryRecorder()
    run = AdaptiveRun.resume(ckpt, toy_problem("classification", n=300, seed=2),
                             POLICY, recorder=resumed_rec, hooks=hooks())
    start = run.work
    assert 0 < start <= KILL_AT and start == int(latest.name.split("-")[1])
    run.run()

    expected = [(s.step, s.loss, s.lr) for s in full.steps[start:]]
    got = [(s.step, s.loss, s.lr) for s in resumed_rec.steps]
    assert len(got) == len(expected)
    assert np.array_equal(np.array(got), np.array(expected))
    kinds = {(e.kind, e.name) for e in resumed_rec.events}
    assert ("rollback", "spike") in kinds  # the replayed part had a rollback in it
    assert ("checkpoint", "resume") in kinds
    full_after = [(e.kind, e.name, e.step) for e in full.events
                  if e.detail["work"] > start and e.kind != "checkpoint"]
    resumed_after = [(e.kind, e.name, e.step) for e in resumed_rec.events
                     if e.kind != "checkpoint"]
    assert resumed_after == full_after
    finals = {(r.split, r.metric): r.value for r in full.results if r.final}
    assert finals == {(r.split, r.metric): r.value for r in resumed_rec.results if r.final}
