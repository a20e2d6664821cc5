"""The induction layer used from Python (a notebook): bad arguments are one clear project
error naming the argument, a user's own table and the main job have a public form, results
and reprs are short and say what they hold."""

from __future__ import annotations

import argparse
import inspect
import math

import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.induction import (
    MainJob,
    MetaModel,
    Miner,
    Proposer,
    Space,
    evaluate_corpus,
    featurise,
    load_pack,
    main_job,
    parse_space,
    propose_dataset,
    propose_features,
)
from aicf_induct.problems import load_problem, problem_from_frame
from tests.induction.synthetic_meta import planted


@pytest.mark.parametrize("features, words", [
    ({}, r"no value for any of the \d+ meta-features the model reads \(0 given\): compute "
         r"them with aicf_induct.induction.featurise\(dataset\)"),
    ({"simple.n_rows": math.nan, "f.stat.skewness_mean": None},
     r"\(2 given, none of them a value of one it reads\)"),
    ({"foo": 1.0, "simple.n_rows": 100.0}, r"unknown meta-feature 'foo': the pack's model "
                                           r"reads \d+"),
    ({"simple.n_rows": "abc"}, "meta-feature 'simple.n_rows' must be a number, got 'abc'"),
    ({"simple.n_rows": math.inf}, "meta-feature 'simple.n_rows' must be finite"),
])
def test_meta_features_that_describe_no_problem_are_refused(features: dict[str, object],
                                                            words: str) -> None:
    """They gave a confident proposal (the nearest problems at distance 50)."""
    with pytest.raises(ConfigError, match=words):
        propose_features(features, load_pack(), 2)  # type: ignore[arg-type]


def test_a_few_meta_features_are_enough_as_for_the_service() -> None:
    """What /v1/proposals answers for a regression given by three (its test's request)."""
    answer = propose_features({"simple.n_rows": 178, "simple.n_classes": 0,
                               "stat.skewness_mean": None}, load_pack(), 2)
    assert len(answer["candidates"]) == 2


@pytest.mark.parametrize("top_k", ["3", 2.5, True, 0])
def test_top_k_must_be_an_integer(top_k: object) -> None:
    for call in (lambda: propose_dataset("wine", load_pack(), top_k=top_k),  # type: ignore[arg-type]
                 lambda: propose_features({"simple.n_rows": 10.0}, None, top_k)):  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=f"top_k must be an integer >= 1, got {top_k!r}"):
            call()


def test_a_frame_is_proposed_for_as_a_name_is() -> None:
    """`featurise` and `propose_dataset` take a loaded problem (a DataFrame's): the same
    answer as for the name."""
    pack = load_pack()
    by_name = propose_dataset("wine", pack, top_k=3)
    assert propose_dataset(load_problem("wine", seed=4), pack, top_k=3) == by_name
    from sklearn.datasets import load_wine

    bunch = load_wine(as_frame=True)
    frame = bunch.data.assign(target=bunch.target)
    problem = problem_from_frame(frame, target="target", name="my_wine")
    answer = propose_dataset(problem, pack, top_k=3)
    assert answer["dataset"]["name"] == "my_wine" and len(answer["candidates"]) == 3
    assert featurise(problem)[1] == featurise("wine")[1]  # the same data, the same features


def test_a_space_from_a_string_points_to_the_preset_reader() -> None:
    with pytest.raises(ConfigError, match=r"parse_space\('default24'\)"):
        Space("default24")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="got int"):
        Space(3)  # type: ignore[arg-type]
    assert parse_space("tiny3").space.size == 8


def test_the_pack_repr_is_a_line() -> None:
    """It was 1.46 MB: the meta-model's trees and the tables."""
    pack = load_pack()
    text = repr(pack)
    assert text == (f"Pack(problems={pack.header['problems']}, candidates="
                    f"{pack.header['candidates']}, path='knowledge_pack.parquet', "
                    f"digest='{pack.digest()[:12]}')")


def test_a_missing_default_names_the_keyword_in_python() -> None:
    """The message said --default, an option that Python has not (`default=` is)."""
    with pytest.raises(ConfigError, match="name the default candidate with default="):
        evaluate_corpus(planted(P=8), ks=(1,))


def test_main_job_is_what_adapt_from_proposal_plans() -> None:
    """One function sets up the main job for Python and for the command."""
    from aicf_induct.cli import from_proposal
    from aicf_induct.runtime.policies import make_policy
    from aicf_induct.runtime.trainer import TrainConfig

    problem, pack = load_problem("iris"), load_pack()
    job = main_job(problem, TrainConfig(epochs=7), pack=pack)
    top = propose_dataset("iris", pack, top_k=3)["candidates"][0]
    assert isinstance(job, MainJob) and job.source == f"pack {pack.path}"
    assert job.start.record["structure_key"] == top["structure_key"]
    assert (job.config.lr, job.config.epochs) == (top["recipe"]["lr"], 7)
    assert job.extra_config["proposal"] == job.start.record
    assert job.extra_config["fallback_policy"] == "rules"
    args = argparse.Namespace(service=None, pack=None, no_log=True, warehouse=None,
                              dataset="iris", api_key=None)
    planned = from_proposal.plan(args, problem, TrainConfig(epochs=7), make_policy("rules"))
    assert isinstance(planned, MainJob) and planned.start.record == job.start.record
    assert planned.policy.source == job.policy.source == "induction (in-process)"  # type: ignore[attr-defined]


@pytest.mark.parametrize("method", [Miner.fit, Proposer.fit, MetaModel.fit,
                                    MetaModel.predict_interval, Space.grid, Space.sample,
                                    Space.points, Space.candidate])
def test_central_methods_say_what_they_do(method: object) -> None:
    doc = inspect.getdoc(method)
    assert doc and len(doc) > 40, method



def test_meta_features_as_a_series_are_read_by_their_index() -> None:
    """`propose_features` iterated a Series by its values ("unknown meta-features
    '-0.034...'") where `Proposer.propose` read its index."""
    import pandas as pd

    pack = load_pack()
    f = featurise("wine")[1]
    assert propose_features(pd.Series(f), pack, 2) == propose_features(f, pack, 2)
    assert pack.proposer().propose(pd.Series(f), 2) == pack.proposer().propose(f, 2)
    with pytest.raises(ConfigError, match="unknown meta-feature 'foo'"):
        propose_features(pd.Series({"foo": 1.0, "simple.n_rows": 10.0}), pack, 2)
    with pytest.raises(ConfigError, match="meta-features must be a mapping of name -> value "
                                          r"\(or a pandas Series indexed by name\), got list"):
        propose_features([1.0, 2.0], pack, 2)  # type: ignore[arg-type]


def test_an_unfitted_proposer_or_miner_says_so_as_scikit_learn_does() -> None:
    """AttributeErrors: 'metamodel_' (propose before fit) and 'rules_' (build_pack)."""
    from sklearn.exceptions import NotFittedError

    from aicf_induct.induction.pack import build_pack

    with pytest.raises(NotFittedError, match="This Proposer instance is not fitted yet"):
        Proposer().propose({"simple.n_rows": 10.0}, top_k=1)
    with pytest.raises(NotFittedError, match=r"build_pack's miner \(Miner\) is not fitted"):
        build_pack(planted(P=8), Miner())


def test_main_job_refuses_a_name_or_a_dict_in_words(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """AttributeError 'train' for a name; "replace() should be called on dataclass
    instances" for a dict of settings; a file as the warehouse read as no history."""
    with pytest.raises(TypeError, match=r"main_job takes a loaded Problem "
                                        r"\(load_problem\('wine'\)\), got str"):
        main_job("wine")  # type: ignore[arg-type]
    problem = load_problem("iris")
    with pytest.raises(TypeError, match=r"main_job's config must be a TrainConfig \(e\.g\. "
                                        r"TrainConfig\(epochs=3\)\) or None, got dict"):
        main_job(problem, {"epochs": 3})  # type: ignore[arg-type]
    (tmp_path / "wh").write_text("x")
    with pytest.raises(ConfigError, match=r"warehouse '.*wh' is not a directory"):
        main_job(problem, warehouse=tmp_path / "wh")
