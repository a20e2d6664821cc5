"""The main job's pieces: start a run from a structure proposal, and propose rewrites at its
triggers with the learned rewrite proposer (in-process or the service's), the rule policy as
fallback.

- `start_point(proposal, problem, source, index)`: a candidate (the top one by default) of a
  proposal dict (what `propose --json` prints and `POST /v1/proposals` answers) as the graph
  to train and its recipe, and the short record of it that every decision event names.
- `LearnedRewritePolicy(ask, fallback)`: at a trigger asks `ask(query)` for a rewrite answer
  dict (`RewriteAnswer.as_dict()`: what `POST /v1/rewrites` answers); takes the first proposed
  rewrite that applies (a deepen only up to the rules' depth ceiling), or honours a "no
  change" backed by history (some transform measured); defers to the fallback when the
  proposer has no such history, or cannot be asked. A proposer that fails (a service
  that is down or answers garbage) is said once on stderr and not asked again: the run goes
  on with the fallback policy.
- `local_rewrites(effects, n_rows)` and `service_rewrites(url, key, features=, problem=)`:
  the two `ask`s.
- `main_job(problem, config, pack=, warehouse=)`: all of it at once, as `adapt
  --from-proposal` puts it together (the command calls it): a `MainJob` whose
  `adaptive_run(adapt, recorder=...)` is the run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from aicf_induct.errors import ConfigError
from aicf_induct.ir.canonical import to_dict
from aicf_induct.ir.graph import Graph
from aicf_induct.problems.problem import Problem
from aicf_induct.runtime.policies import (
    NO_CHANGE,
    Decision,
    Policy,
    PolicyObservation,
    RuleBasedPolicy,
    RuleConfig,
    make_policy,
    policy_settings,
)
from aicf_induct.runtime.trainer import TrainConfig
from aicf_induct.runtime.transforms import RewriteError, make_transform
from aicf_induct.runtime.transforms.deepen import Deepen
from aicf_induct.runtime.triggers import Fired

if TYPE_CHECKING:
    from aicf_induct.induction.pack import Pack
    from aicf_induct.induction.rewrite_effects import RewriteEffects, RewriteQuery
    from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun

Ask = Callable[[PolicyObservation], Mapping[str, Any]]
TOP = 3  # candidates a proposal asks for (a main job starts from the first; `train
# --from-proposal` trains them all)


class ProposerUnavailable(Exception):
    """The rewrite proposer could not answer (unreachable, an error, an unreadable answer)."""


@dataclass(frozen=True)
class StartPoint:
    """A proposed candidate built for a problem: what a run starts from."""

    graph: Graph
    recipe: dict[str, Any]  # optimizer, lr, weight_decay, batch_size
    model: str  # model spec
    record: dict[str, Any]  # what decisions name: source, rank, candidate, expected, pack

    def configure(self, base: TrainConfig) -> TrainConfig:
        """`base` with this candidate's recipe in place of its own."""
        r = self.recipe
        return dataclasses.replace(base, optimizer=r["optimizer"], lr=float(r["lr"]),
                                   weight_decay=float(r["weight_decay"]),
                                   batch_size=int(r["batch_size"]))


def start_point(proposal: Mapping[str, Any], problem: Problem, source: str,
                index: int = 0) -> StartPoint:
    """A candidate of a proposal dict (the top one by default), built for the problem's
    sizes."""
    from aicf_induct.induction.space import candidate_of

    which = "top candidate" if index == 0 else f"candidate #{index + 1}"
    try:
        top = proposal["candidates"][index]
        cand = candidate_of(str(top["structure_key"]))
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise ConfigError(f"the proposal from {source} has no usable {which} "
                          f"({type(err).__name__}: {err})") from None
    pack = proposal.get("pack") or {}
    record = {"source": source, "rank": int(top.get("rank", index + 1)),
              "candidate": str(top.get("candidate", cand.key)),
              "structure_key": cand.structure_key,
              "expected_norm_error": top.get("expected_norm_error"),
              "interval": [top.get("low"), top.get("high")],
              "neighbors": [n.get("problem") for n in proposal.get("neighbors", [])][:3],
              "pack_digest": pack.get("digest")}
    r = cand.recipe
    return StartPoint(cand.graph(problem.n_features, problem.n_outputs),
                      {"optimizer": r.optimizer, "lr": r.lr, "weight_decay": r.weight_decay,
                       "batch_size": r.batch_size}, cand.spec.to_string(), record)


@dataclass(frozen=True)
class MainJob:
    """A run set up from a structure proposal (`main_job`): where it starts, its recipe and
    the learned rewrite policy that decides at its triggers."""

    problem: Problem
    start: StartPoint  # the proposal's top candidate, built for the problem
    config: TrainConfig  # the base config with the candidate's recipe
    policy: LearnedRewritePolicy  # decides at the run's triggers, its fallback where unsure
    proposal: dict[str, Any]  # the whole proposal answer
    source: str  # who gave it: "pack PATH", "service URL", or the caller's word
    features: dict[str, float]  # the problem's meta-features (seed 0's split)

    @property
    def extra_config(self) -> dict[str, Any]:
        """What the run's logged config adds: the model, the proposal that every decision
        event names, and the fallback policy."""
        return {"model": self.start.model, "proposal": self.start.record,
                "fallback_policy": self.policy.fallback.name}

    def adaptive_run(self, adapt: AdaptConfig | None = None, **options: Any) -> AdaptiveRun:
        """The run, not started: `AdaptiveRun(...)` of this job (`options`: its keywords,
        `recorder=`, `checkpoint_dir=`, `hooks=`, ...). `adapt` default: `AdaptConfig()`
        with the counterfactual guard, as `adapt --from-proposal` judges rewrites."""
        from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
        from aicf_induct.runtime.guard import GuardConfig

        extra = {**self.extra_config, **(options.pop("extra_config", None) or {})}
        return AdaptiveRun(self.problem, self.start.graph, self.config,
                           adapt or AdaptConfig(guard=GuardConfig(counterfactual=True)),
                           self.policy, extra_config=extra, **options)


def main_job(problem: Problem, config: TrainConfig | None = None, *,
             pack: Pack | str | Path | None = None, warehouse: str | Path | None = None,
             fallback: Policy | None = None, proposal: Mapping[str, Any] | None = None,
             source: str = "the caller", ask: Ask | None = None,
             ask_source: str = "the caller's proposer",
             features: Mapping[str, float] | None = None) -> MainJob:
    """The Python form of `adapt --from-proposal`: the problem's meta-features (seed 0's
    split, as `propose` computes them), the proposal of the knowledge pack (`pack`: loaded,
    a path, or None for the shipped one) or the one given (`proposal`, e.g. the service's,
    from `source`), its top candidate as the start and `config` (default `TrainConfig()`)
    with its recipe, and a `LearnedRewritePolicy` over the pack's rewrite table pooled with
    the rewrite history of `warehouse` (when given; one not made yet has none: the one a
    first `adapt --from-proposal` run logs into; a file, or a directory that holds no
    warehouse, is refused), or over `ask` (`service_rewrites`, named `ask_source`);
    `fallback` (default: the rule policy) decides where it has no history. `features`: the
    problem's, when already computed. A `problem` that is not a loaded `Problem`, or a
    `config` not a `TrainConfig`, is a TypeError saying what it takes."""
    from aicf_induct.induction.learned_effects import learned_effects
    from aicf_induct.induction.pack import Pack, load_pack
    from aicf_induct.induction.proposals import propose_problem
    from aicf_induct.runtime.runs import problem_meta_features

    # refused here, in words: they failed deep inside as "'str' object has no attribute
    # 'train'" and "replace() should be called on dataclass instances"
    if not isinstance(problem, Problem):
        how = f"load_problem({problem!r})" if isinstance(problem, str) else \
            "load_problem(name), or problem_from_frame(df, target=COL)"
        raise TypeError(f"main_job takes a loaded Problem ({how}), got "
                        f"{type(problem).__name__}")
    if config is not None and not isinstance(config, TrainConfig):
        raise TypeError(f"main_job's config must be a TrainConfig (e.g. TrainConfig(epochs=3)) "
                        f"or None, got {type(config).__name__}")
    if warehouse is not None and Path(warehouse).exists() and not Path(warehouse).is_dir():
        raise ConfigError(f"warehouse '{warehouse}' is not a directory")  # else read as none

    feats = dict(features) if features is not None else problem_meta_features(problem)
    if proposal is None:
        pack = pack if isinstance(pack, Pack) else load_pack(pack)  # loaded once for both
        proposal, source = propose_problem(problem, feats, pack, TOP), f"pack {pack.path}"
    start = start_point(proposal, problem, source)
    if ask is None:
        effects, _ = learned_effects(pack, warehouse)
        ask = local_rewrites(effects, feats.get("simple.n_rows", float(problem.n_rows)))
        ask_source = "induction (in-process)"
    policy = LearnedRewritePolicy(ask, fallback, source=ask_source)
    return MainJob(problem, start, start.configure(config or TrainConfig()), policy,
                   dict(proposal), source, feats)


def query_of(obs: PolicyObservation, n_rows: float) -> RewriteQuery:
    from aicf_induct.induction.rewrite_effects import RewriteQuery

    return RewriteQuery(obs.graph, obs.fired.kind, float(obs.metrics.get("gap", math.nan)),
                        obs.task, n_rows, obs.blocked)


class LocalRewrites:
    """The in-process proposer, an `Ask`: the estimator's answer for the observation. Its
    `settings()` (the estimator's table and options, the problem's rows; JSON) rebuild it
    as it was (`from_settings`): what a checkpoint keeps, so that a run resumes with the
    proposer it started with, whatever the pack and the warehouse hold by then."""

    def __init__(self, effects: RewriteEffects, n_rows: float) -> None:
        self.effects, self.n_rows = effects, n_rows

    def __call__(self, obs: PolicyObservation) -> Mapping[str, Any]:
        return self.effects.propose(query_of(obs, self.n_rows)).as_dict()

    def settings(self) -> dict[str, Any]:
        t = self.effects.table_
        rows = [[None if isinstance(v, float) and math.isnan(v) else v for v in row]
                for row in t.astype(object).itertuples(index=False, name=None)]
        return {"table": {"columns": list(t.columns), "dtypes": [str(d) for d in t.dtypes],
                          "rows": rows},
                "params": self.effects.get_params(),
                "n_rows": None if math.isnan(self.n_rows) else self.n_rows}

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> LocalRewrites:
        import pandas as pd

        from aicf_induct.induction.rewrite_effects import RewriteEffects

        t = settings["table"]
        table = pd.DataFrame(t["rows"], columns=t["columns"]).astype(
            dict(zip(t["columns"], t["dtypes"], strict=True)))
        n_rows = settings["n_rows"]
        return cls(RewriteEffects.from_table(table, **settings["params"]),
                   math.nan if n_rows is None else float(n_rows))


def local_rewrites(effects: RewriteEffects, n_rows: float) -> LocalRewrites:
    """The in-process proposer: the estimator's answer for the observation."""
    return LocalRewrites(effects, n_rows)


def rewrite_request(obs: PolicyObservation, features: Mapping[str, float] | None = None,
                    problem: str | None = None) -> dict[str, Any]:
    """The body of `POST /v1/rewrites` for an observation."""
    m = obs.metrics
    train = _finite([m.get("train_loss")])
    body: dict[str, Any] = {
        "ir": to_dict(obs.graph), "trigger": obs.fired.trigger, "task": obs.task or None,
        "dynamics": {"val_loss": _finite([m.get("val_loss")]),
                     "train_loss": train[0] if train else None},
        "blocked": sorted(obs.blocked)}
    if features is not None:
        body["features"] = {k: v for k, v in features.items() if math.isfinite(v)}
    elif problem is not None:
        body["problem"] = problem
    return body


def _finite(values: list[Any]) -> list[float]:
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out.append(f)
    return out


def service_rewrites(url: str, api_key: str | None, *,
                     features: Mapping[str, float] | None = None,
                     problem: str | None = None, timeout_s: float = 5.0) -> Ask:
    """The service's proposer: `POST {url}/v1/rewrites`; ProposerUnavailable on any failure."""
    def ask(obs: PolicyObservation) -> Mapping[str, Any]:
        body = rewrite_request(obs, features, problem)
        return post_json(url, "/v1/rewrites", body, api_key, timeout_s)
    return ask


def post_json(url: str, path: str, body: Mapping[str, Any], api_key: str | None,
              timeout_s: float) -> dict[str, Any]:
    """POST a JSON body; the JSON object answered, or ProposerUnavailable saying why not."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(url.rstrip("/") + path, data=json.dumps(body).encode(),
                                 method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            answer = json.loads(resp.read())
    except urllib.error.HTTPError as err:
        raise ProposerUnavailable(f"{url}{path} answered {err.code}") from None
    except (OSError, ValueError) as err:  # refused, reset, timed out, not JSON
        why = getattr(err, "reason", None) or err
        raise ProposerUnavailable(f"{url}{path}: {type(err).__name__}: {why}") from None
    if not isinstance(answer, dict):
        raise ProposerUnavailable(f"{url}{path} answered a JSON {type(answer).__name__}, "
                                  "not an object")
    return answer


class LearnedRewritePolicy:
    """See the module docstring."""

    name = "learned"

    def __init__(self, ask: Ask, fallback: Policy | None = None, source: str = "induction",
                 stream: TextIO | None = None, max_depth: int = RuleConfig().max_depth) -> None:
        self.ask, self.source = ask, source
        self.max_depth = max_depth  # hidden layers a learned deepen may grow the model to
        self.fallback = fallback or RuleBasedPolicy()
        self.stream = stream or sys.stderr
        self.down: str | None = None  # why the proposer is no longer asked
        self._settings: dict[str, Any] | None = None

    def settings(self) -> dict[str, Any] | None:
        """What rebuilds this policy on resume (`learned_policy`; `policy_settings` asks it,
        at every snapshot: made once); None when the proposer is a service, whose answers
        a resumed run could not have again."""
        if not isinstance(self.ask, LocalRewrites):
            return None
        if self._settings is None:
            self._settings = {"proposer": self.ask.settings(), "fallback": self.fallback.name,
                              "fallback_settings": policy_settings(self.fallback),
                              "source": self.source, "max_depth": self.max_depth}
        return self._settings

    def decide(self, obs: PolicyObservation) -> Decision | None:
        if self.down is None:
            try:
                d = self._learned(obs)
            except ProposerUnavailable as err:
                self._give_up(str(err))
            else:
                if d is not None:
                    return d
        return self._fallback(obs)

    def _learned(self, obs: PolicyObservation) -> Decision | None:
        answer = self.ask(obs)
        try:
            decision, history = str(answer["decision"]), int(answer["history"])
            rewrites, reason = answer["rewrites"], str(answer["reason"])
            condition = dict(answer.get("condition") or {})
            if not isinstance(rewrites, list) or not all(isinstance(r, dict)
                                                         for r in rewrites):
                raise TypeError("'rewrites' is not a list of objects")
            measured = _transforms_measured(answer)
        except (KeyError, TypeError, ValueError) as err:
            raise ProposerUnavailable(f"an unreadable rewrite answer ({type(err).__name__}: "
                                      f"{err})") from None
        for r in rewrites:
            d = self._applicable(r, obs, condition, history)
            if d is not None:
                return d
        # "no change" backed by the history: some transform was measured (a history of control
        # arms alone, runs that never rewrote, says nothing about what a rewrite does)
        if decision == "none" and history > 0 and measured:
            return Decision(NO_CHANGE, "", {}, reason, self.source,
                            {"condition": condition, "history": history})
        return None  # no history to go on (or nothing applies): the fallback decides

    def _applicable(self, r: Any, obs: PolicyObservation, condition: dict[str, Any],
                    history: int) -> Decision | None:
        try:
            name, site, options = str(r["transform"]), str(r["site"]), dict(r["options"])
            effect, low, high = float(r["expected_effect"]), float(r["low"]), float(r["high"])
            transform = make_transform(name, **options)
        except (KeyError, TypeError, ValueError, RewriteError):
            return None
        if name in obs.blocked or transform.applicable(obs.graph, site) is not None:
            return None
        if isinstance(transform, Deepen) and transform.depth_after(obs.graph, site) > \
                self.max_depth:
            return None  # the history has no notion of depth: the rules' ceiling holds
        evidence = {"expected_effect": effect, "interval": [low, high],
                    "condition": condition, "history": history,
                    **{k: v for k, v in (r.get("evidence") or {}).items() if k in (
                        "n", "effect", "control_effect", "baseline", "guard")}}
        return Decision(name, site, options, f"learned: uplift {effect:+.3f} "
                                             f"[{low:+.3f}, {high:+.3f}]", self.source, evidence)

    def _give_up(self, why: str) -> None:
        self.down = why
        print(f"note: the rewrite proposer failed ({why}); this run goes on with the "
              f"{self.fallback.name} policy", file=self.stream, flush=True)

    def _fallback(self, obs: PolicyObservation) -> Decision:
        why = "proposer unavailable" if self.down else "no learned proposal"
        d = self.fallback.decide(obs)
        if d is None:  # the fallback leaves the model alone: logged saying whose call it was
            d = Decision(NO_CHANGE, "", {},
                         f"no change: the {self.fallback.name} policy has nothing to do",
                         self.fallback.name, {})
        return Decision(d.transform, d.site, d.options, f"{d.reason} (fallback: {why})",
                        f"{d.source}:fallback", {**d.evidence, "fallback": why,
                                                 **({"proposer_error": self.down}
                                                    if self.down else {})})


def _transforms_measured(answer: Mapping[str, Any]) -> int:
    """Observations of transforms (not of the control arm) behind an answer: the sum over
    its considered rewrites' evidence (`n.transform`)."""
    considered = answer.get("considered") or []
    if not isinstance(considered, list):
        raise TypeError("'considered' is not a list")
    return sum(int(((c.get("evidence") or {}).get("n") or {}).get("transform", 0))
               for c in considered if isinstance(c, dict))


def plateau_observation(graph: Graph, metrics: Mapping[str, float], task: str) -> \
        PolicyObservation:
    """An observation at a plateau (for callers that ask outside a run, e.g. the demo)."""
    return PolicyObservation(Fired("plateau", "plateau", 0), 0, graph, dict(metrics),
                             task=task)


def learned_policy(settings: Mapping[str, Any], stream: TextIO | None = None
                   ) -> LearnedRewritePolicy:
    """The learned policy a checkpoint's `policy_settings` describe, as the run had it: its
    in-process proposer (the same table, options and rows), fallback and depth ceiling."""
    try:
        return LearnedRewritePolicy(
            LocalRewrites.from_settings(settings["proposer"]),
            make_policy(str(settings["fallback"]), settings["fallback_settings"]),
            source=str(settings["source"]), stream=stream, max_depth=int(settings["max_depth"]))
    except (KeyError, TypeError, ValueError, RewriteError) as err:
        raise ConfigError(f"the checkpoint's learned policy cannot be rebuilt from its "
                          f"settings ({type(err).__name__}: {err})") from None
