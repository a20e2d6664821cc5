"""The leave-one-problem-out evaluation's methods, by name: the proposer, the baselines an
AutoML user knows, and the references that read the held-out problem's test outcomes. Names
only, in a module of their own, so that `induce evaluate --help` lists them without loading
the evaluation (and scikit-learn with it)."""

from __future__ import annotations

METHODS = ("proposer", "knn", "portfolio", "average", "random", "default", "full_search",
           "choice_oracle", "oracle")
# picks that read the held-out problem's test outcomes: scales for the others, left out of
# the comparisons' Holm families
REFERENCES = ("choice_oracle", "oracle")
SINGLE_PICKS = ("full_search", "choice_oracle", "oracle")  # methods that do not depend on k
BASELINES = tuple(m for m in METHODS if m != "proposer")
WARM_STARTS = ("knn", "portfolio", "average")  # the 3-pick baselines a top-1 is held against
# the single picks that train on the problem, held against the warm starts as the top-1 is:
# what the goal line asks is read against what they reach (the full search: every candidate
# trained, picked by validation; the choice oracle: the problem's own test outcomes)
CEILINGS = ("full_search", "choice_oracle")
