"""Problems: dataset loading, preprocessing, splits, and problem (meta-)features."""

from aicf_induct.problems.problem import Problem, Split
from aicf_induct.problems.sklearn_datasets import SKLEARN_NAMES, load_sklearn


def load_problem(name: str, seed: int = 0) -> Problem:
    """A problem by name. For now: scikit-learn's bundled datasets."""
    return load_sklearn(name, seed=seed)


__all__ = ["SKLEARN_NAMES", "Problem", "Split", "load_problem"]
