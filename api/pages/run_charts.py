"""The run page's charts, from a `warehouse.run_view.RunView`: the loss curves with the
trigger / decision / rewrite / rollback markers, and the step dynamics (grad norm, update
ratio, learning rate)."""

from __future__ import annotations

import html
import itertools
import math
from typing import Any

from warehouse.run_view import RunView

# A figure as the plain dict plotly.js takes: building plotly's graph objects validates every
# property in Python, several times slower than the whole rest of the page (see
# benchmarks/RESULTS.md, "Dashboard run page").
Figure = dict[str, Any]

# marker symbol and colour per event kind (Plotly's own symbol names)
MARKERS = {"trigger": ("triangle-up", "#e69f00"), "decision": ("diamond", "#56b4e9"),
           "rewrite": ("star", "#009e73"), "rollback": ("x", "#d55e00")}
_SKIP = {"fingerprint_before", "fingerprint_after", "work"}  # detail too long or internal


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt(x)}" for k, x in v.items())
    return str(v)


def hover(event: dict[str, Any]) -> str:
    """An event's decision and its evidence, for its marker's hover: what happened, the
    detail (reason, site, options, ...), and each metric before → after."""
    lines = [f"<b>{event['kind']} {html.escape(str(event['name']))}</b> at step {event['step']}"]
    detail = event["detail"] if isinstance(event["detail"], dict) else {}
    for k, v in detail.items():
        if k not in _SKIP:
            lines.append(f"{html.escape(k)}: {html.escape(_fmt(v))}")
    before = event["metrics_before"] if isinstance(event["metrics_before"], dict) else {}
    after = event["metrics_after"] if isinstance(event["metrics_after"], dict) else {}
    for k in sorted(set(before) | set(after)):
        b, a = before.get(k), after.get(k)
        lines.append(f"{html.escape(k)}: {_fmt(b) if b is not None else '–'}"
                     + (f" → {_fmt(a)}" if a is not None else ""))
    return "<br>".join(lines)


def event_groups(view: RunView) -> list[list[dict[str, Any]]]:
    """The marked events grouped by step, each group ordered trigger → decision → rewrite →
    rollback: one marker per step (the group's last kind), whose hover tells the whole story
    (what fired, what was decided on which evidence, what the rewrite did, why it was undone)."""
    by_step: dict[int, list[dict[str, Any]]] = {}
    for e in view.marked_events():
        by_step.setdefault(int(e["step"]), []).append(e)
    order = list(MARKERS)
    return [sorted(g, key=lambda e: order.index(e["kind"])) for _, g in sorted(by_step.items())]


def trace(x: list, y: list, name: str, yaxis: str = "y", **style: Any) -> Figure:
    """A scatter trace (a figure's `data` entry)."""
    return {"type": "scatter", "x": x, "y": y, "name": name, "xaxis": "x", "yaxis": yaxis,
            **style}


def step_mode(y: list[float]) -> str:
    """"lines", unless no two neighbouring values are finite (one step, or a loss that is NaN
    every other step): a line through isolated points draws nothing, so markers then."""
    finite = [v is not None and math.isfinite(v) for v in y]
    return "lines" if any(a and b for a, b in itertools.pairwise(finite)) else "markers"


def draws_curves(view: RunView) -> bool:
    """Whether the loss chart has anything to draw: a step or an evaluation (a run that
    failed before its first step has neither: the page says so instead of empty axes)."""
    return view.logged_steps > 0 or any(len(s) for s, _ in view.evals.values())


def curves_figure(view: RunView) -> Figure:
    """Training loss per step on the path the run took (downsampled, see run_view), the
    branches rollbacks dropped (dotted), train and validation loss per evaluation, one
    marker trace per event kind at the event's exact step and loss, and the validation score
    below; rolled-back spans shaded."""
    score = view.score_metric
    steps, loss = view.curves["loss"]
    data = [trace(steps.tolist(), loss.tolist(), "train loss (step)",
                  mode=step_mode(loss.tolist()), line={"width": 1, "color": "#999"},
                  marker={"size": 4, "color": "#999"})]
    if view.dropped:  # the branches rollbacks dropped, one trace, broken between them
        xs = [v for s, _ in view.dropped for v in [*s.tolist(), None]][:-1]
        ys = [v for _, x in view.dropped for v in [*x.tolist(), None]][:-1]
        data.append(trace(xs, ys, "dropped branch (step)", mode="lines",
                          line={"width": 1, "color": "#d55e00", "dash": "dot"}, opacity=0.7))
    for split, colour in (("train", "#0072b2"), ("val", "#cc79a7")):
        x, y = view.evals_of(split, "loss")
        if x:
            data.append(trace(x, y, f"{split} loss", mode="lines+markers", marker={"size": 4},
                              line={"color": colour}))
    for kind, (symbol, colour) in MARKERS.items():
        groups = [g for g in event_groups(view) if g[-1]["kind"] == kind]
        if groups:
            data.append(trace(
                [g[-1]["step"] for g in groups], [g[-1]["loss"] for g in groups], kind,
                mode="markers", hoverinfo="text",
                hovertext=["<br><br>".join(hover(e) for e in g) for g in groups],
                marker={"symbol": symbol, "size": 13, "color": colour,
                        "line": {"width": 1, "color": "#333"}}))
    shapes = [{"type": "rect", "xref": "x", "yref": "y domain", "x0": lo, "x1": hi, "y0": 0,
               "y1": 1, "fillcolor": "#d55e00", "opacity": 0.12, "line": {"width": 0}}
              for lo, hi in view.rollback_windows]
    notes = [{"x": lo, "xref": "x", "y": 1, "yref": "y domain", "text": "rolled back, replayed",
              "showarrow": False, "xanchor": "left", "yanchor": "bottom"}
             for lo, _ in view.rollback_windows]
    # one x axis for both panels, anchored under the lower one
    layout: Figure = {
        "height": 520, "margin": {"t": 30, "b": 40, "l": 60, "r": 20},
        "hovermode": "closest", "legend": {"orientation": "h", "y": 1.1},
        "shapes": shapes, "annotations": notes,
        "xaxis": {"title": {"text": "step"}, "anchor": "y2" if score else "y"},
        "yaxis": {"title": {"text": "loss (log)"}, "type": "log",  # spikes stay readable
                  "domain": [0.34, 1] if score else [0, 1]}}
    if score:
        for split, colour in (("train", "#0072b2"), ("val", "#cc79a7")):
            x, y = view.evals_of(split, score)
            if x:
                data.append(trace(x, y, f"{split} {score}", "y2", mode="lines",
                                  line={"color": colour, "dash": "dot"}))
        layout["yaxis2"] = {"title": {"text": score}, "domain": [0, 0.28], "anchor": "x"}
    return {"data": data, "layout": layout}


def dynamics_figure(view: RunView) -> Figure:
    """Gradient norm, update ratio and learning rate per step (log scale; downsampled), a
    dotted line at each rewrite and rollback."""
    rows = [("grad_norm", "grad norm"), ("update_ratio", "update ratio"), ("lr", "lr")]
    data = []
    layout: Figure = {"height": 460, "margin": {"t": 20, "b": 40, "l": 60, "r": 20},
                      "showlegend": False, "xaxis": {"title": {"text": "step"},
                                                     "anchor": f"y{len(rows)}"}}
    for i, (name, label) in enumerate(rows):
        axis = "y" if i == 0 else f"y{i + 1}"
        x, y = view.curves[name]
        data.append(trace(x.tolist(), y.tolist(), label, axis, mode=step_mode(y.tolist()),
                          line={"width": 1}, marker={"size": 4}))
        top = 1 - i / len(rows)
        layout["yaxis" if i == 0 else f"yaxis{i + 1}"] = {
            "title": {"text": label}, "type": "log", "anchor": "x",
            "domain": [top - 1 / len(rows) + 0.04, top]}
    layout["shapes"] = [
        {"type": "line", "xref": "x", "yref": "paper", "x0": e["step"], "x1": e["step"],
         "y0": 0, "y1": 1, "line": {"width": 1, "dash": "dot", "color": MARKERS[e["kind"]][1]}}
        for e in view.marked_events() if e["kind"] in ("rewrite", "rollback")]
    return {"data": data, "layout": layout}
