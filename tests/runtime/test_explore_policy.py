"""ExplorePolicy: a seeded, stateless random draw over the transforms and no change."""

from __future__ import annotations

from collections import Counter

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.runtime.policies import EXPLORE_ARMS, ExplorePolicy, PolicyObservation
from aicf_induct.runtime.transforms import make_transform
from aicf_induct.runtime.triggers import Fired

GRAPH = mlp_graph(parse_model_spec("mlp:depth=2,width=8"), 5, 3)


def _obs(step: int, kind: str = "plateau", rollbacks: int = 0,
         blocked: frozenset[str] = frozenset()) -> PolicyObservation:
    fired = Fired(kind, "instability" if kind == "spike" else kind, step)
    return PolicyObservation(fired, step, GRAPH, {"val_loss": 0.5},
                             blocked, "classification", 0, rollbacks)


def test_the_draw_depends_on_the_observation_and_seed_only() -> None:
    a, b = ExplorePolicy(seed=7), ExplorePolicy(seed=7)
    assert [a.decide(_obs(s)) for s in range(50)] == [b.decide(_obs(s)) for s in range(50)]
    other = ExplorePolicy(seed=8)
    assert [a.decide(_obs(s)) for s in range(50)] != [other.decide(_obs(s)) for s in range(50)]


def test_every_arm_is_drawn_and_no_change_among_them() -> None:
    p = ExplorePolicy(seed=1)
    seen = Counter((d.transform if d else "none") for d in (p.decide(_obs(s))
                                                            for s in range(400)))
    assert set(seen) == set(EXPLORE_ARMS)
    for d in (p.decide(_obs(s)) for s in range(400)):
        assert d is None or (d.source == "explore" and d.site in
                             make_transform(d.transform, **d.options).sites(GRAPH))


def test_blocked_arms_are_not_drawn_and_instability_stabilises_like_the_rules() -> None:
    p = ExplorePolicy(seed=1)
    assert all(d is None or d.transform != "widen"
               for d in (p.decide(_obs(s, blocked=frozenset({"widen"}))) for s in range(200)))
    d = p.decide(_obs(10, kind="spike", rollbacks=3))
    assert d is not None and d.transform == "normalize"
