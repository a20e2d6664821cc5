"""`aicf-induct adapt` with a warehouse, killed and interrupted, then resumed: the log
keeps every step up to each checkpoint (a checkpoint flushes the log first), Ctrl-C ends
the run `interrupted` (no `running` ghost), and the resumed run completes with every step
of its trajectory in the warehouse. SIGTERM (kill, a scheduler) stops `adapt` and `train` as
Ctrl-C does; a reader that goes away (`| head`) mutes the timeline, not the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import warehouse
from aicf_induct.cli.main import main
from aicf_induct.runtime import snapshot as disk
from tests.signals import default_sigint

ROOT = Path(__file__).resolve().parents[2]
STEPS, EVERY = 600, 40  # digits: ~2 ms a step, so the kills land long before the end
ARGS = ["adapt", "--dataset", "digits", "--steps", str(STEPS), "--checkpoint-steps",
        str(EVERY), "--patience", "0", "--json"]
RESUME = ["adapt", "--dataset", "digits", "--json"]


def _start(*args: str, resume: bool = False) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    given = RESUME if resume else ARGS  # a resume takes its settings from the checkpoint
    return subprocess.Popen([sys.executable, "-m", "aicf_induct", *given, *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)


def _kill_after_checkpoint(proc: subprocess.Popen[str], ckpt: Path, past: int,
                           sig: signal.Signals) -> tuple[int, str]:
    """Send `sig` once a checkpoint of more than `past` executed steps exists; the latest
    checkpoint's steps and the process's stderr."""
    deadline = time.monotonic() + 120
    while not (ckpt.is_dir() and disk.checkpoints(ckpt)
               and _work(disk.checkpoints(ckpt)[-1]) > past):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.02)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    latest = disk.latest(ckpt)
    assert latest is not None
    return _work(latest), err


def _work(path: Path) -> int:
    return int(path.name.split("-")[1])


def _steps(root: Path) -> list[int]:
    conn = warehouse.connect(root)
    return [s for (s,) in conn.execute("SELECT DISTINCT step FROM steps ORDER BY 1").fetchall()]


def _runs(root: Path) -> list[tuple[object, ...]]:
    return warehouse.connect(root).execute(
        "SELECT run_id, status, error FROM runs").fetchall()


def test_killed_then_interrupted_then_resumed_run_logs_every_step(tmp_path: Path,
                                                                  capsys) -> None:
    wh, ckpt = tmp_path / "wh", tmp_path / "ckpt"
    # SIGKILL: nothing flushes at exit, so the steps up to the checkpoint are on disk only
    # because the checkpoint flushed them first
    proc = _start("--warehouse", str(wh), "--checkpoint-dir", str(ckpt))
    killed_at, _ = _kill_after_checkpoint(proc, ckpt, 0, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert _steps(wh)[:killed_at] == list(range(killed_at))
    ((run_id, status, _),) = _runs(wh)
    # killed: no end row, and its writer's lease names a process that is gone
    assert status == "abandoned"

    # Ctrl-C on the resumed run: it ends `interrupted`, with the log flushed at exit
    proc = _start("--warehouse", str(wh), "--resume", str(ckpt), resume=True)
    stopped_at, err = _kill_after_checkpoint(proc, ckpt, killed_at, signal.SIGINT)
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == \
        f"interrupted; go on with: aicf-induct adapt --dataset digits --resume {ckpt}"
    assert stopped_at > killed_at
    assert _runs(wh) == [(run_id, "interrupted", "KeyboardInterrupt")]
    assert _steps(wh)[:stopped_at] == list(range(stopped_at))

    # resumed to the end: the same run, completed, every step of it logged
    assert main(["adapt", "--dataset", "digits", "--json", "--warehouse", str(wh),
                 "--resume", str(ckpt)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["run_id"] == run_id and out["steps"] == STEPS
    assert _runs(wh) == [(run_id, "completed", None)]
    assert _steps(wh) == list(range(STEPS))
    conn = warehouse.connect(wh)
    # the steps and events logged between a checkpoint and the kill were not logged again
    # (a guard's replay logs a step number twice, with other values)
    assert conn.execute("SELECT count(*) FROM (SELECT step, loss, grad_norm, count(*) AS n "
                        "FROM steps GROUP BY ALL) WHERE n > 1").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM (SELECT step, kind, name, detail::VARCHAR, "
                        "count(*) AS n FROM events GROUP BY ALL) WHERE n > 1").fetchone() \
        == (0,)
    # resumed once more: the run has ended
    assert main([*RESUME, "--warehouse", str(wh), "--resume", str(ckpt)]) == 2
    assert capsys.readouterr().err == (
        f"error: run {run_id} already completed at step {STEPS}; --fork {ckpt} --steps N "
        f"branches a new run from its final state\n")
    resumes = conn.execute("SELECT count(*) FROM events WHERE kind = 'checkpoint' AND "
                           "name = 'resume'").fetchone()
    assert resumes == (2,)


def _status(root: Path) -> tuple[object, ...]:
    ((status, ended, steps),) = warehouse.connect(root).execute(
        "SELECT status, ended_at IS NOT NULL, steps_taken FROM runs").fetchall()
    return status, ended, steps


def test_a_resumed_run_reads_running_while_it_trains_and_abandoned_once_killed(
        tmp_path: Path, capsys) -> None:
    wh, ckpt = tmp_path / "wh", tmp_path / "ckpt"
    proc = _start("--warehouse", str(wh), "--checkpoint-dir", str(ckpt))
    stopped_at, _ = _kill_after_checkpoint(proc, ckpt, 0, signal.SIGINT)
    assert _status(wh)[:2] == ("interrupted", True)

    # resumed and training (a checkpoint past the stop: its log is flushed first): not the
    # end it had, `interrupted`, but running, with no end yet
    proc = _start("--warehouse", str(wh), "--resume", str(ckpt), resume=True)
    deadline = time.monotonic() + 120
    while _work(disk.latest(ckpt) or ckpt / "ckpt-0") <= stopped_at:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    assert _status(wh) == ("running", False, None)
    proc.kill()
    proc.communicate(timeout=60)
    # killed: its writer is gone, so no end will come
    assert _status(wh) == ("abandoned", False, None)
    assert main(["warehouse", "check", "--repair", "--warehouse", str(wh)]) == 0
    assert _status(wh)[:2] == ("abandoned", True)
    capsys.readouterr()
    # the repair's end holds until the run's next end of its own
    latest = disk.latest(ckpt)
    assert latest is not None
    before = disk.load(latest).meta["run"]["wall_s"]  # its processes' wall time so far
    assert main([*RESUME, "--warehouse", str(wh), "--resume", str(ckpt)]) == 0
    assert _status(wh) == ("completed", True, STEPS)
    # the run's wall time is the whole run's (it was the last process's alone)
    ((wall,),) = warehouse.connect(wh).execute("SELECT wall_time_s FROM runs").fetchall()
    assert 0 < before < wall


def test_sigterm_ends_the_run_interrupted_with_every_step_logged(tmp_path: Path) -> None:
    wh, ckpt = tmp_path / "wh", tmp_path / "ckpt"
    proc = _start("--warehouse", str(wh), "--checkpoint-dir", str(ckpt))
    stopped_at, err = _kill_after_checkpoint(proc, ckpt, 0, signal.SIGTERM)
    assert proc.returncode == 130 and err.strip().splitlines()[-1].startswith("interrupted")
    ((_, status, error),) = _runs(wh)
    assert (status, error) == ("interrupted", "KeyboardInterrupt: SIGTERM")
    logged = _steps(wh)
    assert logged == list(range(len(logged))) and len(logged) >= stopped_at


def test_sigterm_ends_a_train_run_interrupted(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "aicf_induct", "train", "--dataset", "digits",
                             "--epochs", "100000", "--patience", "0", "--quiet", "--json",
                             "--warehouse", str(wh)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    # the run's row is logged once it trains (a fixed wait after the warehouse appeared was
    # too short on a loaded machine: the signal came before the run started)
    while not (wh.is_dir() and _runs(wh)):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    ((_, status, error),) = _runs(wh)
    assert (status, error) == ("interrupted", "KeyboardInterrupt: SIGTERM")


@pytest.mark.parametrize("lines_read", [1, 0])
def test_a_closed_pipe_mutes_the_timeline_and_the_run_completes(tmp_path: Path,
                                                                lines_read: int) -> None:
    """`adapt ... | head -1`: the reader is gone at the header's second line or the first
    checkpoint's flush; `| head -0` (gone before the header): the run is still trained and
    logged (a closed pipe at the header ended the command before its run, with status 0)."""
    wh = tmp_path / "wh"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "aicf_induct", "adapt", "--dataset", "iris",
                             "--steps", "2000", "--patience", "0", "--checkpoint-dir",
                             str(tmp_path / "ckpt"), "--checkpoint-steps", "20",
                             "--warehouse", str(wh)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    if lines_read:
        assert proc.stdout.readline().startswith("adapt iris:")
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0 and err == ""
    ((_, status, error),) = _runs(wh)
    assert (status, error) == ("completed", None)


def test_a_second_resume_is_refused_while_the_run_goes_on(tmp_path: Path, capsys) -> None:
    """While a process goes on with the run in its checkpoint directory, `--resume` of it is
    one line naming the directory, before the warehouse is opened."""
    from tests.runtime.test_adaptive_resume import CHILD, stalled

    ckpt, wh = tmp_path / "ckpt", tmp_path / "wh"
    proc = stalled(CHILD, ckpt, 60, tmp_path / "stalled")
    try:
        assert main([*RESUME, "--warehouse", str(wh), "--resume", str(ckpt)]) == 2
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert capsys.readouterr().err == (
        f"error: checkpoint directory {ckpt}: another process (pid {proc.pid}) holds it, "
        "going on with its run there\n")
    assert not wh.exists()
