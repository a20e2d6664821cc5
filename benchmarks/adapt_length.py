"""What an adaptive run's step costs as the run grows longer: a cost per step that rises with
the step count is work that grows with the run (each evaluation's snapshot once copied the
whole evaluation history through JSON, so 5,000 steps of wine took 11 s and 10,000 took 37 s).

    .venv/bin/python benchmarks/adapt_length.py [--steps 1000,4000,16000] [--runs 3]
        [--compare DIR] [--write-results]

Each measurement is one fresh process (this interpreter, a tree's own package first on the
path) that loads `wine`, builds an `AdaptiveRun` of the default MLP with no rewrites (a
policy that never proposes one: what is timed is the loop, its evaluations and snapshots),
evaluating at each epoch's end, with no early stop, and times `run()` alone. `--compare DIR`
runs the same from a second checkout (a `git worktree` of the commit before a change),
interleaved run by run, so both are measured under the same load: the baseline in the same
run. Prints the median milliseconds per step for each step count and tree;
`--write-results` replaces this benchmark's section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import cpu_model, git_commit, publish
from script_errors import run_main

HEADING = "## Adaptive run length (`benchmarks/adapt_length.py`)"
REPO = Path(__file__).resolve().parents[1]
# one run, in the tree's own package: prints {"package": ..., "seconds": ...}
CHILD = """
import json, sys, time
import aicf_induct
from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.problems import load_problem
from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
from aicf_induct.runtime.policies import ProposalPolicy
from aicf_induct.runtime.trainer import TrainConfig

steps = int(sys.argv[1])
problem = load_problem("wine")
graph = mlp_graph(parse_model_spec("mlp"), problem.n_features, problem.n_outputs)
run = AdaptiveRun(problem, graph, TrainConfig(seed=0), AdaptConfig(steps=steps, early_stop=0),
                  ProposalPolicy(lambda obs: []), recorder=MemoryRecorder())
t0 = time.perf_counter()
result = run.run()
seconds = time.perf_counter() - t0
assert result.steps == steps, result.status
print(json.dumps({"package": aicf_induct.__file__, "seconds": seconds}))
"""


def one_run(tree: Path, steps: int) -> float:
    """Seconds of `run()` for `steps` steps, in a fresh process on `tree`'s package."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(steps)], cwd=tree, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: the run of {steps} steps failed:\n{done.stderr}")
    out = json.loads(done.stdout.splitlines()[-1])
    if not Path(out["package"]).is_relative_to(tree.absolute()):
        raise SystemExit(f"{tree}: Python imported aicf_induct from {out['package']}")
    return float(out["seconds"])


def step_counts(text: str) -> list[int]:
    try:
        counts = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma list of positive step counts")
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=step_counts, default=[1000, 4000, 16000], metavar="LIST",
                    help="step counts to time (default 1000,4000,16000)")
    ap.add_argument("--runs", type=int, default=3, metavar="N",
                    help="runs per step count and tree (default 3)")
    ap.add_argument("--compare", type=Path, default=None, metavar="DIR",
                    help="a second checkout to time interleaved with this one")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    if args.compare is not None and not (args.compare / "aicf_induct" / "runtime").is_dir():
        ap.error(f"--compare: no aicf_induct checkout at {args.compare}")
    trees = {"this": REPO, **({"compared": args.compare.resolve()} if args.compare else {})}
    seconds: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.runs):
        for steps in args.steps:
            for name, tree in trees.items():
                seconds.setdefault((name, steps), []).append(one_run(tree, steps))
                print(f"{name} {steps}: {seconds[name, steps][-1]:.2f} s", file=sys.stderr)
    commits = ", ".join(f"{name} {git_commit(tree)}" for name, tree in trees.items())
    lines = [HEADING, "",
             f"Measured {dt.date.today()} on {cpu_model()} ({commits}), {args.runs} fresh "
             "processes per step count and tree, interleaved:", "", "```",
             f"python benchmarks/adapt_length.py --steps "
             f"{','.join(map(str, args.steps))} --runs {args.runs}"
             + (" --compare DIR" if args.compare else ""), "```", "",
             "| tree | steps | run() median | ms per step |", "|---|---:|---:|---:|"]
    for (name, steps), values in seconds.items():
        median = statistics.median(values)
        lines.append(f"| {name} | {steps:,} | {median:.2f} s | {1000 * median / steps:.2f} |")
    publish("\n".join(lines) + "\n", args.write_results)
    return 0


if __name__ == "__main__":
    run_main(main)
