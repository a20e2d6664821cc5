"""Variants of the proposer's top-1 under the induction benchmark's leave-one-group-out.

The shipped knowledge pack's corpus, choice on the first half of the seeds and score on the
rest (as `induction_bench.py`); every variant's top-1 against the baselines' top-3 (kNN-3,
portfolio-3, average-3, each picked by validation on the choice seeds), Wilcoxon and Holm
over the three. The variants change only how the gain model's candidate order is made:
  gain             the shipped gain model (HGB, targets on the score seeds)
  gain_allseeds    the same learning every seed of the training problems
  gain_regular     shallower trees, larger leaves
  extratrees       extremely randomized trees in place of the boosting
  bagged           10 boosted models on bootstraps of the training groups, gains averaged
  blend_knn        half the gain model, half the 5 nearest training problems' mean gains
  *_threshold      leave the anchor only for a predicted gain beyond a threshold picked by
                   5-fold group CV inside the training problems
  gain_in_port5    the gain model's order restricted to the portfolio-5 (and the anchor)
Nothing is tuned on the held-out group. About 35 s of one core per group.

`--by-task` runs three others instead, and prints every figure per task too:
  gain                    the shipped gain model, as above
  gain_by_task            a gain model fitted on the training problems of the held-out
                          problem's task only, with that task's anchor (the candidate best
                          on average there)
  gain_by_task_threshold  that, leaving the anchor only for a predicted gain beyond a
                          threshold picked by 5-fold group CV inside those problems

`--expectation DIR` asks the same of the expectation over every split of the seeds: every
variant learns from every seed of the training problems, and a top-1's figure is its
candidate's test normalized error over all the held-out problem's seeds (a single pick
needs no choice seeds, and each seed is a score seed in half of the splits, so this is its
mean over the splits); the baselines' figures are read from DIR/choices.csv, written by
`induction_partitions.py --save DIR`.

usage: python benchmarks/induction_variants.py [--jobs N] [--groups N] [--out CSV]
                                               [--expectation DIR] [--by-task]
"""
import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from induction_bench import read_rows
from threadpoolctl import threadpool_limits

from aicf_induct.induction import baselines
from aicf_induct.induction.lopo import split_seeds
from aicf_induct.induction.meta_dataset import (
    candidate_table,
    feature_columns,
    pattern_columns,
    problem_table,
    score_matrix,
)
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.neighbors import Neighbors
from aicf_induct.induction.pack import DEFAULT_PACK, load_pack

META = load_pack(DEFAULT_PACK).seed_meta()
CHOOSE, SCORE = split_seeds(META)
PROBS = problem_table(META)
FCOLS = [c for c in PROBS.columns if str(c).startswith("f.")]
CANDS = sorted(str(c) for c in META["candidate"].unique())
VAL_A = score_matrix(META, "val_error", CHOOSE).reindex(columns=CANDS)  # choices: raw, as lopo
TEST_B = score_matrix(META, "test_norm_error", SCORE).reindex(columns=CANDS)
TEST_ALL = score_matrix(META, "test_norm_error").reindex(columns=CANDS)
TASK = META.groupby("problem_id")["task"].first()
THRESHOLDS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2)


def hgb(**kw):
    from sklearn.ensemble import HistGradientBoostingRegressor
    p = dict(max_iter=200, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=20,
             random_state=0)
    p.update(kw)
    return HistGradientBoostingRegressor(**p)


def setup(train: pd.DataFrame, seeds):
    """The shipped gain model's design: (P*C, D) rows, gain targets, the anchor."""
    probs = problem_table(train)
    mm = MetaModel(seeds=SCORE, rank_seeds=seeds)
    mm.feature_names_ = [f for f in feature_columns(train)
                         if np.isfinite(probs[f].to_numpy(float)).any()]
    mm.candidates_ = candidate_table(train)
    mm.optimizers_ = sorted(mm.candidates_["optimizer"].astype(str).unique())
    mm.pattern_names_ = pattern_columns(train)
    X = mm.design(probs[mm.feature_names_].to_numpy(float))
    y = score_matrix(train, "test_norm_error", seeds).reindex(
        index=probs.index, columns=mm.candidates_.index).to_numpy(float)
    anchor, gain = mm._gains(y)
    return mm, probs, X, gain, anchor


def top1(mm, gains: np.ndarray, anchor: str, threshold: float = 0.0,
         allowed=None) -> str:
    g = pd.Series(gains, index=mm.candidates_.index)
    g[anchor] = 0.0
    if allowed is not None:
        g = g[g.index.isin(allowed)]
    g = g.sort_values(kind="stable")
    return anchor if g.iloc[0] > -threshold else str(g.index[0])


def inner_threshold(train: pd.DataFrame, seeds, k: int = 5) -> float:
    """The departure threshold with the lowest inner-CV top-1 error on `train`'s groups
    (models and errors on `seeds` of the training problems; None: all)."""
    groups = np.array(sorted(train["group"].unique()))
    rng = np.random.default_rng(1)
    perm = rng.permutation(len(groups))
    err = {t: [] for t in THRESHOLDS}
    for i in range(k):
        out_g = set(groups[perm[i::k]])
        inner = train[~train["group"].isin(out_g)]
        mm, _, X, gain, anchor = setup(inner, seeds)
        ok = np.isfinite(gain)
        model = hgb().fit(X[ok], gain[ok])
        held = train[train["group"].isin(out_g)]
        hp = problem_table(held)
        errs = score_matrix(held, "test_norm_error", seeds).reindex(columns=CANDS)
        for pid in hp.index:
            f = mm.feature_vector({c: float(hp.at[pid, c]) for c in FCOLS})
            g = model.predict(mm.design(f[None, :]))
            for t in THRESHOLDS:
                v = float(errs.loc[pid].get(top1(mm, g, anchor, t), np.nan))
                err[t].append(v if np.isfinite(v) else 1.0)
    means = {t: float(np.mean(v)) for t, v in err.items()}
    return min(THRESHOLDS, key=lambda t: (means[t], t))


def fold(groups, expectation: bool = False):
    threadpool_limits(1)
    from sklearn.ensemble import ExtraTreesRegressor
    seeds = None if expectation else SCORE  # the training problems' seeds the models learn
    rows = []
    for grp in groups:
        held = META["group"] == grp
        train = META[~held]
        mm, tprobs, X, gain, anchor = setup(train, seeds)
        ok = np.isfinite(gain)
        _, _, _, gain_all, anchor_all = setup(train, None)
        ok_all = np.isfinite(gain_all)
        models = {
            "gain": hgb().fit(X[ok], gain[ok]),
            "gain_allseeds": hgb().fit(X[ok_all], gain_all[ok_all]),
            "gain_regular": hgb(max_iter=150, max_leaf_nodes=7, min_samples_leaf=100)
            .fit(X[ok], gain[ok]),
            "extratrees": ExtraTreesRegressor(n_estimators=200, min_samples_leaf=30,
                                              max_features=0.5, random_state=0, n_jobs=1)
            .fit(np.nan_to_num(X[ok], nan=-1e9), gain[ok]),
        }
        # bagging over problem groups: 10 bootstraps of the training groups
        tg = tprobs["group"].to_numpy(str)
        ug = np.unique(tg)
        C = len(mm.candidates_)
        bags = []
        for b in range(10):
            rng = np.random.default_rng(100 + b)
            pick = rng.choice(ug, len(ug), replace=True)
            counts = pd.Series(pick).value_counts()
            w = np.repeat(counts.reindex(tg).fillna(0).to_numpy(float), C)
            sel = ok & (w > 0)
            bags.append(hgb(random_state=b).fit(X[sel], gain[sel], sample_weight=w[sel]))
        t_inner = inner_threshold(train, seeds)
        errors = score_matrix(train, "test_norm_error").reindex(columns=CANDS)
        knn = Neighbors().fit(problem_table(train))
        port5 = baselines.portfolio_choice(errors, 5)
        tgain = gain.reshape(len(tprobs), C)
        for pid in sorted(META.loc[held, "problem_id"].unique()):
            feats, err, pick = held_out(pid, expectation)
            Xq = design_row(mm, feats)
            preds = {name: m.predict(np.nan_to_num(Xq, nan=-1e9) if name == "extratrees"
                                     else Xq) for name, m in models.items()}
            preds["bagged"] = np.mean([m.predict(Xq) for m in bags], axis=0)
            # kNN regression of the gain: the 5 nearest training problems' mean gain
            near = [p for p, _ in knn.nearest(knn.query_vector(feats), 5)]
            rows_idx = [list(tprobs.index).index(p) for p in near]
            knn_gain = np.nanmean(tgain[rows_idx], axis=0)
            preds["blend_knn"] = 0.5 * preds["gain"] + 0.5 * np.nan_to_num(knn_gain, nan=0.0)
            row = {"problem_id": pid, "group": grp, "t_inner": t_inner}
            for name, g in preds.items():
                a = anchor_all if name == "gain_allseeds" else anchor
                row[name] = err(top1(mm, g, a))
            row["gain_threshold"] = err(top1(mm, preds["gain"], anchor, t_inner))
            row["bagged_threshold"] = err(top1(mm, preds["bagged"], anchor, t_inner))
            row["gain_in_port5"] = err(top1(mm, preds["gain"], anchor, allowed=port5))
            if not expectation:  # else the baselines' figures come averaged over the
                row.update(baseline_row(errors, knn, feats, anchor, err, pick))  # splits
            rows.append(row)
    return rows


def held_out(pid: str, expectation: bool):
    """The held-out problem's meta-features, and its `err` (a candidate's test normalized
    error on the score seeds, or all of them; 1 if unscored) and `pick` (the candidate of a
    list best on the choice seeds' validation)."""
    feats = {c: float(PROBS.at[pid, c]) for c in FCOLS}
    val = VAL_A.loc[pid] if pid in VAL_A.index else pd.Series(np.nan, index=CANDS)
    test = (TEST_ALL if expectation else TEST_B).loc[pid]

    def err(c):
        v = float(test.get(c, np.nan))
        return v if np.isfinite(v) else 1.0

    def pick(ranked):
        v = val.reindex(list(ranked)).fillna(np.inf).to_numpy(float)
        return str(ranked[int(np.argmin(v))])

    return feats, err, pick


def design_row(mm, feats) -> np.ndarray:
    """The held-out problem's design rows (one per candidate) for `mm`'s models."""
    return mm.design(mm.feature_vector(feats)[None, :])


def baseline_row(errors, knn, feats, anchor, err, pick) -> dict[str, float]:
    """kNN-3, portfolio-3, best-on-average-3 (each picked by validation), the default and
    the full search, on the single draw."""
    return {"knn3": err(pick(baselines.knn_choice(errors, knn, knn.query_vector(feats), 3))),
            "portfolio3": err(pick(baselines.portfolio_choice(errors, 3))),
            "average3": err(pick(baselines.average_choice(errors, 3))),
            "default": err(anchor), "full_search": err(pick(CANDS))}


def task_fold(groups, expectation: bool = False):
    """`--by-task`: the pooled gain model against one per task (see the docstring)."""
    threadpool_limits(1)
    seeds = None if expectation else SCORE
    rows = []
    for grp in groups:
        held = META["group"] == grp
        train = META[~held]
        mm, _, X, gain, anchor = setup(train, seeds)
        ok = np.isfinite(gain)
        pooled = hgb().fit(X[ok], gain[ok])
        if not expectation:  # the baselines, scored here only on the single draw
            errors = score_matrix(train, "test_norm_error").reindex(columns=CANDS)
            knn = Neighbors().fit(problem_table(train))
        per_task = {}
        for pid in sorted(META.loc[held, "problem_id"].unique()):
            task = str(TASK[pid])
            if task not in per_task:  # fitted once per fold and task
                sub = train[train["task"] == task]
                mm_t, _, X_t, gain_t, anchor_t = setup(sub, seeds)
                ok_t = np.isfinite(gain_t)
                per_task[task] = (mm_t, hgb().fit(X_t[ok_t], gain_t[ok_t]), anchor_t,
                                  inner_threshold(sub, seeds))
            mm_t, model_t, anchor_t, tau = per_task[task]
            feats, err, pick = held_out(pid, expectation)
            g_t = model_t.predict(design_row(mm_t, feats))
            row = {"problem_id": pid, "group": grp, "task": task, "t_inner": tau,
                   "gain": err(top1(mm, pooled.predict(design_row(mm, feats)), anchor)),
                   "gain_by_task": err(top1(mm_t, g_t, anchor_t)),
                   "gain_by_task_threshold": err(top1(mm_t, g_t, anchor_t, tau))}
            if not expectation:
                row.update(baseline_row(errors, knn, feats, anchor, err, pick))
            rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--groups", type=int, default=0, help="first N groups only (0: all)")
    ap.add_argument("--out", default=None, help="write the per-problem rows to this CSV")
    ap.add_argument("--by-task", action="store_true",
                    help="the pooled gain model against one per task, figures per task too")
    ap.add_argument("--expectation", metavar="DIR", default=None,
                    help="the expectation over every split of the seeds, the baselines from "
                         "DIR/choices.csv (induction_partitions.py --save DIR)")
    a = ap.parse_args()
    t0 = time.time()
    groups = sorted(META["group"].unique())
    if a.groups:
        groups = groups[:a.groups]
    parts = [groups[i::a.jobs * 3] for i in range(a.jobs * 3)]
    expect = a.expectation is not None
    with ProcessPoolExecutor(a.jobs) as ex:
        rows = [r for part in ex.map(task_fold if a.by_task else fold, parts,
                                     [expect] * len(parts)) for r in part]
    df = pd.DataFrame(rows).sort_values("problem_id")
    if expect:
        df = df.merge(partition_baselines(Path(a.expectation)), on="problem_id",
                      validate="one_to_one")
    if a.out:
        df.to_csv(a.out, index=False)
    summarize(df)
    if a.by_task:
        for task, sub in df.groupby("task"):
            print(f"\n{task}, {len(sub)} problems:")
            summarize(sub.drop(columns="task"))
    print(f"{len(df)} problems, {len(groups)} groups, {time.time() - t0:.0f} s")


def partition_baselines(folder: Path) -> pd.DataFrame:
    """Per problem: kNN-3, portfolio-3, best-on-average-3, the default and the full search
    averaged over every split of the seeds (`induction_partitions.py --save`'s rows)."""
    ch = read_rows(folder / "choices.csv")
    want = {"knn3": ("knn", 3), "portfolio3": ("portfolio", 3), "average3": ("average", 3),
            "default": ("default", 1), "full_search": ("full_search", 1)}
    cols = {name: ch[(ch["method"] == m) & (ch["k"] == k)].set_index("problem_id")
            ["norm_error"] for name, (m, k) in want.items()}
    return pd.DataFrame(cols).rename_axis("problem_id").reset_index()


def summarize(df: pd.DataFrame) -> None:
    from scipy.stats import wilcoxon

    from aicf_induct.induction.inference import bootstrap_mean_ci, holm
    methods = [c for c in df.columns if c not in ("problem_id", "group", "task", "t_inner",
                                                  "knn3", "portfolio3", "average3",
                                                  "default", "full_search")]
    print("means:", {c: round(float(df[c].mean()), 4) for c in df.columns
                     if c not in ("problem_id", "group", "task")})
    for m in methods:
        ps, parts = [], []
        for b in ("knn3", "portfolio3", "average3"):
            d = (df[m] - df[b]).to_numpy()
            p = wilcoxon(d[d != 0]).pvalue if (d != 0).any() else 1.0
            lo, hi = bootstrap_mean_ci(d)
            ps.append(p)
            parts.append(f"{b} {d.mean():+.4f} [{lo:+.3f},{hi:+.3f}] p {p:.3g}")
        h = holm(np.array(ps))
        print(f"{m:18s} {df[m].mean():.4f} | " + " | ".join(
            f"{s} holm {hh:.3g}" for s, hh in zip(parts, h, strict=True)))


if __name__ == "__main__":
    main()
