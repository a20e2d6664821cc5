"""`aicf-induct sweep` and `corpus build` refuse options that the rest of their command line
leaves with nothing to do (before they were silently ignored), and `sweep` notes an --exclude
name that matches no problem, as `corpus build` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from aicf_induct.cli.main import main


def _dry(command: str, problems: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
         *opts: str) -> tuple[int, str, str]:
    """`command` (`sweep` or `corpus build`) planned, nothing trained: (status, out, err)."""
    capsys.readouterr()
    rc = main([*command.split(), "--problems", problems, "--space", "depth=1;width=8",
               "--warehouse", str(tmp_path / "wh"), "--dry-run", "--no-load", "--quiet",
               *opts])
    out, err = capsys.readouterr()
    return rc, out, err


def _sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str], *opts: str
           ) -> tuple[int, str, str]:
    return _dry("sweep", "iris,wine", tmp_path, capsys, *opts)


def _build(tmp_path: Path, capsys: pytest.CaptureFixture[str], *opts: str
           ) -> tuple[int, str, str]:
    return _dry("corpus build", "iris", tmp_path, capsys, *opts)


def test_ray_address_needs_the_ray_engine(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _sweep(tmp_path, capsys, "--ray-address", "auto")
    assert rc == 2 and out == "", (out, err)
    assert err.count("\n") == 1 and err.startswith("error: --ray-address needs --engine ray"), err


def test_a_ray_address_where_nothing_answers_is_one_line_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`ray.init` retried such an address without end (an audit's sweep waited 9.5 minutes,
    printing only Ray's warnings); nothing answers on port 1."""
    rc = main(["sweep", "--problems", "iris", "--space", "depth=1;width=8", "--engine", "ray",
               "--ray-address", "127.0.0.1:1", "--warehouse", str(tmp_path / "wh"),
               "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith("error: --ray-address 127.0.0.1:1: no Ray cluster answers there"), err
    assert not (tmp_path / "wh").exists()


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


def test_adaptive_steps_needs_adaptive(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _build(tmp_path, capsys, "--adaptive-steps", "10")
    assert rc == 2 and out == "", (out, err)
    assert err.count("\n") == 1 and err.startswith("error: --adaptive-steps goes with "
                                                   "--adaptive N"), err
    rc, out, err = _build(tmp_path, capsys, "--adaptive", "2", "--adaptive-steps", "10")
    assert rc == 0 and "10 steps each" in out, (out, err)
    rc, out, err = _build(tmp_path, capsys, "--adaptive", "2")
    assert rc == 0 and "600 steps each" in out, (out, err)  # the default
    assert not (tmp_path / "wh").exists()
