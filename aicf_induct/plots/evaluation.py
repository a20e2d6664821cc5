"""The figure of an induction evaluation (`aicf-induct induce evaluate --plot FILE`): each
method's mean normalized error at each k with its 95 % interval, and the proposer's top-1
against each warm start's top-3 (the issue's goal line), with Holm's p, beside it for scale
the same comparison for the picks that train on the problem (the full search, the choice
oracle) where the evaluation holds them.

It reads the evaluation's tables as the CLI prints them (`evaluate.Evaluation.summary`,
`.top1_vs_three`, `.ceilings_vs_three`, `.gaps`), so it needs nothing of the induction layer
itself."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

K_STYLE = {1: ("o", "#4c78a8"), 3: ("s", "#f58518"), 5: ("D", "#54a24b")}  # k -> marker, colour
LABELS = {"proposer": "propose", "knn": "kNN", "portfolio": "portfolio",
          "average": "best on average", "random": "random", "default": "default MLP",
          "full_search": "full search (validation)", "choice_oracle": "choice oracle",
          "oracle": "test oracle"}
ONE_PICK = ("default", "full_search", "choice_oracle", "oracle")  # the same at every k
# the references held against the warm starts beside the top-1: marker, colour, row offset
CEILING_STYLE = {"full_search": ("s", "#7f7f7f", -0.22), "choice_oracle": ("^", "#b279a2", -0.4)}


def evaluation_figure(summary: pd.DataFrame, versus: pd.DataFrame,
                      gaps: Mapping[int, float], title: str,
                      ceilings: pd.DataFrame | None = None) -> Figure:
    """Left: per method (rows, in the summary's order) and k (markers), the mean normalized
    error with its 95 % interval; a method that picks one candidate whatever k is drawn
    once. Right, when `versus` has rows: the proposer's top-1 minus each warm start's
    top-3 (negative: the one untrained pick is better), interval and Holm p; below each,
    the `ceilings` rows' methods against the same warm start, smaller, for scale."""
    panels = 2 if len(versus) else 1
    methods = list(dict.fromkeys(summary["method"]))
    fig = Figure(figsize=(5.5 * panels + 1.5, 1.2 + 0.45 * len(methods)), layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False)[0]
    _errors(axes[0], summary, methods)
    if panels == 2:
        _versus(axes[1], versus, ceilings if ceilings is not None else versus.iloc[:0])
    gap = gaps.get(1, math.nan)
    note = f"; the top-1 closes {gap:.0%} of the default → full-search gap" \
        if math.isfinite(gap) else ""
    # wrapped to the figure's width, so a long header does not widen the image
    fig.suptitle(textwrap.fill(f"{title}{note}", width=int(fig.get_figwidth() * 14)),
                 x=0.01, ha="left", fontsize="medium")
    return fig


def _errors(ax: Axes, summary: pd.DataFrame, methods: list[str]) -> None:
    ks = sorted(int(k) for k in summary["k"].unique())
    # the smallest k on top within a method's row, as the table lists them
    offsets = dict(zip(ks, np.linspace(0.25, -0.25, len(ks)) if len(ks) > 1 else [0.0],
                       strict=True))
    y_of = {m: len(methods) - 1 - i for i, m in enumerate(methods)}
    for k in ks:
        rows = summary[(summary["k"] == k) & ~(summary["method"].isin(ONE_PICK) & (k != ks[0]))]
        marker, colour = K_STYLE.get(k, ("^", "#b279a2"))
        y = np.array([y_of[m] + (0.0 if m in ONE_PICK else offsets[k]) for m in rows["method"]])
        x = rows["norm_error"].to_numpy(float)
        err = np.vstack([x - rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float) - x])
        ax.errorbar(x, y, xerr=err, fmt=marker, color=colour, capsize=3, label=f"k = {k}")
    ax.set_yticks(range(len(methods)), [LABELS.get(m, m) for m in reversed(methods)])
    ax.set_xlabel("mean normalized error (0: best of the space, 1: its median), 95 % CI")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")


def _versus(ax: Axes, versus: pd.DataFrame, ceilings: pd.DataFrame) -> None:
    rows = versus.reset_index(drop=True)
    y = np.arange(len(rows))[::-1]
    x = rows["mean_diff"].to_numpy(float)
    err = np.vstack([x - rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float) - x])
    ax.errorbar(x, y, xerr=err, fmt="o", color="#4c78a8", capsize=3, label="propose top-1")
    y_of = dict(zip(rows["baseline"], y, strict=True))
    for method, (marker, colour, dy) in CEILING_STYLE.items():
        ref = ceilings[(ceilings["method"] == method) & ceilings["baseline"].isin(y_of)]
        if not len(ref):
            continue
        rx = ref["mean_diff"].to_numpy(float)
        rerr = np.vstack([rx - ref["ci_low"].to_numpy(float),
                          ref["ci_high"].to_numpy(float) - rx])
        ax.errorbar(rx, [y_of[b] + dy for b in ref["baseline"]], xerr=rerr, fmt=marker,
                    color=colour, capsize=2, markersize=4, elinewidth=0.8,
                    label=f"{LABELS[method]}, for scale")
    ax.axvline(0.0, color="grey", linestyle="--", linewidth=1)
    ax.set_yticks(y, [f"{LABELS.get(b, b)}-{int(k)}" for b, k in
                      zip(rows["baseline"], rows["baseline_k"], strict=True)])
    for xi, yi, p in zip(x, y, rows["p_holm"].to_numpy(float), strict=True):
        ax.annotate(f"Holm p {p:.2g}", (xi, yi), textcoords="offset points", xytext=(0, 7),
                    ha="center", fontsize="small")
    ax.set_xlabel("top-1 − the warm start's top-3 (< 0: the one pick is better), 95 % CI")
    ax.set_title("one untrained pick against three trained", loc="left", fontsize="medium")
    ax.grid(axis="x", alpha=0.3)
    if len(ceilings):  # below the panel: inside, it would cover the lowest row's markers
        ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3,
                  frameon=False)
