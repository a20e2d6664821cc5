"""Several GPU-engine processes for one sweep (`run_sweep(processes=N)`), on the CPU (backend
numpy: each engine interleaves its runs in its own process): every triple trained exactly
once, with the results one engine gives; a time limit leaves the rest to the same command;
Ctrl-C and SIGTERM stop every process with its runs logged as interrupted, and a restart
ends every triple exactly once. The cuda tier (test_sweep_gpu_cuda.py) runs it on a GPU."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.specs import MLPSpec
from aicf_induct.induction.space import Candidate
from aicf_induct.induction.sweep import run_sweep
from aicf_induct.induction.sweep_processes import dealt, visible_gpus
from aicf_induct.induction.sweep_spec import SweepSpec
from aicf_induct.induction.sweep_worker import Task, close_process_recorders
from tests.induction.helpers import ended_triples
from tests.induction.test_sweep_gpu import TRAIN, assert_same_runs, spec
from tests.induction.test_sweep_resume import (
    alive,
    children,
    planned,
    restart,
    start,
    statuses,
    wait_running,
)

ENGINES = ("--engine", "gpu", "--backend", "numpy", "--gpu-processes", "2")
ENDLESS = ("--epochs", "100000", "--budget", "60", "--workers", "1", *ENGINES)
RESTART = ("--epochs", "100000", "--budget", "0.5", "--workers", "2", *ENGINES)


def test_three_processes_train_every_triple_once_with_one_engines_results(
        tmp_path: Path) -> None:
    s = spec()
    many = run_sweep(s, tmp_path / "three", workers=2, engine="gpu", processes=3,
                     progress=False)
    try:
        one = run_sweep(s, tmp_path / "one", workers=5, engine="gpu", progress=False)
    finally:
        close_process_recorders()
    assert dict(many.statuses) == dict(one.statuses) == {"completed": 12}
    assert (many.planned, many.skipped, many.elsewhere, many.held, many.left) == (12, 0, 0, 0, 0)
    assert_same_runs(tmp_path / "three", tmp_path / "one")
    again = run_sweep(s, tmp_path / "three", workers=2, engine="gpu", processes=3,
                      progress=False)
    assert (again.skipped, again.ran) == (12, 0)


def test_a_time_limit_leaves_the_rest_to_the_same_command(tmp_path: Path) -> None:
    s = spec()
    first = run_sweep(s, tmp_path / "wh", workers=1, engine="gpu", processes=2,
                      progress=False, time_limit_s=1e-9)
    # each process starts no run past the limit: none, or the one its first claim started
    assert first.ran + first.left == 12 and first.left >= 10
    second = run_sweep(s, tmp_path / "wh", workers=2, engine="gpu", processes=2,
                       progress=False)
    assert (second.skipped, second.ran, second.left) == (first.ran, first.left, 0)
    assert max(ended_triples(tmp_path / "wh").values()) == 1


def test_each_process_takes_every_nth_problem_first_then_the_others() -> None:
    todo = [Task(p, p, Candidate(MLPSpec(depth=1, width=w)), 0, TRAIN, 0.0, "wh")
            for p in ("a", "b", "c", "d", "e") for w in (8, 16)]
    orders = [[(t.problem, t.candidate.spec.width) for t in dealt(todo, i, 2)]
              for i in range(2)]
    assert orders[0] == [("a", 8), ("a", 16), ("c", 8), ("c", 16), ("e", 8), ("e", 16),
                         ("b", 8), ("b", 16), ("d", 8), ("d", 16)]
    assert [p for p, _ in orders[1][:4]] == ["b", "b", "d", "d"]
    assert sorted(orders[1]) == sorted(orders[0])  # every triple in each order


def test_the_processes_are_spread_over_the_visible_gpus(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5")
    assert visible_gpus("cupy") == ["2", "5"]
    assert visible_gpus("numpy") == []  # the engine on the CPU: no GPU to pick


@pytest.mark.parametrize(("engine", "root", "needs"), [
    ("local", "wh", "need engine 'gpu'"),
    ("gpu", "http://127.0.0.1:9", "log to a warehouse, not through the service"),
])
def test_several_processes_refuse_what_they_cannot_split(tmp_path: Path, engine: str,
                                                          root: str, needs: str) -> None:
    s = SweepSpec(("iris",), (Candidate(MLPSpec(depth=1, width=8)),), (0,), TRAIN, 60.0)
    target = tmp_path / root if root == "wh" else root
    with pytest.raises(ConfigError, match=needs):
        run_sweep(s, target, engine=engine, processes=2, progress=False)
    assert not (tmp_path / "wh").exists()


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_a_stop_reaches_every_process_and_a_restart_ends_every_triple_once(
        tmp_path: Path, stop: str) -> None:
    root = tmp_path / "wh"
    proc = start(root, *ENDLESS)
    wait_running(root, proc, 2)  # one run in flight in each process
    engines = [pid for pid in children(proc.pid)  # not multiprocessing's resource tracker
               if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(engines) == 2
    if stop == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends: the whole group
    else:
        proc.send_signal(signal.SIGTERM)  # a scheduler's stop: the parent only
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130 and err.splitlines()[0] == "interrupted", err
    assert not [pid for pid in engines if alive(pid)]
    assert statuses(root) == {"interrupted": 2}
    assert restart(root, *RESTART)["ran"] == len(planned())


def test_the_processes_stop_when_the_parent_is_killed(tmp_path: Path) -> None:
    """SIGKILL leaves the parent no time to stop its children: they trained on as orphans
    (on a GPU for as long as their runs took). Each now notices its parent gone and stops
    as a stopped sweep does, its run logged as interrupted."""
    import time

    root = tmp_path / "wh"
    proc = start(root, *ENDLESS)
    wait_running(root, proc, 2)
    engines = [pid for pid in children(proc.pid)
               if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(engines) == 2
    proc.send_signal(signal.SIGKILL)  # the parent only (an OOM kill, a scheduler's kill -9)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 60  # the runs' 60 s budget: an orphan would outlive it
    while [pid for pid in engines if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in engines if alive(pid)]
    assert statuses(root) == {"interrupted": 2}
    assert restart(root, *RESTART)["ran"] == len(planned())


def test_the_cli_takes_the_processes(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    from aicf_induct.cli.main import main

    argv = ["corpus", "build", "--problems", "iris", "--space", "depth=1;width=8,16",
            "--seeds", "2", "--epochs", "2", "--engine", "gpu", "--backend", "numpy",
            "--gpu-processes", "2", "--warehouse", str(tmp_path / "wh"), "--quiet", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["ran"], report["statuses"], report["held"]) == (4, {"completed": 4}, 0)
    assert main([*argv, "--gpu-processes", "0"]) == 2
    assert "argument --gpu-processes: must be >= 1, got 0" in capsys.readouterr().err


def test_a_killed_process_leaves_its_triples_to_the_others_and_is_named(tmp_path: Path
                                                                        ) -> None:
    root = tmp_path / "wh"
    # runs that end by their 3 s budget: the survivor has time to take the dead one's over
    proc = start(root, "--epochs", "100000", "--budget", "3", "--workers", "1", *ENGINES)
    wait_running(root, proc, 2)
    engine = next(pid for pid in children(proc.pid)
                  if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes())
    os.kill(engine, signal.SIGKILL)  # an OOM kill: its run's end never logged
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert "error: sweep engine process(es) died: sweep-engine-" in err
    assert "(exit code -9)" in err
    after = ended_triples(root)
    assert set(after) == planned() and max(after.values()) == 1  # the survivor ran the rest
    assert statuses(root)["abandoned"] == 1
