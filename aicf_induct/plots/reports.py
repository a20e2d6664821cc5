"""Figures of the mined correlations (heatmap with FDR marks) and of a problem's
leaderboard (mean score per structure with the best run's score)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from warehouse.reports import leaderboard_score


def most_significant(rows: list[dict[str, Any]], top: int) -> list[dict[str, Any]]:
    """The rows whose feature and trait are among those of the `top` most significant rows
    (lowest q-value): the grid a figure can show of a corpus's thousands (0: every row)."""
    if top <= 0 or len(rows) <= top:
        return rows
    ranked = sorted(rows, key=lambda r: math.inf if r["q_value"] is None or
                    not math.isfinite(r["q_value"]) else r["q_value"])[:top]
    features, traits = {r["feature"] for r in ranked}, {r["trait"] for r in ranked}
    return [r for r in rows if r["feature"] in features and r["trait"] in traits]


def correlation_figure(rows: list[dict[str, Any]], fdr: float = 0.05) -> Figure:
    """Features × traits coloured by the correlation; `*` on cells with q <= fdr. No rows
    is a ValueError: an empty grid is no figure (matplotlib warns on its axes)."""
    if not rows:
        raise ValueError("no correlations to draw")
    features = sorted({r["feature"] for r in rows})
    traits = sorted({r["trait"] for r in rows})
    z = np.full((len(features), len(traits)), np.nan)
    fig = Figure(figsize=(2.2 + 1.3 * len(traits), 1.2 + 0.26 * len(features)),
                 layout="constrained")
    ax = fig.subplots()
    for r in rows:
        i, j = features.index(r["feature"]), traits.index(r["trait"])
        z[i, j] = r["correlation"] if r["correlation"] is not None else np.nan
        q = r["q_value"]
        if q is not None and math.isfinite(q) and q <= fdr:
            ax.text(j, i, "*", ha="center", va="center", fontsize=14, fontweight="bold")
    im = ax.imshow(z, cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    ax.set_xticks(range(len(traits)), traits, rotation=30, ha="right")
    ax.set_yticks(range(len(features)), features)
    fig.colorbar(im, ax=ax, label="Spearman r")
    ax.set_title(f"feature × trait correlation (* q ≤ {fdr:g})", loc="left")
    return fig


def leaderboard_figure(board: pd.DataFrame, problem: str) -> Figure:
    """Bars: mean score per structure in rank order; markers: the best run's score; the axis
    names the split the scores are of."""
    labels = [f"#{r.rank} {str(r.fingerprint)[:8]}\n{r.param_count} params"
              for r in board.itertuples()]
    metric = leaderboard_score(board)
    fig = Figure(figsize=(max(5.0, 1.1 * len(board) + 2), 4), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(board))
    ax.bar(x, board["mean_score"].astype(float), color="#4c78a8", label=f"mean {metric}")
    ax.scatter(x, board["best_score"].astype(float), marker="_", s=400, c="#e45756",
               linewidths=3, zorder=3, label=f"best {metric}")
    ax.set_xticks(x, labels, fontsize="small")
    ax.set_ylabel(metric)
    ax.set_title(f"leaderboard: {problem}", loc="left")
    ax.legend(fontsize="small")
    return fig
