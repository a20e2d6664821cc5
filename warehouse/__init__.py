"""The warehouse: training runs as immutable Parquet parts, queried through DuckDB views.

    rec = open_recorder(None)               # ./aicf_warehouse or $AICF_WAREHOUSE
    ...the runtime logs into rec...; rec.close()
    conn = connect()                        # views over every visible part
    run_report(conn, "leaderboard", {"problem": "iris"})

See warehouse/README.md for the layout, the tables and the reports.
"""

from __future__ import annotations

from pathlib import Path

from warehouse.arrow import read_table
from warehouse.catalog import (
    check_served,
    connect,
    default_root,
    empty_note,
    existing_warehouse,
    rebuild,
    require_warehouse,
    with_retry,
)
from warehouse.check import CheckReport, check
from warehouse.compact import CompactReport, compact
from warehouse.errors import WarehouseError
from warehouse.guard import check_sql, run_guarded
from warehouse.layout import visible_parts
from warehouse.recorder import WarehouseRecorder
from warehouse.reports import reports, run_report
from warehouse.schema import TABLES
from warehouse.writer import Writer


def open_recorder(root: str | Path | None = None,
                  flush_interval_s: float = 1.0) -> WarehouseRecorder:
    """A recorder into `root` (None: `default_root()`), for `aicf-induct train`."""
    return WarehouseRecorder(default_root(root),
                             flush_interval_s=flush_interval_s)


__all__ = [
    "TABLES",
    "CheckReport",
    "CompactReport",
    "WarehouseError",
    "WarehouseRecorder",
    "Writer",
    "check",
    "check_served",
    "check_sql",
    "compact",
    "connect",
    "default_root",
    "empty_note",
    "existing_warehouse",
    "open_recorder",
    "read_table",
    "rebuild",
    "reports",
    "require_warehouse",
    "run_guarded",
    "run_report",
    "visible_parts",
    "with_retry",
]
