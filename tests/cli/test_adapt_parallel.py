"""`aicf-induct adapt --ranks N`: the ranks take rank 0's measurements and decisions, so the
rewrites, the guard's verdicts and the rollbacks happen at the same steps on every rank and
the run is the one-rank run (metrics to 1e-9); rank 0 alone logs and writes checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from aicf_induct.cli.main import main

ARGS = ["adapt", "--dataset", "wine", "--model", "mlp:depth=1,width=4", "--policy", "rules",
        "--steps", "300", "--trigger-warmup", "40", "--eval-every", "20", "--guard-steps", "30",
        "--inject-spike", "200", "--backend", "numpy", "--json"]


def _adapt(capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    assert main([*ARGS, *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_two_ranks_rewrite_and_roll_back_as_one(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    import warehouse

    one = _adapt(capsys, "--no-log")
    two = _adapt(capsys, "--ranks", "2", "--warehouse", str(tmp_path / "wh"),
                 "--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-steps", "50")
    assert one["rewrites"] >= 1 and one["rollbacks"] >= 1  # the case exercises both
    for key in ("status", "steps", "executed_steps", "rewrites", "rollbacks", "param_count"):
        assert two[key] == one[key], key
    for key, value in one.items():
        if key.startswith(("train_", "val_", "test_")):
            np.testing.assert_allclose(two[key], value, rtol=1e-9, err_msg=key)
    conn = warehouse.connect(tmp_path / "wh")
    assert [r[0] for r in conn.execute("SELECT run_id FROM runs").fetchall()] == [two["run_id"]]
    kinds = {r[0] for r in conn.execute("SELECT kind FROM events").fetchall()}
    assert {"rewrite", "rollback", "checkpoint"} <= kinds
    assert list((tmp_path / "ckpt").iterdir())  # rank 0's


def test_resume_takes_one_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["adapt", "--dataset", "wine", "--resume", str(tmp_path), "--ranks", "2",
                 "--no-log"]) != 0
    assert "--resume goes on with one rank" in capsys.readouterr().err
