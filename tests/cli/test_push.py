"""`aicf-induct push` against the real service (uvicorn over its DuckDB warehouse): a run the
service took in part (its server killed mid-run, then restarted on the same warehouse) is
completed to exactly the local copy's rows, and reads ended as it ended locally; a second push
sends nothing; a run the service never saw is started and sent whole; bad inputs are one
line each; a batch refused mid-push names the run and what went before it; a result of another
value (a snapshot of another IR) on the service gets the local one beside it; a service whose
SQL slots are busy (429) is asked again until it answers."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import warehouse
from aicf_induct.cli.background import free_port, serving
from aicf_induct.cli.main import main
from aicf_induct.records import (
    EventRecord,
    ProblemRecord,
    ResultRecord,
    RunEndRecord,
    RunStartRecord,
    SnapshotRecord,
    StepRecord,
)
from tests.api.conftest import LIMITS, cli

# each table of a run as compared, less what the server fills itself (writer id, the times a
# row was recorded at)
COMPARED = {
    "runs": "SELECT * EXCLUDE (writer_id) FROM runs WHERE run_id = $run",
    "run_ends": "SELECT * EXCLUDE (writer_id) FROM run_ends WHERE run_id = $run",
    "steps": "SELECT * FROM steps WHERE run_id = $run",
    "events": "SELECT * FROM events WHERE run_id = $run",
    "results": "SELECT * FROM results WHERE run_id = $run",
    "ir_snapshots": "SELECT * EXCLUDE (recorded_at) FROM ir_snapshots WHERE run_id = $run",
    "ir_patterns": "SELECT * FROM ir_patterns WHERE fingerprint IN "
                   "(SELECT fingerprint FROM ir_snapshots WHERE run_id = $run)",
    "problems": "SELECT * EXCLUDE (recorded_at) FROM problems WHERE problem_id IN "
                "(SELECT problem_id FROM runs WHERE run_id = $run)",
    "problem_features": "SELECT * EXCLUDE (recorded_at) FROM problem_features WHERE "
                        "problem_id IN (SELECT problem_id FROM runs WHERE run_id = $run)",
}


def rows(root: Path, run_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every compared table's rows of the run, sorted, floats by repr (NaN equals NaN)."""
    conn = warehouse.connect(root)
    out = {}
    for table, sql in COMPARED.items():
        got = conn.execute(sql.replace("$run", "?"), [run_id]).fetchall()
        out[table] = sorted((tuple(repr(v) if isinstance(v, float) else v for v in r)
                             for r in got), key=repr)
    return out


def push(*argv: str) -> tuple[int, str, str]:
    """`aicf-induct push ARGV` in this process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["push", *argv])
    return status, out.getvalue(), err.getvalue()


def parquet_files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*.parquet")}


class KillServer:
    """Step hook: before executed step `at`, let the recorder send what it holds (so the
    service has the run in part), then kill the server."""

    def __init__(self, proc: subprocess.Popen, rec: Any, at: int) -> None:
        self.proc, self.rec, self.at = proc, rec, at

    def before_step(self, run, x, y):
        if run.work == self.at:
            self.rec.flush()
            self.proc.kill()
            self.proc.wait(10)
        return x, y


@pytest.fixture(scope="module")
def spilled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An adaptive run (with rollbacks: trajectories past 0) logged through a service killed at
    step 100, spilled whole to a local warehouse; the service's warehouse then repaired
    (`warehouse check --repair` ends the run `abandoned`), and served again."""
    from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
    from aicf_induct.problems import load_problem
    from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun, FaultInjection
    from aicf_induct.runtime.guard import GuardConfig
    from aicf_induct.runtime.policies import RuleBasedPolicy
    from aicf_induct.runtime.remote_recorder import RemoteRecorder
    from aicf_induct.runtime.spill import SpillRecorder
    from aicf_induct.runtime.trainer import TrainConfig

    base = tmp_path_factory.mktemp("push")
    served, local = base / "served", base / "local"
    cli("train", "--dataset", "wine", "--epochs", "1", "--quiet", "--warehouse", str(served))
    key = cli("keys", "create", "--scope", "write", "--warehouse", str(served)).strip()
    read_key = cli("keys", "create", "--scope", "read", "--warehouse", str(served)).strip()
    say = io.StringIO()
    with serving(served, env=LIMITS) as first:
        rec = SpillRecorder(RemoteRecorder(first.url, key, close_timeout_s=1.0, stream=say),
                            lambda run: (warehouse.open_recorder(local), str(local)), stream=say)
        run = AdaptiveRun(load_problem("iris", seed=1),
                          mlp_graph(parse_model_spec("mlp:depth=1,width=4"), 4, 3),
                          TrainConfig(lr=0.01, seed=1),
                          AdaptConfig(steps=300, warmup_steps=30, eval_every=10,
                                      epoch_trigger=2, guard=GuardConfig(steps=20)),
                          RuleBasedPolicy(), recorder=rec,
                          hooks=[KillServer(first.proc, rec, 100), FaultInjection(150, "spike")])
        try:
            result = run.run()
        finally:
            rec.close()
    assert "logged locally" in say.getvalue() and f"aicf-induct push {result.run_id} --to " \
        f"{first.url} --warehouse {local}" in say.getvalue(), say.getvalue()
    cli("warehouse", "check", "--repair", "--warehouse", str(served))
    with serving(served, env=LIMITS) as again:
        yield {"url": again.url, "key": key, "read_key": read_key, "served": served,
               "local": local, "run_id": result.run_id}


def test_a_run_the_service_took_in_part_is_completed_to_the_local_copy(spilled) -> None:
    s = spilled
    mine, before = rows(s["local"], s["run_id"]), rows(s["served"], s["run_id"])
    # the test means something: a rollback (two trajectories), the service's copy in part
    assert len({r[-1] for r in mine["steps"]}) > 1, "no rollback: no second trajectory"
    assert 0 < len(before["steps"]) < len(mine["steps"]) and before["events"]
    assert before["runs"][0][-5] == "abandoned" and mine["runs"][0][-5] == "completed"
    status, out, err = push(s["run_id"], "--to", s["url"], "--api-key", s["key"],
                            "--warehouse", str(s["local"]), "--json")
    assert status == 0, err
    (got,) = json.loads(out)["runs"]
    assert got["started"] is False and got["status"] == "completed"
    assert got["sent"]["steps"] == len(mine["steps"]) - len(before["steps"])
    assert got["sent"]["run_ends"] == 1 and "runs" not in got["sent"], got
    after = rows(s["served"], s["run_id"])
    for table in COMPARED:  # every column of every row, not only counts
        assert after[table] == mine[table], table


def test_a_second_push_sends_nothing_and_says_so(spilled) -> None:
    s = spilled
    push(s["run_id"], "--to", s["url"], "--api-key", s["key"], "--warehouse", str(s["local"]))
    files = parquet_files(s["served"])
    # named by the start of its id, as `aicf-induct runs` prints it (it was "no run")
    status, out, _ = push(s["run_id"][:12], "--to", s["url"], "--api-key", s["key"],
                          "--warehouse", str(s["local"]))
    assert status == 0
    assert out == f"run {s['run_id']} (completed): already whole on the service, sent nothing\n"
    assert parquet_files(s["served"]) == files  # not even an empty batch


def test_a_run_the_service_never_saw_is_started_and_sent_whole(spilled,
                                                               monkeypatch) -> None:
    s = spilled
    run_id = json.loads(cli("train", "--dataset", "diabetes", "--epochs", "2", "--model",
                            "mlp:depth=1,width=8", "--quiet", "--json", "--warehouse",
                            str(s["local"])))["run_id"]
    assert rows(s["served"], run_id)["runs"] == []
    monkeypatch.setenv("AICF_API_KEY", s["key"])  # the key's default
    monkeypatch.setenv("AICF_WAREHOUSE", str(s["local"]))
    status, out, err = push(run_id, "--to", s["url"])
    assert status == 0, err
    mine = rows(s["local"], run_id)
    assert out == (f"run {run_id} (completed): sent 1 problem, the run's start, "
                   f"{len(mine['ir_snapshots'])} snapshots, {len(mine['steps'])} steps, "
                   f"{len(mine['results'])} results, its end\n")
    assert rows(s["served"], run_id) == mine


def test_bad_inputs_are_one_line_each(spilled, tmp_path: Path, monkeypatch) -> None:
    s = spilled
    monkeypatch.delenv("AICF_API_KEY", raising=False)
    base = ["--warehouse", str(s["local"])]
    nobody = f"http://127.0.0.1:{free_port()}"
    busy = tmp_path / "busy"
    rec = warehouse.open_recorder(busy)  # a run whose writer is alive: running
    rec.run_start(RunStartRecord("busy-1", "p", "p", "regression", {}, 0, "cpu", {}, "test"))
    rec.flush()
    cases = [
        ([s["run_id"], "--to", s["url"], *base], "push needs a write key of the service"),
        (["no-such-run", "--to", s["url"], "--api-key", s["key"], *base],
         f"no run 'no-such-run' in the warehouse at {s['local']}"),
        (["a'b", "--to", s["url"], "--api-key", s["key"], *base], "'a'b' is no run id"),
        ([s["run_id"], "--to", s["url"], "--api-key", s["key"], "--warehouse",
          str(tmp_path / "none")], "no warehouse at"),
        ([s["run_id"], "--to", s["url"], "--api-key", "aicf_wrong", *base],
         f"{s['url']} refused the key: 401"),
        ([s["run_id"], "--to", s["url"], "--api-key", s["read_key"], *base],
         f"{s['url']} refused the key: 403"),
        ([s["run_id"], "--to", nobody, "--api-key", s["key"], *base],
         f"cannot reach {nobody} ("),
        (["busy-1", "--to", s["url"], "--api-key", s["key"], "--warehouse", str(busy)],
         "run busy-1 is still running in the warehouse at"),
        ([s["run_id"], "--to", "ftp://x", "--api-key", s["key"]], "expected http://HOST:PORT"),
    ]
    try:
        for argv, text in cases:
            status, out, err = push(*argv)
            assert status == 2 and out == "", (argv, out, err)
            assert err.startswith("error: ") and err.count("\n") == 1 and text in err, (argv,
                                                                                       err)
    finally:
        rec.close()


def test_a_batch_refused_mid_push_names_the_run_and_what_went_before(spilled,
                                                                    monkeypatch) -> None:
    from aicf_induct.runtime import push as runtime_push

    s = spilled
    root = s["local"].parent / "odd"
    rec = warehouse.open_recorder(root)
    rec.problem(ProblemRecord("odd0problem0", "odd", "synthetic", "regression", 10, 2, 0, "y"))
    rec.run_start(RunStartRecord("odd-1", "odd0problem0", "odd", "regression", {}, 0, "cpu",
                                 {}, "test"))
    rec.snapshot(SnapshotRecord("odd-1", 0, "start", _ir(4), "fp-odd", 3, {"depth": 1.0}))
    for k in range(250):
        rec.step(StepRecord("odd-1", k, 0, 1.0 / (k + 1), 0.5, 0.01, 0.001, 0.001, 8))
    # a time past what the service takes (1970-2200): its batch is refused as invalid
    rec.event(EventRecord("odd-1", 240, "trigger", "plateau", at=datetime(2300, 1, 1, tzinfo=UTC)))
    rec.run_end(RunEndRecord("odd-1", "completed", 250, 1.0))
    rec.close()
    monkeypatch.setattr(runtime_push, "BATCH_ROWS", 100)
    status, out, err = push("odd-1", "--to", s["url"], "--api-key", s["key"], "--warehouse",
                            str(root))
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: run odd-1: the service refused a batch (422 events[0].at: ")
    assert "sent before it: 1 problem, the run's start, 1 snapshot, 197 steps (push it " \
           "again to send the rest)" in err, err
    held = rows(s["served"], "odd-1")
    assert len(held["steps"]) == 197 and held["events"] == [] and held["run_ends"] == []


def _ir(width: int) -> str:
    """A small MLP's canonical IR (the service refuses a snapshot that is not one)."""
    from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
    from aicf_induct.ir.canonical import to_json

    return to_json(mlp_graph(parse_model_spec(f"mlp:depth=1,width={width}"), 3, 1))


def _twin(root: Path, loss: float, ir_json: str) -> None:
    """Run twin-1 in the warehouse at `root`: a snapshot of the IR `ir_json`, 20 steps, and
    results whose validation loss is `loss` (the others NaN and infinite: values the service's
    SQL answers as null)."""
    rec = warehouse.open_recorder(root)
    rec.problem(ProblemRecord("twin0problem", "twin", "synthetic", "regression", 10, 2, 0, "y"))
    rec.run_start(RunStartRecord("twin-1", "twin0problem", "twin", "regression", {}, 0, "cpu",
                                 {}, "test"))
    rec.snapshot(SnapshotRecord("twin-1", 0, "start", ir_json, "fp-twin", 3, {"depth": 1.0}))
    for k in range(20):
        rec.step(StepRecord("twin-1", k, 0, 1.0 / (k + 1), 0.5, 0.01, 0.001, 0.001, 8))
    for split, value in (("val", loss), ("train", float("nan")), ("test", float("inf"))):
        rec.result(ResultRecord("twin-1", 20, 1, split, "loss", value, final=True))
    rec.run_end(RunEndRecord("twin-1", "completed", 20, 1.0))
    rec.close()


def test_a_result_of_another_value_on_the_service_gets_the_local_one_beside_it(
        spilled, tmp_path: Path) -> None:
    """A result is matched with its value, a snapshot with its IR: the service's copy holds
    twin-1 with a validation loss of 0.5 and another IR; the local one (0.75) is sent beside
    them, nothing replaced; and a non-finite value (null in the service's SQL) matches."""
    s = spilled
    first, second = tmp_path / "first", tmp_path / "second"
    _twin(first, 0.5, _ir(4))
    _twin(second, 0.75, _ir(8))
    key = ["--to", s["url"], "--api-key", s["key"]]
    assert push("twin-1", *key, "--warehouse", str(first))[0] == 0
    status, out, err = push("twin-1", *key, "--warehouse", str(second))
    assert status == 0 and out == "run twin-1 (completed): sent 1 snapshot, 1 result\n", err
    assert "the service holds 1 snapshots row(s) the local copy does not" in err
    assert "the service holds 1 results row(s) the local copy does not" in err
    held = rows(s["served"], "twin-1")
    assert sorted(r[5] for r in held["results"] if r[3] == "val") == ["0.5", "0.75"]
    assert len(held["results"]) == 4 and len(held["ir_snapshots"]) == 2
    assert push("twin-1", *key, "--warehouse", str(second))[1] == \
        "run twin-1 (completed): already whole on the service, sent nothing\n"


def test_a_push_waits_out_a_service_whose_sql_slots_are_busy(spilled, tmp_path: Path) -> None:
    """The service's one SQL slot held by a query past the push's first ask: the service
    answers 429 (Retry-After 1) until the slot frees, and the push asks again."""
    import threading
    import time

    import httpx

    from api.app import create_app
    from api.settings import Settings
    from tests.api.conftest import serve_in_thread

    s, root = spilled, tmp_path / "service"
    key = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
    # the slot held 4 s: past the push's first ask (at once) and its second of a wait
    app = create_app(Settings(warehouse=root, sql_concurrency=1, sql_time_limit_s=4))
    with serve_in_thread(app) as client:
        held: list[httpx.Response] = []
        slow = threading.Thread(target=lambda: held.append(client.post(
            "/v1/sql", json={"sql": "SELECT count(*) FROM range(1000000000000)"})))
        slow.start()
        while app.state.warehouse.sql.slots._value:  # until it holds the slot
            time.sleep(0.01)
        status, out, err = push(s["run_id"], "--to", str(client.base_url), "--api-key", key,
                                "--warehouse", str(s["local"]))
        slow.join()
    assert held[0].json()["type"].endswith("sql-time-limit")  # it held the slot to its end
    assert status == 0 and out.startswith(f"run {s['run_id']} (completed): sent 1 problem, "
                                          "the run's start"), err
    assert rows(root, s["run_id"]) == rows(s["local"], s["run_id"])
