"""Several runs' figure (`aicf-induct plot compare`), as the dashboard's compare page draws
it: each run's training loss per step on the path it took and its validation loss per
evaluation (dashed) in its own colour, log scale; below, the validation score when the runs
share one. Curves longer than `warehouse.run_view.DEFAULT_POINTS` are downsampled there (M4)."""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from aicf_induct.plots.run import cover_steps, dots, not_finite_steps, rug
from warehouse.run_view import COMPARE_COLOURS, RunView, loss_range, shared_score, steps_above


def compare_figure(views: list[RunView]) -> Figure:
    """The runs' losses overlaid, one colour a run, and their validation score below when
    they share one (else the title says so; and that their losses are not comparable, when
    they are of different problems)."""
    score = shared_score(views)
    fig = Figure(figsize=(10, 6.5 if score else 4.5), layout="constrained")
    if score:
        loss_ax, score_ax = fig.subplots(2, 1, sharex=True, height_ratios=[2, 1])
    else:
        loss_ax, score_ax = fig.subplots(), None
    for view, colour in zip(views, COMPARE_COLOURS, strict=False):
        name = str(view.run["run_id"])[:12]
        steps, loss = view.curves["loss"]
        loss_ax.plot(steps, loss, color=colour, lw=0.9, label=f"{name} train loss",
                     **dots(loss))
        bad = not_finite_steps(steps, loss)
        if len(bad):  # a step of inf or NaN has no point on the curve: a tick in its colour
            rug(loss_ax, bad, colour, f"{name} loss inf or NaN")
        cover_steps(loss_ax, view)  # (a diverged run's x range ended at its last finite loss)
        x, y = view.evals_of("val", "loss")
        if x:
            loss_ax.plot(x, y, color=colour, lw=1.3, ls="--", marker="o", ms=3,
                         label=f"{name} val loss")
        if score_ax is not None and score:
            x, y = view.evals_of("val", score)
            score_ax.plot(x, y, color=colour, lw=1.3, marker="o", ms=3,
                          label=f"{name} val {score}")
    loss_ax.set_yscale("log")
    _stop_at_divergence(loss_ax, views)
    loss_ax.set_ylabel("loss")
    problems = sorted({str(v.run["problem_name"]) for v in views})
    title = f"{len(views)} runs of {', '.join(problems)}"
    if len(problems) > 1:
        title += " (different problems: their losses are not comparable)"
    if score_ax is None:
        title += "; no validation score: the runs share none"
    loss_ax.set_title(textwrap.fill(title, width=100), loc="left")
    # beside the axes: 2 entries a run would cover the curves
    loss_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    bottom = loss_ax
    if score_ax is not None:
        score_ax.set_ylabel(f"val {score}")
        bottom = score_ax
    bottom.set_xlabel("step")
    return fig


def _stop_at_divergence(ax: Axes, views: list[RunView]) -> None:
    """Stop the loss axis at `loss_range`'s top when a run diverged past it, with a tick at
    the top edge for each step whose loss lies above, in the run's colour."""
    bounds = loss_range(views)
    if bounds is None:
        return
    ax.set_ylim(*bounds)
    for view, colour in zip(views, COMPARE_COLOURS, strict=False):
        above = steps_above(view, bounds[1])
        if above:
            rug(ax, np.asarray(above), colour, f"{str(view.run['run_id'])[:12]} loss above "
                f"{bounds[1]:.3g}", y=1.0)
