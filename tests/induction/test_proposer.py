"""Meta-model, proposer with its evidence, and rule replication, on a planted meta-dataset."""

from __future__ import annotations

import copy
import itertools
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from aicf_induct.errors import ConfigError
from aicf_induct.induction.lowrank import blended
from aicf_induct.induction.meta_dataset import PATTERN_PREFIX, assemble, score_matrix
from aicf_induct.induction.metamodel import MetaModel, fold_labels, within_problem_rank
from aicf_induct.induction.mining import Miner, rule_raises, rule_text
from aicf_induct.induction.proposer import Proposer
from aicf_induct.induction.replication import REPLICATION_COLUMNS, halves, rule_replication
from tests.induction.synthetic_meta import frames, planted

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
    feats = {"a": 0.1, "b": 0.5, "c": 0.5}
    pred = mm.predict_problem(feats)
    assert list(pred.columns) == ["expected", "low", "high", "gain", "lowrank"]
    assert len(pred) == 16 and (pred["low"] <= pred["high"]).all()
    assert pred.at[mm.anchor_, "gain"] == 0.0
    # by default the gain model's order blended with the low-rank one's, by mean position
    by_gain = list(pred.loc[mm.candidates_.index].sort_values(["gain", "expected"],
                                                               kind="stable").index)
    by_lowrank = list(pred.loc[by_gain].sort_values("lowrank", kind="stable").index)
    assert list(pred.index) == blended(by_gain, by_lowrank) != by_gain
    # among some candidates only (those that apply to a problem): the blend's positions
    # count those alone, and their predictions are the same
    some = [str(c) for c in mm.candidates_.index[::3]]
    among = mm.predict_problem(feats, among=some)
    assert list(among.index) == blended([c for c in by_gain if c in some],
                                        [c for c in by_lowrank if c in some])
    pd.testing.assert_frame_equal(among, pred.loc[among.index])
    alone = MetaModel(**SMALL, blend_rank=0).fit(meta).predict_problem(feats)
    assert list(alone.columns) == ["expected", "low", "high", "gain"]
    assert alone["gain"].is_monotonic_increasing  # the gain model alone orders
    pd.testing.assert_frame_equal(alone, pred.drop(columns="lowrank").loc[alone.index])
    by_error = MetaModel(**SMALL, ranking="error", blend_rank=0).fit(meta).predict_problem(
        feats)
    assert list(by_error.columns) == ["expected", "low", "high"]
    assert by_error["expected"].is_monotonic_increasing
    pd.testing.assert_frame_equal(by_error, pred[["expected", "low", "high"]].reindex(
        by_error.index))  # the same mean and interval models either way
    with pytest.raises(ConfigError, match="level must be in"):
        MetaModel(level=1.5).fit(meta)
    with pytest.raises(ConfigError, match="ranking must be one of rank, raw_rank, error, gain"):
        MetaModel(ranking="score").fit(meta)
    with pytest.raises(ConfigError, match="blend_rank must be >= 0"):
        MetaModel(blend_rank=-1).fit(meta)


def test_within_problem_ranks_by_hand() -> None:
    errors = np.array([[3.0, 1.0, 2.0], [np.nan, 5.0, 5.0], [1.0, np.nan, np.nan]])
    np.testing.assert_array_equal(within_problem_rank(errors), [[1.0, 0.0, 0.5],
                                                                [np.nan, 0.5, 0.5],
                                                                [0.5, np.nan, np.nan]])


def test_within_problem_ranks_put_a_failed_score_last() -> None:
    errors = np.array([[np.inf, 1.0, 2.0], [np.inf, np.nan, 3.0], [np.inf, np.inf, 0.5]])
    np.testing.assert_array_equal(within_problem_rank(errors), [[1.0, 0.0, 0.5],
                                                                [1.0, np.nan, 0.0],
                                                                [0.75, 0.75, 0.0]])


def test_the_raw_rank_tells_the_bad_from_the_very_bad() -> None:
    # c00 just worse than the median everywhere, c01 the worst everywhere: the normalized
    # error clips both to 1, so "rank" ties them; their raw errors' ranks differ (0.6, 1)
    rng = np.random.default_rng(7)
    P = 45
    pats = [{"norm.layernorm": float(ln), "depth": float(d), "act.relu": float(r)}
            for ln, d, r in itertools.product((0, 1), (1, 2, 3, 4), (0, 1))]
    scores = np.empty((P, 16, 2))
    for p in range(P):
        scores[p, 2:] = rng.permutation(np.linspace(0.40, 0.60, 14))[:, None]
        scores[p, 0], scores[p, 1] = 0.47, 0.05
    scores += rng.normal(0, 1e-4, scores.shape)
    meta = assemble(*frames(scores, {k: rng.random(P) for k in "ab"}, pats, 2))
    assert (score_matrix(meta, "test_norm_error")[["c00", "c01"]] == 1.0).all().all()
    feats = {"a": 0.5, "b": 0.5}
    by_raw = MetaModel(**SMALL, ranking="raw_rank", blend_rank=0).fit(meta)
    raw = by_raw.predict_problem(feats)
    assert raw.at["c00", "rank"] < 0.75 < 0.9 < raw.at["c01", "rank"]
    tied = MetaModel(**SMALL, ranking="rank", blend_rank=0).fit(meta).predict_problem(feats)
    assert abs(tied.at["c00", "rank"] - tied.at["c01", "rank"]) < 0.05
    rec = json.loads(json.dumps(by_raw.export()))
    pd.testing.assert_frame_equal(MetaModel.restore(meta, rec).predict_problem(feats), raw)


def _best_or_worst_against_just_above_median(P: int = 45) -> pd.DataFrame:
    """16 candidates, uninformative features: c00 is the best on a third of the problems and
    the worst on the rest; c01 is just better than the median everywhere. By normalized
    error (clipped at the median) c00 wins (0.67 against ~0.98); by rank within the problem
    c01 does (~0.47 against 0.67)."""
    rng = np.random.default_rng(5)
    pats = [{"norm.layernorm": float(ln), "depth": float(d), "act.relu": float(r)}
            for ln, d, r in itertools.product((0, 1), (1, 2, 3, 4), (0, 1))]
    scores = np.empty((P, 16, 2))
    for p in range(P):
        scores[p, 2:] = rng.permutation(np.linspace(0.40, 0.60, 14))[:, None]
        scores[p, 0] = 0.9 if p % 3 == 0 else 0.1
        scores[p, 1] = 0.505
    scores += rng.normal(0, 1e-4, scores.shape)
    return assemble(*frames(scores, {k: rng.random(P) for k in "ab"}, pats, 2))


def test_the_rank_model_orders_by_rank_where_the_clipped_error_disagrees() -> None:
    meta = _best_or_worst_against_just_above_median()
    feats = {"a": 0.5, "b": 0.5}
    by_rank = MetaModel(**SMALL, ranking="rank", blend_rank=0).fit(meta).predict_problem(feats)
    by_error = MetaModel(**SMALL, ranking="error", blend_rank=0).fit(meta).predict_problem(
        feats)
    order = [str(k) for k in by_rank.index]
    assert order.index("c01") < order.index("c00")
    assert by_rank.at["c01", "rank"] < by_rank.at["c00", "rank"]
    order = [str(k) for k in by_error.index]
    assert order.index("c00") < order.index("c01")
    assert by_error.at["c00", "expected"] < by_error.at["c01", "expected"]


def test_a_pack_record_restores_its_ranking() -> None:
    meta = planted(P=30)
    mm = MetaModel(**SMALL, ranking="rank").fit(meta)
    rec = json.loads(json.dumps(mm.export()))
    assert set(rec["models"]) == {"mean", "low", "high", "rank"}
    pd.testing.assert_frame_equal(MetaModel.restore(meta, rec).predict_problem({"a": 0.2}),
                                  mm.predict_problem({"a": 0.2}))
    # a record from before the rank model (and the blend): ranked by the expected error,
    # as it was
    old = {**{k: v for k, v in rec.items() if k != "lowrank"},
           "params": {k: v for k, v in rec["params"].items()
                      if k not in ("ranking", "blend_rank")},
           "models": {k: v for k, v in rec["models"].items() if k != "rank"}}
    restored = MetaModel.restore(meta, old)
    assert restored.ranking == "error" and restored.blend_rank == 0
    assert restored.predict_problem({"a": 0.2})["expected"].is_monotonic_increasing
    with pytest.raises(ValueError, match="the rank model is missing"):
        MetaModel.restore(meta, {**rec, "models": old["models"]})


def test_a_pack_record_restores_its_blend() -> None:
    meta = planted(P=30)
    mm = MetaModel(**SMALL).fit(meta)
    rec = json.loads(json.dumps(mm.export()))
    assert rec["params"]["blend_rank"] == 4 and rec["lowrank"]["rank"] == 4
    feats = {"a": 0.2, "b": 0.9}
    pd.testing.assert_frame_equal(MetaModel.restore(meta, rec).predict_problem(feats),
                                  mm.predict_problem(feats))
    # a record from before the blend: the gain order alone, as it was
    before = {**{k: v for k, v in rec.items() if k != "lowrank"},
              "params": {k: v for k, v in rec["params"].items() if k != "blend_rank"}}
    restored = MetaModel.restore(meta, before)
    assert restored.blend_rank == 0
    assert restored.predict_problem(feats)["gain"].is_monotonic_increasing
    with pytest.raises(ValueError, match="the low-rank order is missing"):
        MetaModel.restore(meta, {**before, "params": rec["params"]})
    bad = copy.deepcopy(rec)
    bad["lowrank"]["components"] = [row[:2] for row in bad["lowrank"]["components"]]
    with pytest.raises(ValueError, match="components has shape"):
        MetaModel.restore(meta, bad)
    other = copy.deepcopy(rec)
    other["lowrank"]["columns"] = other["lowrank"]["columns"][::-1]
    with pytest.raises(ValueError, match="candidates are not the pack's"):
        MetaModel.restore(meta, other)


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


def test_a_candidates_rules_come_for_it_first_then_against_each_by_q(
        proposer: Proposer) -> None:
    # four rules on the layernorm trait, two raising and two lowering the score, out of order
    base = proposer.rules_[proposer.rules_["trait"] == "norm.layernorm > 0"].iloc[0]
    rows = []
    for effect, q in ((0.1, 0.01), (-0.2, 0.001), (0.3, 0.001), (-0.1, 0.02)):
        r = {**base.to_dict(), "condition": "all", "conditions": "[]", "effect": effect,
             "ci_low": effect - 0.05, "ci_high": effect + 0.05, "q_value": q}
        rows.append({**r, "text": rule_text(r)})
    mixed = copy.copy(proposer)
    mixed.rules_ = pd.DataFrame(rows)
    prop = mixed.propose({"a": 0.1, "b": 0.5, "c": 0.5}, top_k=16)
    with_trait = [c for c in prop.candidates if c.candidate in LAYERNORM]
    assert with_trait and all(len(c.rules) == 4 for c in with_trait)
    for c in with_trait:
        assert [rule_raises(r) for r in c.rules] == [True, True, False, False]
        assert [float(r.rsplit("q = ", 1)[1]) for r in c.rules] == [0.001, 0.01, 0.001, 0.02]
        assert "raises normalized score by 0.30" in c.rules[0]


def test_rules_replicate_on_the_other_half() -> None:
    rep = rule_replication(planted(P=80), Miner(n_bootstrap=200))
    assert list(rep.columns) == list(REPLICATION_COLUMNS)
    assert len(rep) >= 1 and set(rep["trait"]) == {"norm.layernorm > 0"}
    assert rep["replicated"].all()
    none = rule_replication(planted(P=80, shuffle=True), Miner(n_bootstrap=200))
    assert none.empty


def test_a_rule_is_checked_on_the_candidates_that_held_its_trait_as_mined() -> None:
    """Half B's pattern values do not choose the candidates: with them flipped, the whole
    corpus's median made every candidate hold "layernorm > 0" (0.5 each), and nothing could
    replicate."""
    meta = planted(P=80)
    _, b = halves(meta)
    flipped = meta.copy()
    col = PATTERN_PREFIX + "norm.layernorm"
    flipped.loc[b.index, col] = 1.0 - flipped.loc[b.index, col]
    rep = rule_replication(flipped, Miner(n_bootstrap=200))
    pd.testing.assert_frame_equal(rep, rule_replication(meta, Miner(n_bootstrap=200)))
    assert len(rep) >= 1 and rep["replicated"].all()


def test_the_proposer_uses_a_fitted_metamodel_as_given() -> None:
    meta = planted(P=30)
    mm = MetaModel(**SMALL).fit(meta)
    p = Proposer(metamodel=mm).fit(meta)
    assert p.metamodel_ is mm and p.rules_.empty
    pd.testing.assert_frame_equal(p.metamodel_.predict_problem({"a": 0.3}),
                                  mm.predict_problem({"a": 0.3}))
    assert np.isfinite(p.propose({"a": 0.3}, 2).candidates[0].expected_norm_error)


def test_the_gain_model_leaves_the_anchor_only_where_another_candidate_beats_it() -> None:
    """c01 is the best candidate on average (the anchor); c05 beats it by far where a < 0.5
    and loses by far elsewhere. Ordered by predicted gain over the anchor, the top-1 is c05
    on a problem with a = 0.2 and the anchor on one with a = 0.8; a pack record restores
    the same order."""
    rng = np.random.default_rng(11)
    P = 60
    pats = [{"norm.layernorm": float(ln), "depth": float(d), "act.relu": float(r)}
            for ln, d, r in itertools.product((0, 1), (1, 2, 3, 4), (0, 1))]
    a = rng.random(P)
    scores = np.empty((P, 16, 2))
    for p in range(P):
        scores[p] = rng.uniform(0.40, 0.60, 16)[:, None]
        scores[p, 1] = 0.70
        scores[p, 5] = 0.95 if a[p] < 0.5 else 0.20
    scores += rng.normal(0, 1e-3, scores.shape)
    meta = assemble(*frames(scores, {"a": a, "b": rng.random(P)}, pats, 2))
    model = MetaModel(**SMALL, ranking="gain").fit(meta)
    assert model.anchor_ == "c01"
    low, high = model.predict_problem({"a": 0.2, "b": 0.5}), \
        model.predict_problem({"a": 0.8, "b": 0.5})
    assert low.index[0] == "c05" and low.at["c05", "gain"] < -0.2
    assert high.index[0] == "c01" and high.at["c01", "gain"] == 0.0
    assert high.at["c05", "gain"] > 0.2
    rec = json.loads(json.dumps(model.export()))
    assert rec["anchor"] == "c01"
    pd.testing.assert_frame_equal(MetaModel.restore(meta, rec).predict_problem({"a": 0.2}),
                                  model.predict_problem({"a": 0.2}))



def test_fold_labels_keep_the_groups_and_change_the_assignment() -> None:
    groups = np.array(["b", "a", "c", "a", "d", "b", "e", "f"])
    first = fold_labels(groups, 0)
    assert list(first) == [1, 0, 2, 0, 3, 1, 4, 5]  # the groups' own (sorted) order
    for r in (1, 2):
        labels = fold_labels(groups, r)
        # the same partition into groups, under other labels
        assert len(set(zip(groups, labels, strict=True))) == 6 == len(set(labels))
        assert not np.array_equal(labels, first)
    assert np.array_equal(fold_labels(groups, 1), fold_labels(groups, 1))
    assert not np.array_equal(fold_labels(groups, 1), fold_labels(groups, 1, random_state=1))


def test_the_conformal_margin_pools_every_assignment_s_out_of_fold_scores() -> None:
    """The margin of R assignments is the `level` quantile of their scores pooled, so it
    lies between the least and the greatest single assignment's; one is the default."""
    meta = planted(P=24, seeds=2, effect=0.1)
    captured: dict[str, np.ndarray] = {}
    original = MetaModel._conformal_margin

    def keep(self: MetaModel, X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> float:
        captured.update(X=X, y=y, groups=groups)
        return original(self, X, y, groups)

    MetaModel._conformal_margin = keep  # type: ignore[method-assign]
    try:
        mm = MetaModel(**SMALL, conformal_folds=4, conformal_repeats=3).fit(meta)
    finally:
        MetaModel._conformal_margin = original  # type: ignore[method-assign]
    X, y, groups = captured["X"], captured["y"], captured["groups"]
    scores = [mm._out_of_fold_scores(X, y, fold_labels(groups, r), 4) for r in range(3)]
    q = 0.8 * (1 + 1 / len(y))
    singles = [float(np.quantile(s, q)) for s in scores]
    assert mm.margin_ == float(np.quantile(np.concatenate(scores), q))
    assert min(singles) <= mm.margin_ <= max(singles) and len(set(singles)) > 1
    assert MetaModel(**SMALL, conformal_folds=4).fit(meta).margin_ == singles[0]

def test_a_pack_record_with_a_parameter_this_version_does_not_know_restores() -> None:
    meta = planted(P=30)
    mm = MetaModel(**SMALL).fit(meta)
    rec = json.loads(json.dumps(mm.export()))
    rec["params"]["from_a_later_version"] = 3  # mattered to its fit only
    pd.testing.assert_frame_equal(MetaModel.restore(meta, rec).predict_problem({"a": 0.2}),
                                  mm.predict_problem({"a": 0.2}))
