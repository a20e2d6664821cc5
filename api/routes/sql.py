from __future__ import annotations

from fastapi import APIRouter

from api.deps import ReadAccess, SettingsDep, WarehouseDep
from api.errors import ApiProblem
from api.routes.bodies import JsonBodyRoute
from api.schemas.common import Column
from api.schemas.sql import SqlQuery, SqlResult
from warehouse.sandbox import SandboxError
from warehouse.sandbox_pool import SandboxBusy

# a JSON body whatever its Content-Type (`curl -d` without -H): see JsonBodyRoute
router = APIRouter(tags=["sql"], route_class=JsonBodyRoute)

# seconds a query waits for a free slot before the answer is 429
SLOT_WAIT_S = 1.0
# what a client can do about a refusal, added to its detail
HINTS = {"time_limit": " and was stopped: narrow it (a WHERE on run_id or date, an aggregate, "
                       "a LIMIT) or have the server's AICF_SERVICE_SQL_TIME_LIMIT_S raised"}


@router.post("/sql")
def sql(_: ReadAccess, wh: WarehouseDep, settings: SettingsDep, query: SqlQuery) -> SqlResult:
    """Run one read-only SELECT over the warehouse views, in the sandbox (see docs)."""
    try:
        result = wh.sql.run(wh.root, query.sql, settings.sql_limits(), wait_s=SLOT_WAIT_S)
    except SandboxBusy:
        raise ApiProblem(429, "sql-busy", "too many SQL queries at once; retry shortly",
                         headers={"Retry-After": "1"}) from None
    except SandboxError as err:
        raise ApiProblem(422, f"sql-{err.reason.replace('_', '-')}",
                         str(err) + HINTS.get(err.reason, ""), field="body.sql") from None
    return SqlResult(columns=[Column(name=n, type=t) for n, t in result.columns],
                     rows=result.rows, row_count=len(result.rows),
                     elapsed_ms=round(result.elapsed_s * 1000, 3))
