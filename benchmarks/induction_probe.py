"""Cheap probes as meta-features: does a 5-epoch run of the default MLP tell the proposer
what the meta-features do not?

    .venv/bin/python benchmarks/induction_probe.py compute --out probes.parquet [--jobs N]
        [--problems FILE]
    .venv/bin/python benchmarks/induction_probe.py evaluate --probes probes.parquet
        [--jobs N] [--partitions N] [--save DIR]
    .venv/bin/python benchmarks/induction_probe.py holdout --probes probes.parquet
        --meta HOLDOUT_META [--rows DIR]
    .venv/bin/python benchmarks/induction_probe.py compute --candidates --out short.parquet
        [--epochs 5] [--pairs PAIRS]
    .venv/bin/python benchmarks/induction_probe.py pairs --out PAIRS --lists FILE
        --holdout-meta FILE --holdout-rows DIR [--top 5]
    .venv/bin/python benchmarks/induction_probe.py short --short short.parquet [--at 5]
        [--corpus-rows plain.csv --lists FILE] [--holdout-meta FILE --holdout-rows DIR]

The choice oracle (a pick that sees the problem's own test outcomes) passes the Holm line
where no zero-shot order does: what a single pick lacks is information about the problem
itself. A probe is the cheapest such information: the default MLP (`MLPSpec()`, its
recipe) trained 5 epochs on the problem, on a split and initialisation of its own (seed
100, none of the corpus's seeds 0-7, so no probe shares a run, a split or an init with any
score), early stopping off. Its features, fixed before any was looked at:

    f.probe.val_score     validation accuracy or R² (clipped to [-1, 1]) after 5 epochs
    f.probe.score_gain    that minus the same after 1 epoch (how fast it learns)
    f.probe.loss_ratio    validation loss after 5 epochs / after 1 (how far it got)
    f.probe.overfit       validation loss / training loss after 5 epochs

`compute` trains the probes of the shipped pack's problems (or `--problems FILE`, a comma
list) and writes them; `evaluate` runs the leave-one-group-out averaged over every split
of the seeds (`lopo.run_lopo_partitions`, as `induction_partitions.py`) twice, the gain
model without and with the probe features, and sets the proposer with probes against the
baselines of the run without (so kNN measures the meta-features AutoML users know);
`holdout` does the same on the holdout set: a meta-model fitted on the corpus with probes,
scored on the held-out problems (`lopo.run_holdout`), against the baselines and proposer of
`induction_holdout.py --save DIR` (`--rows DIR`). A probe costs a user about 1/15 of one
training of the default.

Short runs of every candidate (`compute --candidates`: each corpus32 candidate 5 epochs with
its own recipe, on the probe seed) ask the multi-fidelity form of the question: is a
candidate's validation score after 5 epochs a guide to its converged test error? `short`
scores the single picks they make (among all 32, among the first 3 or 5 of the proposer's,
the portfolio's or kNN's list) by each problem's expected test normalized error, as a top-1
is scored (its candidate's error over all the problem's seeds, which is its mean over every
split), against kNN-3, portfolio-3 and average-3 (`--corpus-rows`: `evaluate --save`'s
plain.csv; `--holdout-rows`: `induction_holdout.py --save`) and the full search. The
corpus's lists are the leave-one-group-out folds' (`--lists` keeps them: 177 fits).

Longer short runs, the next rung of a successive-halving schedule: `pairs` writes the first
`--top` candidates of the proposer's list on every problem (the corpus folds' lists kept by
`short --lists`, the shipped pack's on the holdout), `compute --candidates --pairs PAIRS
--epochs 20` trains only those, recording the validation score after 5, 10 and 20 epochs
(the schedule is constant, so the first epochs of a longer run are the shorter run), and
`short --at 10` or `--at 20` scores the picks among the proposer's first 3 or 5 at that
rung. A pick whose list holds a candidate without a run at that rung is not reported.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from induction_bench import read_rows, section, table
from machine import cpu_model, git_commit
from script_errors import at_least, existing_file, fail, run_main

from aicf_induct.induction.baselines import resolve_default
from aicf_induct.induction.evaluate import compare, gap_closed
from aicf_induct.induction.lopo import (
    Learned,
    LopoConfig,
    LopoResult,
    run_holdout,
    run_lopo_partitions,
    seed_partitions,
)
from aicf_induct.induction.meta_dataset import complete_problems
from aicf_induct.induction.meta_file import read_meta_file
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.pack import DEFAULT_PACK, load_pack

PROBE_SEED = 100  # none of the corpus's seeds
PROBE_EPOCHS = 5
RUNGS = (5, 10, 20)  # epochs at which a longer short run records its validation score
PROBE_COLUMNS = ("f.probe.val_score", "f.probe.score_gain", "f.probe.loss_ratio",
                 "f.probe.overfit")
THREE = ("knn", "portfolio", "average")


def _short(p: Any, cand: Any, epochs: int = PROBE_EPOCHS) -> list[dict[str, float]]:
    """The per-epoch history of `cand` (a space candidate: structure and recipe) trained
    `epochs` epochs on the loaded problem `p` on the probe seed, early stopping off."""
    from threadpoolctl import threadpool_limits

    from aicf_induct.runtime.trainer import TrainConfig, Trainer

    r = cand.recipe
    cfg = TrainConfig(epochs=epochs, patience=0, seed=PROBE_SEED, backend="numpy",
                      optimizer=r.optimizer, lr=r.lr, weight_decay=r.weight_decay,
                      batch_size=r.batch_size)
    with threadpool_limits(1):  # one core per process: the pool is the parallelism
        return Trainer(p, cand.graph(p.n_features, p.n_outputs), cfg).fit().history


def _score_key(p: Any) -> str:
    return "val_accuracy" if p.task == "classification" else "val_r2"


def probe(name: str) -> dict[str, object]:
    """One problem's probe features (see the module docstring)."""
    from aicf_induct.frontend.specs import MLPSpec
    from aicf_induct.induction.space import Candidate
    from aicf_induct.problems import load_problem

    p = load_problem(name, seed=PROBE_SEED)
    h = _short(p, Candidate(MLPSpec()))  # the default MLP with the default recipe
    key = _score_key(p)
    first, last = h[0], h[-1]
    score = float(np.clip(last[key], -1, 1))
    return {"problem_id": p.problem_id, "problem": name,
            "f.probe.val_score": score,
            "f.probe.score_gain": score - float(np.clip(first[key], -1, 1)),
            "f.probe.loss_ratio": last["val_loss"] / first["val_loss"],
            "f.probe.overfit": last["val_loss"] / last["train_loss"]}


def short_runs(name: str, keys: frozenset[str] | None = None,
               epochs: int = PROBE_EPOCHS) -> list[dict[str, object]]:
    """The corpus32 candidates (`keys`: those only) trained `epochs` epochs on the problem
    with their own recipes, on the probe seed: the validation score and loss at each rung
    of RUNGS up to `epochs`, and at `epochs` (see `short`)."""
    from aicf_induct.induction.space_io import parse_space
    from aicf_induct.problems import load_problem

    p = load_problem(name, seed=PROBE_SEED)
    rows = []
    for c in parse_space("corpus32").candidates():
        if keys is not None and c.key not in keys:
            continue
        history = _short(p, c, epochs)
        for rung in sorted({r for r in RUNGS if r <= epochs} | {epochs}):
            at = history[rung - 1]
            rows.append({"problem": name, "candidate": c.key, "epochs": rung,
                         "short_val_score": float(at[_score_key(p)]),
                         "short_val_loss": float(at["val_loss"])})
    return rows


def compute(args: argparse.Namespace) -> None:
    from aicf_induct.progress import lasting

    names = (Path(args.problems).read_text().strip().split(",") if args.problems
             else load_pack(DEFAULT_PACK).problems)
    keys: dict[str, frozenset[str] | None] = dict.fromkeys(names)
    if args.pairs:  # only these (problem, candidate) pairs
        pairs = pd.read_csv(args.pairs)
        keys = {str(n): frozenset(map(str, g["candidate"])) for n, g in pairs.groupby("problem")}
        names = list(keys)
    if args.candidates:  # every candidate, short: one file row per (problem, candidate)
        from concurrent.futures import as_completed

        rows = []
        with ProcessPoolExecutor(args.jobs) as pool:
            jobs = [pool.submit(short_runs, n, keys[n], args.epochs) for n in names]
            for i, job in enumerate(lasting(as_completed(jobs), total=len(jobs),
                                            desc="short runs", unit="problem"), 1):
                rows += job.result()
                if i % 8 == 0:  # a run cut short keeps what it finished
                    pd.DataFrame(rows).to_parquet(args.out, index=False)
    else:
        with ProcessPoolExecutor(args.jobs) as pool:
            rows = list(lasting(pool.map(probe, names), total=len(names), desc="probes",
                                unit="problem"))
    pd.DataFrame(rows).to_parquet(args.out, index=False)
    print(f"{len(rows)} probes written to {args.out}")


def with_probes(meta: pd.DataFrame, probes: pd.DataFrame) -> pd.DataFrame:
    """`meta` with the probe features joined by problem name (every problem must have one;
    by name, not id: the shipped pack's ids of two tables, quantreg/uis and dplyr/storms,
    predate `content_id`'s folding of -0.0, so theirs and a fresh load's differ)."""
    cols = ["problem", *PROBE_COLUMNS]
    out = meta.merge(probes[cols], on="problem", how="left", validate="many_to_one")
    missing = out.loc[out[PROBE_COLUMNS[0]].isna(), "problem"].unique()
    if len(missing):
        fail(f"no probe for {', '.join(map(str, missing))}")
    return out


def mixed(plain: LopoResult, probed: LopoResult) -> LopoResult:
    """The baselines of `plain` and the proposer of `probed` as one result."""
    keep = plain.choices[plain.choices["method"] != "proposer"]
    ours = probed.choices[probed.choices["method"] == "proposer"]
    return LopoResult(pd.concat([keep, ours], ignore_index=True), plain.calibration,
                      plain.level)


def report(name: str, plain: LopoResult, probed: LopoResult) -> list[str]:
    both = mixed(plain, probed)
    ours = probed.choices[probed.choices["method"] == "proposer"].assign(method="probed")
    pair = LopoResult(pd.concat([plain.choices, ours], ignore_index=True), plain.calibration,
                      plain.level)
    lines = [*section(f"{name}: the proposer with probes, the baselines without", both,
                      ks=(1, 3, 5)),
             "The proposer with probes minus without, per k (mean [Wilcoxon p]):", ""]
    for k in sorted(ours["k"].unique()):
        c = compare(pair, method="probed", k=int(k), baselines=("proposer",)).iloc[0]
        lines.append(f"- k = {k}: {c['mean_diff']:+.4f} (p {c['p_value']:.3g})")
    lines += ["", f"Without probes the top-1 closes {gap_closed(plain, k=1):.0%} of the gap.",
              "", "Top-3 with probes against the full search:", "",
              table(compare(both, k=3, baselines=("full_search",))), ""]
    return lines


def evaluate(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    probes = pd.read_parquet(args.probes)
    meta = load_pack(DEFAULT_PACK).seed_meta()
    parts = seed_partitions(meta)[:args.partitions or None]
    config = LopoConfig(resolve_default(meta, None), *parts[0], (1, 3, 5),
                        metamodel=MetaModel())
    plain = run_lopo_partitions(meta, config, parts, n_jobs=args.jobs, progress=True)
    probed = run_lopo_partitions(with_probes(meta, probes), config, parts, n_jobs=args.jobs,
                                 progress=True)
    if args.save:
        out = Path(args.save)
        out.mkdir(parents=True, exist_ok=True)
        plain.choices.to_csv(out / "plain.csv", index=False)
        probed.choices.to_csv(out / "probed.csv", index=False)
    print("\n".join([f"{cpu_model()}, commit {git_commit()}, {time.perf_counter() - t0:.0f} s;"
                     f" {len(parts)} splits of the seeds.", "",
                     *report("Corpus, leave-one-group-out", plain, probed)]))


def scored_held_out(meta_file: str, rows_dir: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The held-out meta-dataset's problems that `induction_holdout.py --save DIR` scored
    (fully trained, near-duplicates out), and those saved rows."""
    rows = read_rows(Path(rows_dir) / "choices.csv")
    held, _ = complete_problems(read_meta_file(meta_file))
    return held[held["problem_id"].isin(rows["problem_id"])], rows


def holdout(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    probes = pd.read_parquet(args.probes)
    meta = load_pack(DEFAULT_PACK).seed_meta()
    held, plain_rows = scored_held_out(args.meta, args.rows)
    parts = seed_partitions(held)
    config = LopoConfig(resolve_default(meta, None), *parts[0], (1, 3, 5),
                        metamodel=MetaModel())
    probed = run_holdout(with_probes(meta, probes), with_probes(held, probes), config, parts,
                         progress=True)
    plain = LopoResult(plain_rows, pd.DataFrame(), 0.8)
    print("\n".join([f"{cpu_model()}, commit {git_commit()}, {time.perf_counter() - t0:.0f} s;"
                     f" {held['problem_id'].nunique()} held-out problems, {len(parts)} splits "
                     "of the seeds; the plain proposer is the shipped pack's.", "",
                     *report("Holdout", plain, probed)]))


SHORT_KS = (3, 5)  # how many of a list's candidates a short-run pick looks at


def short_pick(short: pd.DataFrame, problem: str, ranked: list[str]) -> str | None:
    """Of `ranked`, the candidate with the best short-run validation score on `problem`
    (ties: the lower validation loss, then the list's order); None if one has no run."""
    sub = short[short["problem"] == problem].set_index("candidate").reindex(ranked)
    if sub["short_val_score"].isna().any():
        return None
    order = sorted(range(len(ranked)), key=lambda i: (-sub["short_val_score"].iloc[i],
                                                      sub["short_val_loss"].iloc[i], i))
    return ranked[order[0]]


_FOLD_META = pd.DataFrame()  # the corpus the fold processes read (inherited on fork)


def _fold_lists(held_ids: list[str]) -> list[dict[str, object]]:
    """One corpus fold: the proposer's, the portfolio's and kNN's lists for its held-out
    problems, learned from the other groups (the gain model ranking on every seed)."""
    from aicf_induct.induction.meta_dataset import problem_table

    meta = _FOLD_META
    train = meta[~meta["problem_id"].isin(held_ids)]
    probs = problem_table(meta)
    return lists_for(MetaModel().fit(train), train, probs.loc[held_ids])


def lists_for(mm: MetaModel, train: pd.DataFrame, held: pd.DataFrame
              ) -> list[dict[str, object]]:
    """Per problem of `held` (a problem table): the first max(SHORT_KS) candidates of the
    proposer's order (`mm`), of the portfolio's and of kNN's, the last two learned from
    `train` (`lopo.Learned.lists`, as the leave-one-out makes them; every corpus32
    candidate applies to a table)."""
    n = max(SHORT_KS)
    cands = sorted(str(c) for c in train["candidate"].unique())
    learned = Learned.of(train, cands, mm)
    fcols = [c for c in held.columns if str(c).startswith("f.")]
    out = []
    for pid, row in held.iterrows():
        _, lists = learned.lists({str(c): float(row[c]) for c in fcols}, cands, n)
        out.append({"problem_id": pid, "problem": row["problem"],
                    "proposer": lists["proposer"][:n], "portfolio": lists["portfolio"],
                    "knn": lists["knn"]})
    return out


def short_methods(lists: pd.DataFrame, short: pd.DataFrame, test: pd.DataFrame,
                  default: str) -> pd.DataFrame:
    """Per problem, the expected test normalized error (over all its seeds: a single pick's
    figure averaged over every split) of the picks that short runs make: of every candidate
    (`short_all`), of a list's first k (`<list>_short<k>`), and the lists' own top-1 and
    the default for reference. A pick missing a run on some problem is left out."""
    rows = []
    every = list(test.columns)
    for r in lists.itertuples():
        t = test.loc[r.problem_id]
        row: dict[str, object] = {"problem_id": r.problem_id, "problem": r.problem,
                                  "default": t[default], "proposer_top1": t[r.proposer[0]]}
        picks = {"short_all": every, **{f"{name}_short{k}": getattr(r, name)[:k]
                                        for name in ("proposer", "portfolio", "knn")
                                        for k in SHORT_KS}}
        for col, ranked in picks.items():
            pick = short_pick(short, r.problem, ranked)
            row[col] = np.nan if pick is None else t[pick]
        rows.append(row)
    return pd.DataFrame(rows).dropna(axis=1)


def short_report(name: str, picks: pd.DataFrame, base: pd.DataFrame, at: int
                 ) -> list[str]:
    """The short-run picks against kNN-3, portfolio-3, average-3 (trained in full, picked by
    validation; `base`: an evaluation's rows) and the full search, Holm over the three."""
    cols = [c for c in picks.columns if c not in ("problem_id", "problem")]
    long = picks.melt(id_vars=["problem_id", "problem"], value_vars=cols, var_name="method",
                      value_name="norm_error")
    long["method"] = "pick:" + long["method"]  # apart from the evaluation's own methods
    res = LopoResult(pd.concat([base, long.assign(k=1)], ignore_index=True), pd.DataFrame(),
                     0.8)
    lines = [f"### {name}: picks by {at}-epoch runs ({len(picks)} problems)", "",
             "| pick | mean | − kNN-3 | − portfolio-3 | − average-3 | Holm p (three) "
             "| − full search [95 % CI] |", "|---|---|---|---|---|---|---|"]
    for c in cols:
        three = compare(res, method=f"pick:{c}", k=1, baseline_k=3, baselines=THREE)
        full = compare(res, method=f"pick:{c}", k=1, baselines=("full_search",)).iloc[0]
        d = three["mean_diff"].to_numpy(float)
        lines.append(f"| {c} | {picks[c].mean():.3f} | {d[0]:+.3f} | {d[1]:+.3f} | "
                     f"{d[2]:+.3f} | {', '.join(f'{x:.2g}' for x in three['p_holm'])} | "
                     f"{full['mean_diff']:+.3f} [{full['ci_low']:+.3f}, "
                     f"{full['ci_high']:+.3f}] |")
    return [*lines, ""]


def corpus_lists(meta: pd.DataFrame, args: argparse.Namespace) -> pd.DataFrame:
    """The corpus folds' lists (`lists_for` per leave-one-group-out fold), read back from
    `args.lists` when kept there, else computed (`args.jobs` processes) and kept."""
    global _FOLD_META
    _FOLD_META = meta
    cache = Path(args.lists) if args.lists else None
    if cache is not None and cache.exists():
        return pd.read_pickle(cache)
    groups = meta.groupby("group")["problem_id"].unique()
    with ProcessPoolExecutor(args.jobs) as pool:
        lists = pd.DataFrame([r for rs in pool.map(_fold_lists, map(list, groups))
                              for r in rs])
    if cache is not None:
        lists.to_pickle(cache)
    return lists


def holdout_lists(pack: Any, meta: pd.DataFrame, args: argparse.Namespace
                  ) -> tuple[pd.DataFrame, pd.DataFrame, list[dict[str, object]]]:
    """The held-out meta-dataset (its scored problems: near-duplicates out), the holdout
    benchmark's rows, and the shipped pack's lists on those problems."""
    from aicf_induct.induction.meta_dataset import problem_table

    held, base = scored_held_out(args.holdout_meta, args.holdout_rows)
    return held, base, lists_for(pack.proposer().metamodel_, meta, problem_table(held))


def pairs(args: argparse.Namespace) -> None:
    """The (problem, candidate) pairs of the proposer's first `--top` on every problem."""
    pack = load_pack(DEFAULT_PACK)
    meta = pack.seed_meta()
    rows = [*corpus_lists(meta, args).to_dict("records"),
            *holdout_lists(pack, meta, args)[2]]
    out = pd.DataFrame([{"problem": r["problem"], "candidate": c}
                        for r in rows for c in list(r["proposer"])[:args.top]])
    out.to_csv(args.out, index=False)
    print(f"{len(out)} pairs on {out['problem'].nunique()} problems written to {args.out}")


def short(args: argparse.Namespace) -> None:
    from aicf_induct.induction.meta_dataset import score_matrix

    t0 = time.perf_counter()
    runs = pd.concat([pd.read_parquet(f) for f in args.short], ignore_index=True)
    if "epochs" not in runs.columns:  # files of the first short runs: 5 epochs
        runs["epochs"] = PROBE_EPOCHS
    runs = runs[runs["epochs"].fillna(PROBE_EPOCHS) == args.at]
    pack = load_pack(DEFAULT_PACK)
    meta = pack.seed_meta()
    default = resolve_default(meta, None)
    lines = [f"{cpu_model()}, commit {git_commit()}.", ""]
    if args.corpus_rows:
        test = score_matrix(meta, "test_norm_error").fillna(1.0)
        picks = short_methods(corpus_lists(meta, args), runs, test, default)
        lines += short_report("Corpus, leave-one-group-out (expectation over the splits)",
                              picks, read_rows(args.corpus_rows), args.at)
    if args.holdout_meta:
        held, base, rows = holdout_lists(pack, meta, args)
        test = score_matrix(held, "test_norm_error").fillna(1.0)
        picks = short_methods(pd.DataFrame(rows), runs, test, default)
        lines += short_report("Holdout (the shipped pack's lists)", picks, base, args.at)
    lines.append(f"({time.perf_counter() - t0:.0f} s)")
    print("\n".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compute", help="train the probes and write their features")
    c.add_argument("--out", required=True, metavar="FILE",
                   help="the Parquet file the probe features (or short runs) go to")
    c.add_argument("--problems", help="a file with a comma list of problem names")
    c.add_argument("--jobs", type=at_least(1), default=2, metavar="N",
                   help="processes training the probes (default 2)")
    c.add_argument("--candidates", action="store_true",
                   help="every corpus32 candidate short, not the default's probe features")
    c.add_argument("--epochs", type=int, default=PROBE_EPOCHS,
                   help=f"epochs of each short run (default {PROBE_EPOCHS})")
    c.add_argument("--pairs", metavar="FILE", help="train only these (problem, candidate) "
                                                   "pairs (a CSV: `pairs` writes it)")
    c.set_defaults(func=compute)
    pa = sub.add_parser("pairs", help="the proposer's first candidates on every problem")
    pa.add_argument("--out", required=True, metavar="CSV",
                    help="the CSV of (problem, candidate) pairs `compute --pairs` reads")
    pa.add_argument("--lists", required=True, help="the corpus folds' lists (short --lists)")
    pa.add_argument("--holdout-meta", required=True, help="the held-out meta-dataset")
    pa.add_argument("--holdout-rows", required=True, help="induction_holdout.py --save DIR")
    pa.add_argument("--top", type=at_least(1), default=5, metavar="K",
                    help="the proposer's first K candidates per problem (default 5)")
    pa.add_argument("--jobs", type=at_least(1), default=2, metavar="N",
                    help="processes sharing the corpus folds (default 2)")
    pa.set_defaults(func=pairs)
    e = sub.add_parser("evaluate", help="leave-one-group-out with and without probes")
    e.add_argument("--probes", required=True, type=existing_file, metavar="FILE",
                   help="the probe features (`compute --out`'s Parquet file)")
    e.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="processes sharing the LOPO folds (-1: one per core; default 1)")
    e.add_argument("--partitions", type=at_least(0), default=0, metavar="N",
                   help="average the first N splits of the seeds only (default 0: all)")
    e.add_argument("--save", metavar="DIR",
                   help="write the rows without and with probes to DIR/plain.csv and "
                        "DIR/probed.csv")
    e.set_defaults(func=evaluate)
    h = sub.add_parser("holdout", help="the holdout set with probes")
    h.add_argument("--probes", required=True, type=existing_file, metavar="FILE",
                   help="the probe features (`compute --out`'s Parquet file)")
    h.add_argument("--meta", required=True, help="the held-out meta-dataset")
    h.add_argument("--rows", required=True, help="induction_holdout.py --save DIR")
    h.set_defaults(func=holdout)
    sh = sub.add_parser("short", help="picks by the short runs of every candidate")
    sh.add_argument("--short", nargs="+", required=True, type=existing_file, metavar="FILE",
                    help="compute --candidates files")
    sh.add_argument("--corpus-rows", help="the partitions run's rows (evaluate --save's "
                                          "plain.csv): the corpus's baselines")
    sh.add_argument("--holdout-meta", help="the held-out meta-dataset")
    sh.add_argument("--holdout-rows", help="induction_holdout.py --save DIR")
    sh.add_argument("--at", type=int, default=PROBE_EPOCHS, metavar="E",
                    help=f"the rung read: runs' scores after E epochs (default {PROBE_EPOCHS})")
    sh.add_argument("--jobs", type=at_least(1), default=2, metavar="N",
                    help="processes sharing the corpus folds (default 2)")
    sh.add_argument("--lists", metavar="FILE", help="keep the corpus folds' lists here (a "
                                                    "pickle; read back when it exists)")
    sh.set_defaults(func=short)
    args = ap.parse_args()
    args.func(args)
    return 0


if __name__ == "__main__":
    run_main(main)
