"""Crash tests of `aicf-induct sweep`, real processes on a real warehouse: SIGKILL and Ctrl-C
part-way, then a restart; two identical sweeps at once. Every triple ends exactly once, and no
run stays `running` once its process is gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from aicf_induct.induction.space_io import parse_space
from aicf_induct.problems import load_problem
from tests.induction.helpers import ended_triples, sweep_runs
from tests.signals import default_sigint

PROBLEMS = ("iris", "wine")
SPACE = "depth=1;width=8,16"  # 4 triples
REPO = Path(__file__).resolve().parents[2]
# Stopped sweeps run "endless" runs (a 60 s budget), so the signal always finds two runs in
# flight; the restart gives each run a 0.5 s budget, after which it ends as `timeout` (a
# finished status: the budget is not part of the sweep's protocol)
ENDLESS = ("--epochs", "100000", "--budget", "60", "--workers", "2")
RESTART = ("--epochs", "100000", "--budget", "0.5", "--workers", "2")


def sweep_cmd(root: Path, *opts: str) -> list[str]:
    return [sys.executable, "-m", "aicf_induct", "sweep", "--problems", ",".join(PROBLEMS),
            "--space", SPACE, "--patience", "0", "--warehouse", str(root), "--quiet",
            "--json", *opts]


def start(root: Path, *opts: str) -> subprocess.Popen[str]:
    # a session of its own: a signal to its group is what a terminal's Ctrl-C sends
    return subprocess.Popen(sweep_cmd(root, *opts), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)},
                            preexec_fn=default_sigint)


def planned() -> set[tuple[str, str, int]]:
    ids = [load_problem(p).problem_id for p in PROBLEMS]
    return {(pid, c.key, 0) for pid in ids for c in parse_space(SPACE).candidates()}


def children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def descendants(pid: int) -> list[int]:
    """Every process below `pid`: a pool's workers are its fork server's children."""
    found, todo = [], [pid]
    while todo:
        below = children(todo.pop())
        found += below
        todo += below
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_running(root: Path, proc: subprocess.Popen[str], n: int) -> None:
    """Until `n` runs are in flight (logged as started, not ended)."""
    deadline = time.monotonic() + 120
    while sum(r[3] == "running" for r in sweep_runs(root)) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the sweep made no progress"
        time.sleep(0.25)  # each look opens the catalog: not too often on a busy machine


def statuses(root: Path) -> Counter[str]:
    return Counter(r[3] for r in sweep_runs(root))


def restart(root: Path, *opts: str) -> dict[str, object]:
    """The same sweep again (with `opts`): it runs what is missing and every triple ends
    exactly once. Its JSON report."""
    done = subprocess.run(sweep_cmd(root, *opts), capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    after = ended_triples(root)
    assert set(after) == planned() and max(after.values()) == 1  # none missing, none twice
    return dict(json.loads(done.stdout))


def restart_and_check(root: Path) -> None:
    assert restart(root, *RESTART)["ran"] == len(planned())
    st = statuses(root)
    assert st == {"timeout": len(planned()), "interrupted": 2}, st  # no `running` ghost


def test_sigkill_then_restart_runs_every_triple_exactly_once(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    proc = start(root, *ENDLESS)
    wait_running(root, proc, 2)
    workers = [c for c in descendants(proc.pid) if alive(c)]
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    # its workers notice the parent is gone, log their runs as interrupted, and exit
    deadline = time.monotonic() + 15
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert workers and not any(alive(w) for w in workers)
    assert statuses(root) == {"interrupted": 2}
    # the dead sweep's claims on those two triples are taken over by the restart
    restart_and_check(root)


def test_ctrl_c_logs_runs_in_flight_as_interrupted_then_restart(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    proc = start(root, *ENDLESS)
    wait_running(root, proc, 2)
    os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C: the whole process group
    _, err = proc.communicate(timeout=30)
    # one line from the sweep (multiprocessing's resource tracker may add a warning of its
    # own, about a semaphore a stopped worker left behind: not ours to print or silence)
    assert proc.returncode == 130 and err.splitlines()[0] == "interrupted", err
    assert "Traceback" not in err and "error" not in err.lower(), err
    assert statuses(root) == {"interrupted": 2}  # on the spot: none running, none abandoned
    assert not list((root / "_leases").iterdir())  # every writer closed
    restart_and_check(root)


def test_two_identical_sweeps_at_once_split_the_work(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    procs = [start(root, "--epochs", "30", "--workers", "1") for _ in range(2)]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        reports.append(json.loads(out))
    after = ended_triples(root)
    assert set(after) == planned() and max(after.values()) == 1  # each triple once
    assert statuses(root) == {"completed": len(planned())}
    assert sum(r["ran"] for r in reports) == len(planned())
    for r in reports:  # each sweep accounts for every triple
        assert r["ran"] + r["skipped"] + r["elsewhere"] + r["held"] == r["planned"], r


def test_a_time_limit_lets_runs_in_flight_finish_and_leaves_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    # one worker, runs of 2 s each: the 3 s limit passes before the fourth run could start
    cmd = sweep_cmd(root, "--epochs", "100000", "--budget", "2", "--workers", "1")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.run([*cmd, "--time-limit", "3"], capture_output=True, text=True,
                           timeout=300, env=env)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["left"] >= 1 and report["ran"] + report["left"] == len(planned())
    assert statuses(root) == ({"timeout": report["ran"]} if report["ran"] else {})  # none cut
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["ran"] == report["left"]
    after = ended_triples(root)
    assert set(after) == planned() and max(after.values()) == 1
