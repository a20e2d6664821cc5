"""What every dashboard page shares: the Jinja2 templates, a Plotly figure as an HTML fragment,
and plotly.js itself, served from the installed plotly package (nothing is copied into this
repository and nothing is fetched from the internet: the pages work offline)."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Coroutine, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import plotly.io as pio
from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from markupsafe import Markup
from plotly.basedatatypes import BaseFigure

PLOTLY_JS = "/assets/plotly.min.js"  # the route serving plotly.js; base.html loads it
# no link out of an offline page: plotly.js's logo, and its "Share chart" button, which
# uploads the chart's data to Plotly Cloud (on by default in the plotly.js shipped)
_CONFIG = {"displaylogo": False, "showSendToCloud": False, "responsive": True}

templates = Jinja2Templates(directory=Path(__file__).resolve().parent / "templates")
templates.env.globals["plotly_js"] = PLOTLY_JS


class PageRoute(APIRoute):
    """A page's route: a query value it does not take answers a 422 page naming the
    parameter and what it takes (a browser shows a page, not the /v1 routes' problem+json,
    which `api.errors` answers for them)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as err:
                return invalid(request, err.errors())

        return route


router = APIRouter(include_in_schema=False, route_class=PageRoute)


def _takes(error: dict[str, Any]) -> str:
    """What a parameter takes, as pydantic says it; a pattern of alternatives (`status`)
    as the values it allows."""
    pattern = str((error.get("ctx") or {}).get("pattern", ""))
    m = re.fullmatch(r"\^\((.*)\)\$", pattern) if error.get("type") == "string_pattern_mismatch" \
        else None
    if m:
        return "one of " + ", ".join(v for v in m.group(1).split("|") if v) + ", or empty"
    return str(error.get("msg", "invalid"))


def invalid(request: Request, errors: Sequence[Any]) -> HTMLResponse:
    """The 422 page of a page's query values it does not take, and a link to the page
    without them."""
    names = [str(e["loc"][-1]) for e in errors if e.get("loc")]
    message = "; ".join(f"{str(e['loc'][-1]) if e.get('loc') else 'query'}: {_takes(e)}"
                        for e in errors)
    back = request.url.remove_query_params(names) if names else request.url.replace(query="")
    path = back.path + (f"?{back.query}" if back.query else "")  # same host: a relative link
    return page(request, "message.html", status_code=422, title="Invalid query",
                message=message, back=path,
                back_text=f"{request.url.path} without {', '.join(names) or 'the query'}")


def plotly_js_path() -> Path:
    """plotly.min.js as the plotly package ships it (the version its Python side writes for)."""
    return Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))


@router.get(PLOTLY_JS)
def plotly_js() -> FileResponse:
    return FileResponse(plotly_js_path(), media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=86400"})


def chart(fig: BaseFigure | dict[str, Any], div_id: str, label: str | None = None) -> Markup:
    """A figure as a <div> and the script that draws it with the page's plotly.js; the div
    an image to assistive technology, named `label` (else the figure's title)."""
    out = pio.to_html(fig, include_plotlyjs=False, full_html=False, config=_CONFIG,
                      div_id=div_id, validate=False)
    name = label or _title(fig) or div_id.removeprefix("chart-")
    div = f'<div id="{div_id}" '
    out = out.replace(div, f'{div}role="img" aria-label="{html.escape(name)}" ', 1)
    return Markup(out)  # plotly's own output: every text in it JSON-encoded


def _title(fig: BaseFigure | dict[str, Any]) -> str:
    layout = fig.to_plotly_json().get("layout", {}) if isinstance(fig, BaseFigure) \
        else fig.get("layout", {})
    title = layout.get("title") or {}
    return str(title.get("text") or "") if isinstance(title, dict) else str(title)


def page(request: Request, template: str, status_code: int = 200,
         **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, template, context, status_code=status_code)


def not_found(request: Request, what: str) -> HTMLResponse:
    return page(request, "message.html", status_code=404, title="Not found", message=what)
