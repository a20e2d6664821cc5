"""Induction benchmark: leave-one-problem-out evaluation of the proposer against the AutoML
baselines, on the sweep corpus in a warehouse or a knowledge pack's per-seed scores.

    .venv/bin/python benchmarks/induction_bench.py (--warehouse DIR | --pack [PACK]) [--seeds N]
        [--default KEY]
        [--ks 1,3,5] [--groups groups.json] [--jobs N] [--ranking rank|raw_rank|error]
        [--blend-rank R]
        [--rank-seeds score|all] [--conformal-folds K] [--conformal-repeats R] [--swap-seeds]
        [--complete-only]
        [--save DIR] [--write-results]

Reads the meta-dataset (`aicf_induct.induction.meta_dataset`), halves the corpus's seeds
(choose on the first half, score on the second), holds out each near-duplicate group in
turn (`induction.lopo`), and prints: the corpus; the headroom (default vs full search by
validation, per task and size); per method and k the mean normalized error [95 % bootstrap
CI], regret and average rank; the proposer against each baseline (win rate, mean
difference [CI], Wilcoxon p, Holm), and its top-1 against their top-3; the same line for
the choice oracle's top-1 and what a pick gets from n of the problem's own choice seeds
(a pick with information no zero-shot method has, for scale); the share of the
default → full-search gap it closes; the calibration of its 80 % intervals; rules mined on
half the problems and the share that replicate on the other half; the strongest rules on
the whole corpus. `--complete-only` evaluates a corpus still being built on its problems
with a full matrix. `--save DIR` writes the LOPO's rows (choices.csv, calibration.csv) for
`induction_crossfit.py`. `--write-results` replaces this benchmark's section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus_source import add_source_args, load_corpus
from machine import cpu_model, git_commit, publish
from script_errors import run_main

from aicf_induct.errors import ConfigError
from aicf_induct.induction.corpus import same_data_regrouped
from aicf_induct.induction.evaluate import (
    by_group,
    calibration,
    compare,
    duplicate_note,
    evaluate_corpus,
    families,
    gap_closed,
    gap_closed_ci,
    gap_text,
    seed_curve,
    shares_groups,
    summary,
    without_near_duplicates,
)
from aicf_induct.induction.hedge import parse_set_rule
from aicf_induct.induction.lopo import RANK_SEEDS, LopoResult, check_held_out
from aicf_induct.induction.meta_dataset import complete_problems, with_derived_scores
from aicf_induct.induction.meta_file import read_meta_file
from aicf_induct.induction.metamodel import BLEND_RANK, RANKINGS, MetaModel
from aicf_induct.induction.methods import CEILINGS, WARM_STARTS
from aicf_induct.induction.mining import Miner
from aicf_induct.induction.pack import CONFORMAL_FOLDS, CONFORMAL_REPEATS
from aicf_induct.induction.replication import rule_replication

HEADING = "## Induction: leave-one-problem-out evaluation"
THREE_PICKS = WARM_STARTS  # the warm starts the top-1 must beat at k = 3


def table(df: pd.DataFrame, digits: int = 3) -> str:
    """A DataFrame as a Markdown table (numbers to `digits` significant places)."""
    def cell(v: object) -> str:
        if isinstance(v, float | np.floating):
            return "" if np.isnan(v) else f"{v:.{digits}g}"
        return str(v)
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def shortfall(res: LopoResult, k: int = 3) -> tuple[pd.Series, pd.Series]:
    """Per problem: its headroom (the default's normalized error − the full search's) and
    the proposer's top-k behind the full search (top-k − full search), both by problem id."""
    wide = res.choices[res.choices["k"] == k].pivot_table(index="problem_id", columns="method",
                                                          values="norm_error")
    return (wide["default"] - wide["full_search"],
            wide["proposer"] - wide["full_search"])


def headroom(meta: pd.DataFrame, res: LopoResult) -> pd.DataFrame:
    """Default vs full search by validation, in test-score units (accuracy or R²) on the
    score seeds, per task and size (rows < 1,000 or more)."""
    k = int(res.choices["k"].min())
    ch = res.choices[res.choices["k"] == k].pivot_table(index="problem_id", columns="method",
                                                        values="regret", aggfunc="first")
    gain = (ch["default"] - ch["full_search"]).rename("gain")
    info = meta.drop_duplicates("problem_id").set_index("problem_id")
    size = np.where(info["f.simple.n_rows"] < 1000, "< 1,000 rows", ">= 1,000 rows")
    df = pd.DataFrame({"task": info["task"], "size": size}).join(gain, how="inner")
    out = df.groupby(["task", "size"])["gain"].agg(["count", "mean", "median"]).reset_index()
    return out.rename(columns={"count": "problems", "mean": "mean gain",
                               "median": "median gain"})


def section(name: str, res: LopoResult, ks: tuple[int, ...] = (1, 3)) -> list[str]:
    """Markdown lines for one LOPO result: the mean normalized error per method at `ks`, the
    proposer's, the full search's and the choice oracle's top-1 against the three warm
    starts' top-3 (Holm over the three), and the share of the default → full-search gap the
    top-1 closes."""
    s = summary(res)
    wide = s[s["k"].isin(ks)].pivot_table(index="method", columns="k",
                                          values="norm_error", sort=False)
    wide.columns = [f"k = {k}" for k in wide.columns]
    lines = [f"### {name}", "", table(wide.reset_index()), ""]
    for method in ("proposer", *CEILINGS):
        lines += [f"{method} top-1 against the baselines' top-3:", "",
                  table(compare(res, method=method, k=1, baseline_k=3,
                                baselines=THREE_PICKS)), ""]
    at1 = s[s["k"] == 1].set_index("method")["norm_error"]
    lines += [f"Gap default → full search closed by the top-1: "
              f"{gap_text(gap_closed(res, k=1), gap_closed_ci(res, k=1))} "
              f"(default {at1['default']:.3f}, full search "
              f"{at1['full_search']:.3f}, top-1 {at1['proposer']:.3f}).", ""]
    return lines + group_lines(res)


def group_lines(res: LopoResult) -> list[str]:
    """The proposer's top-1 against the warm starts' top-3 and the gap it closes, again with
    each group as one unit (`evaluate.by_group`: its problems' mean); none when every group
    is one problem. Problems of one group share their data's source, so the stricter test
    counts them once."""
    if not shares_groups(res):
        return []
    g = by_group(res)
    n = g.choices["problem_id"].nunique()
    line = compare(g, k=1, baseline_k=3, baselines=THREE_PICKS)
    full = compare(g, k=3, baselines=("full_search",)).iloc[0]
    return [f"With each of the {n} groups as one unit (its problems' mean): top-1 against "
            + "; ".join(f"{r.baseline}-3 {r.mean_diff:+.3f} [{r.ci_low:+.3f}, "
                        f"{r.ci_high:+.3f}] (Holm p {r.p_holm:.2g})"
                        for r in line.itertuples())
            + f"; gap closed {gap_text(gap_closed(g, k=1), gap_closed_ci(g, k=1))}; top-3 "
            f"against the full search {full.mean_diff:+.3f} [{full.ci_low:+.3f}, "
            f"{full.ci_high:+.3f}].", ""]


def save_result(res: LopoResult, out: Path) -> None:
    """The LOPO's rows as CSV files (`induction_crossfit.py` reads them back)."""
    out.mkdir(parents=True, exist_ok=True)
    res.choices.to_csv(out / "choices.csv", index=False)
    res.calibration.to_csv(out / "calibration.csv", index=False)


def read_rows(path: str | Path) -> pd.DataFrame:
    """Saved LOPO rows (`save_result`'s choices.csv, or any file of its columns), the ids
    read as text: a problem id is 16 hex digits, and one that happens to hold only decimal
    digits would otherwise come back as a number and match nothing."""
    return pd.read_csv(path, dtype={"problem_id": str, "group": str, "candidate": str})


def load_result(folder: Path, level: float = 0.8) -> LopoResult:
    """`save_result`'s files read back (`level`: the intervals' nominal coverage). A run
    averaged over the splits of the seeds has no calibration: its file holds no columns."""
    cal = folder / "calibration.csv"
    if not cal.is_file() or not (folder / "choices.csv").is_file():
        raise ConfigError(f"{folder} holds no saved run's rows (choices.csv and "
                          "calibration.csv, as --save of induction_bench.py, "
                          "induction_partitions.py or induction_holdout.py writes them)")
    calibration = pd.read_csv(cal, dtype={"problem_id": str, "candidate": str}) \
        if cal.read_text().strip() else pd.DataFrame()
    return LopoResult(read_rows(folder / "choices.csv"), calibration, level)


def numbers(text: str) -> tuple[float, ...]:
    """`--hedge`'s and `--upside`'s value: comma-separated numbers (argparse names the
    option if not)."""
    return tuple(float(x) for x in text.split(","))


def whole_numbers(text: str) -> tuple[int, ...]:
    """`--low-rank`'s value: comma-separated whole numbers (argparse names the option if
    not)."""
    return tuple(int(x) for x in text.split(","))


def top_k_means(res: LopoResult, method: str, ks: Sequence[int]) -> str:
    """`method`'s mean normalized error at each k, as "top-1 0.455, top-3 0.424"."""
    mine = res.choices[res.choices["method"] == method]
    return ", ".join(f"top-{k} {mine[mine['k'] == k]['norm_error'].mean():.3f}" for k in ks)


def set_args(ap: argparse.ArgumentParser) -> None:
    """`--hedge S[,S...]`, `--upside S[,S...]`, `--knn-mix`, `--knn-tail N`: also score the
    proposer's top k re-chosen as a set by these rules (`hedge.chosen_set`)."""
    ap.add_argument("--hedge", type=numbers, default=(), metavar="S[,S...]",
                    help="also score the proposer's top k hedged as a set (induction/hedge.py) "
                         "with each shrink S > 0, paired against its own top k and the full "
                         "search")
    ap.add_argument("--upside", type=numbers, default=(), metavar="S[,S...]",
                    help="likewise the top k chosen for the set's expected best with errors "
                         "drawn from the proposer's intervals, their sd scaled by each S > 0")
    ap.add_argument("--knn-mix", action="store_true",
                    help="likewise the proposer's order with kNN's picks every third slot")
    ap.add_argument("--knn-tail", type=int, default=0, metavar="N",
                    help="likewise the proposer's first N, then kNN's picks")


def blend_arg(ap: argparse.ArgumentParser) -> None:
    """`--blend-rank R`: the rank of the low-rank order the proposer blends with its own."""
    ap.add_argument("--blend-rank", type=int, default=BLEND_RANK, metavar="R",
                    help=f"blend the proposer's order with the rank-R low-rank order's "
                         f"(induction/lowrank.py; default {BLEND_RANK}, the shipped pack's; "
                         f"0: its own order alone, the pack's before the twenty-sixth sitting)")


def order_args(ap: argparse.ArgumentParser) -> None:
    """`--low-rank R[,R...]`, `--knn-order K[,K...]`: also score other orders of every
    candidate (`LopoConfig.orders`), their own top-1 included."""
    ap.add_argument("--low-rank", type=whole_numbers, default=(), metavar="R[,R...]",
                    help="also score the low-rank order (induction/lowrank.py): the error "
                         "matrix's first R components predicted from the meta-features, "
                         "against the proposer, the three 3-pick baselines and the full search")
    ap.add_argument("--knn-order", type=whole_numbers, default=(), metavar="K[,K...]",
                    help="also score the kNN order (every candidate by its mean error over "
                         "the K nearest training problems, baselines.knn_order) and the "
                         "proposer's blend with it as a third member (blendknn<K>)")


def order_names(args: argparse.Namespace) -> tuple[str, ...]:
    """The orders `order_args`' options ask for, as `LopoConfig.orders` names them."""
    return (*(f"lowrank{r}" for r in args.low_rank),
            *(f"{kind}{k}" for k in args.knn_order for kind in ("knn", "blendknn")))


def order_lines(res: LopoResult, orders: Sequence[str]) -> list[str]:
    """Each order's mean normalized error at k = 1, 3, 5 and gap share; its top-1 against the
    proposer's and against the three 3-pick baselines (the Holm line); its top-3 against the
    proposer's and the full search."""
    lines: list[str] = []
    for m in orders:
        lines += [f"The order {m} ({top_k_means(res, m, (1, 3, 5))}; gap closed at k = 1: "
                  f"{gap_text(gap_closed(res, m), gap_closed_ci(res, m))}):", "",
                  table(compare(res, method=m, k=1, baselines=("proposer", "default"))), "",
                  table(compare(res, method=m, k=1, baseline_k=3, baselines=THREE_PICKS)), "",
                  table(compare(res, method=m, k=3, baselines=("proposer", "full_search"))),
                  ""]
    return lines


def set_names(args: argparse.Namespace) -> tuple[str, ...]:
    """The set methods `set_args`' options ask for, as `LopoConfig.sets` names them."""
    return (*(f"hedge{h:g}" for h in args.hedge), *(f"upside{u:g}" for u in args.upside),
            *(("knnmix",) if args.knn_mix else ()),
            *((f"knntail{args.knn_tail}",) if args.knn_tail else ()))


SET_TITLES = {"hedge": "hedged as a set, shrink {v:g}",
              "upside": "chosen for the set's expected best from its intervals, scale {v:g}",
              "knnmix": "with kNN's picks every third slot",
              "knntail": "as its first {v:g}, then kNN's picks"}


def set_lines(res: LopoResult, sets: Sequence[str], ks: tuple[int, ...] = (3, 5)
              ) -> list[str]:
    """Each set method's top-k (`hedge.chosen_set`; its top-1 is the proposer's) beside the
    proposer's own top-k and the full search by validation: its mean normalized error, and
    each paired against it."""
    lines: list[str] = []
    for m in sets:
        rule, value = parse_set_rule(m)
        rows = [compare(res, method=m, k=k, baselines=("proposer", "full_search")) for k in ks]
        lines += [f"The proposer's top k {SET_TITLES[rule].format(v=value)} "
                  f"({top_k_means(res, m, ks)}):", "",
                  table(pd.concat(rows, ignore_index=True)), ""]
    return lines


def paired(a: LopoResult, b: LopoResult, k: int, method: str = "proposer") -> pd.Series:
    """`method`'s top-k in `a` against the same method's in `b` (two runs scoring the same
    problems), paired problem by problem: `evaluate.compare`'s row, its differences a − b."""
    both = pd.concat([a.choices.assign(method=lambda d: d["method"] + "@a"), b.choices])
    return compare(LopoResult(both, pd.DataFrame(), a.level), method=f"{method}@a", k=k,
                   baselines=(method,)).iloc[0]


def combined(corpus: pd.DataFrame, extras: list[Path]) -> tuple[pd.DataFrame, list[str]]:
    """The corpus grown by the extra meta-datasets' problems, on the seeds all hold; and
    what was left out, as sentences."""
    notes: list[str] = []
    parts = [corpus]
    for path in extras:
        extra, partial = complete_problems(read_meta_file(path))
        if partial:
            notes.append(f"{path.name}: not fully trained, left out: {', '.join(partial)}")
        if len(parts) > 1:  # none of an earlier extra's (the corpus's: checked below)
            check_held_out(pd.concat(parts[1:], ignore_index=True), extra)
        extra, dups = without_near_duplicates(corpus, extra)
        notes += [f"{path.name}: {duplicate_note(r)}" for r in dups.itertuples()]
        parts.append(extra)
    common = set.intersection(*(set(p["seed"].astype(int)) for p in parts))
    if any(set(p["seed"].astype(int)) != common for p in parts):
        notes.append(f"read on the seeds all sources hold: {sorted(common)}")
    meta = pd.concat(parts, ignore_index=True)
    meta = meta[meta["seed"].astype(int).isin(common)]
    # each sweep drew its groups alone: copies across sweeps (SAME_DATA) share one here
    meta = same_data_regrouped(meta)
    return with_derived_scores(meta).reset_index(drop=True), notes


def ceiling_lines(res: LopoResult, meta: pd.DataFrame, choose: tuple[int, ...],
                  score: tuple[int, ...], ks: tuple[int, ...]) -> list[str]:
    """The full search's and the choice oracle's top-1 against the 3-pick baselines, and
    the seed curve."""
    curve = seed_curve(meta, choose, score)
    limit = curve.attrs.get("limit")
    lines = []
    if {1, 3} <= set(ks):
        lines += ["For scale, the single picks that train on the held-out problem against the "
                  "same three: the full search (every candidate trained, picked by "
                  "validation) and the choice oracle (the best candidate by the problem's own "
                  "test error on the choice seeds; no method can see it):", "",
                  table(pd.concat([compare(res, method=m, k=1, baseline_k=3,
                                           baselines=THREE_PICKS) for m in CEILINGS],
                                  ignore_index=True)), ""]
    lines += ["What a single pick gets from the held-out problem's own test outcomes on n of "
              "the choice seeds (every n-subset averaged; `evaluate.seed_curve`):", "",
              table(curve, digits=4), ""]
    if limit is not None:
        lines += [f"Fit a + b/n: a = {limit:.3f}, an estimate of the pick that knows every "
                  "candidate's expected error (n → ∞) scored on these score seeds.", ""]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_source_args(ap)
    ap.add_argument("--default", help="default MLP: candidate key, structure key or model "
                                      "spec (default: MLPSpec() with the default recipe)")
    ap.add_argument("--ks", default="1,3,5", help="proposal sizes k")
    ap.add_argument("--groups", help="JSON file: problem name or id -> group (default: the "
                                     "corpus's groups, aicf_induct.induction.corpus)")
    ap.add_argument("--n-random", type=int, default=20, help="draws averaged for random-k")
    ap.add_argument("--max-iter", type=int, default=200, help="meta-model boosting rounds")
    ap.add_argument("--jobs", type=int, default=1, help="processes sharing the LOPO folds "
                                                        "(-1: one per core)")
    ap.add_argument("--conformal-folds", type=int, default=CONFORMAL_FOLDS, metavar="K",
                    help=f"widen the intervals by conformalized quantile regression over K "
                         f"group folds of the training problems (default {CONFORMAL_FOLDS}, as "
                         f"the shipped pack; 0: the quantile models as fitted, no conformal "
                         f"fits)")
    ap.add_argument("--conformal-repeats", type=int, default=CONFORMAL_REPEATS, metavar="R",
                    help=f"pool the out-of-fold scores of R assignments of the groups to the "
                         f"folds (default {CONFORMAL_REPEATS}, as the shipped pack; 1: one, "
                         f"five times fewer conformal fits; the ranking figures are the same)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rank-seeds", choices=RANK_SEEDS, default="score",
                    help="seeds of the training problems the meta-model's ranking learns "
                         "from: the score seeds (as its interval; the measured method) or all")
    ap.add_argument("--ranking", choices=RANKINGS, default="gain",
                    help="what orders the proposer's candidates: a model of their gain over "
                         "the best-on-average candidate (gain, the default), of their rank "
                         "within the problem of the normalized error (rank) or of the raw "
                         "error (raw_rank), or the expected normalized error (error)")
    blend_arg(ap)
    ap.add_argument("--swap-seeds", action="store_true",
                    help="choose on the second half of the seeds and score on the first (the "
                         "same evaluation on the other draw of the seeds' noise)")
    ap.add_argument("--complete-only", action="store_true",
                    help="evaluate only the problems whose every (candidate, seed) finished "
                         "(a corpus still being built)")
    ap.add_argument("--save", metavar="DIR",
                    help="write the LOPO's rows to DIR (choices.csv, calibration.csv)")
    ap.add_argument("--write-results", action="store_true",
                    help="replace this benchmark's section of benchmarks/RESULTS.md")
    args = ap.parse_args()

    t0 = time.perf_counter()
    # the corpus's near-duplicate groups (as `aicf-induct induce evaluate` uses them) unless
    # --groups maps them
    meta = load_corpus(args, args.groups)
    if args.complete_only:
        meta, partial = complete_problems(meta)
        print(f"{len(partial)} problem(s) left out, not complete", file=sys.stderr)
    ks = tuple(int(k) for k in args.ks.split(","))
    ev = evaluate_corpus(meta, default=args.default, ks=ks,
                         metamodel=MetaModel(max_iter=args.max_iter, ranking=args.ranking,
                                             blend_rank=args.blend_rank,
                                             conformal_folds=args.conformal_folds,
                                             conformal_repeats=args.conformal_repeats),
                         n_random=args.n_random,
                         n_jobs=args.jobs, seed=args.seed, rank_seeds=args.rank_seeds,
                         swap_seeds=args.swap_seeds)
    res, default, choose, score = ev.result, ev.default, ev.choose_seeds, ev.score_seeds
    t_lopo = time.perf_counter() - t0
    if args.save:
        save_result(res, Path(args.save))
    miner = Miner(random_state=args.seed)
    rep = rule_replication(meta, miner, seed=args.seed)
    top_rules = miner.fit(meta).rules_.head(8)
    text = report(args, meta, res, default, choose, score, ks, rep, top_rules, t_lopo,
                  time.perf_counter() - t0)
    publish(text, args.write_results)
    return 0


def report(args: argparse.Namespace, meta: pd.DataFrame, res: LopoResult, default: str,
           choose: tuple[int, ...], score: tuple[int, ...], ks: tuple[int, ...],
           rep: pd.DataFrame, top_rules: pd.DataFrame, t_lopo: float, t_all: float) -> str:
    n = {c: meta[c].nunique() for c in ("problem_id", "group", "candidate", "seed")}
    share = float(rep["replicated"].mean()) if len(rep) else float("nan")
    gaps = ", ".join(f"k = {k}: {gap_text(gap_closed(res, k=k), gap_closed_ci(res, k=k))}"
                     for k in ks)
    comps = pd.concat([compare(res, k=k) for k in ks], ignore_index=True)
    # the goal line: one untrained pick against three trained ones of each warm start
    top1_vs = compare(res, k=1, baseline_k=3, baselines=THREE_PICKS) \
        if {1, 3} <= set(ks) else None
    default_key = meta.loc[meta["candidate"] == default, "structure_key"].iloc[0]
    lines = [
        HEADING, "",
        f"Measured {dt.date.today().isoformat()} on {cpu_model()}, {os.cpu_count()} cores "
        f"(commit {git_commit()}), in {t_all:.0f} s (LOPO {t_lopo:.0f} s). One run of:", "",
        "```", " ".join([".venv/bin/python", "benchmarks/induction_bench.py", *sys.argv[1:]]),
        "```", "",
        f"Corpus: {n['problem_id']} problems in {n['group']} near-duplicate groups × "
        f"{n['candidate']} candidates × {n['seed']} seeds ({len(meta)} scored runs). Choice on "
        f"seeds {list(choose)}, score on seeds {list(score)}. Default: `{default_key}`.",
        "Normalized error: TabRepo's (err − best) / (median − best) clipped to [0, 1], "
        "err = 1 − accuracy or 1 − R²; regret in accuracy / R² units.", "",
        "Headroom (test score of the full search by validation minus the default's):", "",
        table(headroom(meta, res)), "",
        "Per method and k (full search and the oracles do not depend on k):", "",
        table(summary(res)), "",
        "Proposer against each baseline (mean_diff < 0: proposer better; Holm over the "
        "baselines at each k):", "",
        table(comps), "",
        *(["The proposer's top-1 against the baselines' top-3 (three trained structures "
           "picked by validation; Holm over the three):", "", table(top1_vs), ""]
          if top1_vs is not None else []),
        *ceiling_lines(res, meta, choose, score, ks),
        f"Share of the default → full-search gap the proposer closes: {gaps}.", "",
        f"Calibration of the proposer's {res.level:.0%} intervals (held-out outcomes inside):",
        "", table(calibration(res, ks)), "",
        "Structure families: candidates of each in the space, and on how many held-out "
        "problems it is the top-1 proposal, the full search's pick by validation and the "
        "best on test (oracle):", "", table(families(res, meta)), "",
        f"Rule replication: {len(rep)} rule(s) with q < 0.05 mined on half of the groups; "
        f"{share:.0%} replicate on the other half (same sign, 95 % CI excluding 0)." if len(rep)
        else "Rule replication: no rule with q < 0.05 on half of the groups.", "",
        "Strongest rules on the whole corpus:", "",
        *[f"- {t}" for t in top_rules["text"]], "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    run_main(main)
