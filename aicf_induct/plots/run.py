"""A run's figure: training loss per step (log scale) on the path the run took, each branch
a rollback dropped dotted, with the validation loss per evaluation, one marker collection per
event kind (trigger, decision, rewrite, rollback) at each event's exact step and loss,
rolled-back spans shaded; below, grad norm and update ratio. Curves longer than
`warehouse.run_view.DEFAULT_POINTS` are downsampled there (M4)."""

from __future__ import annotations

from matplotlib.figure import Figure

from warehouse.run_view import MARKED, RunView

# matplotlib marker and colour per event kind (the dashboard's colours)
MARKERS = {"trigger": ("^", "#e69f00"), "decision": ("D", "#56b4e9"),
           "rewrite": ("*", "#009e73"), "rollback": ("X", "#d55e00")}


def run_figure(view: RunView) -> Figure:
    fig = Figure(figsize=(10, 6.5), layout="constrained")
    loss_ax, dyn_ax = fig.subplots(2, 1, sharex=True, height_ratios=[2, 1])
    steps, loss = view.curves["loss"]
    loss_ax.plot(steps, loss, color="#999", lw=0.8, label="train loss (step)")
    for k, (x_d, y_d) in enumerate(view.dropped):  # what rollbacks dropped
        loss_ax.plot(x_d, y_d, color="#d55e00", lw=0.8, ls=":", alpha=0.7,
                     label="" if k else "dropped branch (step)")
    x, y = view.evals_of("val", "loss")
    if x:
        loss_ax.plot(x, y, color="#cc79a7", lw=1.5, label="val loss")
    for kind in MARKED:
        marker, colour = MARKERS[kind]
        evs = [e for e in view.marked_events() if e["kind"] == kind and e["loss"] is not None]
        if evs:
            loss_ax.scatter([e["step"] for e in evs], [e["loss"] for e in evs], marker=marker,
                            s=90, c=colour, edgecolors="#333", zorder=3, label=kind)
    for k, (lo, hi) in enumerate(view.rollback_windows):
        loss_ax.axvspan(lo, hi, color="#d55e00", alpha=0.12, lw=0,
                        label="" if k else "rolled back, replayed")
    loss_ax.set_yscale("log")
    loss_ax.set_ylabel("loss")
    run = view.run
    loss_ax.set_title(f"run {run['run_id'][:12]}: {run['problem_name']} ({run['origin']}, "
                      f"{run['status']})", loc="left")
    loss_ax.legend(loc="upper right", fontsize="small", ncols=3)
    for name, colour in (("grad_norm", "#0072b2"), ("update_ratio", "#e69f00")):
        x_, y_ = view.curves[name]
        dyn_ax.plot(x_, y_, lw=0.8, color=colour, label=name.replace("_", " "))
    for e in view.marked_events():
        if e["kind"] in ("rewrite", "rollback"):
            dyn_ax.axvline(e["step"], color=MARKERS[e["kind"]][1], lw=0.8, ls=":")
    dyn_ax.set_yscale("log")
    dyn_ax.set_xlabel("step")
    dyn_ax.legend(loc="upper right", fontsize="small")
    return fig
