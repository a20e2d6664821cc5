"""Ingest through the real service: a run trained in another process with `--log-to` lands in
the warehouse with the steps of the same run logged locally; retried batches are written once,
also across a restart; bad batches are 4xx naming the field; keys are checked."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

import warehouse
from aicf_induct.cli.main import main
from tests.api.conftest import REPO, cli, serve
from warehouse.ingest import is_committed

ARROW = "application/vnd.apache.arrow.stream"
INGEST_ENV = {"AICF_SERVICE_MAX_INGEST_BYTES": str(8 << 20)}


def step_rows(run_id: str, start: int, n: int) -> list[dict[str, Any]]:
    return [{"run_id": run_id, "step": s, "epoch": s // 100, "loss": 1.0 / (s + 1),
             "grad_norm": 0.5, "update_ratio": 1e-3, "lr": 0.01, "step_time_s": 1e-4,
             "batch_size": 32} for s in range(start, start + n)]


def arrow_body(t: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return bytes(sink.getvalue().to_pybytes())


def rows(root: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = warehouse.connect(root)
    try:
        return conn.execute(sql, list(params)).fetchall()
    finally:
        conn.close()


RUN = {"run_id": "remote-1", "problem_id": "p1", "problem_name": "toy", "task": "regression",
       "config": {"model": "mlp"}, "seed": 0, "device": "cpu", "library_versions": {},
       "origin": "api"}


class Ingest:
    def __init__(self, url: str, root: Path, write_key: str, read_key: str) -> None:
        self.url, self.root, self.write_key, self.read_key = url, root, write_key, read_key

    def client(self, key: str | None = "write") -> httpx.Client:
        key = {"write": self.write_key, "read": self.read_key}.get(key or "", key)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    root = tmp_path_factory.mktemp("ingest") / "wh"
    write = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
    read = cli("keys", "create", "--scope", "read", "--warehouse", str(root)).strip()
    return root, write, read


@pytest.fixture(scope="module")
def service(keys: tuple[Path, str, str]) -> Iterator[Ingest]:
    root, write, read = keys
    with serve(root, env=INGEST_ENV) as url:
        yield Ingest(url, root, write, read)


def train(*extra: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "aicf_induct", "train", "--dataset", "iris", "--epochs", "3",
         "--seed", "3", "--quiet", "--json", *extra],
        cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "remote log" not in out.stderr, out.stderr  # nothing dropped, nothing retried
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_a_run_logged_through_the_service_equals_the_local_run(service: Ingest,
                                                               tmp_path: Path) -> None:
    remote = train("--log-to", service.url, "--api-key", service.write_key)
    local = train("--warehouse", str(tmp_path / "local"))
    listed = cli("runs", "--warehouse", str(service.root), "--problem", "iris")
    assert remote["run_id"][:12] in listed and "completed" in listed
    sql = "SELECT step, epoch, loss, grad_norm, lr, batch_size FROM steps WHERE run_id = ? " \
          "ORDER BY step"
    got = rows(service.root, sql, remote["run_id"])
    want = rows(tmp_path / "local", sql, local["run_id"])
    assert len(got) == remote["steps"] == 9  # 3 epochs of 3 (97 rows: none alone)
    assert got == want  # the same floats, step by step
    # and every other kind of row made it too
    for table, n in (("runs", 1), ("run_ends", 1), ("ir_snapshots", 2), ("results", 13)):
        count = rows(service.root, f"SELECT count(*) FROM {table} WHERE run_id = ?",
                     remote["run_id"])[0][0]
        local_n = rows(tmp_path / "local", f"SELECT count(*) FROM {table} WHERE run_id = ?",
                       local["run_id"])[0][0]
        assert count == local_n >= n, table
    # the problem's features, of seed 0's split though the run trained on seed 3's
    sql = ("SELECT feature, value, split_seed FROM problem_features WHERE problem_id = "
           "(SELECT problem_id FROM runs WHERE run_id = ?) ORDER BY feature")
    features = rows(service.root, sql, remote["run_id"])
    assert features == rows(tmp_path / "local", sql, local["run_id"])
    assert len(features) > 40 and {f[2] for f in features} == {0}
    with service.client(None) as c:
        run = c.get(f"/v1/runs/{remote['run_id']}").json()
    assert run["status"] == "completed" and run["logged_steps"] == 9


def test_adapt_logs_through_the_service_with_its_events(service: Ingest) -> None:
    out = json.loads(cli("adapt", "--dataset", "iris", "--steps", "60", "--seed", "1",
                         "--inject-nan", "30", "--json", "--log-to", service.url,
                         "--api-key", service.write_key))
    kinds = rows(service.root, "SELECT DISTINCT kind FROM events WHERE run_id = ?",
                 out["run_id"])
    assert ("rollback",) in kinds, kinds
    origin = rows(service.root, "SELECT origin, status FROM runs WHERE run_id = ?",
                  out["run_id"])
    assert origin == [("adapt", out["status"])]
    # the replay logs the steps past the rollback's target again: counted apart
    with service.client(None) as c:
        run = c.get(f"/v1/runs/{out['run_id']}").json()
    live = rows(service.root, "SELECT count(*) FROM live_steps WHERE run_id = ?",
                out["run_id"])[0][0]
    assert run["logged_steps"] > run["live_steps"] == live == 60


@pytest.mark.parametrize("argv,message", [
    (["--api-key", "READ"], "403"), (["--api-key", "aicf_unknown"], "401"),
    ([], "--log-to needs a write key"), (["--api-key", "K", "--no-log"], "contradict"),
    (["--api-key", "K", "--warehouse", "x"], "drop --warehouse")])
def test_a_refused_log_stops_train_before_it_trains(service: Ingest, argv: list[str],
                                                    message: str,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AICF_API_KEY", raising=False)
    argv = [a.replace("READ", service.read_key) for a in argv]
    code = main(["train", "--dataset", "iris", "--epochs", "1", "--quiet", "--log-to",
                 service.url, *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err, err
    assert err.count("\n") == 1


def test_create_append_end_in_json_and_arrow(service: Ingest) -> None:
    with service.client() as c:
        r = c.post("/v1/ingest/runs", json={"batch_id": "run-1", "run": RUN})
        assert r.status_code == 200 and r.json() == {"batch_id": "run-1", "written": True,
                                                     "rows": {"runs": 1}}
        assert c.get("/v1/runs/remote-1").json()["status"] == "running"  # the server's lease
        r = c.post("/v1/ingest/batches", json={"batch_id": "steps-1",
                                               "steps": step_rows("remote-1", 0, 100)})
        assert r.json()["rows"] == {"steps": 100}
        t = pa.Table.from_pylist(step_rows("remote-1", 100, 50)).drop_columns(["run_id"])
        r = c.post("/v1/ingest/runs/remote-1/steps", params={"batch_id": "steps-2"},
                   content=arrow_body(t), headers={"Content-Type": ARROW})
        assert r.status_code == 200 and r.json()["rows"] == {"steps": 50}, r.text
        r = c.post("/v1/ingest/runs/remote-1/end", json={
            "batch_id": "end-1", "status": "completed", "steps": 150, "wall_time_s": 1.5})
        assert r.json()["written"]
        run = c.get("/v1/runs/remote-1").json()
    assert run["status"] == "completed" and run["logged_steps"] == 150
    got = rows(service.root, "SELECT loss FROM steps WHERE run_id = 'remote-1' ORDER BY step")
    assert [x[0] for x in got] == [1.0 / (s + 1) for s in range(150)]


def count_steps(root: Path, run_id: str) -> int:
    return int(rows(root, "SELECT count(*) FROM steps WHERE run_id = ?", run_id)[0][0])


def test_a_retried_batch_is_written_once(service: Ingest) -> None:
    # across a server restart: test_ingest_crash.py re-sends acknowledged batches after one
    batch = {"batch_id": "retry-me", "steps": step_rows("retried", 0, 40)}
    arrow = arrow_body(pa.Table.from_pylist(step_rows("retried", 40, 10)))
    answers = []
    with service.client() as c:
        c.post("/v1/ingest/runs", json={"batch_id": "start-retried",
                                        "run": {**RUN, "run_id": "retried"}}).raise_for_status()
        for _ in range(3):
            answers.append(c.post("/v1/ingest/batches", json=batch).json()["written"])
            answers.append(c.post("/v1/ingest/runs/retried/steps",
                                  params={"batch_id": "retry-arrow"}, content=arrow,
                                  headers={"Content-Type": ARROW}).json()["written"])
    assert answers == [True, True] + [False] * 4
    assert count_steps(service.root, "retried") == 50
    assert is_committed(service.root, "retry-me") and is_committed(service.root, "retry-arrow")


def test_a_run_is_started_once(service: Ingest) -> None:
    """A run id the service started is refused under another batch id (409 naming it, the
    batch not written); the same batch sent again is a retry, not a second start."""
    run = {**RUN, "run_id": "once"}

    def runs_of(run_id: str) -> int:
        with warehouse.connect(service.root) as conn:
            return int(conn.execute("SELECT count(*) FROM runs WHERE run_id = ?",
                                    [run_id]).fetchone()[0])

    with service.client() as c:
        first = c.post("/v1/ingest/runs", json={"batch_id": "once-a", "run": run})
        retry = c.post("/v1/ingest/runs", json={"batch_id": "once-a", "run": run})
        again = c.post("/v1/ingest/runs", json={"batch_id": "once-b", "run": run})
        batch = c.post("/v1/ingest/batches", json={"batch_id": "once-c", "runs": [run],
                                                   "steps": step_rows("once", 0, 2)})
        twice = c.post("/v1/ingest/batches", json={
            "batch_id": "once-d", "runs": [{**run, "run_id": "new"}, {**run, "run_id": "new"}]})
    assert first.json()["written"] and not retry.json()["written"]
    for r, field, says in ((again, "body.run.run_id", "was started before"),
                           (batch, "body.runs[0].run_id", "was started before"),
                           (twice, "body.runs[1].run_id",
                            "is started twice in this batch (runs[0] too)")):
        assert r.status_code == 409, r.text
        assert r.json()["field"] == field and says in r.json()["detail"]
    assert runs_of("once") == 1 and runs_of("new") == 0
    assert count_steps(service.root, "once") == 0  # the refused batch wrote nothing
    assert not any(is_committed(service.root, b) for b in ("once-b", "once-c", "once-d"))


BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"steps": [*step_rows("r", 0, 3), {**step_rows("r", 3, 1)[0], "loss": "low"}]},
     "body.steps[3].loss", "not a number"),
    ({"steps": [{**step_rows("r", 0, 1)[0], "step": 1.5}]}, "body.steps[0].step",
     "not an integer"),
    ({"steps": [{**step_rows("r", 0, 1)[0], "step": True}]}, "body.steps[0].step",
     "not an integer"),
    ({"steps": [{k: v for k, v in step_rows("r", 0, 1)[0].items() if k != "lr"}]},
     "body.steps[0].lr", "missing"),
    ({"steps": [{**step_rows("r", 0, 1)[0], "lrr": 1}]}, "body.steps[0].lrr", "unknown field"),
    ({"steps": [{**step_rows("r", 0, 1)[0], "step": 2**70}]}, "body.steps[0].step",
     "out of the int64 range"),
    ({"steps": {"step": 1}}, "body.steps", "not a list"),
    ({"steps": [3]}, "body.steps[0]", "not an object"),
    ({"metrics": []}, "body.metrics", "unknown record kind"),
    ({"runs": [{**RUN, "started_at": "yesterday"}]}, "body.runs[0].started_at", "ISO 8601"),
    # times Python's datetime cannot read back (they would break every later read of `runs`)
    # and times no clock gives
    ({"runs": [{**RUN, "started_at": "0001-01-01T00:00:00+01:00"}]},
     "body.runs[0].started_at", "is outside 1970-2200 (UTC)"),
    ({"runs": [{**RUN, "started_at": "9999-12-31T23:59:59-05:00"}]},
     "body.runs[0].started_at", "is outside 1970-2200 (UTC)"),
    ({"run_ends": [{"run_id": "r", "status": "completed", "steps": 1, "wall_time_s": 1.0,
                    "ended_at": "1969-12-31T23:59:59+00:00"}]}, "body.run_ends[0].ended_at",
     "is outside 1970-2200 (UTC)"),
    # numbers float64 cannot hold, sent as JSON integers
    ({"steps": [{**step_rows("r", 0, 1)[0], "loss": 10**400}]}, "body.steps[0].loss",
     "out of the float64 range"),
    ({"problems": [{"problem_id": "p", "name": "n", "source": "s", "task": "t", "n_rows": 1,
                    "n_features": 1, "n_classes": 0, "target": "y",
                    "features": {"skew": 10**400}}]}, "body.problems[0].features.skew",
     "out of the float64 range"),
    ({"runs": [{**RUN, "seed": None}]}, "body.runs[0].seed", "missing"),
    ({"problems": [{"problem_id": "p", "name": "n", "source": "s", "task": "t", "n_rows": 1,
                    "n_features": 1, "n_classes": 0, "target": "y",
                    "features": {"skew": "big"}}]}, "body.problems[0].features.skew",
     "not a number"),
    ({"results": [{"run_id": "r", "step": 0, "epoch": 0, "split": "val", "metric": "loss",
                   "value": 1.0, "final": "yes"}]}, "body.results[0].final", "not a boolean"),
    # a run's end: a status the readers know (a 'banana' was shown, and no filter could
    # select it), counts that are not negative
    ({"run_ends": [{"run_id": "r", "status": "banana", "steps": 1, "wall_time_s": 1.0}]},
     "body.run_ends[0].status", "'banana' is no end status (one of completed, "),
    ({"run_ends": [{"run_id": "r", "status": "running", "steps": 1, "wall_time_s": 1.0}]},
     "body.run_ends[0].status", "'running' is no end status"),
    ({"run_ends": [{"run_id": "r", "status": "completed", "steps": -5, "wall_time_s": 1.0}]},
     "body.run_ends[0].steps", "negative"),
    ({"run_ends": [{"run_id": "r", "status": "failed", "steps": 5, "wall_time_s": -1.0}]},
     "body.run_ends[0].wall_time_s", "negative"),
]


@pytest.mark.parametrize("body,field,message", BAD, ids=[b[1] + ":" + b[2] for b in BAD])
def test_a_bad_batch_is_a_422_naming_the_field(service: Ingest, body: dict[str, Any],
                                               field: str, message: str) -> None:
    with service.client() as c:
        r = c.post("/v1/ingest/batches", json={"batch_id": f"bad-{field}-{message}", **body})
    assert r.status_code == 422, r.text
    problem = r.json()
    assert r.headers["content-type"] == "application/problem+json"
    assert problem["field"] == field and message in problem["detail"], problem
    assert problem["detail"].startswith(field.removeprefix("body.") + ": ")
    assert not is_committed(service.root, f"bad-{field}-{message}")  # nothing half-written


def test_bad_bodies_on_the_other_routes(service: Ingest) -> None:
    good = pa.Table.from_pylist(step_rows("arrow-bad", 0, 5))
    with service.client() as c:
        def arrow(t: pa.Table | bytes, ctype: str = ARROW) -> httpx.Response:
            body = t if isinstance(t, bytes) else arrow_body(t)
            return c.post("/v1/ingest/runs/arrow-bad/steps", params={"batch_id": "ab"},
                          content=body, headers={"Content-Type": ctype})

        cases = [
            (arrow(good.set_column(3, "loss", pa.array(["x"] * 5))), 422, "body.steps.loss"),
            (arrow(good.drop_columns(["epoch"])), 422, "body.steps.epoch"),
            (arrow(good.append_column("color", pa.array([1] * 5))), 422, "body.steps.color"),
            (arrow(good.set_column(0, "run_id", pa.array(["other"] * 5))), 422,
             "body.steps[0].run_id"),
            (arrow(good.set_column(3, "loss", pa.array([1.0, None, 1.0, 1.0, 1.0]))), 422,
             "body.steps[1].loss"),
            (arrow(b"not arrow at all"), 422, "body"),
            (arrow(pa.Table.from_arrays([*good.columns, good.column("loss")],
                                        names=[*good.column_names, "loss"])), 422,
             "body.steps.loss"),
            (arrow(good, "application/json"), 415, "header.Content-Type"),
            (arrow(good.set_column(3, "loss", pa.array(["x"] * 5)), ARROW.upper()), 422,
             "body.steps.loss"),  # the media type in capitals is still Arrow
            (c.post("/v1/ingest/batches", content=b"{not json",
                    headers={"Content-Type": "application/json"}), 400, "body"),
            (c.post("/v1/ingest/batches", json={"steps": []}), 422, "body.batch_id"),
            (c.post("/v1/ingest/batches", json={"batch_id": "x" * 129}), 422, "body.batch_id"),
            (c.post("/v1/ingest/runs", json={"batch_id": "r", "run": {**RUN, "seed": "one"}}),
             422, "body.run.seed"),
            (c.post("/v1/ingest/runs", json={"batch_id": "r", "runs": [RUN]}), 422,
             "body.runs"),
            (c.post("/v1/ingest/runs/x/end", json={"batch_id": "e", "status": "completed",
                                                   "steps": "many", "wall_time_s": 1.0}),
             422, "body.steps"),
            # the path names the run: a body naming another is refused, not written there
            (c.post("/v1/ingest/runs/x/end", json={"batch_id": "e2", "run_id": "other",
                                                   "status": "completed", "steps": 1,
                                                   "wall_time_s": 1.0}), 422, "body.run_id"),
            # JSON no table can hold: a lone surrogate, and nesting past Python's limit
            (c.post("/v1/ingest/batches", content=b'{"batch_id": "s", "steps": [{"run_id": '
                    b'"\\ud800"}]}', headers={"Content-Type": "application/json"}), 400,
             "body"),
            (c.post("/v1/ingest/batches", content=b"[" * 100_000,
                    headers={"Content-Type": "application/json"}), 400, "body"),
            (c.post("/v1/proposals", content=b'{"a":' * 5000,
                    headers={"Content-Type": "application/json"}), 400, "body"),
        ]
        for r, status, field in cases:
            assert r.status_code == status, (field, r.text)
            assert r.json()["field"] == field, r.text
        assert count_steps(service.root, "arrow-bad") == 0


ROUTES = [("/v1/ingest/check", {}), ("/v1/ingest/batches", {"batch_id": "k"}),
          ("/v1/ingest/runs", {"batch_id": "k", "run": RUN}),
          ("/v1/ingest/runs/x/end", {"batch_id": "k", "status": "completed", "steps": 1,
                                     "wall_time_s": 1.0}),
          ("/v1/ingest/runs/x/steps?batch_id=k", None)]


@pytest.mark.parametrize("path,body", ROUTES, ids=[r[0] for r in ROUTES])
def test_writes_need_a_write_key(service: Ingest, path: str, body: Any) -> None:
    for key, status in ((None, 401), ("aicf_not-a-key", 401), ("read", 403)):
        with service.client(key) as c:
            r = c.post(path, json=body) if body is not None else c.post(
                path, content=b"", headers={"Content-Type": ARROW})
        assert r.status_code == status, (key, r.text)
        assert r.json()["field"] == "header.Authorization"
    assert not is_committed(service.root, "k")


def test_the_documented_end_statuses_are_the_ones_ingest_takes() -> None:
    from typing import get_args

    from api.schemas.ingest import EndStatus, RunEndIn
    from warehouse.ingest import END_ROW_STATUSES, END_STATUSES

    assert get_args(EndStatus) == END_STATUSES
    # a batch's run_ends row may also say that a resumed run goes on
    row_statuses = [a for t in get_args(RunEndIn.model_fields["status"].annotation)
                    for a in get_args(t)]
    assert tuple(row_statuses) == END_ROW_STATUSES


def test_a_run_the_service_did_not_take_ends_with_status_3(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """With the service down to the end, `train --log-to` printed "logged to URL" last and
    exited 0: a script could not tell a logged run from a lost one."""
    from aicf_induct.cli.background import free_port
    from aicf_induct.runtime.remote_recorder import RemoteRecorder

    monkeypatch.setitem(RemoteRecorder.__init__.__kwdefaults__, "close_timeout_s", 0.3)
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code = main(["train", "--dataset", "iris", "--epochs", "1", "--quiet", "--log-to", url,
                 "--api-key", "K"])
    out, err = capsys.readouterr()
    assert code == 3, (out, err)
    assert out.splitlines()[-1].startswith(f"logged to {url} in part: ")
    assert "record(s) not delivered" in err
    assert "run " in out and "test" in out  # the results are printed all the same


def test_rows_of_a_run_never_started_are_a_404(service: Ingest) -> None:
    """Steps and ends of a run the service never started were written as orphans (no view
    shows them whole; a typo in a client's run id went unseen)."""
    with service.client() as c:
        r = c.post("/v1/ingest/batches", json={"batch_id": "orphan-1",
                                               "steps": step_rows("never-started", 0, 5)})
        assert r.status_code == 404 and r.json()["field"] == "body", r.text
        assert "no run 'never-started' was started through this service" in r.json()["detail"]
        r = c.post("/v1/ingest/runs/never-started/end",
                   json={"batch_id": "orphan-2", "status": "completed", "steps": 5,
                         "wall_time_s": 1.0})
        assert r.status_code == 404 and r.json()["field"] == "path.run_id"
        arrow = arrow_body(pa.Table.from_pylist(step_rows("never-started", 0, 5)))
        r = c.post("/v1/ingest/runs/never-started/steps", params={"batch_id": "orphan-3"},
                   content=arrow, headers={"Content-Type": ARROW})
        assert r.status_code == 404 and r.json()["type"].endswith(":run-not-started")
        # a batch that starts the run and logs its steps is one batch
        r = c.post("/v1/ingest/batches", json={
            "batch_id": "whole-1", "runs": [{**RUN, "run_id": "started-here"}],
            "steps": step_rows("started-here", 0, 5)})
        assert r.status_code == 200, r.text
    assert count_steps(service.root, "never-started") == 0
    assert count_steps(service.root, "started-here") == 5
    for bid in ("orphan-1", "orphan-2", "orphan-3"):
        assert not is_committed(service.root, bid)


def test_a_batch_id_reused_with_other_records_is_a_409(service: Ingest) -> None:
    """A committed batch id sent with other records answered 200 `written: false` and the
    new records were dropped, silently (a retry must send the same bytes)."""
    auth = {"Content-Type": "application/json"}
    with service.client() as c:
        c.post("/v1/ingest/runs", json={"batch_id": "start-reused",
                                        "run": {**RUN, "run_id": "reused"}}).raise_for_status()
        first = json.dumps({"batch_id": "reused-1", "steps": step_rows("reused", 0, 5)})
        assert c.post("/v1/ingest/batches", content=first, headers=auth).json()["written"]
        again = c.post("/v1/ingest/batches", content=first, headers=auth)  # a retry
        assert again.status_code == 200 and again.json()["written"] is False
        # a retry that a client serialised again, its keys in another order and spaced:
        # the same records (it was a 409, and the client dropped them as refused)
        body = json.loads(first)
        redone = json.dumps({k: ([dict(reversed(list(r.items()))) for r in v]
                                 if isinstance(v, list) else v)
                             for k, v in reversed(list(body.items()))}, indent=2)
        assert redone != first
        again = c.post("/v1/ingest/batches", content=redone, headers=auth)
        assert again.status_code == 200 and again.json()["written"] is False, again.text
        other = json.dumps({"batch_id": "reused-1", "steps": step_rows("reused", 5, 6)})
        r = c.post("/v1/ingest/batches", content=other, headers=auth)
        assert r.status_code == 409 and r.json()["field"] == "body.batch_id", r.text
        assert r.json()["type"].endswith(":batch-reused")
        table = pa.Table.from_pylist(step_rows("reused", 20, 3))
        r = c.post("/v1/ingest/runs/reused/steps", params={"batch_id": "reused-2"},
                   content=arrow_body(table), headers={"Content-Type": ARROW})
        assert r.json()["written"] is True
        # its retry cut into other record batches: the same rows
        rechunked = pa.Table.from_batches(table.to_batches(max_chunksize=1))
        r = c.post("/v1/ingest/runs/reused/steps", params={"batch_id": "reused-2"},
                   content=arrow_body(rechunked), headers={"Content-Type": ARROW})
        assert r.status_code == 200 and r.json()["written"] is False, r.text
        arrow = arrow_body(pa.Table.from_pylist(step_rows("reused", 30, 3)))
        r = c.post("/v1/ingest/runs/reused/steps", params={"batch_id": "reused-2"},
                   content=arrow, headers={"Content-Type": ARROW})
        assert r.status_code == 409 and r.json()["field"] == "query.batch_id"
    assert count_steps(service.root, "reused") == 8
