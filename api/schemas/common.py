"""Models shared by every resource: the problem document and a page's bookkeeping."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field


def _blank_is_any(value: Any) -> Any:
    return None if value == "" else value


# a query filter left empty (`?problem=`, as the dashboard's forms send it) is no filter:
# not a filter to the empty name (`/v1/runs`, the reports routes)
AnyWhenBlank = Annotated[str | None, BeforeValidator(_blank_is_any)]
# a name filter's characters at most: a file dataset's problem is named by its path and
# query (246 characters refused at 200), and the name must fit the server's 16 kB request
# line however it is spelled (a 4-byte character percent-encoded is 12 bytes)
NAME_MAX = 1200


class FieldError(BaseModel):
    field: str = Field(description="where: `query.limit`, `body.sql`, `path.run_id`, ...")
    message: str


class Problem(BaseModel):
    """An error (RFC 9457 problem details)."""

    type: str = Field(description="`urn:aicf-induct:problem:<slug>`, or `about:blank`")
    title: str
    status: int
    detail: str
    field: str | None = Field(default=None, description="the offending input, when one is")
    errors: list[FieldError] | None = Field(default=None,
                                            description="every invalid input (422)")


class Page(BaseModel):
    total: int = Field(description="items matching the filters, over all pages")
    limit: int
    offset: int
    next_offset: int | None = Field(description="offset of the next page; null on the last")


def next_offset(offset: int, limit: int, total: int) -> int | None:
    return offset + limit if offset + limit < total else None


class Column(BaseModel):
    name: str
    type: str = Field(description="the column's Arrow type, e.g. `int64`, `string`")
