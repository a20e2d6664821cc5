"""Picking among trained proposals by validation: hand cases of the rule."""

from __future__ import annotations

import math

import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.induction.shortlist import pick_by_validation, shortlist_size

NAN = math.nan


def test_the_highest_validation_score_is_picked() -> None:
    assert pick_by_validation([0.80, 0.95, 0.90], [0.5, 0.4, 0.3]) == 1


def test_equal_scores_go_to_the_lower_validation_loss_then_the_better_rank() -> None:
    assert pick_by_validation([0.9, 0.9, 0.8], [0.40, 0.30, 0.10]) == 1
    assert pick_by_validation([0.9, 0.9, 0.9], [0.30, 0.30, 0.30]) == 0
    assert pick_by_validation([0.9, 0.9], [NAN, 0.5]) == 1  # a finite loss beats none


def test_a_run_without_a_finite_score_is_never_picked_while_another_has_one() -> None:
    assert pick_by_validation([NAN, 0.1, -math.inf], [0.1, 9.0, 0.0]) == 1
    assert pick_by_validation([NAN, NAN], [0.2, 0.1]) == 0  # all diverged: the top stands


@pytest.mark.parametrize("top", [0, -1, 1.5, True])
def test_a_top_below_one_is_refused(top: object) -> None:
    """It trained one candidate silently (`max(1, ...)`)."""
    proposal = {"candidates": [{"rank": 1}, {"rank": 2}]}
    with pytest.raises(ConfigError, match=f"top must be an integer >= 1, got {top!r}"):
        shortlist_size(proposal, top)  # type: ignore[arg-type]
    assert shortlist_size(proposal, 5) == 2 and shortlist_size({"candidates": []}, 3) == 1
