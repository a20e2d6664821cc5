"""The compare page (`/compare?run=ID&run=ID...`): several runs' curves overlaid (a run and its
branches, an adaptive run and a static one) and a table of what each is, on
`warehouse.run_view`, the library the run page reads through."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any
from urllib.parse import urlencode

import duckdb
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from api.deps import ReadAccess, WarehouseDep
from api.pages import compare_charts, run_charts
from api.pages.render import PageRoute, chart, not_found, page, templates
from warehouse import browse
from warehouse.run_view import (
    COMPARE_COLOURS,
    COMPARE_RUNS,
    DEFAULT_POINTS,
    RunView,
    run_view,
    shared_score,
    went_back,
)

router = APIRouter(include_in_schema=False, route_class=PageRoute)

MIN_RUNS, MAX_RUNS = COMPARE_RUNS
FINAL_SPLITS = ("val", "test")  # the final metrics the table shows


def compare_url(run_ids: list[str]) -> str:
    """The compare page of the first MAX_RUNS of `run_ids` (the run page links its parent and
    its branches)."""
    return "/compare?" + urlencode([("run", r) for r in run_ids[:MAX_RUNS]])


templates.env.globals["compare_url"] = compare_url  # run.html
templates.env.globals["compare_max"] = MAX_RUNS


def _bad_runs(run_ids: list[str]) -> str | None:
    """What is wrong with the `run` values, as the 422 page says it; None when nothing."""
    if not MIN_RUNS <= len(run_ids) <= MAX_RUNS:
        return f"run: compare {MIN_RUNS} to {MAX_RUNS} runs ({len(run_ids)} given)"
    twice = [r for r, n in Counter(run_ids).items() if n > 1]
    if twice:
        return "run: " + ", ".join(f"'{r}'" for r in twice) + " given more than once"
    return None


def final_columns(views: list[RunView]) -> list[tuple[str, str]]:
    """The (split, metric) of every final val and test result any of the runs holds."""
    have = {(f["split"], f["metric"]) for v in views for f in v.final}
    return sorted(((s, m) for s, m in have if s in FINAL_SPLITS),
                  key=lambda c: (FINAL_SPLITS.index(c[0]), c[1]))


def table_row(view: RunView, columns: list[tuple[str, str]],
              parent_here: bool = True) -> dict[str, Any]:
    """One run's row: what it is, its parent (`parent_here`: whether this warehouse holds
    it, so it can be linked), its steps on the path taken, wall time, its rewrites and its
    rollbacks that took it back (a `give_up` names no target), and its final metrics."""
    run = view.run
    final = {(f["split"], f["metric"]): f["value"] for f in view.final}
    return {"run_id": run["run_id"], "problem": run["problem_name"], "origin": run["origin"],
            "status": run["status"], "parent": run["parent_run_id"], "parent_here": parent_here,
            "steps": view.live_steps, "wall_time_s": run["wall_time_s"],
            "rewrites": sum(e["kind"] == "rewrite" for e in view.events),
            "rollbacks": sum(went_back(e) for e in view.events),
            "final": [final.get(c) for c in columns]}


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, _: ReadAccess, wh: WarehouseDep,
                 run: Annotated[list[str] | None, Query()] = None) -> HTMLResponse:
    """Several runs' losses and validation scores overlaid, and a table of them."""
    run = run or []
    bad = _bad_runs(run)
    if bad:
        return page(request, "message.html", status_code=422, title="Compare runs",
                    message=bad, back="/", back_text="the runs list, to tick the runs")
    def read(c: duckdb.DuckDBPyConnection) -> tuple[list[RunView | None], set[str]]:
        views = [run_view(c, r) for r in run]
        parents = {v.run["parent_run_id"] for v in views if v and v.run["parent_run_id"]}
        return views, {p for p in parents
                       if browse.get_run(c, p, count_steps=False, children=False)}

    views, parents_here = wh.read(read)
    missing = [r for r, v in zip(run, views, strict=True) if v is None]
    if missing:
        return not_found(request, "no run " + ", ".join(f"'{r}'" for r in missing))
    found = [v for v in views if v is not None]
    score = shared_score(found)
    charts = {}
    if any(run_charts.draws_curves(v) for v in found):
        charts["losses"] = chart(compare_charts.losses_figure(found), "chart-losses",
                                 "Training and validation loss of each run per step")
    if score:
        charts["score"] = chart(compare_charts.score_figure(found, score), "chart-score",
                                f"Validation {score} of each run per evaluation")
    columns = final_columns(found)
    return page(request, "compare.html", title=f"Compare {len(found)} runs", charts=charts,
                score=score, colours=COMPARE_COLOURS,
                problems=sorted({str(v.run["problem_name"]) for v in found}),
                picks=[(compare_charts.label(v), v.score_metric)
                       for v in found],
                rows=[table_row(v, columns, v.run["parent_run_id"] in parents_here)
                      for v in found],
                columns=[f"{s} {m}" for s, m in columns],
                no_steps=[compare_charts.label(v) for v in found
                          if not run_charts.draws_curves(v)],
                downsampled=any(v.downsampled for v in found),
                evals_downsampled=any(v.evals_downsampled for v in found),
                max_points=DEFAULT_POINTS)
