"""Errors as RFC 9457 problem details (`application/problem+json`): type, title, status,
detail, and for a bad input the offending field. Nothing else reaches a client: an unexpected
exception is logged here and answered with a generic 500."""

from __future__ import annotations

import errno
import logging
from http import HTTPStatus
from typing import Any

import duckdb
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from api.schemas.common import FieldError, Problem
from warehouse.catalog import one_line
from warehouse.errors import WarehouseError

log = logging.getLogger("api")

MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:aicf-induct:problem:"  # + a slug; docs/service.md lists them


class ApiProblem(HTTPException):
    """An HTTPException that carries a problem type and the offending field (routes raise it)."""

    def __init__(self, status: int, slug: str, detail: str, *, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(status_code=status, detail=detail, headers=headers)
        self.slug = slug
        self.field = field


def problem_response(status: int, detail: str, *, slug: str | None = None,
                     field: str | None = None, errors: list[FieldError] | None = None,
                     headers: dict[str, str] | None = None) -> JSONResponse:
    title = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    body = Problem(type=TYPE_PREFIX + slug if slug else "about:blank", title=title,
                   status=status, detail=detail, field=field, errors=errors)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status,
                        media_type=MEDIA_TYPE, headers=headers)


def _loc(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(p) for p in loc)


async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    bad_json = next((e for e in exc.errors() if e.get("type") == "json_invalid"), None)
    if bad_json is not None:  # a body FastAPI parses, not JSON: as the routes that read
        # their own bodies answer it (`routes.bodies`), not a 422 on `body.<offset>`
        why = bad_json.get("ctx", {}).get("error", bad_json.get("msg", "invalid"))
        return problem_response(400, f"the request body is not JSON ({why})",
                                slug="invalid-body", field="body")
    errors = [FieldError(field=_loc(e.get("loc", ())), message=str(e.get("msg", "invalid")))
              for e in exc.errors()]
    detail = "; ".join(f"{e.field}: {e.message}" for e in errors[:5]) or "invalid request"
    return problem_response(422, detail, slug="invalid-input",
                            field=errors[0].field if errors else None, errors=errors)


async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = getattr(exc, "headers", None)
    if isinstance(exc, ApiProblem):
        return problem_response(exc.status_code, str(exc.detail), slug=exc.slug,
                                field=exc.field, headers=headers)
    if exc.status_code == 400 and request.method in ("POST", "PUT", "PATCH"):
        # FastAPI's answer to a body it could not decode (not UTF-8, not JSON)
        return problem_response(400, f"the request body could not be parsed ({exc.detail})",
                                slug="invalid-body", field="body", headers=headers)
    return problem_response(exc.status_code, str(exc.detail), headers=headers)


async def on_warehouse_error(request: Request, exc: Exception) -> JSONResponse:
    # A WarehouseError or DuckDB error that reaches here is the warehouse's state (an
    # unreadable part), not the request's: routes turn what a request causes into 4xx.
    log.warning("warehouse error on %s %s: %s", request.method, request.url.path,
                one_line(exc))
    return problem_response(503, one_line(exc), slug="warehouse-unavailable")


async def on_client_gone(request: Request, exc: Exception) -> Response:
    # a client that went away mid-upload: nothing was written, nothing reads the answer
    log.info("client went away during %s %s", request.method, request.url.path)
    return Response(status_code=400)


async def on_os_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        # the disk's state, not the request's, and it may pass: a client retries a 503
        log.warning("disk full on %s %s: %s", request.method, request.url.path, exc)
        return problem_response(503, "the warehouse's disk is full; nothing of this request "
                                     "was written", slug="warehouse-full")
    return await on_unexpected(request, exc)


async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(500, "internal error; the server log has the details",
                            slug="internal")


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(WarehouseError, on_warehouse_error)
    app.add_exception_handler(duckdb.Error, on_warehouse_error)
    app.add_exception_handler(ClientDisconnect, on_client_gone)
    app.add_exception_handler(OSError, on_os_error)
    app.add_exception_handler(Exception, on_unexpected)
