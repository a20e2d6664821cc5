"""The miner finds a planted feature × trait effect and nothing in shuffled data."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.induction.inference import bh, holm
from aicf_induct.induction.meta_dataset import candidate_table
from aicf_induct.induction.mining import (
    CORRELATION_COLUMNS,
    RULE_COLUMNS,
    Miner,
    rule_applies,
    rule_raises,
    rule_text,
)
from aicf_induct.induction.traits import candidate_traits
from tests.induction.synthetic_meta import planted

FAST = {"n_bootstrap": 300, "min_problems": 10}


@pytest.fixture(scope="module")
def mined() -> Miner:
    return Miner(**FAST).fit(planted())


def test_traits_are_distinct_splits() -> None:
    names = [t.name for t in candidate_traits(candidate_table(planted(P=12)))]
    # norm.count splits like norm.layernorm; act.tanh is the complement of act.relu
    assert names == ["depth >= 3", "act.relu > 0", "norm.layernorm > 0"]


def test_planted_effect_is_found(mined: Miner) -> None:
    corr = mined.correlations_
    assert list(corr.columns) == list(CORRELATION_COLUMNS)
    found = corr[corr["q_value"] < 0.05]
    assert set(zip(found["feature"], found["trait"], strict=True)) == {
        ("a", "norm.layernorm > 0")}
    assert found["correlation"].iloc[0] < -0.5  # the effect shrinks as `a` grows
    rules = mined.rules_
    assert list(rules.columns) == list(RULE_COLUMNS)
    best = rules.iloc[0]
    assert best["trait"] == "norm.layernorm > 0" and best["q_value"] < 0.05
    [cond] = json.loads(best["conditions"])
    assert cond["feature"] == "a" and cond["op"] == "<=" and 0.4 < cond["value"] < 0.6
    # normalized score is 1 - normalized error: layernorm where a < 0.5 is the best there
    assert best["ci_low"] > 0.3 and best["effect"] > 0.5
    assert "raises normalized score by" in best["text"] and "`a <= " in best["text"]
    significant = rules[rules["q_value"] < 0.05]
    assert set(significant["trait"]) == {"norm.layernorm > 0"}
    assert rule_applies(best.to_dict(), {"a": 0.1}) and not rule_applies(best.to_dict(),
                                                                         {"a": 0.9})


def test_rule_sentence_gives_the_size_and_its_interval() -> None:
    rule = {"condition": "`a <= 0.5`", "trait": "norm.layernorm > 0", "problems": 41,
            "q_value": 0.003}
    up = rule_text({**rule, "effect": 0.11, "ci_low": 0.06, "ci_high": 0.16})
    assert up == ("on problems with `a <= 0.5`, `norm.layernorm > 0` raises normalized score "
                  "by 0.11 [0.06, 0.16], 41 problems, q = 0.003") and rule_raises(up)
    down = rule_text({**rule, "condition": "all", "effect": -0.07, "ci_low": -0.08,
                      "ci_high": -0.05})
    assert down == ("on all problems, `norm.layernorm > 0` lowers normalized score by 0.07 "
                    "[0.05, 0.08], 41 problems, q = 0.003") and not rule_raises(down)


def test_shuffled_meta_dataset_gives_no_discovery() -> None:
    m = Miner(**FAST).fit(planted(shuffle=True))
    assert (m.correlations_["q_value"] >= 0.05).all()
    assert (m.rules_["q_value"] >= 0.05).all()


def test_fit_is_deterministic_and_follows_the_estimator_contract(mined: Miner) -> None:
    again = Miner(**FAST).fit(planted())
    pd.testing.assert_frame_equal(again.rules_, mined.rules_)
    pd.testing.assert_frame_equal(again.correlations_, mined.correlations_)
    assert Miner(**FAST).get_params()["n_bootstrap"] == 300
    assert not hasattr(Miner(), "rules_")


def test_holm_and_bh_on_hand_cases() -> None:
    # Holm: sorted 0.01, 0.02, 0.04 times 3, 2, 1 -> 0.03, 0.04, 0.04 (kept monotone)
    np.testing.assert_allclose(holm(np.array([0.04, 0.01, 0.02])), [0.04, 0.03, 0.04])
    np.testing.assert_allclose(holm(np.array([0.5, np.nan, 0.01])), [0.5, np.nan, 0.02])
    # BH: p * m / rank, then the running minimum from the top
    np.testing.assert_allclose(bh(np.array([0.01, 0.04, 0.03])), [0.03, 0.04, 0.04])


def test_bad_input_is_named() -> None:
    meta = planted(P=12)
    with pytest.raises(ConfigError, match=r"column\(s\) test_norm_error missing"):
        Miner().fit(meta.drop(columns="test_norm_error"))
    with pytest.raises(ConfigError, match="no candidate trait varies"):
        Miner().fit(meta[meta["candidate"] == "c00"])
    with pytest.raises(ConfigError, match=r"max_depth must be in 0\.\.3"):
        Miner(max_depth=5).fit(meta)


def test_effects_equal_but_for_float_noise_tie_as_spearman_ties_do() -> None:
    """Effects equal in exact arithmetic came out of the means 6e-15 apart, and were ranked
    by that noise: 2,993 of the shipped pack's 3,886 correlations were off scipy's (with its
    average ranks for ties) by up to 1.6e-3."""
    from scipy.stats import spearmanr

    from aicf_induct.induction.mining import Miner
    from aicf_induct.induction.traits import Trait

    rng = np.random.default_rng(0)
    n = 40
    exact = rng.choice([-0.2, 0.0, 0.1, 0.3], size=n)  # four values: many ties
    noisy = exact + rng.choice([-1, 0, 1], size=n) * 6e-15
    x = exact + rng.normal(scale=0.2, size=n)
    miner = Miner(min_problems=4, n_bootstrap=20)
    miner.traits_ = [Trait("t > 0", "p.t", ">", "0")]
    miner.effects_ = pd.DataFrame({"t > 0": noisy})
    miner.feature_names_ = ["f.x"]
    got = miner._correlations(x[:, None], np.random.default_rng(1))
    want = spearmanr(x, exact).statistic
    assert got["correlation"].iloc[0] == pytest.approx(want, abs=1e-12)
