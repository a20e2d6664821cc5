"""The runs list (`/`) and one run's page (`/runs/{run_id}`), on `warehouse.browse` and
`warehouse.run_view`, the library the /v1/runs routes use."""

from __future__ import annotations

from typing import Annotated, Literal

import duckdb
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from api.deps import ReadAccess, WarehouseDep
from api.pages import ir_graph, run_charts
from api.pages.render import PageRoute, chart, not_found, page
from api.schemas.common import NAME_MAX
from api.schemas.runs import STATUS_FILTER
from warehouse import browse
from warehouse.run_view import DEFAULT_POINTS, RunView, run_view

router = APIRouter(include_in_schema=False, route_class=PageRoute)

Filter = Annotated[str | None, Query(max_length=NAME_MAX)]
Status = Annotated[str | None, Query(pattern=STATUS_FILTER)]  # as /v1/runs takes it
Sort = Literal[browse.RUN_COLUMNS]  # type: ignore[valid-type]
PER_PAGE = 50
MENU_MAX = 200  # problems a filter's menu lists (more: a text field)
EVENTS_SHOWN = 1000  # a run page's events table (100,000 events made 22 MB of HTML)
LIST_COLUMNS = ("run_id", "problem_name", "origin", "status", "seed", "device", "started_at",
                "steps_taken", "wall_time_s")


@router.get("/", response_class=HTMLResponse)
def runs_page(request: Request, _: ReadAccess, wh: WarehouseDep, problem: Filter = None,
              origin: Filter = None, status: Status = None, sort: Sort = "started_at",
              order: Literal["asc", "desc"] = "desc",
              page_no: Annotated[int, Query(alias="page", ge=1, le=10**6)] = 1,
              per_page: Annotated[int, Query(ge=1, le=500)] = PER_PAGE) -> HTMLResponse:
    """Runs, filtered by problem, origin and status, sorted by any column, a page at a time."""
    problem, origin, status = (v or None for v in (problem, origin, status))  # "" = any

    def read(c: duckdb.DuckDBPyConnection) -> tuple[list[dict], int, dict[str, list[str]]]:
        items, total = browse.list_runs(c, problem=problem, origin=origin, status=status,
                                        limit=per_page, offset=(page_no - 1) * per_page,
                                        sort=sort, descending=order == "desc")
        # a menu of every problem was 4.5 MB a page at 20,000 problems: past MENU_MAX, a
        # text field takes the name instead
        choices = {col: browse.distinct_values(c, col, MENU_MAX + 1)
                   for col in ("problem_name", "origin", "status")}
        return items, total, choices

    items, total, choices = wh.read(read)
    pages = max(1, -(-total // per_page))
    filters = {"problem": problem or "", "origin": origin or "", "status": status or "",
               "per_page": per_page}
    return page(request, "runs.html", title="Runs", items=items, total=total, page_no=page_no,
                pages=pages, columns=LIST_COLUMNS, sort=sort, order=order, filters=filters,
                choices=choices, menu_max=MENU_MAX)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, _: ReadAccess, wh: WarehouseDep, run_id: str) -> HTMLResponse:
    """One run: its branches, curves with event markers, dynamics, the IR per snapshot, final
    metrics."""
    def read(c: duckdb.DuckDBPyConnection) -> tuple[RunView | None, bool]:
        view = run_view(c, run_id)
        parent = view.run["parent_run_id"] if view else None
        return view, parent is not None and browse.get_run(
            c, str(parent), count_steps=False, children=False) is not None

    view, parent_here = wh.read(read)
    if view is None:
        return not_found(request, f"no run '{run_id}'")
    ds = ir_graph.diffs(view.snapshots)
    rewrites = [(s, d, next((e for e in view.events if e["kind"] in ("rewrite", "rollback")
                             and e["step"] == s["step"] and e["kind"] == s["reason"]), None))
                for s, d in zip(view.snapshots, ds, strict=True)
                if s["reason"] in ("rewrite", "rollback")]
    charts = {}
    if run_charts.draws_curves(view):  # else the page says no steps were logged
        charts["curves"] = chart(run_charts.curves_figure(view), "chart-curves",
                                 "Training and validation loss per step, with event markers")
    if view.logged_steps:
        charts["dynamics"] = chart(run_charts.dynamics_figure(view), "chart-dynamics",
                                   "Gradient norm, update ratio and learning rate per step")
    if view.snapshots:
        charts["ir"] = chart(ir_graph.ir_figure(view.snapshots), "chart-ir",
                             "The IR as a graph at each snapshot")
    # a parent logged to another warehouse (a fork of another's checkpoint): named, not linked
    return page(request, "run.html", title=f"Run {run_id[:12]}", view=view, run=view.run,
                charts=charts, rewrites=rewrites, parent_here=parent_here,
                max_points=DEFAULT_POINTS, events_shown=EVENTS_SHOWN)
