"""How long `aicf-induct --help` and each command's `--help` take from a fresh process, and
which heavy libraries they import: the start every command pays before it does anything.

    .venv/bin/python benchmarks/cli_start.py [--runs 7] [--compare DIR] [--commands LIST]
        [--write-results]

Each run starts `python -m aicf_induct ARGS` in a new process (this interpreter; the tree's
own package on the path) for the top-level `--help` and for `COMMAND --help` of every
command, and measures the wall time from its start to its exit. `--compare DIR` runs the
same command lines from a second checkout (a `git worktree` of the commit before a change,
say), interleaved run by run with this one, so that both are measured under the same load:
the baseline, in the same run. One more process per command line and tree says which of
scikit-learn, scipy, pandas and DuckDB it imported.

Prints the median per command line and tree; `--write-results` replaces this benchmark's
section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import cpu_model, git_commit, publish
from script_errors import run_main

from aicf_induct.cli.main import COMMAND_MODULES

HEADING = "## Command-line start (`benchmarks/cli_start.py`)"
HEAVY = ("sklearn", "scipy", "pandas", "duckdb")  # what a command's start can do without
REPO = Path(__file__).resolve().parents[1]
PROBE = ("import contextlib, io, json, sys\n"
         "import aicf_induct\n"
         "from aicf_induct.cli.main import main\n"
         "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
         "    main(sys.argv[1:])\n"
         f"print(json.dumps([aicf_induct.__file__, sorted({{m.split('.')[0] for m in "
         f"sys.modules}} & {set(HEAVY)!r})]))\n")


COMMANDS = [name for names in COMMAND_MODULES.values() for name in names]  # as --help lists


def command_lines(commands: list[str]) -> list[list[str]]:
    """`--help`, then `COMMAND --help` for each of `commands`."""
    return [["--help"], *([name, "--help"] for name in commands)]


def command_list(text: str) -> list[str]:
    """--commands: a comma list of the tool's commands."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in COMMANDS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{', '.join(unknown) or repr(text)}: not a command of aicf-induct "
            f"(its commands: {', '.join(COMMANDS)})")
    return names


def env_of(tree: Path) -> dict[str, str]:
    """The environment a tree's commands run in: its own package first on the path."""
    return {**os.environ, "PYTHONPATH": str(tree)}


def timed_run(tree: Path, argv: list[str]) -> float:
    """Wall seconds of `python -m aicf_induct ARGV` from `tree`, start to exit."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "aicf_induct", *argv], cwd=tree,
                          env=env_of(tree), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"aicf-induct {' '.join(argv)} in {tree} failed:\n{done.stderr}")
    return wall


def imported(tree: Path, argv: list[str]) -> list[str]:
    """Which of `HEAVY` the command line imports from `tree` (whose package it must be)."""
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=tree, env=env_of(tree),
                          capture_output=True, text=True, check=True)
    where, heavy = json.loads(done.stdout.splitlines()[-1])
    if not Path(where).is_relative_to(tree.absolute()):  # (a linked package is the tree's)
        raise SystemExit(f"{tree}: Python imported aicf_induct from {where}, not from the tree")
    return list(heavy)


def report(walls: dict[str, dict[str, list[float]]], heavy: dict[str, dict[str, list[str]]],
           trees: dict[str, Path], command_line: str, runs: int, took: float) -> str:
    labels = list(trees)
    commits = ", ".join(f"{label} {git_commit(tree)}" for label, tree in trees.items())
    head = " | ".join(f"{label}: median" for label in labels)
    lines = [HEADING, "",
             f"Measured {dt.date.today()} on {cpu_model()} ({commits}), {runs} fresh "
             f"processes per command line and tree, interleaved, in {took:.0f} s:", "",
             "```", command_line, "```", "",
             f"| command line | {head} |"
             + (" this − compared |" if len(labels) == 2 else "")
             + " " + " | ".join(f"{label}: imports of {', '.join(HEAVY)}" for label in labels)
             + " |",
             "|---|" + "---|" * (2 * len(labels) + (len(labels) == 2))]
    for line, by_tree in walls.items():
        medians = [statistics.median(by_tree[label]) for label in labels]
        cells = [f"{m:.2f} s" for m in medians]
        if len(labels) == 2:
            cells.append(f"{medians[0] - medians[1]:+.2f} s")
        cells += [", ".join(heavy[line][label]) or "none" for label in labels]
        lines.append(f"| `aicf-induct {line}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7,
                    help="fresh processes per command line and tree (default 7)")
    ap.add_argument("--compare", metavar="DIR", type=Path,
                    help="a second checkout, measured interleaved with this one (the baseline)")
    ap.add_argument("--commands", type=command_list, default=COMMANDS, metavar="LIST",
                    help="comma list of the commands whose --help to time, beside the "
                         "top-level --help (default: every command)")
    ap.add_argument("--write-results", action="store_true",
                    help="replace this benchmark's section of benchmarks/RESULTS.md")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    trees = {"this": REPO}
    if args.compare is not None:
        if not (args.compare / "aicf_induct" / "cli" / "main.py").is_file():
            ap.error(f"--compare: no aicf_induct checkout at {args.compare}")
        trees["compared"] = args.compare
    t0 = time.perf_counter()
    lines = {" ".join(argv): argv for argv in command_lines(args.commands)}
    heavy = {line: {label: imported(tree, argv) for label, tree in trees.items()}
             for line, argv in lines.items()}  # (also warms the OS's file cache)
    walls: dict[str, dict[str, list[float]]] = {
        line: {label: [] for label in trees} for line in lines}
    for _ in range(args.runs):
        for line, argv in lines.items():
            for label, tree in trees.items():
                walls[line][label].append(timed_run(tree, argv))
    command_line = " ".join(["python benchmarks/cli_start.py",
                             *("DIR" if a == str(args.compare) else a for a in sys.argv[1:])])
    text = report(walls, heavy, trees, command_line, args.runs, time.perf_counter() - t0)
    publish(text, args.write_results)
    return 0


if __name__ == "__main__":
    run_main(main)
