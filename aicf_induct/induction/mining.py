"""Correlation mining and rules over a meta-dataset: which traits help on which problems.

`Miner().fit(meta)` (scikit-learn's estimator contract) learns two tables, ready for the
warehouse:

- `correlations_` (`CORRELATION_COLUMNS`): per (meta-feature, trait), the Spearman
  correlation across problems between the feature and the trait's per-problem effect
  (`traits.effects`), a bootstrap CI (problems resampled; ranks from the full sample), its
  p-value (Student t approximation: problems are independent) and a Benjamini–Hochberg
  q-value over all pairs.
- `rules_` (`RULE_COLUMNS`): per trait, its effect on all problems (depth 0), and the leaves
  of a regression tree (depth ≤ `max_depth`) fitted to the per-problem effects on the
  meta-features: "on problems with `simple.log_n_rows <= 2.8`, `norm.layernorm > 0` raises
  normalized score by 0.11 [0.06, 0.16], 41 problems, q = 0.003".

Effects are on the normalized score, 1 − normalized error (higher is better). Leaves are
*honest*: the tree is grown on a random half of the problem groups (`min_problems` problems
a leaf) and each leaf's effect, bootstrap CI, t-test p-value and problem count come from the
other half only, so choosing the split does not inflate the evidence. The depth-0 rules use
every problem. q-values are BH over all rules together.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import rankdata
from scipy.stats import t as student_t
from sklearn.base import BaseEstimator
from sklearn.tree import DecisionTreeRegressor

from aicf_induct.errors import ConfigError
from aicf_induct.induction.inference import bh, bootstrap_indices, bootstrap_mean_ci
from aicf_induct.induction.meta_dataset import (
    FEATURE_PREFIX,
    candidate_table,
    check_meta,
    feature_columns,
    problem_table,
    score_matrix,
)
from aicf_induct.induction.traits import (
    Trait,
    candidate_traits,
    effects,
    trait_matrix,
)

CORRELATION_COLUMNS = ("feature", "trait", "problems", "correlation", "ci_low", "ci_high",
                       "p_value", "q_value", "mean_effect")
RULE_COLUMNS = ("trait", "trait_column", "trait_op", "trait_value", "depth", "condition",
                "conditions", "problems", "effect", "ci_low", "ci_high", "t", "p_value",
                "q_value", "text")


def _no_traits(n: int, each: int = 2) -> str:
    """Why `candidate_traits` (`min_candidates=each`) found no trait among `n` candidates."""
    if n < 2 * each:
        return (f"mining needs at least {2 * each} candidates (each trait must be held by "
                f"{each} and lacked by {each}); the corpus has {n}, so no candidate trait "
                "varies enough")
    return (f"no candidate trait varies: each must be held by {each} of the {n} candidates "
            f"and lacked by {each}")


TIE_DECIMALS = 12  # effects (normalized errors' differences, in [-1, 1]) equal to this many
# decimals are tied when correlations rank them

class Miner(BaseEstimator):
    """Mines `correlations_` and `rules_` from a meta-dataset (see the module docstring)."""

    def __init__(self, target: str = "test_norm_error", max_depth: int = 2,
                 min_problems: int = 10, n_bootstrap: int = 1000, level: float = 0.95,
                 random_state: int = 0) -> None:
        self.target = target
        self.max_depth = max_depth
        self.min_problems = min_problems
        self.n_bootstrap = n_bootstrap
        self.level = level
        self.random_state = random_state

    def fit(self, meta: pd.DataFrame, y: Any = None) -> Miner:
        """Mine a meta-dataset (`load_meta_dataset`): each candidate trait's effect on each
        problem's score (`effects_`), its rank correlation with each meta-feature
        (`correlations_`) and the rules (`rules_`: its effect on all problems, and on the
        leaves of a shallow tree over the meta-features grown on half of the groups and
        measured on the other), each with a bootstrap interval and a q-value. Returns
        self."""
        check_meta(meta)
        if not 0 <= self.max_depth <= 3:
            raise ConfigError(f"max_depth must be in 0..3, got {self.max_depth}")
        rng = np.random.default_rng(self.random_state)
        probs = problem_table(meta)
        cands = candidate_table(meta)
        scores = -score_matrix(meta, self.target).reindex(index=probs.index,
                                                          columns=cands.index)
        self.traits_ = candidate_traits(cands)
        if not self.traits_:
            raise ConfigError(_no_traits(len(cands)))
        has = trait_matrix(cands, self.traits_)
        y_mat = scores.to_numpy(float)
        self.effects_ = pd.DataFrame(effects(y_mat, has), index=probs.index,
                                     columns=[t.name for t in self.traits_])
        self.feature_names_ = feature_columns(meta)
        X = probs[self.feature_names_].to_numpy(float)
        self.correlations_ = self._correlations(X, rng)
        self.grow_ = _half(probs["group"].to_numpy(str), rng)  # problems the trees grow on
        self.rules_ = self._rules(X)
        return self

    # -- correlations ----------------------------------------------------------------------------
    def _correlations(self, X: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
        E = self.effects_.to_numpy(float)
        rows: list[dict[str, Any]] = []
        for f, name in enumerate(self.feature_names_):
            m = np.isfinite(X[:, f]) & np.isfinite(E).all(axis=1)
            n = int(m.sum())
            if n < max(self.min_problems, 4) or np.ptp(X[m, f]) == 0:
                continue
            zx = _z(rankdata(X[m, f]))
            # effects equal in exact arithmetic differ by float noise (6e-15): rounded
            # first, they tie, and take the average rank as Spearman's ties do
            ze = _z(rankdata(np.round(E[m], TIE_DECIMALS), axis=0))  # (n, T)
            r = np.clip(zx @ ze / n, -1.0, 1.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                tstat = r * np.sqrt((n - 2) / (1 - r ** 2))
            p = 2 * student_t.sf(np.abs(tstat), n - 2)
            r_boot = _boot_corr(zx, ze, bootstrap_indices(n, self.n_bootstrap, rng))
            a = (1 - self.level) / 2
            with warnings.catch_warnings():  # a trait whose resamples all lack spread: NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                lo, hi = np.nanquantile(r_boot, [a, 1 - a], axis=0)
            for t, trait in enumerate(self.traits_):
                rows.append({"feature": name[len(FEATURE_PREFIX):], "trait": trait.name,
                             "problems": n, "correlation": r[t], "ci_low": lo[t],
                             "ci_high": hi[t], "p_value": p[t],
                             "mean_effect": float(E[m, t].mean())})
        out = pd.DataFrame(rows, columns=[c for c in CORRELATION_COLUMNS if c != "q_value"])
        out["q_value"] = bh(out["p_value"].to_numpy(float))
        return out[list(CORRELATION_COLUMNS)].sort_values(
            ["q_value", "p_value", "feature", "trait"]).reset_index(drop=True)

    # -- rules -----------------------------------------------------------------------------------
    def _rules(self, X: np.ndarray) -> pd.DataFrame:
        rows: list[dict[str, Any]] = []
        for t, trait in enumerate(self.traits_):
            e = self.effects_.iloc[:, t].to_numpy(float)
            ok = np.isfinite(e)
            grow, est = ok & self.grow_, ok & ~self.grow_
            found: list[tuple[list[dict[str, Any]], np.ndarray]] = [([], ok)]
            found += [(conds, est & conditions_mask(conds, X, self.feature_names_))
                      for conds in self._leaves(X[grow], e[grow]) if conds]
            for conds, mask in found:
                vals = e[mask]
                if len(vals) < 3:
                    continue
                tv, p = _ttest(vals)
                lo, hi = bootstrap_mean_ci(vals, self.n_bootstrap, self.level,
                                           self.random_state)
                rows.append(_rule_row(trait, conds, vals, tv, p, lo, hi))
        out = pd.DataFrame(rows, columns=[c for c in RULE_COLUMNS if c not in ("q_value",
                                                                             "text")])
        out["q_value"] = bh(out["p_value"].to_numpy(float))
        out["text"] = [rule_text(r) for r in out.to_dict("records")]
        return out[list(RULE_COLUMNS)].sort_values(["q_value", "p_value", "trait", "depth"]) \
            .reset_index(drop=True)

    def _leaves(self, X: np.ndarray, e: np.ndarray) -> list[list[dict[str, Any]]]:
        """The conditions of each leaf of a tree fitted to the effects."""
        if self.max_depth == 0 or len(e) < 2 * self.min_problems:
            return []
        tree = DecisionTreeRegressor(max_depth=self.max_depth,
                                     min_samples_leaf=self.min_problems,
                                     random_state=self.random_state).fit(X, e)
        tr = tree.tree_
        out: list[list[dict[str, Any]]] = []

        def walk(node: int, conds: list[dict[str, Any]]) -> None:
            left, right = tr.children_left[node], tr.children_right[node]
            if left == -1:
                out.append(conds)
                return
            f, thr = int(tr.feature[node]), float(tr.threshold[node])
            miss_left = bool(tr.missing_go_to_left[node])
            name = self.feature_names_[f][len(FEATURE_PREFIX):]
            walk(left, [*conds, {"feature": name, "op": "<=", "value": thr,
                                 "missing": miss_left}])
            walk(right, [*conds, {"feature": name, "op": ">", "value": thr,
                                  "missing": not miss_left}])

        walk(0, [])
        return out


def _z(x: np.ndarray, axis: int = 0) -> np.ndarray:
    sd = x.std(axis=axis, keepdims=True)
    return (x - x.mean(axis=axis, keepdims=True)) / np.where(sd > 0, sd, np.nan)


def _boot_corr(zx: np.ndarray, ze: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """(n_boot, T) correlations of resampled rows (ranks fixed from the full sample)."""
    a = _z(zx[idx], axis=1)  # (B, n)
    b = _z(ze[idx], axis=1)  # (B, n, T)
    return np.asarray(np.einsum("bn,bnt->bt", a, b) / idx.shape[1])


def _ttest(x: np.ndarray) -> tuple[float, float]:
    """One-sample t of the mean against 0, and its two-sided p (1 without spread)."""
    n = len(x)
    sd = float(np.std(x, ddof=1))
    if sd == 0:
        return 0.0, 1.0
    tv = float(np.mean(x) / (sd / np.sqrt(n)))
    return tv, float(2 * student_t.sf(abs(tv), n - 1))


def _half(groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random half of the groups (near-duplicate problems stay together), as a mask."""
    names = np.unique(groups)
    chosen = rng.permutation(names)[: (len(names) + 1) // 2]
    return np.isin(groups, chosen)


def conditions_mask(conds: list[dict[str, Any]], X: np.ndarray, names: list[str]) -> np.ndarray:
    """Which rows of X (problems) meet every condition (missing values as the tree sent
    them)."""
    m = np.ones(len(X), bool)
    for c in conds:
        x = X[:, names.index(FEATURE_PREFIX + c["feature"])]
        side = x <= c["value"] if c["op"] == "<=" else x > c["value"]
        m &= np.where(np.isfinite(x), side, bool(c["missing"]))
    return m


def condition_text(conds: list[dict[str, Any]]) -> str:
    return " and ".join(f"`{c['feature']} {c['op']} {c['value']:.4g}`" for c in conds) or "all"


def _rule_row(trait: Trait, conds: list[dict[str, Any]], vals: np.ndarray, tv: float,
              p: float, lo: float, hi: float) -> dict[str, Any]:
    return {"trait": trait.name, "trait_column": trait.column, "trait_op": trait.op,
            "trait_value": trait.value, "depth": len(conds), "condition": condition_text(conds),
            "conditions": json.dumps(conds), "problems": len(vals), "effect": float(vals.mean()),
            "ci_low": lo, "ci_high": hi, "t": tv, "p_value": float(p)}


def rule_text(r: Mapping[Any, Any]) -> str:
    """The rule as a sentence, as `aicf-induct mine` prints it."""
    where = "on all problems" if r["condition"] == "all" else f"on problems with {r['condition']}"
    raises = r["effect"] >= 0
    # the sentence names the direction, so it gives the size and the size's interval
    # ("lowers ... by 0.07 [0.05, 0.08]", not the signed [-0.08, -0.05])
    lo, hi = (r["ci_low"], r["ci_high"]) if raises else (-r["ci_high"], -r["ci_low"])
    return (f"{where}, `{r['trait']}` {RAISES if raises else 'lowers'} normalized score by "
            f"{abs(r['effect']):.2f} [{lo:.2f}, {hi:.2f}], {r['problems']} problems, "
            f"q = {r['q_value']:.3g}")


RAISES = "raises"


def rule_raises(text: str) -> bool:
    """Whether a `rule_text` sentence says its trait raises the normalized score (for a
    candidate with the trait: evidence for it; else against)."""
    return f"` {RAISES} normalized score" in text


def rule_applies(rule: Mapping[Any, Any], features: Mapping[str, float]) -> bool:
    """Whether a problem with these meta-features (names without the `f.` prefix) meets
    the rule's conditions; a missing feature follows the side the tree sent missing values."""
    for c in json.loads(rule["conditions"]):
        x = features.get(c["feature"], float("nan"))
        if not np.isfinite(x):
            if not c["missing"]:
                return False
        elif (x <= c["value"]) != (c["op"] == "<="):
            return False
    return True


def missing_met(rule: Mapping[Any, Any], features: Mapping[str, float]) -> list[str]:
    """The features of the rule's conditions that the problem lacks (met through the side
    its tree sent missing values), in the conditions' order."""
    return [c["feature"] for c in json.loads(rule["conditions"])
            if not np.isfinite(features.get(c["feature"], float("nan")))]


def fired_text(rule: Mapping[Any, Any], features: Mapping[str, float]) -> str:
    """A fired rule's sentence for this problem: its text, and when a condition was met
    through a feature the problem lacks, a word saying so (else it reads as a threshold the
    problem met)."""
    lacking = missing_met(rule, features)
    if not lacking:
        return str(rule["text"])
    names = " or ".join(f"`{f}`" for f in lacking)
    return (f"{rule['text']} (met as this problem has no {names}: the rule's tree sent "
            "problems without it this way)")


def trait_of(rule: Mapping[Any, Any]) -> Trait:
    return Trait(rule["trait"], rule["trait_column"], rule["trait_op"], rule["trait_value"])
