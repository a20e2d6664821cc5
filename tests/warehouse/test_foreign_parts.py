"""Files in a warehouse that are not its table's parts: a part holding another table's columns
(or lacking one every version of the table wrote) is skipped by every reader with one warning,
listed by `warehouse check` and quarantined by `--repair`, as an unreadable part is; a stray
`*.parquet` anywhere under the root (not only in a `date=` partition) is read by no one,
reported by `check` (exit 1) and moved aside by `--repair`. Warehouses from `aicf-induct
train`; parts written before a column was added (`trajectory`, `split_seed`) still read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aicf_induct.cli.main import main
from warehouse import read_table, visible_parts
from warehouse.cached import CachedCatalog
from warehouse.check import QUARANTINE
from warehouse.layout import unreadable_parts
from warehouse.schema import KEYS, TABLES


@pytest.fixture(scope="module")
def trained(iris_run_warehouse: Path) -> Path:
    return iris_run_warehouse


@pytest.fixture
def wh(trained: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(trained, tmp_path / "wh"))


def _part(root: Path, table: str) -> Path:
    (part,) = visible_parts(root, table)
    return part


def _runs(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[list[dict], str]:
    """The runs `sql` reads (run_id, problem_id), and what it said on stderr."""
    assert main(["sql", "SELECT run_id, problem_id FROM runs", "--format", "json",
                 "--warehouse", str(root)]) == 0
    got = capsys.readouterr()
    return json.loads(got.out), got.err


def _check(root: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["warehouse", "check", "--quick", *argv, "--warehouse", str(root)])
    got = capsys.readouterr()
    return rc, got.out, got.err


def _foreign(root: Path, case: str) -> tuple[Path, str]:
    """A file under a part's name in a table it does not fit; (its path, what check says)."""
    runs = _part(root, "runs")
    if case == "steps rows":  # the audit's `cp steps/... runs/...`
        dst = runs.with_name("part-aaaa-00000001.parquet")
        shutil.copy(_part(root, "steps"), dst)
        return dst, "no key column(s) problem_id, started_at: not a runs part"
    if case == "a column every version had missing":
        dst = runs.with_name("part-nodevice-00000001.parquet")
        t = pq.read_table(runs)
        t = t.set_column(0, "run_id", pa.array(["other"])).drop_columns(["device"])
        pq.write_table(t, dst)
        return dst, "no column(s) device"
    if case == "a column of another type":
        dst = runs.with_name("part-typed-00000001.parquet")
        t = pq.read_table(runs)
        t = t.set_column(0, "run_id", pa.array(["other"]))
        t = t.set_column(t.schema.get_field_index("seed"), "seed", pa.array(["x"]))
        pq.write_table(t, dst)
        return dst, "column 'seed' is string, expected int64"
    # a correlations part in rules: it has rules' key columns, none of its others
    pdir = root / "rules" / runs.parent.name
    pdir.mkdir(parents=True)
    row = {c.name: [None] for c in TABLES["correlations"].columns}
    row |= {"feature": ["f"], "trait": ["t"], "fit_id": ["fit"]}
    pq.write_table(pa.table(row, schema=TABLES["correlations"].schema),
                   dst := pdir / "part-corr-00000001.parquet")
    return dst, "not a rules part"


CASES = ["steps rows", "a column every version had missing", "a column of another type",
         "another table with this one's keys"]


@pytest.mark.parametrize("case", CASES)
def test_a_part_not_of_its_table_is_skipped_warned_listed_and_quarantined(
        wh: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    bad, why = _foreign(wh, case)
    rel = bad.relative_to(wh).as_posix()
    table = rel.split("/")[0]
    runs, err = _runs(wh, capsys)
    assert len(runs) == 1 and runs[0]["problem_id"] is not None, runs
    warned = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert len(warned) == 1 and rel in warned[0] and why in warned[0], err
    assert bad not in visible_parts(wh, table)
    assert [p for p, _ in unreadable_parts(wh)] == [rel]  # /v1/health's skipped_parts
    assert read_table(wh, "runs").num_rows == 1
    assert main(["runs", "--warehouse", str(wh)]) == 0
    assert capsys.readouterr().out.count("iris") == 1

    rc, out, err = _check(wh, capsys)
    assert rc == 1 and f"problem: part with wrong columns {rel}" in out and why in out, out
    assert "warning:" not in err  # check names it itself
    rc, out, _ = _check(wh, capsys, "--repair")
    assert rc == 0 and f"quarantined: {rel}" in out, out
    assert (wh / QUARANTINE / rel).exists() and not bad.exists()
    rc, out, _ = _check(wh, capsys)
    assert rc == 0 and out.rstrip().endswith("ok"), out
    assert unreadable_parts(wh) == []
    assert len(_runs(wh, capsys)[0]) == 1


def test_parts_written_before_a_column_was_added_are_read(
        wh: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Columns added later are NULL in older parts, not a reason to skip them: an older steps
    and results part beside the trained run's, every problem_features part without
    `split_seed`."""
    for table, column in (("steps", "trajectory"), ("results", "trajectory")):
        part = _part(wh, table)
        t = pq.read_table(part).drop_columns([column])
        t = t.set_column(0, "run_id", pa.array(["older"] * t.num_rows))
        pq.write_table(t, part.with_name("part-older-00000001.parquet"))
    part = _part(wh, "problem_features")
    pq.write_table(pq.read_table(part).drop_columns(["split_seed"]), part)
    assert main(["sql", "SELECT (SELECT count(*) FROM steps WHERE run_id = 'older'), "
                 "(SELECT count(*) FROM results WHERE trajectory IS NULL), "
                 "(SELECT count(*) FROM problem_features)", "--format", "csv",
                 "--warehouse", str(wh)]) == 0
    got = capsys.readouterr()
    assert got.out.splitlines()[1] == "3,9,51" and "warning" not in got.err, got
    assert unreadable_parts(wh) == []
    rc, out, _ = _check(wh, capsys)
    assert rc == 0 and out.rstrip().endswith("ok"), out


def test_a_warehouse_written_before_a_column_was_added_reads(
        wh: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every part older than `trajectory` and `split_seed`: the views name those columns, so
    every query failed (DuckDB: "column trajectory referenced ... before it is defined");
    they read NULL, through `connect` and the service's cached catalog alike."""
    for table in TABLES.values():
        later = [c.name for c in table.columns if c.later]
        for part in visible_parts(wh, table.name) if later else ():
            pq.write_table(pq.read_table(part).drop_columns(later), part)
    query = ("SELECT (SELECT count(*) FROM live_steps), (SELECT count(*) FROM steps "
             "WHERE trajectory IS NULL), (SELECT count(*) FROM problem_features)")
    assert main(["sql", query, "--format", "csv", "--warehouse", str(wh)]) == 0
    got = capsys.readouterr()
    assert got.out.splitlines()[1] == "3,3,51" and not got.err, got
    assert [r["run_id"] for r in _runs(wh, capsys)[0]] == [_only_run(wh)]
    cached = CachedCatalog(wh)
    assert cached.read(lambda c: c.execute(query).fetchall()) == [(3, 3, 51)]


def _only_run(root: Path) -> str:
    (run,) = pq.read_table(_part(root, "runs")).column("run_id").to_pylist()
    return str(run)


def test_the_key_columns_are_among_those_every_version_wrote() -> None:
    for name, table in TABLES.items():
        assert set(KEYS[name]) <= set(table.required), name


STRAYS = ["runs/stray.parquet", "stray.parquet", "runs/foo/part-bbbb-00000001.parquet",
          "runs/date=someday/part-bbbb-00000001.parquet",
          "runs/date=2026-01-01/sub/part-bbbb-00000001.parquet"]


@pytest.mark.parametrize("where", STRAYS)
@pytest.mark.parametrize("what", ["junk", "a runs part"])
def test_a_stray_parquet_anywhere_is_reported_and_moved_aside(
        wh: Path, where: str, what: str, capsys: pytest.CaptureFixture[str]) -> None:
    stray = wh / where
    stray.parent.mkdir(parents=True, exist_ok=True)
    if what == "junk":
        stray.write_text("junk\n")
    else:
        shutil.copy(_part(wh, "runs"), stray)
    runs, err = _runs(wh, capsys)  # readers ignore it: the run as before, no warning
    assert len(runs) == 1 and runs[0]["problem_id"] is not None and err == "", err
    assert unreadable_parts(wh) == []

    rc, out, _ = _check(wh, capsys)
    assert rc == 1 and f"problem: stray file {where}" in out, out
    rc, out, _ = _check(wh, capsys, "--repair")
    assert rc == 0 and f"quarantined: {where}" in out, out
    assert (wh / QUARANTINE / where).exists() and not stray.exists()
    assert (wh / QUARANTINE / f"{where}.json").exists()
    rc, out, _ = _check(wh, capsys)
    assert rc == 0 and out.rstrip().endswith("ok"), out
    assert len(_runs(wh, capsys)[0]) == 1
