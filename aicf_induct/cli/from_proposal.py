"""`aicf-induct adapt --from-proposal`: the run starts from the top structure proposal and its
policy is the learned rewrite proposer, the --policy one as fallback.

Without --service: the embedded proposer (the knowledge pack, --pack or the shipped one, for
the structure; the pack's rewrite table pooled with the local warehouse's rewrite history for
the rewrites). With --service URL: `POST URL/v1/proposals` and `POST URL/v1/rewrites`, and the
run logs through the service (unless --log-to or --no-log say otherwise), spilling the whole
run to the local warehouse if the service did not take all of it. A service that cannot give
the proposal at the start: the embedded proposer gives it (said once); one that fails
mid-run: the fallback policy decides from then on (said once).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from typing import Any

from aicf_induct.cli.train import API_KEY_ENV
from aicf_induct.errors import ConfigError
from aicf_induct.induction.mainjob import (
    LearnedRewritePolicy,
    ProposerUnavailable,
    StartPoint,
    local_rewrites,
    post_json,
    service_rewrites,
    start_point,
)
from aicf_induct.problems.problem import Problem
from aicf_induct.records import Recorder
from aicf_induct.runtime.policies import Policy
from aicf_induct.runtime.trainer import TrainConfig

TOP = 3  # candidates asked for (the run starts from the first)


def add_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("starting from a proposal")
    g.add_argument("--from-proposal", action="store_true",
                   help="start from the top proposed structure and recipe; at triggers the "
                        "learned rewrite proposer decides, --policy as fallback")
    g.add_argument("--pack", metavar="PACK", default=None,
                   help="knowledge pack of the embedded proposer (default: the shipped one; "
                        "with --service, used only if the service cannot propose)")
    g.add_argument("--service", metavar="URL", default=None,
                   help="ask the service at URL for the proposal and the rewrites, and log "
                        "through it (--api-key or $" + API_KEY_ENV + ")")


@dataclass
class Plan:
    start: StartPoint
    config: TrainConfig
    policy: Policy
    features: dict[str, float]
    proposal: dict[str, Any]  # the full proposal answer
    source: str


def check(args: argparse.Namespace) -> None:
    if not args.from_proposal:
        if args.service or args.pack:
            raise ConfigError("--service and --pack go with --from-proposal")
        return
    if args.resume:
        raise ConfigError("--from-proposal starts a new run: drop --resume")
    if args.model is not None:
        raise ConfigError("--from-proposal takes the structure from the proposal: drop --model")


def plan(args: argparse.Namespace, problem: Problem, config: TrainConfig,
         fallback: Policy) -> Plan:
    from aicf_induct.problems import extract_features

    features = dict(extract_features(problem))
    proposal, source = _proposal(args, problem, features)
    start = start_point(proposal, problem, source)
    r = start.recipe
    config = dataclasses.replace(config, optimizer=r["optimizer"], lr=float(r["lr"]),
                                 weight_decay=float(r["weight_decay"]),
                                 batch_size=int(r["batch_size"]))
    if args.service:
        ask = service_rewrites(args.service, _key(args), features=features)
        who = f"service {args.service}"
    else:
        import warehouse
        from aicf_induct.induction.rewrite_effects import learned_effects

        root = args.warehouse if args.warehouse is not None else warehouse.default_root()
        effects, _ = learned_effects(args.pack, None if args.no_log else root)
        ask = local_rewrites(effects, features.get("simple.n_rows", float(problem.n_rows)))
        who = "induction (in-process)"
    policy = LearnedRewritePolicy(ask, fallback, source=who)
    return Plan(start, config, policy, features, proposal, source)


def _key(args: argparse.Namespace) -> str | None:
    import os

    return args.api_key or os.environ.get(API_KEY_ENV)


def _proposal(args: argparse.Namespace, problem: Problem,
              features: dict[str, float]) -> tuple[dict[str, Any], str]:
    from aicf_induct.induction.proposals import propose_problem

    if args.service:
        try:
            answer = post_json(args.service, "/v1/proposals",
                               {"dataset": args.dataset, "top": TOP}, _key(args), 30.0)
            if answer.get("candidates"):
                return answer, f"service {args.service}"
            why = "an answer without candidates"
        except ProposerUnavailable as err:
            why = str(err)
        print(f"note: no proposal from the service ({why}); using the embedded proposer",
              file=sys.stderr, flush=True)
    from aicf_induct.induction.pack import load_pack

    pack = load_pack(args.pack)
    return propose_problem(problem, features, pack, TOP), f"pack {pack.path}"


def service_recorder(args: argparse.Namespace) -> tuple[Recorder, str] | None:
    """With --service and neither --log-to nor --no-log: the service's recorder, spilling to
    the local warehouse; else None (the usual options decide)."""
    if not (args.from_proposal and args.service) or args.log_to or args.no_log:
        return None
    import warehouse
    from aicf_induct.runtime.remote_recorder import RemoteLogError, RemoteRecorder
    from aicf_induct.runtime.spill import SpillRecorder

    key = _key(args)
    if not key:
        raise ConfigError(f"--service logs through the service and needs a write key: "
                          f"--api-key KEY or ${API_KEY_ENV} (or --no-log)")
    try:
        remote = RemoteRecorder(args.service, key)
    except RemoteLogError as err:
        raise ConfigError(str(err)) from None
    root = args.warehouse if args.warehouse is not None else warehouse.default_root()

    def local() -> tuple[Recorder, str]:
        return warehouse.open_recorder(root), str(root)

    return SpillRecorder(remote, local), args.service
