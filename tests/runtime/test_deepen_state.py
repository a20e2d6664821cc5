"""deepen's optimizer-state rules: "fresh" (zero moments, step 0) and "borrow" (the feeding
layer's step count and mean second moment, zero first moment), and what each does to the
new layer's first Adam step."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.runtime.model_state import ModelState, capture, install
from aicf_induct.runtime.transforms import Deepen, RewriteError, make_transform
from aicf_induct.runtime.transforms.deepen import feeding_linear
from tests.runtime.test_adaptive_fixtures import make_trainer, run_steps, toy_graph, toy_problem

LR = 3e-3
SITE = "blocks.1.act"


def _trained() -> tuple[object, ModelState]:
    problem = toy_problem("classification", n=400, seed=3)
    tr = make_trainer(problem, toy_graph(problem, "mlp:depth=2,width=16"), seed=0, lr=LR)
    run_steps(tr, 40)
    return tr, capture(tr)


def _new_params(before: ModelState, after: ModelState) -> list[str]:
    return sorted(set(after.graph.params) - set(before.graph.params))


def test_borrow_takes_the_feeding_layers_count_and_second_moment() -> None:
    _, state = _trained()
    donor = feeding_linear(state.graph, SITE)
    assert donor is not None and donor.id == "blocks.1.linear"
    grown = Deepen(state="borrow").apply(state, SITE, np.random.default_rng(0))
    new = _new_params(state, grown)
    assert len(new) == 2  # the inserted linear's weight and bias
    assert state.optimizer is not None and grown.optimizer is not None
    for name in new:
        kind = "weight" if name.endswith("weight") else "bias"
        src = donor.params[kind]
        assert grown.optimizer["steps"][name] == state.optimizer["steps"][src] == 40
        slots = grown.optimizer["slots"][name]
        assert slots["v"].shape == grown.values[name].shape
        np.testing.assert_allclose(slots["v"], state.optimizer["slots"][src]["v"].mean())
        assert slots["v"].min() > 0
        assert not slots["m"].any()
    fresh = Deepen().apply(state, SITE, np.random.default_rng(0))
    assert all(n not in fresh.optimizer["steps"] for n in _new_params(state, fresh))


def _first_step_moves(rule: str) -> np.ndarray:
    """|change| of the inserted weight over one Adam step after deepening with `rule`."""
    tr, state = _trained()
    grown = Deepen(state=rule).apply(state, SITE, np.random.default_rng(0))
    name = next(n for n in _new_params(state, grown) if n.endswith("weight"))
    install(tr, grown)
    before = grown.values[name].copy()
    run_steps(tr, 1)
    return np.abs(capture(tr).values[name] - before)


def test_fresh_moves_every_entry_by_the_lr_and_borrow_by_far_less() -> None:
    fresh, borrowed = _first_step_moves("fresh"), _first_step_moves("borrow")
    moved = fresh > 0
    # fresh: Adam's first bias-corrected step is lr * g / (|g| + eps): the lr for every entry
    # whose gradient is well above eps
    assert (np.abs(fresh[moved] - LR) < 1e-3 * LR).mean() > 0.95
    assert moved.mean() > 0.5
    # borrowed: sized like the layer below's steps, (1 - beta1) g / sqrt(v_below)
    assert np.median(borrowed[moved]) < 0.5 * LR


def test_bad_state_option_is_refused() -> None:
    with pytest.raises(RewriteError, match="state must be one of fresh, borrow"):
        Deepen(state="warm")
    with pytest.raises(Exception, match="state must be one of"):
        make_transform("deepen", state="warm")
