"""One run as the dashboard's run page and `aicf-induct plot run` draw it: its step curves
(downsampled), evaluations, final metrics, events and IR snapshots, read on one connection.

Long curves are downsampled here, before anything is drawn: `m4` keeps, per bucket of steps,
the first, last, lowest and highest point of each series (M4, Jugel et al., VLDB 2014), so a
line drawn through them has the envelope of the full curve — spikes survive, which an average
or every-k-th sample would hide. Evaluations are downsampled the same way, each (split,
metric) series on its own (a long run evaluates tens of thousands of times); a series of no
more than `max_points` is kept whole. Markers are never downsampled: every event carries the exact
training loss of its step (of the last step before it, for an event after the last step),
read from the full series.

After a rollback the steps of the abandoned branch and their replay share step numbers (both
are logged; each row's `trajectory` counts the run's rollbacks before it): the curves are the
path the run took (`path`, as the `live_steps` view keeps it: a trajectory starts at its first
row and at the target of the rollback that began it, which names it: `rollback_starts`), each
event's loss is read on the path of the trajectory it happened in (`event_trajectories`: the
one the last rollback before it began), and `rollback_windows` names the spans a branch was
dropped from, so a chart can say so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np

from aicf_induct.json_values import json_safe, stored_json
from warehouse.browse import get_run, run_children

SERIES = ("loss", "grad_norm", "update_ratio", "lr")  # per-step columns a run page draws
MARKED = ("trigger", "decision", "rewrite", "rollback")  # event kinds drawn as markers
DEFAULT_POINTS = 2000  # points per series at most: 500 buckets × 4; plenty for a 1,500 px chart
SCORE_METRICS = ("accuracy", "r2")  # a run's validation score: the first of these evaluated
# runs drawn together (the compare page, `plot compare`): a colour each, in the order given
# (Okabe–Ito, colour-blind safe; grey for its yellow, unreadable on white); so at most 8
COMPARE_COLOURS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9",
                   "#000000", "#7f7f7f")
COMPARE_RUNS = (2, len(COMPARE_COLOURS))  # how many runs a comparison takes, least and most


@dataclass
class RunView:
    # browse.get_run's row (config parsed, logged_steps, live_steps), its `children`
    # (browse.run_children, live_steps counted)
    run: dict[str, Any]
    logged_steps: int  # step rows of the run (rolled-back steps count twice)
    discarded_steps: int  # of them, the rows of branches a rollback dropped (not in `curves`)
    # series name -> (steps, values) on the path taken, each at most `max_points` long, in
    # step order
    curves: dict[str, tuple[np.ndarray, np.ndarray]]
    # per-evaluation results: (split, metric) -> (steps, values) in step order, those that
    # hold a finite value, downsampled as the curves are
    evals: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]
    final: list[dict[str, Any]]  # final results: split, metric, value
    events: list[dict[str, Any]]  # every event, step order; detail/metrics parsed, `loss` exact
    snapshots: list[dict[str, Any]]  # IR snapshots, step order, `ir` parsed
    # [first, last + 1) steps of each dropped branch (runs logged before trajectories: each
    # rollback event's [to, from) steps)
    rollback_windows: list[tuple[int, int]] = field(default_factory=list)
    # the training loss of each branch a rollback dropped: (steps, losses) per trajectory,
    # downsampled as the curves are
    dropped: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    evals_downsampled: bool = False  # whether an evaluation series lost points

    @property
    def live_steps(self) -> int:
        """Step rows on the path the run took (what `curves` draw before downsampling)."""
        return self.logged_steps - self.discarded_steps

    @property
    def downsampled(self) -> bool:
        """Whether a per-step curve was downsampled (`evals_downsampled`: an evaluation's)."""
        return any(len(s) < self.live_steps for s, _ in self.curves.values())

    def marked_events(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] in MARKED]

    def evals_of(self, split: str, metric: str) -> tuple[list[int], list[float]]:
        """(steps, values) of the run's per-evaluation `split` `metric` that hold a value
        (downsampled when there are more than `max_points`)."""
        steps, values = self.evals.get((split, metric), (np.zeros(0, np.int64), np.zeros(0)))
        return steps.tolist(), values.tolist()

    @property
    def score_metric(self) -> str | None:
        """The run's validation score metric (`SCORE_METRICS`); None when it has none."""
        metrics = {m for s, m in self.evals if s == "val"}
        return next((m for m in SCORE_METRICS if m in metrics), None)


def shared_score(views: list[RunView]) -> str | None:
    """The validation score metric every run was evaluated on; None when a run has none or
    they differ (runs drawn together)."""
    picks = {v.score_metric for v in views}
    return picks.pop() if len(picks) == 1 else None


# a loss this many times above every run's first finite loss is a run's divergence: runs
# drawn together stop their log axis there, so one run at 1e200 does not flatten the others
OFF_SCALE = 100.0


def _finite_positive(values: Any) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    return v[np.isfinite(v) & (v > 0)]


def loss_range(views: list[RunView]) -> tuple[float, float] | None:
    """(bottom, top) of the loss axis of runs drawn together when a finite loss lies above
    OFF_SCALE × the largest of the runs' first finite training losses (top is that bound;
    bottom half the least positive loss); None when every loss is below it (autoscale)."""
    firsts = [f[0] for f in (_finite_positive(v.curves["loss"][1]) for v in views) if len(f)]
    if not firsts:
        return None
    top = OFF_SCALE * max(firsts)
    every = np.concatenate([_finite_positive(loss) for v in views for _, loss in _drawn(v)])
    if not len(every) or every.max() <= top:
        return None
    return float(every.min()) / 2, top


def _drawn(view: RunView) -> list[tuple[np.ndarray, np.ndarray]]:
    """The losses a comparison draws of a run, (steps, values): training, validation."""
    steps, loss = view.curves["loss"]
    x, y = view.evals_of("val", "loss")
    return [(np.asarray(steps), np.asarray(loss, dtype=np.float64)),
            (np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.float64))]


def steps_above(view: RunView, top: float) -> list[int]:
    """The steps at which the run's training or validation loss is finite and above `top`
    (drawn as ticks at the top edge: their points lie off the axis)."""
    return sorted({int(s) for steps, loss in _drawn(view)
                   for s in steps[np.isfinite(loss) & (loss > top)]})


# the most points `m4` keeps of a bucket: max_points // PER_BUCKET buckets keep at most
# max_points
PER_BUCKET = 5


def m4(values: np.ndarray, buckets: int) -> np.ndarray:
    """Indices (sorted, unique) of the first, last, min and max of `values` in each of
    `buckets` equal runs of positions, and its first value that is not finite (inf or NaN:
    a divergence must show however long the run); every index when there are no more than
    4 × buckets. A NaN is never a bucket's min or max while the bucket holds a finite
    value."""
    n = len(values)
    if n <= 4 * buckets:
        return np.arange(n)
    starts = np.linspace(0, n, buckets + 1).astype(np.int64)[:-1]
    sizes = np.diff(np.append(starts, n))
    bucket = np.repeat(np.arange(buckets), sizes)
    v = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(v)
    lo = np.where(finite, v, np.inf)
    hi = np.where(finite, -v, np.inf)
    last = np.append(starts[1:], n) - 1
    # each bucket's extreme by one pass (no sort: a sort per series was most of a long
    # run's page), then its first position holding it
    return np.unique(np.concatenate([starts, last, _first_at(lo, starts, sizes, bucket),
                                     _first_at(hi, starts, sizes, bucket),
                                     _first_at(finite.astype(np.float64), starts, sizes,
                                               bucket)]))


def _first_at(x: np.ndarray, starts: np.ndarray, sizes: np.ndarray,
              bucket: np.ndarray) -> np.ndarray:
    """Per bucket (contiguous, non-empty, from `starts`), the first position of its least
    value of `x` (no NaN in `x`)."""
    at = np.flatnonzero(x == np.repeat(np.minimum.reduceat(x, starts), sizes))
    return at[np.r_[True, bucket[at[1:]] != bucket[at[:-1]]]]


NO_CUT = np.iinfo(np.int64).max


BIGINT = (-(2**63), 2**63 - 1)  # DuckDB's BIGINT range, which TRY_CAST keeps


def json_bigint(v: Any) -> int | None:
    """`v` (parsed JSON) when it is a JSON integer that fits a BIGINT, else None: as the
    `trajectory_cuts` view reads a rollback's `to_step` and `trajectory` (json_type BIGINT or
    UBIGINT, then TRY_CAST), so a string ("2"), a fraction (1.5) and a whole number written
    as a float (2.0, 1e2: `json.loads` gives a float) are none."""
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v if BIGINT[0] <= v <= BIGINT[1] else None


def _rollback_field(event: dict[str, Any], key: str) -> int | None:
    d = event["detail"]
    if event["kind"] != "rollback" or not isinstance(d, dict):
        return None
    return json_bigint(d.get(key))


def rollback_target(event: dict[str, Any]) -> int | None:
    """The step a `rollback` event (`detail` parsed) went back to, its detail's `to_step`
    when a JSON integer (`json_bigint`); None for another event, or a rollback that went
    nowhere (a `give_up` names no target; nor does a `to_step` of "2", 1.5 or 2.0)."""
    return _rollback_field(event, "to_step")


def rollback_trajectory(event: dict[str, Any]) -> int | None:
    """The trajectory a `rollback` event (`detail` parsed) names as the one it began (its
    detail's `trajectory`, a JSON integer: `json_bigint`); None for another event, one
    logged before the field, or one whose field is not an integer."""
    return _rollback_field(event, "trajectory")


def went_back(event: dict[str, Any]) -> bool:
    """Whether an event (`detail` parsed) is a rollback that took the run back, beginning a
    trajectory (`rollback_target`: a `give_up` names no target)."""
    return rollback_target(event) is not None


def _began(events: list[dict[str, Any]], base: int,
           begins: Callable[[dict[str, Any]], bool] = went_back
           ) -> list[tuple[int, dict[str, Any]]]:
    """(the trajectory it began, the event) of each of a run's events that `begins` one, in
    the order logged: the trajectory its detail names (`trajectory`), else (logged before
    the field) by order: the n-th begins `base` + n."""
    out: list[tuple[int, dict[str, Any]]] = []
    for e in events:
        if begins(e):
            t = rollback_trajectory(e)
            out.append((base + len(out) + 1 if t is None else t, e))
    return out


def rollback_starts(events: list[dict[str, Any]], base: int = 0,
                    begins: Callable[[dict[str, Any]], bool] = went_back) -> dict[int, int]:
    """Of a run's events (`detail` parsed, in the order logged): trajectory -> the target
    step of the rollback that began it, as the `trajectory_cuts` view reads them: the
    trajectory a rollback that went back names (`trajectory` in its detail), else, for one
    logged before the field, `base` + n for the n-th that `begins` one (`base`: 0, or a
    fork's first row's trajectory: it starts at its parent's count)."""
    starts: dict[int, int] = {}
    for t, e in _began(events, base, begins):
        to = rollback_target(e)
        if to is not None:
            starts[t] = min(to, starts.get(t, to))
    return starts


def event_trajectories(events: list[dict[str, Any]], base: int = 0,
                       begins: Callable[[dict[str, Any]], bool] = went_back) -> list[int]:
    """Of a run's events (`detail` parsed, in the order logged): the trajectory each was
    logged in, those that `begins` one (the rollbacks that went back) in the one they left;
    before the first of them, the one before the trajectory it began (`base` when it names
    none)."""
    began = [t for t, _ in _began(events, base, begins)]
    now, ahead = (began[0] - 1 if began else base), iter(began)
    out: list[int] = []
    for e in events:
        out.append(now)
        if begins(e):
            now = next(ahead)
    return out


def trajectory_cuts(step: np.ndarray, trajectory: np.ndarray, upto: int | None = None,
                    starts: dict[int, int] | None = None) -> dict[int, int]:
    """Of a run's step rows (their step numbers and trajectories): each trajectory's cut, the
    least start of the later trajectories up to `upto` (None: all), as the `trajectory_cuts`
    view gives it; a trajectory with none after it is absent. A trajectory starts at its
    first row, and at `starts` (`rollback_starts`: its rollback's target), which holds a
    trajectory the run ended in before logging any row."""
    kept = set((trajectory if upto is None else trajectory[trajectory <= upto]).tolist())
    begins = {t: int(s) for t, s in (starts or {}).items() if upto is None or t <= upto}
    for t in kept:
        first = int(step[trajectory == t].min())
        begins[t] = min(first, begins.get(t, first))
    out: dict[int, int] = {}
    later = NO_CUT
    for t in sorted(begins, reverse=True):
        if later != NO_CUT and t in kept:
            out[t] = later
        later = min(later, begins[t])
    return out


def on_path(step: np.ndarray, trajectory: np.ndarray, cuts: dict[int, int],
            upto: int | None = None, at_cut: bool = False) -> np.ndarray:
    """Which rows lie on the path the run had taken in trajectory `upto` (None: every row's),
    given the cuts of that path's trajectories (`trajectory_cuts`): a row of a trajectory up
    to `upto` before its cut, or at it with `at_cut` (a result at the cut measured the model
    the rollback went back to)."""
    if cuts:  # a cut per distinct trajectory, spread to its rows (not a lookup per row)
        ts, which = np.unique(trajectory, return_inverse=True)
        limit = np.array([cuts.get(t, NO_CUT) for t in ts.tolist()], np.int64)[which]
    else:
        limit = np.full(len(trajectory), NO_CUT, np.int64)
    keep = (step <= limit) if at_cut else (step < limit)
    return keep if upto is None else keep & (trajectory <= upto)


def path(step: np.ndarray, trajectory: np.ndarray, upto: int | None = None,
         starts: dict[int, int] | None = None) -> np.ndarray:
    """Which step rows make the path the run had taken in trajectory `upto` (None: its last,
    the path it took, as `live_steps` keeps it): that trajectory's rows, and each earlier
    one's before the least start of the later ones (`trajectory_cuts`)."""
    return on_path(step, trajectory, trajectory_cuts(step, trajectory, upto, starts), upto)


def _steps(conn: duckdb.DuckDBPyConnection, run_id: str) -> tuple[dict[str, np.ndarray], bool]:
    """Every step row of the run, in trajectory, then step order: its step, trajectory and
    series; and whether the rows number their trajectories (False: logged before the column,
    all read as 0)."""
    cols = ", ".join(SERIES)
    arrays = conn.execute("SELECT step, coalesce(trajectory, 0) AS trajectory, "
                          f"trajectory IS NOT NULL AS numbered, {cols} FROM steps "
                          "WHERE run_id = ? ORDER BY 2, step", [run_id]).fetchnumpy()
    rows = {"step": np.asarray(arrays["step"], dtype=np.int64),
            "trajectory": np.asarray(arrays["trajectory"], dtype=np.int64),
            **{name: np.asarray(arrays[name], dtype=np.float64) for name in SERIES}}
    return rows, bool(np.asarray(arrays["numbered"], dtype=bool).any())


def _curves(rows: dict[str, np.ndarray], live: np.ndarray,
            max_points: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The downsampled curves of the `live` rows, in step order."""
    order = np.argsort(rows["step"][live], kind="stable")
    step = rows["step"][live][order]
    buckets = max(1, max_points // PER_BUCKET)
    curves = {}
    for name in SERIES:
        v = rows[name][live][order]
        keep = m4(v, buckets)
        curves[name] = (step[keep], v[keep])
    return curves


def _path_losses(rows: dict[str, np.ndarray], trajectory: int,
                 starts: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The steps and training losses on the path of `trajectory` (`path`), in step order."""
    on = path(rows["step"], rows["trajectory"], trajectory, starts)
    order = np.argsort(rows["step"][on], kind="stable")
    return rows["step"][on][order], rows["loss"][on][order]


def _loss_at(steps: np.ndarray, loss: np.ndarray, step: int) -> float | None:
    """The training loss at `step`: its first logged row, else the last step logged before it
    (an event after the last step); None when there is none or it is not finite."""
    i = int(np.searchsorted(steps, step))
    if i == len(steps) or steps[i] != step:
        i -= 1
    if i >= 0 and np.isfinite(loss[i]):
        return float(loss[i])
    return None


def _rows(conn: duckdb.DuckDBPyConnection, sql: str, run_id: str) -> list[dict[str, Any]]:
    table = conn.sql(sql, params={"run_id": run_id}).to_arrow_table()
    return [{k: json_safe(v) for k, v in r.items()} for r in table.to_pylist()]


def run_view(conn: duckdb.DuckDBPyConnection, run_id: str,
             max_points: int = DEFAULT_POINTS) -> RunView | None:
    """The run page's data for `run_id`; None when there is no such run."""
    run = get_run(conn, run_id, count_steps=False, children=False)
    if run is None:
        return None
    run["children"] = run_children(conn, run_id, count_steps=True)
    rows, numbered = _steps(conn, run_id)
    events = _rows(conn, 'SELECT step, kind, name, detail, metrics_before, metrics_after, "at" '
                         'FROM events WHERE run_id = $run_id ORDER BY step, "at"', run_id)
    for e in events:
        for k in ("detail", "metrics_before", "metrics_after"):
            e[k] = stored_json(e[k])
    logged = sorted(events, key=lambda e: e["at"])
    # where rollbacks logged before the field count from: 0, a fork's first row's trajectory
    first = int(rows["trajectory"].min()) if len(rows["step"]) and run["parent_run_id"] else 0
    starts = rollback_starts(logged, first) if numbered else {}
    live = path(rows["step"], rows["trajectory"], starts=starts)
    n, dropped = len(live), int((~live).sum())
    run["logged_steps"], run["live_steps"] = n, n - dropped
    curves = _curves(rows, live, max_points)
    evals, evals_cut = _evals(conn, run_id, max_points)
    final = _rows(conn, "SELECT split, metric, value FROM results WHERE run_id = $run_id AND final "
                        "ORDER BY split, metric", run_id)
    windows = []
    losses_on: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # trajectory -> its path's
    for e, t in zip(logged, event_trajectories(logged, first), strict=True):
        if t not in losses_on:
            losses_on[t] = _path_losses(rows, t, starts)
        e["loss"] = _loss_at(*losses_on[t], int(e["step"]))  # a rollback's: of the branch it drops
        to = rollback_target(e)
        came_from = _rollback_field(e, "from_step")  # None for a malformed one: no window
        if to is not None and came_from is not None:
            windows.append((to, came_from))
    windows.sort()
    snaps = _rows(conn, "SELECT step, reason, fingerprint, param_count, ir_json FROM "
                        'ir_snapshots WHERE run_id = $run_id ORDER BY step, recorded_at', run_id)
    for s in snaps:
        s["ir"] = stored_json(s.pop("ir_json"))
    branches = _dropped(rows, live, max_points)
    if branches:  # where the dropped rows lie: a control arm's rollback event names no span
        windows = sorted((int(s.min()), int(s.max()) + 1) for s, _ in branches)
    return RunView(run, n, dropped, curves, evals, final, events, snaps, windows, branches,
                   evals_cut)


def _evals(conn: duckdb.DuckDBPyConnection, run_id: str, max_points: int
           ) -> tuple[dict[tuple[str, str], tuple[np.ndarray, np.ndarray]], bool]:
    """The run's per-evaluation series on its path (`live_results`), each in step order, its
    finite values only, downsampled as the curves are; and whether one was. Read as columns:
    a dict per row cost more than the rest of a long run's page."""
    cols = conn.execute("SELECT split, metric, step, value FROM live_results WHERE run_id = ? "
                        "AND NOT final ORDER BY split, metric, step", [run_id]).fetchnumpy()
    split = np.asarray(cols["split"], dtype=object)
    metric = np.asarray(cols["metric"], dtype=object)
    step = np.asarray(cols["step"], dtype=np.int64)
    value = np.ma.filled(np.ma.asarray(cols["value"], dtype=np.float64), np.nan)
    out: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    cut = False
    edges = np.flatnonzero((split[1:] != split[:-1]) | (metric[1:] != metric[:-1])) + 1
    for lo, hi in zip(np.r_[0, edges].tolist(), np.r_[edges, len(step)].tolist(),
                      strict=True):
        if lo == hi:
            continue
        s, v = step[lo:hi], value[lo:hi]
        s, v = s[np.isfinite(v)], v[np.isfinite(v)]
        keep = m4(v, max(1, max_points // PER_BUCKET))
        cut = cut or len(keep) < len(v)
        out[(str(split[lo]), str(metric[lo]))] = (s[keep], v[keep])
    return out, cut


def _dropped(rows: dict[str, np.ndarray], live: np.ndarray, max_points: int
             ) -> list[tuple[np.ndarray, np.ndarray]]:
    """(steps, losses) of each dropped branch's rows: a trajectory's rows off the path."""
    off = ~live
    out = []
    for t in np.unique(rows["trajectory"][off]):
        mine = off & (rows["trajectory"] == t)  # rows come in step order within a trajectory
        step, loss = rows["step"][mine], rows["loss"][mine]
        keep = m4(loss, max(1, max_points // PER_BUCKET))
        out.append((step[keep], loss[keep]))
    return out
