"""`POST /v1/rewrites`: ranked rewrites for a live run, from the learned rewrite proposer
(the knowledge pack's rewrite table pooled with the served warehouse's rewrite history).

A problem given by name is featurised as `/v1/proposals` featurises its `dataset`: only a
name the service loads (`known_problem`), holding a proposal slot, once for the requests
naming it meanwhile (those wait holding none), and kept per name."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request

from aicf_induct.errors import AicfError
from aicf_induct.induction.learned_effects import learned_effects
from aicf_induct.induction.rewrite_effects import RewriteEffects, RewriteQuery
from aicf_induct.ir.canonical import from_dict
from aicf_induct.ir.graph import Graph
from api.deps import ReadAccess, SettingsDep
from api.errors import ApiProblem
from api.proposing import Proposals
from api.routes.bodies import JsonBodyRoute
from api.routes.proposals import ProposalsDep, as_problem
from api.schemas.rewrites import RewriteAnswerPublic, RewriteRequest
from warehouse.catalog import one_line

router = APIRouter(tags=["rewrites"], route_class=JsonBodyRoute)
KIND = {"warmup": "schedule", "epoch_end": "schedule", "plateau": "plateau",
        "nan": "instability", "spike": "instability", "grad_explosion": "instability"}
REFRESH_S = 30.0  # the warehouse's history is re-read at most this often
_lock = threading.Lock()


def _effects(request: Request, settings: Any) -> tuple[RewriteEffects, dict[str, Any]]:
    """The proposer, cached on the app for REFRESH_S (the history grows as runs log)."""
    state = request.app.state
    with _lock:
        cached = getattr(state, "rewrite_effects", None)
        if cached is None or time.monotonic() - cached[0] > REFRESH_S:
            pack = getattr(settings, "pack", None)  # a pack setting, when the service has one
            try:
                cached = (time.monotonic(), *learned_effects(pack, settings.warehouse))
            except AicfError as err:  # the server's pack, not the request, is at fault
                raise ApiProblem(503, "pack-unavailable", one_line(err)) from None
            state.rewrite_effects = cached
    return cached[1], cached[2]


def _graph(ir: dict[str, Any]) -> Graph:
    try:
        return from_dict(ir)
    except Exception as err:  # any malformed document is the client's: 422, never 500
        raise ApiProblem(422, "invalid-input", f"ir: {one_line(err)}", field="body.ir") from None


def _problem(body: RewriteRequest, props: Proposals) -> tuple[str, float]:
    """(task, rows) of the problem, from the features or by featurising the named one."""
    if body.features is not None and body.problem is not None:
        raise ApiProblem(422, "invalid-input", "give features or problem, not both",
                         field="body.problem")
    if body.problem is not None:
        return _named(body.problem, props)
    feats = body.features or {}
    as_problem(lambda: props.check_features(feats))  # as /v1/proposals checks its features
    return body.task or "", float(feats.get("simple.n_rows", math.nan))


def _named(name: str, props: Proposals) -> tuple[str, float]:
    """(task, rows) of a known problem: kept from before, else featurised in a slot (or
    awaited, holding none, while another request featurises it)."""
    info, feats = as_problem(lambda: props.describe(name, "body.problem"))
    rows = feats["simple.n_rows"] if "simple.n_rows" in feats else info["rows"]
    return str(info["task"]), float(rows)


def _gap(body: RewriteRequest) -> float:
    d = body.dynamics
    train = d.train_loss if d.train_loss is not None else (
        sum(d.loss[-50:]) / len(d.loss[-50:]) if d.loss else math.nan)
    val = d.val_loss[-1] if d.val_loss else math.nan
    return (val - train) / train if train > 0 and math.isfinite(val) else math.nan


@router.post("/rewrites")
def propose_rewrites(_: ReadAccess, settings: SettingsDep, request: Request,
                     props: ProposalsDep, body: RewriteRequest) -> RewriteAnswerPublic:
    """Ranked rewrites (transform, site, options) for a live run, each with its expected
    effect, interval and evidence; `decision` "none" when none is positive with confidence."""
    graph = _graph(body.ir)
    task, rows = _problem(body, props)
    effects, source = _effects(request, settings)
    query = RewriteQuery(graph, KIND[body.trigger], _gap(body), task, rows,
                         frozenset(body.blocked))
    answer = effects.propose(query, top_k=body.top).as_dict()
    # the pack and warehouse by their names only: no server path reaches a client
    return RewriteAnswerPublic(**answer, source={**source, "pack": _name(source["pack"]),
                                                 "warehouse": _name(source["warehouse"])})


def _name(path: str | None) -> str | None:
    return Path(path).name if path else None
