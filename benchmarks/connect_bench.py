"""Connect benchmark: how long `warehouse.connect` and a first query take on a warehouse of
many small parts (what a sweep or a service that logs run by run leaves before a compaction),
against the scan the catalog used before, measured in the same run.

    .venv/bin/python benchmarks/connect_bench.py [--sessions 1600] [--reps 5] [--write-results]

The warehouse: `--sessions` writer sessions, each one run's rows in five tables (runs,
run_ends, steps, results, events), so five parts per session. Measured, each scan in turn
(ABAB, `--reps` times, medians):
- cold: `connect` with the process's part checks forgotten (a CLI command's first connect);
- warm: `connect` again in the same process (the service's reconnects);
- query: `SELECT count(*) FROM runs` on the warm connection (the `runs` view reads four
  tables).
Scans: `signature` (the catalog's: one `read_parquet` per column signature of the parts,
unioned by name) and `union_by_name` (the baseline: one `read_parquet(union_by_name =
true)` over every part, which opens every footer each time a view binds).
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import cpu_model, git_commit, publish

import warehouse
from warehouse import Writer, catalog, parts

HEADING = "## Warehouse connect over many parts (`benchmarks/connect_bench.py`)"
STEPS = 100  # step rows per run


def baseline_scan(table: str, files: list[Path]) -> str:
    """The catalog's scan before: every part in one `read_parquet(union_by_name = true)`."""
    listed = ", ".join(catalog._lit(str(f)) for f in files)
    return catalog.with_later_columns(
        table, f"SELECT * FROM read_parquet([{listed}], union_by_name = true, "
               "hive_partitioning = true, hive_types = {'date': 'DATE'})")


SCANS: dict[str, Callable[[str, list[Path]], str]] = {"signature": catalog.scan_sql,
                                                      "union_by_name": baseline_scan}


@contextmanager
def scanning_with(scan: str) -> Iterator[None]:
    """`connect` builds the raw views with the scan named `scan` meanwhile."""
    catalog.scan_sql = SCANS[scan]  # type: ignore[assignment]
    try:
        yield
    finally:
        catalog.scan_sql = SCANS["signature"]  # type: ignore[assignment]


def build(root: Path, sessions: int) -> None:
    """One writer session per run, each committing one part per table it logs."""
    rng = np.random.default_rng(0)
    now = dt.datetime.now(dt.UTC)
    for i in tqdm(range(sessions), desc="writing sessions", unit="session", file=sys.stderr):
        run = f"run-{i:06d}"
        with Writer(root) as w:
            w.append_batch("runs", {"run_id": [run], "problem_id": ["p"], "problem_name": ["p"],
                                    "task": ["regression"], "config": ["{}"], "seed": [i],
                                    "device": ["cpu"], "origin": ["bench"],
                                    "started_at": [now]})
            w.append_batch("steps", {"run_id": [run] * STEPS, "step": list(range(STEPS)),
                                     "epoch": [0] * STEPS, "loss": rng.random(STEPS),
                                     "lr": [1e-3] * STEPS, "batch_size": [32] * STEPS})
            w.append_batch("results", {"run_id": [run], "step": [STEPS], "epoch": [0],
                                       "split": ["test"], "metric": ["r2"],
                                       "value": [float(rng.random())], "final": [True]})
            w.append_batch("events", {"run_id": [run], "step": [STEPS // 2],
                                      "kind": ["rewrite"], "name": ["widen"], "at": [now]})
            w.append_batch("run_ends", {"run_id": [run], "status": ["completed"],
                                        "steps": [STEPS], "ended_at": [now]})


def forget_checks() -> None:
    """A fresh process's part checks (`parts` caches them per file)."""
    with parts._lock:
        parts._verdicts.clear()
        parts._fits.clear()


def measure(root: Path, scan: str) -> tuple[float, float, float]:
    """Cold connect, warm connect and the query, in seconds, with `scan`."""
    with scanning_with(scan):
        forget_checks()
        t0 = time.perf_counter()
        warehouse.connect(root).close()
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        conn = warehouse.connect(root)
        warm = time.perf_counter() - t0
        t0 = time.perf_counter()
        conn.execute("SELECT count(*) FROM runs").fetchone()
        query = time.perf_counter() - t0
        conn.close()
    return cold, warm, query


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=1600,
                    help="writer sessions, one run and five parts each (default 1600)")
    ap.add_argument("--reps", type=int, default=5, help="measures of each scan (default 5)")
    ap.add_argument("--write-results", action="store_true",
                    help="replace this benchmark's section of benchmarks/RESULTS.md")
    args = ap.parse_args()
    if args.sessions < 1 or args.reps < 1:
        ap.error("--sessions and --reps: 1 or more")
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "wh"
        build(root, args.sessions)
        n_parts = sum(len(warehouse.layout.visible_parts(root, t)) for t in catalog.TABLES
                      if (root / t).is_dir())
        # the two scans must read the same rows before either is timed
        answers = {}
        for scan in SCANS:
            with scanning_with(scan):
                answers[scan] = warehouse.connect(root).execute(
                    "SELECT count(*), round(sum(value), 9) FROM results").fetchone()
        if len(set(answers.values())) != 1:
            print(f"error: the scans read different rows: {answers}", file=sys.stderr)
            return 1
        times: dict[str, list[tuple[float, float, float]]] = {s: [] for s in SCANS}
        for _ in tqdm(range(args.reps), desc="measuring", file=sys.stderr):
            for scan in SCANS:  # ABAB: drift on a shared machine falls on both
                times[scan].append(measure(root, scan))
    took = time.perf_counter() - t_start
    lines = [HEADING, "",
             f"{dt.date.today()}, {cpu_model()}, commit {git_commit()}; `python "
             f"benchmarks/connect_bench.py {' '.join(sys.argv[1:])}` ({took:.0f} s)", "",
             f"{args.sessions} writer sessions, {n_parts} parts; each scan measured "
             f"{args.reps} time{'s' * (args.reps > 1)} (the median), the scans taking turns.",
             "",
             "| scan | cold connect (s) | warm connect (s) | `SELECT count(*) FROM runs` (s) |",
             "|---|---|---|---|"]
    for scan, rows in times.items():
        cold, warm, query = (statistics.median(r[k] for r in rows) for k in range(3))
        lines.append(f"| {scan} | {cold:.3f} | {warm:.3f} | {query:.3f} |")
    text = "\n".join(lines)
    publish(text, args.write_results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
