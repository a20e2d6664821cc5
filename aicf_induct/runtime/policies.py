"""Policies: what to do when a trigger fires.

A policy sees a `PolicyObservation` (the trigger, the current graph, recent metrics, the
blacklisted transforms) and returns a `Decision` (a transform by registry name, a site,
options, the reason) or None.

- `RuleBasedPolicy`: grow when underfitting (widen the narrowest hidden layer, then
  deepen, then add a residual branch), regularise when overfitting (raise or insert
  dropout), stabilise when unstable again after rollbacks (insert a layer norm).
  Underfitting: the generalisation gap (val - train) / train is within a tolerance (the
  model fits its training data no better than unseen data): grow, at any trigger, as long
  as the last growth paid off (the best validation loss fell by `min_gain` since).
  Overfitting: the gap is over the tolerance and the validation loss has risen from its
  best: regularise. A wide gap with the validation loss still at its best: wait.
- `TargetSizePolicy` ("jump"): grows once, early and in one step: at the first trigger
  (the warm-up) it widens the narrowest hidden layer straight to a target width (given,
  or `target_width(n_train)`: from the training split's size) with fresh units, instead
  of doubling at each plateau; afterwards it only stabilises like the rules (inserts a
  layer norm after repeated instability); `grow_after` / `regularise` let the rules grow
  on or add dropout too.
- `StackPolicy` ("stack"): progressive stacking: the jump policy's one widening at the
  warm-up, then at each plateau an identity-initialised ReLU layer on top (`deepen`, exact:
  relu is idempotent) until the model has `depth` hidden layers; each stage starts from a
  trained shallower net.
- `ProposalPolicy`: asks a proposer — any callable from an observation to ranked
  `Proposal`s (the induction layer's ranker and the service's rewrite endpoint plug in
  here) — and takes the best one that applies and is not blacklisted, else defers to a
  fallback policy; the proposal's evidence travels with the decision into its event.
- `ExplorePolicy` ("explore"): a randomised experiment over transforms and no change, for
  the rewrite history the induction layer learns from (`corpus build --adaptive`).

Policies hold no state of their own: a decision depends on the observation alone, so
rollbacks need nothing from them, and a checkpoint only a built-in policy's name and
options (`policy_settings`, which `make_policy` rebuilds it from).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from aicf_induct.ir.canonical import to_dict
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.ops import OPS
from aicf_induct.runtime.transforms import RewriteError, make_transform
from aicf_induct.runtime.transforms.deepen import Deepen
from aicf_induct.runtime.transforms.surgery import hidden_linears
from aicf_induct.runtime.triggers import Fired


@dataclass(frozen=True)
class PolicyObservation:
    fired: Fired
    step: int
    graph: Graph
    metrics: dict[str, float]  # train_loss, val_loss, gap (current model), best_val_loss
    blocked: frozenset[str] = frozenset()  # blacklisted transform names
    task: str = ""
    rewrites: int = 0  # rewrites applied so far in this run
    rollbacks: int = 0  # rollbacks so far (instability and guard)
    n_train: int = 0  # rows of the training split (0: unknown)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form, for proposers behind a service."""
        return {"trigger": self.fired.trigger, "trigger_kind": self.fired.kind,
                "detail": self.fired.detail, "step": self.step, "ir": to_dict(self.graph),
                "metrics": self.metrics, "blocked": sorted(self.blocked), "task": self.task,
                "rewrites": self.rewrites, "rollbacks": self.rollbacks,
                "n_train": self.n_train}


NO_CHANGE = "none"  # a Decision of this transform: leave the model as it is (with a reason)


@dataclass(frozen=True)
class Decision:
    transform: str  # registry name, see aicf_induct.runtime.transforms
    site: str
    options: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    source: str = ""  # which policy (or proposer) decided
    evidence: dict[str, Any] = field(default_factory=dict)  # what a proposer based it on


class Policy(Protocol):
    name: str

    def decide(self, obs: PolicyObservation) -> Decision | None: ...


@dataclass(frozen=True)
class RuleConfig:
    max_width: int = 256  # widen no hidden layer beyond this
    max_depth: int = 4  # deepen up to this many hidden linear layers
    widen_factor: float = 2.0
    widen_noise: float = 1.0  # symmetry-breaking noise of new units (relative; without it
    # Adam keeps copies tied and widening adds no capacity; the function changes by O(noise²))
    widen_init: str = "split"  # split (Net2Net) | fresh (new random units, zero outgoing)
    min_gain: float = 0.02  # grow again only if the last growth lowered the best val loss
    # by this fraction
    gap_tolerance: float = 0.10  # (val - train) / train above this, and the val loss
    val_rise: float = 0.02  # this much above its best: overfitting
    dropout_step: float = 0.1  # raise dropout by this much when regularising
    max_dropout: float = 0.5
    grow_on_warmup: bool = True  # grow at the end of warm-up when not overfitting
    stabilise_after: int = 2  # rollbacks before instability makes it insert a norm


GROWTH = ("widen", "deepen", "residual")


def _decision(name: str, site: str, options: dict[str, Any], reason: str) -> Decision:
    return Decision(name, site, options, reason, "rules")


class RuleBasedPolicy:
    name = "rules"

    def __init__(self, config: RuleConfig | None = None) -> None:
        self.config = config or RuleConfig()

    def decide(self, obs: PolicyObservation) -> Decision | None:
        if obs.fired.kind == "instability":
            return self._stabilise(obs)
        gap = obs.metrics.get("gap", math.nan)
        val = obs.metrics.get("val_loss", math.nan)
        best = obs.metrics.get("best_val_loss", math.inf)
        rising = val > best * (1 + self.config.val_rise)
        if math.isfinite(gap) and gap > self.config.gap_tolerance:
            return self._regularise(obs, gap) if rising else None
        if obs.fired.trigger != "warmup" or self.config.grow_on_warmup:
            return self._grow(obs, gap)
        return None

    def _sites(self, obs: PolicyObservation, name: str, **options: Any) -> list[str]:
        if name in obs.blocked:
            return []
        return make_transform(name, **options).sites(obs.graph)

    def _grow(self, obs: PolicyObservation, gap: float) -> Decision | None:
        c, g = self.config, obs.graph
        best = obs.metrics.get("best_val_loss", math.inf)
        refs = [obs.metrics.get(f"best_val_at.{t}", math.inf) for t in GROWTH]
        if best > min(refs) * (1 - c.min_gain):
            return None  # the last growth has not paid off: more of it would not either
        why = f"underfitting: {obs.fired.trigger}, gap {gap:.3f} <= {c.gap_tolerance}"
        opts = {"factor": c.widen_factor, "noise": c.widen_noise, "max_width": c.max_width,
                "init": c.widen_init}
        sites = self._sites(obs, "widen", **opts)
        if sites:
            site = min(sites, key=lambda s: int(g.node(s).attrs["out_features"]))
            width = int(g.node(site).attrs["out_features"])
            return _decision("widen", site, opts, f"{why}; widen the narrowest layer ({width})")
        sites = self._sites(obs, "deepen")
        # the ceiling holds once the block is in (a residual one adds two linears)
        if sites and Deepen().depth_after(g, sites[-1]) <= c.max_depth:
            return _decision("deepen", sites[-1], {}, f"{why}; widths at most {c.max_width}: "
                                                     "deepen")
        if sites := self._sites(obs, "residual"):
            return _decision("residual", sites[-1], {}, f"{why}; add a residual branch")
        return None

    def _regularise(self, obs: PolicyObservation, gap: float) -> Decision | None:
        c, g = self.config, obs.graph
        why = f"overfitting: gap {gap:.3f} > {c.gap_tolerance}, validation loss rising"
        if "dropout" in obs.blocked:
            return None
        drops = [n for n in g.nodes if n.op == "dropout"]
        if drops:
            n = drops[-1]
            p = float(OPS["dropout"].full_attrs(n.attrs)["p"])
            new_p = round(min(p + c.dropout_step, c.max_dropout), 6)
            if new_p > p:
                return _decision("dropout", n.id, {"p": new_p}, f"{why}; dropout {p} -> {new_p}")
            return None
        sites = self._sites(obs, "dropout", p=c.dropout_step)
        if sites:
            return _decision("dropout", sites[-1], {"p": c.dropout_step},
                             f"{why}; insert dropout {c.dropout_step}")
        return None

    def _stabilise(self, obs: PolicyObservation) -> Decision | None:
        if obs.rollbacks < self.config.stabilise_after:
            return None  # the rollback and learning-rate back-off may be enough
        sites = self._sites(obs, "normalize", kind="layernorm")
        if sites:
            return _decision("normalize", sites[0], {"kind": "layernorm"},
                             f"unstable ({obs.fired.trigger}): normalise the first layer")
        return None


def target_width(n_train: int, rows_per_unit: float = 8.0, lo: int = 64,
                 hi: int = 256) -> int:
    """A warehouse-free guess of a sufficient hidden width from the training split's size:
    the power of two nearest n_train / rows_per_unit, clipped to [lo, hi]."""
    if n_train <= 0:
        return hi
    w = 2 ** round(math.log2(max(n_train / rows_per_unit, 1.0)))
    return int(min(hi, max(lo, w)))


@dataclass(frozen=True)
class TargetConfig:
    width: int = 0  # target width of every hidden layer; 0: target_width(n_train)
    lo: int = 64  # bounds of the heuristic's width
    hi: int = 256
    rows_per_unit: float = 8.0
    init: str = "fresh"  # widen init: fresh units (zero outgoing) keep the function exactly
    # and are as diverse as a new layer; Net2Net split copies generalised worse (measured)
    noise: float = 1.0  # split only
    grow_after: bool = False  # after the jump, may the rules grow further?
    regularise: bool = False  # after the jump, may the rules add dropout? (each kept
    # rewrite restarts early stopping's patience: a run that keeps adding dropout trains on
    # for hundreds of steps; measured on iris and OJ)
    rules: RuleConfig = field(default_factory=RuleConfig)  # stabilising (and the above)


class TargetSizePolicy:
    """Grow once, early, straight to the target width; then only stabilise."""

    name = "jump"

    def __init__(self, config: TargetConfig | None = None) -> None:
        self.config = config or TargetConfig()
        self.rules = RuleBasedPolicy(self.config.rules)

    def target(self, obs: PolicyObservation) -> int:
        c = self.config
        return c.width or target_width(obs.n_train, c.rows_per_unit, c.lo, c.hi)

    def decide(self, obs: PolicyObservation) -> Decision | None:
        c, g = self.config, obs.graph
        if obs.fired.kind != "instability" and "widen" not in obs.blocked:
            target = self.target(obs)
            narrow = [s for s in hidden_linears(g)
                      if int(g.node(s).attrs["out_features"]) < target]
            if narrow:
                site = min(narrow, key=lambda s: int(g.node(s).attrs["out_features"]))
                width = int(g.node(site).attrs["out_features"])
                opts = {"units": target - width, "init": c.init, "max_width": target,
                        **({"noise": c.noise} if c.init == "split" else {})}
                src = f"n_train {obs.n_train}" if not c.width else "configured"
                return Decision("widen", site, opts,
                                f"{obs.fired.trigger}: widen {width} -> target {target} "
                                f"({src}) in one step", "jump")
        if obs.fired.kind != "instability" and not (c.grow_after or c.regularise):
            return None
        d = self.rules.decide(obs)
        if d is not None and ((d.transform in GROWTH and not c.grow_after)
                              or (d.transform == "dropout" and not c.regularise)):
            return None
        return d if d is None else dataclasses.replace(d, source="jump")


class StackPolicy:
    """The jump, then at each plateau one identity-initialised ReLU layer on top, up to
    `depth` hidden layers. `width`: the jump's target (0: `target_width(n_train)`);
    `deepen_state`: the new layer's optimizer state ("fresh" or "borrow", see
    transforms/deepen.py)."""

    name = "stack"

    def __init__(self, depth: int = 3, width: int = 0, deepen_state: str = "fresh") -> None:
        if depth < 1:
            raise RewriteError(f"stack depth must be >= 1, got {depth}")
        if deepen_state not in Deepen.STATES:  # else the first plateau's deepen fails on it
            raise RewriteError(f"stack deepen_state must be one of "
                               f"{', '.join(Deepen.STATES)}, got {deepen_state!r}")
        self.depth, self.jump = depth, TargetSizePolicy(TargetConfig(width=width))
        self.options = {} if deepen_state == "fresh" else {"state": deepen_state}

    def decide(self, obs: PolicyObservation) -> Decision | None:
        d = self.jump.decide(obs)
        layers = len(hidden_linears(obs.graph))
        if d is not None or obs.fired.trigger != "plateau" or "deepen" in obs.blocked \
                or layers >= self.depth:
            return d
        sites = make_transform("deepen", **self.options).sites(obs.graph)
        if not sites:
            return None
        return Decision("deepen", sites[-1], dict(self.options),
                        f"plateau: stack a layer on top ({layers + 1} of {self.depth})",
                        "stack")


@dataclass(frozen=True)
class Proposal:
    """A rewrite suggested from elsewhere; `site` None means the first applicable one."""

    transform: str
    site: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    score: float = 0.0  # higher is better
    source: str = ""  # e.g. "induction:ranker" or "api"
    evidence: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Proposal:
        return cls(str(d["transform"]), d.get("site"), dict(d.get("options") or {}),
                   float(d.get("score", 0.0)), str(d.get("source", "")),
                   dict(d.get("evidence") or {}))


Proposer = Callable[[PolicyObservation], Iterable[Proposal | Mapping[str, Any]]]


class ProposalPolicy:
    name = "proposals"

    def __init__(self, proposer: Proposer, fallback: Policy | None = None,
                 min_score: float = -math.inf) -> None:
        self.proposer = proposer
        self.fallback = fallback  # asked when no proposal applies
        self.min_score = min_score  # proposals scoring below this are ignored

    def decide(self, obs: PolicyObservation) -> Decision | None:
        raw = [p if isinstance(p, Proposal) else Proposal.from_dict(p)
               for p in self.proposer(obs)]
        for p in sorted(raw, key=lambda p: -p.score):
            if p.score < self.min_score or p.transform in obs.blocked:
                continue
            try:
                t = make_transform(p.transform, **p.options)
            except RewriteError:
                continue
            site = p.site if p.site is not None else next(iter(t.sites(obs.graph)), None)
            if site is None or t.applicable(obs.graph, site) is not None:
                continue
            return Decision(p.transform, site, dict(p.options),
                            f"proposal (score {p.score:.3g}) from {p.source or 'proposer'}",
                            p.source or "proposer", dict(p.evidence))
        return self.fallback.decide(obs) if self.fallback is not None else None


EXPLORE_ARMS = ("none", "widen", "deepen", "residual", "normalize", "activation", "dropout")
EXPLORE_OPTIONS: dict[str, dict[str, Any]] = {
    "widen": {"factor": 2.0, "noise": 1.0, "max_width": 256},
    "normalize": {"kind": "layernorm"}, "activation": {"to": "gelu"}, "dropout": {"p": 0.1}}


class ExplorePolicy:
    """A randomised experiment: at each non-instability trigger, one arm drawn uniformly
    from `arms` ("none" = no change, the control), at its first applicable site. Runs of it
    give the rewrite history an unbiased effect per transform (the rule policy picks the
    same transform in the same state, so its history cannot tell transforms apart). The
    draw depends on (seed, step, rewrites, rollbacks) only, so the policy holds no state."""

    name = "explore"

    def __init__(self, seed: int = 0, arms: tuple[str, ...] = EXPLORE_ARMS,
                 stabilise: Policy | None = None) -> None:
        self.seed, self.arms = seed, arms
        self.stabilise = stabilise or RuleBasedPolicy()  # instability: as the rules do

    def decide(self, obs: PolicyObservation) -> Decision | None:
        if obs.fired.kind == "instability":
            return self.stabilise.decide(obs)
        rng = np.random.default_rng([self.seed, obs.step, obs.rewrites, obs.rollbacks])
        arm = self.arms[int(rng.integers(len(self.arms)))]
        if arm == "none" or arm in obs.blocked:
            return None
        opts = dict(EXPLORE_OPTIONS.get(arm, {}))
        sites = make_transform(arm, **opts).sites(obs.graph)
        if not sites:
            return None
        site = sites[-1] if arm in ("deepen", "residual", "dropout") else sites[0]
        return Decision(arm, site, opts, f"exploration: arm '{arm}' drawn at random",
                        "explore")


POLICIES = ("rules", "jump", "stack", "explore")


def make_policy(name: str, settings: Mapping[str, Any] | None = None) -> Policy:
    """A built-in policy by name (the CLI's --policy), with its defaults or with `settings`
    as `policy_settings` gave them (a checkpoint's, on resume)."""
    s = dict(settings or {})
    if name == "rules":
        return RuleBasedPolicy(RuleConfig(**s))
    if name == "jump":
        return TargetSizePolicy(TargetConfig(**{**s, "rules": RuleConfig(**s.get("rules", {}))}))
    if name == "stack":
        return StackPolicy(**s)
    if name == "explore":
        stabilise = s.pop("stabilise", None)
        return ExplorePolicy(**{**s, "arms": tuple(s.get("arms", EXPLORE_ARMS))},
                             stabilise=make_policy("rules", stabilise) if stabilise else None)
    raise RewriteError(f"unknown policy '{name}' (known: {', '.join(POLICIES)})")


def policy_settings(policy: Policy) -> dict[str, Any] | None:
    """A built-in policy's options, JSON-able, for `make_policy` to rebuild it from (what a
    checkpoint keeps); None for any other policy, unless it says itself (a `settings()`
    method: the learned policy of the layer above, which rebuilds it from them)."""
    own = getattr(policy, "settings", None)
    if callable(own):
        out = own()
        return dict(out) if out is not None else None
    if isinstance(policy, RuleBasedPolicy | TargetSizePolicy):
        return dataclasses.asdict(policy.config)
    if isinstance(policy, StackPolicy):
        return {"depth": policy.depth, "width": policy.jump.config.width,
                "deepen_state": policy.options.get("state", "fresh")}
    if isinstance(policy, ExplorePolicy) and isinstance(policy.stabilise, RuleBasedPolicy):
        return {"seed": policy.seed, "arms": list(policy.arms),
                "stabilise": dataclasses.asdict(policy.stabilise.config)}
    return None
