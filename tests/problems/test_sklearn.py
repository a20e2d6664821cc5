"""scikit-learn's bundled datasets: the contract the trainer relies on."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aicf_induct.errors import ConfigError, DataError
from aicf_induct.problems import SKLEARN_NAMES, image_side, load_problem, problem_from_frame

SHAPES = {"iris": (150, 4, 3), "wine": (178, 13, 3), "breast_cancer": (569, 30, 2),
          "digits": (1797, 64, 10), "diabetes": (442, 10, 0)}


@pytest.mark.parametrize("name", SKLEARN_NAMES)
def test_shapes_dtypes_and_split_fractions(name: str) -> None:
    p = load_problem(name)
    rows, feats, classes = SHAPES[name]
    assert (p.n_rows, p.n_features, p.n_classes) == (rows, feats, classes)
    assert p.source == "sklearn"
    assert abs(len(p.test) / rows - 0.20) < 0.01
    assert abs(len(p.val) / rows - 0.15) < 0.01
    for split in (p.train, p.val, p.test):
        assert split.X.dtype == np.float64 and split.X.shape[1] == feats
        assert np.isfinite(split.X).all()
        if classes:
            assert split.y.dtype == np.int64
            assert split.y.min() >= 0 and split.y.max() < classes
        else:
            assert split.y.dtype == np.float64


def test_classification_splits_are_stratified() -> None:
    p = load_problem("wine")
    full = np.bincount(np.concatenate([p.train.y, p.val.y, p.test.y])) / p.n_rows
    for split in (p.train, p.val, p.test):
        assert np.abs(np.bincount(split.y, minlength=3) / len(split) - full).max() < 0.05


def test_scaling_and_target_standardisation_use_train_only() -> None:
    p = load_problem("diabetes")
    assert np.allclose(p.train.X.mean(0), 0, atol=1e-12)
    assert np.allclose(p.train.X.std(0), 1)
    assert not np.allclose(p.test.X.mean(0), 0, atol=1e-3)  # fitted on train, not on all
    assert abs(p.train.y.mean()) < 1e-12 and abs(p.train.y.std() - 1) < 1e-12
    y_test_raw = p.test.y * p.y_std + p.y_mean
    assert y_test_raw.min() >= 25 and y_test_raw.max() <= 346  # diabetes target range


def test_seed_changes_split_not_problem_id() -> None:
    a, b, c = load_problem("iris", seed=0), load_problem("iris", seed=1), load_problem("iris")
    assert a.problem_id == b.problem_id == c.problem_id
    assert not np.array_equal(a.test.y, b.test.y) or not np.array_equal(a.test.X, b.test.X)
    assert np.array_equal(a.train.X, c.train.X)
    assert a.problem_id != load_problem("wine").problem_id


def test_prefixed_name_and_unknown_name() -> None:
    assert load_problem("sklearn:iris").problem_id == load_problem("iris").problem_id
    assert load_problem("sklearn:iris").name == "iris"
    sub = load_problem("iris?max_rows=60")
    assert (sub.name, sub.n_rows) == ("iris?max_rows=60", 60)
    assert sub.problem_id != load_problem("iris").problem_id
    with pytest.raises(DataError, match="unknown dataset 'irs'"):
        load_problem("irs")


def test_image_side_takes_a_name_or_a_problem() -> None:
    """image_side(load_problem("wine")) was a TypeError about an unhashable ndarray."""
    digits = load_problem("digits")
    assert image_side(digits) == image_side("digits") == 8
    assert image_side(load_problem("wine")) is None and image_side("wine") is None
    frame = pd.DataFrame(digits.train.X[:, 8:16]).assign(y=digits.train.y)  # no image
    assert image_side(problem_from_frame(frame, target="y", name="digits")) is None
    with pytest.raises(ConfigError, match=r"image_side takes a problem name such as 'digits' "
                                          r"or a Problem, got int \(by feature count"):
        image_side(64)  # type: ignore[arg-type]
