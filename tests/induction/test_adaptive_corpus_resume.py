"""The adaptive corpus runs (`corpus build --adaptive N`) through the sweep's machinery: a
stopped build leaves no orphan worker and its rerun trains each run once, builds at once split
the runs, and other settings are other runs (as a sweep's other protocol)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import warehouse
from aicf_induct.induction.adaptive_corpus import plan
from aicf_induct.induction.rewrite_history import load_rewrite_history
from aicf_induct.induction.space_io import parse_space
from aicf_induct.induction.sweep_worker import close_process_recorders, run_task
from tests.induction.test_sweep_resume import REPO, alive, descendants
from tests.signals import default_sigint

RUNS_SQL = """
SELECT json_extract_string(config, '$.corpus_adaptive.problem'),
       TRY_CAST(json_extract(config, '$.corpus_adaptive.index') AS BIGINT),
       TRY_CAST(json_extract(config, '$.adapt.steps') AS BIGINT), status
FROM runs WHERE origin = 'adapt'
"""
PLANNED = {(p, i) for p in ("iris", "wine") for i in (0, 1)}


def build_cmd(root: Path, steps: int, workers: int = 2) -> list[str]:
    return [sys.executable, "-m", "aicf_induct", "corpus", "build", "--problems", "iris,wine",
            "--space", "depth=1,2;width=8", "--seeds", "0", "--adaptive", "2",
            "--adaptive-steps", str(steps), "--workers", str(workers), "--quiet",
            "--warehouse", str(root)]


def start(root: Path, steps: int, workers: int = 2) -> subprocess.Popen[str]:
    return subprocess.Popen(build_cmd(root, steps, workers), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)},
                            preexec_fn=default_sigint)


def build(root: Path, steps: int) -> str:
    done = subprocess.run(build_cmd(root, steps), capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    return done.stdout


def runs(root: Path) -> list[tuple[str, int, int, str]]:
    if not root.exists():
        return []
    return warehouse.with_retry(root, lambda c: c.execute(RUNS_SQL).fetchall())


def completed(root: Path, steps: int) -> Counter[tuple[str, int]]:
    return Counter((p, i) for p, i, s, st in runs(root) if s == steps and st == "completed")


def test_sigterm_then_rerun_leaves_no_orphan_and_one_run_each(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    proc = start(root, 5000)
    try:
        deadline = time.monotonic() + 120
        while "running" not in {r[3] for r in runs(root)}:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the build made no progress"
            time.sleep(0.25)
        workers = [c for c in descendants(proc.pid) if alive(c)]
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        assert proc.returncode == 130
        # the build stopped its workers before it exited (an orphan would go on training)
        deadline = time.monotonic() + 3
        while any(alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert workers and not any(alive(w) for w in workers)
    finally:
        with contextlib.suppress(ProcessLookupError):  # what a failed check left running
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert "running" not in {r[3] for r in runs(root)}  # the runs in flight: interrupted
    build(root, 5000)
    assert completed(root, 5000) == Counter(dict.fromkeys(PLANNED, 1))


def test_two_builds_at_once_train_each_run_once(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    procs = [start(root, 300, workers=1) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert completed(root, 300) == Counter(dict.fromkeys(PLANNED, 1))
    assert len(runs(root)) == len(PLANNED)  # none trained twice, none cut


def test_other_steps_are_other_runs_and_the_history_counts_a_repeat_once(
        tmp_path: Path) -> None:
    root = tmp_path / "wh"
    assert "4 trained, 0 already there" in build(root, 200)
    assert "0 trained, 4 already there" in build(root, 200)
    # other settings: another experiment, trained (as a sweep's other protocol)
    assert "4 trained, 0 already there" in build(root, 250)
    assert completed(root, 200) == completed(root, 250) == Counter(dict.fromkeys(PLANNED, 1))
    # a warehouse with a run trained twice (before builds claimed their runs): its copy
    # adds nothing to the rewrite history
    before = load_rewrite_history(root)
    job = plan(["iris"], 1, parse_space("depth=1,2;width=8").candidates(), 200)[0]
    try:
        assert run_task(dataclasses.replace(job, root=str(root))).status == "completed"
    finally:
        close_process_recorders()
    assert completed(root, 200)[("iris", 0)] == 2
    after = load_rewrite_history(root)
    assert len(before) > 0 and after.equals(before)
