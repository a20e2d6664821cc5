"""The baselines on tiny hand-computed cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.induction.baselines import (
    average_choice,
    default_choice,
    knn_choice,
    knn_order,
    portfolio_choice,
    random_choice,
)
from aicf_induct.induction.neighbors import Neighbors, closest_other_group, near_duplicates

IDS = ["P1", "P2", "P3"]


def errors(rows: list[list[float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, index=IDS, columns=["a", "b", "c"])


def fitted_neighbors() -> Neighbors:
    # x scales by 1/10; y by 1/2 and P3 lacks y
    probs = pd.DataFrame({"f.x": [0.0, 10.0, 4.0], "f.y": [0.0, 2.0, np.nan]}, index=IDS)
    return Neighbors().fit(probs)


def test_neighbors_are_minmax_scaled_l1_with_missing_features() -> None:
    nb = fitted_neighbors()
    # query x=1, y=0 -> scaled (0.1, 0): P1 0.1 + 0; P2 0.9 + 1; P3 0.3 + 1 (y missing there)
    np.testing.assert_allclose(nb.distances({"x": 1.0, "y": 0.0}), [0.1, 1.9, 1.3])
    assert [p for p, _ in nb.nearest({"f.x": 1.0, "f.y": 0.0}, 3)] == ["P1", "P3", "P2"]
    # a query lacking y: P3 matches on absence, the others pay 1
    np.testing.assert_allclose(nb.distances({"x": 4.0}), [1.4, 1.6, 0.0])


def test_knn_takes_the_best_candidate_of_each_nearest_problem() -> None:
    nb = fitted_neighbors()
    q = nb.query_vector({"x": 1.0, "y": 0.0})  # order P1, P3, P2
    e = errors([[0.0, 0.5, 1.0], [1.0, 0.0, 0.5], [0.2, 0.9, 0.1]])  # winners a, b, c
    assert knn_choice(e, nb, q, 1) == ["a"]
    assert knn_choice(e, nb, q, 2) == ["a", "c"]
    assert knn_choice(e, nb, q, 3) == ["a", "c", "b"]
    # P3's winner is a too: the repeat is skipped and P2's winner comes next
    e2 = errors([[0.0, 0.5, 1.0], [1.0, 0.0, 0.5], [0.0, 0.9, 0.1]])
    assert knn_choice(e2, nb, q, 2) == ["a", "b"]
    # a candidate never scored counts as the worst
    e3 = errors([[np.nan, 0.5, 1.0], [1.0, 0.0, 0.5], [0.2, 0.9, 0.1]])
    assert knn_choice(e3, nb, q, 1) == ["b"]


def test_knn_order_ranks_by_mean_error_over_the_nearest_problems() -> None:
    nb = fitted_neighbors()
    q = nb.query_vector({"x": 1.0, "y": 0.0})  # order P1, P3, P2
    e = errors([[0.0, 0.5, 1.0], [1.0, 0.0, 0.5], [0.2, 0.9, 0.1]])
    assert knn_order(e, nb, q, 1, ["a", "b", "c"]) == ["a", "b", "c"]  # P1's row
    # P1 and P3: a 0.1, b 0.7, c 0.55
    assert knn_order(e, nb, q, 2, ["a", "b", "c"]) == ["a", "c", "b"]
    # all three: a 0.4, b 0.467, c 0.533; among b and c only
    assert knn_order(e, nb, q, 3, ["a", "b", "c"]) == ["a", "b", "c"]
    assert knn_order(e, nb, q, 3, ["c", "b"]) == ["b", "c"]
    # never scored counts as the worst (1); a tie keeps the candidates' order
    e2 = errors([[np.nan, 1.0, 0.5], [1.0, 0.0, 0.5], [0.2, 0.9, 0.1]])
    assert knn_order(e2, nb, q, 1, ["b", "a", "c"]) == ["c", "b", "a"]
    with pytest.raises(ConfigError, match="k >= 1"):
        knn_order(e, nb, q, 0, ["a"])


def test_greedy_portfolio_minimises_mean_best_error() -> None:
    e = errors([[0.0, 0.6, 0.5], [0.9, 0.1, 0.5], [0.9, 0.7, 0.2]])
    # step 1 means: a 0.6, b 0.467, c 0.4 -> c; with c the best errors are (.5, .5, .2):
    # adding a -> (0, .5, .2) = 0.233, adding b -> (.5, .1, .2) = 0.267 -> a; then b
    assert portfolio_choice(e, 1) == ["c"]
    assert portfolio_choice(e, 2) == ["c", "a"]
    assert portfolio_choice(e, 5) == ["c", "a", "b"]
    # best-on-average differs at k = 2: c (0.4), then b (0.467)
    assert average_choice(e, 2) == ["c", "b"]


def test_default_and_random() -> None:
    assert default_choice(["a", "b"], "b") == ["b"]
    with pytest.raises(ConfigError, match="default candidate 'z' is not in the corpus"):
        default_choice(["a", "b"], "z")
    got = random_choice(["a", "b", "c", "d"], 3, np.random.default_rng(0))
    assert len(set(got)) == 3 and set(got) <= {"a", "b", "c", "d"}
    assert got == random_choice(["a", "b", "c", "d"], 3, np.random.default_rng(0))


def test_near_duplicates_are_nearer_than_any_two_corpus_groups() -> None:
    # x in 0..10 scales by 1/10: A0 and A1 share group A, so their 0.1 does not count
    corpus = pd.DataFrame({"problem": ["a0", "a1", "b", "c"], "group": ["A", "A", "B", "C"],
                           "f.x": [0.0, 1.0, 5.0, 10.0]}, index=["A0", "A1", "B", "C"])
    np.testing.assert_allclose(closest_other_group(corpus), [0.5, 0.4, 0.4, 0.5])
    new = pd.DataFrame({"problem": ["copy", "apart"], "f.x": [5.2, 7.5]},
                       index=["N1", "N2"])
    got = near_duplicates(corpus, new)
    # N1 is 0.02 from b: below half the 0.4 between the nearest two groups; N2 0.25 is not
    assert list(got["problem"]) == ["copy"] and got.loc[0, "nearest"] == "b"
    assert got.loc[0, "distance"] == pytest.approx(0.02)
    assert got.loc[0, "threshold"] == pytest.approx(0.2)
    # x in 0..5.5: b and c 0.5 / 5.5 apart; N1 0.2 / 5.5 from b (below half of it), N2 off
    tight = corpus.assign(**{"f.x": [0.0, 1.0, 5.0, 5.5]})
    got = near_duplicates(tight, new.assign(**{"f.x": [5.2, 3.0]}))
    assert list(got["problem"]) == ["copy"]
    assert got.loc[0, "threshold"] == pytest.approx(0.25 / 5.5)
    got = near_duplicates(tight, new.assign(**{"f.x": [4.7, 3.0]}))  # 0.3 / 5.5: too far
    assert got.empty


def test_a_corpus_of_one_group_calls_no_problem_a_near_duplicate() -> None:
    """With one group there is no distance between two groups to judge by (the threshold
    was half of infinity, and every held-out problem a "near-duplicate")."""
    corpus = pd.DataFrame({"problem": ["a0", "a1"], "group": ["A", "A"], "f.x": [0.0, 1.0]},
                          index=["A0", "A1"])
    far = pd.DataFrame({"problem": ["far"], "f.x": [50.0]}, index=["N1"])
    got = near_duplicates(corpus, far)
    assert got.empty and "threshold" in got.columns


def test_the_default_is_found_by_any_spec_parse_spec_reads() -> None:
    """`--default` takes the short model spec the README and `propose` print, a structure
    key whose recipe leaves defaults out, or the canonical forms; all name one key."""
    from aicf_induct.frontend.specs import MLPSpec
    from aicf_induct.induction.baselines import resolve_default
    from aicf_induct.induction.space import Candidate, Recipe

    cands = [Candidate(MLPSpec(depth=d, width=16), Recipe(lr=lr))
             for d in (1, 2) for lr in (1e-3, 3e-3)]
    meta = pd.DataFrame({"candidate": [c.key for c in cands],
                         "structure_key": [c.structure_key for c in cands],
                         "model": [c.spec.to_string() for c in cands]})
    key = cands[0].key  # depth 1, lr 1e-3 (the recipe's default)
    for name in (key, cands[0].structure_key, "mlp:depth=1,width=16|lr=0.001",
                 "mlp:depth=1, width=16 | optimizer=adam"):
        assert resolve_default(meta, name) == key, name
    with pytest.raises(ConfigError, match="matches 2 candidates"):  # two recipes
        resolve_default(meta, "mlp:depth=1,width=16,act=relu")
    one = meta[meta["structure_key"].str.contains("lr=0.001")]
    assert resolve_default(one, "mlp:depth=2,width=16") == cands[2].key
    for bad in ("mlp:depth=3,width=16", "mlp:depth=x", "garbage"):
        with pytest.raises(ConfigError, match=f"default candidate '{bad}' is not in the corpus"):
            resolve_default(meta, bad)
    with pytest.raises(ConfigError, match=r"no default MLP .*with default=") as err:
        resolve_default(meta)  # the library's keyword; the command words its option
    assert "with --default (a candidate key" in err.value.advised("--default")  # type: ignore[attr-defined]
