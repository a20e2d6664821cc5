"""The evaluation's numbers, from a `lopo.LopoResult`: per method and k, mean normalized error
with a bootstrap CI, regret, average rank; the proposer against each baseline (win rate,
mean difference with a bootstrap CI, paired Wilcoxon p, Holm-adjusted over the baselines);
the gap it closes between the default and the full search; and interval calibration.

Problems are the unit of each table: bootstraps resample problems; Wilcoxon pairs them.
`by_group` makes each near-duplicate group one unit instead (its problems' mean), and
`Evaluation.groups` holds every table again so: problems of one group share their source
and often rows, so they are not independent draws.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import wilcoxon

from aicf_induct.errors import ConfigError
from aicf_induct.induction.baselines import resolve_default
from aicf_induct.induction.corpus import same_data_partners
from aicf_induct.induction.inference import bootstrap_indices, bootstrap_mean_ci, holm
from aicf_induct.induction.lopo import (
    LopoConfig,
    LopoResult,
    Partition,
    check_held_out,
    run_holdout,
    run_lopo,
    run_lopo_partitions,
    seed_partitions,
    split_seeds,
)
from aicf_induct.induction.meta_dataset import problem_table, score_matrix
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.methods import BASELINES, CEILINGS, METHODS, REFERENCES, WARM_STARTS
from aicf_induct.induction.neighbors import near_duplicates
from aicf_induct.json_values import json_safe

SUMMARY_COLUMNS = ("method", "k", "problems", "norm_error", "ci_low", "ci_high", "regret",
                   "avg_rank")
COMPARISON_COLUMNS = ("method", "baseline", "k", "baseline_k", "problems", "win_rate",
                      "mean_diff", "ci_low", "ci_high", "p_value", "p_holm")


def _wide(choices: pd.DataFrame, k: int, column: str = "norm_error") -> pd.DataFrame:
    """problem × method values at one k."""
    sub = choices[choices["k"] == k]
    return sub.pivot_table(index="problem_id", columns="method", values=column,
                           aggfunc="first")


def _scored(result: LopoResult, k: int, methods: tuple[str, ...],
            name: str = "k") -> pd.DataFrame:
    """`_wide` at k, after a ConfigError naming a k the result did not evaluate (`name`: the
    argument it came from) or a method it has no pick of there (a KeyError said neither)."""
    ks = sorted(int(x) for x in result.choices["k"].unique()) if "k" in result.choices \
        else []
    if isinstance(k, bool) or k not in ks:
        raise ConfigError(f"{name}={k!r} was not evaluated (ks: "
                          f"{', '.join(map(str, ks)) or 'none'})")
    wide = _wide(result.choices, k)
    missing = [m for m in methods if m not in wide.columns]
    if missing:
        there = [m for m in METHODS if m in wide.columns] + \
            sorted(str(m) for m in wide.columns if m not in METHODS)
        raise ConfigError(f"no method {', '.join(map(repr, missing))} at {name}={k} "
                          f"(methods: {', '.join(there)})")
    return wide


def summary(result: LopoResult, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per (method, k): mean normalized error [95 % bootstrap CI], mean regret, average rank
    among the methods (1 best; ties share)."""
    rows = []
    for k in sorted(result.choices["k"].unique()):
        err = _wide(result.choices, k)
        reg = _wide(result.choices, k, "regret")
        ranks = err.rank(axis=1, method="average")
        for method in [m for m in METHODS if m in err.columns]:
            lo, hi = bootstrap_mean_ci(err[method].to_numpy(float), n_boot, seed=seed)
            r = reg[method].to_numpy(float)
            rows.append({"method": method, "k": int(k), "problems": int(err[method].count()),
                         "norm_error": float(err[method].mean()), "ci_low": lo, "ci_high": hi,
                         "regret": float(r[np.isfinite(r)].mean()) if np.isfinite(r).any()
                         else float("nan"),
                         "avg_rank": float(ranks[method].mean())})
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def compare(result: LopoResult, method: str = "proposer", k: int = 1,
            baselines: str | Iterable[str] | None = None, n_boot: int = 2000,
            seed: int = 0, baseline_k: int | None = None) -> pd.DataFrame:
    """`method`'s top-k against each baseline's top-`baseline_k` (default: k too), on the
    problems both scored: win rate (lower normalized error; ties count half), mean
    difference (method − baseline; negative: method better) with its bootstrap CI,
    two-sided paired Wilcoxon p, Holm over the baselines. The references (`oracle`,
    `choice_oracle`) are left out unless named: they are scales, not baselines. A
    `baseline_k` above k asks whether one pick beats k trained ones."""
    bk = k if baseline_k is None else baseline_k
    baselines = as_baselines(baselines) if baselines is not None else None
    ours = _scored(result, k, (method,))[method]
    theirs = _scored(result, bk, tuple(baselines or ()),
                     "k" if baseline_k is None else "baseline_k")
    names = baselines or tuple(m for m in METHODS if m in theirs.columns and
                               m != method and m not in REFERENCES)
    rows = []
    for base in names:
        pair = pd.concat([ours.rename("ours"), theirs[base].rename("theirs")],
                         axis=1).dropna()
        d = (pair["ours"] - pair["theirs"]).to_numpy(float)
        lo, hi = bootstrap_mean_ci(d, n_boot, seed=seed)
        p = float(wilcoxon(d, zero_method="zsplit").pvalue) if np.any(d != 0) else 1.0
        rows.append({"method": method, "baseline": base, "k": k, "baseline_k": bk,
                     "problems": len(d),
                     "win_rate": float(np.mean((d < 0) + 0.5 * (d == 0))),
                     "mean_diff": float(d.mean()), "ci_low": lo, "ci_high": hi,
                     "p_value": p})
    out = pd.DataFrame(rows, columns=[c for c in COMPARISON_COLUMNS if c != "p_holm"])
    out["p_holm"] = holm(out["p_value"].to_numpy(float))
    return out


def by_group(result: LopoResult) -> LopoResult:
    """`result` with each group as one unit: per (group, method, k) the mean normalized error
    and regret of its problems, keyed by the group's name as its `problem_id`, so that every
    table here reads it as it reads problems. A paired test over problems counts a group of
    five copies of one table's data five times; over groups, once. Each method scored every
    held-out problem (`lopo`), so a group's means are over the same problems for each. The
    calibration is left out: its intervals are for one problem's outcome."""
    c = result.choices
    grouped = c.groupby(["group", "method", "k"], sort=True, observed=True)
    out = grouped.agg(problem=("problem", "first"), candidate=("candidate", "first"),
                      norm_error=("norm_error", "mean"), regret=("regret", "mean"),
                      problems=("problem_id", "nunique")).reset_index()
    out.insert(0, "problem_id", out["group"].astype(str))
    return LopoResult(out, result.calibration.iloc[0:0], result.level)


def gap_closed(result: LopoResult, method: str = "proposer", k: int = 1) -> float:
    """(default − method) / (default − full search) of the mean normalized error: 1 when the
    method matches the full search, 0 when it is no better than the default. NaN when the
    full search is no better than the default: there is no gap to close, and a ratio over a
    gap of zero or below would read as a share (200 %, or a sign flipped)."""
    err = _scored(result, k, ("default", "full_search", method)).mean()
    gap = err["default"] - err["full_search"]
    return float((err["default"] - err[method]) / gap) if gap > 0 else float("nan")


def gap_closed_ci(result: LopoResult, method: str = "proposer", k: int = 1,
                  n_boot: int = 2000, level: float = 0.95, seed: int = 0
                  ) -> tuple[float, float]:
    """Percentile bootstrap interval of `gap_closed`, the problems resampled (their default,
    full-search and `method` errors together; problems missing one are left out). A draw
    whose gap is not positive has no share: it counts as +inf or -inf by the sign of the
    method's gain over the default (a vanishing gap's limit), so a bound is infinite when
    such draws reach past its tail. NaN, NaN when `gap_closed` is NaN."""
    if np.isnan(gap_closed(result, method, k)):
        return float("nan"), float("nan")
    err = _wide(result.choices, k)[["default", "full_search", method]].dropna().to_numpy()
    idx = bootstrap_indices(len(err), n_boot, np.random.default_rng(seed))
    means = err[idx].mean(axis=1)  # (n_boot, 3)
    gain, gap = means[:, 0] - means[:, 2], means[:, 0] - means[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(gap > 0, gain / gap, np.where(gain >= 0, np.inf, -np.inf))
    a = (1 - level) / 2
    lo, hi = np.quantile(share, [a, 1 - a], method="inverted_cdf")  # no inf arithmetic
    return float(lo), float(hi)


def gap_text(share: float, interval: tuple[float, float] | None = None) -> str:
    """A gap share as printed: a percentage (with its 95 % interval when given), or why
    there is none."""
    if np.isnan(share):
        return "no gap (full search no better than the default)"
    if interval is None or np.isnan(interval[0]):
        return f"{share:.0%}"
    lo, hi = (f"{b:.0%}" if np.isfinite(b) else ("-inf" if b < 0 else "+inf")
              for b in interval)
    return f"{share:.0%} [95% CI {lo}, {hi}]"


# column of the family table -> the method whose picks it counts
FAMILY_METHODS = {"proposed": "proposer", "full_search": "full_search", "oracle": "oracle"}
FAMILY_COLUMNS = ("family", "candidates", *FAMILY_METHODS)


def family_of(structure_key: str) -> str:
    """A candidate's structure family: its structure key's prefix (`mlp`, `ftt`, ...)."""
    return str(structure_key).split(":", 1)[0]


def families(result: LopoResult, meta: pd.DataFrame, k: int = 1) -> pd.DataFrame:
    """Per structure family: its candidates in the corpus, and on how many held-out
    problems it is the proposer's kept pick at `k` (at k = 1, the top-1 proposal), the full
    search's pick by validation, and the best on test (oracle: the family that wins)."""
    fam = {str(c): family_of(key) for c, key in
           zip(meta["candidate"], meta["structure_key"], strict=True)}
    at = result.choices[result.choices["k"] == k]
    picked = {col: [fam.get(str(c)) for c in at.loc[at["method"] == m, "candidate"]]
              for col, m in FAMILY_METHODS.items()}
    rows = []
    for f in sorted(set(fam.values())):
        row: dict[str, object] = {"family": f,
                                  "candidates": sum(v == f for v in fam.values())}
        row.update({col: picks.count(f) for col, picks in picked.items()})
        rows.append(row)
    return pd.DataFrame(rows, columns=list(FAMILY_COLUMNS))


def calibration(result: LopoResult, ks: tuple[int, ...] = (1, 3, 5)) -> pd.DataFrame:
    """Share of held-out outcomes inside the meta-model's intervals: over every candidate,
    and over the top-k proposals; with the mean interval width."""
    cal = result.calibration
    if cal.empty:  # averaged over splits of the seeds: no interval to check
        return pd.DataFrame(columns=["level", "candidates", "n", "coverage", "width"])
    rows = [{"candidates": "all", "n": len(cal), "coverage": float(cal["inside"].mean()),
             "width": float((cal["high"] - cal["low"]).mean())}]
    for k in ks:
        top = cal[cal["proposed_rank"] <= k]
        rows.append({"candidates": f"top-{k}", "n": len(top),
                     "coverage": float(top["inside"].mean()),
                     "width": float((top["high"] - top["low"]).mean())})
    out = pd.DataFrame(rows)
    out.insert(0, "level", result.level)
    return out


def seed_curve(meta: pd.DataFrame, choose: tuple[int, ...], score: tuple[int, ...]
               ) -> pd.DataFrame:
    """What a single pick gets from the held-out problem's own test outcomes on n of the
    choice seeds, n = 1 .. len(choose): per problem, the candidate with the lowest test
    normalized error averaged over n choice seeds, scored on the score seeds (unscored: 1),
    averaged over problems and over every n-subset of the choice seeds. At n = len(choose)
    it is the `choice_oracle`. `limit`: the fit a + b/n's a, an estimate of the pick that
    knows every candidate's expected error (n → ∞), the ceiling of any top-1 that the seed
    noise of `score` leaves."""
    outcome = score_matrix(meta, "test_norm_error", score)
    scored = outcome.fillna(1.0).to_numpy(float)
    rows = []
    for n in range(1, len(choose) + 1):
        subsets = list(combinations(choose, n))
        means = []
        for sub in subsets:
            seen = score_matrix(meta, "test_norm_error", sub).reindex_like(outcome)
            pick = np.argmin(seen.fillna(np.inf).to_numpy(float), axis=1)
            means.append(float(scored[np.arange(len(pick)), pick].mean()))
        rows.append({"seeds_seen": n, "subsets": len(subsets),
                     "norm_error": float(np.mean(means))})
    out = pd.DataFrame(rows)
    if len(out) > 1:
        _, a = np.polyfit(1.0 / out["seeds_seen"].to_numpy(float), out["norm_error"], 1)
        out.attrs["limit"] = float(a)
    return out


def cross_fit(first: LopoResult, second: LopoResult) -> LopoResult:
    """Two LOPO runs over the same problems with the seeds' halves swapped (choose on A,
    score on B; then choose on B, score on A) as one: each (problem, method, k)'s
    normalized error and regret averaged over the two draws, each draw's choice still
    disjoint from its score, so the seed noise of the score is halved, as in 2-fold cross-
    validation. `candidate` is the first draw's pick; the calibration holds both draws'."""
    keys = ["problem_id", "method", "k"]
    a, b = first.choices.set_index(keys), second.choices.set_index(keys)
    if set(a.index) != set(b.index):
        raise ConfigError("cross-fitting needs two LOPO runs over the same problems, methods "
                          "and k")
    both = a.copy()
    for col in ("norm_error", "regret"):
        both[col] = (a[col] + b[col].reindex(a.index)) / 2
    cal = pd.concat([first.calibration, second.calibration], ignore_index=True)
    return LopoResult(both.reset_index()[list(first.choices.columns)], cal, first.level)


@dataclass
class Evaluation:
    """Everything `aicf-induct induce evaluate` prints, for one LOPO run."""

    result: LopoResult
    default: str  # the default MLP's candidate key
    choose_seeds: tuple[int, ...]  # of the one split (with several: the first)
    score_seeds: tuple[int, ...]
    baselines: tuple[str, ...]  # those reported
    summary: pd.DataFrame
    comparisons: pd.DataFrame  # the proposer against each baseline, every k
    gaps: dict[int, float]  # k -> share of the default → full-search gap closed
    calibration: pd.DataFrame
    splits: int = 1  # splits of the seeds averaged (`lopo.run_lopo_partitions`)
    # the proposer's top-1 against the warm starts' top-3 (Holm over them): one untrained
    # pick against three trained ones; empty unless k = 1 and 3 are both evaluated
    top1_vs_three: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=list(COMPARISON_COLUMNS)))
    # the same for each `CEILINGS` pick the baselines name, for scale
    ceilings_vs_three: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=list(COMPARISON_COLUMNS)))
    # held-out problems left out as near-duplicates of training ones (`evaluate_holdout`)
    near_duplicates: pd.DataFrame = field(default_factory=pd.DataFrame)
    # k -> the gap share's 95 % bootstrap interval over problems (`gap_closed_ci`)
    gap_intervals: dict[int, tuple[float, float]] = field(default_factory=dict)
    # the same tables with each group as one unit (`by_group`); None when every group is
    # one problem, where they would be these
    groups: Evaluation | None = None

    def as_dict(self) -> dict[str, Any]:
        """What `aicf-induct induce evaluate --json` prints (it prints this): the tables as
        records, JSON-ready (NaN and infinities as null)."""
        return json_safe({
            "default": self.default, "splits": self.splits,
            "choose_seeds": self.choose_seeds, "score_seeds": self.score_seeds,
            "summary": self.summary.to_dict("records"),
            "comparisons": self.comparisons.to_dict("records"),
            "top1_vs_three": self.top1_vs_three.to_dict("records"),
            "ceilings_vs_three": self.ceilings_vs_three.to_dict("records"),
            # null: no gap (the full search no better than the default)
            "gap_closed": {str(k): v for k, v in self.gaps.items()},
            # its 95 % bootstrap interval; null: none, or unbounded that side
            "gap_closed_ci": {str(k): list(ci) for k, ci in self.gap_intervals.items()},
            "calibration": self.calibration.to_dict("records"),
            "near_duplicates": self.near_duplicates.to_dict("records"),
            # null when every group is one problem
            "by_group": None if self.groups is None else
            {key: v for key, v in self.groups.as_dict().items()
             if key in GROUP_TABLES}})


# what `as_dict` repeats with groups as the unit (the rest is the same or per problem)
GROUP_TABLES = ("summary", "comparisons", "top1_vs_three", "ceilings_vs_three", "gap_closed",
                "gap_closed_ci")


def parse_baselines(text: str | None) -> tuple[str, ...]:
    """A comma list of baseline names (None or "": all), ConfigError naming an unknown one."""
    if not text:
        return BASELINES
    names = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    for n in names:
        if n not in BASELINES:
            raise ConfigError(f"unknown baseline '{n}' (valid: {', '.join(BASELINES)})")
    return names


def as_baselines(names: str | Iterable[str]) -> tuple[str, ...]:
    """Baseline names as given to the Python API: a tuple, or one string (a name or a comma
    list, as the CLI takes it; iterating "knn" named the methods 'k', 'n', 'n')."""
    return parse_baselines(names) if isinstance(names, str) else tuple(names)


def evaluate_corpus(meta: pd.DataFrame, *, default: str | None = None,
                    baselines: str | Iterable[str] = BASELINES, ks: tuple[int, ...] = (1, 3, 5),
                    metamodel: MetaModel | None = None, n_random: int = 20, n_jobs: int = 1,
                    n_boot: int = 2000, seed: int = 0, progress: bool = False,
                    rank_seeds: str = "score", swap_seeds: bool = False,
                    all_splits: bool = False) -> Evaluation:
    """Leave-one-group-out evaluation of the proposer on `meta` (choice on the first half of
    the seeds, score on the rest; `swap_seeds`: choice on the second half, score on the
    first; `all_splits`: averaged over every split, `lopo.run_lopo_partitions`), reported
    against `baselines`: the function the CLI and the benchmark call."""
    baselines = as_baselines(baselines)
    if "group" in meta and meta["group"].nunique() < 2:  # no fold keeps a problem to learn from
        n = meta["problem_id"].nunique()
        raise ConfigError(f"leave-one-problem-out needs at least 2 problems (groups); the "
                          f"corpus holds {n} problem{'s' if n != 1 else ''} in 1 group")
    default_key = resolve_default(meta, default)
    choose, score = split_seeds(meta)
    if swap_seeds:  # the same evaluation on the other draw of the seeds' noise
        if all_splits:
            raise ConfigError("swapping the seeds' halves is one split; averaging every "
                              "split takes both: give one of them")
        choose, score = score, choose
    config = LopoConfig(default_key, choose, score, ks, n_random,
                        metamodel if metamodel is not None else MetaModel(), seed, rank_seeds)
    parts = seed_partitions(meta) if all_splits else [(choose, score)]
    res = run_lopo_partitions(meta, config, parts, n_jobs=n_jobs, progress=progress) \
        if all_splits else run_lopo(meta, config, n_jobs=n_jobs, progress=progress)
    return _evaluation(res, default_key, (choose, score), len(parts), baselines, ks, n_boot,
                       seed)


def evaluate_holdout(train: pd.DataFrame, held: pd.DataFrame, *,
                     fitted: MetaModel | None = None, metamodel: MetaModel | None = None,
                     default: str | None = None,
                     baselines: str | Iterable[str] = BASELINES, ks: tuple[int, ...] = (1, 3, 5),
                     n_random: int = 20, n_boot: int = 2000, seed: int = 0,
                     progress: bool = False, sets: tuple[str, ...] = (),
                     orders: tuple[str, ...] = ()) -> Evaluation:
    """The proposer and the baselines learned from `train` (a pack's corpus; `fitted`: its
    shipped meta-model as is; `metamodel`: an unfitted variant, fitted on `train` on every
    seed; neither: `MetaModel()`) and scored on the problems of `held`, which they never saw,
    averaged over every split of `held`'s seeds (`lopo.run_holdout`); `sets`: the
    proposer's top k re-chosen as a set too (`LopoConfig.sets`); `orders`: other orders
    scored beside it (`LopoConfig.orders`). Held-out problems
    that are near-duplicates of a training problem by their meta-features
    (`neighbors.near_duplicates`) are left out, and listed in `Evaluation.near_duplicates`."""
    if fitted is not None and metamodel is not None:
        raise ConfigError("give a fitted meta-model or one to fit on the training problems, "
                          "not both")
    baselines = as_baselines(baselines)
    default_key = resolve_default(train, default)
    held, dups = without_near_duplicates(train, held)
    if held.empty:
        raise ConfigError("every held-out problem is a near-duplicate of a training problem")
    parts = seed_partitions(held)
    config = LopoConfig(default_key, *parts[0], ks, n_random,
                        metamodel if metamodel is not None else MetaModel(), seed, "all",
                        sets=sets, orders=orders)
    res = run_holdout(train, held, config, parts, fitted=fitted, progress=progress)
    ev = _evaluation(res, default_key, parts[0], len(parts), baselines, ks, n_boot, seed)
    ev.near_duplicates = dups
    return ev


def without_near_duplicates(train: pd.DataFrame, held: pd.DataFrame
                            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`held`'s rows without the problems that are near-duplicates of a `train` problem,
    by their meta-features (`neighbors.near_duplicates`) or because `corpus.SAME_DATA` names
    them as the same data (`same_data` true; no distance), and those near-duplicates' rows;
    ConfigError first if a held-out problem (or its group) is one of `train`'s, so that the
    same table is named as such before any distance is measured."""
    check_held_out(train, held)
    dups = near_duplicates(problem_table(train), problem_table(held)).assign(same_data=False)
    partners = same_data_partners(train["problem"].astype(str).unique(),
                                  held["problem"].astype(str).unique())
    named = held.drop_duplicates("problem_id")
    named = named[named["problem"].isin(partners) & ~named["problem_id"].isin(
        dups["problem_id"])]
    copies = pd.DataFrame({"problem_id": named["problem_id"], "problem": named["problem"],
                           "nearest": named["problem"].map(partners), "distance": np.nan,
                           "threshold": dups["threshold"].iloc[0] if len(dups) else np.nan,
                           "same_data": True})
    if not copies.empty:
        dups = pd.concat([dups, copies], ignore_index=True) if len(dups) else \
            copies.reset_index(drop=True)
    return held[~held["problem_id"].isin(dups["problem_id"])], dups


def duplicate_note(row: Any, whose: str = "the corpus's") -> str:
    """Why a near-duplicate (a row of `without_near_duplicates`'s second frame) is left
    out, as the scripts and the CLI print it."""
    if row.same_data:
        return (f"{row.problem} left out, the same data as {whose} {row.nearest} "
                "(corpus.SAME_DATA)")
    return (f"{row.problem} left out, a near-duplicate of {whose} {row.nearest} (meta-feature "
            f"distance {row.distance:.2f} < {row.threshold:.2f}, half the least between two "
            f"of {whose} groups)")


def _evaluation(res: LopoResult, default_key: str, first: Partition,
                splits: int, baselines: tuple[str, ...], ks: tuple[int, ...], n_boot: int,
                seed: int, groups: bool = True) -> Evaluation:
    """The tables of one evaluation's rows, for the methods `baselines` names; with
    `groups`, again with each group as one unit where a group holds several problems."""
    shown = {"proposer", *baselines}
    s = summary(res, n_boot=n_boot, seed=seed)
    against = tuple(b for b in baselines if b not in REFERENCES)  # scales, not baselines
    comps = pd.concat([compare(res, k=k, baselines=against, n_boot=n_boot, seed=seed)
                       for k in ks], ignore_index=True) if against else \
        pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    warm = tuple(b for b in WARM_STARTS if b in baselines)
    empty = pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    line = {1, 3} <= set(ks) and bool(warm)

    def against_warm(method: str) -> pd.DataFrame:
        return compare(res, method=method, k=1, baseline_k=3, baselines=warm, n_boot=n_boot,
                       seed=seed)

    goal = against_warm("proposer") if line else empty
    refs = [against_warm(m) for m in CEILINGS if m in baselines] if line else []
    return Evaluation(res, default_key, first[0], first[1], baselines,
                      s[s["method"].isin(shown)].reset_index(drop=True), comps,
                      {k: gap_closed(res, k=k) for k in ks}, calibration(res, ks), splits,
                      goal, ceilings_vs_three=pd.concat(refs, ignore_index=True) if refs
                      else empty,
                      gap_intervals={k: gap_closed_ci(res, k=k, n_boot=n_boot, seed=seed)
                                     for k in ks},
                      groups=_evaluation(by_group(res), default_key, first, splits,
                                         baselines, ks, n_boot, seed, groups=False)
                      if groups and shares_groups(res) else None)


def shares_groups(res: LopoResult) -> bool:
    """Whether some group holds more than one of the scored problems (else `by_group` gives
    the problems' own tables again)."""
    c = res.choices
    return bool(c["group"].nunique() < c["problem_id"].nunique())
