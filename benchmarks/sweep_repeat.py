"""Two sweeps of the same runs set side by side, run by run: is a sweep reproducible?

    aicf-induct corpus build --problems P --seeds 1 --engine gpu --warehouse /tmp/a
    aicf-induct corpus meta --warehouse /tmp/a -o a.parquet      # and again into b.parquet
    .venv/bin/python benchmarks/sweep_repeat.py a.parquet b.parquet

Each side is a meta-dataset file (`aicf-induct corpus meta`). Runs are matched on (problem,
candidate, seed); the two files must hold the same runs. Prints, for the validation and test
scores and `param_steps` (parameters × steps trained): the share of runs whose values are
bit-identical, the largest and mean absolute difference, and how many runs differ by more than
0.01 (a score) or stopped at another epoch (`param_steps`). Two sweeps of one commit on one
machine should be identical; a change to the GEMM variants may move the rounding, which
training can grow.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from aicf_induct.errors import DataError
from aicf_induct.induction.meta_file import read_meta_file

KEY = ["problem", "candidate", "seed"]
COLUMNS = {"val_score": 0.01, "test_score": 0.01, "param_steps": 0.0}  # column: "far" above


def compare(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per compared column: runs, identical share, max and mean |a − b|, runs far
    apart. The two must hold the same runs (a ValueError names one that is not in both)."""
    for x, y, name in ((a, b, "the second"), (b, a, "the first")):
        extra = x[KEY].merge(y[KEY], on=KEY, how="left", indicator=True)
        extra = extra[extra["_merge"] == "left_only"]
        if len(extra):
            run = extra.iloc[0]
            raise ValueError(f"{len(extra)} runs are not in {name} file, e.g. problem "
                             f"{run['problem']!r}, candidate {run['candidate']}, seed "
                             f"{run['seed']}")
    both = a.merge(b, on=KEY, suffixes=("_a", "_b"))
    rows = []
    for col, far in COLUMNS.items():
        diff = (both[f"{col}_a"].astype(float) - both[f"{col}_b"].astype(float)).abs()
        rows.append({"column": col, "runs": len(both),
                     "identical": float(np.mean(diff == 0)), "max_abs_diff": float(diff.max()),
                     "mean_abs_diff": float(diff.mean()), "far_apart": int((diff > far).sum())})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="a meta-dataset file (aicf-induct corpus meta)")
    ap.add_argument("b", help="the other sweep's meta-dataset file")
    args = ap.parse_args(argv)
    try:
        table = compare(read_meta_file(args.a), read_meta_file(args.b))
    except (DataError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("| column | runs | identical | max abs diff | mean abs diff | far apart |")
    print("|---|---|---|---|---|---|")
    for r in table.itertuples():
        print(f"| {r.column} | {r.runs} | {r.identical:.1%} | {r.max_abs_diff:.3g} | "
              f"{r.mean_abs_diff:.3g} | {r.far_apart} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
