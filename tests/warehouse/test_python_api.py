"""The warehouse used from Python: a wrong argument is a one-line WarehouseError naming it,
never a silent wrong answer (a column of NULLs, single-character columns, zero rows of a
typo, a count truncated) nor a raw AttributeError or FileNotFoundError."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.warehouse.conftest import log_run, one_run_warehouse, problem
from warehouse import (
    WarehouseError,
    WarehouseRecorder,
    check_served,
    connect,
    read_table,
    require_warehouse,
    run_report,
)


def test_read_table_refuses_a_column_the_table_has_not(root: Path) -> None:
    """It read as a column of NULLs."""
    one_run_warehouse(root)
    with pytest.raises(WarehouseError, match=r"table 'runs' has no column\(s\) 'nope' "
                                             r"\(columns: run_id, "):
        read_table(root, "runs", ["run_id", "nope"])


def test_read_table_takes_a_str_as_one_column(root: Path) -> None:
    """A str was iterated: one column per character ('r', 'u', 'n', ...)."""
    one_run_warehouse(root)
    t = read_table(root, "runs", "run_id")
    assert t.column_names == ["run_id"] and t.column("run_id").to_pylist() == ["run-a"]


def test_read_table_refuses_a_missing_warehouse_as_connect_does(tmp_path: Path) -> None:
    """A typo read as a table of 0 rows."""
    typo = tmp_path / "typo_dir"
    with pytest.raises(WarehouseError, match=f"no warehouse at {typo} \\(the directory does "
                                             "not exist\\)"):
        read_table(typo, "runs")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(WarehouseError, match="is not a warehouse"):
        read_table(tmp_path / "other", "runs")
    # what a warehouse nothing was logged to yet reads as, when the caller says so (the
    # kernel tuning store's first look on a device)
    assert read_table(typo, "runs", ["run_id"], missing_ok=True).num_rows == 0
    assert not typo.exists()


def test_check_served_takes_a_str_as_the_readme_documents(root: Path) -> None:
    """`check_served("dir", ...)` was an AttributeError ('str' has no 'is_dir')."""
    one_run_warehouse(root)
    assert check_served(str(root), "X") is True
    assert check_served(str(root.parent / "new"), "X") is False
    with pytest.raises(WarehouseError, match="X: no warehouse at"):
        check_served(str(root / "a" / "b"), "X")


def test_require_warehouse_refuses_a_missing_path_as_a_warehouse_error(tmp_path: Path) -> None:
    """It raised a raw FileNotFoundError (and NotADirectoryError for a file), which the CLI
    prints as 'no such file' and the service as a 500."""
    with pytest.raises(WarehouseError, match=r"no warehouse at \S*nope \(the directory does "
                                             r"not exist\)"):
        require_warehouse(str(tmp_path / "nope"))
    (tmp_path / "f").write_text("x")
    with pytest.raises(WarehouseError, match="is not a directory"):
        require_warehouse(tmp_path / "f")
    (tmp_path / "empty").mkdir()
    require_warehouse(tmp_path / "empty")  # a warehouse nothing was written to yet


@pytest.mark.parametrize("top", [2.9, True, False, float("nan")])
def test_a_count_parameter_refuses_a_fraction_and_a_bool(root: Path, top: object) -> None:
    """top=2.9 ran as top 2, top=True as top 1."""
    rec = WarehouseRecorder(root)
    for i, score in enumerate((0.9, 0.8, 0.7)):
        log_run(rec, f"r{i}", problem("p1"), score, f"fp{i}", {"depth": 1.0 + i})
    rec.close()
    conn = connect(root)
    with pytest.raises(WarehouseError, match=f"report 'leaderboard': parameter 'top' must be "
                                             f"a whole number, got '{top}'"):
        run_report(conn, "leaderboard", {"top": top})


def test_a_count_parameter_takes_a_whole_float(root: Path) -> None:
    rec = WarehouseRecorder(root)
    for i, score in enumerate((0.9, 0.8, 0.7)):
        log_run(rec, f"r{i}", problem("p1"), score, f"fp{i}", {"depth": 1.0 + i})
    rec.close()
    conn = connect(root)
    assert run_report(conn, "leaderboard", {"top": 2.0}).equals(
        run_report(conn, "leaderboard", {"top": 2}))
    assert len(run_report(conn, "leaderboard", {"top": "2"})) == 2
