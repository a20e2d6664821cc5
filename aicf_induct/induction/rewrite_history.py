"""The rewrite history: one row per decision an adaptive run took at a trigger, with what
came of it, read from the warehouse's events.

A row per `decision` event (a transform, or `none`: the model left as it was) of any run
(an adaptive corpus run trained twice under the same settings counts once, the first that
ended; see REPEATED_SQL):

    run_id, problem_id, problem, task, step, trigger,         where and when
    trigger_kind,
    transform, site, options (JSON),                          what was decided
    val_loss, train_loss, gap,                                the dynamics at the trigger
    grad_norm, update_ratio,                                  means over the K steps before it
    n_rows,                                                   the problem's `simple.n_rows`
    effect, verdict                                           what came of it

**Effect** = (val_before − val_after) / val_before, the relative fall of the validation loss
over the K steps after the decision (K: the run's guard window), clipped to [−1, 1]; higher
is better. For a rewrite, val_before and val_after are the guard's own measurements (at the
rewrite and K steps later, before any rollback); a rewrite that an instability rollback
blamed (a NaN or spike during its trial) has effect −1 and verdict `unstable`; one whose run
ended before the verdict is left out. For `none` (the control arm), val_after is the first
validation loss the run logged at or after step + K, and the verdict is `none`. Comparing a
transform's effect with the control's in the same condition is what `RewriteEffects` does.

**A longer horizon** (`horizon` H > 0 steps): the guard's K steps reward what helps at once
(a widen while the model overfits lowers the validation loss for 50 steps and the final
score not at all). With H, every decision's val_after is instead the best validation loss
the run logged in (step, step + H], cut at the run's next rewrite (so that the effect is
this decision's alone), and a decision whose window so cut is shorter than H / 2 is left
out; a rewrite that an instability rollback blamed keeps effect −1; the verdict is as
above. Rewrites and controls are measured alike, so their comparison stays fair.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from aicf_induct.json_values import json_object

TRIGGER_KINDS = {"warmup": "schedule", "epoch_end": "schedule", "plateau": "plateau",
                 "nan": "instability", "spike": "instability", "grad_explosion": "instability"}
INSTABILITY = ("nan", "spike", "grad_explosion")
COLUMNS = ("run_id", "problem_id", "problem", "task", "step", "trigger", "trigger_kind",
           "transform", "site", "options", "val_loss", "train_loss", "gap", "grad_norm",
           "update_ratio", "n_rows", "effect", "verdict")

# an adaptive corpus run trained again (the same problem, index, start and settings: builds
# at once, or a rerun of one whose workers outlived it, before builds claimed their runs)
# counts once: the first that ended with final scores, else the first started
REPEATED_SQL = """
SELECT run_id FROM (
    SELECT run_id, row_number() OVER (
        PARTITION BY json_extract_string(config, '$.corpus_adaptive.problem'),
                     json_extract_string(config, '$.corpus_adaptive.index'),
                     json_extract_string(config, '$.corpus_adaptive.candidate'),
                     json_extract_string(config, '$.adapt'),
                     json_extract_string(config, '$.policy')
        ORDER BY status IN ('completed', 'early_stopped', 'timeout') DESC, started_at,
                 run_id) AS nth
    FROM runs
    WHERE origin = 'adapt' AND json_extract(config, '$.corpus_adaptive') IS NOT NULL)
WHERE nth > 1
"""
EVENTS_SQL = f"""
SELECT e.run_id, r.problem_id, r.problem_name AS problem, r.task, r.parent_run_id, e.step,
       e.kind, e.name, e.detail, e.metrics_before, e.at,
       coalesce(TRY_CAST(json_extract(r.config, '$.adapt.guard.steps') AS BIGINT), 50)
           AS guard_steps
FROM events e JOIN runs r USING (run_id)
WHERE e.kind IN ('decision', 'guard', 'rollback')
  AND run_id NOT IN ({REPEATED_SQL})
ORDER BY e.run_id, e.at, e.step
"""
VAL_SQL = """
SELECT run_id, step, value, coalesce(trajectory, 0) AS trajectory FROM results
WHERE split = 'val' AND metric = 'loss' AND NOT final
  AND run_id IN (SELECT DISTINCT run_id FROM events WHERE kind = 'decision')
"""
STEPS_SQL = """
SELECT s.run_id, s.step, s.grad_norm, s.update_ratio, s.trajectory FROM steps s
WHERE s.run_id IN (SELECT DISTINCT run_id FROM events WHERE kind = 'decision')
"""
ROWS_SQL = """
SELECT problem_id, max(value) AS n_rows FROM problem_features
WHERE feature = 'simple.n_rows' GROUP BY problem_id
"""


def load_rewrite_history(root: str | Path, horizon: int = 0) -> pd.DataFrame:
    """The rewrite history of the warehouse at `root` (see the module docstring; `horizon`
    > 0: effects over that many steps instead of the guard's window)."""
    import warehouse

    def read(conn: Any) -> tuple[pd.DataFrame, ...]:
        return tuple(conn.sql(q).to_arrow_table().to_pandas()
                     for q in (EVENTS_SQL, VAL_SQL, STEPS_SQL, ROWS_SQL))

    events, vals, steps, rows = warehouse.with_retry(Path(root), read)
    return history_of(events, vals, steps, rows, horizon)


def history_of(events: pd.DataFrame, vals: pd.DataFrame, steps: pd.DataFrame,
               rows: pd.DataFrame, horizon: int = 0) -> pd.DataFrame:
    """The history from the four query results (split out so it can be tested on frames).
    A decision reads the steps and validation losses of the path its run had taken when it
    was made (`warehouse.run_view.path`): after a rollback the run logs the step numbers past
    its target again under the next `trajectory`, and the rollback names it (a frame without
    the column, or steps all NULL in it, logged before it: one path, as before the column)."""
    out: list[dict[str, Any]] = []
    n_rows = dict(zip(rows["problem_id"], rows["n_rows"], strict=True)) if len(rows) else {}
    val_by_run = {k: g.sort_values("step") for k, g in vals.groupby("run_id")}
    steps_by_run = {k: g.sort_values("step") for k, g in steps.groupby("run_id")}
    for run_id, ev in events.groupby("run_id", sort=True):
        recs: list[dict[str, Any]] = [{str(k): v for k, v in r.items()}
                                      for r in ev.to_dict("records")]
        paths = _Paths(steps_by_run.get(run_id), val_by_run.get(run_id), recs)
        for i, (e, trajectory) in enumerate(zip(recs, paths.trajectories, strict=True)):
            if e["kind"] != "decision" or e["name"] == "wait":
                continue
            run_steps, run_vals = paths.of(trajectory)
            d, m = json_object(e["detail"]), json_object(e["metrics_before"])
            trigger = str(d.get("trigger", ""))
            k = int(e["guard_steps"])
            row = _base(e, d, m, trigger, n_rows, run_steps, k)
            if e["name"] == "none":
                outcome = _control(run_vals, int(e["step"]) + k, row["val_loss"])
            else:
                outcome = _rewrite(recs[i + 1:], e["name"], int(e["step"]))
            if horizon > 0 and outcome is not None and outcome[1] != "unstable":
                outcome = _over_horizon(recs[i + 1:], run_vals, int(e["step"]),
                                        horizon, row["val_loss"], outcome[1])
            if outcome is None:
                continue
            row["effect"], row["verdict"] = outcome
            out.append(row)
    df = pd.DataFrame(out, columns=list(COLUMNS))
    return df.astype({"step": "int64", "effect": float})


def _went_back(e: dict[str, Any]) -> bool:
    """A rollback but a `give_up` (which names no target and ends the run) began a
    trajectory; what the runtime logs names its target, but a frame's may not."""
    return e["kind"] == "rollback" and e["name"] != "give_up"


class _Paths:
    """One run's step rows and validation losses on the path of each trajectory (computed
    once per trajectory asked), and the trajectory each of its events (`recs`, in the order
    logged) was logged in. The trajectories start as the warehouse's views start them
    (`rollback_starts`); steps that number none (logged before the column) are one path."""

    def __init__(self, steps: pd.DataFrame | None, vals: pd.DataFrame | None,
                 recs: list[dict[str, Any]]) -> None:
        from warehouse.run_view import event_trajectories, rollback_starts

        self.numbered = steps is not None and "trajectory" in steps \
            and bool(steps["trajectory"].notna().any())
        if steps is not None and self.numbered:  # NULL, logged before the column: 0
            steps = steps.assign(trajectory=steps["trajectory"].fillna(0).astype(np.int64))
        self.steps, self.vals = steps, vals
        events = [{"kind": e["kind"], "name": e["name"], "detail": json_object(e["detail"])}
                  for e in recs]
        # rollbacks logged before the field count from 0, a fork's from its first row's
        forked = any(isinstance(e.get("parent_run_id"), str) for e in recs)
        base = int(steps["trajectory"].min()) if steps is not None and self.numbered \
            and forked else 0
        self.trajectories = event_trajectories(events, base, _went_back)
        self.starts = rollback_starts(events, base, _went_back) if self.numbered else {}
        self._of: dict[int, tuple[_Curve | None, _Curve | None]] = {}

    def of(self, trajectory: int) -> tuple[_Curve | None, _Curve | None]:
        """The steps (grad norm, update ratio) and validation losses of the trajectory's
        path, as arrays in step order: each decision reads a window of them by binary
        search (a boolean mask over the whole run per decision made a long run's history
        quadratic: 6,000 decisions of two runs took 10 s, and the service's rewrite
        route timed out reading it)."""
        if trajectory not in self._of:
            steps, vals = self._on_path(trajectory)
            self._of[trajectory] = (
                None if steps is None else _Curve.of(steps, "grad_norm", "update_ratio"),
                None if vals is None else _Curve.of(vals, "value"))
        return self._of[trajectory]

    def _on_path(self, trajectory: int) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
        from warehouse.run_view import on_path, trajectory_cuts

        if not self.numbered:
            return self.steps, self.vals
        assert self.steps is not None
        step = self.steps["step"].to_numpy(np.int64)
        traj = self.steps["trajectory"].to_numpy(np.int64)
        cuts = trajectory_cuts(step, traj, trajectory, self.starts)
        steps = self.steps[on_path(step, traj, cuts, trajectory)]
        vals = self.vals
        if vals is not None and "trajectory" in vals:
            vals = vals[on_path(vals["step"].to_numpy(np.int64),
                                vals["trajectory"].to_numpy(np.int64), cuts, trajectory,
                                at_cut=True)]
        return steps, vals


@dataclass(frozen=True)
class _Curve:
    """A frame's `step` column and some value columns, as arrays in step order (the frames
    come sorted by step), for windows read by binary search."""

    step: np.ndarray
    values: dict[str, np.ndarray]

    @classmethod
    def of(cls, frame: pd.DataFrame, *columns: str) -> _Curve:
        return cls(frame["step"].to_numpy(np.int64),
                   {c: frame[c].to_numpy(np.float64) for c in columns})

    def window(self, low: int, high: int, closed: Literal["left", "right"] = "left") -> slice:
        """The rows with low <= step < high (`closed` "left"), or low < step <= high
        ("right")."""
        return slice(int(np.searchsorted(self.step, low, closed)),
                     int(np.searchsorted(self.step, high, closed)))


def _base(e: dict[str, Any], d: dict[str, Any], m: dict[str, Any], trigger: str,
          n_rows: dict[str, float], steps: _Curve | None, k: int) -> dict[str, Any]:
    grad = ratio = math.nan
    if steps is not None:
        w = steps.window(int(e["step"]) - k, int(e["step"]))
        if w.stop > w.start:
            grad = _skipna(np.nanmean, steps.values["grad_norm"][w])
            ratio = _skipna(np.nanmean, steps.values["update_ratio"][w])
    return {"run_id": e["run_id"], "problem_id": e["problem_id"], "problem": e["problem"],
            "task": e["task"],
            "step": int(e["step"]), "trigger": trigger,
            "trigger_kind": TRIGGER_KINDS.get(trigger, "schedule"), "transform": e["name"],
            "site": str(d.get("site") or ""),
            "options": json.dumps(d.get("options") or {}, sort_keys=True),
            "val_loss": _num(m.get("val_loss")), "train_loss": _num(m.get("train_loss")),
            "gap": _num(m.get("gap")), "grad_norm": grad, "update_ratio": ratio,
            "n_rows": float(n_rows.get(e["problem_id"], math.nan))}


def _skipna(reduce: Any, values: np.ndarray) -> float:
    """`reduce` (np.nanmean, np.nanmin) over the values that are not NaN, as pandas'
    reductions skip them; NaN when none is."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN window: NaN, said so
        return float(reduce(values))


def _num(v: Any) -> float:
    """A JSON number as a float; NaN for anything else (a string, a bool, null)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return math.nan
    try:
        return float(v)
    except OverflowError:  # an integer past float's range
        return math.inf if v > 0 else -math.inf


def _effect(before: float, after: float) -> float:
    if not (math.isfinite(before) and before > 0):
        return math.nan
    if not math.isfinite(after):
        return -1.0
    return float(np.clip((before - after) / before, -1.0, 1.0))


def _rewrite(later: list[dict[str, Any]], transform: str,
             step: int) -> tuple[float, str] | None:
    """The guard verdict (or instability rollback) that judged this rewrite, if any."""
    from warehouse.run_view import json_bigint

    for e in later:
        d = json_object(e["detail"])
        if e["kind"] == "guard" and e["name"] == transform \
                and json_bigint(d.get("rewrite_step")) == step:
            eff = _effect(_num(d.get("val_before")), _num(d.get("val_after")))
            return None if math.isnan(eff) else (eff, str(d.get("verdict", "")))
        if e["kind"] == "rollback" and e["name"] in INSTABILITY \
                and d.get("blacklisted") == transform:
            return -1.0, "unstable"
        if e["kind"] == "decision":
            return None  # the next decision came first: this rewrite was never judged
    return None


def _control(vals: _Curve | None, at: int, before: float) -> tuple[float, str] | None:
    if vals is None:
        return None
    first = int(np.searchsorted(vals.step, at, "left"))  # the first at or after `at`
    if first == len(vals.step):
        return None
    eff = _effect(before, float(vals.values["value"][first]))
    return None if math.isnan(eff) else (eff, "none")


def _over_horizon(later: list[dict[str, Any]], vals: _Curve | None, step: int,
                  horizon: int, before: float, verdict: str) -> tuple[float, str] | None:
    """The effect over (step, step + horizon], cut at the next rewrite (see the module
    docstring), or None when the window so cut is under half the horizon."""
    if vals is None:
        return None
    end = step + horizon
    for e in later:
        if e["kind"] == "decision" and e["name"] not in ("none", "wait") \
                and int(e["step"]) > step:
            end = min(end, int(e["step"]))
            break
    w = vals.window(step, end, closed="right")
    if w.stop == w.start or int(vals.step[w.stop - 1]) - step < horizon / 2:
        return None
    eff = _effect(before, _skipna(np.nanmin, vals.values["value"][w]))
    return None if math.isnan(eff) else (eff, verdict)


def excluding(history: pd.DataFrame, exclude: set[str]) -> pd.DataFrame:
    """The history without the problems named in `exclude` (names with or without options,
    or ids), as `induce fit --exclude` keeps them out of the pack."""
    plain = history["problem"].astype(str).str.split("?").str[0]
    hit = history["problem"].isin(exclude) | plain.isin(exclude) | \
        history["problem_id"].isin(exclude)
    return history[~hit].reset_index(drop=True)
