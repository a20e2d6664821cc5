"""The compare page's charts, from several runs' `warehouse.run_view.RunView`s: each run's
training loss on its path and its validation loss per evaluation in one colour, and the
validation score the runs share. Plain dicts, as the run page's (see run_charts)."""

from __future__ import annotations

import math
from typing import Any

from api.pages.run_charts import Figure, step_mode, trace
from warehouse.run_view import COMPARE_COLOURS, RunView, loss_range, steps_above


def label(view: RunView) -> str:
    """A run's short name in legends: its id's first 12 characters, as the runs list shows."""
    return str(view.run["run_id"])[:12]


def _layout(y_title: str, log: bool, height: int) -> Figure:
    return {"height": height, "margin": {"t": 30, "b": 40, "l": 60, "r": 20},
            "hovermode": "closest", "legend": {"orientation": "h", "y": 1.12},
            "xaxis": {"title": {"text": "step"}},
            "yaxis": {"title": {"text": y_title}, **({"type": "log"} if log else {})}}


def losses_figure(views: list[RunView]) -> Figure:
    """Per run, in its colour: training loss per step on the path it took (downsampled as
    the run page's) and validation loss per evaluation, dashed; log scale, stopped at
    `loss_range`'s top when a run diverged past it (its steps above marked at the top)."""
    data: list[dict[str, Any]] = []
    for view, colour in zip(views, COMPARE_COLOURS, strict=False):
        name, group = label(view), str(view.run["run_id"])
        steps, loss = view.curves["loss"]
        data.append(trace(steps.tolist(), loss.tolist(), f"{name} train loss",
                          mode=step_mode(loss.tolist()), legendgroup=group,
                          line={"width": 1, "color": colour},
                          marker={"size": 4, "color": colour}))
        x, y = view.evals_of("val", "loss")
        if x:
            data.append(trace(x, y, f"{name} val loss", mode="lines+markers",
                              legendgroup=group, line={"color": colour, "dash": "dash"},
                              marker={"size": 5, "color": colour}))
    layout = _layout("loss (log)", True, 480)
    bounds = loss_range(views)
    if bounds is not None:  # a run diverged: stop the axis there, mark its steps above it
        layout["yaxis"]["range"] = [math.log10(bounds[0]), math.log10(bounds[1])]
        for view, colour in zip(views, COMPARE_COLOURS, strict=False):
            above = steps_above(view, bounds[1])
            if above:
                data.append(trace(above, [bounds[1]] * len(above),
                                  f"{label(view)} loss above {bounds[1]:.3g}", mode="markers",
                                  legendgroup=str(view.run["run_id"]), cliponaxis=False,
                                  marker={"symbol": "triangle-up", "size": 7,
                                          "color": colour}))
    return {"data": data, "layout": layout}


def score_figure(views: list[RunView], metric: str) -> Figure:
    """Per run, in its colour: the validation `metric` per evaluation."""
    data: list[dict[str, Any]] = []
    for view, colour in zip(views, COMPARE_COLOURS, strict=False):
        x, y = view.evals_of("val", metric)
        if x:
            data.append(trace(x, y, f"{label(view)} val {metric}", mode="lines+markers",
                              legendgroup=str(view.run["run_id"]), line={"color": colour},
                              marker={"size": 5, "color": colour}))
    return {"data": data, "layout": _layout(f"val {metric}", False, 320)}
