"""The proposer's top k hedged as a set: hand cases of `hedge.hedged`, and the hedged
methods scored beside the proposer in leave-one-out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.induction.hedge import centred, hedged
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
    with pytest.raises(ConfigError, match="hedge shrinks must be > 0"):
        LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), hedges=(0.0,))


def test_hedged_methods_are_scored_beside_the_proposer() -> None:
    cfg = LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), ks=(1, 3),
                     metamodel=SMALL, hedges=(0.5, 1.0))
    res = run_lopo(twins(grouped=True, n_groups=5), cfg)
    rows = res.choices.set_index(["problem_id", "k", "method"])["candidate"]
    methods = set(res.choices["method"])
    assert {"hedge0.5", "hedge1"} <= methods
    for pid in res.choices["problem_id"].unique():  # k = 1: the proposer's own first
        assert rows[(pid, 1, "hedge0.5")] == rows[(pid, 1, "proposer")]
        assert rows[(pid, 1, "hedge1")] == rows[(pid, 1, "proposer")]
