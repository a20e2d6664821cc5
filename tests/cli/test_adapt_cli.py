"""`aicf-induct adapt` end to end: the timeline, injected faults rolled back, every event
and the IR after every rewrite in a real warehouse, checkpoints resumed to the same
result, clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aicf_induct.cli.main import main
from aicf_induct.runtime import snapshot as disk

BASE = ["adapt", "--dataset", "iris", "--lr", "0.01", "--trigger-warmup", "30",
        "--guard-steps", "20"]


def _json(capsys, *args: str) -> dict:
    assert main([*BASE, "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_timeline_shows_triggers_decisions_rewrites_and_rollbacks(capsys) -> None:
    assert main([*BASE, "--steps", "300", "--no-log", "--inject-nan", "150"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("adapt iris: classification, 150 rows, 4 features; policy rules")
    for text in ("trigger   warmup", "decision  widen at blocks.0.linear", "rewrite   widen",
                 "guard     widen: keep", "trigger   nan", "rollback  nan: back to step",
                 "left out of the replay",
                 "completed after 300 steps", "best model"):
        assert text in out, text
    lines = out.splitlines()
    assert lines[-3].lstrip().startswith("train loss") and "accuracy" in lines[-1]


def test_events_and_rewrite_snapshots_are_logged_to_the_warehouse(tmp_path: Path,
                                                                   capsys) -> None:
    import warehouse

    out = _json(capsys, "--steps", "300", "--inject-spike", "200", "--warehouse",
                str(tmp_path / "wh"))
    assert out["rollbacks"] >= 1 and out["rewrites"] >= 1
    conn = warehouse.connect(tmp_path / "wh")
    run = conn.execute("SELECT origin, status FROM runs WHERE run_id = ?",
                       [out["run_id"]]).fetchall()[0]
    assert run == ("adapt", "completed")
    kinds = dict(conn.execute("SELECT kind, count(*) FROM events WHERE run_id = ? "
                              "GROUP BY kind", [out["run_id"]]).fetchall())
    assert {"trigger", "decision", "rewrite", "guard", "rollback"} <= set(kinds)
    assert kinds["rewrite"] == out["rewrites"]
    snaps = conn.execute("SELECT reason, count(*) FROM ir_snapshots WHERE run_id = ? "
                         "GROUP BY reason", [out["run_id"]]).fetchall()
    assert dict(snaps)["rewrite"] == out["rewrites"]
    before, after = conn.execute(
        "SELECT metrics_before, metrics_after FROM events WHERE run_id = ? AND kind = "
        "'rewrite' ORDER BY step LIMIT 1", [out["run_id"]]).fetchall()[0]
    assert "val_loss" in json.loads(before) and "val_loss" in json.loads(after)
    effects = warehouse.run_report(conn, "rewrite_effects", {})
    assert len(effects) > 0


def test_a_run_resumed_from_an_earlier_checkpoint_ends_the_same(tmp_path: Path,
                                                               capsys) -> None:
    ckpt = tmp_path / "ckpt"
    first = _json(capsys, "--steps", "200", "--no-log", "--checkpoint-dir", str(ckpt),
                  "--checkpoint-steps", "40")
    kept = disk.checkpoints(ckpt)
    assert len(kept) == 2
    shutil.rmtree(kept[-1])  # as if killed before the last one was written
    again = _json(capsys, "--steps", "999", "--no-log", "--resume", str(ckpt))
    assert again["run_id"] == first["run_id"] and again["steps"] == 200  # its own settings
    assert {k: v for k, v in again.items() if k != "pause_ms"} == \
        {k: v for k, v in first.items() if k != "pause_ms"}


@pytest.mark.parametrize("args,message", [
    (["--dataset", "nope"], "nope"),
    (["--dataset", "iris", "--model", "mlp:width=x"], "width"),
    (["--dataset", "iris", "--steps", "0"], "steps"),
    (["--dataset", "iris", "--resume", "/nonexistent/ckpt"], "no checkpoint"),
])
def test_bad_input_is_one_line(args: list[str], message: str, capsys) -> None:
    assert main(["adapt", "--no-log", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err
