"""How long `aicf-induct propose` takes from a fresh process, as a user waits for it.

    .venv/bin/python benchmarks/propose_latency.py [--runs 11] [--pack PACK]
        [--import-runs 3] [--compare PYTHON] [--write-results]

Each run starts the installed console script in a new process (what a user types, on a fresh
clone: no server, and the dataset never featurised before: each run empties the meta-features'
folder of a cache of the benchmark's own, where the pack's digest memo stays, as after a
user's first command), once for `--dataset wine` and once for a CSV file
(`file:PATH?target=y`, 300 rows of 8 numeric columns and a text column, written to a
temporary folder), alternating, and measures the wall time from the process's start to its
exit. Also read: `propose`'s own "answered in" line (loading the pack, featurising the
dataset, ranking, the part the service pays per request), so that the rest is the
interpreter's start and the imports. `--import-runs` more runs of each (default 3) under
`python -X importtime` say which packages the imports are spent in (the median per package).

`--compare PYTHON` runs the same commands in a second environment (its `aicf-induct` script
beside that interpreter, e.g. a venv with another scipy), interleaved run by run with this
one, so that both are measured under the same load: the baseline of a change to the
environment, in the same run.

Prints the median, 90th percentile and maximum per dataset against the 2 s goal, and the
import breakdown; `--write-results` replaces the "Proposal latency" section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import cpu_model, git_commit, publish

from aicf_induct.problems.features_cache import FOLDER as FEATURES_FOLDER

GOAL_S = 2.0
HEADING = "## Proposal latency from a fresh process (`benchmarks/propose_latency.py`)"
# Top-level packages whose imports the breakdown names (the rest is summed as "other").
PACKAGES = ("numpy", "scipy", "sklearn", "pandas", "pyarrow", "aicf_induct")
LIBRARIES = ("numpy", "scipy", "scikit-learn", "pandas", "pyarrow")
ANSWERED = re.compile(r"answered in ([0-9.]+) s")


def write_csv(folder: Path) -> Path:
    """A user's table: 300 rows, 8 numeric columns, one text column, a binary target."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 8))
    colour = rng.choice(["red", "green", "blue"], size=300)
    y = (x[:, 0] + x[:, 1] * x[:, 2] + (colour == "red") + rng.normal(size=300) > 0.5)
    lines = [",".join([*(f"x{i}" for i in range(8)), "colour", "y"])]
    lines += [",".join([*(f"{v:.6f}" for v in row), c, str(int(t))])
              for row, c, t in zip(x, colour, y, strict=True)]
    path = folder / "my.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def command(python: str, dataset: str, pack: str | None) -> list[str]:
    script = Path(python).with_name("aicf-induct")
    return [str(script), "propose", "--dataset", dataset, *(["--pack", pack] if pack else [])]


def cache_env(cache: Path) -> dict[str, str]:
    """The environment of a run: the benchmark's cache, its meta-features emptied."""
    shutil.rmtree(cache / FEATURES_FOLDER, ignore_errors=True)
    return {**os.environ, "AICF_CACHE_DIR": str(cache)}


def timed_run(argv: list[str], cache: Path) -> tuple[float, float]:
    """(wall seconds from start to exit, propose's own "answered in" seconds)."""
    env = cache_env(cache)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    found = ANSWERED.search(done.stderr)
    if found is None:
        raise SystemExit(f"no 'answered in' line from {' '.join(argv)}:\n{done.stderr}")
    return wall, float(found.group(1))


def import_breakdown(python: str, argv: list[str], cache: Path) -> dict[str, float]:
    """Seconds of import per top-level package (each module's own time, `-X importtime`'s
    "self" column, summed by its first name), one run."""
    code = ("import sys; from aicf_induct.cli.main import main; "
            f"sys.argv = {['aicf-induct', *argv[1:]]!r}; sys.exit(main())")
    done = subprocess.run([python, "-X", "importtime", "-c", code],
                          capture_output=True, text=True, env=cache_env(cache))
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} under -X importtime failed:\n{done.stderr[-2000:]}")
    spent: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        top = name.strip().split(".")[0]
        key = top if top in PACKAGES else "other"
        spent[key] = spent.get(key, 0.0) + int(own) / 1e6
    return spent


def median_breakdown(runs: list[dict[str, float]]) -> dict[str, float]:
    return {p: statistics.median(r.get(p, 0.0) for r in runs) for p in (*PACKAGES, "other")}


def percentile(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q))


def libraries(python: str) -> str:
    """The versions that decide the imports' cost, in `python`'s environment."""
    code = ("import platform; from importlib.metadata import version; print(', '.join("
            "['Python ' + platform.python_version()] + [p + ' ' + version(p) for p in "
            f"{LIBRARIES!r}]))")
    return subprocess.run([python, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def report(results: dict[str, list[tuple[float, float]]],
           imports: dict[str, dict[str, float]], envs: dict[str, str], command_line: str,
           runs: int, import_runs: int, took: float) -> str:
    lines = [
        HEADING, "",
        f"Measured {dt.date.today()} on {cpu_model()} (commit {git_commit()}), {runs} fresh "
        f"processes per dataset and environment, interleaved, in {took:.0f} s. One run of:",
        "", "```", command_line, "```", "",
        *(f"- {label}: {libs}" for label, libs in envs.items()), "",
        f"| environment | dataset | median wall | 90th percentile | max | within {GOAL_S:g} s "
        "| propose's own work (median) | start and imports (median) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, rows in results.items():
        walls = [w for w, _ in rows]
        own = [a for _, a in rows]
        rest = [w - a for w, a in rows]
        within = sum(w <= GOAL_S for w in walls)
        lines.append(f"| {key} | {statistics.median(walls):.2f} s | "
                     f"{percentile(walls, 90):.2f} s | {max(walls):.2f} s | "
                     f"{within} of {len(walls)} | {statistics.median(own):.2f} s | "
                     f"{statistics.median(rest):.2f} s |")
    lines += ["", f"Import time by package, the median of {import_runs} `-X importtime` runs "
              "each (each module's own time, summed by top-level name):", "",
              "| environment | dataset | " + " | ".join(PACKAGES) + " | other | total |",
              "|---|---|" + "---|" * (len(PACKAGES) + 2)]
    for key, spent in imports.items():
        cells = [f"{spent.get(p, 0.0):.2f}" for p in (*PACKAGES, "other")]
        lines.append(f"| {key} | " + " | ".join(cells) + f" | {sum(spent.values()):.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=11, help="fresh processes per dataset "
                                                         "(default 11)")
    ap.add_argument("--import-runs", type=int, default=3, metavar="N",
                    help="-X importtime runs per dataset for the breakdown (default 3)")
    ap.add_argument("--pack", default=None, help="knowledge pack (default: the shipped one)")
    ap.add_argument("--compare", metavar="PYTHON",
                    help="a second environment's interpreter, measured interleaved with "
                         "this one (the baseline of an environment change)")
    ap.add_argument("--write-results", action="store_true",
                    help="replace this benchmark's section of benchmarks/RESULTS.md")
    args = ap.parse_args()
    if args.runs < 1 or args.import_runs < 1:
        ap.error("--runs and --import-runs must be >= 1")
    t0 = time.perf_counter()
    pythons = {"this": sys.executable, **({"compared": args.compare} if args.compare else {})}
    for python in pythons.values():
        if not Path(python).is_file() or not Path(python).with_name("aicf-induct").is_file():
            ap.error(f"--compare: no interpreter with an aicf-induct script beside it at "
                     f"{python}")
    envs = {label: libraries(python) for label, python in pythons.items()}
    with tempfile.TemporaryDirectory() as tmp:
        datasets = {"wine": "wine", "my.csv": f"file:{write_csv(Path(tmp))}?target=y"}
        cache = Path(tmp) / "cache"
        argvs = {f"{label} | {name}": (python, command(python, ds, args.pack))
                 for label, python in pythons.items() for name, ds in datasets.items()}
        for _, argv in argvs.values():  # warm the OS's file cache: every user's second try
            timed_run(argv, cache)
        results: dict[str, list[tuple[float, float]]] = {key: [] for key in argvs}
        for _ in range(args.runs):
            for key, (_, argv) in argvs.items():
                results[key].append(timed_run(argv, cache))
        imports = {key: median_breakdown([import_breakdown(python, argv, cache)
                                          for _ in range(args.import_runs)])
                   for key, (python, argv) in argvs.items()}
    # the compared interpreter's path is this machine's: the report names its libraries
    command_line = " ".join(["python benchmarks/propose_latency.py",
                             *("PYTHON" if a == args.compare else a for a in sys.argv[1:])])
    text = report(results, imports, envs, command_line, args.runs, args.import_runs,
                  time.perf_counter() - t0)
    publish(text, args.write_results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
