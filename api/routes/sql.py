from __future__ import annotations

from fastapi import APIRouter

from api.deps import ReadAccess, SettingsDep, WarehouseDep
from api.errors import ApiProblem
from api.schemas.common import Column
from api.schemas.sql import SqlQuery, SqlResult
from warehouse.sandbox import SandboxError, run_sql

router = APIRouter(tags=["sql"])

# seconds a query waits for a free slot before the answer is 429
SLOT_WAIT_S = 1.0
# what a client can do about a refusal, added to its detail
HINTS = {"time_limit": " and was stopped: narrow it (a WHERE on run_id or date, an aggregate, "
                       "a LIMIT) or have the server's AICF_SERVICE_SQL_TIME_LIMIT_S raised"}


@router.post("/sql")
def sql(_: ReadAccess, wh: WarehouseDep, settings: SettingsDep, query: SqlQuery) -> SqlResult:
    """Run one read-only SELECT over the warehouse views, in the sandbox (see docs)."""
    if not wh.sql_slots.acquire(timeout=SLOT_WAIT_S):
        raise ApiProblem(429, "sql-busy", "too many SQL queries at once; retry shortly",
                         headers={"Retry-After": "1"})
    try:
        result = run_sql(wh.root, query.sql, settings.sql_limits())
    except SandboxError as err:
        raise ApiProblem(422, f"sql-{err.reason.replace('_', '-')}",
                         str(err) + HINTS.get(err.reason, ""), field="body.sql") from None
    finally:
        wh.sql_slots.release()
    return SqlResult(columns=[Column(name=n, type=t) for n, t in result.columns],
                     rows=result.rows, row_count=len(result.rows),
                     elapsed_ms=round(result.elapsed_s * 1000, 3))
