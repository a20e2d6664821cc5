"""One run as the dashboard's run page and `aicf-induct plot run` draw it: its step curves
(downsampled), evaluations, final metrics, events and IR snapshots, read on one connection.

Long curves are downsampled here, before anything is drawn: `m4` keeps, per bucket of steps,
the first, last, lowest and highest point of each series (M4, Jugel et al., VLDB 2014), so a
line drawn through them has the envelope of the full curve — spikes survive, which an average
or every-k-th sample would hide. Markers are never downsampled: every event carries the exact
training loss of its step (of the last step before it, for an event after the last step),
read from the full series.

After a rollback the steps of the abandoned branch and their replay share step numbers (both
are logged, and the table has no other order); `rollback_windows` names those spans so a chart
can say so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np

from aicf_induct.json_values import json_safe
from warehouse.browse import get_run

SERIES = ("loss", "grad_norm", "update_ratio", "lr")  # per-step columns a run page draws
MARKED = ("trigger", "decision", "rewrite", "rollback")  # event kinds drawn as markers
DEFAULT_POINTS = 2000  # points per series at most: 500 buckets × 4; plenty for a 1,500 px chart


@dataclass
class RunView:
    run: dict[str, Any]  # browse.get_run's row (config parsed, logged_steps)
    logged_steps: int  # step rows of the run (rolled-back steps count twice)
    # series name -> (steps, values), each at most `max_points` long, in step order
    curves: dict[str, tuple[np.ndarray, np.ndarray]]
    evals: list[dict[str, Any]]  # per-evaluation results: step, epoch, split, metric, value
    final: list[dict[str, Any]]  # final results: split, metric, value
    events: list[dict[str, Any]]  # every event, step order; detail/metrics parsed, `loss` exact
    snapshots: list[dict[str, Any]]  # IR snapshots, step order, `ir` parsed
    rollback_windows: list[tuple[int, int]] = field(default_factory=list)  # [to, from) steps

    @property
    def downsampled(self) -> bool:
        return any(len(s) < self.logged_steps for s, _ in self.curves.values())

    def marked_events(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] in MARKED]


def m4(values: np.ndarray, buckets: int) -> np.ndarray:
    """Indices (sorted, unique) of the first, last, min and max of `values` in each of
    `buckets` equal runs of positions; every index when there are no more than 4 × buckets.
    A NaN is never a bucket's min or max while the bucket holds a finite value."""
    n = len(values)
    if n <= 4 * buckets:
        return np.arange(n)
    starts = np.linspace(0, n, buckets + 1).astype(np.int64)[:-1]
    bucket = np.repeat(np.arange(buckets), np.diff(np.append(starts, n)))
    v = np.asarray(values, dtype=np.float64)
    lo = np.where(np.isfinite(v), v, np.inf)
    hi = np.where(np.isfinite(v), -v, np.inf)
    # sorted by (bucket, value): each bucket's first position holds its extreme
    argmin = np.lexsort((lo, bucket))[starts]
    argmax = np.lexsort((hi, bucket))[starts]
    last = np.append(starts[1:], n) - 1
    return np.unique(np.concatenate([starts, last, argmin, argmax]))


def _parse(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json_safe(json.loads(text))
    except ValueError:
        return text


def _curves(conn: duckdb.DuckDBPyConnection, run_id: str,
            max_points: int) -> tuple[int, dict[str, tuple[np.ndarray, np.ndarray]],
                                      np.ndarray, np.ndarray]:
    cols = ", ".join(SERIES)
    arrays = conn.execute(f"SELECT step, {cols} FROM steps WHERE run_id = ? ORDER BY step",
                          [run_id]).fetchnumpy()
    step = np.asarray(arrays["step"], dtype=np.int64)
    buckets = max(1, max_points // 4)
    curves = {}
    for name in SERIES:
        v = np.asarray(arrays[name], dtype=np.float64)
        keep = m4(v, buckets)
        curves[name] = (step[keep], v[keep])
    return len(step), curves, step, np.asarray(arrays["loss"], dtype=np.float64)


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
    run = get_run(conn, run_id, count_steps=False)
    if run is None:
        return None
    n, curves, steps, loss = _curves(conn, run_id, max_points)
    run["logged_steps"] = n
    evals = _rows(conn, "SELECT step, epoch, split, metric, value FROM results "
                        "WHERE run_id = $run_id AND NOT final ORDER BY split, metric, step", run_id)
    final = _rows(conn, "SELECT split, metric, value FROM results WHERE run_id = $run_id AND final "
                        "ORDER BY split, metric", run_id)
    events = _rows(conn, 'SELECT step, kind, name, detail, metrics_before, metrics_after, "at" '
                         'FROM events WHERE run_id = $run_id ORDER BY step, "at"', run_id)
    windows = []
    for e in events:
        for k in ("detail", "metrics_before", "metrics_after"):
            e[k] = _parse(e[k])
        e["loss"] = _loss_at(steps, loss, int(e["step"]))
        d = e["detail"]
        if e["kind"] == "rollback" and isinstance(d, dict) and {"to_step", "from_step"} <= set(d):
            windows.append((int(d["to_step"]), int(d["from_step"])))
    snaps = _rows(conn, "SELECT step, reason, fingerprint, param_count, ir_json FROM "
                        'ir_snapshots WHERE run_id = $run_id ORDER BY step, recorded_at', run_id)
    for s in snaps:
        s["ir"] = _parse(s.pop("ir_json"))
    return RunView(run, n, curves, evals, final, events, snaps, windows)
