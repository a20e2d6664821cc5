from __future__ import annotations

from typing import Annotated

import duckdb
from fastapi import APIRouter, Path, Query

from api.deps import ReadAccess, WarehouseDep
from api.errors import ApiProblem
from api.schemas.common import next_offset
from api.schemas.runs import (
    RunDetail,
    RunPage,
    RunPublic,
    RunsQuery,
    StepPage,
    StepPublic,
    StepsQuery,
)
from warehouse import browse

router = APIRouter(tags=["runs"])

RunId = Annotated[str, Path(min_length=1, max_length=200)]


@router.get("/runs")
def list_runs(_: ReadAccess, wh: WarehouseDep, q: Annotated[RunsQuery, Query()]) -> RunPage:
    """Runs, newest first; filter by problem (name or id), origin and status."""
    items, total = wh.read(lambda c: browse.list_runs(
        c, problem=q.problem, origin=q.origin, status=q.status, limit=q.limit,
        offset=q.offset))
    return RunPage(items=[RunPublic(**r) for r in items], total=total, limit=q.limit,
                   offset=q.offset, next_offset=next_offset(q.offset, q.limit, total))


def _no_run(run_id: str) -> ApiProblem:
    return ApiProblem(404, "not-found", f"no run '{run_id}'", field="path.run_id")


@router.get("/runs/{run_id}")
def get_run(_: ReadAccess, wh: WarehouseDep, run_id: RunId) -> RunDetail:
    """One run: its row, config, library versions, step counts (logged, on its path), branches."""
    run = wh.read(lambda c: browse.get_run(c, run_id))
    if run is None:
        raise _no_run(run_id)
    return RunDetail(**run)


@router.get("/runs/{run_id}/steps")
def run_steps(_: ReadAccess, wh: WarehouseDep, run_id: RunId,
              q: Annotated[StepsQuery, Query()]) -> StepPage:
    """A run's per-step dynamics in step order, a page at a time."""
    limit, offset = q.limit, q.offset
    def read(c: duckdb.DuckDBPyConnection) -> tuple[list[dict], int] | None:
        # the page counts them
        if browse.get_run(c, run_id, count_steps=False, children=False) is None:
            return None
        return browse.run_steps(c, run_id, limit=limit, offset=offset)

    page = wh.read(read)
    if page is None:
        raise _no_run(run_id)
    items, total = page
    return StepPage(run_id=run_id, items=[StepPublic(**s) for s in items], total=total,
                    limit=limit, offset=offset, next_offset=next_offset(offset, limit, total))
