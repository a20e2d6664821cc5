"""A run killed with SIGKILL and resumed from its on-disk checkpoint continues bit-exactly:
every step after the checkpoint (rewrites, guard verdicts and a rollback among them)
has the same loss as in the uninterrupted run. It keeps its policy, and a damaged latest
checkpoint gives way to the one before it."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.records import MemoryRecorder, Recorder
from aicf_induct.runtime import snapshot as disk
from aicf_induct.runtime.adaptive import (
    AdaptConfig,
    AdaptiveRun,
    AdaptResult,
    FaultInjection,
    StepHook,
)
from aicf_induct.runtime.guard import GuardConfig
from aicf_induct.runtime.policies import Policy, RuleBasedPolicy, RuleConfig, StackPolicy
from aicf_induct.runtime.snapshot import UnreadableCheckpoint
from aicf_induct.runtime.trainer import TrainConfig
from tests.runtime.test_adaptive_fixtures import toy_graph, toy_problem

ROOT = Path(__file__).resolve().parents[2]
KILL_AT = 140  # executed steps (the replay from the checkpoint before it has a rewrite, its
# guard verdict and the spike's rollback)
POLICY = RuleBasedPolicy(RuleConfig(gap_tolerance=0.5))  # grows on the toy data
SPIKE_AT = 170  # after the kill: the resumed run must roll it back the same way (outside a
# rewrite's trial: inside one the guard would judge it, not the spike statistics)


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


def _checkpointed(tmp_path: Path, policy: Policy = POLICY) -> tuple[Path, AdaptResult]:
    problem = toy_problem("classification", n=300, seed=2)
    adapt = AdaptConfig(steps=120, warmup_steps=12, plateau_patience=2,
                        guard=GuardConfig(steps=12), checkpoint_steps=40)
    ckpt = tmp_path / "ckpt"
    res = AdaptiveRun(problem, toy_graph(problem, "mlp:depth=1,width=2"),
                      TrainConfig(lr=1e-2, batch_size=32, seed=3), adapt, policy,
                      checkpoint_dir=ckpt).run()
    return ckpt, res


def _finals(res: AdaptResult) -> dict[str, float]:
    return {**res.metrics, "best_step": res.best_step, "steps": res.steps, "work": res.work}


def test_a_resumed_run_keeps_the_checkpoints_policy(tmp_path: Path) -> None:
    ckpt, first = _checkpointed(tmp_path, StackPolicy(depth=2))
    shutil.rmtree(disk.checkpoints(ckpt)[-1])  # as if killed before it was written
    problem = toy_problem("classification", n=300, seed=2)
    run = AdaptiveRun.resume(ckpt, problem)  # no policy given: the checkpoint's
    assert run.policy.name == "stack"
    assert _finals(run.run()) == _finals(first)
    with pytest.raises(ConfigError, match="policy 'stack', not 'rules'"):
        AdaptiveRun.resume(ckpt, problem, POLICY)
    with pytest.raises(ConfigError, match="policy 'stack' configured otherwise"):
        AdaptiveRun.resume(ckpt, problem, StackPolicy(depth=3))


DAMAGE = {
    "truncated arrays": lambda p: (p / "arrays.npz").write_bytes(
        (p / "arrays.npz").read_bytes()[:100]),
    "empty arrays": lambda p: (p / "arrays.npz").write_bytes(b""),
    "no arrays": lambda p: (p / "arrays.npz").unlink(),
    "a list for a document": lambda p: (p / "snapshot.json").write_text("[1, 2]"),
    "no run state": lambda p: _edit(p, lambda d: d["meta"].pop("run")),
    "a step that is no number": lambda p: _edit(p, lambda d: d.update(step="abc")),
    "a damaged graph": lambda p: _edit(p, lambda d: d["state"]["graph"].update(outputs=["zz"])),
    "no trigger state": lambda p: _edit(p, lambda d: d["meta"]["controller"].update(
        triggers={})),
}


def _edit(path: Path, change: Callable[[dict], object]) -> None:
    doc = json.loads((path / "snapshot.json").read_text())
    change(doc)
    (path / "snapshot.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_checkpoint_is_set_aside_for_the_one_before_it(tmp_path: Path,
                                                                 damage: str) -> None:
    ckpt, first = _checkpointed(tmp_path)
    older, latest = disk.checkpoints(ckpt)
    DAMAGE[damage](latest)
    run = AdaptiveRun.resume(ckpt, toy_problem("classification", n=300, seed=2))
    (why,) = run.resumed_past
    assert why.startswith(f"cannot read checkpoint {latest}: ") and "\n" not in why
    assert run.work == int(older.name.split("-")[1])
    assert _finals(run.run()) == _finals(first)  # bit-exact from the older one
    assert len(list(ckpt.glob(f".unreadable-{latest.name}-*"))) == 1  # kept, out of the way
    assert disk.checkpoints(ckpt) == [older, latest]  # the resumed run wrote it again

    for path in disk.checkpoints(ckpt):  # none readable: one line, nothing set aside
        DAMAGE[damage](path)
    with pytest.raises(UnreadableCheckpoint) as err:
        AdaptiveRun.resume(ckpt, toy_problem("classification", n=300, seed=2))
    assert str(err.value).startswith(f"cannot read checkpoint {latest}: ")
    assert str(err.value).endswith("no older one is readable either")
    assert disk.checkpoints(ckpt) == [older, latest]


class Stop:
    """Before executed step `at`, stop the run as a kill would (after what it logged)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def before_step(self, run, x, y):  # type: ignore[no-untyped-def]
        if run.work == self.at:
            raise KeyboardInterrupt
        return x, y


def test_a_resumed_run_does_not_log_again_what_it_logged(tmp_path: Path) -> None:
    """Stopped past its last checkpoint and resumed with the log's counts: the two parts
    together are the uninterrupted run's records, each once."""
    full = MemoryRecorder()
    build(str(tmp_path / "full"), full).run()
    first, ckpt = MemoryRecorder(), tmp_path / "ckpt"
    with pytest.raises(KeyboardInterrupt):
        build(str(ckpt), first, [Stop(KILL_AT + 5)]).run()
    logged = {"steps": len(first.steps), "events": len(first.events),
              "results": len(first.results), "ir_snapshots": len(first.snapshots)}
    second = MemoryRecorder()
    run = AdaptiveRun.resume(ckpt, toy_problem("classification", n=300, seed=2), POLICY,
                             recorder=second, hooks=hooks(), logged=logged)
    assert run.work < KILL_AT + 5  # the replay covers steps the first part logged
    run.run()

    def steps(*recs: MemoryRecorder) -> list[tuple[int, float]]:
        return [(s.step, s.loss) for r in recs for s in r.steps]

    def events(*recs: MemoryRecorder) -> list[tuple[str, str, int]]:
        return [(e.kind, e.name, e.detail["work"]) for r in recs for e in r.events
                if (e.kind, e.name) != ("checkpoint", "resume")]

    assert steps(first, second) == steps(full)
    assert events(first, second) == events(full)
    assert [(r.step, r.metric, r.split) for r in first.results + second.results] == \
        [(r.step, r.metric, r.split) for r in full.results]


def test_a_branch_from_the_final_state_on_disk_is_the_fork_of_the_ended_run(
        tmp_path: Path) -> None:
    """The final state an ended run leaves on disk is the one its in-memory `fork()` goes on
    from: the two branches take the same steps to the same results, bit for bit."""
    problem = toy_problem("classification", n=300, seed=2)
    adapt = AdaptConfig(steps=120, warmup_steps=12, plateau_patience=2,
                        guard=GuardConfig(steps=12), checkpoint_steps=40)
    parent = AdaptiveRun(problem, toy_graph(problem, "mlp:depth=1,width=2"),
                         TrainConfig(lr=1e-2, batch_size=32, seed=3), adapt, POLICY,
                         checkpoint_dir=tmp_path / "ckpt")
    ended = parent.run()
    assert ended.status == "completed" and disk.final_of(tmp_path / "ckpt") is not None
    in_memory, on_disk = MemoryRecorder(), MemoryRecorder()
    branch = parent.fork(adapt=dataclasses.replace(adapt, steps=200), recorder=in_memory)
    branch.since_best = 0  # (the final state on disk starts its patience over)
    a = branch.run()
    b = AdaptiveRun.branch(tmp_path / "ckpt", problem, 200, recorder=on_disk).run()
    assert (a.status, a.steps, a.work) == (b.status, b.steps, b.work) == ("completed", 200, 200)
    assert [(s.step, s.loss) for s in in_memory.steps] == [(s.step, s.loss) for s in on_disk.steps]
    assert in_memory.steps[0].step == 120
    assert a.metrics == b.metrics
    with pytest.raises(ConfigError, match=r"completed at step 120: a branch needs more steps"):
        AdaptiveRun.branch(tmp_path / "ckpt", problem, 120)


def test_an_interrupted_run_leaves_no_final_state(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        build(str(tmp_path), MemoryRecorder(), [Stop(50)]).run()
    assert disk.final_of(tmp_path) is None and disk.checkpoints(tmp_path)
    with pytest.raises(disk.SnapshotError, match="its run has not ended"):
        AdaptiveRun.branch(tmp_path, toy_problem("classification", n=300, seed=2), 500)


RESUMER = """
import sys
from tests.runtime.test_adaptive_resume import POLICY, Stall, hooks
from tests.runtime.test_adaptive_fixtures import toy_problem
from aicf_induct.runtime.adaptive import AdaptiveRun
AdaptiveRun.resume(sys.argv[1], toy_problem("classification", n=300, seed=2), POLICY,
                   hooks=[*hooks(), Stall(int(sys.argv[2]), sys.argv[3])]).run()
"""


def stalled(code: str, *args: str | Path) -> subprocess.Popen[bytes]:
    """A child process running `code` until its Stall hook writes the marker (the last
    argument), then waiting to be killed."""
    marker = Path(args[-1])
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, "the child exited before it stalled"
        assert time.monotonic() < deadline, "the child never stalled"
        time.sleep(0.05)
    return proc


def test_a_run_going_on_in_another_process_is_not_resumed(tmp_path: Path) -> None:
    """The process whose run goes on in a checkpoint directory (started or resumed) holds
    it: a resume elsewhere meanwhile is refused (it would log the run's steps twice); a
    killed holder holds nothing."""
    ckpt, problem = tmp_path / "ckpt", toy_problem("classification", n=300, seed=2)
    for code, at in ((CHILD, KILL_AT), (RESUMER, KILL_AT + 30)):  # the run, then a resume
        proc = stalled(code, ckpt, at, tmp_path / f"stalled-{at}")
        try:
            with pytest.raises(disk.DirectoryBusy, match=(
                    rf"^checkpoint directory {ckpt}: another process \(pid {proc.pid}\) "
                    "holds it")):
                AdaptiveRun.resume(ckpt, problem, POLICY)
            with pytest.raises(disk.DirectoryBusy):  # nor started afresh there
                build(str(ckpt), MemoryRecorder()).run()
        finally:
            proc.kill()
            proc.wait(timeout=30)
    assert AdaptiveRun.resume(ckpt, problem, POLICY, hooks=hooks()).run().status == "completed"
    assert not (ckpt / disk.LOCK).exists()  # let go of once the run ended


def test_resumes_interrupted_before_a_checkpoint_log_every_record_once(tmp_path: Path) -> None:
    """Stopped, resumed and stopped again before the resume wrote a checkpoint, then resumed
    to the end from the same checkpoint: the parts together are the uninterrupted run's
    records, each once (the earlier resume's own `checkpoint resume` event is no record of
    the replay)."""
    full = MemoryRecorder()
    build(str(tmp_path / "full"), full).run()
    ckpt, parts = tmp_path / "ckpt", [MemoryRecorder()]
    with pytest.raises(KeyboardInterrupt):
        build(str(ckpt), parts[0], [Stop(KILL_AT + 5)]).run()
    at = _work_of(disk.latest(ckpt))
    problem = toy_problem("classification", n=300, seed=2)

    def resume(stop: Sequence[StepHook]) -> AdaptiveRun:
        logged = {"steps": sum(len(r.steps) for r in parts),
                  "events": sum(len(r.events) for r in parts),
                  "results": sum(len(r.results) for r in parts),
                  "ir_snapshots": sum(len(r.snapshots) for r in parts)}
        resumed_at = [e.detail["work"] for r in parts for e in r.events
                      if (e.kind, e.name) == ("checkpoint", "resume")]
        parts.append(MemoryRecorder())
        return AdaptiveRun.resume(ckpt, problem, POLICY, recorder=parts[-1],
                                  hooks=[*hooks(), *stop], logged=logged,
                                  resumed_at=resumed_at)

    for _ in range(2):  # twice from the same checkpoint, each stopped before the next
        with pytest.raises(KeyboardInterrupt):
            resume([Stop(at + 6)]).run()
        assert _work_of(disk.latest(ckpt)) == at
    resume([]).run()

    def events(*recs: MemoryRecorder) -> list[tuple[str, str, int]]:
        return [(e.kind, e.name, e.detail["work"]) for r in recs for e in r.events
                if (e.kind, e.name) != ("checkpoint", "resume")]

    assert events(*parts) == events(full)
    assert [(s.step, s.loss) for r in parts for s in r.steps] == \
        [(s.step, s.loss) for s in full.steps]
    assert [(r.step, r.metric) for p in parts for r in p.results] == \
        [(r.step, r.metric) for r in full.results]


def _work_of(path: Path | None) -> int:
    assert path is not None
    return int(path.name.split("-")[1])


def test_a_branch_counts_its_own_rewrites_against_its_own_limit(tmp_path: Path) -> None:
    """A branch's rewrites and rollbacks start at 0: its parent's, at their limit, do not
    keep it from rewriting, nor are they reported as its."""
    problem = toy_problem("classification", n=300, seed=2)
    adapt = AdaptConfig(steps=120, warmup_steps=12, plateau_patience=2, max_rewrites=1,
                        guard=GuardConfig(steps=12), checkpoint_steps=40)
    parent = AdaptiveRun(problem, toy_graph(problem, "mlp:depth=1,width=2"),
                         TrainConfig(lr=1e-2, batch_size=32, seed=3), adapt, POLICY,
                         checkpoint_dir=tmp_path / "ckpt").run()
    assert parent.rewrites == 1  # its limit
    rec = MemoryRecorder()
    branch = AdaptiveRun.branch(tmp_path / "ckpt", problem, 300, recorder=rec).run()
    rewrites = [e for e in rec.events if e.kind == "rewrite"]
    assert branch.rewrites == len(rewrites) == 1 and branch.pause_ms == [
        e.detail["pause_ms"] for e in rewrites]
    assert branch.rollbacks == 0
    assert AdaptiveRun.branch(tmp_path / "ckpt", problem, 300,
                              max_rewrites=0).run().rewrites == 0  # its own limit
