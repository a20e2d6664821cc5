"""The induction benchmark averaged over every half-and-half split of the corpus's seeds.

    .venv/bin/python benchmarks/induction_partitions.py (--warehouse DIR | --pack [PACK])
        [--jobs N] [--partitions N] [--ranking gain|rank|raw_rank|error] [--blend-rank R]
        [--save DIR]
        [--hedge S[,S...]] [--upside S[,S...]] [--knn-mix] [--knn-tail N]
        [--low-rank R[,R...]]

`induction_bench.py` chooses on the first half of the seeds and scores on the second, and
its swapped run the other way round: two draws of the seeds' noise, which gave the same
proposer 89 % and 25 % of the default → full-search gap. Here every (problem, method, k)
is averaged over all C(n, n/2) splits of the seeds into a choose half and a score half (70
of 8 seeds; `lopo.run_lopo_partitions`), choice and score disjoint within each, so a figure
is the expectation over draws rather than one draw's luck. The proposer's meta-model ranks
on every seed of the training problems, as the shipped pack's does (the single-draw
benchmark ranks on the score seeds); the baselines learn from every seed, as there.
Problems stay the unit of the paired tests: each contributes one mean per method.

Prints the mean normalized error per method at k = 1, 3, 5; the proposer's and the choice
oracle's top-1 against kNN-3, portfolio-3 and average-3 (Holm over the three, the issue's
goal line); the share of the default → full-search gap closed at k = 1; the top-1 against
the default and the top-3 against the full search. `--partitions N` averages the first N
splits only (the usual one first): a quicker look. `--hedge S,...`, `--upside S,...`,
`--knn-mix` and `--knn-tail N` score the proposer's top k re-chosen as a set too
(`induction/hedge.py`), against its own top k and the full search; `--low-rank R,...` scores
the low-rank order alone (`induction/lowrank.py`) as a method of its own; `--blend-rank R`
sets the rank of the low-rank order the proposer blends with its gain order (0: none).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_source import add_source_args, load_corpus
from induction_bench import (
    blend_arg,
    order_args,
    order_lines,
    order_names,
    save_result,
    section,
    set_args,
    set_lines,
    set_names,
    table,
)
from machine import cpu_model, git_commit
from script_errors import run_main

from aicf_induct.induction.baselines import resolve_default
from aicf_induct.induction.evaluate import compare
from aicf_induct.induction.lopo import LopoConfig, run_lopo_partitions, seed_partitions
from aicf_induct.induction.metamodel import RANKINGS, MetaModel


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_source_args(ap)
    ap.add_argument("--jobs", type=int, default=1, help="processes sharing the LOPO folds "
                                                        "(-1: one per core)")
    ap.add_argument("--partitions", type=int, default=0, metavar="N",
                    help="average the first N splits of the seeds only (default: all)")
    ap.add_argument("--ranking", choices=RANKINGS, default="gain",
                    help="what orders the proposer's candidates (as induction_bench.py; "
                         "default gain, the shipped pack's)")
    blend_arg(ap)
    ap.add_argument("--save", metavar="DIR",
                    help="write the averaged rows to DIR/choices.csv and DIR/calibration.csv "
                         "(the folder induction_paired.py and induction_crossfit.py read)")
    set_args(ap)
    order_args(ap)
    args = ap.parse_args()
    t0 = time.perf_counter()
    meta = load_corpus(args)
    parts = seed_partitions(meta)
    if args.partitions:
        parts = parts[:args.partitions]
    first = parts[0]
    config = LopoConfig(resolve_default(meta, None), first[0], first[1], (1, 3, 5),
                        metamodel=MetaModel(ranking=args.ranking, blend_rank=args.blend_rank),
                        sets=set_names(args),
                        orders=order_names(args))
    res = run_lopo_partitions(meta, config, parts, n_jobs=args.jobs, progress=True)
    if args.save:
        save_result(res, Path(args.save))
    n = {c: meta[c].nunique() for c in ("problem_id", "group", "candidate", "seed")}
    lines = [
        f"{cpu_model()}, commit {git_commit()}, {time.perf_counter() - t0:.0f} s. Corpus: "
        f"{n['problem_id']} problems ({n['group']} groups) × {n['candidate']} candidates × "
        f"{n['seed']} seeds; {len(parts)} splits of the seeds averaged; proposer ordered by "
        f"its {args.ranking} model"
        + (f", blended with the rank-{args.blend_rank} low-rank order." if args.blend_rank
           else "."), "",
        *section("Mean normalized error per method (each problem's mean over the splits)",
                 res, ks=(1, 3, 5)),
        "Top-1 against the default; top-3 against the full search by validation:", "",
        table(compare(res, k=1, baselines=("default",))), "",
        table(compare(res, k=3, baselines=("full_search",))), "",
        *set_lines(res, set_names(args)),
        *order_lines(res, order_names(args)),
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    run_main(main)
