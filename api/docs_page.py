"""The docs page (/docs) served without a CDN: Swagger UI's script, style and icon come from
the `swagger-ui-bundle` package, mounted at /docs-static (FastAPI's recipe for
self-hosting the docs' JavaScript and CSS), so the page works on a machine with no
internet access."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

STATIC = "/docs-static"


def install(app: FastAPI) -> None:
    """Serve /docs from local files (build the app with `docs_url=None`)."""
    app.mount(STATIC, StaticFiles(directory=swagger_ui_path), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} - docs",
                                   swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{STATIC}/swagger-ui.css",
                                   swagger_favicon_url=f"{STATIC}/favicon-32x32.png")
