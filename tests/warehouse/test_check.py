"""`warehouse check` on files the writer did not write (strays, another table's columns, wrong
types) and on bytes flipped inside a page: each is a problem, `--repair` moves it aside and
`check` is then clean."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aicf_induct.cli import main as cli_main
from tests.warehouse.conftest import log_run, problem
from warehouse import WarehouseRecorder, Writer, check, compact, connect, visible_parts
from warehouse.check import QUARANTINE
from warehouse.layout import listed_parts


@pytest.fixture
def two_runs(root: Path) -> Path:
    for run in ("a", "b"):
        rec = WarehouseRecorder(root)
        log_run(rec, run, problem("p1"), 0.9, "fp", {"depth": 1.0})
        rec.close()
    return root


def test_parts_not_of_the_table_are_problems_and_quarantined(two_runs: Path) -> None:
    root = two_runs
    steps = visible_parts(root, "steps")[0]
    pdir = visible_parts(root, "runs")[0].parent
    shutil.copy(steps, pdir / "junk.parquet")  # not named as a part
    shutil.copy(steps, pdir / "part-foreign-00000001.parquet")  # steps rows named as a part
    pq.write_table(pa.table({"run_id": ["zzz"], "problem_id": ["p"], "seed": ["x"],
                             "started_at": pa.array([0], pa.timestamp("us", tz="UTC"))}),
                   pdir / "part-typed-00000001.parquet")
    assert pdir / "junk.parquet" not in listed_parts(root, "runs")  # readers never read it
    compact(root, grace_s=0)  # merges the two runs' parts, leaves the foreign ones alone
    assert (pdir / "part-foreign-00000001.parquet").exists()
    assert (pdir / "part-typed-00000001.parquet").exists()
    rep = check(root)
    assert not rep.ok and len(rep.problems) == 3, rep.problems
    text = "\n".join(rep.problems)
    assert "stray file runs/" in text and "junk.parquet" in text
    assert "part-foreign-00000001.parquet" in text and \
        "no key column(s) problem_id, started_at: not a runs part" in text
    assert "column 'seed' is string, expected int64" in text

    rep = check(root, repair=True)
    assert sorted(Path(b.path).name for b in rep.quarantined) == [
        "junk.parquet", "part-foreign-00000001.parquet", "part-typed-00000001.parquet"]
    assert rep.ended == []  # no run of a quarantined part is ended as abandoned
    assert (root / QUARANTINE / "runs" / pdir.name / "junk.parquet").exists()
    assert check(root).ok
    assert connect(root).execute("SELECT count(*) FROM runs").fetchall() == [(2,)]
    assert connect(root).execute("SELECT count(*) FROM run_ends").fetchall() == [(2,)]


def test_repair_exits_non_zero_while_problems_remain(two_runs: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Extra columns that disagree across parts are not quarantined (neither part is wrong by
    the schema): --repair still fails."""
    root = two_runs
    for i, value in enumerate((pa.array([1]), pa.array(["x"]))):
        with Writer(root) as w:
            w.append_batch("results", {"run_id": ["a"], "split": ["test"], "metric": [f"m{i}"],
                                       "value": [1.0], "note": value})
    assert cli_main.main(["warehouse", "check", "--repair", "--warehouse", str(root)]) == 1
    out = capsys.readouterr().out
    assert "extra column 'note' is " in out
    assert out.rstrip().endswith("1 problem(s)")


def test_deep_check_sees_a_flipped_byte_by_its_page_checksum(root: Path) -> None:
    """Parts carry page checksums: a flipped byte that still decodes (here a float's) is an
    unreadable part for the deep check. An older part written without checksums passes."""
    with Writer(root, compression="none") as w:
        w.append_batch("steps", {"run_id": ["a"] * 100, "step": list(range(100)),
                                 "loss": [1.0 / (s + 1) for s in range(100)]})
    part = visible_parts(root, "steps")[0]
    old = part.with_name("part-old-00000001.parquet")
    pq.write_table(pq.read_table(part), old, compression="none")  # no checksums
    assert check(root).ok
    for p in (part, old):
        md = pq.read_metadata(p)
        loss = md.row_group(0).column(md.schema.to_arrow_schema().get_field_index("loss"))
        data = bytearray(p.read_bytes())
        data[loss.data_page_offset + loss.total_compressed_size - 1] ^= 0x01  # a value's byte
        p.write_bytes(bytes(data))
    rep = check(root)
    assert [b.path for b in rep.unreadable] == [part.relative_to(root).as_posix()]
    assert "CRC checksum verification failed" in rep.unreadable[0].reason


def _steps_part(root: Path, run: str) -> Path:
    with Writer(root, compression="none") as w:
        w.append_batch("steps", {"run_id": [run] * 100, "step": list(range(100)),
                                 "loss": [1.0 / (s + 1) for s in range(100)]})
    return next(p for p in visible_parts(root, "steps")
                if pq.read_table(p)["run_id"][0].as_py() == run)


def test_compact_leaves_a_part_whose_checksum_fails_for_check(root: Path,
                                                             capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    """Merged, a part with a flipped byte was carried into the new part as good values and
    deleted: `check` then said ok. Its checksum keeps it out of the merge."""
    _steps_part(root, "a")
    bad = _steps_part(root, "b")
    md = pq.read_metadata(bad)
    loss = md.row_group(0).column(md.schema.to_arrow_schema().get_field_index("loss"))
    data = bytearray(bad.read_bytes())
    data[loss.data_page_offset + loss.total_compressed_size - 1] ^= 0x01
    bad.write_bytes(bytes(data))
    compact(root, grace_s=0)
    assert bad.exists()
    rep = check(root)
    assert [b.path for b in rep.unreadable] == [bad.relative_to(root).as_posix()]


def test_compact_leaves_parts_whose_extra_columns_cannot_merge(root: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    """Two parts whose extra column disagree in type (`check` reports it): compaction said
    so with a traceback; it leaves them unmerged and says why."""
    a, b = _steps_part(root, "a"), _steps_part(root, "b")
    for p, note in ((a, pa.array([1] * 100)), (b, pa.array(["x"] * 100))):
        pq.write_table(pq.read_table(p).append_column("note", note), p)
    compact(root, grace_s=0)
    assert a.exists() and b.exists()
    assert "compact left 2 parts of steps unmerged" in capsys.readouterr().err


def test_a_run_s_own_end_wins_over_repair_s_abandoned_one(tmp_path: Path) -> None:
    """`check --repair` ended a remote run `abandoned` (stamped when it ran) while its client
    still retried its end, which carries the client's earlier time: the run read abandoned for
    good, though its end arrived."""
    from datetime import UTC, datetime, timedelta

    from aicf_induct.records import RunEndRecord
    from warehouse.check import AbandonedRun, end_abandoned

    root = tmp_path / "wh"
    rec = WarehouseRecorder(root)
    log_run(rec, "late", problem("p1"), 0.9, "fp", {"depth": 2.0}, end=False)
    rec.close()
    assert end_abandoned(root, [AbandonedRun("late", "name-p1", "test", "w", "now")]) == ["late"]
    rec = WarehouseRecorder(root)  # the client's end, timed before the repair
    rec.run_end(RunEndRecord("late", "completed", 10, 0.5,
                             ended_at=datetime.now(UTC) - timedelta(seconds=5)))
    rec.close()
    conn = connect(root)
    assert conn.execute("SELECT status, steps_taken FROM runs").fetchall() == [("completed", 10)]
    assert conn.execute("SELECT count(*) FROM raw_run_ends").fetchone() == (2,)


def test_existing_warehouse_names_what_is_wrong_with_the_directory_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from warehouse import WarehouseError, existing_warehouse

    with pytest.raises(WarehouseError, match=r"^no warehouse at .*/typo \(build one first\)$"):
        existing_warehouse(tmp_path / "typo", "build one first")
    (tmp_path / "f").write_text("x")
    with pytest.raises(WarehouseError, match="is not a directory"):
        existing_warehouse(str(tmp_path / "f"))
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "a.jpg").write_text("x")
    with pytest.raises(WarehouseError, match="is not a warehouse"):
        existing_warehouse(tmp_path / "photos")
    (tmp_path / "wh" / "runs").mkdir(parents=True)
    monkeypatch.setenv("AICF_WAREHOUSE", str(tmp_path / "wh"))
    assert existing_warehouse(None) == tmp_path / "wh"  # no --warehouse: the environment's
    assert existing_warehouse(tmp_path / "wh") == tmp_path / "wh"
    assert not list(tmp_path.glob("typo*"))  # reading never creates one
