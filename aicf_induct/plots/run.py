"""A run's figure: training loss per step (log scale) on the path the run took, each branch
a rollback dropped dotted, with the validation loss per evaluation, one marker collection per
event kind (trigger, decision, rewrite, rollback) at each event's exact step and loss,
rolled-back spans shaded; below, grad norm and update ratio. Curves longer than
`warehouse.run_view.DEFAULT_POINTS` are downsampled there (M4)."""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from warehouse.run_view import MARKED, RunView

# matplotlib marker and colour per event kind (the dashboard's colours)
MARKERS = {"trigger": ("^", "#e69f00"), "decision": ("D", "#56b4e9"),
           "rewrite": ("*", "#009e73"), "rollback": ("X", "#d55e00")}
FEW_POINTS = 30  # a series of no more finite points than this gets a dot on each: one
# point drawn as a line is invisible, a handful hardly shows
NOT_FINITE = "#cc0000"  # shading and rug ticks of the steps whose loss is inf or NaN


def run_figure(view: RunView) -> Figure:
    fig = Figure(figsize=(10, 6.5), layout="constrained")
    loss_ax, dyn_ax = fig.subplots(2, 1, sharex=True, height_ratios=[2, 1])
    steps, loss = view.curves["loss"]
    loss_ax.plot(steps, loss, color="#999", lw=0.8, label="train loss (step)", **dots(loss))
    for k, (x_d, y_d) in enumerate(view.dropped):  # what rollbacks dropped
        loss_ax.plot(x_d, y_d, color="#d55e00", lw=0.8, ls=":", alpha=0.7,
                     label="" if k else "dropped branch (step)", **dots(y_d))
    x, y = view.evals_of("val", "loss")
    if x:
        loss_ax.plot(x, y, color="#cc79a7", lw=1.5, label="val loss", **dots(y))
    loss_ax.set_yscale("log")
    _mark_events(loss_ax, view)
    for k, (lo, hi) in enumerate(view.rollback_windows):
        loss_ax.axvspan(lo, hi, color="#d55e00", alpha=0.12, lw=0,
                        label="" if k else "rolled back, replayed")
    _mark_not_finite(loss_ax, dyn_ax, steps, loss)
    cover_steps(loss_ax, view)
    loss_ax.set_ylabel("loss")
    run = view.run
    loss_ax.set_title(f"run {run['run_id'][:12]}: {run['problem_name']} ({run['origin']}, "
                      f"{run['status']})", loc="left")
    # beside the axes: inside, a dozen entries cover the curves wherever they go
    loss_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    for name, colour in (("grad_norm", "#0072b2"), ("update_ratio", "#e69f00")):
        x_, y_ = view.curves[name]
        dyn_ax.plot(x_, y_, lw=0.8, color=colour, label=name.replace("_", " "), **dots(y_))
    for e in view.marked_events():
        if e["kind"] in ("rewrite", "rollback"):
            dyn_ax.axvline(e["step"], color=MARKERS[e["kind"]][1], lw=0.8, ls=":")
    dyn_ax.set_yscale("log")
    dyn_ax.set_xlabel("step")
    dyn_ax.set_ylabel("grad norm, update ratio")
    dyn_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    return fig


def dots(values: np.ndarray | list[float]) -> dict[str, object]:
    """Line options drawing a dot on each point of a series with few finite points."""
    few = int(np.isfinite(np.asarray(values, dtype=np.float64)).sum()) <= FEW_POINTS
    return {"marker": "o", "ms": 3} if few else {}


def _mark_events(ax: Axes, view: RunView) -> None:
    """A marker per event, one collection per kind, at its step and loss; an event whose
    loss is not finite (None) at the top of the axis, so that every event is drawn."""
    top = ax.get_ylim()[1]  # the curves' range, which the markers must not stretch
    ax.set_ylim(ax.get_ylim())
    for kind in MARKED:
        marker, colour = MARKERS[kind]
        evs = [e for e in view.marked_events() if e["kind"] == kind]
        if evs:
            ys = [e["loss"] if _finite(e["loss"]) else top for e in evs]
            ax.scatter([e["step"] for e in evs], ys, marker=marker, s=90, c=colour,
                       edgecolors="#333", zorder=3, label=kind, clip_on=False)


def _finite(loss: float | None) -> bool:
    return loss is not None and bool(np.isfinite(loss))


def not_finite_steps(steps: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """The steps of a curve whose loss is inf or NaN."""
    return np.asarray(steps)[~np.isfinite(np.asarray(loss, dtype=np.float64))]


def _mark_not_finite(loss_ax: Axes, dyn_ax: Axes, steps: np.ndarray,
                     loss: np.ndarray) -> None:
    """Shade each run of consecutive steps whose loss is inf or NaN on both panels, with a
    rug tick per step: such a step has no point on the curve, and would otherwise vanish."""
    bad = not_finite_steps(steps, loss)
    if not len(bad):
        return
    breaks = np.flatnonzero(np.diff(bad) > 1) + 1
    for k, run in enumerate(np.split(bad, breaks)):
        for ax in (loss_ax, dyn_ax):
            ax.axvspan(run[0] - 0.5, run[-1] + 0.5, color=NOT_FINITE, alpha=0.1, lw=0,
                       label="" if k or ax is dyn_ax else "loss inf or NaN")
    rug(loss_ax, bad, NOT_FINITE, "_rug")


def rug(ax: Axes, steps: np.ndarray, colour: str, label: str, y: float = 0.0) -> None:
    """A tick per step along the axis's bottom edge (`y` 0; the top edge at 1), whatever its
    y range: where a curve has no point (its loss inf or NaN, or above the axis)."""
    ax.plot(steps, np.full(len(steps), y), ls="", marker="|", ms=12, color=colour,
            transform=ax.get_xaxis_transform(), clip_on=False, label=label)


def cover_steps(ax: Axes, view: RunView) -> None:
    """Make the x range hold every logged step and event: matplotlib sizes it by the finite
    points only, so a run that diverged would end at its last finite loss."""
    xs = [np.asarray(view.curves["loss"][0], dtype=np.float64),
          np.asarray([e["step"] for e in view.events], dtype=np.float64)]
    xs += [np.asarray(s, dtype=np.float64) for s, _ in view.dropped]
    x = np.concatenate(xs)
    if len(x):
        ax.update_datalim(np.column_stack([x, np.ones(len(x))]), updatey=False)
        ax.autoscale_view(scaley=False)
