from __future__ import annotations

from typing import Annotated

import duckdb
from fastapi import APIRouter, Path, Query

from aicf_induct.records import RUN_STATUSES
from api.deps import ReadAccess, WarehouseDep
from api.errors import ApiProblem
from api.schemas.common import next_offset
from api.schemas.runs import RunDetail, RunPage, RunPublic, StepPage, StepPublic
from warehouse import browse

router = APIRouter(tags=["runs"])

Filter = Annotated[str | None, Query(max_length=200)]
Status = Annotated[str | None, Query(pattern=f"^({'|'.join(RUN_STATUSES)})$",
                                     description=f"one of {', '.join(RUN_STATUSES)}")]
Offset = Annotated[int, Query(ge=0, le=2**62, description="rows to skip")]
RunId = Annotated[str, Path(min_length=1, max_length=200)]


@router.get("/runs")
def list_runs(_: ReadAccess, wh: WarehouseDep, problem: Filter = None, origin: Filter = None,
              status: Status = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 50, offset: Offset = 0) -> RunPage:
    """Runs, newest first; filter by problem (name or id), origin and status."""
    items, total = wh.read(lambda c: browse.list_runs(
        c, problem=problem, origin=origin, status=status, limit=limit, offset=offset))
    return RunPage(items=[RunPublic(**r) for r in items], total=total, limit=limit,
                   offset=offset, next_offset=next_offset(offset, limit, total))


def _no_run(run_id: str) -> ApiProblem:
    return ApiProblem(404, "not-found", f"no run '{run_id}'", field="path.run_id")


@router.get("/runs/{run_id}")
def get_run(_: ReadAccess, wh: WarehouseDep, run_id: RunId) -> RunDetail:
    """One run: its row, config and library versions, and how many steps it logged."""
    run = wh.read(lambda c: browse.get_run(c, run_id))
    if run is None:
        raise _no_run(run_id)
    return RunDetail(**run)


@router.get("/runs/{run_id}/steps")
def run_steps(_: ReadAccess, wh: WarehouseDep, run_id: RunId,
              limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
              offset: Offset = 0) -> StepPage:
    """A run's per-step dynamics in step order, a page at a time."""
    def read(c: duckdb.DuckDBPyConnection) -> tuple[list[dict], int] | None:
        if browse.get_run(c, run_id) is None:
            return None
        return browse.run_steps(c, run_id, limit=limit, offset=offset)

    page = wh.read(read)
    if page is None:
        raise _no_run(run_id)
    items, total = page
    return StepPage(run_id=run_id, items=[StepPublic(**s) for s in items], total=total,
                    limit=limit, offset=offset, next_offset=next_offset(offset, limit, total))
