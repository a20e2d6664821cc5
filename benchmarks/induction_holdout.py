"""The shipped knowledge pack on problems it never saw: the holdout set.

    .venv/bin/python benchmarks/induction_holdout.py (--warehouse DIR | --meta FILE [FILE ...])
        [--pack PACK] [--default KEY] [--save-meta FILE] [--save DIR] [--grow META ...]
        [--hedge S[,S...]] [--upside S[,S...]] [--knn-mix] [--knn-tail N]
        [--low-rank R[,R...]]

Leave-one-problem-out scores the proposer on the corpus it was chosen on: every choice of
model since the sixth sitting was made on those figures. Here the pack, as shipped (its
meta-model restored, not refitted), and every baseline learned from its corpus are scored on
the holdout set (`corpus.select_holdout`: eligible tables the corpus's per-package cap left
out, none grouped with a corpus table), built by

    aicf-induct corpus build --problems holdout --seeds 6 --engine gpu --warehouse holdout_wh

Each (problem, method, k) is averaged over every split of the held-out seeds into a choose
and a score half (`lopo.run_holdout`), choice and score disjoint within each. Prints the
mean normalized error per method at k = 1, 3, 5; the top-1 against kNN-3, portfolio-3 and
average-3 (Holm over the three); the share of the default → full-search gap closed; the
top-1 against the default and the top-3 against the full search; how well the pack's
predicted spread of each problem's candidates ranks the problems by headroom (the default −
the full search); the calibration of the pack's intervals; the headroom (default vs full
search, in accuracy / R² units); and each problem's nearest corpus problem by meta-features
beside the corpus problems' own nearest other-group distances, to show how far the holdout
sits from what the pack learned from. A held-out problem at most half as far from a corpus
problem as the nearest two corpus groups are from each other is left out as a near-duplicate
(the same data under another package's name: `neighbors.near_duplicates`).

`--grow META` (repeatable) asks whether a pack of more problems would do better on the same
held-out problems: a fresh proposer with the pack's configuration is fitted on the pack's
corpus alone and on the corpus grown by META's problems (saved meta-datasets of other
sweeps, as `induction_scaling.py --extra` reads them), both on the seeds all sources hold,
and the two are set against each other on the held-out problems that are near-duplicates of
neither (paired: mean difference [95 % bootstrap CI], Wilcoxon p, at k = 1, 3, 5). With
`--save DIR` the two arms' rows go to DIR/corpus and DIR/grown, so `induction_paired.py` can
pool several such runs (e.g. the two halves of a held-out set, each grown by the other).

`--meta FILE` reads a held-out meta-dataset saved by `--save-meta` (a warehouse of runs
with their dynamics is hundreds of MB; the meta-dataset is a few hundred kB, so a GPU
machine's sweep comes back as one file).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from induction_bench import (
    combined,
    headroom,
    order_args,
    order_lines,
    order_names,
    paired,
    save_result,
    section,
    set_args,
    set_lines,
    set_names,
    shortfall,
    table,
)
from machine import cpu_model, git_commit
from script_errors import fail

from aicf_induct.errors import AicfError, ConfigError
from aicf_induct.induction.corpus import corpus_meta, same_data_regrouped
from aicf_induct.induction.evaluate import (
    compare,
    duplicate_note,
    evaluate_holdout,
    gap_closed,
    summary,
    without_near_duplicates,
)
from aicf_induct.induction.lopo import LopoResult
from aicf_induct.induction.meta_dataset import (
    complete_problems,
    problem_table,
    with_derived_scores,
)
from aicf_induct.induction.meta_file import read_meta_file, write_meta_file
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.neighbors import closest_other_group, nearest_problems
from aicf_induct.induction.pack import DEFAULT_PACK, load_pack


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--warehouse", help="warehouse holding the holdout set's sweep")
    src.add_argument("--meta", metavar="FILE", nargs="+",
                     help="held-out meta-datasets (--save-meta; several: scored as one set)")
    ap.add_argument("--pack", default=str(DEFAULT_PACK), help="knowledge pack (default: "
                                                              "the shipped one)")
    ap.add_argument("--default", metavar="KEY", help="the default MLP's candidate (default: "
                                                      "MLPSpec() with the default recipe)")
    ap.add_argument("--save-meta", metavar="FILE", help="write the held-out meta-dataset")
    ap.add_argument("--save", metavar="DIR", help="write the averaged rows to DIR (with "
                                                   "--grow: its two arms' to DIR/corpus and "
                                                   "DIR/grown)")
    ap.add_argument("--grow", metavar="META", type=Path, action="append", default=[],
                    help="also compare a proposer fitted on the corpus grown by META's "
                         "problems with one fitted on the corpus alone (repeatable)")
    set_args(ap)
    order_args(ap)
    args = ap.parse_args()
    try:
        return run(args)
    except AicfError as err:
        fail(str(err))  # one line, status 2


def read_metas(paths: list[str]) -> pd.DataFrame:
    """Several held-out meta-datasets as one set, the tables `corpus.SAME_DATA` calls one
    dataset in one group (each sweep drew its groups alone); a problem in two of them is
    refused."""
    metas = [read_meta_file(p) for p in paths]
    seen: dict[str, str] = {}
    for path, meta in zip(paths, metas, strict=True):
        for name in meta["problem"].astype(str).unique():
            if name in seen:
                raise ConfigError(f"problem {name} is in both {seen[name]} and {path}")
            seen[name] = path
    return same_data_regrouped(pd.concat(metas, ignore_index=True))


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    held = read_metas(args.meta) if args.meta else corpus_meta(args.warehouse)[0]
    if args.save_meta:
        write_meta_file(held, args.save_meta)
    held, partial = complete_problems(held)
    pack = load_pack(args.pack)
    corpus = pack.seed_meta()
    ev = evaluate_holdout(corpus, held, fitted=pack.proposer().metamodel_,
                          default=args.default, progress=True, sets=set_names(args),
                          orders=order_names(args))
    res = ev.result
    if args.save:
        save_result(res, Path(args.save))
    near = nearest_problems(problem_table(corpus), problem_table(held)) \
        .rename(columns={"nearest": "nearest corpus problem"}).drop(columns="problem_id")
    own = closest_other_group(problem_table(corpus)).to_numpy()
    dups = ev.near_duplicates
    # problems and groups scored (the near-duplicates out), candidates and seeds trained
    n = {c: frame[c].nunique() for frame, cols in ((res.choices, ("problem_id", "group")),
                                                   (held, ("candidate", "seed")))
         for c in cols}
    cal = ev.calibration.drop(columns="level")
    lines = [
        f"{cpu_model()}, commit {git_commit()}, {time.perf_counter() - t0:.0f} s. Held out: "
        f"{n['problem_id']} problems ({n['group']} groups) × {n['candidate']} candidates × "
        f"{n['seed']} seeds, every ({ev.splits}) split of the seeds averaged"
        + (f"; left out, not fully trained: {', '.join(partial)}" if partial else "")
        + "".join(f"; {duplicate_note(r)}" for r in dups.itertuples())
        + f". Learned from {Path(args.pack).name} ({len(pack.problems)} problems).", "",
        *section("Mean normalized error per method on the holdout set", res, ks=(1, 3, 5)),
        "Top-1 against the default; top-3 against the full search by validation:", "",
        table(compare(res, k=1, baselines=("default",))), "",
        table(compare(res, k=3, baselines=("full_search",))), "",
        *set_lines(res, set_names(args)),
        *order_lines(res, order_names(args)),
        spread_line(pack.proposer().metamodel_, held, res), "",
        f"Calibration of the pack's {ev.result.level:.0%} intervals (each problem's mean over "
        f"its {n['seed']} seeds):", "", table(cal), "",
        "Headroom, default vs full search by validation (test-score units, mean over splits):",
        "", table(headroom(held, res)), "",
        f"Distance to the nearest corpus problem: median {near['distance'].median():.2f} "
        f"(range {near['distance'].min():.2f}-{near['distance'].max():.2f}); the corpus "
        f"problems' own nearest other-group distance: median {np.median(own):.2f} (range "
        f"{own.min():.2f}-{own.max():.2f}).", "",
        table(near.sort_values("distance").reset_index(drop=True), digits=3), "",
    ]
    if args.grow:
        lines += grown_lines(corpus, held, args.grow, args.default,
                             Path(args.save) if args.save else None)
    print("\n".join(lines))
    return 0


def spread_line(model: MetaModel, held: pd.DataFrame, res: LopoResult) -> str:
    """Does the pack know where a search pays? The spread it predicts for a problem (the
    standard deviation of its candidates' expected errors) against the problem's headroom
    (the default − the full search) and the top-3's shortfall behind the full search, rank
    correlations over the scored problems."""
    probs = problem_table(held)
    head, short = shortfall(res, 3)
    fcols = [c for c in probs.columns if str(c).startswith("f.")]
    spread = pd.Series({pid: float(model.predict_problem(dict(zip(
        fcols, probs.loc[pid, fcols].to_numpy(float), strict=True)))["expected"].std())
        for pid in head.index})
    (r1, p1), (r2, p2) = spearmanr(spread, head), spearmanr(spread, short)
    return (f"The pack's predicted spread (the sd of the candidates' expected errors) against "
            f"each problem's headroom (the default − the full search): Spearman {r1:+.2f} "
            f"(p {p1:.2g}); against the top-3's shortfall behind the full search: {r2:+.2f} "
            f"(p {p2:.2g}); {len(head)} problems.")


def on_seeds(corpus: pd.DataFrame, seeds: Iterable[int]) -> pd.DataFrame:
    """The corpus's runs of `seeds` only, its normalized scores derived again from them (a
    fit on it averages only those seeds' outcomes)."""
    return with_derived_scores(corpus[corpus["seed"].astype(int).isin(set(seeds))].copy())


def grown_lines(corpus: pd.DataFrame, held: pd.DataFrame, extras: list[Path],
                default: str | None, save: Path | None = None) -> list[str]:
    """`--grow`: a fresh proposer fitted on the corpus alone and on the corpus grown by
    `extras`, on the seeds all hold, scored on the held-out problems neither holds a
    near-duplicate of (so both are scored on the same problems); `save`: the arms' rows
    written to save/corpus and save/grown."""
    grown, notes = combined(corpus, extras)
    seeds = set(grown["seed"].astype(int))
    alone = on_seeds(corpus, seeds)
    near: set[str] = set()
    for train in (alone, grown):
        near |= set(without_near_duplicates(train, held)[1]["problem"].astype(str))
    held = held[~held["problem"].astype(str).isin(near)]
    arms = {"corpus": alone, "grown": grown}
    res = {name: evaluate_holdout(train, held, default=default).result
           for name, train in arms.items()}
    if save is not None:
        for name, r in res.items():
            save_result(r, save / name)
    means = {n: summary(r).set_index(["method", "k"])["norm_error"] for n, r in res.items()}
    rows = []
    for k in (1, 3, 5):
        d = paired(res["grown"], res["corpus"], k=k)
        rows.append({"k": k, "corpus alone": float(means["corpus"][("proposer", k)]),
                     "grown": float(means["grown"][("proposer", k)]),
                     "grown − alone": d["mean_diff"], "95 % CI": f"[{d['ci_low']:+.3f}, "
                     f"{d['ci_high']:+.3f}]", "p": d["p_value"], "grown wins": d["win_rate"]})
    n = {name: train["problem_id"].nunique() for name, train in arms.items()}
    return [
        f"A proposer fitted on the corpus alone ({n['corpus']} problems) and on the corpus "
        f"grown to {n['grown']} problems (seeds {sorted(seeds)}), scored on "
        f"{held['problem_id'].nunique()} held-out problems"
        + "".join(f"; {note}" for note in notes)
        + (f"; left out, a near-duplicate of a training problem: {', '.join(sorted(near))}"
           if near else "") + ":", "",
        table(pd.DataFrame(rows)), "",
        "Gap default → full search closed by the top-1: "
        + ", ".join(f"{name} {gap_closed(r):.0%}" for name, r in res.items())
        + "; top-1 against kNN-3 / portfolio-3 / average-3 (Holm p): "
        + "; ".join(f"{name} " + " / ".join(
            f"{row.mean_diff:+.3f} ({row.p_holm:.2g})" for row in compare(
                r, k=1, baseline_k=3, baselines=("knn", "portfolio", "average")).itertuples())
            for name, r in res.items()) + ".", "",
    ]


if __name__ == "__main__":
    sys.exit(main())
