from __future__ import annotations

import os

import duckdb
from fastapi import APIRouter

from aicf_induct import __version__
from api.deps import WarehouseDep
from api.schemas.health import Health, WarehouseHealth
from warehouse.catalog import one_line
from warehouse.errors import WarehouseError
from warehouse.layout import unreadable_parts

router = APIRouter(tags=["health"])


def _counts(conn: duckdb.DuckDBPyConnection) -> WarehouseHealth:
    row = conn.execute("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM steps), "
                       "(SELECT count(*) FROM problems)").fetchone()
    assert row is not None
    return WarehouseHealth(readable=True, runs=row[0], steps=row[1], problems=row[2])


@router.get("/health")
def health(wh: WarehouseDep) -> Health:
    """Liveness, version, and whether the warehouse reads (with its row counts). Always open."""
    try:
        state = wh.read(_counts)
        state.skipped_parts = [f"{path}: {why}" for path, why in unreadable_parts(wh.root)]
    except (WarehouseError, duckdb.Error, OSError) as err:
        state = WarehouseHealth(readable=False, error=one_line(err))
    # a directory not made yet is made by the first write; one that exists must take files
    state.writable = not wh.root.exists() or os.access(wh.root, os.W_OK | os.X_OK)
    ok = state.readable and state.writable and not state.skipped_parts
    return Health(status="ok" if ok else "degraded", version=__version__, warehouse=state)
