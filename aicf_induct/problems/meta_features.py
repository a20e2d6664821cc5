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

from aicf_induct.problems.problem import Problem
from aicf_induct.problems.registry import load_problem

FEATURE_SEED = 0  # the split every problem is featurised on


def featurised_split(problem: Problem) -> Problem:
    """`problem` split by `FEATURE_SEED`, the split its meta-features are extracted from:
    itself when it is that seed's split, else the same data loaded again by its name and
    split so (itself when the name does not load the same data). Its `split_seed` says
    which split the features are of; `runtime.runs.problem_meta_features` extracts and
    caches them."""
    if problem.split_seed == FEATURE_SEED:
        return problem
    try:
        base = load_problem(problem.name, seed=FEATURE_SEED)
    except Exception:  # any reason the name does not load: the documented fallback
        return problem
    return base if base.problem_id == problem.problem_id else problem
