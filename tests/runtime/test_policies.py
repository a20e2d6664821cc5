"""Policies: the rule-based regimes and the proposal interface."""

from __future__ import annotations

import json

import pytest

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.ir.graph import Graph
from aicf_induct.runtime.policies import (
    ExplorePolicy,
    Proposal,
    ProposalPolicy,
    RuleBasedPolicy,
    RuleConfig,
    StackPolicy,
    TargetConfig,
    TargetSizePolicy,
    make_policy,
    policy_settings,
    target_width,
)
from aicf_induct.runtime.policies import PolicyObservation as Obs
from aicf_induct.runtime.transforms import RewriteError
from aicf_induct.runtime.triggers import Fired

PLATEAU = Fired("plateau", "plateau", 100)
SPIKE = Fired("spike", "instability", 100)


def _g(spec: str = "mlp:depth=2,width=8") -> Graph:
    return mlp_graph(parse_model_spec(spec), 5, 3)


def _m(val: float = 0.5, train: float = 0.48, best: float = 0.5, **refs: float) -> dict:
    return {"val_loss": val, "train_loss": train, "gap": (val - train) / train,
            "best_val_loss": best, **{f"best_val_at.{k}": v for k, v in refs.items()}}


def test_grows_on_a_plateau_narrowest_layer_first_then_deeper() -> None:
    g = mlp_graph(parse_model_spec("mlp:depth=2,width=16,profile=funnel"), 5, 3)
    d = RuleBasedPolicy().decide(Obs(PLATEAU, 100, g, _m()))
    assert d is not None and d.transform == "widen" and d.site == "blocks.1.linear"
    assert d.options["noise"] > 0 and "underfitting" in d.reason
    capped = RuleBasedPolicy(RuleConfig(max_width=16))
    d = capped.decide(Obs(PLATEAU, 100, g, _m()))
    assert d is not None and d.transform == "widen" and d.site == "blocks.1.linear"  # 8 -> 16
    full = mlp_graph(parse_model_spec("mlp:depth=2,width=16"), 5, 3)
    d = capped.decide(Obs(PLATEAU, 100, full, _m()))
    assert d is not None and d.transform == "deepen" and d.site == "blocks.1.act"
    d = capped.decide(Obs(PLATEAU, 100, full, _m(), blocked=frozenset({"deepen"})))
    assert d is not None and d.transform == "residual"


def test_the_rules_deepen_only_while_the_model_stays_within_the_depth_ceiling() -> None:
    """Counted once the block is in: after gelu a deepen adds two linears (a residual
    block), so depth 3 of 4 adds a residual branch instead; after relu it adds one."""
    capped = RuleBasedPolicy(RuleConfig(max_width=16, max_depth=4))
    for act, grows in (("gelu", "residual"), ("relu", "deepen")):
        g = mlp_graph(parse_model_spec(f"mlp:depth=3,width=16,act={act}"), 5, 3)
        d = capped.decide(Obs(PLATEAU, 100, g, _m()))
        assert d is not None and d.transform == grows, act


def test_grows_again_only_when_the_last_growth_paid_off() -> None:
    p = RuleBasedPolicy(RuleConfig(min_gain=0.02))
    assert p.decide(Obs(PLATEAU, 100, _g(), _m(best=0.5, widen=0.505))) is None
    d = p.decide(Obs(PLATEAU, 100, _g(), _m(best=0.5, widen=0.6)))
    assert d is not None and d.transform == "widen"


def test_regularises_when_overfitting() -> None:
    over = _m(val=0.8, train=0.3, best=0.6)
    d = RuleBasedPolicy().decide(Obs(PLATEAU, 100, _g(), over))
    assert d is not None and d.transform == "dropout" and d.options == {"p": 0.1}
    assert "overfitting" in d.reason
    dropped = _g("mlp:depth=2,width=8,dropout=0.2")
    d = RuleBasedPolicy().decide(Obs(PLATEAU, 100, dropped, over))
    assert d is not None and d.site == "blocks.1.dropout" and d.options == {"p": 0.3}
    maxed = _g("mlp:depth=2,width=8,dropout=0.5")
    assert RuleBasedPolicy().decide(Obs(PLATEAU, 100, maxed, over)) is None
    # a wide gap with the validation loss at its best: neither grow nor regularise
    assert RuleBasedPolicy().decide(Obs(PLATEAU, 100, _g(), _m(val=0.6, train=0.3,
                                                              best=0.6))) is None


def test_stabilises_after_repeated_instability() -> None:
    p = RuleBasedPolicy(RuleConfig(stabilise_after=2))
    assert p.decide(Obs(SPIKE, 100, _g(), _m(), rollbacks=1)) is None
    d = p.decide(Obs(SPIKE, 100, _g(), _m(), rollbacks=2))
    assert d is not None and d.transform == "normalize" and d.site == "blocks.0.linear"
    normed = _g("mlp:depth=2,width=8,norm=layernorm")
    assert p.decide(Obs(SPIKE, 100, normed, _m(), rollbacks=3)) is None


def test_any_trigger_grows_an_underfitting_model() -> None:
    for f in (Fired("epoch_end", "schedule", 100), Fired("warmup", "schedule", 100)):
        d = RuleBasedPolicy().decide(Obs(f, 100, _g(), _m()))
        assert d is not None and d.transform == "widen"
    no = RuleBasedPolicy(RuleConfig(grow_on_warmup=False))
    assert no.decide(Obs(Fired("warmup", "schedule", 100), 100, _g(), _m())) is None


def test_proposal_policy_takes_the_best_applicable_unblocked_proposal() -> None:
    seen: list[dict] = []

    def proposer(obs: Obs) -> list:
        seen.append(json.loads(json.dumps(obs.to_dict())))  # JSON-able for a service
        return [
            {"transform": "widen", "site": "head", "score": 0.9, "source": "api"},  # n/a
            Proposal("deepen", None, {}, 0.8, "induction"),  # blocked below
            {"transform": "prune", "site": "blocks.0.linear", "options": {"units": 2},
             "score": 0.7, "source": "induction", "evidence": {"support": 12}},
            Proposal("residual", "blocks.0.linear", {}, 0.95, "weak"),  # below min_score
            Proposal("no_such", None, {}, 0.99),
        ]

    pol = ProposalPolicy(proposer, min_score=0.5)
    obs = Obs(PLATEAU, 100, _g(), _m(), blocked=frozenset({"deepen"}))
    pol_low = ProposalPolicy(lambda o: [Proposal("residual", "blocks.0.linear", {}, 0.1)],
                             min_score=0.5, fallback=RuleBasedPolicy())
    d = ProposalPolicy(lambda o: [p for p in proposer(o) if p is not None
                                  and not (isinstance(p, Proposal) and p.source == "weak")],
                       min_score=0.5).decide(obs)
    assert d is not None and (d.transform, d.site, d.options) == ("prune", "blocks.0.linear",
                                                                  {"units": 2})
    assert d.source == "induction" and "0.7" in d.reason
    assert seen[0]["trigger"] == "plateau" and seen[0]["ir"]["format"] == "aicf.ir/1"
    d = pol.decide(obs)
    assert d is not None and d.transform == "residual"  # 0.95 >= min_score, applies
    d = pol_low.decide(obs)
    assert d is not None and d.source == "rules"  # nothing good enough: the fallback
    assert ProposalPolicy(lambda o: []).decide(obs) is None


def test_target_width_from_the_problem_size() -> None:
    assert target_width(100) == 64 and target_width(1167) == 128  # lo; 146 -> 128
    assert target_width(1950) == 256 and target_width(10 ** 6) == 256  # hi
    assert target_width(0) == 256  # unknown size: the upper bound
    assert target_width(1000, rows_per_unit=4, lo=16, hi=1024) == 256


def test_jump_policy_widens_straight_to_the_target_once() -> None:
    warm = Fired("warmup", "schedule", 25)
    small = _g("mlp:depth=1,width=4")
    d = TargetSizePolicy().decide(Obs(warm, 25, small, _m(), n_train=1167))
    assert d is not None and (d.transform, d.site) == ("widen", "blocks.0.linear")
    assert d.options["units"] == 124 and d.options["init"] == "fresh"  # 4 -> 128
    assert "target 128" in d.reason and d.source == "jump"
    fixed = TargetSizePolicy(TargetConfig(width=32, init="split", noise=0.5))
    d = fixed.decide(Obs(warm, 25, small, _m(), n_train=1167))
    assert d is not None and d.options["units"] == 28 and d.options["noise"] == 0.5
    # narrowest layer first; none below the target: no more growth, even if underfitting
    funnel = mlp_graph(parse_model_spec("mlp:depth=2,width=64,profile=funnel"), 5, 3)
    d = TargetSizePolicy(TargetConfig(width=64)).decide(Obs(PLATEAU, 100, funnel, _m()))
    assert d is not None and d.site == "blocks.1.linear" and d.options["units"] == 32
    wide = _g("mlp:depth=1,width=64")
    assert TargetSizePolicy(TargetConfig(width=64)).decide(Obs(PLATEAU, 100, wide, _m())) \
        is None
    grows_on = TargetSizePolicy(TargetConfig(width=64, grow_after=True))
    d = grows_on.decide(Obs(PLATEAU, 100, wide, _m()))
    assert d is not None and d.transform == "widen" and d.options["factor"] == 2.0  # rules
    # blocked widening: nothing; overfitting: dropout only if asked; instability: rules
    assert TargetSizePolicy().decide(Obs(warm, 25, small, _m(),
                                         blocked=frozenset({"widen"}))) is None
    over = _m(val=0.8, train=0.3, best=0.6)
    assert TargetSizePolicy(TargetConfig(width=64)).decide(Obs(PLATEAU, 100, wide, over)) \
        is None
    reg = TargetSizePolicy(TargetConfig(width=64, regularise=True))
    d = reg.decide(Obs(PLATEAU, 100, wide, over))
    assert d is not None and d.transform == "dropout"
    assert reg.decide(Obs(PLATEAU, 100, wide, _m())) is None  # regularises, grows no more
    d = TargetSizePolicy().decide(Obs(SPIKE, 100, small, _m(), rollbacks=2))
    assert d is not None and d.transform == "normalize"


def test_stack_policy_jumps_then_stacks_a_layer_per_plateau_up_to_its_depth() -> None:
    warm = Fired("warmup", "schedule", 25)
    stack = StackPolicy(depth=3, width=32)
    d = stack.decide(Obs(warm, 25, _g("mlp:depth=1,width=4"), _m()))
    assert d is not None and (d.transform, d.options["units"]) == ("widen", 28)  # the jump
    one = _g("mlp:depth=1,width=32")
    assert stack.decide(Obs(warm, 25, one, _m())) is None  # at the target: no more widening
    d = stack.decide(Obs(PLATEAU, 100, one, _m()))
    assert d is not None and (d.transform, d.site, d.source) == ("deepen", "blocks.0.act",
                                                                 "stack")
    assert d.options == {} and "2 of 3" in d.reason
    d = StackPolicy(depth=3, width=32, deepen_state="borrow").decide(
        Obs(PLATEAU, 100, _g("mlp:depth=2,width=32"), _m()))
    assert d is not None and d.options == {"state": "borrow"} and "3 of 3" in d.reason
    three = _g("mlp:depth=3,width=32")
    assert stack.decide(Obs(PLATEAU, 100, three, _m())) is None  # at its depth
    assert stack.decide(Obs(PLATEAU, 100, one, _m(), blocked=frozenset({"deepen"}))) is None
    assert stack.decide(Obs(Fired("epoch_end", "schedule", 100), 100, one, _m())) is None


def test_make_policy() -> None:
    assert make_policy("rules").name == "rules"
    assert make_policy("jump").name == "jump"
    assert isinstance(make_policy("stack"), StackPolicy)
    with pytest.raises(RewriteError, match="unknown policy"):
        make_policy("magic")


@pytest.mark.parametrize("policy", [
    RuleBasedPolicy(RuleConfig(gap_tolerance=0.5, max_width=64)),
    TargetSizePolicy(TargetConfig(width=32, grow_after=True, rules=RuleConfig(min_gain=0.1))),
    StackPolicy(depth=2, width=16, deepen_state="borrow"),
    ExplorePolicy(seed=7, arms=("none", "widen")),
], ids=lambda p: p.name)
def test_a_built_in_policy_is_rebuilt_from_its_settings(policy) -> None:  # type: ignore[no-untyped-def]
    """What a checkpoint keeps of its policy (JSON) rebuilds it, options and all."""
    settings = json.loads(json.dumps(policy_settings(policy)))
    again = make_policy(policy.name, settings)
    assert type(again) is type(policy) and policy_settings(again) == policy_settings(policy)
    assert policy_settings(make_policy(policy.name)) != policy_settings(policy)
