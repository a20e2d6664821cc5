"""What every dashboard page shares: the Jinja2 templates, a Plotly figure as an HTML fragment,
and plotly.js itself, served from the installed plotly package (nothing is copied into this
repository and nothing is fetched from the internet: the pages work offline)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import plotly.io as pio
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup
from plotly.basedatatypes import BaseFigure

PLOTLY_JS = "/assets/plotly.min.js"  # the route serving plotly.js; base.html loads it
# no link out of an offline page: plotly.js's logo, and its "Share chart" button, which
# uploads the chart's data to Plotly Cloud (on by default in the plotly.js shipped)
_CONFIG = {"displaylogo": False, "showSendToCloud": False, "responsive": True}

templates = Jinja2Templates(directory=Path(__file__).resolve().parent / "templates")
templates.env.globals["plotly_js"] = PLOTLY_JS

router = APIRouter(include_in_schema=False)


def plotly_js_path() -> Path:
    """plotly.min.js as the plotly package ships it (the version its Python side writes for)."""
    return Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))


@router.get(PLOTLY_JS)
def plotly_js() -> FileResponse:
    return FileResponse(plotly_js_path(), media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=86400"})


def chart(fig: BaseFigure | dict[str, Any], div_id: str) -> Markup:
    """A figure as a <div> and the script that draws it with the page's plotly.js."""
    html = pio.to_html(fig, include_plotlyjs=False, full_html=False, config=_CONFIG,
                       div_id=div_id, validate=False)
    return Markup(html)  # plotly's own output: every text in it JSON-encoded


def page(request: Request, template: str, status_code: int = 200,
         **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, template, context, status_code=status_code)


def not_found(request: Request, what: str) -> HTMLResponse:
    return page(request, "message.html", status_code=404, title="Not found", message=what)
