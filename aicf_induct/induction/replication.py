"""Rule replication: mine rules on a random half of the problem groups, and check each
significant one on the other half.

A rule *replicates* when, on the other half's problems that meet its conditions, the
trait's mean effect has the same sign and its 95 % bootstrap CI excludes 0.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from sklearn.base import clone

from aicf_induct.induction.inference import bootstrap_mean_ci
from aicf_induct.induction.meta_dataset import candidate_table, problem_table, score_matrix
from aicf_induct.induction.mining import Miner, conditions_mask, trait_of
from aicf_induct.induction.traits import effects

REPLICATION_COLUMNS = ("trait", "condition", "effect", "q_value", "problems_other",
                       "effect_other", "ci_low_other", "ci_high_other", "replicated")


def halves(meta: pd.DataFrame, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`meta`'s rows split by group into a random half A (the larger, when odd) and B."""
    groups = np.array(sorted(meta["group"].unique()))
    half = set(np.random.default_rng(seed).permutation(groups)[: (len(groups) + 1) // 2])
    return meta[meta["group"].isin(half)], meta[~meta["group"].isin(half)]


def rule_replication(meta: pd.DataFrame, miner: Miner, q: float = 0.05,
                     seed: int = 0) -> pd.DataFrame:
    """One row per rule with q < `q` mined on half A, with its effect on half B, over the
    candidates that hold its trait as mined: by A's candidate table (a candidate's pattern
    is its median over the problems, which for a parameter count can fall on the other side
    of the rule's threshold over the whole corpus)."""
    a, b = halves(meta, seed)
    mined = clone(miner).fit(a)
    rules = mined.rules_[mined.rules_["q_value"] < q]
    probs = problem_table(b)
    cands = candidate_table(a)
    y = -score_matrix(b, mined.target).reindex(index=probs.index, columns=cands.index)
    X = probs[mined.feature_names_].to_numpy(float)
    rows = []
    for r in rules.to_dict("records"):
        e = effects(y.to_numpy(float), trait_of(r).holds(cands)[:, None].astype(float))[:, 0]
        m = conditions_mask(json.loads(r["conditions"]), X, mined.feature_names_) & np.isfinite(e)
        lo, hi = bootstrap_mean_ci(e[m], seed=seed)
        eff = float(e[m].mean()) if m.any() else float("nan")
        same = np.sign(eff) == np.sign(r["effect"])
        rows.append({"trait": r["trait"], "condition": r["condition"], "effect": r["effect"],
                     "q_value": r["q_value"], "problems_other": int(m.sum()),
                     "effect_other": eff, "ci_low_other": lo, "ci_high_other": hi,
                     "replicated": bool(same and (lo > 0 or hi < 0))})
    return pd.DataFrame(rows, columns=list(REPLICATION_COLUMNS))


def replication_by_split(rep: pd.DataFrame, splits: list[int]) -> pd.DataFrame:
    """`rep`: rows of `rule_replication` over several random halves, with a `split` column.
    One row per split of `splits`: its rules with q < 0.05 and the share that replicate (a
    split that mined none: 0 rules, no share)."""
    per = rep.groupby("split").agg(rules=("replicated", "size"),
                                   replicate=("replicated", "mean"))
    per = per.reindex(splits).fillna({"rules": 0}).astype({"rules": "int64"})
    return per.rename_axis("split").reset_index()


def replication_summary(rep: pd.DataFrame) -> dict[str, float]:
    """`rep` as `replication_by_split` takes it. `pooled`: the share of all those rules
    that replicate; `mean`, `min`, `max`: of each split's share; `splits`: the splits that
    mined a rule (one that mined none has no share); `rules`: how many rules in all."""
    per_split = replication_by_split(rep, sorted(rep["split"].unique()))["replicate"]
    return {"splits": float(len(per_split)), "rules": float(len(rep)),
            "pooled": float(rep["replicated"].mean()) if len(rep) else float("nan"),
            "mean": float(per_split.mean()), "min": float(per_split.min()),
            "max": float(per_split.max())}
