"""Leave-one-problem-out over a corpus, with choice and score on disjoint seeds.

Each fold holds out one near-duplicate *group* (all its problems): the proposer's meta-model,
the neighbors and every baseline learn from the other groups only. On each held-out
problem, every method proposes a ranked list; at each k its top k are "trained" and the one
with the lowest validation error on the `choose` seeds is kept (the full search does this
over all candidates); the kept candidate is scored by its test normalized error (and test
score, for regret) averaged over the `score` seeds, which the choice never saw. So no
number carries the winner's curse. A candidate never scored on those seeds counts as 1.
Every method chooses among the candidates that apply to the held-out problem (a cnn needs an
image-shaped one: `space.applies_to`), as the sweep trained them and `propose` offers
them.

`LopoResult.choices`: one row per (problem, method, k): the kept candidate, `norm_error`,
and `regret` = the best candidate's mean test score on the score seeds − the kept one's
(accuracy or R² units). `LopoResult.calibration`: one row per (problem, candidate): the
meta-model's interval and whether the held-out outcome fell inside.

`run_lopo_partitions` averages the same over many partitions of the seeds into (choose,
score), every half-and-half split by default (`seed_partitions`: 70 of 8 seeds), so a figure
no longer depends on which seeds happened to be the score seeds. There the meta-model ranks
on every seed of the training problems, as the shipped pack's does, and the rows give each
(problem, method, k)'s mean over the partitions (`candidate`: the pick made most often); no
calibration (the interval is one for a mean over one partition's seeds).

`LopoConfig.train_groups` = n: each fold learns from n of the other groups only, drawn at
random (seeded by `random_state` and the held-out group's name, so the draw does not depend
on `n_jobs`), every method from the same n: the learning curve of a smaller corpus, scored
on the same held-out problems as the whole one.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from sklearn.base import clone

from aicf_induct.errors import ConfigError
from aicf_induct.induction import baselines
from aicf_induct.induction.hedge import chosen_set, parse_set_rule
from aicf_induct.induction.lowrank import LowRankOrder, blended
from aicf_induct.induction.meta_dataset import check_meta, problem_table, score_matrix
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.methods import METHODS, SINGLE_PICKS
from aicf_induct.induction.neighbors import Neighbors
from aicf_induct.induction.space import applies_to

RANK_SEEDS = ("score", "all")
_ORDER = re.compile(r"^(lowrank|knn|blendknn)(\d+)$")


def parse_order(name: str) -> tuple[str, int]:
    """An extra order's name (`LopoConfig.orders`) -> its kind and size: "lowrank4" ->
    ("lowrank", 4), the rank; "knn10" -> ("knn", 10) and "blendknn10" -> ("blendknn", 10),
    the neighbours."""
    m = _ORDER.match(name)
    if m is None or int(m.group(2)) < 1:
        raise ConfigError(f"unknown order {name!r} (valid: lowrank<r>, knn<k>, blendknn<k>; "
                          "r, k >= 1)")
    return m.group(1), int(m.group(2))


@dataclass(frozen=True)
class LopoConfig:
    default: str  # the default MLP's candidate key
    choose_seeds: tuple[int, ...]  # seeds a method may look at (validation)
    score_seeds: tuple[int, ...]  # seeds it is scored on (test); disjoint from choose_seeds
    ks: tuple[int, ...] = (1, 3, 5)
    n_random: int = 20  # draws averaged for random-k
    metamodel: MetaModel = field(default_factory=MetaModel)
    random_state: int = 0
    # the seeds of the training problems the meta-model's ranking learns from: "score" (the
    # score seeds, as its interval) or "all"
    rank_seeds: str = "score"
    # each fold learns from this many of the other groups, drawn at random; None: all
    train_groups: int | None = None
    # extra methods, the proposer's top k re-chosen as a set (`hedge.chosen_set`):
    # "hedge<s>", "upside<s>", "knnmix", "knntail<n>", scored beside the proposer's own order
    sets: tuple[str, ...] = ()
    # extra methods, other orders of every candidate scored beside the proposer's, their own
    # top-1 included (`parse_order`): "lowrank<r>" (`lowrank.LowRankOrder` alone; the
    # proposer blends it with its gain order, `MetaModel.blend_rank`), "knn<k>"
    # (`baselines.knn_order`), "blendknn<k>" (the proposer's blend with knn<k> a third member)
    orders: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if set(self.choose_seeds) & set(self.score_seeds):
            raise ConfigError(f"choose seeds {list(self.choose_seeds)} and score seeds "
                              f"{list(self.score_seeds)} overlap")
        if not self.choose_seeds or not self.score_seeds:
            raise ConfigError("LOPO needs at least one seed to choose on and one to score on")
        bad = [k for k in self.ks if isinstance(k, bool) or not isinstance(k, int) or k < 1]
        if bad or not self.ks:  # k = -1 scored all but the last candidate, 0 failed in argmin
            raise ConfigError(f"ks must be integers >= 1, got {list(self.ks)}")
        if self.rank_seeds not in RANK_SEEDS:
            raise ConfigError(f"rank_seeds must be one of {', '.join(RANK_SEEDS)}, got "
                              f"{self.rank_seeds!r}")
        for name in self.sets:
            parse_set_rule(name)
        for name in self.orders:
            parse_order(name)
        if self.train_groups is not None and self.train_groups < 2:
            raise ConfigError(f"train_groups must be >= 2 (or None: all), got "
                              f"{self.train_groups}")


@dataclass
class LopoResult:
    choices: pd.DataFrame
    calibration: pd.DataFrame
    level: float


def split_seeds(meta: pd.DataFrame) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The corpus's seeds halved: the first half to choose on, the rest to score on."""
    seeds = sorted(int(s) for s in meta["seed"].unique())
    if len(seeds) < 2:
        raise ConfigError("choice and score on disjoint seeds need a corpus of >= 2 seeds")
    h = len(seeds) // 2
    return tuple(seeds[:h]), tuple(seeds[h:])


def folds(meta: pd.DataFrame, groups: Sequence[str] | None = None
          ) -> Iterator[tuple[list[str], pd.DataFrame]]:
    """(held-out problem ids, training rows) per near-duplicate group (of `groups`: all)."""
    for name in sorted(meta["group"].unique()) if groups is None else groups:
        held = meta["group"] == name
        yield sorted(meta.loc[held, "problem_id"].unique()), meta[~held]


Partition = tuple[tuple[int, ...], tuple[int, ...]]  # (choose seeds, score seeds)


def seed_partitions(meta: pd.DataFrame) -> list[Partition]:
    """Every split of the corpus's seeds into a choose half and a score half (the first
    `split_seeds` gives first): C(n, n/2) of them, each half once as the choose seeds."""
    seeds = sorted(int(s) for s in meta["seed"].unique())
    first = split_seeds(meta)
    h = len(first[0])
    parts = [(a, tuple(s for s in seeds if s not in a))
             for a in itertools.combinations(seeds, h)]
    return [first, *(p for p in parts if p != first)]


def run_lopo(meta: pd.DataFrame, config: LopoConfig, n_jobs: int = 1,
             progress: bool = False, held_groups: Sequence[str] | None = None) -> LopoResult:
    """Every fold of `meta` (see the module docstring); `n_jobs` processes share the folds
    (joblib; -1: one per core). The result does not depend on `n_jobs`. `progress`: a bar
    on stderr (per group; with several jobs, per share of the groups). `held_groups`: hold
    out only these groups, in turn (each fold still learns from every other group): a
    sample of the folds, for a quicker look."""
    return _run(meta, config, [(config.choose_seeds, config.score_seeds)], n_jobs, progress,
                held_groups)


def run_lopo_partitions(meta: pd.DataFrame, config: LopoConfig,
                        partitions: Sequence[Partition] | None = None, n_jobs: int = 1,
                        progress: bool = False) -> LopoResult:
    """`run_lopo` averaged over `partitions` of the seeds (default: `seed_partitions`), the
    meta-model ranking on every seed of the training problems; `config`'s own seeds are
    replaced by the partitions'. See the module docstring."""
    parts, first = _partitioned(meta, config, partitions)
    return _run(meta, first, parts, n_jobs, progress)


def _partitioned(meta: pd.DataFrame, config: LopoConfig,
                 partitions: Sequence[Partition] | None
                 ) -> tuple[list[Partition], LopoConfig]:
    """The partitions (default: every split of `meta`'s seeds), each checked as a config of
    its own, and the first one's config, ranking on every seed."""
    parts = [(tuple(a), tuple(b)) for a, b in
             (partitions if partitions is not None else seed_partitions(meta))]
    if not parts:
        raise ConfigError("no partition of the seeds to average over")
    configs = [replace(config, choose_seeds=a, score_seeds=b, rank_seeds="all")
               for a, b in parts]
    return parts, configs[0]


def run_holdout(train: pd.DataFrame, held: pd.DataFrame, config: LopoConfig,
                partitions: Sequence[Partition] | None = None,
                fitted: MetaModel | None = None, progress: bool = False) -> LopoResult:
    """Every method learns from `train` (the corpus) once and is scored on each problem of
    `held` (problems the corpus does not hold, none sharing a group with it), each row the
    mean over `partitions` of `held`'s seeds (default: `seed_partitions(held)`). `fitted`:
    the meta-model as is (a shipped pack's) instead of `config.metamodel` fitted on `train`,
    ranking on every seed. The calibration checks each held-out problem's mean over all its
    seeds against the meta-model's interval."""
    from aicf_induct.progress import transient

    check_held_out(train, held)
    parts, first = _partitioned(held, config, partitions)
    meta = pd.concat([train, held], ignore_index=True)
    cands, keys = _candidates(train, config)
    outcomes = score_matrix(held, "test_norm_error").reindex(columns=cands)
    ctx = _Context(meta, first, cands, keys, _partition_matrices(held, cands, parts),
                   outcomes)
    learned = _learn(first, train, cands, single=False, fitted=fitted)
    probs = problem_table(meta)
    rows: list[dict[str, object]] = []
    cal: list[pd.DataFrame] = []
    for pid in transient(sorted(held["problem_id"].astype(str).unique()), enabled=progress,
                         desc="held-out problems", unit="problem"):
        r, c = _held_out(ctx, learned, probs, pid)
        rows += r
        cal += c
    return _result(rows, cal, learned.metamodel.level)


def check_held_out(train: pd.DataFrame, held: pd.DataFrame) -> None:
    """ConfigError unless both are meta-datasets of the same candidates and no problem of
    `held` is one of `train`'s or shares a group with one (naming them)."""
    check_meta(train)
    check_meta(held)
    keys = _structure_keys(train)
    names = held["problem"].astype(str).unique()
    # a candidate that trains on none of them (a cnn, on tables) is not expected
    expected = {c for c, k in keys.items() if any(applies_to(k, n) for n in names)}
    odd = sorted(set(held["candidate"].astype(str)) ^ expected)
    if odd:
        raise ConfigError(f"the held-out problems were trained on other candidates than the "
                          f"training problems ({len(odd)} in one and not the other, e.g. "
                          f"{odd[0]}): sweep them with the same space")
    shared = set(held["group"].astype(str)) & set(train["group"].astype(str))
    seen = set(held["problem_id"].astype(str)) & set(train["problem_id"].astype(str))
    if seen or shared:
        what = held.loc[held["problem_id"].isin(seen) | held["group"].isin(shared), "problem"]
        raise ConfigError(f"{', '.join(sorted(set(what.astype(str))))}: in the training "
                          "problems (or their group), so not held out")


def _candidates(meta: pd.DataFrame, config: LopoConfig) -> tuple[list[str], dict[str, str]]:
    """The candidates (sorted) and their structure keys; ConfigError if the default is not
    one of them."""
    cands = sorted(str(c) for c in meta["candidate"].unique())
    baselines.default_choice(cands, config.default)
    return cands, _structure_keys(meta)


def _structure_keys(meta: pd.DataFrame) -> dict[str, str]:
    """Candidate key -> its structure key."""
    firsts = meta.drop_duplicates("candidate")
    return dict(zip(firsts["candidate"].astype(str), firsts["structure_key"].astype(str),
                    strict=True))


def _partition_matrices(meta: pd.DataFrame, cands: list[str],
                        partitions: Sequence[Partition]) -> tuple[_Matrices, ...]:
    def m(column: str, seeds: tuple[int, ...]) -> pd.DataFrame:
        return score_matrix(meta, column, seeds).reindex(columns=cands)

    # a choice reads raw errors: normalized ones are scaled by every seed's means (the score
    # seeds' too) and clipped per seed, which ties the candidates below the scale's best
    return tuple(_Matrices(m("val_error", a), m("test_error", a),
                           m("test_norm_error", b), m("test_score", b))
                 for a, b in partitions)


def _run(meta: pd.DataFrame, config: LopoConfig, partitions: Sequence[Partition], n_jobs: int,
         progress: bool, held_groups: Sequence[str] | None = None) -> LopoResult:
    from aicf_induct.progress import transient

    check_meta(meta)
    cands, keys = _candidates(meta, config)
    ctx = _Context(meta, config, cands, keys, _partition_matrices(meta, cands, partitions))
    known = sorted(str(g) for g in meta["group"].unique())
    if held_groups is not None:
        unknown = sorted(set(held_groups) - set(known))
        if unknown:
            raise ConfigError(f"no group {', '.join(unknown)} in the corpus")
    groups = known if held_groups is None else sorted(set(held_groups))
    if n_jobs == 1:
        parts = [_folds(ctx, [g]) for g in transient(groups, enabled=progress,
                                                     desc="LOPO folds", unit="group")]
    else:
        from joblib import Parallel, delayed, effective_n_jobs

        n = max(1, min(effective_n_jobs(n_jobs), len(groups)))
        m = min(len(groups), 4 * n) if progress else n  # smaller shares: a moving bar
        jobs = Parallel(n_jobs=n, return_as="generator")(
            delayed(_folds)(ctx, groups[i::m]) for i in range(m))
        parts = list(transient(jobs, enabled=progress, total=m, desc="LOPO folds",
                               unit="share"))
    return _result([r for part in parts for r in part[0]],
                   [c for part in parts for c in part[1]], config.metamodel.level)


def _result(rows: list[dict[str, object]], cal: list[pd.DataFrame], level: float
            ) -> LopoResult:
    """The rows and calibration frames as a LopoResult, in a fixed order."""
    choices = pd.DataFrame(rows)
    if len(choices):
        order = {m: i for i, m in enumerate(METHODS)}
        choices = choices.sort_values(["group", "problem_id", "k", "method"],
                                      key=lambda c: c.map(order) if c.name == "method" else c,
                                      kind="stable").reset_index(drop=True)
    calibration = pd.concat(cal).sort_values(["problem_id", "proposed_rank"]) \
        .reset_index(drop=True) if cal else pd.DataFrame()
    return LopoResult(choices, calibration, level)


@dataclass(frozen=True)
class _Matrices:
    """One partition's problem × candidate means: validation and test error (raw, 1 − score)
    on the choose seeds, what choices read; test normalized error and raw test score on the
    score seeds, what scores them."""

    val_a: pd.DataFrame
    test_a: pd.DataFrame
    test_b: pd.DataFrame
    raw_b: pd.DataFrame


@dataclass(frozen=True)
class _Context:
    """What every fold reads: the corpus and, per partition of the seeds, the held-out
    problems' per-candidate means."""

    meta: pd.DataFrame
    config: LopoConfig
    cands: list[str]
    keys: dict[str, str]  # candidate -> its structure key
    partitions: tuple[_Matrices, ...]
    # problem × candidate test normalized error over all seeds that calibration checks
    # (`run_holdout`); None: one partition's score seeds, and only with one partition
    outcomes: pd.DataFrame | None = None

    def applicable(self, problem: str) -> list[str]:
        """The candidates that train on `problem` (the sweep's rule), in `cands` order."""
        return [c for c in self.cands if applies_to(self.keys[c], problem)]


@dataclass(frozen=True)
class Learned:
    """What the methods learn from the training problems: the meta-model, the candidates'
    test normalized errors (for the warm starts), the neighbors, the extra orders' names and
    the low-rank orders among them, fitted."""

    metamodel: MetaModel
    errors: pd.DataFrame
    knn: Neighbors
    orders: tuple[str, ...] = ()
    lowrank: dict[str, LowRankOrder] = field(default_factory=dict)

    @classmethod
    def of(cls, train: pd.DataFrame, cands: list[str], metamodel: MetaModel,
           orders: Sequence[str] = ()) -> Learned:
        """The warm starts and the `orders` (`LopoConfig.orders`) learned from `train`
        (columns `cands`), beside a fitted meta-model."""
        errors = score_matrix(train, "test_norm_error").reindex(columns=cands)
        probs = problem_table(train)
        knn = Neighbors().fit(probs)
        X = probs[knn.feature_names_].to_numpy(float)
        ranks = {name: parse_order(name) for name in orders}
        return cls(metamodel, errors, knn, tuple(orders),
                   {name: LowRankOrder(r).fit(errors.reindex(probs.index), X)
                    for name, (kind, r) in ranks.items() if kind == "lowrank"})

    def lists(self, features: Mapping[str, float], ok: list[str], n: int,
              sets: Sequence[str] = ()) -> tuple[pd.DataFrame, dict[str, list[str]]]:
        """For a problem with these meta-features, among the candidates `ok`: the
        meta-model's predictions (best first), and the ranked lists of the proposer (all of
        `ok`), of kNN, the portfolio and best-on-average (their first n), of the
        proposer's top n re-chosen by each set method of `sets` (`hedge.chosen_set`), and
        of each extra order (all of `ok`)."""
        pred = self.metamodel.predict_problem(features, among=ok)
        fits = self.errors[ok]
        order = [str(c) for c in pred.index]
        query = self.knn.query_vector(features)
        knn = baselines.knn_choice(fits, self.knn, query, n)
        return pred, {
            "proposer": order,
            "knn": knn,
            "portfolio": baselines.portfolio_choice(fits, n),
            "average": baselines.average_choice(fits, n),
            **{name: chosen_set(name, order, pred, fits, knn, n) for name in sets},
            **{name: self._order(name, pred, query, ok) for name in self.orders},
        }

    def _order(self, name: str, pred: pd.DataFrame, query: np.ndarray,
               ok: list[str]) -> list[str]:
        """The extra order `name` of the candidates `ok` (`pred`: the meta-model's
        predictions for them)."""
        kind, size = parse_order(name)
        if kind == "lowrank":
            return self.lowrank[name].order(query, ok)
        by_knn = baselines.knn_order(self.errors, self.knn, query, size, ok)
        return by_knn if kind == "knn" else blended(*self.metamodel.member_orders(pred),
                                                    by_knn)


def _learn(config: LopoConfig, train: pd.DataFrame, cands: list[str], single: bool,
           fitted: MetaModel | None = None) -> Learned:
    """The methods fitted on `train` (`fitted`: that meta-model as is)."""
    if fitted is None:
        # the interval is for a mean over one split's score seeds; averaged over splits
        # (rank_seeds "all") it is not checked, and the model learns every seed
        ranked_on = config.score_seeds if config.rank_seeds == "score" else None
        fitted = clone(config.metamodel).set_params(
            seeds=config.score_seeds if single else None, rank_seeds=ranked_on).fit(train)
    return Learned.of(train, cands, fitted, config.orders)


def _folds(ctx: _Context, groups: Sequence[str]) -> tuple[list[dict[str, object]],
                                                             list[pd.DataFrame]]:
    """The rows of the folds holding out `groups`: with one partition of the seeds, its
    rows and the calibration; with several, each row the mean over the partitions."""
    probs = problem_table(ctx.meta)
    rows: list[dict[str, object]] = []
    cal: list[pd.DataFrame] = []
    for group, (held, train) in zip(groups, folds(ctx.meta, groups), strict=True):
        train = _drawn(train, ctx.config, group)
        learned = _learn(ctx.config, train, ctx.cands, len(ctx.partitions) == 1)
        for pid in held:
            r, c = _held_out(ctx, learned, probs, pid)
            rows += r
            cal += c
    return rows, cal


def _drawn(train: pd.DataFrame, config: LopoConfig, held_group: str) -> pd.DataFrame:
    """`config.train_groups` of `train`'s groups, drawn for the fold holding out
    `held_group` (all of them when None, or when there are no more)."""
    n = config.train_groups
    names = sorted(train["group"].astype(str).unique())
    if n is None or n >= len(names):
        return train
    rng = np.random.default_rng([config.random_state, *held_group.encode()])
    kept = rng.choice(names, size=n, replace=False)
    return train[train["group"].astype(str).isin(set(kept))]


def _held_out(ctx: _Context, learned: Learned, probs: pd.DataFrame, pid: str
              ) -> tuple[list[dict[str, object]], list[pd.DataFrame]]:
    """One held-out problem's rows (one partition's, or the mean over several) and its
    calibration (against `ctx.outcomes` when given, else one partition's score seeds)."""
    config, cands = ctx.config, ctx.cands
    single = len(ctx.partitions) == 1
    fcols = [str(c) for c in probs.columns if str(c).startswith("f.")]
    feats = dict(zip(fcols, probs.loc[[pid], fcols].to_numpy(float)[0], strict=True))
    ok = ctx.applicable(str(probs.at[pid, "problem"]))
    pred, ranked = learned.lists(feats, ok, max(config.ks), config.sets)
    lists = {**ranked, "default": [config.default], "full_search": ok}
    rng = np.random.default_rng([config.random_state, int(np.flatnonzero(
        probs.index == pid)[0])])
    draws = [baselines.random_choice(ok, max(config.ks), rng) for _ in range(config.n_random)]
    base = {"problem_id": pid, "problem": probs.at[pid, "problem"],
            "group": probs.at[pid, "group"]}
    cal: list[pd.DataFrame] = []
    if ctx.outcomes is not None:
        cal.append(_calibration(pid, pred, _row(ctx.outcomes, pid, cands)))
    per: list[list[dict[str, object]]] = []
    for mats in ctx.partitions:
        outcome = _Outcome(_row(mats.val_a, pid, cands), _row(mats.test_b, pid, cands),
                           _row(mats.raw_b, pid, cands))
        if not np.isfinite(outcome.test.to_numpy(float)).any():
            continue  # nothing scored on the score seeds
        if single and ctx.outcomes is None:
            cal.append(_calibration(pid, pred, outcome.test))
        oracles = {
            "choice_oracle": [str(_row(mats.test_a, pid, cands)[ok].fillna(np.inf).idxmin())],
            "oracle": [str(outcome.test[ok].fillna(np.inf).idxmin())],
        }
        per.append(_scored(base, {**lists, **oracles}, draws, outcome, config.ks))
    return (per[0] if single and per else _mean_rows(per)), cal


def _scored(base: Mapping[str, object], lists: dict[str, list[str]], draws: list[list[str]],
            outcome: _Outcome, ks: tuple[int, ...]) -> list[dict[str, object]]:
    """One held-out problem's rows under one partition: every method's pick at every k."""
    rows: list[dict[str, object]] = []
    for k in ks:
        for method, ranked in lists.items():
            top = ranked if method in SINGLE_PICKS else ranked[:k]
            pick = outcome.pick(top)
            rows.append({**base, "k": k, "method": method, "candidate": pick,
                         "norm_error": outcome.error(pick), "regret": outcome.regret(pick)})
        picks = [outcome.pick(d[:k]) for d in draws]
        regrets = np.array([outcome.regret(p) for p in picks])
        rows.append({**base, "k": k, "method": "random", "candidate": "",
                     "norm_error": float(np.mean([outcome.error(p) for p in picks])),
                     "regret": float(regrets[np.isfinite(regrets)].mean())
                     if np.isfinite(regrets).any() else float("nan")})
    return rows


def _mean_rows(per: list[list[dict[str, object]]]) -> list[dict[str, object]]:
    """Rows of the same (problem, method, k) under several partitions as one: the mean
    normalized error and regret (NaN-skipping), the pick made most often."""
    if not per:
        return []
    df = pd.DataFrame([r for rows in per for r in rows])
    keys = ["problem_id", "problem", "group", "k", "method"]
    out = df.groupby(keys, sort=False).agg(
        norm_error=("norm_error", "mean"), regret=("regret", "mean"),
        candidate=("candidate", lambda c: c.value_counts().index[0]))
    return [{str(c): v for c, v in r.items()} for r in
            out.reset_index()[[*keys, "candidate", "norm_error", "regret"]].to_dict("records")]


def _row(df: pd.DataFrame, pid: str, cands: list[str]) -> pd.Series:
    """One problem's row of a problem × candidate frame (all NaN when absent)."""
    if pid not in df.index:
        return pd.Series(np.nan, index=cands, dtype=float)
    return df.loc[[pid]].iloc[0]


@dataclass(frozen=True)
class _Outcome:
    """One held-out problem's per-candidate means: raw validation error on the choose seeds,
    test normalized error and raw test score on the score seeds."""

    val: pd.Series
    test: pd.Series
    raw: pd.Series

    def pick(self, ranked: Sequence[str]) -> str:
        """The candidate of `ranked` with the lowest validation error (ties: rank order)."""
        vals = self.val.reindex(list(ranked)).fillna(np.inf).to_numpy(float)
        return str(ranked[int(np.argmin(vals))])

    def error(self, cand: str) -> float:
        v = float(self.test.get(cand, np.nan))
        return v if np.isfinite(v) else 1.0

    def regret(self, cand: str) -> float:
        best = float(self.raw.replace([np.inf, -np.inf], np.nan).max())
        v = float(self.raw.get(cand, np.nan))
        return best - v if np.isfinite(v) else float("nan")


def _calibration(pid: str, pred: pd.DataFrame, actual: pd.Series) -> pd.DataFrame:
    out = pred.copy()
    out["actual"] = actual.reindex(out.index).to_numpy(float)
    out["inside"] = (out["actual"] >= out["low"]) & (out["actual"] <= out["high"])
    out["proposed_rank"] = np.arange(1, len(out) + 1)
    out.insert(0, "problem_id", pid)
    out = out.rename_axis("candidate").reset_index()
    return out[np.isfinite(out["actual"])]
