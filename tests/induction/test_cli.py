"""`aicf-induct space show` and `aicf-induct sweep` argument handling (no training)."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest

from aicf_induct.cli.main import main
from aicf_induct.induction import sweep


def test_space_show_lists_candidates_with_fingerprints(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["space", "show", "depth=1,2;act=relu,gelu", "--in", "4", "--out", "3",
                 "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 4 and len({r["fingerprint"] for r in rows}) == 4
    assert rows[0]["structure_key"].startswith("mlp:depth=1,width=64,act=relu")
    # as text: the rows' columns named once, above them (they had no header)
    assert main(["space", "show", "depth=1,2;act=relu,gelu", "--in", "4", "--out", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("key "))
    assert lines[header].split() == ["key", "fingerprint", "params", "structure"]
    assert len(lines) - header - 1 == 4


def test_sweep_dry_run_takes_recipe_options_for_axes_the_space_leaves(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--problems", "sklearn:3", "--exclude", "wine", "--space",
                 "depth=1;lr=1e-3,1e-2", "--batch-size", "64", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "2 problems × 2 candidates × 1 seed = 4 runs" in out
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


def test_sweep_dry_run_plans_what_the_sweep_runs(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # cnn candidates only on image-shaped problems (digits), as the sweep plans them
    assert main(["sweep", "--problems", "iris,digits", "--space", "depth=1;family=mlp,cnn",
                 "--warehouse", str(tmp_path / "wh"), "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["problems"], plan["runs"], len(plan["candidates"])) == (
        ["iris", "digits"], 3, 2)
    # the checks of the real sweep: names that name no table, the engine's settings
    for argv, words in [(["--problems", "iris,nosuch"], "1 of the problems name no table: "
                         "nosuch: no bundled dataset 'nosuch'"),
                        (["--problems", "iris", "--gpu-processes", "2"],
                         "2 engine processes need engine 'gpu'"),
                        (["--problems", "iris", "--space", "family=cnn"],
                         "no candidate of the space applies to the problems (iris)")]:
        space = [] if "--space" in argv else ["--space", "tiny3"]
        assert main(["sweep", *argv, *space, "--warehouse", str(tmp_path / "wh"),
                     "--dry-run"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {words}") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "wh").exists()


@pytest.mark.parametrize("command", [["sweep", "--problems", "iris"],
                                     ["corpus", "build", "--problems", "iris,wine"]])
def test_a_space_that_applies_to_no_problem_is_one_line_and_writes_nothing(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--space", "family=cnn;cnn.channels=8,16", "--quiet",
                 "--warehouse", str(tmp_path / "wh")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no candidate of the space applies to the problems (")
    assert len(err.splitlines()) == 1 and not (tmp_path / "wh").exists()


class StoppedEngine:
    """An engine whose first wait is a Ctrl-C, with one run in flight that logs nothing."""

    capacity = 1

    def submit(self, task: object) -> None:
        pass

    def wait(self) -> list[object]:
        raise KeyboardInterrupt

    def interrupt(self) -> None:
        pass


def test_ctrl_c_on_a_sweep_says_what_was_logged_and_how_to_go_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sweep, "open_engine", lambda *a: contextlib.nullcontext(
        StoppedEngine()))
    assert main(["sweep", "--problems", "iris", "--space", "tiny3", "--quiet",
                 "--warehouse", str(tmp_path / "wh")]) == 130
    first, summary = capsys.readouterr().err.splitlines()
    assert first == "interrupted"
    # the run in flight logged nothing (this engine starts none): not a run that ran, and
    # not counted as one (tests/cli/test_sweep_interrupt.py counts runs that did log)
    assert "3 runs planned, 0 skipped (finished before), 0 ran (none)" in summary
    assert summary.endswith("interrupted: 3 not started; run the same command again to "
                            "resume (it runs what has not ended, the interrupted runs too)")


def test_a_sweep_that_leaves_many_part_files_says_to_compact(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # every read lists and opens every part, and a sweep writes about 5 a run: 26,000 made a
    # query take a minute, with nothing saying why or what to do
    import importlib

    compacting = importlib.import_module("warehouse.compact")  # (`warehouse.compact` is
    # the package's function of that name)
    wh = tmp_path / "wh"
    argv = ["sweep", "--problems", "iris", "--space", "depth=1;width=8", "--epochs", "2",
            "--workers", "1", "--warehouse", str(wh)]
    assert main(argv) == 0
    assert "compact" not in capsys.readouterr().err  # a few parts: nothing said
    parts = compacting.part_files(wh)
    assert parts >= 3
    monkeypatch.setattr(compacting, "MANY_PARTS", parts)
    assert main(argv) == 0  # (nothing to train: the note comes all the same)
    err = capsys.readouterr().err
    said = re.search(r"holds ([\d,]+) part files", err)
    assert said and int(said[1].replace(",", "")) >= parts, err  # (the rerun logs a few more)
    assert f"aicf-induct warehouse compact --warehouse {wh}" in err
