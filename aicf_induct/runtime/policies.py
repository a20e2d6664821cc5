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
- `ProposalPolicy`: asks a proposer — any callable from an observation to ranked
  `Proposal`s (the induction layer's ranker and the service's rewrite endpoint plug in
  here) — and takes the best one that applies and is not blacklisted, else defers to a
  fallback policy.

Policies hold no state of their own: a decision depends on the observation alone, so
rollbacks and resumed runs need nothing from them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from aicf_induct.ir.canonical import to_dict
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.ops import OPS
from aicf_induct.runtime.transforms import RewriteError, make_transform
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

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form, for proposers behind a service."""
        return {"trigger": self.fired.trigger, "trigger_kind": self.fired.kind,
                "detail": self.fired.detail, "step": self.step, "ir": to_dict(self.graph),
                "metrics": self.metrics, "blocked": sorted(self.blocked), "task": self.task,
                "rewrites": self.rewrites, "rollbacks": self.rollbacks}


@dataclass(frozen=True)
class Decision:
    transform: str  # registry name, see aicf_induct.runtime.transforms
    site: str
    options: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    source: str = ""  # which policy (or proposer) decided


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
        if len(hidden_linears(g)) < c.max_depth and (sites := self._sites(obs, "deepen")):
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
                            p.source or "proposer")
        return self.fallback.decide(obs) if self.fallback is not None else None


POLICIES = ("rules",)


def make_policy(name: str) -> Policy:
    """A built-in policy by name (the CLI's --policy)."""
    if name == "rules":
        return RuleBasedPolicy()
    raise RewriteError(f"unknown policy '{name}' (known: {', '.join(POLICIES)})")
