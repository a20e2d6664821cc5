"""Leave-one-problem-out over a corpus, with choice and score on disjoint seeds.

Each fold holds out one near-duplicate *group* (all its problems): the proposer's meta-model,
the neighbors and every baseline learn from the other groups only. On each held-out
problem, every method proposes a ranked list; at each k its top k are "trained" and the one
with the lowest validation error on the `choose` seeds is kept (the full search does this
over all candidates); the kept candidate is scored by its test normalized error (and test
score, for regret) averaged over the `score` seeds, which the choice never saw. So no
number carries the winner's curse. A candidate never scored on those seeds counts as 1.

`LopoResult.choices`: one row per (problem, method, k): the kept candidate, `norm_error`,
and `regret` = the best candidate's mean test score on the score seeds − the kept one's
(accuracy or R² units). `LopoResult.calibration`: one row per (problem, candidate): the
meta-model's interval and whether the held-out outcome fell inside.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.base import clone

from aicf_induct.errors import ConfigError
from aicf_induct.induction import baselines
from aicf_induct.induction.meta_dataset import check_meta, problem_table, score_matrix
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.neighbors import Neighbors

METHODS = ("proposer", "knn", "portfolio", "average", "random", "default", "full_search",
           "oracle")


@dataclass(frozen=True)
class LopoConfig:
    default: str  # the default MLP's candidate key
    choose_seeds: tuple[int, ...]  # seeds a method may look at (validation)
    score_seeds: tuple[int, ...]  # seeds it is scored on (test); disjoint from choose_seeds
    ks: tuple[int, ...] = (1, 3, 5)
    n_random: int = 20  # draws averaged for random-k
    metamodel: MetaModel = field(default_factory=MetaModel)
    random_state: int = 0

    def __post_init__(self) -> None:
        if set(self.choose_seeds) & set(self.score_seeds):
            raise ConfigError(f"choose seeds {list(self.choose_seeds)} and score seeds "
                              f"{list(self.score_seeds)} overlap")
        if not self.choose_seeds or not self.score_seeds:
            raise ConfigError("LOPO needs at least one seed to choose on and one to score on")


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


def folds(meta: pd.DataFrame) -> Iterator[tuple[list[str], pd.DataFrame]]:
    """(held-out problem ids, training rows) per near-duplicate group."""
    for _, held in meta.groupby("group", sort=True):
        ids = sorted(held["problem_id"].unique())
        yield ids, meta[meta["group"] != held["group"].iloc[0]]


def run_lopo(meta: pd.DataFrame, config: LopoConfig) -> LopoResult:
    check_meta(meta)
    probs = problem_table(meta)
    fcols = [str(c) for c in probs.columns if str(c).startswith("f.")]
    cands = sorted(str(c) for c in meta["candidate"].unique())
    baselines.default_choice(cands, config.default)
    val_a = score_matrix(meta, "val_norm_error", config.choose_seeds).reindex(columns=cands)
    test_b = score_matrix(meta, "test_norm_error", config.score_seeds).reindex(columns=cands)
    raw_b = score_matrix(meta, "test_score", config.score_seeds).reindex(columns=cands)
    rows: list[dict[str, object]] = []
    cal: list[pd.DataFrame] = []
    level = config.metamodel.level
    for held, train in folds(meta):
        mm = clone(config.metamodel).set_params(seeds=config.score_seeds).fit(train)
        errors = score_matrix(train, "test_norm_error").reindex(columns=cands)
        knn = Neighbors().fit(problem_table(train))
        for pid in held:
            outcome = _Outcome(_row(val_a, pid, cands), _row(test_b, pid, cands),
                               _row(raw_b, pid, cands))
            if not np.isfinite(outcome.test.to_numpy(float)).any():
                continue  # nothing scored on the score seeds
            feats = dict(zip(fcols, probs.loc[[pid], fcols].to_numpy(float)[0], strict=True))
            pred = mm.predict_problem(feats)
            cal.append(_calibration(pid, pred, outcome.test))
            lists = {
                "proposer": [str(c) for c in pred.index],
                "knn": baselines.knn_choice(errors, knn, knn.query_vector(feats),
                                            max(config.ks)),
                "portfolio": baselines.portfolio_choice(errors, max(config.ks)),
                "average": baselines.average_choice(errors, max(config.ks)),
                "default": [config.default],
                "full_search": cands,
                "oracle": [str(outcome.test.fillna(np.inf).idxmin())],
            }
            rng = np.random.default_rng([config.random_state, int(np.flatnonzero(
                probs.index == pid)[0])])
            draws = [baselines.random_choice(cands, max(config.ks), rng)
                     for _ in range(config.n_random)]
            for k in config.ks:
                base = {"problem_id": pid, "problem": probs.at[pid, "problem"],
                        "group": probs.at[pid, "group"], "k": k}
                for method, ranked in lists.items():
                    top = ranked if method in ("full_search", "oracle") else ranked[:k]
                    pick = outcome.pick(top)
                    rows.append({**base, "method": method, "candidate": pick,
                                 "norm_error": outcome.error(pick),
                                 "regret": outcome.regret(pick)})
                picks = [outcome.pick(d[:k]) for d in draws]
                regrets = np.array([outcome.regret(p) for p in picks])
                rows.append({**base, "method": "random", "candidate": "",
                             "norm_error": float(np.mean([outcome.error(p) for p in picks])),
                             "regret": float(regrets[np.isfinite(regrets)].mean())
                             if np.isfinite(regrets).any() else float("nan")})
    choices = pd.DataFrame(rows)
    calibration = pd.concat(cal, ignore_index=True) if cal else pd.DataFrame()
    return LopoResult(choices, calibration, level)


def _row(df: pd.DataFrame, pid: str, cands: list[str]) -> pd.Series:
    """One problem's row of a problem × candidate frame (all NaN when absent)."""
    if pid not in df.index:
        return pd.Series(np.nan, index=cands, dtype=float)
    return df.loc[[pid]].iloc[0]


@dataclass(frozen=True)
class _Outcome:
    """One held-out problem's per-candidate means: validation error on the choose seeds,
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
