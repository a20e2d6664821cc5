"""`sweep --dry-run` and `corpus build --dry-run` load every problem as the sweep does: each
problem that cannot be loaded is named with its reason (exit 1), the plan is what the sweep
then runs, and nothing is trained or written. The real sweep of the same problems is the
oracle."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

import warehouse
from aicf_induct.cli.main import main

ROWS = 40  # of the good table: above the 20 a problem needs
COMMANDS = {"sweep": ["sweep", "--space", "tiny3"],
            "corpus": ["corpus", "build", "--space", "tiny3", "--seeds", "1"]}


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A table named twice, once well and once with a target column it lacks, and a
    warehouse the real sweep of both filled (`report`: its --json summary)."""
    base = tmp_path_factory.mktemp("dry")
    rows = "".join(f"{0.37 * i % 1:.3f},{0.61 * i % 1:.3f},{'ab'[i % 2]}\n" for i in range(ROWS))
    (base / "t.csv").write_text("x,z,y\n" + rows)
    good, bad = f"file:{base}/t.csv?target=y", f"file:{base}/t.csv?target=nope"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main([*COMMANDS["sweep"], "--problems", f"{good},{bad}", "--epochs", "1",
                     "--workers", "1", "--quiet", "--json", "--warehouse",
                     str(base / "wh")]) == 0
    return {"good": good, "bad": bad, "wh": base / "wh", "base": base,
            "why": f"{base}/t.csv: no column 'nope' to use as the target (columns: x, z, y)",
            "report": json.loads(out.getvalue())}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _hashes(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _problems_and_runs(root: Path) -> tuple[list[tuple[str, str]], int]:
    conn = warehouse.connect(root)
    problems = conn.execute("SELECT name, problem_id FROM problems ORDER BY name").fetchall()
    (runs,) = conn.execute("SELECT count(*) FROM runs").fetchone() or (0,)
    return problems, runs


@pytest.mark.parametrize("command", COMMANDS)
def test_a_dry_run_names_the_problem_that_cannot_be_loaded_and_writes_nothing(
        command: str, swept: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    wh = swept["wh"]
    files, (problems, runs) = _hashes(wh), _problems_and_runs(wh)
    assert [name for name, _ in problems] == [swept["good"]] and runs == 3
    rc, out, err = _run([*COMMANDS[command], "--problems", f"{swept['good']},{swept['bad']}",
                         "--dry-run", "--quiet", "--warehouse", str(wh)], capsys)
    assert rc == 1 and err == "", err
    lines = out.splitlines()
    assert lines[0].startswith("1 problem × 3 candidates × 1 seed = 3 runs; tiny3")
    assert lines[1] == f"problems: {swept['good']}"
    assert lines[2] == f"left out, cannot be loaded: {swept['bad']}: {swept['why']}"
    # nothing trained, nothing written: the warehouse holds what the sweep left, file for file
    assert _hashes(wh) == files and _problems_and_runs(wh) == (problems, runs)
    assert sorted(p.name for p in swept["base"].iterdir()) == ["t.csv", "wh"]


@pytest.mark.parametrize("command", COMMANDS)
def test_the_json_dry_run_has_the_loads_and_plans_what_the_sweep_ran(
        command: str, swept: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    files = _hashes(swept["wh"])
    rc, out, err = _run([*COMMANDS[command], "--problems", f"{swept['good']},{swept['bad']}",
                         "--dry-run", "--json", "--quiet", "--warehouse", str(swept["wh"])],
                        capsys)
    assert rc == 1 and err == "", err
    plan, report = json.loads(out), swept["report"]
    assert plan["unloadable"] == report["unloadable"] == {swept["bad"]: swept["why"]}
    assert plan["problems"] == [swept["good"]] and plan["runs"] == report["planned"] == 3
    [(_, problem_id)] = _problems_and_runs(swept["wh"])[0]
    assert plan["loaded"] == {swept["good"]: {"problem_id": problem_id, "task":
                                              "classification", "rows": ROWS, "features": 2}}
    assert _hashes(swept["wh"]) == files


# the adaptive runs alone (no sweep): their build loads the problems as the sweep does
ADAPTIVE_ONLY = ["corpus", "build", "--space", "tiny3", "--seeds", "0", "--adaptive", "2"]


@pytest.mark.parametrize("command", [*COMMANDS, "adaptive"])
def test_a_dry_run_none_of_whose_problems_loads_fails_as_the_sweep_does(
        command: str, swept: dict[str, Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*COMMANDS.get(command, ADAPTIVE_ONLY), "--problems", swept["bad"], "--quiet",
            "--warehouse", str(tmp_path / "wh")]
    rc, out, dry = _run([*argv, "--dry-run"], capsys)
    assert rc == 2 and out == ""
    assert dry == f"error: no problem could be loaded: {swept['bad']}: {swept['why']}\n"
    rc, _, real = _run(argv, capsys)
    assert rc == 2 and real == dry and not (tmp_path / "wh").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_no_load_plans_by_name_only_and_goes_with_dry_run(
        command: str, swept: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*COMMANDS[command], "--problems", f"{swept['good']},{swept['bad']}",
            "--quiet", "--warehouse", str(swept["wh"])]
    rc, out, err = _run([*argv, "--dry-run", "--no-load", "--json"], capsys)
    assert rc == 0 and err == "", err
    plan = json.loads(out)
    assert plan["problems"] == [swept["good"], swept["bad"]] and plan["runs"] == 6
    assert "loaded" not in plan and "unloadable" not in plan
    rc, out, err = _run([*argv, "--no-load"], capsys)
    assert rc == 2 and err == "error: --no-load goes with --dry-run (a sweep loads every " \
                              "problem)\n"


ADAPTIVE = "adaptive: 2 runs per problem on 1 problem, 600 steps each, exploration policy"


def test_an_adaptive_dry_run_leaves_out_the_problems_whose_adaptive_runs_cannot_start(
        swept: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--seeds 0 --adaptive 2: no sweep, the problems loaded as for one; the real build of
    the same problems is the oracle (it leaves the bad one out, with the sweep's warning)."""
    good, bad, wh = swept["good"], swept["bad"], tmp_path / "wh"
    adaptive = [*ADAPTIVE_ONLY, "--quiet", "--warehouse", str(wh)]
    argv = [*adaptive, "--problems", f"{good},{bad}"]
    rc, out, err = _run([*argv, "--dry-run"], capsys)
    assert rc == 1 and err == "", err
    assert out.splitlines() == [ADAPTIVE, f"problems: {good}",
                                f"left out, cannot be loaded: {bad}: {swept['why']}"]
    rc, out, err = _run([*argv, "--dry-run", "--json"], capsys)
    assert rc == 1 and err == "", err
    plan = json.loads(out)
    assert plan["unloadable"] == {bad: swept["why"]} and list(plan["loaded"]) == [good]
    assert plan["adaptive"]["problems"] == [good] and plan["adaptive"]["runs"] == 2
    assert not wh.exists()
    rc, out, err = _run([*argv, "--adaptive-steps", "5", "--workers", "1"], capsys)
    assert rc == 0 and out == "adaptive runs: 2 trained, 0 already there, 0 failed to start\n"
    assert err == f"warning: problem '{bad}' left out: {swept['why']}\n"
    conn = warehouse.connect(wh)
    ran = conn.execute("SELECT p.name, count(*) FROM runs r JOIN problems p USING (problem_id) "
                       "WHERE r.origin = 'adapt' GROUP BY p.name").fetchall()
    assert ran == [(good, plan["adaptive"]["runs"])]
    rc, out, err = _run([*adaptive, "--problems", bad, "--dry-run"], capsys)  # none loads
    assert rc == 2 and out == "" and err == f"error: no problem could be loaded: {bad}: " \
                                            f"{swept['why']}\n"


def test_a_sweep_and_adaptive_dry_run_plans_both_on_the_problems_that_load(
        swept: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real build of the same problems is the oracle: its adaptive runs too leave out the
    problem the sweep left out (said once, by the sweep)."""
    argv = [*COMMANDS["corpus"], "--adaptive", "2", "--problems",
            f"{swept['good']},{swept['bad']}", "--dry-run", "--quiet", "--warehouse",
            str(swept["wh"])]
    rc, out, err = _run(argv, capsys)
    assert rc == 1 and err == "", err
    lines = out.splitlines()
    assert lines[0].startswith("1 problem × 3 candidates × 1 seed = 3 runs; tiny3")
    assert lines[2] == f"left out, cannot be loaded: {swept['bad']}: {swept['why']}"
    assert sum(line.startswith("left out") for line in lines) == 1 and lines[-1] == ADAPTIVE
    rc, out, err = _run([*argv, "--json"], capsys)
    assert rc == 1 and err == "", err
    plan = json.loads(out)
    assert plan["problems"] == plan["adaptive"]["problems"] == [swept["good"]]
    assert plan["unloadable"] == {swept["bad"]: swept["why"]} and plan["adaptive"]["runs"] == 2
    real = [*COMMANDS["corpus"], "--adaptive", "2", "--problems",
            f"{swept['good']},{swept['bad']}", "--epochs", "1", "--adaptive-steps", "5",
            "--workers", "1", "--quiet", "--warehouse", str(tmp_path / "wh")]
    rc, out, err = _run(real, capsys)
    assert rc == 0 and out.splitlines()[-1] == "adaptive runs: 2 trained, 0 already there, " \
                                               "0 failed to start", out
    assert err == f"warning: problem '{swept['bad']}' left out: {swept['why']}\n", err
