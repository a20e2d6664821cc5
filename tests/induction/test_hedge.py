"""The proposer's top k re-chosen as a set: hand cases of `hedge.hedged`, `hedge.upside`
and `hedge.interleaved`, and the set methods scored beside the proposer in leave-one-out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.induction.hedge import (
    centred,
    chosen_set,
    hedged,
    interleaved,
    parse_set_rule,
    tail,
    upside,
)
from aicf_induct.induction.lopo import LopoConfig, run_lopo
from tests.induction.test_lopo import SMALL, twins

# four training problems: A and B fail together (problems 0-1), C fails alone (2-3)
ERRORS = pd.DataFrame({"A": [0.9, 0.9, 0.1, 0.1], "B": [0.9, 0.8, 0.1, 0.1],
                       "C": [0.1, 0.1, 0.9, 0.9]})
LEVEL = pd.Series({"A": 0.30, "B": 0.31, "C": 0.40})


def test_centred_is_zero_on_average_per_problem_and_per_candidate() -> None:
    R = centred(ERRORS.assign(C=[0.1, np.nan, 0.9, 0.9])).to_numpy()
    assert np.allclose(R.mean(axis=0), 0) and np.allclose(R.mean(axis=1), 0)


def test_the_second_slot_goes_to_what_fails_elsewhere() -> None:
    order = ["A", "B", "C"]
    assert hedged(order, LEVEL, ERRORS, 2, 0.0) == order  # no hedge: the proposer's order
    # shrink 1: with A chosen, B lowers the set's best on problem 1 only, by 0.065 (it
    # fails where A fails); C lowers it on problems 0-1, where A fails and C does not
    out = hedged(order, LEVEL, ERRORS, 2, 1.0)
    assert out == ["A", "C", "B"]
    R = centred(ERRORS).to_numpy()
    M = LEVEL.to_numpy()[None, :] + R
    worth = {c: np.minimum(M[:, 0], M[:, i]).mean() for i, c in enumerate(order) if i}
    assert worth["C"] < worth["B"]
    # a tiny shrink keeps the levels' order: the set's worth is then nearly the levels'
    assert hedged(order, LEVEL, ERRORS, 3, 0.001) == order
    # the first slot is always the proposer's, whatever the hedge
    assert hedged(["C", "A", "B"], LEVEL, ERRORS, 3, 5.0)[0] == "C"


def test_bad_hedges_are_named() -> None:
    with pytest.raises(ConfigError, match="shrink must be >= 0, got -1"):
        hedged(["A", "B"], LEVEL, ERRORS, 2, -1.0)
    with pytest.raises(ConfigError, match="candidate D has no training errors"):
        hedged(["A", "D"], LEVEL, ERRORS, 2, 1.0)
    with pytest.raises(ConfigError, match="set method 'hedge0': hedge needs a number > 0"):
        LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), sets=("hedge0",))
    with pytest.raises(ConfigError, match="unknown set method 'bold2'"):
        LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), sets=("bold2",))
    with pytest.raises(ConfigError, match="upside scale must be >= 0, got -1"):
        upside(["A", "B"], LEVEL, LEVEL, LEVEL, 2, -1.0)
    with pytest.raises(ConfigError, match="candidate D has no level or interval"):
        upside(["A", "D"], LEVEL, LEVEL, LEVEL, 2, 1.0)
    assert parse_set_rule("upside0.5") == ("upside", 0.5)
    assert parse_set_rule("knnmix") == ("knnmix", 0.0)
    assert parse_set_rule("knntail3") == ("knntail", 3.0)
    with pytest.raises(ConfigError, match="knntail needs a whole number of slots"):
        parse_set_rule("knntail2.5")
    with pytest.raises(ConfigError, match="tail head must be >= 1"):
        tail(["a"], ["b"], 0)


# A and B alike and sure; C a little worse on average but wide: a set picked by validation
# gains more from C's chance of being far better than from B, a near copy of A
PRED = pd.DataFrame({"gain": [0.0, 0.01, 0.05], "low": [0.28, 0.29, 0.05],
                     "high": [0.32, 0.33, 0.75]}, index=["A", "B", "C"])


def test_the_upside_set_takes_the_wide_candidate() -> None:
    order = ["A", "B", "C"]
    low, high, level = PRED["low"], PRED["high"], PRED["gain"]
    assert upside(order, level, low, high, 3, 0.0) == order
    assert upside(order, level, low, high, 2, 1.0) == ["A", "C", "B"]
    # the greedy's worth by hand: E[min(A, X)] with A's sd ~0.016 and X normal
    sd = (high - low) / (2 * 1.2815515655446004)
    z = np.random.default_rng(0).standard_normal((2000, 3))
    M = level.to_numpy()[None, :] + sd.to_numpy()[None, :] * z
    assert np.minimum(M[:, 0], M[:, 2]).mean() < np.minimum(M[:, 0], M[:, 1]).mean()
    # with every interval as narrow as A's, the levels' order stays
    narrow = PRED.assign(low=PRED["gain"] - 0.02, high=PRED["gain"] + 0.02)
    assert upside(order, narrow["gain"], narrow["low"], narrow["high"], 3, 1.0) == order
    assert chosen_set("upside1", order, PRED, ERRORS, [], 2) == ["A", "C", "B"]


def test_interleaved_gives_the_other_list_every_third_slot() -> None:
    assert interleaved(["a", "b", "c", "d", "e"], ["x", "b", "y"]) == \
        ["a", "b", "x", "c", "d", "y", "e"]  # b already listed: kNN's next, y, takes slot 6
    assert interleaved(["a", "b"], ["a", "b"]) == ["a", "b"]
    assert interleaved(["a"], ["x", "y"]) == ["a", "x", "y"]
    assert chosen_set("knnmix", ["A", "B", "C"], PRED, ERRORS, ["C"], 3) == ["A", "B", "C"]
    assert chosen_set("knnmix", ["A", "B", "C", "D"], PRED, ERRORS, ["D"], 3)[:3] == \
        ["A", "B", "D"]
    with pytest.raises(ConfigError, match="every must be >= 2"):
        interleaved(["a"], ["b"], every=1)


def test_tail_gives_the_slots_after_the_first_few_to_the_other_list() -> None:
    assert tail(["a", "b", "c", "d", "e"], ["b", "x", "y"], 2) == ["a", "b", "x", "y", "c",
                                                                  "d", "e"]
    assert tail(["a", "b"], ["a"], 3) == ["a", "b"]
    assert chosen_set("knntail1", ["A", "B", "C"], PRED, ERRORS, ["C"], 3) == ["A", "C", "B"]


def test_hedged_methods_are_scored_beside_the_proposer() -> None:
    cfg = LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), ks=(1, 3),
                     metamodel=SMALL, sets=("hedge0.5", "hedge1", "upside1", "knnmix", "knntail2"))
    res = run_lopo(twins(grouped=True, n_groups=5), cfg)
    rows = res.choices.set_index(["problem_id", "k", "method"])["candidate"]
    methods = set(res.choices["method"])
    assert {"hedge0.5", "hedge1", "upside1", "knnmix", "knntail2"} <= methods
    for pid in res.choices["problem_id"].unique():  # k = 1: the proposer's own first
        for m in ("hedge0.5", "hedge1", "upside1", "knnmix", "knntail2"):
            assert rows[(pid, 1, m)] == rows[(pid, 1, "proposer")]
