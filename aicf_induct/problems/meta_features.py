"""A problem's meta-features: those of seed 0's split, whatever split a run trains on.

`propose` featurises a dataset on seed 0's split, so the corpus it learned from must hold
the same: a run on seed 3 logs its problem with the features of seed 0's split, not of its
own. Before this, each run logged its own split's and the warehouse kept the last written,
so a corpus's features were of whichever seed was logged last (benchmarks/RESULTS.md,
"Every meta-feature on the split `propose` uses"). A problem that cannot be loaded again by
its name (one built in memory, a file since moved) keeps its own split's features; the
warehouse records which split a problem's features are of (`problem_features.split_seed`).
"""

from __future__ import annotations

from aicf_induct.problems.features import FeatureConfig, extract_features
from aicf_induct.problems.problem import Problem
from aicf_induct.problems.registry import load_problem

FEATURE_SEED = 0  # the split every problem is featurised on


def meta_features(problem: Problem, config: FeatureConfig | None = None) -> dict[str, float]:
    """`extract_features` of `featurised_split(problem)`: seed 0's split's."""
    return meta_features_with_seed(problem, config)[0]


def meta_features_with_seed(problem: Problem, config: FeatureConfig | None = None
                            ) -> tuple[dict[str, float], int]:
    """`meta_features(problem)` and the seed of the split they are of (`FEATURE_SEED`, or
    the problem's own where its name does not load it again)."""
    base = featurised_split(problem)
    return dict(extract_features(base, config)), base.split_seed


def featurised_split(problem: Problem) -> Problem:
    """`problem` split by `FEATURE_SEED`: itself when it is that seed's split, else the same
    data loaded again by its name and split so (itself when the name does not load the same
    data). Its `split_seed` says which split the features are of."""
    if problem.split_seed == FEATURE_SEED:
        return problem
    try:
        base = load_problem(problem.name, seed=FEATURE_SEED)
    except Exception:  # any reason the name does not load: the documented fallback
        return problem
    return base if base.problem_id == problem.problem_id else problem
