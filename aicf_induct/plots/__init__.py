"""Figures as image files, with matplotlib: a run's curves with its events marked, the mined
correlation heatmap, a problem's leaderboard (what `aicf-induct plot` writes), and an
induction evaluation (`induce evaluate --plot`); each function returns a
`matplotlib.figure.Figure` (no pyplot, no global state) that tests read back.

The data comes from the warehouse's own readers (`warehouse.run_view`, `warehouse.browse`,
`warehouse.reports`), the ones the dashboard draws from; an evaluation's, from the tables
`induce evaluate` prints (`evaluation.py`).
"""

from __future__ import annotations

from aicf_induct.plots.evaluation import evaluation_figure
from aicf_induct.plots.reports import correlation_figure, leaderboard_figure
from aicf_induct.plots.run import run_figure
from aicf_induct.plots.save import save_figure

__all__ = ["correlation_figure", "evaluation_figure", "leaderboard_figure", "run_figure",
           "save_figure"]
