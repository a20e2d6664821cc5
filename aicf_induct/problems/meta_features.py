"""A problem's meta-features: those of seed 0's split, whatever split a run trains on.

`propose` featurises a dataset on seed 0's split, so the corpus it learned from must hold
the same: a run on seed 3 logs its problem with the features of seed 0's split, not of its
own. Before this, each run logged its own split's and the warehouse kept the last written,
so a corpus's features were of whichever seed was logged last (benchmarks/RESULTS.md,
"Every meta-feature on the split `propose` uses"). A problem that cannot be loaded again by
its name (one built in memory, a file since moved) keeps its own split's features.
"""

from __future__ import annotations

from aicf_induct.problems.features import FeatureConfig, extract_features
from aicf_induct.problems.problem import Problem
from aicf_induct.problems.registry import load_problem

FEATURE_SEED = 0  # the split every problem is featurised on


def meta_features(problem: Problem, config: FeatureConfig | None = None) -> dict[str, float]:
    """`extract_features` of `problem` split by `FEATURE_SEED`: its own split's when it is
    that seed's, else the same data loaded again by its name and split so (its own split's
    when the name does not load the same data)."""
    if problem.split_seed != FEATURE_SEED:
        try:
            base = load_problem(problem.name, seed=FEATURE_SEED)
        except Exception:  # any reason the name does not load: the documented fallback
            base = problem
        if base.problem_id == problem.problem_id:
            problem = base
    return dict(extract_features(problem, config))
