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
import sys
from typing import Any

from aicf_induct.cli import options
from aicf_induct.cli.options import API_KEY_ENV
from aicf_induct.errors import ConfigError
from aicf_induct.induction.mainjob import TOP as TOP  # train's default --top
from aicf_induct.induction.mainjob import (
    MainJob,
    ProposerUnavailable,
    main_job,
    post_json,
    service_rewrites,
)
from aicf_induct.problems.problem import Problem
from aicf_induct.records import Recorder
from aicf_induct.runtime.policies import Policy
from aicf_induct.runtime.trainer import TrainConfig


def add_options(p: argparse.ArgumentParser, *, shortlist: bool = False) -> None:
    """--from-proposal, --pack, --service; with `shortlist` (train), --top and the help of a
    command that trains the top proposals and keeps the best by validation."""
    g = p.add_argument_group("from a proposal")
    if shortlist:
        g.add_argument("--from-proposal", action="store_true",
                       help="train the top proposed structures, each with its proposed "
                            "recipe (optimizer, lr, weight decay, batch size), one after "
                            "another on the same split, and keep the best by validation")
        g.add_argument("--top", type=options.int_at_least(1), default=None, metavar="K",
                       help=f"with --from-proposal: how many proposals to train (default "
                            f"{TOP}: in the corpus's leave-one-out the top {TOP} picked by "
                            f"validation did as well as a search of all 32 candidates; on "
                            f"problems the pack never saw, 5 came closer to it)")
    else:
        g.add_argument("--from-proposal", action="store_true",
                       help="start from the top proposed structure and recipe; at triggers "
                            "the learned rewrite proposer decides, --policy as fallback")
    g.add_argument("--pack", metavar="PACK", default=None,
                   help="knowledge pack of the embedded proposer (default: $AICF_PACK, else the "
                        "shipped one; "
                        "with --service, used only if the service cannot propose)")
    asks = "the proposal" if shortlist else "the proposal and the rewrites"
    g.add_argument("--service", metavar="URL", type=options.service_url, default=None,
                   help=f"ask the service at URL for {asks}, and log through it (--api-key "
                        f"or ${API_KEY_ENV})")


Plan = MainJob  # what --from-proposal runs: the library's main job, as Python builds it


def check(args: argparse.Namespace) -> None:
    """Refuse what does not go with --from-proposal (or needs it), before anything loads."""
    if not args.from_proposal:
        given = [o for o, v in (("--service", args.service), ("--pack", args.pack),
                                ("--top", getattr(args, "top", None))) if v is not None]
        if given:
            raise ConfigError(f"{' and '.join(given)}: only with --from-proposal")
        return
    for going_on in ("resume", "fork"):
        if getattr(args, going_on, None):
            raise ConfigError(f"--from-proposal starts a new run: drop --{going_on}")
    for option, value in (("--model", args.model), ("--ir", getattr(args, "ir", None)),
                          ("--values", getattr(args, "values", None))):
        if value is not None:
            raise ConfigError(f"--from-proposal takes the structure from the proposal: "
                              f"drop {option}")
    recipe = options.given_recipe(args)
    if recipe:
        raise ConfigError(f"--from-proposal takes the recipe (optimizer, learning rate, weight "
                          f"decay, batch size) from the proposal: drop {' and '.join(recipe)}")
    if logs_through_service(args) and not _key(args):  # before the service is asked anything
        raise ConfigError(NO_KEY)


NO_KEY = (f"--service logs through the service and needs a write key: --api-key KEY or "
          f"${API_KEY_ENV} (or --no-log)")


def logs_through_service(args: argparse.Namespace) -> bool:
    """--service, and neither --log-to nor --no-log: the run logs through the service."""
    return bool(args.from_proposal and args.service) and not (args.log_to or args.no_log)


def plan(args: argparse.Namespace, problem: Problem, config: TrainConfig,
         fallback: Policy) -> Plan:
    """`main_job` with the command's proposal (the service's with --service) and rewrite
    proposer (the service's, else the pack's pooled with the warehouse logged to)."""
    import warehouse

    features = proposal_features(problem)
    proposal, source = ask_proposal(args, problem, features, TOP)
    if args.service:
        return main_job(problem, config, pack=args.pack, fallback=fallback,
                        proposal=proposal, source=source, features=features,
                        ask=service_rewrites(args.service, _key(args), features=features),
                        ask_source=f"service {args.service}")
    root = None if args.no_log else warehouse.default_root(args.warehouse)
    return main_job(problem, config, pack=args.pack, warehouse=root, fallback=fallback,
                    proposal=proposal, source=source, features=features)


def _key(args: argparse.Namespace) -> str | None:
    import os

    return args.api_key or os.environ.get(API_KEY_ENV)


def proposal_features(problem: Problem) -> dict[str, float]:
    """The dataset's meta-features as `propose --dataset` computes them, on seed 0's split
    whatever the run's `--seed` (the landmarks of a small table move with the split, and
    `--from-proposal` must start from what `propose` lists): the features the run logs,
    computed once for both (`runs.problem_meta_features`)."""
    from aicf_induct.runtime.runs import problem_meta_features

    return problem_meta_features(problem)


def ask_proposal(args: argparse.Namespace, problem: Problem, features: dict[str, float],
                 top: int) -> tuple[dict[str, Any], str]:
    """The proposal of `top` candidates for the problem and who gave it: the service with
    --service (the embedded proposer if it cannot), else the embedded proposer."""
    from aicf_induct.induction.proposals import propose_problem

    if args.service:
        try:
            answer = post_json(args.service, "/v1/proposals",
                               {"dataset": args.dataset, "top": top}, _key(args), 30.0)
            if answer.get("candidates"):
                return answer, f"service {args.service}"
            why = "an answer without candidates"
        except ProposerUnavailable as err:
            why = str(err)
        print(f"note: no proposal from the service ({why}); using the embedded proposer",
              file=sys.stderr, flush=True)
    from aicf_induct.induction.pack import load_pack

    pack = load_pack(args.pack)
    return propose_problem(problem, features, pack, top), f"pack {pack.path}"


def service_recorder(args: argparse.Namespace) -> tuple[Recorder, str] | None:
    """With --service and neither --log-to nor --no-log: the service's recorder, spilling to
    the local warehouse; else None (the usual options decide)."""
    if not logs_through_service(args):
        return None
    import warehouse
    from aicf_induct.runtime.remote_recorder import RemoteLogError, RemoteRecorder
    from aicf_induct.runtime.spill import SpillRecorder, spill_root

    key = _key(args)
    if not key:
        raise ConfigError(NO_KEY)
    try:
        remote = RemoteRecorder(args.service, key)
    except RemoteLogError as err:
        raise ConfigError(str(err)) from None
    root = warehouse.default_root(args.warehouse)

    def local(run_id: str) -> tuple[Recorder, str]:
        where = spill_root(root, run_id)
        return warehouse.open_recorder(where), str(where)

    return SpillRecorder(remote, local), args.service
