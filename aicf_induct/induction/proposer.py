"""The proposer: ranked candidates for a problem, each with its expected normalized error,
an interval, and the evidence behind it.

`Proposer().fit(meta)` fits a `MetaModel`, the `Neighbors` of the corpus problems and
(optionally) a `Miner`'s rules; `propose(features, top_k)` returns a `Proposal`:
candidates ranked by the meta-model, each with the rules that fired (the problem meets the
rule's conditions and the candidate has its trait; significant rules only) and its
normalized error on the nearest corpus problems; and those nearest problems (MinMax-scaled
meta-features, L1 distance) with their distances and winners.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.families import CNNSpec, image_side
from aicf_induct.induction.meta_dataset import (
    RECIPE_COLUMNS,
    check_meta,
    problem_table,
    score_matrix,
)
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.mining import Miner, fired_text, rule_applies, trait_of
from aicf_induct.induction.neighbors import Neighbors
from aicf_induct.induction.space import candidate_of
from aicf_induct.ir.canonical import to_dict


@dataclass(frozen=True)
class Neighbor:
    problem: str  # name
    problem_id: str
    distance: float  # L1 over MinMax-scaled meta-features
    winner: str  # candidate key with the lowest mean normalized error there
    winner_structure: str  # its structure key (spec | recipe)


@dataclass(frozen=True)
class Ranked:
    rank: int  # 1 = best
    candidate: str  # candidate key
    structure_key: str  # spec | recipe
    model: str  # model spec string, e.g. mlp:depth=2,width=64,...
    recipe: dict[str, Any]  # optimizer, lr, weight_decay, batch_size
    expected_norm_error: float  # meta-model mean (0 best .. 1 median or worse)
    low: float  # interval of the normalized error at `level`
    high: float
    on_neighbors: dict[str, float] = field(default_factory=dict)  # problem -> norm. error
    # texts of the rules that fired: those that raise the score first, each side by q-value
    rules: list[str] = field(default_factory=list)
    ir: dict[str, Any] | None = None  # canonical IR for the problem's sizes, when given
    # the meta-model's expected rank within the problem's candidates (0 best, 1 worst):
    # what orders the proposals (None for a model that ranks by the expected error)
    expected_rank: float | None = None


@dataclass(frozen=True)
class Proposal:
    level: float  # coverage the intervals aim at
    candidates: list[Ranked]
    neighbors: list[Neighbor]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Proposer(BaseEstimator):
    """See the module docstring. `rules_q`: rules with a q-value below it are evidence."""

    def __init__(self, metamodel: MetaModel | None = None, miner: Miner | None = None,
                 n_neighbors: int = 3, target: str = "test_norm_error",
                 rules_q: float = 0.05) -> None:
        self.metamodel = metamodel
        self.miner = miner
        self.n_neighbors = n_neighbors
        self.target = target
        self.rules_q = rules_q

    def fit(self, meta: pd.DataFrame, y: Any = None) -> Proposer:
        """Learn from a meta-dataset (`load_meta_dataset`): the meta-model that ranks the
        candidates, the corpus problems the neighbours are drawn from, their errors and
        winners (the evidence a proposal shows), and the significant rules of the miner.
        Returns self."""
        check_meta(meta)
        # a fitted meta-model or miner is used as given; an unfitted one is cloned and fitted
        given = self.metamodel
        self.metamodel_: MetaModel = given if given is not None and _fitted(given) else \
            clone(given or MetaModel(target=self.target)).fit(meta)
        self.problems_ = problem_table(meta)
        self.neighbors_ = Neighbors(self.n_neighbors).fit(self.problems_)
        self.errors_ = score_matrix(meta, self.target).reindex(self.problems_.index)
        self.winners_ = self.errors_.fillna(np.inf).idxmin(axis=1)
        if self.miner is None:
            self.rules_ = pd.DataFrame()
        else:
            miner = self.miner if hasattr(self.miner, "rules_") else clone(self.miner).fit(meta)
            rules = miner.rules_
            self.rules_ = rules[rules["q_value"] < self.rules_q].reset_index(drop=True)
        return self

    def propose(self, features: Mapping[str, float] | pd.Series, top_k: int = 5,
                sizes: tuple[int, int] | None = None) -> Proposal:
        """The top_k candidates for a problem with these meta-features (names with or
        without the `f.` prefix, as `extract_features` gives them). `sizes`: the problem's
        (inputs, outputs), to attach each candidate's canonical IR; `features` a mapping or
        a pandas Series indexed by name. NotFittedError before `fit`."""
        check_top_k(top_k)
        check_is_fitted(self, "metamodel_")
        features = feature_mapping(features)
        mm = self.metamodel_
        given = mm.feature_vector(features)
        if not np.isfinite(given).any():  # a ranking of nothing but the model's defaults
            none = ", none of them a value of one it reads" if features else ""
            raise ConfigError(
                f"no value for any of the {len(given)} meta-features the model reads "
                f"({len(features)} given{none}): compute them with "
                "aicf_induct.induction.featurise(dataset) or "
                "aicf_induct.problems.extract_features(problem)")
        cands = mm.candidates_
        # a cnn candidate builds for square images only
        fitting = None if sizes is None else \
            [k for k in cands.index if _fits(str(cands.at[k, "structure_key"]), sizes)]
        pred = mm.predict_problem(given, among=fitting)
        pred = pred.head(top_k)
        near = self.neighbors_.nearest(features, self.n_neighbors)
        neighbors = [Neighbor(str(self.problems_.at[pid, "problem"]), str(pid), d,
                              str(self.winners_[pid]),
                              str(cands.at[self.winners_[pid], "structure_key"]))
                     for pid, d in near]
        plain = {k.removeprefix("f."): _number(v) for k, v in features.items()}
        # each with its sentence for this problem, made once for every candidate
        fired = [(r, fired_text(r, plain)) for r in self.rules_.to_dict("records")
                 if rule_applies(r, plain)]
        ranked = []
        near_ids = [n.problem_id for n in neighbors]
        for rank, key in enumerate([str(k) for k in pred.index], start=1):
            c = cands.loc[[key]]
            errs = self.errors_.loc[near_ids, [key]].to_numpy(float)[:, 0]
            on_near = {n.problem: float(e) for n, e in zip(neighbors, errs, strict=True)
                       if np.isfinite(e)}
            # those that support the candidate (its trait raises the score) first, each
            # side by q-value: what a reader of the first few should see
            rules = [text for r, text in sorted(
                ((r, text) for r, text in fired if trait_of(r).holds(c)[0]),
                key=lambda rt: (float(rt[0]["effect"]) < 0, float(rt[0]["q_value"])))]
            row = c.iloc[0]
            exp, lo, hi = pred.loc[[key], ["expected", "low", "high"]].to_numpy(float)[0]
            exp_rank = (float(pred.loc[[key], "rank"].to_numpy(float)[0])
                        if "rank" in pred.columns else None)
            skey = str(row["structure_key"])
            ir = None if sizes is None else to_dict(candidate_of(skey).graph(*sizes))
            ranked.append(Ranked(rank, key, skey, str(row["model"]),
                                 {k: _plain(row[k]) for k in RECIPE_COLUMNS},
                                 float(exp), float(lo), float(hi), on_near, rules, ir,
                                 expected_rank=exp_rank))
        return Proposal(mm.level, ranked, neighbors)


def feature_mapping(features: Any) -> Mapping[str, Any]:
    """Meta-features as name -> value: a mapping as given, a pandas Series by its index
    (iterating a Series gives its values, which would be read as names); a ConfigError for
    anything else."""
    if isinstance(features, pd.Series):
        return {str(k): v for k, v in features.items()}
    if isinstance(features, Mapping):
        return features
    raise ConfigError(f"meta-features must be a mapping of name -> value (or a pandas Series "
                      f"indexed by name), got {type(features).__name__}")


def check_top_k(top_k: Any) -> None:
    """ConfigError unless `top_k` is an integer >= 1 (not a string, a float or a bool)."""
    if isinstance(top_k, bool) or not isinstance(top_k, int | np.integer) or top_k < 1:
        raise ConfigError(f"top_k must be an integer >= 1, got {top_k!r}")


def _number(v: Any) -> float:
    """A given meta-feature as a float, NaN (missing) for None or a value the model does
    not read that is not a number (one it reads was checked by `feature_vector`)."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _fits(structure_key: str, sizes: tuple[int, int]) -> bool:
    """Whether the candidate builds for a problem of these (inputs, outputs)."""
    spec = candidate_of(structure_key).spec
    return not isinstance(spec, CNNSpec) or image_side(sizes[0]) is not None


def _fitted(model: MetaModel) -> bool:
    return hasattr(model, "mean_model_")


def _plain(v: Any) -> Any:
    """A JSON-ready scalar (numpy numbers to Python)."""
    return v.item() if isinstance(v, np.generic) else v
