"""One GET route per pattern report (warehouse/sql/report_*.sql), its parameters typed from
their defaults, so the OpenAPI document describes each; unknown parameters are refused."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import duckdb
import pyarrow as pa
from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, create_model

from aicf_induct.json_values import json_safe
from api.deps import ReadAccess, WarehouseDep
from api.errors import ApiProblem
from api.schemas.common import NAME_MAX, AnyWhenBlank, Column
from api.schemas.reports import ReportInfo, ReportParam, ReportResult
from warehouse.reports import CHOICES, Report, reports, run_report

router = APIRouter(tags=["reports"])

_TYPES = {int: "integer", float: "number"}
MAX_LIMIT = 10_000  # a report's `limit` parameter at most (run_summary's)


def _type_name(default: Any) -> str:
    return _TYPES.get(type(default), "string")


def _field(name: str, default: Any) -> tuple[Any, Any]:
    # bounds keep values inside what DuckDB binds (BIGINT, finite DOUBLE)
    if name in CHOICES:  # a known set of values (status): one of them, or empty for any
        values = CHOICES[name]
        return AnyWhenBlank, Field(default=default, pattern=f"^({'|'.join(('', *values))})$",
                                   description=f"one of {', '.join(values)}; empty: any")
    if name == "limit":  # rows of the answer: bounded as /v1/runs/{id}/steps' pages are
        return int, Field(default=default, ge=1, le=MAX_LIMIT)
    if isinstance(default, int):
        return int, Field(default=default, ge=0, le=10**9)
    if isinstance(default, float):
        return float, Field(default=default, allow_inf_nan=False)
    if default is None:
        return AnyWhenBlank, Field(default=None, max_length=NAME_MAX)
    return str | None, Field(default=default, max_length=NAME_MAX)


def params_model(report: Report) -> type[BaseModel]:
    fields = {k: _field(k, v) for k, v in report.params.items()}
    name = "".join(p.title() for p in report.name.split("_")) + "Params"
    return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)  # type: ignore[call-overload]


def _result(conn: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any]) -> ReportResult:
    table = pa.Table.from_pandas(run_report(conn, name, params), preserve_index=False)
    return ReportResult(report=name, params=params,
                        columns=[Column(name=f.name, type=str(f.type)) for f in table.schema],
                        rows=[[json_safe(v) for v in r.values()] for r in table.to_pylist()])


def _endpoint(report: Report) -> Callable[..., ReportResult]:
    model = params_model(report)

    def endpoint(_: ReadAccess, wh: WarehouseDep, params: Any) -> ReportResult:
        values = params.model_dump()
        return wh.read(lambda c: _result(c, report.name, values))

    # FastAPI reads the signature: the parameters arrive as one query model
    sig = inspect.signature(endpoint)
    endpoint.__signature__ = sig.replace(parameters=[  # type: ignore[attr-defined]
        *list(sig.parameters.values())[:2],
        sig.parameters["params"].replace(annotation=Annotated[model, Query()])])
    endpoint.__name__ = f"report_{report.name}"
    endpoint.__doc__ = report.description
    return endpoint


def _path(name: str) -> str:
    return f"/reports/{name}"


@router.get("/reports")
def list_reports(_: ReadAccess) -> list[ReportInfo]:
    """The pattern reports, with their parameters and defaults."""
    return [ReportInfo(name=r.name, description=r.description, path="/v1" + _path(r.name),
                       params=[ReportParam(name=k, type=_type_name(v), default=v)
                               for k, v in r.params.items()])
            for r in reports().values()]


for _report in reports().values():
    router.add_api_route(_path(_report.name), _endpoint(_report), methods=["GET"],
                         summary=_report.name.replace("_", " ").capitalize(),
                         response_model=ReportResult)


@router.get("/reports/{name}")
def unknown_report(_: ReadAccess, name: Annotated[str, Path(max_length=200)]) -> ReportResult:
    """Any other name: 404 listing the reports there are."""
    raise ApiProblem(404, "not-found", f"unknown report '{name}' (reports: "
                                       f"{', '.join(reports())})", field="path.name")
