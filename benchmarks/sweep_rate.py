"""A build's steady-state rate: runs finished per hour in a window of its time line.

    aicf-induct corpus build --problems P --seeds 6 --engine gpu --gpu-processes 8 \
        --time-limit 200 --warehouse /tmp/a            # and again, --repeatable, into /tmp/b
    .venv/bin/python benchmarks/sweep_rate.py /tmp/a /tmp/b --window 80,200

A build's own runs/hour (its `--json` report) counts its start (problems loaded, processes and
GPU started, kernels tuned) and its tail (the last runs, the GPU half idle); two settings
whose difference lies in the steady state between (a tuned kernel against the default one)
are measured here instead: the runs of each warehouse whose end (`runs.started_at` +
`wall_time_s`) falls in [FROM, TO) seconds after the warehouse's first run started. Pick TO
no later than the build's `--time-limit`, after which no run starts. Prints a Markdown table,
one row per warehouse: its runs, those finished in the window, their rate an hour, and the
mean wall time of a run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

import warehouse
from aicf_induct.errors import AicfError, ConfigError, DataError


def parse_window(text: str) -> tuple[float, float]:
    """"FROM,TO" in seconds, 0 <= FROM < TO."""
    try:
        start, end = (float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"--window must be FROM,TO in seconds, got {text!r}") from None
    if not 0 <= start < end:
        raise ConfigError(f"--window needs 0 <= FROM < TO, got {text!r}")
    return start, end


def run_times(root: Path) -> pd.DataFrame:
    """Each run's start and end, seconds after the warehouse's first run started."""
    if not (root / "runs").is_dir():
        raise DataError(f"{root}: no warehouse with runs here")
    with warehouse.connect(root) as conn:
        df = conn.sql("SELECT started_at, wall_time_s FROM runs "
                      "WHERE wall_time_s IS NOT NULL").df()
    if df.empty:
        raise DataError(f"{root}: the warehouse holds no finished run")
    start = (df["started_at"] - df["started_at"].min()).dt.total_seconds()
    return pd.DataFrame({"start": start, "end": start + df["wall_time_s"],
                         "wall": df["wall_time_s"]})


def rate_row(root: Path, window: tuple[float, float]) -> dict[str, object]:
    times = run_times(root)
    start, end = window
    last = float(times["end"].max())
    if last < end:  # the rate would count the time after the build as time running
        raise ConfigError(f"{root}: its last run ended {last:.0f} s after its first started, "
                          f"before the window's end ({end:g} s): pick TO <= {last:.0f}")
    finished = int(((times["end"] >= start) & (times["end"] < end)).sum())
    return {"warehouse": str(root), "runs": len(times), "finished": finished,
            "runs_per_hour": 3600 * finished / (end - start),
            "mean_wall_s": float(times["wall"].mean()), "last_end_s": last}


def table(rows: list[dict[str, object]], window: tuple[float, float]) -> str:
    a, b = (f"{x:g}" for x in window)
    lines = [f"| warehouse | runs | finished in [{a}, {b}) s | runs/hour there | mean run wall "
             f"| last run ended |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['warehouse']} | {r['runs']} | {r['finished']} | {r['runs_per_hour']:,.0f} "
              f"| {r['mean_wall_s']:.1f} s | {r['last_end_s']:.0f} s |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("warehouses", nargs="+", type=Path, metavar="WAREHOUSE",
                    help="a build's warehouse (one row each)")
    ap.add_argument("--window", default="80,200", metavar="FROM,TO",
                    help="seconds after each build's first run started (default 80,200)")
    args = ap.parse_args(argv)
    try:
        window = parse_window(args.window)
        rows = [rate_row(root, window) for root in args.warehouses]
    except AicfError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(table(rows, window))
    return 0


if __name__ == "__main__":
    sys.exit(main())
