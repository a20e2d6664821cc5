"""The run page's charts, from a `warehouse.run_view.RunView`: the loss curves with the
trigger / decision / rewrite / rollback markers, and the step dynamics (grad norm, update
ratio, learning rate)."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from warehouse.run_view import RunView

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


def _evals(view: RunView, split: str, metric: str) -> tuple[list[int], list[float]]:
    rows = [e for e in view.evals if e["split"] == split and e["metric"] == metric
            and e["value"] is not None]
    return [int(e["step"]) for e in rows], [float(e["value"]) for e in rows]


def _score_metric(view: RunView) -> str | None:
    metrics = {e["metric"] for e in view.evals if e["split"] == "val"}
    return next((m for m in ("accuracy", "r2") if m in metrics), None)


def curves_figure(view: RunView) -> go.Figure:
    """Training loss per step (downsampled, see run_view), train and validation loss per
    evaluation, one marker trace per event kind at the event's exact step and loss, and the
    validation score; rolled-back spans shaded."""
    score = _score_metric(view)
    fig = make_subplots(rows=2 if score else 1, cols=1, shared_xaxes=True,
                        row_heights=[0.7, 0.3] if score else [1.0], vertical_spacing=0.06)
    steps, loss = view.curves["loss"]
    fig.add_trace(go.Scatter(x=steps.tolist(), y=loss.tolist(), mode="lines",
                             name="train loss (step)",
                               line={"width": 1, "color": "#999"}), row=1, col=1)
    for split, colour in (("train", "#0072b2"), ("val", "#cc79a7")):
        x, y = _evals(view, split, "loss")
        if x:
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=f"{split} loss",
                                     marker={"size": 4}, line={"color": colour}), row=1, col=1)
    for kind, (symbol, colour) in MARKERS.items():
        groups = [g for g in event_groups(view) if g[-1]["kind"] == kind]
        if groups:
            fig.add_trace(go.Scatter(
                x=[g[-1]["step"] for g in groups],
                y=[g[-1]["loss"] for g in groups],
                mode="markers", name=kind, hoverinfo="text",
                hovertext=["<br><br>".join(hover(e) for e in g) for g in groups],
                marker={"symbol": symbol, "size": 13, "color": colour,
                        "line": {"width": 1, "color": "#333"}}), row=1, col=1)
    for lo, hi in view.rollback_windows:
        fig.add_vrect(x0=lo, x1=hi, fillcolor="#d55e00", opacity=0.12, line_width=0,
                      annotation_text="rolled back, replayed", annotation_position="top left",
                      row=1, col=1)
    if score:
        for split, colour in (("train", "#0072b2"), ("val", "#cc79a7")):
            x, y = _evals(view, split, score)
            if x:
                fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=f"{split} {score}",
                                         line={"color": colour, "dash": "dot"}), row=2, col=1)
        fig.update_yaxes(title_text=score, row=2, col=1)
    fig.update_yaxes(title_text="loss (log)", type="log", row=1, col=1)  # spikes stay readable
    fig.update_xaxes(title_text="step", row=2 if score else 1, col=1)
    fig.update_layout(height=520, margin={"t": 30, "b": 40, "l": 60, "r": 20},
                      hovermode="closest", legend={"orientation": "h", "y": 1.08})
    return fig


def dynamics_figure(view: RunView) -> go.Figure:
    """Gradient norm, update ratio and learning rate per step (log scale; downsampled)."""
    rows = [("grad_norm", "grad norm"), ("update_ratio", "update ratio"), ("lr", "lr")]
    fig = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, vertical_spacing=0.05)
    for i, (name, label) in enumerate(rows, start=1):
        x, y = view.curves[name]
        fig.add_trace(go.Scatter(x=x.tolist(), y=y.tolist(), mode="lines", name=label,
                                 line={"width": 1}),
                      row=i, col=1)
        fig.update_yaxes(title_text=label, type="log", row=i, col=1)
        for e in view.marked_events():
            if e["kind"] in ("rewrite", "rollback"):
                fig.add_vline(x=e["step"], line_width=1, line_dash="dot",
                              line_color=MARKERS[e["kind"]][1], row=i, col=1)
    fig.update_xaxes(title_text="step", row=len(rows), col=1)
    fig.update_layout(height=460, margin={"t": 20, "b": 40, "l": 60, "r": 20},
                      showlegend=False)
    return fig
