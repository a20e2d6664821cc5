from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from api.schemas.common import Column


class ReportParam(BaseModel):
    name: str
    type: str = Field(description="`string`, `integer` or `number`")
    default: str | int | float | None = Field(description="null: no filter")


class ReportInfo(BaseModel):
    name: str
    description: str
    params: list[ReportParam]
    path: str = Field(description="where to GET it, parameters in the query string")


class ReportResult(BaseModel):
    report: str
    params: dict[str, str | int | float | None] = Field(description="as bound, defaults "
                                                                    "filled in")
    columns: list[Column]
    rows: list[list[Any]]
