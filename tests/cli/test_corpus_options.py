"""`aicf-induct corpus build` refuses an option that the rest of its command line leaves
with nothing to do (before it was silently ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aicf_induct.cli.main import main


def _build(tmp_path: Path, capsys: pytest.CaptureFixture[str], *opts: str
           ) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["corpus", "build", "--problems", "iris", "--space", "depth=1;width=8",
               "--warehouse", str(tmp_path / "wh"), "--dry-run", "--no-load", "--quiet",
               *opts])
    out, err = capsys.readouterr()
    return rc, out, err


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
