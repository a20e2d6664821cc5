"""The low-rank order: it recovers a planted factor structure from the meta-features, names
bad input, and is scored beside the proposer in leave-one-out without seeing the held-out
group."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from aicf_induct.errors import ConfigError
from aicf_induct.induction.lopo import Learned, LopoConfig, parse_order, run_lopo
from aicf_induct.induction.lowrank import LowRankOrder, blended
from tests.induction.test_lopo import SMALL, twins


def planted(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    """n problems × 6 candidates: candidates 0-2 are good where feature 0 is high, 3-5 where
    it is low (one factor), with noise; feature 1 is noise, feature 2 missing on half."""
    X = rng.random((n, 3))
    X[: n // 2, 2] = np.nan
    loading = np.array([1.0, 0.5, 0.75, -1.0, -0.75, -0.5])
    E = 0.5 - 0.4 * (X[:, [0]] - 0.5) * loading[None, :] + 0.01 * rng.standard_normal((n, 6))
    return pd.DataFrame(E, columns=[f"c{i}" for i in range(6)]), X


def test_a_planted_factor_orders_a_new_problem() -> None:
    rng = np.random.default_rng(0)
    errors, X = planted(60, rng)
    fit = LowRankOrder(1).fit(errors, X)
    ok = list(errors.columns)
    # feature 0 high: candidates 0-2 first, led by c0 (largest loading); low: c3 leads
    assert fit.order(np.array([0.95, 0.5, np.nan]), ok)[:3] == ["c0", "c2", "c1"]
    assert fit.order(np.array([0.05, 0.5, 0.3]), ok)[0] == "c3"
    # the order is among `ok` only
    assert fit.order(np.array([0.95, 0.5, 0.1]), ["c4", "c5"]) == ["c5", "c4"]
    # no relation to the features: the prediction stays near the candidates' means
    flat = LowRankOrder(2).fit(errors, rng.random((60, 3)))
    assert np.abs(flat.predict(np.array([0.9, 0.1, 0.5])) - errors.mean()).max() < 0.1


def test_bad_input_is_named() -> None:
    assert parse_order("lowrank4") == ("lowrank", 4)
    assert parse_order("knn10") == ("knn", 10)
    assert parse_order("blendknn3") == ("blendknn", 3)
    for bad in ("lowrank0", "lowrank", "svd2", "blend2", "knn0", "blendknn", "knn2x"):
        with pytest.raises(ConfigError, match="unknown order"):
            parse_order(bad)
    with pytest.raises(ConfigError, match="rank >= 1"):
        LowRankOrder(0)
    with pytest.raises(ConfigError, match="3 problems' errors but 2 feature rows"):
        LowRankOrder(1).fit(pd.DataFrame(np.zeros((3, 2))), np.zeros((2, 1)))
    with pytest.raises(ConfigError, match="the same candidates"):
        blended(["a", "b"], ["a", "c"])
    with pytest.raises(ConfigError, match="the same candidates"):
        blended(["a", "b"], ["b", "a"], ["a"])
    with pytest.raises(ConfigError, match="at least two orders"):
        blended(["a", "b"])
    with pytest.raises(ConfigError, match="unknown order"):
        LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), orders=("rank2",))


def test_blended_orders_by_mean_position() -> None:
    # mean positions: a (0+2), b (1+0), c (2+1), d (3+3)
    assert blended(["a", "b", "c", "d"], ["b", "c", "a", "d"]) == ["b", "a", "c", "d"]
    # a tie goes to the first order's: x 0+1, y 1+0
    assert blended(["x", "y"], ["y", "x"]) == ["x", "y"]
    assert blended(["x", "y"], ["x", "y"]) == ["x", "y"]
    # three: a 0+2+1, b 1+0+2, c 2+1+0 tie at 3: the first order's
    assert blended(["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]) == ["a", "b", "c"]
    # a 0+2+2, b 1+0+0, c 2+1+1 -> b, a, c
    assert blended(["a", "b", "c"], ["b", "c", "a"], ["b", "c", "a"]) == ["b", "a", "c"]


def test_orders_are_scored_beside_the_proposer_and_never_see_the_held_out_group(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fitted_on: list[set[str]] = []
    fit = LowRankOrder.fit

    def spy(self: LowRankOrder, errors: pd.DataFrame, X: np.ndarray) -> LowRankOrder:
        fitted_on.append({str(p) for p in errors.index})
        return fit(self, errors, X)

    monkeypatch.setattr(LowRankOrder, "fit", spy)
    cfg = LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), ks=(1, 3),
                     metamodel=SMALL, orders=("lowrank2", "lowrank3"))
    meta = twins(grouped=True, n_groups=5)
    res = run_lopo(meta, cfg)
    assert len(res.choices[res.choices["method"] == "lowrank3"]) == 2 * 10
    mine = res.choices[res.choices["method"] == "lowrank2"]
    assert len(mine) == 2 * 10  # every problem at k = 1 and 3
    # every fit (the two orders', and the proposer's blend) is on every problem but the
    # held-out group's two, each group held out in turn
    everyone = set(meta["problem_id"].astype(str))
    left_out = [tuple(sorted(everyone - s)) for s in fitted_on]
    groups = meta.drop_duplicates("problem_id").groupby("group")["problem_id"]
    assert len(left_out) == 3 * 5
    assert set(left_out) == {tuple(sorted(map(str, g))) for _, g in groups}
    # each group's winner is its own candidate, which no other group shares: learned from
    # the others only, no order can pick it at k = 1 (error 0)
    assert (mine.query("k == 1")["norm_error"] > 0).all()


def test_a_record_round_trips_with_fewer_components_than_the_rank() -> None:
    errors, X = planted(3, np.random.default_rng(2))  # 3 problems: at most 3 components
    fit = LowRankOrder(4).fit(errors, X)
    assert fit.components_.shape == (3, 6)
    back = LowRankOrder.from_record(fit.to_record())
    x = np.array([0.3, 0.2, np.nan])
    pd.testing.assert_series_equal(back.predict(x), fit.predict(x))
    with pytest.raises(ValueError, match="components has shape"):
        LowRankOrder.from_record({**fit.to_record(), "rank": 2})


def test_the_order_is_said_in_words() -> None:
    from aicf_induct.induction.metamodel import MetaModel
    from aicf_induct.induction.proposals import order_meaning

    assert order_meaning(MetaModel(blend_rank=0)).startswith("the expected gain over")
    assert "blended" not in order_meaning(MetaModel(blend_rank=0))
    assert order_meaning(MetaModel()).endswith("predicted from its first 4 components")
    assert order_meaning(MetaModel(ranking="rank", blend_rank=0)).startswith(
        "the expected rank within the space")


def test_the_knn_orders_blend_the_proposers_two_with_the_neighbours() -> None:
    cfg = LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), ks=(1, 3),
                     metamodel=SMALL, orders=("knn2", "blendknn2"))
    meta = twins(grouped=True, n_groups=5)
    res = run_lopo(meta, cfg)
    for name in cfg.orders:  # every problem at k = 1 and 3, never its own group's winner
        mine = res.choices[res.choices["method"] == name]
        assert len(mine) == 2 * 10 and (mine.query("k == 1")["norm_error"] > 0).all()
    # the blend is the proposer's two orders and the kNN order by mean position, among the
    # candidates that apply
    train = meta[~meta["group"].isin(["g0"])]
    cands = sorted(meta["candidate"].astype(str).unique())
    learned = Learned.of(train, cands, clone(SMALL).fit(train), cfg.orders)
    feats = meta[meta["group"] == "g0"].filter(like="f.").iloc[0].to_dict()
    ok = cands[1:]
    pred, lists = learned.lists(feats, ok, 3)
    assert sorted(lists["knn2"]) == sorted(ok) == sorted(lists["blendknn2"])
    assert lists["blendknn2"] == blended(*learned.metamodel.member_orders(pred),
                                         lists["knn2"])
    assert lists["proposer"] == blended(*learned.metamodel.member_orders(pred))
