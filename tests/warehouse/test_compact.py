from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse import WarehouseError, Writer, check, compact, connect, visible_parts
from warehouse.compact import LOCK_FILE, collect
from warehouse.layout import MARKERS, read_markers


def _write_parts(root: Path, n: int, rows: int = 10) -> None:
    for i in range(n):
        with Writer(root) as w:  # one writer per part: n parts
            w.append_batch("results", {"run_id": [f"r{i}"] * rows, "step": list(range(rows)),
                                       "value": [float(i)] * rows})


def _count(root: Path) -> int:
    got = connect(root).execute("SELECT count(*) FROM results").fetchone()
    return int(got[0]) if got else -1


def test_compaction_merges_and_readers_see_each_row_once_at_every_stage(root: Path) -> None:
    _write_parts(root, 5)
    before = sorted(map(str, visible_parts(root, "results")))
    rep = compact(root, grace_s=3600)
    assert (rep.merged_parts, rep.new_parts, rep.rows) == (5, 1, 50)
    # committed, inputs kept for the grace period, yet invisible: no double counting
    assert len(list((root / "results").rglob("part-*.parquet"))) == 5
    assert [p.name[:6] for p in visible_parts(root, "results")] == ["cpart-"]
    assert _count(root) == 50
    assert check(root).ok and any("awaiting deletion" in n for n in check(root).notes)
    # the grace period over, a later compaction collects the inputs
    assert collect(root, "results", grace_s=0) == 5
    assert not list((root / "results").rglob("part-*.parquet"))
    assert _count(root) == 50
    assert before != sorted(map(str, visible_parts(root, "results")))


def test_uncommitted_output_and_temporaries_are_invisible(root: Path) -> None:
    _write_parts(root, 2)
    pdir = visible_parts(root, "results")[0].parent
    # a compaction that died before its marker: output present, no marker
    (pdir / "cpart-dead.parquet").write_bytes(
        visible_parts(root, "results")[0].read_bytes())
    # a writer that died mid-commit: a truncated temp file
    (pdir / ".tmp-part-x-00000001.parquet.partial").write_bytes(b"PAR1 trunc")
    assert _count(root) == 20
    rep = check(root)
    assert rep.ok, rep.problems
    assert any("temporary" in n for n in rep.notes)
    # debris older than the stale age is collected
    old = time.time() - 7200
    for p in pdir.iterdir():
        os.utime(p, (old, old))
    assert collect(root, "results", grace_s=60) == 2
    assert _count(root) == 20


def test_recompaction_and_marker_collection(root: Path) -> None:
    _write_parts(root, 3)
    compact(root, grace_s=0)
    _write_parts(root, 2)
    compact(root, grace_s=0)  # merges the first cpart with the two new parts
    assert _count(root) == 50
    files = list((root / "results").rglob("*.parquet"))
    assert len(files) == 1 and files[0].name.startswith("cpart-")
    # only the marker that keeps the last output visible remains
    assert len(read_markers(root / "results")) == 1
    assert sorted(pq.read_table(files[0]).column("run_id").unique().to_pylist()) == \
        ["r0", "r1", "r2"]  # r0/r1 twice over: two rounds of writes with the same names


def test_compaction_keeps_columns_that_appear_later(root: Path) -> None:
    with Writer(root) as w:
        w.append_batch("results", {"run_id": ["a"], "value": [1.0]})
    with Writer(root) as w:
        w.append_batch("results", {"run_id": ["b"], "value": [2.0], "extra": ["x"]})
    compact(root, grace_s=0)
    rows = connect(root).execute("SELECT run_id, extra FROM results ORDER BY 1").fetchall()
    assert rows == [("a", None), ("b", "x")]


def test_one_compaction_at_a_time(root: Path) -> None:
    _write_parts(root, 2)
    with open(root / LOCK_FILE, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        with pytest.raises(WarehouseError, match="another compaction"):
            compact(root)
    assert compact(root).merged_parts == 2


def test_lost_output_is_a_problem(root: Path) -> None:
    _write_parts(root, 2)
    compact(root, grace_s=3600)
    marker = next(iter(read_markers(root / "results").values()))
    (root / "results" / marker.output).unlink()
    rep = check(root)
    assert not rep.ok and "lost its output" in rep.problems[0]
    assert (root / "results" / MARKERS).is_dir()


def test_check_finds_unreadable_and_incompatible_parts(root: Path) -> None:
    _write_parts(root, 1)
    pdir = visible_parts(root, "results")[0].parent
    (pdir / "part-bad-00000001.parquet").write_bytes(b"not parquet at all")
    pq.write_table(pa.table({"step": ["text"]}),
                   pdir / "part-typed-00000001.parquet")
    rep = check(root)
    assert not rep.ok
    assert any("unreadable" in p for p in rep.problems)
    assert any("column 'step' is string" in p for p in rep.problems)


def test_a_full_disk_is_one_error_and_the_parts_stay(root: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`warehouse compact` on a full disk ended in pyarrow's OSError traceback."""
    import importlib

    compact_mod = importlib.import_module("warehouse.compact")  # (the package's `compact` is
    # the function)

    _write_parts(root, 3)
    before = sorted(map(str, visible_parts(root, "results")))

    def full(*_: object, **__: object) -> None:  # what pyarrow raises: no errno, a text
        raise OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(compact_mod, "write_parquet", full)
    with pytest.raises(WarehouseError, match="the disk is full"):
        compact(root, grace_s=0)
    assert sorted(map(str, visible_parts(root, "results"))) == before and _count(root) == 30
    assert check(root).ok


def test_compaction_sweeps_the_warehouse_folder_s_own_stale_temporaries(tmp_path: Path
                                                                        ) -> None:
    """A `warehouse rebuild` killed outright left `.tmp-<pid>_catalog.duckdb.partial` (and its
    .wal) in the warehouse folder, which the tables' sweep never looked at."""
    from aicf_induct.records import RunStartRecord
    from warehouse import WarehouseRecorder

    root = tmp_path / "wh"
    rec = WarehouseRecorder(root)
    rec.run_start(RunStartRecord("r1", "p", "iris", "classification", {}, 0, "cpu", {}, "cli"))
    rec.close()
    stale = [root / ".tmp-123_catalog.duckdb.partial", root / ".tmp-123_catalog.duckdb.partial.wal"]
    fresh = root / ".tmp-456_catalog.duckdb.partial"  # a rebuild in progress
    for p in (*stale, fresh):
        p.write_bytes(b"x")
    two_hours_ago = time.time() - 7200
    for p in stale:
        os.utime(p, (two_hours_ago, two_hours_ago))
    report = compact(root)
    assert [p.exists() for p in (*stale, fresh)] == [False, False, True]
    assert report.deleted_files >= 2


def test_compact_and_check_count_the_parts_they_look_at(root: Path) -> None:
    # both read every part, minutes on a large warehouse: a bar's `update` follows them
    _write_parts(root, 5)
    seen: list[int] = []
    assert check(root, progress=seen.append).ok and sum(seen) == 5
    seen.clear()
    assert compact(root, grace_s=3600, progress=seen.append).merged_parts == 5
    assert sum(seen) == 5
    seen.clear()
    assert check(root, progress=seen.append).ok and sum(seen) == 1  # the merged part
