"""Runs and their steps, page by page, for the service (and anyone else): plain functions over a
connection from `catalog.connect`, values bound with `$name`, rows as JSON-safe dicts."""

from __future__ import annotations

from typing import Any

import duckdb

from aicf_induct.json_values import json_safe, stored_json
from warehouse.errors import WarehouseError

RUN_COLUMNS = ("run_id", "problem_id", "problem_name", "task", "origin", "status", "seed",
               "device", "parent_run_id", "started_at", "ended_at", "steps_taken",
               "wall_time_s", "error")
STEP_COLUMNS = ("step", "epoch", "loss", "grad_norm", "update_ratio", "lr", "step_time_s",
                "batch_size", "trajectory")

# NULL filter: no filter. Newest first; run_id breaks ties so pages never overlap.
_RUNS_WHERE = """
WHERE ($problem IS NULL OR problem_name = $problem OR problem_id = $problem)
  AND ($origin IS NULL OR origin = $origin)
  AND ($status IS NULL OR status = $status)"""


def _rows(conn: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> list[dict]:
    # through Arrow: timestamps with time zone need no pytz
    table = conn.sql(sql, params=params).to_arrow_table()
    return [{k: json_safe(v) for k, v in r.items()} for r in table.to_pylist()]


def _count(conn: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> int:
    rows = conn.execute(sql, params).fetchall()  # all: a result left open blocks the next
    return int(rows[0][0]) if rows else 0


def _page(conn: duckdb.DuckDBPyConnection, columns: str, source: str, order: str,
          params: dict[str, Any], limit: int, offset: int) -> tuple[list[dict], int]:
    """One page of `SELECT columns source` in `order`, and how many rows `source` holds: in
    one query, the total a window over the rows before the page is cut (a query costs a few
    ms on 2 cores, whatever its size here); a count of its own only for an empty page past
    the start."""
    items = _rows(conn, f"SELECT {columns}, count(*) OVER () AS page_total__ {source} "
                        f"ORDER BY {order} LIMIT $limit OFFSET $offset",
                  {**params, "limit": limit, "offset": offset})
    if not items:
        total = _count(conn, f"SELECT count(*) {source}", params) if offset or not limit else 0
        return items, total
    total = int(items[0]["page_total__"])
    for item in items:
        del item["page_total__"]
    return items, total


def list_runs(conn: duckdb.DuckDBPyConnection, *, problem: str | None = None,
              origin: str | None = None, status: str | None = None, limit: int = 50,
              offset: int = 0, sort: str = "started_at",
              descending: bool = True) -> tuple[list[dict], int]:
    """One page of runs, newest first unless `sort` names another of RUN_COLUMNS, and the
    number of runs the filters match."""
    if sort not in RUN_COLUMNS:
        raise WarehouseError(f"cannot sort runs by '{sort}' (columns: {', '.join(RUN_COLUMNS)})")
    filters = {"problem": problem, "origin": origin, "status": status}
    order = f"{sort} {'DESC' if descending else 'ASC'} NULLS LAST"  # sort: one of RUN_COLUMNS
    return _page(conn, ", ".join(RUN_COLUMNS), f"FROM runs {_RUNS_WHERE}", f"{order}, run_id",
                 filters, limit, offset)


MIN_PREFIX = 6  # characters of a run id that name it (`aicf-induct runs` prints 12)


def run_by_prefix(conn: duckdb.DuckDBPyConnection, given: str) -> tuple[str, int]:
    """The run `given` names, and how many runs it could name (0: none, more than 1: an
    ambiguous prefix): the run whose id it is, else the one whose id starts with it (at
    least MIN_PREFIX characters: the ids `aicf-induct runs` prints, cut to 12)."""
    # starts_with, not LIKE: a `_` or `%` in `given` stays a plain character
    [(matches, first, exact)] = conn.execute(  # an aggregate: one row, even of no run
        "SELECT count(DISTINCT run_id), min(run_id), coalesce(bool_or(run_id = $g), false) "
        "FROM runs WHERE starts_with(run_id, $g)", {"g": given}).fetchall()
    if exact:
        return given, 1
    if len(given) < MIN_PREFIX:
        return "", 0
    return str(first or ""), int(matches)


def check_named(what: str, given: str, matches: int, root: object) -> None:
    """WarehouseError unless `given` named exactly one run of the warehouse at `root`
    (`run_by_prefix`'s count); `what` says what gave it (an option, an argument)."""
    if matches > 1:
        raise WarehouseError(f"{what}: '{given}' starts the ids of {matches} runs in {root}: "
                             "give more of the id")
    if matches == 0:
        raise WarehouseError(f"{what}: no run '{given}' in {root}")


def get_run(conn: duckdb.DuckDBPyConnection, run_id: str, count_steps: bool = True,
            children: bool = True) -> dict | None:
    """One run with its config and library versions (parsed JSON) and its step counts:
    `logged_steps` every step row, a branch a rollback dropped included, `live_steps` the rows
    of the path it took (the `live_steps` view); unless `count_steps` is False (both None: a
    scan of the steps a caller reading them anyway saves). With `children`, its branches
    (`run_children`, without their counts). None when there is no such run."""
    cols = ", ".join(RUN_COLUMNS)
    counts = ("(SELECT count(*) FROM steps s WHERE s.run_id = $run_id) AS logged_steps, "
              "(SELECT count(*) FROM live_steps s WHERE s.run_id = $run_id) AS live_steps"
              if count_steps else "NULL AS logged_steps, NULL AS live_steps")
    rows = _rows(conn, f"SELECT {cols}, config, library_versions, {counts} "
                       "FROM runs WHERE run_id = $run_id LIMIT 1", {"run_id": run_id})
    if not rows:
        return None
    run = rows[0]
    for k in ("config", "library_versions"):
        run[k] = stored_json(run[k])
    if children:
        run["children"] = run_children(conn, run_id)
    return run


# A run's children, all in one query: the step a child branched at is the earlier of its
# first step row and its `fork start` event (a child that logged no step yet has the event;
# a run started with a parent outside `AdaptiveRun` logs rows alone).
_CHILDREN = """
WITH kids AS (SELECT run_id, origin, status, started_at FROM runs
              WHERE parent_run_id = $run_id),
firsts AS (SELECT run_id, min(step) AS step FROM steps
           WHERE run_id IN (SELECT run_id FROM kids) GROUP BY run_id),
starts AS (SELECT run_id, min(step) AS step FROM events
           WHERE kind = 'fork' AND name = 'start' AND run_id IN (SELECT run_id FROM kids)
           GROUP BY run_id){live_cte}
SELECT k.run_id, k.origin, k.status, least(f.step, s.step) AS from_step{live_col}
FROM kids k LEFT JOIN firsts f USING (run_id) LEFT JOIN starts s USING (run_id){live_join}
ORDER BY k.started_at, k.run_id"""
_CHILD_LIVE = {"live_cte": """, live AS (SELECT run_id, count(*) AS n FROM live_steps
           WHERE run_id IN (SELECT run_id FROM kids) GROUP BY run_id)""",
               "live_col": ", coalesce(l.n, 0) AS live_steps",
               "live_join": " LEFT JOIN live l USING (run_id)"}


def run_children(conn: duckdb.DuckDBPyConnection, run_id: str, *,
                 count_steps: bool = False) -> list[dict]:
    """The runs branched from `run_id` (those whose `parent_run_id` it is), oldest first:
    `run_id`, `origin`, `status` and `from_step`, the step it branched at (the earlier of its
    first step row and its `fork start` event; None when it logged neither); with
    `count_steps`, also `live_steps`, its step rows on the path it took. One query, however
    many children."""
    parts = _CHILD_LIVE if count_steps else dict.fromkeys(_CHILD_LIVE, "")
    return _rows(conn, _CHILDREN.format(**parts), {"run_id": run_id})


def run_steps(conn: duckdb.DuckDBPyConnection, run_id: str, *, limit: int = 1000,
              offset: int = 0) -> tuple[list[dict], int]:
    """One page of a run's steps in step order, and the run's number of logged steps. A
    rollback's replay logs its step numbers again under the next trajectory (rows logged
    before the column read 0): rows of one step are ordered by trajectory, then by their
    values, a total order, so that pages never overlap nor skip a row."""
    cols = ", ".join("coalesce(trajectory, 0) AS trajectory" if c == "trajectory" else c
                     for c in STEP_COLUMNS)
    order = ", ".join(["step", "trajectory", *STEP_COLUMNS[1:-1]])
    return _page(conn, cols, "FROM steps WHERE run_id = $run_id", order, {"run_id": run_id},
                 limit, offset)


def distinct_values(conn: duckdb.DuckDBPyConnection, column: str,
                    limit: int | None = None) -> list[str]:
    """The values of a runs column a filter can take (problem_name, origin, status), sorted;
    the first `limit` of them when given."""
    if column not in ("problem_name", "origin", "status"):
        raise WarehouseError(f"no filter on runs column '{column}'")
    rows = conn.execute(f"SELECT DISTINCT {column} FROM runs WHERE {column} IS NOT NULL "
                        f"ORDER BY 1 LIMIT ?", [limit]).fetchall()
    return [str(r[0]) for r in rows]


def mined(conn: duckdb.DuckDBPyConnection, table: str) -> list[dict]:
    """The latest fit's `correlations` or `rules` (warehouse/sql/20_induction.sql), the
    lowest q-value first."""
    if table not in ("correlations", "rules"):
        raise WarehouseError(f"no mined table '{table}' (tables: correlations, rules)")
    return _rows(conn, f"SELECT * FROM {table} ORDER BY q_value NULLS LAST, p_value, 1, 2", {})
