"""A read-only guard for SQL typed by users (the CLI's `sql`, the service's sandbox).

Two layers: the statement must parse as exactly one SELECT (DuckDB's own parser says so, no
keyword matching), and the connection comes from `connect(read_only=True)`, which denies file
access outside the warehouse and locks the configuration, so a SELECT cannot read elsewhere.
"""

from __future__ import annotations

import duckdb
import pandas as pd
import pyarrow as pa

from warehouse.catalog import arrow, one_line, part_error
from warehouse.errors import WarehouseError

ALLOWED = {duckdb.StatementType.SELECT}  # SELECT, also DESCRIBE / SHOW / SUMMARIZE


def check_sql(conn: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise WarehouseError unless `sql` is a single read-only statement."""
    try:
        statements = conn.extract_statements(sql)
    except duckdb.Error as err:
        raise WarehouseError(f"bad SQL: {one_line(err)}") from None
    if len(statements) != 1:
        raise WarehouseError(f"expected one SQL statement, got {len(statements)}")
    kind = statements[0].type
    if kind not in ALLOWED:
        raise WarehouseError(f"the warehouse is read-only here: {kind.name} statements are "
                             "refused (only SELECT, DESCRIBE, SHOW)")


def run_guarded(conn: duckdb.DuckDBPyConnection, sql: str) -> pd.DataFrame:
    """Check, then run `sql`; DuckDB errors become one-line WarehouseErrors."""
    return run_guarded_arrow(conn, sql).to_pandas()


def run_guarded_arrow(conn: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    """`run_guarded`, its result as Arrow: every type DuckDB returns, pandas' or not."""
    check_sql(conn, sql)
    try:
        return arrow(conn, sql)
    except duckdb.Error as err:
        if part_error(err):
            raise  # a part vanished or is damaged: `catalog.with_retry` lists again
        raise WarehouseError(one_line(err)) from None
