"""The dashboard: read-only HTML pages at `/` over the same library the /v1 routes use, their
charts drawn by Plotly (plotly.js served from the installed plotly package; no page fetches
anything from the internet). Left out of the OpenAPI document: pages are not API."""

from __future__ import annotations

from fastapi import APIRouter

from api.pages import compare, propose, render, reports, runs

router = APIRouter(include_in_schema=False)
for _module in (render, runs, compare, reports, propose):
    router.include_router(_module.router)
