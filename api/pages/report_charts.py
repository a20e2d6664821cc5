"""Charts of the pattern pages: leaderboard bars, pattern performance with intervals, the
correlation heatmap with FDR marks, the rules' effects with intervals."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from warehouse.reports import leaderboard_score


def _num(v: Any) -> float:
    return float(v) if v is not None and math.isfinite(float(v)) else math.nan


def _diverged(n: int) -> str:
    return f" ({n} diverged: not in the scores)" if n else ""


def leaderboard_figure(rows: pd.DataFrame) -> go.Figure:
    """Mean score per structure (bars, in rank order) and the best run's score (markers); the
    axis names the split the scores are of."""
    labels = [f"#{r.rank} {str(r.fingerprint)[:8]} ({r.param_count} p)"
              for r in rows.itertuples()]
    metric = leaderboard_score(rows)
    hover = [f"fingerprint {r.fingerprint}<br>{r.runs} runs{_diverged(d)}, "
             f"{r.param_count} parameters<br>"
             f"mean {metric} {_num(r.mean_score):.4g}, best {_num(r.best_score):.4g}"
             for r, d in zip(rows.itertuples(), rows["diverged"].tolist(), strict=True)]
    fig = go.Figure([
        go.Bar(x=labels, y=rows["mean_score"].tolist(), name=f"mean {metric}", hovertext=hover,
               hoverinfo="text", marker_color="#4c78a8"),
        go.Scatter(x=labels, y=rows["best_score"].tolist(), name=f"best {metric}", mode="markers",
                   marker={"symbol": "line-ew-open", "size": 22, "color": "#e45756",
                           "line": {"width": 3}}),
    ])
    fig.update_layout(height=380, yaxis_title=metric, margin={"t": 20, "b": 80},
                      legend={"orientation": "h", "y": 1.08})
    return fig


def pattern_figure(rows: pd.DataFrame, pattern: str) -> go.Figure:
    """Mean normalized score per value of one pattern, with its 95 % t interval."""
    mean = rows["mean_norm_score"].astype(float)
    hi = (rows["ci95_high"].astype(float) - mean).fillna(0)
    lo = (mean - rows["ci95_low"].astype(float)).fillna(0)
    hover = [f"{pattern} = {r.value:g}<br>{r.runs} runs on {r.problems} problems<br>"
             f"mean {_num(r.mean_norm_score):.3f} [{_num(r.ci95_low):.3f}, "
             f"{_num(r.ci95_high):.3f}]" for r in rows.itertuples()]
    fig = go.Figure(go.Scatter(
        x=rows["value"].tolist(), y=mean.tolist(), mode="markers+lines", hovertext=hover,
        hoverinfo="text", error_y={"type": "data", "symmetric": False, "array": hi.tolist(),
                                   "arrayminus": lo.tolist()},
        marker={"size": 10}, name=pattern))
    fig.update_layout(height=360, xaxis_title=pattern, yaxis_title="mean normalized score",
                      yaxis_range=[0, 1.05], margin={"t": 20})
    return fig


def correlation_heatmap(rows: list[dict[str, Any]], fdr: float) -> go.Figure:
    """Features × traits, coloured by the correlation; a cell's hover gives its CI, q and
    problem count; `*` marks q <= fdr (Benjamini–Hochberg over the fit's pairs)."""
    features = sorted({r["feature"] for r in rows})
    traits = sorted({r["trait"] for r in rows})
    at = {(r["feature"], r["trait"]): r for r in rows}
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    hover: list[list[str]] = []
    for f in features:
        zr: list[float | None] = []
        tr: list[str] = []
        hr: list[str] = []
        for t in traits:
            r = at.get((f, t))
            if r is None:
                zr.append(None)
                tr.append("")
                hr.append(f"{f} × {t}: not mined")
                continue
            q = r["q_value"]
            zr.append(r["correlation"])
            tr.append("*" if q is not None and q <= fdr else "")
            hr.append(f"<b>{f}</b> × <b>{t}</b><br>r = {_num(r['correlation']):.3f} "
                      f"[{_num(r['ci_low']):.2f}, {_num(r['ci_high']):.2f}]<br>"
                      f"q = {_num(q):.3g}, p = {_num(r['p_value']):.3g}, "
                      f"{r['problems']} problems")
        z.append(zr)
        text.append(tr)
        hover.append(hr)
    fig = go.Figure(go.Heatmap(
        z=z, x=traits, y=features, text=text, texttemplate="%{text}", textfont={"size": 16},
        hovertext=hover, hovertemplate="%{hovertext}<extra></extra>", colorscale="RdBu",
        zmid=0, zmin=-1, zmax=1,
        colorbar={"title": {"text": "r"}}))
    fig.update_layout(height=max(320, 22 * len(features) + 140),
                      margin={"t": 20, "l": 220, "b": 120}, xaxis={"tickangle": -30},
                      yaxis={"autorange": "reversed"})
    return fig


def rules_figure(rows: list[dict[str, Any]], fdr: float) -> go.Figure:
    """Each rule's effect on normalized score with its 95 % bootstrap CI; filled markers for
    q <= fdr."""
    labels = [f"{r['condition']} ⇒ {r['trait']}" for r in rows]
    eff = [_num(r["effect"]) for r in rows]
    hi = [_num(r["ci_high"]) - e for r, e in zip(rows, eff, strict=True)]
    lo = [e - _num(r["ci_low"]) for r, e in zip(rows, eff, strict=True)]
    sig = [r["q_value"] is not None and r["q_value"] <= fdr for r in rows]
    fig = go.Figure(go.Scatter(
        x=eff, y=labels, mode="markers", hovertext=[r["text"] for r in rows], hoverinfo="text",
        error_x={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
        marker={"size": 11, "symbol": ["circle" if s else "circle-open" for s in sig],
                "color": "#4c78a8"}))
    fig.add_vline(x=0, line_dash="dot", line_color="#888")
    fig.update_layout(height=max(260, 36 * len(rows) + 100), margin={"t": 20, "l": 360},
                      xaxis_title="effect on normalized score", yaxis={"autorange": "reversed"})
    return fig


def proposal_figure(candidates: list[dict[str, Any]]) -> go.Figure:
    """Each proposed structure's expected normalized error (0 = the corpus's best) with its
    interval, best first."""
    labels = [f"#{c['rank']} {c['model'].split('|')[0]}" for c in candidates]
    exp = [_num(c["expected_norm_error"]) for c in candidates]
    hi = [_num(c["high"]) - e for c, e in zip(candidates, exp, strict=True)]
    lo = [e - _num(c["low"]) for c, e in zip(candidates, exp, strict=True)]
    hover = [f"{c['structure_key']}<br>expected {_num(c['expected_norm_error']):.3f} "
             f"[{_num(c['low']):.3f}, {_num(c['high']):.3f}]<br>"
             + "<br>".join(f"{k}: {_num(v):.3f}" for k, v in (c.get("on_neighbors") or {}).items())
             for c in candidates]
    fig = go.Figure(go.Scatter(
        x=exp, y=labels, mode="markers", hovertext=hover, hoverinfo="text",
        error_x={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
        marker={"size": 11, "color": "#54a24b"}))
    fig.update_layout(height=max(240, 40 * len(candidates) + 90), margin={"t": 20, "l": 420},
                      xaxis_title="expected normalized error (0 = best of the corpus)",
                      xaxis_range=[-0.05, 1.05], yaxis={"autorange": "reversed"})
    return fig
