"""`aicf-induct space show` and `aicf-induct sweep` argument handling (no training)."""

from __future__ import annotations

import json

import pytest

from aicf_induct.cli.main import main


def test_space_show_lists_candidates_with_fingerprints(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["space", "show", "depth=1,2;act=relu,gelu", "--in", "4", "--out", "3",
                 "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 4 and len({r["fingerprint"] for r in rows}) == 4
    assert rows[0]["structure_key"].startswith("mlp:depth=1,width=64,act=relu")


def test_sweep_dry_run_takes_recipe_options_for_axes_the_space_leaves(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--problems", "sklearn:3", "--exclude", "wine", "--space",
                 "depth=1;lr=1e-3,1e-2", "--batch-size", "64", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "2 problems × 2 candidates × 1 seeds = 4 runs" in out
    assert "problems: iris, breast_cancer" in out
    assert "optimizer=adam,lr=0.01,weight_decay=0.0,batch_size=64" in out  # the defaults


@pytest.mark.parametrize("argv, words", [
    (["--space", "depth=1;colour=red"], "unknown axis 'colour'"),
    (["--space", "tiny3", "--no-log"], "--no-log"),
    (["--space", "tiny3", "--seeds", "0"], "--seeds must be >= 1"),
    (["--space", "tiny3", "--workers", "0"], "workers must be >= 1"),
])
def test_sweep_errors_are_one_line(argv: list[str], words: str, tmp_path: object,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--problems", "iris", "--warehouse", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
