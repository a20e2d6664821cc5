"""LearnedRewritePolicy: takes the first proposed rewrite that applies, honours a "no change"
backed by history, falls back to the rules without history, and after a garbage answer or an
unreachable proposer says so once and lets the fallback decide from then on."""

from __future__ import annotations

import io

import pytest

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.induction.mainjob import (
    LearnedRewritePolicy,
    ProposerUnavailable,
    plateau_observation,
    start_point,
)
from aicf_induct.runtime.policies import NO_CHANGE, RuleBasedPolicy

GRAPH = mlp_graph(parse_model_spec("mlp:depth=1,width=8"), 4, 3)
OBS = plateau_observation(GRAPH, {"val_loss": 0.5, "train_loss": 0.49, "gap": 0.02,
                                  "best_val_loss": 0.5}, "classification")


def answer(decision: str = "rewrite", history: int = 40, rewrites: list | None = None) -> dict:
    return {"decision": decision, "history": history, "reason": "because",
            "condition": {"trigger_kind": "plateau"}, "rewrites": rewrites or []}


WIDEN = {"transform": "widen", "site": "blocks.0.linear", "options": {"factor": 2.0},
         "expected_effect": 0.1, "low": 0.02, "high": 0.18,
         "evidence": {"n": {"transform": 30}, "guard": {"keep": 20}}}


def test_the_first_applicable_rewrite_is_taken_with_its_evidence() -> None:
    bad_site = {**WIDEN, "site": "no.such.node"}
    p = LearnedRewritePolicy(lambda o: answer(rewrites=[bad_site, WIDEN]), source="svc")
    d = p.decide(OBS)
    assert d is not None and (d.transform, d.site, d.source) == ("widen", "blocks.0.linear",
                                                                  "svc")
    assert d.evidence["interval"] == [0.02, 0.18] and d.evidence["n"] == {"transform": 30}


def considered(n_transform: int) -> list[dict]:
    """The answer's ranked rewrites, none proposed: `n_transform` observations of widen."""
    return [{**WIDEN, "low": -0.1, "evidence": {"n": {"transform": n_transform}}}]


def test_no_change_with_history_is_honoured_and_without_history_the_rules_decide() -> None:
    d = LearnedRewritePolicy(lambda o: {**answer("none"), "considered": considered(30)}
                             ).decide(OBS)
    assert d is not None and d.transform == NO_CHANGE and d.reason == "because"
    d = LearnedRewritePolicy(lambda o: answer("none", history=0)).decide(OBS)
    assert d is not None and d.transform == "widen" and d.source == "rules:fallback"


def test_a_history_of_control_arms_alone_does_not_back_a_no_change() -> None:
    """Runs that never rewrote (their "no change" decisions are the history's 40) measured no
    transform: the rules decide, as with no history (it kept the rules out for good)."""
    d = LearnedRewritePolicy(lambda o: {**answer("none"), "considered": considered(0)}
                             ).decide(OBS)
    assert d is not None and d.transform == "widen" and d.source == "rules:fallback"


class Idle:
    name = "rules"

    def decide(self, obs: object) -> None:
        return None


def test_a_fallback_that_leaves_the_model_alone_is_logged_as_its_no_change() -> None:
    d = LearnedRewritePolicy(lambda o: answer("none", history=0), Idle()).decide(OBS)
    assert (d.transform, d.source) == (NO_CHANGE, "rules:fallback")
    assert d.reason == ("no change: the rules policy has nothing to do (fallback: no learned "
                        "proposal)")
    assert d.evidence == {"fallback": "no learned proposal"}


@pytest.mark.parametrize("ask", [
    lambda o: {"unexpected": True},
    lambda o: answer(rewrites="not a list"),  # type: ignore[arg-type]
    lambda o: (_ for _ in ()).throw(ProposerUnavailable("connection refused")),
])
def test_a_failing_proposer_is_said_once_and_the_fallback_takes_over(ask) -> None:
    calls = []

    def counted(o):
        calls.append(o)
        return ask(o)

    out = io.StringIO()
    p = LearnedRewritePolicy(counted, RuleBasedPolicy(), stream=out)
    ds = [p.decide(OBS) for _ in range(3)]
    assert len(calls) == 1 and out.getvalue().count("rewrite proposer failed") == 1
    assert all(d is not None and d.source == "rules:fallback"
               and "proposer_error" in d.evidence for d in ds)


def test_a_proposal_without_candidates_is_a_clear_error() -> None:
    from aicf_induct.errors import ConfigError
    from aicf_induct.problems import load_problem

    with pytest.raises(ConfigError, match="no usable top candidate"):
        start_point({"candidates": []}, load_problem("iris"), "service x")


def test_a_learned_deepen_stops_at_the_depth_ceiling_counted_after_it() -> None:
    """A deepen after a non-idempotent activation adds a residual block (two linears): at
    depth 3 of a ceiling of 4 it would end at 5, so it is passed over; after relu it adds
    one and is taken."""
    deepen = {**WIDEN, "transform": "deepen", "site": "blocks.2.act", "options": {}}
    for act, taken in (("gelu", False), ("relu", True)):
        g = mlp_graph(parse_model_spec(f"mlp:depth=3,width=8,act={act}"), 4, 3)
        obs = plateau_observation(g, {"val_loss": 0.5, "train_loss": 0.49, "gap": 0.02,
                                      "best_val_loss": 0.5}, "classification")
        d = LearnedRewritePolicy(lambda o: answer(rewrites=[deepen]), Idle(),
                                 max_depth=4).decide(obs)
        assert (d is not None and d.transform == "deepen") is taken, act
