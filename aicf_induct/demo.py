"""`make demo`: the loop end to end on bundled data, in a few minutes on two cores.

Each step is an `aicf-induct` command, printed before it runs, so the demo doubles as a tour
of the CLI. Everything is logged into one warehouse (./aicf_warehouse, or $AICF_WAREHOUSE):
explore it afterwards with `aicf-induct runs`, `report` and `sql`.
"""

from __future__ import annotations

import shlex
import sys

from aicf_induct.cli.main import main as cli

SEED = "1"  # split, init and batch order; see README ("Reproducing the figures")

STEPS: list[tuple[str, list[str]]] = [
    ("Train one model and log the run (IR snapshot, per-step dynamics, results)",
     ["train", "--dataset", "wine", "--model", "mlp:depth=2,width=64,act=gelu,norm=layernorm",
      "--epochs", "60", "--seed", SEED, "--quiet"]),
    ("Sweep structures over problems into the warehouse (resumable; rerun skips what is done)",
     ["sweep", "--problems", "iris,wine,breast_cancer,diabetes", "--space", "tiny3",
      "--seeds", "2", "--workers", "2", "--epochs", "40", "--quiet"]),
    ("Adaptive training: start too small, grow on triggers, roll back an injected loss spike",
     ["adapt", "--dataset", "wine", "--policy", "rules", "--steps", "400",
      "--inject-spike", "250", "--seed", SEED]),
    ("Draw the adaptive run: loss with its triggers, rewrites and the rollback marked",
     ["plot", "run", "latest", "-o", "demo_adapt_run.png"]),
    ("Which structure won on each problem (SQL in warehouse/sql/report_leaderboard.sql)",
     ["report", "leaderboard"]),
    ("What rewrites did to the metrics",
     ["report", "rewrite_effects"]),
    ("Any SQL over the warehouse views",
     ["sql", "SELECT problem_name, status, count(*) AS runs FROM runs "
             "GROUP BY ALL ORDER BY problem_name, status"]),
]


def main() -> int:
    for k, (title, args) in enumerate(STEPS, start=1):
        print(f"\n== {k}/{len(STEPS)} {title}\n$ aicf-induct {shlex.join(args)}", flush=True)
        code = cli(args)
        if code:
            print(f"demo step {k} failed with status {code}", file=sys.stderr)
            return code
    print("\nexplore: aicf-induct serve (the dashboard at http://127.0.0.1:8000/) | "
          "aicf-induct runs | aicf-induct report --help | aicf-induct sql --help")
    return 0


if __name__ == "__main__":
    sys.exit(main())
