"""Snapshots: capture/restore in memory and on disk continue a run bit-exactly (dropout,
batchnorm statistics, per-parameter Adam steps after a rewrite, clipping); on-disk writes
are atomic."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.runtime import snapshot as snap
from aicf_induct.runtime.model_state import capture, install
from aicf_induct.runtime.snapshot import Snapshot, SnapshotError
from aicf_induct.runtime.transforms import Deepen, Widen
from tests.runtime.test_adaptive_fixtures import make_trainer, run_steps, toy_graph, toy_problem

SPEC = "mlp:depth=2,width=8,norm=batchnorm,dropout=0.2"
CONFIG = {"clip_norm": 1.0, "schedule": "cosine", "max_steps": 60}


@pytest.fixture(scope="module")
def problem():  # type: ignore[no-untyped-def]
    return toy_problem("classification", n=240)


def _rewritten(problem, steps: int):  # type: ignore[no-untyped-def]
    """A trainer after `steps` steps, widened and deepened halfway (mixed Adam steps)."""
    tr = make_trainer(problem, toy_graph(problem, SPEC), **CONFIG)
    run_steps(tr, steps // 2)
    st = Widen(units=3).apply(capture(tr), "blocks.0.linear", np.random.default_rng(0))
    st = Deepen().apply(st, "blocks.1.act", np.random.default_rng(0))
    install(tr, st)
    run_steps(tr, steps - steps // 2)
    return tr


def _position(tr) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    return divmod(tr.step_count, tr.stream.batches_per_epoch())


def test_in_memory_restore_replays_exactly(problem) -> None:
    tr = _rewritten(problem, 20)
    s = Snapshot.capture(tr, *_position(tr), meta={"lr_scale": 0.5})
    first = run_steps(tr, 15)
    s.restore(tr)
    assert tr.step_count == 20
    assert np.array_equal(run_steps(tr, 15), first)


def test_disk_checkpoint_resumes_bit_exactly_in_a_fresh_trainer(problem, tmp_path) -> None:
    uninterrupted = _rewritten(problem, 20)
    expected = run_steps(uninterrupted, 25)

    tr = _rewritten(problem, 20)
    best = capture(tr)
    path = snap.save(Snapshot.capture(tr, *_position(tr), {"x": [1.5, float("nan")]},),
                     tmp_path, serial=20)
    snap.save(Snapshot(best, 20, 0, 0, 0, {}, {"best": best}), tmp_path, serial=21)
    del tr  # the process state is gone; only the checkpoint remains

    loaded = snap.load(path)
    assert loaded.step == 20 and loaded.meta["x"][0] == 1.5 and np.isnan(loaded.meta["x"][1])
    fresh = make_trainer(problem, loaded.state.graph, **CONFIG)
    loaded.restore(fresh)
    assert (loaded.epoch, loaded.batch) == _position(fresh)
    got = run_steps(fresh, 25)
    assert np.array_equal(got, expected)
    assert np.array_equal(fresh.store.data, uninterrupted.store.data)
    extra = snap.load(snap.latest(tmp_path)).extras["best"]
    assert all(np.array_equal(extra.values[k], best.values[k]) for k in best.values)


def test_atomic_writes_leave_whole_checkpoints_or_none(problem, tmp_path, monkeypatch) -> None:
    tr = make_trainer(problem, toy_graph(problem))
    run_steps(tr, 3)
    s = Snapshot.capture(tr, 0, 3)
    snap.save(s, tmp_path, 1)
    (tmp_path / ".tmp-ckpt-000000002-deadbeef").mkdir()  # a writer that died mid-write
    assert snap.latest(tmp_path).name == "ckpt-000000001"

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(snap.np, "savez", boom)
    with pytest.raises(OSError, match="disk full"):
        snap.save(s, tmp_path, 3)
    monkeypatch.undo()
    assert [p.name for p in snap.checkpoints(tmp_path)] == ["ckpt-000000001"]
    assert len(list(tmp_path.glob(".tmp-*"))) == 1  # only the dead writer's
    with pytest.raises(SnapshotError, match="exists"):
        snap.save(s, tmp_path, 1)
    snap.save(s, tmp_path, 2)
    snap.save(s, tmp_path, 3)
    snap.prune(tmp_path, keep=2)
    assert [p.name for p in snap.checkpoints(tmp_path)] == ["ckpt-000000002", "ckpt-000000003"]
    assert not list(tmp_path.glob(".tmp-*"))


def test_bad_checkpoints_and_mismatched_runs_are_reported(problem, tmp_path) -> None:
    (tmp_path / "ckpt-000000001").mkdir()
    with pytest.raises(SnapshotError, match="cannot read"):
        snap.load(tmp_path / "ckpt-000000001")
    tr = make_trainer(problem, toy_graph(problem))
    s = Snapshot.capture(tr, 0, 0)
    other = make_trainer(problem, toy_graph(problem), seed=5)
    with pytest.raises(SnapshotError, match="seed"):
        s.restore(other)


def test_a_final_checkpoint_that_cannot_be_replaced_stays_the_old_one(
        problem, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`final` was moved aside, then the new one renamed in: a failure (or Ctrl-C) between
    the two left no `final` at all, the old one stranded under a temporary name."""
    import os

    tr = make_trainer(problem, toy_graph(problem, SPEC), **CONFIG)
    run_steps(tr, 5)
    first = snap.save_final(Snapshot.capture(tr, *_position(tr)), tmp_path)
    run_steps(tr, 5)
    rename = os.rename

    def refused(src, dst) -> None:  # type: ignore[no-untyped-def]
        if str(dst) == str(first) and ".tmp-" in str(src) and "old" not in str(src):
            raise PermissionError(1, "Operation not permitted", str(src))
        rename(src, dst)

    monkeypatch.setattr(os, "rename", refused)
    with pytest.raises(PermissionError):
        snap.save_final(Snapshot.capture(tr, *_position(tr)), tmp_path)
    monkeypatch.undo()
    assert snap.load(first).step == 5
    assert [p.name for p in tmp_path.iterdir()] == [first.name]
