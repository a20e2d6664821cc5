"""One damaged part (truncated, empty, not Parquet): every reader keeps working, names the file
once on stderr, and `warehouse check --repair` quarantines it, saying what was lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from aicf_induct.cli import main as cli_main
from tests.warehouse.conftest import log_run, problem
from warehouse import (
    WarehouseRecorder,
    check,
    compact,
    connect,
    read_table,
    rebuild,
    visible_parts,
)
from warehouse.catalog import with_retry
from warehouse.check import QUARANTINE

REPO = Path(__file__).resolve().parents[2]


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(b"run_id,step\nx,1\n" * 20)  # a CSV named *.parquet


@pytest.fixture
def damaged(root: Path, request: pytest.FixtureRequest) -> tuple[Path, Path, int]:
    """Three runs, each in its own steps part; the second's part damaged. Returns the root,
    the damaged part and its rows."""
    for i, run in enumerate(("a", "b", "c")):
        rec = WarehouseRecorder(root)
        log_run(rec, run, problem("p1"), 0.9 - i / 10, f"fp{i}", {"depth": 1.0 + i},
                steps=10 + i)
        rec.close()
    parts = visible_parts(root, "steps")
    bad = next(p for p in parts if pq.read_table(p)["run_id"][0].as_py() == "b")
    rows = pq.ParquetFile(bad).metadata.num_rows
    _damage(bad, getattr(request, "param", "truncated"))
    return root, bad, rows


def _warnings(err: str, name: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("warning:") and name in ln]


@pytest.mark.parametrize("damaged", ["truncated", "empty", "not_parquet"], indirect=True)
def test_readers_skip_a_damaged_part_with_one_warning(damaged: tuple[Path, Path, int],
                                                      capfd: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root, bad, _ = damaged
    steps = "SELECT run_id, count(*) FROM steps GROUP BY 1 ORDER BY 1"
    assert connect(root).execute(steps).fetchall() == [("a", 10), ("c", 12)]
    assert with_retry(root, lambda c: c.execute("SELECT count(*) FROM runs").fetchall()) \
        == [(3,)]
    assert bad not in visible_parts(root, "steps")  # pyarrow/pandas readers listing parts
    got = read_table(root, "steps", ["run_id", "step"]).to_pandas()  # pyarrow alone
    assert got.groupby("run_id").size().to_dict() == {"a": 10, "c": 12}
    assert cli_main.main(["runs", "--warehouse", str(root)]) == 0
    assert cli_main.main(["report", "leaderboard", "--warehouse", str(root)]) == 0
    compact(root, grace_s=0)  # merges the good parts, leaves the bad one alone
    rebuild(root)
    assert connect(root).execute(steps).fetchall() == [("a", 10), ("c", 12)]
    err = capfd.readouterr().err
    assert len(_warnings(err, bad.name)) == 1, err  # one warning, naming the file
    assert "Traceback" not in err

    # check fails and names it; --repair moves it aside and says what was lost
    assert cli_main.main(["warehouse", "check", "--warehouse", str(root)]) == 1
    out = capfd.readouterr().out
    assert f"problem: unreadable part steps/{bad.parent.name}/{bad.name}" in out
    assert cli_main.main(["warehouse", "check", "--repair", "--warehouse", str(root)]) == 0
    out = capfd.readouterr().out
    moved = root / QUARANTINE / "steps" / bad.parent.name / bad.name
    assert f"quarantined: steps/{bad.parent.name}/{bad.name} (table steps" in out
    assert not bad.exists() and moved.exists()
    note = json.loads(moved.with_name(moved.name + ".json").read_text())
    assert note["table"] == "steps" and note["size"] == moved.stat().st_size
    assert check(root).ok and connect(root).execute(steps).fetchall() == [("a", 10), ("c", 12)]
    assert _warnings(capfd.readouterr().err, bad.name) == []


def test_a_part_damaged_past_its_footer_check_is_skipped_too(root: Path,
                                                            capfd: pytest.CaptureFixture[str]
                                                            ) -> None:
    """Whole frame, garbage footer: pyarrow and DuckDB fail on it; readers still skip it."""
    rec = WarehouseRecorder(root)
    log_run(rec, "a", problem("p1"), 0.9, "fp", {"depth": 1.0})
    rec.close()
    part = visible_parts(root, "steps")[0]
    data = bytearray(part.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    data[-8 - footer:-8] = b"\x07" * footer  # the footer's bytes, not its frame
    part.write_bytes(bytes(data))
    assert connect(root).execute("SELECT count(*) FROM steps").fetchall() == [(0,)]
    assert connect(root).execute("SELECT count(*) FROM runs").fetchall() == [(1,)]
    assert read_table(root, "steps").num_rows == 0
    assert len(_warnings(capfd.readouterr().err, part.name)) == 1
    rep = check(root, repair=True)
    assert [b.path for b in rep.quarantined] == [part.relative_to(root).as_posix()]


def test_cli_on_a_damaged_warehouse_in_a_real_process(damaged: tuple[Path, Path, int]) -> None:
    root, bad, _ = damaged
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    got = subprocess.run([sys.executable, "-m", "aicf_induct", "sql",
                          "SELECT count(*) AS n FROM steps", "--warehouse", str(root)],
                         capture_output=True, text=True, env=env, timeout=60)
    assert got.returncode == 0 and got.stdout.split() == ["n", "22"], got.stderr
    assert len(got.stderr.splitlines()) == 1 and bad.name in got.stderr, got.stderr


def _damage_page_header(part: Path, column: str) -> None:
    """Overwrite the header of `column`'s first page: the footer stays whole, and DuckDB's
    error ("don't know what type") names no file."""
    md = pq.read_metadata(part)
    names = [md.schema.column(i).name for i in range(md.num_columns)]
    chunk = md.row_group(0).column(names.index(column))
    at = chunk.dictionary_page_offset or chunk.data_page_offset
    data = bytearray(part.read_bytes())
    data[at:at + 12] = b"\xff" * 12
    part.write_bytes(bytes(data))


@pytest.fixture
def damaged_runs_pages(root: Path) -> tuple[Path, Path]:
    """Three runs; run b's `runs` part has a damaged page under an intact footer."""
    for i, run in enumerate(("a", "b", "c")):
        rec = WarehouseRecorder(root)
        log_run(rec, run, problem("p1"), 0.9 - i / 10, f"fp{i}", {"depth": 1.0 + i})
        rec.close()
    bad = next(p for p in visible_parts(root, "runs")
               if pq.read_table(p, columns=["run_id"])["run_id"][0].as_py() == "b")
    _damage_page_header(bad, "run_id")
    return root, bad


def test_check_quick_finds_a_runs_part_with_damaged_pages(damaged_runs_pages: tuple[Path, Path],
                                                          capfd: pytest.CaptureFixture[str]
                                                          ) -> None:
    """--quick reads footers only, but its query of the runs (abandoned ones) reads the part:
    it reports it instead of crashing; --repair quarantines it, and the run's other rows are
    then noted as orphans."""
    root, bad = damaged_runs_pages
    wh = ["--warehouse", str(root)]
    assert cli_main.main(["warehouse", "check", "--quick", *wh]) == 1
    got = capfd.readouterr()
    assert f"problem: unreadable part runs/{bad.parent.name}/{bad.name}" in got.out
    assert "Traceback" not in got.err
    assert cli_main.main(["warehouse", "check", "--quick", "--repair", *wh]) == 0
    assert f"quarantined: runs/{bad.parent.name}/{bad.name}" in capfd.readouterr().out
    rep = check(root)
    assert rep.ok and not bad.exists()
    assert any(n.startswith("orphaned rows of 1 run(s)") and "steps 10" in n
               for n in rep.notes), rep.notes


def test_readers_skip_a_part_whose_pages_are_damaged(damaged_runs_pages: tuple[Path, Path],
                                                     capfd: pytest.CaptureFixture[str]) -> None:
    """DuckDB's error names no file: the part is found by probing the parts, marked
    unreadable and the query retried without it, with one warning."""
    root, bad = damaged_runs_pages
    runs = "SELECT run_id FROM runs ORDER BY 1"
    assert with_retry(root, lambda c: c.execute(runs).fetchall()) == [("a",), ("c",)]
    assert cli_main.main(["runs", "--warehouse", str(root)]) == 0
    assert cli_main.main(["sql", runs, "--warehouse", str(root)]) == 0
    got = capfd.readouterr()
    assert got.out.split()[-3:] == ["run_id", "a", "c"]
    warned = _warnings(got.err, bad.name)
    assert len(warned) == 1 and "damaged pages" in warned[0], got.err
    assert warned[0].isprintable()
