"""How far does one proposer's pick move when it is refitted? The pack's configuration fitted
afresh on its corpus restricted to each of several subsets of the corpus's seeds (each fit's
targets average only those seeds' outcomes), every fit scored on the same held-out problems.

    .venv/bin/python benchmarks/induction_refits.py --meta M [M ...] --seeds 01234567,012345,234567
    .venv/bin/python benchmarks/induction_paired.py --a DIR/012345 --b DIR/234567

Prints, per seed subset, the proposer's mean normalized error at k = 1, 3, 5 and the share of
the default → full-search gap its top-1 closes; then the spread of the top-1 over the subsets.
With `--save DIR` each fit's rows go to DIR/<subset> for `induction_paired.py`. A subset of
all the corpus's seeds reproduces the shipped pack's figures (a check that the fresh fit is
the pack's). The paired test of two such fits shows what a bootstrap over problems does not
see: the fit's own variability (RESULTS.md, "How far does the single pick move").
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from induction_bench import save_result, table
from induction_holdout import on_seeds, read_metas
from machine import cpu_model, git_commit
from script_errors import fail

from aicf_induct.errors import AicfError, ConfigError
from aicf_induct.induction.evaluate import evaluate_holdout, gap_closed
from aicf_induct.induction.meta_dataset import complete_problems
from aicf_induct.induction.pack import DEFAULT_PACK, load_pack


def seed_subsets(text: str, corpus_seeds: set[int]) -> list[tuple[int, ...]]:
    """'01234567,012345' -> [(0, ..., 7), (0, ..., 5)]: each subset a run of seed digits,
    every seed one the corpus holds."""
    subsets = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ConfigError(f"--seeds: {part!r} is not a run of seed digits (e.g. 012345)")
        seeds = tuple(sorted({int(c) for c in part}))
        missing = sorted(set(seeds) - corpus_seeds)
        if missing:
            raise ConfigError(f"--seeds: the corpus holds no seed {missing[0]} (it holds "
                              f"{sorted(corpus_seeds)})")
        subsets.append(seeds)
    return subsets


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--meta", metavar="FILE", nargs="+", required=True,
                    help="held-out meta-datasets (several: scored as one set)")
    ap.add_argument("--seeds", required=True,
                    help="comma-separated seed subsets of the corpus, each a run of digits")
    ap.add_argument("--pack", default=str(DEFAULT_PACK),
                    help="knowledge pack whose corpus and configuration are refitted "
                         "(default: the shipped one)")
    ap.add_argument("--default", metavar="KEY", help="the default MLP's candidate (default: "
                                                      "MLPSpec() with the default recipe)")
    ap.add_argument("--save", metavar="DIR", help="write each fit's rows to DIR/<subset>")
    args = ap.parse_args()
    try:
        return run(args)
    except AicfError as err:
        fail(str(err))  # one line, status 2


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    held, partial = complete_problems(read_metas(args.meta))
    corpus = load_pack(args.pack).seed_meta()
    subsets = seed_subsets(args.seeds, set(corpus["seed"].astype(int)))
    rows = []
    for seeds in subsets:
        name = "".join(str(s) for s in seeds)
        res = evaluate_holdout(on_seeds(corpus, seeds), held, default=args.default).result
        if args.save:
            save_result(res, Path(args.save) / name)
        c = res.choices[res.choices["method"] == "proposer"]
        mean = c.groupby("k")["norm_error"].mean()
        rows.append({"seeds": name, "top-1": mean[1], "top-3": mean[3], "top-5": mean[5],
                     "gap closed": f"{gap_closed(res):.0%}",
                     "problems": res.choices["problem_id"].nunique()})
    out = pd.DataFrame(rows)
    top1 = out["top-1"].to_numpy(float)
    print(f"{cpu_model()}, commit {git_commit()}, {time.perf_counter() - t0:.0f} s. "
          f"The pack's configuration refitted on {len(subsets)} seed subsets of its corpus, "
          f"each scored on the same held-out problems"
          + (f"; left out, not fully trained: {', '.join(partial)}" if partial else "") + ".")
    print()
    print(table(out))
    print()
    print(f"Top-1 over the subsets: {top1.min():.3f}-{top1.max():.3f}"
          + (f", sd {np.std(top1, ddof=1):.3f}" if len(top1) > 1 else "") + ".")
    return 0


if __name__ == "__main__":
    sys.exit(main())
