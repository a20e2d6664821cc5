"""Pattern reports: named SELECTs in warehouse/sql/report_<name>.sql with `$name` parameters.

Each file starts with comment lines `-- report: NAME`, a description, and
`-- params: a=, b=10` (empty default: NULL, i.e. no filter; a number: the value's type).
A parameter named in `CHOICES` (status) takes only the values listed there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from aicf_induct.records import RUN_STATUSES
from warehouse.catalog import frame, one_line, part_error, sql_files
from warehouse.errors import WarehouseError

# Parameters whose values form a known set, in whichever report has them: any other value
# matched no row, "(no rows)" where `runs --status` refuses it
CHOICES: dict[str, tuple[str, ...]] = {"status": RUN_STATUSES}
MAX_COUNT = 2**63 - 1  # DuckDB's BIGINT, what LIMIT and the comparisons take


@dataclass(frozen=True)
class Report:
    name: str
    description: str
    params: dict[str, Any]  # name -> default (None: no filter)
    sql: str


def _default(text: str) -> Any:
    if text == "":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _parse(fname: str, text: str) -> Report:
    name = fname.removeprefix("report_").removesuffix(".sql")
    desc: list[str] = []
    params: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        body = line[2:].strip()
        if body.startswith("params:"):
            for item in filter(None, (p.strip() for p in body[7:].split(","))):
                key, _, val = item.partition("=")
                params[key.strip()] = _default(val.strip())
        elif not body.startswith("report:"):
            desc.append(body)
    return Report(name, " ".join(desc), params, text)


def reports() -> dict[str, Report]:
    """Every report, by name."""
    out = {}
    for fname, text in sql_files("report_").items():
        r = _parse(fname, text)
        out[r.name] = r
    return out


def bind(report: Report, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The report's parameters with defaults filled in and given values converted to the
    default's type (CLI values arrive as strings)."""
    given = dict(params or {})
    unknown = set(given) - set(report.params)
    if unknown:
        raise WarehouseError(f"report '{report.name}' has no parameter(s) "
                             f"{', '.join(sorted(unknown))} "
                             f"(parameters: {', '.join(report.params) or 'none'})")
    out = dict(report.params)
    for k, v in given.items():
        default = report.params[k]
        if v is not None and isinstance(default, int | float):
            v = _number(report.name, k, v, type(default))
        elif v is not None and k in CHOICES and v not in CHOICES[k]:
            raise WarehouseError(f"report '{report.name}': parameter '{k}' must be one of "
                                 f"{', '.join(CHOICES[k])}, got '{v}'")
        out[k] = v
    return out


def _number(report: str, key: str, v: Any, kind: type) -> int | float:
    """A numeric parameter's value as its default's type: a count or a threshold on one, so
    not negative, and within what DuckDB compares it with. A bool, or a fraction where a
    count is meant, is refused: int() would read True as 1 and 2.9 as 2."""
    what = "whole number" if kind is int else "finite number"
    refused = WarehouseError(f"report '{report}': parameter '{key}' must be a {what}, "
                             f"got '{v}'")
    if isinstance(v, bool | np.bool_):
        raise refused
    if kind is int and not isinstance(v, str | int | np.integer):
        try:
            whole = float(v).is_integer()  # 3.0 is a count; 2.9, inf and nan are not
        except (TypeError, ValueError):
            whole = False
        if not whole:
            raise refused
    try:
        number = kind(v)
    except (TypeError, ValueError, OverflowError):  # int('inf'): ValueError, int(inf): overflow
        raise refused from None
    if not math.isfinite(number):
        raise WarehouseError(f"report '{report}': parameter '{key}' must be a finite "
                             f"number, got '{v}'")
    if number < 0:
        raise WarehouseError(f"report '{report}': parameter '{key}' must not be negative, "
                             f"got {number}")
    if kind is int and number > MAX_COUNT:
        raise WarehouseError(f"report '{report}': parameter '{key}' must be at most "
                             f"{MAX_COUNT}, got {number}")
    return number


def run_report(conn: duckdb.DuckDBPyConnection, name: str,
               params: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Run report `name` on a connection from `warehouse.connect`."""
    all_reports = reports()
    if name not in all_reports:
        raise WarehouseError(f"unknown report '{name}' (reports: {', '.join(all_reports)})")
    report = all_reports[name]
    try:
        return frame(conn, report.sql, bind(report, params))
    except duckdb.Error as err:
        if part_error(err):
            raise  # a part vanished or is damaged: `catalog.with_retry` lists again
        raise WarehouseError(f"report '{name}': {one_line(err)}") from None


def leaderboard_score(board: pd.DataFrame) -> str:
    """What a `leaderboard` report's scores are, for an axis: the split and metric, e.g.
    "test accuracy" (runs that logged no test result are scored on validation: "test or val
    accuracy" when some did)."""
    metric = str(board["metric"].iloc[0]) if len(board) else "score"
    splits = sorted({s.strip() for v in board.get("score_split", pd.Series(dtype=object))
                     .dropna() for s in str(v).split(",")})
    return f"{' or '.join(splits)} {metric}" if splits else metric
