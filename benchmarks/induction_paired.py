"""Two proposers scored on the same problems, set against each other problem by problem;
or one proposer's rows of several held-out sets, pooled.

    .venv/bin/python benchmarks/induction_holdout.py --meta M --pack A.parquet --save a_M
    .venv/bin/python benchmarks/induction_holdout.py --meta M --pack B.parquet --save b_M
    .venv/bin/python benchmarks/induction_paired.py --a a_M [a_N ...] [--b b_M [b_N ...]]

Each side is one or more folders of saved rows (`--save` of `induction_holdout.py`,
`induction_bench.py` or `induction_partitions.py`), pooled: several held-out sets read as one
(a problem in two folders of one side is an error). The two sides must score the same
problems. Prints, for each k: the proposer's top-k of A against B's (mean difference of the
normalized error, A − B, with its 95 % bootstrap interval; win rate; paired Wilcoxon p), and
for each side (A alone without --b): its top-1 and top-3, the share of the default →
full-search gap its top-1 closes with the share's 95 % interval, its top-1 against kNN-3,
portfolio-3 and average-3 (Holm over the three), as the other induction benchmarks print
them, its top-1 against the default and its top-3 against the full search by validation,
that last split by the problems' headroom (the default − the full search, above and below
its median), and the top-1's line and gap again with each group as one unit (`by_group`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from induction_bench import group_lines, load_result, paired, shortfall, table
from script_errors import fail, run_main

from aicf_induct.induction.evaluate import compare, gap_closed, gap_closed_ci, gap_text
from aicf_induct.induction.lopo import LopoResult

LINE = ("knn", "portfolio", "average")  # the Holm line's baselines, at k = 3


def pooled(folders: list[Path]) -> LopoResult:
    """The saved rows of `folders` as one result; a problem in two of them is an error."""
    results = [load_result(f) for f in folders]
    seen: dict[str, Path] = {}
    for folder, res in zip(folders, results, strict=True):
        for pid in res.choices["problem_id"].unique():
            if pid in seen:
                fail(f"problem {pid} is in both {seen[pid]} and {folder}")
            seen[pid] = folder
    return LopoResult(pd.concat([r.choices for r in results], ignore_index=True),
                      pd.concat([r.calibration for r in results], ignore_index=True),
                      results[0].level)


def side_lines(name: str, res: LopoResult) -> list[str]:
    c = res.choices
    mean = {k: c[(c["k"] == k) & (c["method"] == "proposer")]["norm_error"].mean()
            for k in (1, 3)}
    line = compare(res, k=1, baselines=LINE, baseline_k=3)
    holm = "; ".join(f"{r.baseline}-3 {r.mean_diff:+.3f} (Holm p {r.p_holm:.2g})"
                     for r in line.itertuples())
    lines = [f"{name}: top-1 {mean[1]:.3f}, top-3 {mean[3]:.3f}; gap closed by the top-1 "
             f"{gap_text(gap_closed(res), gap_closed_ci(res))}; top-1 against {holm}"]
    for k, baseline, label in ((1, "default", "the default"),
                               (3, "full_search", "the full search by validation")):
        r = compare(res, k=k, baselines=(baseline,)).iloc[0]
        lines.append(f"{name}: top-{k} against {label}: {r.mean_diff:+.3f} "
                     f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}], Wilcoxon p {r.p_value:.2g}")
    return [*lines, headroom_line(name, res),
            *(f"{name}: {g[0].lower()}{g[1:]}" for g in group_lines(res) if g)]


def headroom_line(name: str, res: LopoResult, k: int = 3) -> str:
    """The top-k against the full search on the problems with more and with less headroom
    (the default's normalized error − the full search's, split at its median), and the rank
    correlation of the two: where the full search's lead comes from."""
    head, diff = shortfall(res, k)
    more = head > head.median()
    if more.all() or not more.any():
        return f"{name}: every problem has the same headroom (the default − the full search)"
    rho, p = spearmanr(head, diff)
    return (f"{name}: top-{k} against the full search on the {int(more.sum())} problems with "
            f"headroom (the default − the full search) above its median "
            f"{diff[more].mean():+.3f}, on the other {int((~more).sum())} "
            f"{diff[~more].mean():+.3f}; Spearman of headroom and difference {rho:+.2f} "
            f"(p {p:.2g})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--a", nargs="+", type=Path, required=True, metavar="DIR",
                    help="saved rows of the first proposer (pooled)")
    ap.add_argument("--b", nargs="+", type=Path, metavar="DIR",
                    help="saved rows of the second, on the same problems (none: A's "
                         "figures alone)")
    ap.add_argument("--ks", default="1,3,5", help="the k to compare at (default 1,3,5)")
    args = ap.parse_args(argv)
    a = pooled(args.a)
    if not args.b:
        print("\n".join(side_lines(f"{a.choices['problem_id'].nunique()} problems", a)))
        return 0
    b = pooled(args.b)
    ids_a, ids_b = (set(r.choices["problem_id"]) for r in (a, b))
    if ids_a != ids_b:
        fail(f"the two sides score different problems ({len(ids_a - ids_b)} only in --a, "
             f"{len(ids_b - ids_a)} only in --b)")
    rows = [paired(a, b, k=int(k)) for k in args.ks.split(",")]
    diffs = pd.DataFrame(rows)[["k", "problems", "win_rate", "mean_diff", "ci_low",
                                "ci_high", "p_value"]]
    print("\n".join([f"A − B, the proposer's top-k on the same {len(ids_a)} problems "
                     "(negative: A better):", "", table(diffs), "",
                     *side_lines("A", a), *side_lines("B", b)]))
    return 0


if __name__ == "__main__":
    run_main(main)
