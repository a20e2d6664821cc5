from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from api.schemas.common import Column


class SqlQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sql: str = Field(min_length=1, max_length=100_000,
                     description="one read-only statement (SELECT, DESCRIBE, SHOW, SUMMARIZE) "
                                 "over the warehouse views",
                     examples=["SELECT count(*) AS n FROM steps"])


class SqlResult(BaseModel):
    columns: list[Column]
    rows: list[list[Any]] = Field(description="JSON-safe values, exact: integers of any "
                                              "width as integers, non-finite numbers null, "
                                              "times ISO 8601 (infinite ones 'infinity'), "
                                              "bytes base64")
    row_count: int
    elapsed_ms: float
