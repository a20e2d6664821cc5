from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from aicf_induct.cli import main as cli_main
from tests.warehouse.conftest import one_run_warehouse
from warehouse import WarehouseError, connect, run_guarded

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def filled(root: Path) -> Path:
    return one_run_warehouse(root)


@pytest.mark.parametrize("sql", [
    "DROP VIEW steps", "CREATE TABLE t AS SELECT 1", "COPY steps TO 'x.csv'",
    "INSERT INTO steps SELECT * FROM steps", "ATTACH 'x.db'", "SET threads = 1",
    "SELECT 1; SELECT 2", "INSTALL httpfs", "PRAGMA version",
])
def test_guard_refuses_anything_but_one_select(filled: Path, sql: str) -> None:
    with pytest.raises(WarehouseError):
        run_guarded(connect(filled), sql)


def test_guard_sandbox_blocks_files_outside_the_warehouse(filled: Path) -> None:
    with pytest.raises(WarehouseError, match=r"disabled|Permission"):
        run_guarded(connect(filled), "SELECT * FROM read_csv('/etc/passwd')")
    assert run_guarded(connect(filled), "SELECT count(*) AS n FROM steps")["n"][0] == 10


def _cli(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    # only this package's commands: the other command modules are other engineers' work
    return cli_main.main(list(argv))


def test_cli_sql_formats(filled: Path, monkeypatch, capsys, tmp_path: Path) -> None:
    wh = ["--warehouse", str(filled)]
    assert _cli(monkeypatch, "sql", "SELECT count(*) AS n FROM steps", *wh) == 0
    assert capsys.readouterr().out.split() == ["n", "10"]
    assert _cli(monkeypatch, "sql", "SELECT run_id FROM runs", "--format", "csv", *wh) == 0
    assert capsys.readouterr().out == "run_id\nrun-a\n"
    assert _cli(monkeypatch, "sql", "SELECT run_id FROM runs", "--format", "json", *wh) == 0
    assert json.loads(capsys.readouterr().out) == [{"run_id": "run-a"}]
    out = tmp_path / "o.parquet"
    assert _cli(monkeypatch, "sql", "SELECT * FROM steps", "--format", "parquet",
                "--output", str(out), *wh) == 0
    assert len(pd.read_parquet(out)) == 10


def test_cli_errors_are_one_line(filled: Path, monkeypatch, capsys) -> None:
    for argv in (["sql", "SELEC 1"], ["sql", "DELETE FROM steps"], ["sql", "SELECT nope"],
                 ["report", "nope"], ["sql", "SELECT 1", "--format", "parquet"]):
        assert _cli(monkeypatch, *argv, "--warehouse", str(filled)) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err


def test_cli_runs_report_and_env_var(filled: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("AICF_WAREHOUSE", str(filled))
    assert _cli(monkeypatch, "runs") == 0
    out = capsys.readouterr().out
    assert "run-a" in out and "completed" in out
    assert _cli(monkeypatch, "report", "leaderboard", "--problem", "name-p1", "-p", "top=3") == 0
    assert "fp" in capsys.readouterr().out
    assert _cli(monkeypatch, "report") == 0
    assert "pattern_performance" in capsys.readouterr().out


def test_cli_warehouse_maintenance(filled: Path, monkeypatch, capsys) -> None:
    wh = ["--warehouse", str(filled)]
    assert _cli(monkeypatch, "warehouse", "check", *wh) == 0
    assert capsys.readouterr().out.strip().endswith("ok")
    assert _cli(monkeypatch, "warehouse", "compact", "--grace", "0", *wh) == 0
    assert "merged" in capsys.readouterr().out
    assert _cli(monkeypatch, "warehouse", "rebuild", *wh) == 0
    import duckdb

    conn = duckdb.connect(str(filled / "_catalog.duckdb"), read_only=True)
    assert conn.execute("SELECT count(*) FROM steps").fetchone() == (10,)


def test_cli_missing_warehouse_is_one_error(tmp_path: Path, monkeypatch, capsys) -> None:
    typo = tmp_path / "typo"
    for argv in (["runs"], ["sql", "SELECT 1"], ["report", "leaderboard"],
                 ["warehouse", "check"], ["warehouse", "compact"], ["warehouse", "rebuild"]):
        assert _cli(monkeypatch, *argv, "--warehouse", str(typo)) == 2
        err = capsys.readouterr().err
        assert err == f"error: no warehouse at {typo} (the directory does not exist)\n", argv
    assert not typo.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_cli_maintenance_of_a_read_only_warehouse(filled: Path, monkeypatch, capsys) -> None:
    files = sorted((p, p.stat().st_mtime_ns) for p in filled.rglob("*"))
    for d in [filled, *(p for p in filled.rglob("*") if p.is_dir())]:
        d.chmod(0o555)
    try:
        for argv in (["warehouse", "compact"], ["warehouse", "rebuild"],
                     ["warehouse", "check", "--repair"]):
            assert _cli(monkeypatch, *argv, "--warehouse", str(filled)) == 2
            err = capsys.readouterr().err
            assert err == f"error: warehouse {filled} is not writable\n", argv
        assert sorted((p, p.stat().st_mtime_ns) for p in filled.rglob("*")) == files
    finally:
        for d in [filled, *(p for p in filled.rglob("*") if p.is_dir())]:
            d.chmod(0o755)


def _tree(root: Path) -> list[tuple[str, str]]:
    return sorted((p.relative_to(root).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest())
                  for p in root.rglob("*") if p.is_file())


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root to bind-mount the warehouse read-only")
def test_cli_maintenance_of_a_read_only_mount(filled: Path) -> None:
    """As root (where file modes do not stop a write), a read-only mount: one error line
    each, exit 2, the warehouse unchanged."""
    before = _tree(filled)
    cli = f"{shlex.quote(sys.executable)} -m aicf_induct warehouse"
    script = (f"mount --bind {filled} {filled} && mount -o remount,bind,ro {filled} || exit 99; "
              + "; ".join(f"{cli} {cmd} --warehouse {filled}; echo rc=$?"
                          for cmd in ("compact", "rebuild", "check --repair")))
    got = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    if got.returncode == 99 or "Operation not permitted" in got.stderr:
        pytest.skip(f"no read-only bind mount here: {got.stderr.strip()}")
    assert got.stdout.split() == ["rc=2"] * 3, (got.stdout, got.stderr)
    assert got.stderr == f"error: warehouse {filled} is not writable\n" * 3
    assert _tree(filled) == before
