"""`aicf-induct push`: complete the service's copy of runs from the local warehouse's (a run
logged through the service that it took in part, then written whole locally: see
`runtime/push.py`)."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from typing import Any

import warehouse
from aicf_induct.cli import options
from aicf_induct.cli.json_out import json_text
from aicf_induct.cli.options import API_KEY_ENV
from aicf_induct.errors import ConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "push", help="send the service what it lacks of runs in the local warehouse",
        description=textwrap.fill(
            "Complete the service's copy of each run from the local warehouse's: ask the "
            "service what it holds of the run (its read-only SQL), and send exactly the rows "
            "it lacks through its ingest routes, the run's start first when it has none of "
            "it, and the run's end last when it has no end of its own. Nothing on the service "
            "is deleted; pushing a run again sends nothing. For a run that `train` or `adapt "
            "--from-proposal --service` logged locally because the service did not take all "
            "of it.", 79, break_on_hyphens=False),
        epilog="example:\n  aicf-induct push 4f190c82c0c94f048face4fc3a57d3c0 "
               "--to http://HOST:8000 --api-key KEY",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_ids", metavar="RUN_ID", nargs="+",
                   help="runs of the local warehouse, by id or its first 6 or more characters")
    p.add_argument("--to", metavar="URL", type=options.service_url, required=True,
                   help="the service (`aicf-induct serve`) to complete the runs in")
    p.add_argument("--api-key", metavar="KEY", default=None,
                   help=f"write key of the service (default: ${API_KEY_ENV})")
    p.add_argument("--warehouse", metavar="DIR", type=options.warehouse_dir, default=None,
                   help=f"the local warehouse (default: ${warehouse.catalog.ENV_VAR}, else "
                        f"./{warehouse.catalog.DEFAULT_DIR})")
    p.add_argument("--json", action="store_true",
                   help="print what was sent per run as JSON")
    p.set_defaults(func=cmd_push)


def cmd_push(args: argparse.Namespace) -> int:
    from aicf_induct.progress import transient
    from aicf_induct.runtime.push import Service, check_runs, describe, plan_push, send

    key = args.api_key or os.environ.get(API_KEY_ENV)
    if not key:
        raise ConfigError(f"push needs a write key of the service: --api-key KEY or "
                          f"${API_KEY_ENV}")
    root = warehouse.default_root(args.warehouse)
    # every run, before the service is asked anything; by its whole id, each once (a run
    # may be named by the start of its id, as `runs` prints it)
    statuses = check_runs(root, list(args.run_ids))
    run_ids = list(statuses)
    service = Service(args.to, key)
    service.check()
    out: list[dict[str, Any]] = []
    for run_id in run_ids:
        plan = plan_push(root, run_id, statuses[run_id], service)
        with transient(total=plan.total, unit="row", desc=f"push {run_id[:12]}",
                       enabled=plan.total > 0) as bar:
            sent = send(plan, service, bar.update)
        for note in plan.notes:
            print(f"note: run {run_id}: {note}", file=sys.stderr)
        out.append({"run_id": run_id, "status": plan.status, "started": plan.started,
                    "sent": sent, "notes": plan.notes})
        if not args.json:
            what = (f"sent {describe(sent)}" if sent
                    else "already whole on the service, sent nothing")
            print(f"run {run_id} ({plan.status}): {what}", flush=True)
    if args.json:
        print(json_text({"to": args.to, "runs": out}, indent=2))
    return 0
