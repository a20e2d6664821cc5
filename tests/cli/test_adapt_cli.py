"""`aicf-induct adapt` end to end: the timeline, injected faults rolled back, every event
and the IR after every rewrite in a real warehouse, checkpoints resumed to the same
result, clear errors."""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
import statistics
from pathlib import Path

import pytest

from aicf_induct.cli.main import main
from aicf_induct.runtime import snapshot as disk

BASE = ["adapt", "--dataset", "iris", "--lr", "0.01", "--trigger-warmup", "30",
        "--guard-steps", "20"]


RESUME = ["adapt", "--dataset", "iris"]  # a resume takes its settings from the checkpoint


def _resume(capsys, *args: str) -> str:
    assert main([*RESUME, *args]) == 0
    return capsys.readouterr().out


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


def test_json_is_what_the_result_gives_python_callers(capsys, returns) -> None:
    """`--json` was a dict of its own, beside which `AdaptResult` had no JSON form."""
    from aicf_induct.runtime.adaptive import AdaptiveRun

    results = returns(AdaptiveRun, "run")
    out = _json(capsys, "--steps", "60", "--no-log")
    assert out == results[0].as_dict()
    assert {"run_id", "status", "steps", "executed_steps", "rewrites", "rollbacks",
            "param_count", "pause_ms", "val_loss", "test_accuracy"} <= set(out)


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
    # the report's effects are exactly the logged rewrites' after - before, per transform
    # and metric
    changes: dict[tuple[str, str], list[float]] = {}
    for name, b, a in conn.execute("SELECT name, metrics_before, metrics_after FROM events "
                                   "WHERE kind = 'rewrite'").fetchall():
        b, a = json.loads(b), json.loads(a)
        for m in b:
            if math.isfinite(b[m]) and math.isfinite(a[m]):
                changes.setdefault((name, m), []).append(a[m] - b[m])
    effects = warehouse.run_report(conn, "rewrite_effects", {})
    got = {(t, m): (n, c) for t, m, n, c in effects[["transform", "metric", "rewrites",
                                                     "mean_change"]].itertuples(index=False)}
    assert set(got) == set(changes)
    assert {m for _, m in got} == {"val_loss", "val_accuracy", "train_loss", "gap",
                                   "param_count", "step"}
    for key, diffs in changes.items():
        assert got[key][0] == len(diffs) and got[key][1] == pytest.approx(statistics.mean(diffs))
    assert got[("widen", "param_count")][1] > 0 and got[("widen", "step")][1] == 0


def test_repeated_triggers_without_action_take_one_line_with_counts(tmp_path: Path,
                                                                   capsys) -> None:
    wh = tmp_path / "wh"
    assert main([*BASE, "--steps", "500", "--patience", "0", "--trigger-epochs", "5",
                 "--warehouse", str(wh)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # (near the end a trigger is let pass as too late for the guard: its own reason)
    idle = [i for i, line in enumerate(lines) if "-> no action" in line or "-> too late" in line]
    def why(line: str) -> str:
        return line.split("-> ", 1)[1].split(" (to step")[0]

    # never two in a row for one reason: a run of them is one line, "plateau x2, epoch_end
    # x5 -> no action (to step 631)"; their counts add up to the logged triggers let pass
    assert idle and all(b - a > 1 or why(lines[a]) != why(lines[b])
                        for a, b in itertools.pairwise(idle))
    counts = [sum(int(c) for c in re.findall(r" x(\d+)", lines[i])) or 1 for i in idle]
    assert max(counts) > 1
    import warehouse

    conn = warehouse.connect(wh)
    (none,) = conn.execute("SELECT count(*) FROM events WHERE kind = 'decision' AND "
                           "name = 'none'").fetchone()
    assert sum(counts) == none


def test_stack_policy_from_the_command_line(tmp_path: Path, capsys) -> None:
    import warehouse

    out = _json(capsys, "--policy", "stack", "--steps", "400", "--trigger-warmup", "25",
                "--warehouse", str(tmp_path / "wh"))
    conn = warehouse.connect(tmp_path / "wh")
    rewrites = conn.execute("SELECT name, detail ->> 'site', param_count FROM events JOIN "
                            "ir_snapshots USING (run_id, step) WHERE kind = 'rewrite' AND "
                            "reason = 'rewrite' AND run_id = ? ORDER BY step",
                            [out["run_id"]]).fetchall()
    # the jump to target_width (64 for iris's 97 training rows), then a layer on top
    assert rewrites[:2] == [("widen", "blocks.0.linear", 4 * 64 + 64 + 64 * 3 + 3),
                            ("deepen", "blocks.0.act", 4 * 64 + 64 + 64 * 64 + 64 + 64 * 3 + 3)]


def test_a_run_resumed_from_an_earlier_checkpoint_ends_the_same(tmp_path: Path,
                                                               capsys) -> None:
    ckpt = tmp_path / "ckpt"
    first = _json(capsys, "--steps", "200", "--no-log", "--checkpoint-dir", str(ckpt),
                  "--checkpoint-steps", "40")
    kept = disk.checkpoints(ckpt)  # the last two kept, 40 or more executed steps apart
    works = [int(p.name.split("-")[1]) for p in kept]  # (later while a guard watches)
    assert len(works) == 2 and 40 <= works[1] - works[0] < 80 and works[1] < 200
    shutil.rmtree(kept[-1])  # as if killed before the last one was written
    # options a resume does not read are refused, named (the checkpoint's settings apply)
    assert main([*BASE, "--steps", "999", "--no-log", "--resume", str(ckpt)]) == 2
    assert capsys.readouterr().err == (
        "error: --resume goes on with the checkpoint's model, recipe, settings, length and "
        "directory: drop --lr and --trigger-warmup and --guard-steps and --steps\n")
    # also when given at its default value: it was taken for an option left out
    assert main(["adapt", "--dataset", "iris", "--steps", "2000", "--seed=0", "--no-log",
                 "--resume", str(ckpt)]) == 2
    assert capsys.readouterr().err.endswith("directory: drop --steps and --seed\n")
    # --quiet is no setting of the run: a resume takes it
    again = json.loads(_resume(capsys, "--json", "--quiet", "--no-log", "--resume", str(ckpt)))
    assert again["run_id"] == first["run_id"] and again["steps"] == 200  # its own settings
    assert {k: v for k, v in again.items() if k != "pause_ms"} == \
        {k: v for k, v in first.items() if k != "pause_ms"}
    # another problem's checkpoint: refused, both problems named
    assert main(["adapt", "--dataset", "wine", "--no-log", "--resume", str(ckpt)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "the checkpoint is of problem 'iris' (" in err and ", not 'wine' (" in err


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


def test_a_used_or_unusable_checkpoint_dir_is_refused_before_anything_runs(
        tmp_path: Path, capsys) -> None:
    import warehouse

    wh, ckpt, afile = tmp_path / "wh", tmp_path / "ckpt", tmp_path / "afile"
    first = _json(capsys, "--steps", "100", "--checkpoint-dir", str(ckpt), "--checkpoint-steps",
                  "40", "--warehouse", str(wh))
    afile.write_text("x")
    for path, why in ((ckpt, f"holds the final state of run {first['run_id']}, which ended: "
                             f"--fork it, or pick an empty directory"),
                      (afile, "not a directory"),
                      (afile / "sub", "cannot create it (Not a directory)")):
        assert main([*BASE, "--steps", "100", "--checkpoint-dir", str(path),
                     "--warehouse", str(wh)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == f"error: --checkpoint-dir {path}: {why}\n"
    # nothing trained, nothing logged
    assert warehouse.connect(wh).execute("SELECT run_id FROM runs").fetchall() == \
        [(first["run_id"],)]


def test_a_resumed_run_keeps_its_policy(tmp_path: Path, capsys) -> None:
    ckpt = tmp_path / "ckpt"
    args = ["--steps", "200", "--trigger-warmup", "150", "--no-log"]
    first = _json(capsys, "--policy", "stack", *args, "--checkpoint-dir", str(ckpt),
                  "--checkpoint-steps", "40")
    kept = disk.checkpoints(ckpt)
    shutil.rmtree(kept[-1])  # resumed from before the warm-up: the stack policy's jump to
    assert int(kept[0].name.split("-")[1]) < 150  # 64 units, not the rules' doubling
    out = _resume(capsys, "--no-log", "--resume", str(ckpt))
    assert "; policy stack, 200 steps" in out
    assert out.index("adapt iris:") < out.index("checkpoint resume")  # the header first
    assert "rewrite   widen blocks.0.linear: 35 -> 515 parameters" in out  # 4 -> 64 units
    assert f", {first['param_count']} parameters\n" in out  # the best model: the first run's
    assert main([*RESUME, "--no-log", "--resume", str(ckpt), "--policy", "rules"]) == 2
    err = capsys.readouterr().err
    assert err == "error: the checkpoint's run decides with policy 'stack', not 'rules': a " \
                  "resumed run keeps its policy\n"


def test_a_damaged_checkpoint_gives_way_to_the_one_before_it(tmp_path: Path, capsys) -> None:
    ckpt = tmp_path / "ckpt"
    first = _json(capsys, "--steps", "200", "--no-log", "--checkpoint-dir", str(ckpt),
                  "--checkpoint-steps", "40")
    latest = disk.checkpoints(ckpt)[-1]
    (latest / "arrays.npz").write_bytes((latest / "arrays.npz").read_bytes()[:100])
    assert main([*RESUME, "--json", "--no-log", "--resume", str(ckpt)]) == 0
    out, err = capsys.readouterr()
    assert err == f"note: cannot read checkpoint {latest}: File is not a zip file; set " \
                  f"aside, going on from the checkpoint before it\n"
    again = json.loads(out)
    assert {k: v for k, v in again.items() if k != "pause_ms"} == \
        {k: v for k, v in first.items() if k != "pause_ms"}
    for path in disk.checkpoints(ckpt):  # none readable: one line
        (path / "snapshot.json").write_text("[1, 2]")
    assert main([*RESUME, "--no-log", "--resume", str(ckpt)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"error: cannot read checkpoint {latest}: not a snapshot")
    assert err.count("\n") == 1 and out == ""


@pytest.mark.parametrize("command", ["adapt", "train"])
@pytest.mark.parametrize("url", ["notaurl", "ftp://x", "http://"])
def test_a_service_url_is_checked_like_log_to(command: str, url: str, capsys) -> None:
    assert main([command, "--dataset", "iris", "--from-proposal", "--service", url,
                 "--api-key", "k", "--no-log"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: argument --service: expected http://HOST:PORT or "
                          f"https://..., got '{url}'") and err.count("\n") == 1


def test_a_resume_refuses_another_warehouse_and_an_ended_run(tmp_path: Path, capsys) -> None:
    wh, other, ckpt = tmp_path / "wh", tmp_path / "other", tmp_path / "ckpt"
    first = _json(capsys, "--steps", "100", "--checkpoint-dir", str(ckpt), "--checkpoint-steps",
                  "40", "--warehouse", str(wh))
    run_id = first["run_id"]
    for where in (other, wh):  # not there; there, but ended
        assert main([*RESUME, "--warehouse", str(where), "--resume", str(ckpt)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1
    assert err == (f"error: run {run_id} already completed at step 100; --fork {ckpt} "
                   f"--steps N branches a new run from its final state\n")
    assert not other.exists() or not list(other.rglob("*.parquet"))  # nothing written there
    # a checkpoint itself: its directory when it is the latest, else said
    kept = disk.checkpoints(ckpt)
    assert main([*RESUME, "--no-log", "--json", "--resume", str(kept[-1])]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == run_id
    assert main([*RESUME, "--no-log", "--resume", str(kept[0])]) == 2
    assert capsys.readouterr().err == (
        f"error: --resume {kept[0]}: a run goes on from its latest checkpoint; give the "
        f"checkpoint directory's parent (--resume {ckpt})\n")


def test_an_ended_run_goes_further_as_a_branch_from_its_final_state(tmp_path: Path,
                                                                    capsys) -> None:
    """An ended run does not resume; `--fork` branches a new run from the final state it
    left (its best model, at its last step), logged as its own run naming its parent."""
    import warehouse

    wh, ckpt, mine = tmp_path / "wh", tmp_path / "ckpt", tmp_path / "mine"
    first = _json(capsys, "--steps", "100", "--checkpoint-dir", str(ckpt), "--checkpoint-steps",
                  "40", "--warehouse", str(wh))
    assert disk.final_of(ckpt) == ckpt / "final"  # beside the checkpoints, not one of them
    assert len(disk.checkpoints(ckpt)) == 2
    fork = [*RESUME, "--fork", str(ckpt), "--warehouse", str(wh)]
    for extra, why in (([], "--fork needs --steps N: the branch's steps in all, more than the "
                            "ended run took"),
                       (["--steps", "100"], f"run {first['run_id']} completed at step 100: a "
                                            f"branch needs more steps in all than that (got "
                                            f"100)"),
                       (["--steps", "200", "--lr", "0.1", "--seed", "1"],
                        "--fork goes on with the ended run's model, recipe and settings: drop "
                        "--lr and --seed"),
                       (["--steps", "200", "--checkpoint-dir", str(ckpt)],
                        f"--checkpoint-dir {ckpt}: holds the final state of run "
                        f"{first['run_id']}, which ended: --fork it, or pick an empty "
                        f"directory"),
                       (["--steps", "200", "--ranks", "2"],
                        "--fork goes on with one rank: drop --gpus/--ranks"),
                       (["--steps", "200", "--from-proposal"],
                        "--from-proposal starts a new run: drop --fork")):
        assert main([*fork, *extra]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == f"error: {why}\n"
    assert main([*fork, "--steps", "200", "--checkpoint-dir", str(mine), "--json"]) == 0
    child = json.loads(capsys.readouterr().out)
    assert child["run_id"] != first["run_id"] and child["steps"] == 200
    assert all(int(p.name.split("-")[1]) > 100 for p in disk.checkpoints(mine))  # its own
    assert disk.final_of(mine) is not None
    conn = warehouse.connect(wh)
    assert conn.execute("SELECT parent_run_id, origin, status, steps_taken FROM runs WHERE "
                        "run_id = ?", [child["run_id"]]).fetchone() == \
        (first["run_id"], "fork", "completed", 200)
    # it goes on from the parent's end: its steps follow the parent's, from its final model
    assert conn.execute("SELECT min(step), max(step), count(*) FROM steps WHERE run_id = ?",
                        [child["run_id"]]).fetchone() == (100, 199, 100)
    end, start = (conn.execute("SELECT fingerprint FROM ir_snapshots WHERE run_id = ? AND "
                               "reason = ?", [run, reason]).fetchone()
                  for run, reason in ((first["run_id"], "final"), (child["run_id"], "start")))
    assert start == end
    # a directory without a final state: an unended run's, or none
    (ckpt / "final").rename(tmp_path / "moved")
    assert main([*fork, "--steps", "200"]) == 2
    assert capsys.readouterr().err == (
        f"error: no final state in {ckpt} (a run leaves one when it ends completed or "
        f"early-stopped with checkpoints on); its run has not ended (it goes on from its "
        f"checkpoints: resume), or ended failed\n")


def test_going_on_is_refused_in_words_that_fit(tmp_path: Path, capsys) -> None:
    """A failed run is said to have failed, not to be unended; `final` is what --fork
    branches from, in the directory --fork takes; damaged checkpoints are said damaged."""
    wh, ckpt, ended = tmp_path / "wh", tmp_path / "ckpt", tmp_path / "ended"
    assert main(["adapt", "--dataset", "iris", "--lr", "1e308", "--steps", "200",
                 "--checkpoint-dir", str(ckpt), "--checkpoint-steps", "1", "--warehouse",
                 str(wh), "--json"]) == 4
    failed = json.loads(capsys.readouterr().out)
    assert failed["status"] == "failed" and disk.checkpoints(ckpt)
    fork = [*RESUME, "--warehouse", str(wh), "--steps", "300", "--fork"]
    assert main([*fork, str(ckpt)]) == 2
    assert capsys.readouterr().err == (
        f"error: no final state in {ckpt}: run {failed['run_id']} ended failed at step "
        f"{failed['steps']}, and a run leaves one only when it ends completed or "
        "early-stopped\n")
    _json(capsys, "--steps", "40", "--checkpoint-dir", str(ended), "--no-log")
    assert main([*RESUME, "--no-log", "--resume", str(ended / "final")]) == 2
    assert capsys.readouterr().err == (
        f"error: no checkpoint in {ended / 'final'}: it is the final state of an ended run, "
        f"which --fork {ended} --steps N branches a new run from\n")
    assert main([*fork, str(ended / "final")]) == 2
    assert capsys.readouterr().err == (
        f"error: --fork {ended / 'final'}: give the checkpoint directory it is in "
        f"(--fork {ended})\n")
    for path in disk.checkpoints(ckpt):
        (path / "snapshot.json").write_text("[1, 2]")
    assert main([*BASE, "--checkpoint-dir", str(ckpt), "--no-log"]) == 2
    names = ", ".join(p.name for p in disk.checkpoints(ckpt))
    assert capsys.readouterr().err == (
        f"error: --checkpoint-dir {ckpt}: holds checkpoints that cannot be read (damaged: "
        f"{names}): pick an empty directory\n")


def test_a_failed_run_exits_with_its_own_status(capsys) -> None:
    """A run that gives up (more rollbacks than allowed) ends `failed`: exit status 4, told
    from success, and the timeline says why, not where it went back to."""
    assert main(["adapt", "--dataset", "iris", "--lr", "1e308", "--steps", "200",
                 "--no-log"]) == 4
    out = capsys.readouterr().out
    assert "rollback  gave up: more than 10 rollbacks\n" in out and "None" not in out
    assert " failed after " in out


def test_a_branch_has_its_own_rewrite_budget_and_counts(tmp_path: Path, capsys) -> None:
    """`--max-rewrites` is a branch's own (its rewrites count from 0, as it reports them)."""
    ckpt = tmp_path / "ckpt"
    first = _json(capsys, "--steps", "300", "--max-rewrites", "1", "--checkpoint-dir",
                  str(ckpt), "--no-log")
    assert first["rewrites"] == 1
    fork = [*RESUME, "--fork", str(ckpt), "--steps", "600", "--no-log", "--json"]
    for budget, rewrites in (("0", 0), ("1", 1)):
        assert main([*fork, "--max-rewrites", budget]) == 0
        assert json.loads(capsys.readouterr().out)["rewrites"] == rewrites


def test_a_branch_of_an_early_stopped_run_has_its_own_patience(tmp_path: Path,
                                                               capsys) -> None:
    import warehouse

    wh, ckpt = tmp_path / "wh", tmp_path / "ckpt"
    first = _json(capsys, "--steps", "2000", "--patience", "3", "--warehouse", str(wh),
                  "--checkpoint-dir", str(ckpt))
    assert first["status"] == "early_stopped"
    assert main([*RESUME, "--fork", str(ckpt), "--steps", "2000", "--warehouse", str(wh),
                 "--json"]) == 0
    child = json.loads(capsys.readouterr().out)
    evaluations = warehouse.connect(wh).execute(
        "SELECT count(*) FROM results WHERE run_id = ? AND split = 'val' AND metric = 'loss' "
        "AND NOT coalesce(final, false)", [child["run_id"]]).fetchone()[0]
    # three evaluations without a new best before it stops, not the parent's spent patience
    assert child["status"] == "early_stopped" and evaluations >= 3


def test_help_and_option_forms(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["adapt", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "add_block, add_heads, widen_tokens" in text
    assert "validation evaluations (each epoch, or every --eval-every steps) without a new " \
           "best" in text and "dropout (default 0)" in text
    assert main(["adapt", "--dataset", "iris", "--checkpoint-steps", "0"]) == 2
    assert capsys.readouterr().err == "error: argument --checkpoint-steps: must be >= 1, got " \
                                      "0 (see aicf-induct adapt --help)\n"


def test_gpus_without_a_gpu_is_refused_before_the_header(capsys) -> None:
    from aicf_induct.runtime.ranks import check_gpus

    try:
        check_gpus(1)
        pytest.skip("a GPU is usable here")
    except Exception:
        pass
    assert main(["adapt", "--dataset", "iris", "--gpus", "1", "--no-log"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: --gpus 1: no GPU is usable here")


def test_an_interrupt_says_how_to_go_on(tmp_path: Path, monkeypatch, capsys) -> None:
    from aicf_induct.runtime.adaptive import AdaptiveRun

    ckpt, step = tmp_path / "ckpt", AdaptiveRun.step

    def interrupted(self: AdaptiveRun) -> str | None:
        if self.work == 90:
            raise KeyboardInterrupt
        return step(self)

    monkeypatch.setattr(AdaptiveRun, "step", interrupted)
    assert main([*BASE, "--no-log", "--steps", "200", "--checkpoint-dir", str(ckpt),
                 "--checkpoint-steps", "40"]) == 130
    assert capsys.readouterr().err == \
        f"interrupted; go on with: aicf-induct adapt --dataset iris --resume {ckpt}\n"


def test_ctrl_c_while_the_commands_import_is_one_line(monkeypatch, capsys) -> None:
    from aicf_induct.cli import main as entry

    def slow(modules: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(entry, "build_parser", slow)
    assert entry.main(["adapt", "--dataset", "iris"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_a_log_that_fails_at_the_end_comes_after_the_adaptive_run_s_results(
        tmp_path: Path, capsys, log_fails_at_close) -> None:
    """A disk that filled during the run: `adapt` closed its log in a `finally`, so the
    close's error pre-empted the results of a run that trained to its end."""
    assert main(["adapt", "--dataset", "iris", "--steps", "60", "--warehouse",
                 str(tmp_path / "wh")]) == 2
    out, err = capsys.readouterr()
    assert "run " in out and "best model (step" in out
    assert "logged to" not in out
    assert "error: warehouse " in err and "No space left on device" in err


def test_no_rewrite_is_applied_with_fewer_steps_left_than_its_guard_needs(
        tmp_path: Path, capsys) -> None:
    """A rewrite at the run's last step was applied, counted, and never judged (the guard's
    window lay past the end), and the best model came from before it: a rewrite nobody
    keeps. Now the trigger is let pass, saying why."""
    import warehouse

    wh = tmp_path / "wh"
    out = _json(capsys, "--lr", "0.01", "--trigger-warmup", "30", "--guard-steps", "20",
                "--steps", "300", "--inject-spike", "200", "--warehouse", str(wh))
    conn = warehouse.connect(wh)
    late = conn.execute("SELECT step, detail ->> 'reason', detail ->> 'steps_left' FROM events "
                        "WHERE run_id = ? AND kind = 'decision' AND name = 'none' AND "
                        "detail ->> 'reason' LIKE 'too late%'", [out["run_id"]]).fetchall()
    assert late and all(int(left) < 20 and step > 280 for step, _, left in late), late
    assert late[0][1] == "too late: the guard needs 20 steps before the run ends"
    (last,) = conn.execute("SELECT max(step) FROM events WHERE run_id = ? AND kind = "
                           "'rewrite'", [out["run_id"]]).fetchone()
    assert last <= 300 - 20


def _on_a_terminal(*args: str, stdout_too: bool = False) -> tuple[str, str]:
    """`aicf-induct ARGS` in a subprocess with its stderr (and with `stdout_too` its stdout)
    on a pseudo-terminal 100 columns wide, as a user's shell gives it; what the terminal got,
    and the piped stdout."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    root = Path(__file__).resolve().parents[2]
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        proc = subprocess.Popen([sys.executable, "-m", "aicf_induct", *args], cwd=root,
                                env={**os.environ, "PYTHONPATH": str(root)},
                                stdout=slave if stdout_too else subprocess.PIPE, stderr=slave)
    finally:
        os.close(slave)
    seen = b""
    while True:  # until the child's end closes the terminal (EIO on Linux)
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out = proc.stdout.read().decode() if proc.stdout else ""
    assert proc.wait(timeout=120) == 0, seen.decode(errors="replace")
    return seen.decode(errors="replace"), out


def test_quiet_turns_the_progress_bar_off() -> None:
    """adapt took no --quiet, though the other long commands do. Its bar (over the run's
    steps, on stderr) is drawn where the timeline is not on the terminal; --quiet leaves
    it out."""
    run = ["adapt", "--dataset", "iris", "--steps", "300", "--no-log", "--json"]
    terminal, out = _on_a_terminal(*run)
    assert "adapt iris:" in terminal and "/300 [" in terminal and "step/s" in terminal
    assert json.loads(out)["steps"] == 300
    terminal, out = _on_a_terminal(*run, "--quiet")
    assert terminal == "" and json.loads(out)["steps"] == 300
    # the timeline on the terminal is the run's progress there: no bar across its lines
    terminal, _ = _on_a_terminal(*run[:-1], stdout_too=True)
    assert "adapt iris: classification" in terminal and "step/s" not in terminal


def test_the_explore_policy_draws_from_the_run_s_seed(capsys) -> None:
    # its arms were drawn with seed 0 whatever --seed said: every run drew the same arms at
    # the same steps, a "randomised experiment" confounded with the step
    drawn = []
    for seed in range(4):
        assert main([*BASE, "--steps", "300", "--no-log", "--policy", "explore",
                     "--trigger-epochs", "1", "--seed", str(seed)]) == 0
        out = capsys.readouterr().out
        drawn.append([line.split()[1:4] for line in out.splitlines()
                      if line.split()[2:3] == ["decision"]])  # step N decision ARM
    assert all(drawn), drawn
    # the first draw: the same step, no rewrite or rollback before it, so only the seed
    # can tell the runs' draws apart (later ones also follow what the guard kept)
    assert len({repr(d[0]) for d in drawn}) > 1, drawn


def test_a_from_proposal_run_resumes_with_the_proposer_it_started_with(
        tmp_path: Path, capsys) -> None:
    # the learned policy is fitted on the pack and history of the run's start: its checkpoint
    # keeps that proposer (its table), and the resume rebuilds it, whatever the pack is by then
    ckpt = tmp_path / "ck"
    start = ["adapt", "--dataset", "wine", "--from-proposal", "--steps", "300",
             "--checkpoint-steps", "60", "--no-log", "--quiet", "--json"]
    assert main([*start, "--checkpoint-dir", str(ckpt)]) == 0
    first = json.loads(capsys.readouterr().out)
    kept = disk.checkpoints(ckpt)
    shutil.rmtree(kept[-1])  # as if killed before the last one was written
    service = tmp_path / "service_ck"
    shutil.copytree(ckpt, service)
    meta = disk.read_meta(kept[0])["run"]
    assert meta["policy"] == "learned" and meta["proposal"]["rank"] == 1
    assert meta["policy_settings"]["proposer"]["table"]["rows"]  # the pack's history, kept
    env = {"AICF_PACK": str(tmp_path / "no_pack_here.parquet")}  # the pack is gone
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        assert main(["adapt", "--dataset", "wine", "--no-log", "--quiet", "--json",
                     "--resume", str(ckpt)]) == 0
    resumed = json.loads(capsys.readouterr().out)
    for key in ("steps", "executed_steps", "rewrites", "rollbacks", "param_count",
                "test_accuracy", "val_loss"):
        assert resumed[key] == first[key], key
    # one that asked a service keeps no proposer: its resume is one line saying why
    state = service / kept[0].name / "snapshot.json"
    saved = json.loads(state.read_text())
    saved["meta"]["run"]["policy_settings"] = None
    state.write_text(json.dumps(saved))
    assert main(["adapt", "--dataset", "wine", "--no-log", "--resume", str(service)]) == 2
    err = capsys.readouterr().err
    assert "policy 'learned'" in err and "--service" in err and "--fork" in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_the_guard_margin_is_what_the_counterfactual_guard_asks_for(capsys) -> None:
    # the warm-up's widen beats its control arm by a few %: kept with no margin, not with one
    # of 90 % (the bar is named); a negative margin is refused in one line
    runs = {m: [*BASE, "--steps", "120", "--no-log", "--guard", "counterfactual",
                "--guard-margin", m] for m in ("0", "0.9")}
    number = r"([0-9.e+-]+)"
    assert main(runs["0"]) == 0
    kept = re.search(rf"guard     widen: keep \(validation {number} below the control arm's "
                     rf"{number} over the same 20 steps\)", capsys.readouterr().out)
    assert kept, "no kept widen"
    after, control = (float(v) for v in kept.groups())
    assert 0.9 * control < after < control  # a gain of under 10 %
    assert main(runs["0.9"]) == 0
    harm = re.search(rf"guard     widen: harm \(validation {number} not below the control "
                     rf"arm's {number} less 90%, {number} over the same 20 steps\)",
                     capsys.readouterr().out)
    assert harm, "no harmful widen"
    assert [float(v) for v in harm.groups()[:2]] == [after, control]  # the same trial
    assert float(harm.groups()[2]) == pytest.approx(0.1 * control, rel=1e-3)
    assert main([*BASE, "--no-log", "--guard-margin", "-1"]) == 2
    assert capsys.readouterr().err == "error: argument --guard-margin: must be >= 0, got -1 " \
                                      "(see aicf-induct adapt --help)\n"
