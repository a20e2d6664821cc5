"""The pattern pages: leaderboard per problem, pattern performance (both the warehouse reports
the /v1/reports routes serve), and what `induce fit` mined: the feature × trait correlation
heatmap and the rules (the `correlations` and `rules` views)."""

from __future__ import annotations

from typing import Annotated, Any

import duckdb
import pandas as pd
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from aicf_induct.json_values import json_safe
from api.deps import ReadAccess, WarehouseDep
from api.pages import report_charts
from api.pages.render import PageRoute, chart, page
from api.schemas.common import NAME_MAX  # patterns.html's input holds as many
from warehouse import browse
from warehouse.reports import run_report

router = APIRouter(include_in_schema=False, route_class=PageRoute)

Name = Annotated[str | None, Query(max_length=NAME_MAX)]
FDR = 0.05  # q-value under which a correlation or rule is marked


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): json_safe(v) for k, v in r.items()} for r in df.to_dict("records")]


@router.get("/leaderboard", response_class=HTMLResponse)
def leaderboard_page(request: Request, _: ReadAccess, wh: WarehouseDep,
                     problem: Name = None) -> HTMLResponse:
    """Best structures of a problem (report `leaderboard`), its mean and best score."""
    def read(c: duckdb.DuckDBPyConnection) -> tuple[list[str], pd.DataFrame]:
        board = run_report(c, "leaderboard", {"top": 20})
        names = sorted(board["problem_name"].dropna().unique())
        return names, board

    names, board = wh.read(read)
    chosen = problem or (names[0] if names else None)
    rows = board[(board["problem_name"] == chosen) | (board["problem_id"] == chosen)]
    if len(rows):  # a problem id given: the menu shows, and Show keeps, its name
        chosen = str(rows["problem_name"].iloc[0])
    fig = chart(report_charts.leaderboard_figure(rows), "chart-leaderboard",
                f"Leaderboard of {chosen}: mean and best score per structure") \
        if len(rows) else None
    return page(request, "leaderboard.html", title="Leaderboard", problems=names,
                problem=chosen, rows=_records(rows), chart=fig)


@router.get("/patterns", response_class=HTMLResponse)
def patterns_page(request: Request, _: ReadAccess, wh: WarehouseDep, pattern: Name = None,
                  problem: Name = None) -> HTMLResponse:
    """Normalized score per value of a pattern, with 95 % intervals (`pattern_performance`)."""
    perf = wh.read(lambda c: run_report(c, "pattern_performance", {"problem": problem}))
    # patterns whose value varies first: a pattern every run shares says nothing
    varying = perf.groupby("pattern")["value"].nunique().sort_values(ascending=False,
                                                                        kind="stable")
    names = list(varying.index)
    chosen = pattern or (names[0] if names else None)
    rows = perf[perf["pattern"] == chosen]
    fig = chart(report_charts.pattern_figure(rows, chosen or ""), "chart-patterns",
                f"Mean normalized score per value of {chosen}, with 95 % intervals") \
        if len(rows) else None
    # what matched nothing, when something did not: the problem, else the pattern
    unmatched = ("problem", problem) if problem and not len(perf) else (
        ("pattern", pattern) if pattern and not len(rows) and len(perf) else None)
    return page(request, "patterns.html", title="Pattern performance", patterns=names,
                pattern=chosen, problem=problem or "", rows=_records(rows), chart=fig,
                unmatched=unmatched, name_max=NAME_MAX)


@router.get("/correlations", response_class=HTMLResponse)
def correlations_page(request: Request, _: ReadAccess, wh: WarehouseDep) -> HTMLResponse:
    """The latest fit's feature × trait correlations as a heatmap, with CIs and FDR marks."""
    rows = wh.read(lambda c: browse.mined(c, "correlations"))
    fig = chart(report_charts.correlation_heatmap(rows, FDR), "chart-correlations",
                "Heatmap of feature × trait correlations") if rows else None
    marked = [r for r in rows if r["q_value"] is not None and r["q_value"] <= FDR]
    return page(request, "correlations.html", title="Feature × trait correlations",
                rows=rows, marked=marked, chart=fig, fdr=FDR)


@router.get("/rules", response_class=HTMLResponse)
def rules_page(request: Request, _: ReadAccess, wh: WarehouseDep) -> HTMLResponse:
    """The latest fit's rules with their effects and CIs."""
    rows = wh.read(lambda c: browse.mined(c, "rules"))
    fig = chart(report_charts.rules_figure(rows, FDR), "chart-rules",
                "Each rule's effect on normalized score, with its 95 % CI") if rows else None
    return page(request, "rules.html", title="Rules", rows=rows, chart=fig, fdr=FDR)
