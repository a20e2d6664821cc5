"""Meta-model, proposer with its evidence, and rule replication, on a planted meta-dataset."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from aicf_induct.errors import ConfigError
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.mining import Miner
from aicf_induct.induction.proposer import Proposer
from aicf_induct.induction.replication import REPLICATION_COLUMNS, rule_replication
from tests.induction.synthetic_meta import planted

SMALL = {"max_iter": 60, "min_samples_leaf": 10}
LAYERNORM = {f"c{i:02d}" for i in range(8, 16)}  # synthetic_meta's candidate order


@pytest.fixture(scope="module")
def proposer() -> Proposer:
    return Proposer(metamodel=MetaModel(**SMALL), miner=Miner(n_bootstrap=200)).fit(planted())


def test_metamodel_contract_and_predictions() -> None:
    meta = planted(P=30)
    mm = MetaModel(**SMALL)
    assert clone(mm).get_params() == mm.get_params() and not hasattr(mm, "mean_model_")
    assert mm.fit(meta) is mm
    pred = mm.predict_problem({"a": 0.1, "b": 0.5, "c": 0.5})
    assert list(pred.columns) == ["expected", "low", "high"] and len(pred) == 16
    assert (pred["low"] <= pred["high"]).all()
    assert pred["expected"].is_monotonic_increasing
    with pytest.raises(ConfigError, match="level must be in"):
        MetaModel(level=1.5).fit(meta)


def test_the_ranking_learns_from_rank_seeds_and_the_interval_from_seeds() -> None:
    # LOPO gives the interval its score seeds (the outcome it is checked against is a mean
    # over as many) and the ranking every seed of the training problems (less noise)
    meta = planted(P=30, seeds=4)
    feats = {"a": 0.1, "b": 0.5, "c": 0.5}
    split = MetaModel(**SMALL, seeds=(2, 3)).fit(meta).predict_problem(feats)
    every = MetaModel(**SMALL).fit(meta).predict_problem(feats)
    only = MetaModel(**SMALL, seeds=(2, 3), rank_seeds=(2, 3)).fit(meta).predict_problem(feats)
    pd.testing.assert_series_equal(split["expected"], every["expected"].reindex(split.index))
    pd.testing.assert_frame_equal(split[["low", "high"]], only[["low", "high"]].reindex(
        split.index))
    assert not np.allclose(split["expected"].sort_index(), only["expected"].sort_index())


def test_proposals_rank_and_explain(proposer: Proposer) -> None:
    prop = proposer.propose({"a": 0.1, "b": 0.5, "c": 0.5}, top_k=3)
    assert [c.rank for c in prop.candidates] == [1, 2, 3]
    assert {c.candidate for c in prop.candidates} <= LAYERNORM  # layernorm helps where a < .5
    assert all(c.low <= c.high for c in prop.candidates) and prop.level == 0.8
    # evidence: nearest problems, nearest first, with their winners and this candidate there
    d = [n.distance for n in prop.neighbors]
    assert len(d) == 3 and d == sorted(d)
    errors = proposer.errors_
    for n in prop.neighbors:
        assert n.winner == errors.loc[n.problem_id].idxmin()
        assert n.winner_structure.startswith("mlp:")
    top = prop.candidates[0]
    assert set(top.on_neighbors) == {n.problem for n in prop.neighbors}
    assert any("`a <= " in r and "`norm.layernorm > 0` raises" in r for r in top.rules)
    assert top.recipe == {"optimizer": "adam", "lr": 0.001, "weight_decay": 0.0,
                          "batch_size": 32.0}
    json.dumps(prop.as_dict())  # what the service returns
    # where a is large the conditional rule does not fire
    other = proposer.propose({"f.a": 0.9, "f.b": 0.5, "f.c": 0.5}, top_k=16)
    assert not any("`a <= " in r for c in other.candidates for r in c.rules)
    assert not any(r for c in other.candidates if c.candidate not in LAYERNORM
                   for r in c.rules)  # rules fire only for candidates with the trait


def test_rules_replicate_on_the_other_half() -> None:
    rep = rule_replication(planted(P=80), Miner(n_bootstrap=200))
    assert list(rep.columns) == list(REPLICATION_COLUMNS)
    assert len(rep) >= 1 and set(rep["trait"]) == {"norm.layernorm > 0"}
    assert rep["replicated"].all()
    none = rule_replication(planted(P=80, shuffle=True), Miner(n_bootstrap=200))
    assert none.empty


def test_the_proposer_uses_a_fitted_metamodel_as_given() -> None:
    meta = planted(P=30)
    mm = MetaModel(**SMALL).fit(meta)
    p = Proposer(metamodel=mm).fit(meta)
    assert p.metamodel_ is mm and p.rules_.empty
    pd.testing.assert_frame_equal(p.metamodel_.predict_problem({"a": 0.3}),
                                  mm.predict_problem({"a": 0.3}))
    assert np.isfinite(p.propose({"a": 0.3}, 2).candidates[0].expected_norm_error)
