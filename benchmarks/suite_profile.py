"""Where the test suite's CPU goes: a summary of a py-spy profile of every process it starts.

Record the profile (py-spy is not a dependency of the project: `pip install py-spy`), then
summarise it:

    OMP_NUM_THREADS=1 py-spy record --subprocesses --nonblocking --rate 10 --format raw \\
        -o suite.raw -- .venv/bin/pytest -q -n auto --maxprocesses 4 -m "not cuda"
    python benchmarks/suite_profile.py suite.raw

Each line of the raw format is one stack (`process P:"command";frame;frame ... COUNT`). The
summary counts each stack once in the first category it falls in, in this order: importing
modules (any `_find_and_load` frame), fitting scikit-learn's gradient boosting, the warehouse
(DuckDB and `warehouse/`), the rest; then the libraries whose imports cost most, and the
share of processes started by `multiprocessing` (spawned pool workers and engines import
everything again; a forkserver's workers start with what the server imported).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

IMPORTS = "importing modules"
CATEGORIES = (  # (name, text of a frame that puts a stack in it), the first match wins
    (IMPORTS, ("_find_and_load",)),
    ("gradient boosting fits", ("gradient_boosting.py",)),
    ("warehouse (DuckDB, warehouse/)", ("duckdb", "warehouse/")),
)
OWN = ("aicf_induct", "api", "warehouse", "tests", "benchmarks", "<string>")
# the benchmark scripts, which import each other as top-level modules: this project's too
SCRIPTS = frozenset(p.name for p in Path(__file__).resolve().parent.glob("*.py"))


def stacks(lines: Iterable[str]) -> Iterable[tuple[str, list[str], int]]:
    """(the innermost process's command, the frames outermost first, the sample count) of
    each well-formed line; a command spanning lines (`python -c` with newlines) breaks its
    stack's line, which is skipped."""
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not count.isdigit():
            continue
        parts = stack.split(";")
        procs = [p for p in parts if p.startswith("process ")]
        command = re.sub(r'^process \d+:"?', "", procs[-1]).rstrip('"') if procs else "?"
        yield command, [p for p in parts if not p.startswith("process ")], int(count)


def imported_library(frames: list[str]) -> str | None:
    """The first module not of this project's (nor a benchmark script) that an import in
    `frames` runs: whose import the stack's time is."""
    first = next(i for i, f in enumerate(frames) if "_find_and_load" in f)
    for f in frames[first:]:
        m = re.match(r"<module> \(([^/:)]+)", f)
        if m is None or m.group(1).startswith(OWN) or m.group(1) in SCRIPTS:
            continue
        return m.group(1).removesuffix(".py")
    return None


def summarise(lines: Iterable[str]) -> dict[str, Counter[str]]:
    """Sample counts by category, by library imported (`imported_library`), and by whether
    the process was started by multiprocessing."""
    out: dict[str, Counter[str]] = {"category": Counter(), "library": Counter(),
                                    "origin": Counter()}
    for command, frames, n in stacks(lines):
        joined = ";".join(frames)
        name = next((c for c, marks in CATEGORIES if any(m in joined for m in marks)),
                    "the rest")
        out["category"][name] += n
        if name == IMPORTS:
            library = imported_library(frames)
            if library:
                out["library"][library] += n
        # a forkserver's children keep its command line
        started = any(m in command for m in ("multiprocessing.spawn", "spawn_main",
                                             "multiprocessing.forkserver"))
        out["origin"]["multiprocessing children" if started else "other processes"] += n
    return out


def table(counts: Counter[str], total: int, limit: int | None = None) -> str:
    rows = [f"| {k} | {v:,} | {100 * v / total:.1f} % |" for k, v in counts.most_common(limit)]
    return "\n".join(["| | samples | share of all |", "|---|---:|---:|", *rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", type=Path, help="py-spy's --format raw output")
    ap.add_argument("--libraries", type=int, default=8, help="libraries to list (default 8)")
    args = ap.parse_args(argv)
    try:
        with args.raw.open(errors="replace") as f:
            got = summarise(f)
    except OSError as err:
        print(f"error: {args.raw}: {err.strerror or err}", file=sys.stderr)
        return 2
    total = sum(got["category"].values())
    if not total:
        print(f"error: {args.raw} holds no py-spy raw stacks", file=sys.stderr)
        return 2
    print(f"{total:,} samples\n\n{table(got['category'], total)}\n")
    print(f"Imports by library:\n\n{table(got['library'], total, args.libraries)}\n")
    print(f"By process:\n\n{table(got['origin'], total)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
