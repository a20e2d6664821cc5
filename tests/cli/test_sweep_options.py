"""`aicf-induct sweep` refuses options that the rest of its command line leaves with
nothing to do (before they were silently ignored), and notes an --exclude name that
matches no problem, as `corpus build` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from aicf_induct.cli.main import main


def _sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str], *opts: str
           ) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["sweep", "--problems", "iris,wine", "--space", "depth=1;width=8",
               "--warehouse", str(tmp_path / "wh"), "--dry-run", "--no-load", "--quiet",
               *opts])
    out, err = capsys.readouterr()
    return rc, out, err


def test_ray_address_needs_the_ray_engine(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _sweep(tmp_path, capsys, "--ray-address", "auto")
    assert rc == 2 and out == "", (out, err)
    assert err.count("\n") == 1 and err.startswith("error: --ray-address needs --engine ray"), err


def test_api_key_needs_log_to(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _sweep(tmp_path, capsys, "--api-key", "KEY")
    assert rc == 2 and out == "", (out, err)
    assert err.count("\n") == 1 and err.startswith("error: --api-key is the write key for "
                                                   "--log-to"), err


def test_an_exclude_name_that_matches_no_problem_is_noted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _sweep(tmp_path, capsys, "--exclude", "nosuch,wine")
    assert rc == 0, err
    assert err == "note: --exclude 'nosuch' matches no problem of --problems\n"
    assert "problems: iris\n" in out  # wine left out, as asked
    assert not (tmp_path / "wh").exists()
