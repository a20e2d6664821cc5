"""The run page's data (`warehouse.run_view`): M4 downsampling keeps each bucket's first,
last, lowest and highest point; the markers stay exact however long the curve."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import warehouse
from warehouse.run_view import m4, run_view


def test_m4_keeps_extremes_and_ends_of_every_bucket() -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(size=10_007)
    v[1234], v[8000] = 40.0, -40.0  # spikes an every-k-th sample would miss
    v[3], v[5000], v[5001] = np.nan, np.inf, np.nan
    keep = m4(v, 100)
    assert len(keep) <= 500 and np.all(np.diff(keep) > 0)
    assert {0, 10_006, 1234, 8000} <= set(keep.tolist())
    edges = np.linspace(0, len(v), 101).astype(int)
    for lo, hi in itertools.pairwise(edges.tolist()):
        inside = keep[(keep >= lo) & (keep < hi)]
        assert {lo, hi - 1} <= set(inside.tolist())
        assert np.nanmax(v[inside]) == np.nanmax(v[lo:hi])
        assert np.nanmin(v[inside]) == np.nanmin(v[lo:hi])
    # a value that is not finite is never an extreme, but a bucket's first one is kept (a
    # divergence in a long run vanished from its downsampled curve)
    assert {3, 5000} <= set(keep.tolist()) and 5001 not in keep.tolist()


def test_m4_keeps_everything_when_short() -> None:
    assert m4(np.arange(10.0), 3).tolist() == list(range(10))


def test_downsampled_run_keeps_its_envelope_and_exact_markers(dashboard_warehouse) -> None:
    run_id = dashboard_warehouse.adapt["run_id"]
    conn = warehouse.connect(dashboard_warehouse.root)
    full = run_view(conn, run_id)
    small = run_view(conn, run_id, max_points=40)
    assert full is not None and small is not None and small.downsampled and not full.downsampled
    steps, loss = full.curves["loss"]
    s_steps, s_loss = small.curves["loss"]
    assert len(s_steps) <= 40 and np.all(np.diff(s_steps) >= 0)
    assert s_loss.max() == loss.max() and s_loss.min() == loss.min()
    assert (s_steps[0], s_steps[-1]) == (steps[0], steps[-1])
    # markers: the same events at the same steps with the same (exact) losses, each on the
    # path of its trajectory (the rollbacks logged before it): the latest row at or before
    # its step among the trajectories up to its own
    assert small.events == full.events
    rows = conn.execute("SELECT step, trajectory, loss FROM steps WHERE run_id = ?",
                        [run_id]).fetchall()
    at = sorted(e["at"] for e in full.events if e["kind"] == "rollback")
    assert at and {t for _, t, _ in rows} == set(range(len(at) + 1))
    for e in small.marked_events():
        k = sum(a < e["at"] for a in at)
        mine = [(st, t, x) for st, t, x in rows if t <= k and st <= e["step"]]
        assert e["loss"] == pytest.approx(max(mine)[2])
    assert small.rollback_windows == full.rollback_windows != []
    # the curves are the path taken: each step once, the replay's row where a branch was
    # dropped, and the dropped rows counted apart
    assert len(steps) == len(set(steps.tolist())) == full.logged_steps - full.discarded_steps
    assert full.discarded_steps > 0
    live = dict(conn.execute("SELECT step, loss FROM live_steps WHERE run_id = ?",
                             [run_id]).fetchall())
    assert dict(zip(steps.tolist(), loss.tolist(), strict=True)) == live
    # and the dropped rows drawn apart, each branch's in step order
    dropped = conn.execute("SELECT trajectory, step, loss FROM steps s WHERE run_id = ? AND "
                           "NOT EXISTS (SELECT 1 FROM live_steps l WHERE l.run_id = s.run_id "
                           "AND l.step = s.step AND l.trajectory = s.trajectory) "
                           "ORDER BY trajectory, step", [run_id]).fetchall()
    assert len(dropped) == full.discarded_steps == sum(len(x) for x, _ in full.dropped)
    assert [(int(st), float(x)) for d_steps, d_loss in full.dropped
            for st, x in zip(d_steps, d_loss, strict=True)] == [(st, x) for _, st, x in dropped]
    assert [s["reason"] for s in small.snapshots].count("rewrite") == \
        dashboard_warehouse.adapt["rewrites"]


def test_no_such_run_is_none(dashboard_warehouse) -> None:
    assert run_view(warehouse.connect(dashboard_warehouse.root), "nope") is None
