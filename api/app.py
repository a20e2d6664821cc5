"""The service's app factory: `uvicorn --factory api.app:create_app` (what `aicf-induct serve`
runs), or `create_app(Settings(...))` in code. Routes under /v1, OpenAPI at /openapi.json,
the docs page at /docs."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from aicf_induct import __version__
from api import docs_page, errors
from api.deps import Warehouse, read_bearer
from api.middleware import BodyLimit
from api.pages import router as pages_router
from api.proposing import Proposals
from api.routes import health, ingest, proposals, reports, rewrites, runs, sql
from api.settings import Settings
from warehouse.catalog import check_served, empty_note
from warehouse.ingest import recover
from warehouse.keys import KeyStore

log = logging.getLogger("api")

# Answers any route may give besides its own (documented so clients and schemathesis know).
COMMON_ERRORS = {400: "the body is not JSON (routes with a body)",
                 401: "no or unknown API key (when the route needs one)",
                 413: "request body over the limit",
                 422: "invalid input; `field` names it",
                 500: "unexpected error (logged server-side; no details sent)",
                 503: "the warehouse cannot be read (an unreadable part file)"}
ROUTE_ERRORS = {"/v1/runs/{run_id}": {404: "no such run"},
                "/v1/runs/{run_id}/steps": {404: "no such run"},
                "/v1/reports/{name}": {404: "no such report"},
                "/v1/sql": {429: "too many queries at once"},
                "/v1/ingest/runs/{run_id}/steps": {415: "the body is not an Arrow IPC stream"},
                "/v1/proposals": {429: "too many proposals being computed at once",
                                  503: "no knowledge pack at the configured path"},
                "/v1/proposals/features": {503: "no knowledge pack at the configured path"},
                "/v1/rewrites": {429: "too many proposals being computed at once (a "
                                      "`problem` to featurise)"}}


def create_app(settings: Settings | None = None) -> FastAPI:
    """The app serving `settings` (None: from the environment). A warehouse path that is a
    typo (no parent directory) or no warehouse is a WarehouseError naming it, before the app
    exists: uvicorn prints it and exits, as `aicf-induct serve` refuses one."""
    settings = settings or Settings()
    made = check_served(settings.warehouse, "AICF_SERVICE_WAREHOUSE")
    if not made and settings.note_empty_warehouse:  # `serve` said it for all its workers
        log.warning("%s", empty_note(settings.warehouse))
    app = FastAPI(title="aicf-induct", version=__version__, docs_url=None, redoc_url=None,
                  description="Runs, pattern reports and read-only SQL over the aicf_induct "
                              "warehouse. Errors are RFC 9457 problem details.")
    app.state.settings = settings
    app.state.warehouse = Warehouse(settings.warehouse, settings.sql_concurrency)
    app.state.keys = KeyStore(settings.key_path())
    app.state.proposals = Proposals(settings.pack, settings.proposal_concurrency,
                                    settings.max_upload_cells)
    for module in (health, runs, reports, sql, ingest, proposals, rewrites):
        app.include_router(module.router, prefix="/v1")
    docs_page.install(app)
    app.include_router(pages_router)  # the dashboard at / (api/pages)
    errors.install(app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes,
                       prefix_limits={"/v1/ingest/": settings.max_ingest_bytes,
                                      "/v1/proposals": settings.max_upload_bytes,
                                      "/propose": settings.max_upload_bytes},
                       pages=frozenset({"/propose"}))  # the form says what is too large
    if settings.warehouse.is_dir():
        recover(settings.warehouse)  # batches a killed server committed but did not finish
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, with every error answer as a problem+json `Problem`."""
    if app.openapi_schema:
        return app.openapi_schema
    doc = get_openapi(title=app.title, version=app.version, description=app.description,
                      routes=app.routes)
    problem = {"$ref": "#/components/schemas/Problem"}
    open_reads = not app.state.settings.read_requires_key
    for path, ops in doc["paths"].items():
        for op in ops.values():
            if open_reads and read_bearer.scheme_name in str(op.get("security")):
                del op["security"]  # this server does not look at keys on reads
            answers = op.setdefault("responses", {})
            for code in [c for c in answers if c.startswith(("4", "5"))]:
                del answers[code]
            for code, text in {**COMMON_ERRORS, **ROUTE_ERRORS.get(path, {})}.items():
                if (code == 401 and "security" not in op) or (
                        code == 400 and "requestBody" not in op) or (
                        code == 503 and path == "/v1/health"):
                    continue
                answers[str(code)] = {"description": text, "content": {
                    errors.MEDIA_TYPE: {"schema": problem}}}
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    if open_reads:
        doc["components"].get("securitySchemes", {}).pop(read_bearer.scheme_name, None)
    schemas.update(_problem_schemas())
    app.openapi_schema = doc
    return doc


def _problem_schemas() -> dict[str, Any]:
    from api.schemas.common import Problem

    schema = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return {"Problem": schema, **defs}
