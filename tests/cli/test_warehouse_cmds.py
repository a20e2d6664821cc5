"""`aicf-induct sql | report | warehouse check`: user errors are one line (exit 2), JSON output
carries any value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aicf_induct.cli import main as cli_main
from aicf_induct.records import RunStartRecord
from tests.warehouse.conftest import one_run_warehouse, problem
from warehouse import WarehouseRecorder


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    return one_run_warehouse(tmp_path / "wh")


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_sql_json_carries_values_json_has_no_type_for(filled: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    sql = ("SELECT INTERVAL 1 DAY AS i, 1/0 AS x, 12::HUGEINT AS h, "
           "TIMESTAMPTZ '2026-01-02 03:04:05.123456+00' AS t, 'é' AS s, MAP([1], [2]) AS m")
    assert cli_main.main(["sql", sql, "--format", "json", "--warehouse", str(filled)]) == 0
    # as the service's SQL route gives them (warehouse.sql_values.json_column)
    assert json.loads(capsys.readouterr().out) == [
        {"i": [0, 1, 0], "x": None, "h": 12.0, "t": "2026-01-02T03:04:05.123456+00:00",
         "s": "é", "m": {"1": 2}}]


def test_sql_json_refuses_two_columns_of_one_name(filled: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`SELECT 1 AS a, 2 AS a` printed [{"a": 2}]: the first column gone, silently."""
    assert cli_main.main(["sql", "SELECT 1 AS a, 2 AS a, 3 AS b", "--format", "json",
                          "--warehouse", str(filled)]) == 2
    assert "more than one column named 'a'" in _one_line_error(capsys)
    assert cli_main.main(["sql", "SELECT 1 AS a, 2 AS a", "--warehouse", str(filled)]) == 0


def test_a_negative_report_count_is_refused(filled: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["report", "leaderboard", "-p", "top=-1",
                          "--warehouse", str(filled)]) == 2
    assert "parameter 'top' must not be negative" in _one_line_error(capsys)
    assert cli_main.main(["report", "leaderboard", "-p", "top=0",
                          "--warehouse", str(filled)]) == 0


def test_check_refuses_a_directory_that_is_not_a_warehouse(tmp_path: Path, filled: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    other = tmp_path / "src"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    assert cli_main.main(["warehouse", "check", "--warehouse", str(other)]) == 2
    assert f"{other} is not a warehouse" in _one_line_error(capsys)
    empty = tmp_path / "empty"
    empty.mkdir()  # a warehouse nothing was written to yet
    assert cli_main.main(["warehouse", "check", "--warehouse", str(empty)]) == 0
    assert cli_main.main(["warehouse", "check", "--warehouse", str(filled)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("ok")


@pytest.mark.parametrize("command", [["runs"], ["sql", "SELECT 1"], ["report", "leaderboard"],
                                     ["mine"], ["induce", "fit", "-o", "pack.parquet"],
                                     ["plot", "leaderboard", "p1", "-o", "p.png"]])
def test_readers_refuse_a_directory_that_is_not_a_warehouse(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong --warehouse (a source tree, a home directory) read as an empty warehouse:
    `runs` said "(no rows)" with status 0."""
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "src"
    (other / "pkg").mkdir(parents=True)
    (other / "notes.txt").write_text("x")
    assert cli_main.main([*command, "--warehouse", str(other)]) == 2
    assert f"{other} is not a warehouse" in _one_line_error(capsys)
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt", "pkg"]  # nothing written
    assert not (tmp_path / "pack.parquet").exists() and not (tmp_path / "p.png").exists()


def test_the_output_files_extension_names_its_format(filled: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`--output r.csv` writes CSV, `r.parquet` Parquet; a --format the extension contradicts
    is refused (Parquet bytes went into r.csv, a text table into r.json)."""
    import pyarrow.parquet as pq

    wh = ["--warehouse", str(filled)]
    assert cli_main.main(["runs", "--output", str(tmp_path / "r.csv"), *wh]) == 0
    assert (tmp_path / "r.csv").read_text().startswith("run_id,")
    assert cli_main.main(["runs", "--output", str(tmp_path / "r.parquet"), *wh]) == 0
    assert pq.read_table(tmp_path / "r.parquet").num_rows == 1
    assert cli_main.main(["sql", "SELECT 1 AS a", "--output", str(tmp_path / "a.json"),
                          *wh]) == 0
    assert json.loads((tmp_path / "a.json").read_text()) == [{"a": 1}]
    capsys.readouterr()
    assert cli_main.main(["runs", "--format", "parquet", "--output", str(tmp_path / "x.csv"),
                          *wh]) == 2
    assert "names a .csv file and --format is parquet" in _one_line_error(capsys)
    assert not (tmp_path / "x.csv").exists()


def test_a_problem_given_twice_differently_is_refused(filled: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["report", "leaderboard", "--problem", "p1", "-p", "problem=p2",
                          "--warehouse", str(filled)]) == 2
    assert "--problem p1 and -p problem=p2 disagree" in _one_line_error(capsys)


def test_a_problem_the_warehouse_does_not_hold_is_named(filled: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in --problem was "(no rows)", status 0; a known problem with no rows still is."""
    wh = ["--warehouse", str(filled)]
    for argv in (["runs", "--problem", "nosuch"], ["report", "leaderboard", "--problem", "nosuch"]):
        assert cli_main.main([*argv, *wh]) == 2
        assert f"no problem 'nosuch' in {filled}" in _one_line_error(capsys)
    assert cli_main.main(["runs", "--problem", "p1", "--status", "failed", *wh]) == 0
    assert "(no rows)" in capsys.readouterr().out


def test_sql_runs_and_report_take_json_and_o_as_the_other_commands_do(
        filled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--json` and `-o` were "unrecognized arguments" here and nowhere else."""
    assert cli_main.main(["sql", "SELECT 7 AS n", "--json", "--warehouse", str(filled)]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 7}]
    out = tmp_path / "r.csv"
    assert cli_main.main(["runs", "-o", str(out), "--warehouse", str(filled)]) == 0
    assert out.read_text().startswith("run_id,")
    assert cli_main.main(["report", "leaderboard", "--json", "--format", "csv",
                          "--warehouse", str(filled)]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_runs_filter_by_origin_as_the_dashboard_does(filled: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`runs --origin` (the runs list and `GET /v1/runs` filter by origin; the CLI could not),
    through run_summary's `origin`."""
    rec = WarehouseRecorder(filled)
    p = problem("p1")
    rec.run_start(RunStartRecord("run-b", p.problem_id, p.name, p.task, {}, 0, "cpu", {},
                                 "sweep"))
    rec.close()
    capsys.readouterr()
    assert cli_main.main(["runs", "--warehouse", str(filled), "--origin", "sweep",
                          "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == ["run-b"]
    assert cli_main.main(["runs", "--warehouse", str(filled), "--origin", "test",
                          "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == ["run-a"]


def test_a_report_parameter_given_twice_is_refused(filled: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`-p limit=1 -p limit=2` took the last, silently."""
    assert cli_main.main(["report", "run_summary", "--warehouse", str(filled),
                          "-p", "limit=1", "-p", "limit=2"]) == 2
    assert "--param limit given twice" in _one_line_error(capsys)


def test_a_runs_limit_past_bigint_is_refused_by_the_option(
        filled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["runs", "--warehouse", str(filled), "--limit", str(2**63)]) == 2
    assert f"--limit: must be <= {2**63 - 1}" in _one_line_error(capsys)
