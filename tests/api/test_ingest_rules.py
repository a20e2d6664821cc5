"""Ingest refuses what its readers could not use, through the real service (an audit found each
accepted with a 200): JSON nested past `MAX_DEPTH`, a snapshot whose IR is JSON but no
graph, a batch id raced by requests of other rows, an end contradicting a run's final end
(stored, or earlier in the same batch), `resumed` sent to the end route, JSON fields that
hold text of no JSON object, negative counts, an infinite wall time, an empty Arrow stream
for a run never started; a bad batch id in the query is named there."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.ir.canonical import to_json
from aicf_induct.json_values import MAX_DEPTH
from tests.api.conftest import cli, serve
from tests.api.test_ingest import ARROW, RUN, arrow_body, count_steps, step_rows
from warehouse.ingest import is_committed


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, str]]:
    root = tmp_path_factory.mktemp("rules") / "wh"
    key = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
    with serve(root) as url:
        yield url, root, key


@pytest.fixture
def client(service: tuple[str, Path, str]) -> Iterator[httpx.Client]:
    url, _, key = service
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                      timeout=60) as c:
        yield c


def _start(c: httpx.Client, run_id: str) -> None:
    r = c.post("/v1/ingest/runs", json={"batch_id": f"start-{run_id}",
                                        "run": {**RUN, "run_id": run_id}})
    assert r.status_code == 200, r.text


def _nested(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = {"a": v}
    return v


@pytest.mark.parametrize("as_text", [False, True])
def test_json_nested_past_max_depth_is_a_422_naming_the_field(
        client: httpx.Client, service: tuple[str, Path, str], as_text: bool) -> None:
    """Nested 300 deep it was taken, and `GET /v1/runs/{id}` then answered 500; `MAX_DEPTH`
    levels are taken (no run of the project's comes near), one more is refused, as an
    object or as its JSON text."""
    deep = _nested(MAX_DEPTH + 1)
    value = json.dumps(deep) if as_text else deep
    tag = "text" if as_text else "obj"
    r = client.post("/v1/ingest/runs", json={"batch_id": f"deep-run-{tag}",
                                             "run": {**RUN, "run_id": f"deep-{tag}",
                                                     "config": value}})
    assert r.status_code == 422 and r.json()["field"] == "body.run.config", r.text
    assert f"nested deeper than {MAX_DEPTH} levels" in r.json()["detail"]
    _start(client, f"deep-ok-{tag}")
    event = {"run_id": f"deep-ok-{tag}", "step": 1, "kind": "decision", "name": "none",
             "detail": value}
    r = client.post("/v1/ingest/batches", json={"batch_id": f"deep-ev-{tag}",
                                                "events": [event]})
    assert r.status_code == 422 and r.json()["field"] == "body.events[0].detail", r.text
    ok = {**event, "detail": _nested(MAX_DEPTH) if not as_text
          else json.dumps(_nested(MAX_DEPTH))}
    r = client.post("/v1/ingest/batches", json={"batch_id": f"deep-ok-ev-{tag}",
                                                "events": [ok]})
    assert r.status_code == 200, r.text
    assert client.get(f"/v1/runs/deep-ok-{tag}").status_code == 200
    for bid in (f"deep-run-{tag}", f"deep-ev-{tag}"):
        assert not is_committed(service[1], bid)


GOOD_IR = to_json(mlp_graph(parse_model_spec("mlp:depth=1,width=4"), 3, 1))
BAD_IRS = {
    "id a list": {"format": "aicf.ir/1",
                  "nodes": [{"id": [1], "op": "input", "inputs": [], "attrs": {}}]},
    "inputs an int": {"format": "aicf.ir/1",
                      "nodes": [{"id": "x", "op": "input", "inputs": 5, "attrs": {}}]},
    "attrs a list": {"format": "aicf.ir/1",
                     "nodes": [{"id": "x", "op": "input", "inputs": [], "attrs": [1, 2]}]},
    "no graph": {"a": 1},
}


@pytest.mark.parametrize("name", list(BAD_IRS))
def test_a_snapshot_whose_ir_is_no_graph_is_a_422(client: httpx.Client, name: str) -> None:
    run_id = "ir-" + name.replace(" ", "-")
    _start(client, run_id)
    snap = {"run_id": run_id, "step": 0, "reason": "start", "fingerprint": "fp",
            "param_count": 3, "patterns": {}}
    r = client.post("/v1/ingest/batches", json={
        "batch_id": f"bad-{run_id}", "snapshots": [{**snap, "ir_json": GOOD_IR},
                                                   {**snap, "ir_json": json.dumps(BAD_IRS[name])}]})
    assert r.status_code == 422 and r.json()["field"] == "body.snapshots[1].ir_json", r.text
    assert "not a valid aicf.ir graph" in r.json()["detail"]
    r = client.post("/v1/ingest/batches", json={"batch_id": f"good-{run_id}",
                                                "snapshots": [{**snap, "ir_json": GOOD_IR}]})
    assert r.status_code == 200, r.text


def test_a_batch_id_raced_by_requests_of_other_rows_gives_each_loser_a_409(
        client: httpx.Client, service: tuple[str, Path, str]) -> None:
    """Six requests at once, one batch id, six different steps: one was written and the
    other five answered 200 `written: false`, their rows dropped; each now gets the 409 it
    gets when it comes after. Repeated: the race is won by any of them."""
    url, root, key = service
    _start(client, "raced")
    def send(answers: list[httpx.Response], bid: str, step: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                          timeout=60) as c:
            answers.append(c.post("/v1/ingest/batches", json={
                "batch_id": bid, "steps": step_rows("raced", step, 1)}))

    for attempt in range(4):
        answers: list[httpx.Response] = []
        threads = [threading.Thread(target=send, args=(answers, f"race-{attempt}",
                                                       100 * attempt + k)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(a.status_code for a in answers)
        assert codes == [200] + [409] * 5, [a.text for a in answers]
        assert all(a.json()["written"] for a in answers if a.status_code == 200)
    assert count_steps(root, "raced") == 4


def test_an_end_that_contradicts_a_final_end_is_a_409(client: httpx.Client) -> None:
    """A second end after `completed` made the run read `failed`. The same end again (a
    retry under another id) is taken; an interrupted run's later end is taken too (it
    resumes under its id)."""
    _start(client, "ended")
    end = {"status": "completed", "steps": 5, "wall_time_s": 1.0}
    assert client.post("/v1/ingest/runs/ended/end",
                       json={"batch_id": "end-1", **end}).status_code == 200
    assert client.post("/v1/ingest/runs/ended/end",
                       json={"batch_id": "end-2", **end}).status_code == 200
    for bid, other in (("end-3", {**end, "status": "failed"}), ("end-4", {**end, "steps": 9})):
        r = client.post("/v1/ingest/runs/ended/end", json={"batch_id": bid, **other})
        assert r.status_code == 409 and r.json()["field"] == "body.status", r.text
        assert r.json()["type"].endswith(":run-ended")
        assert "ended completed at step 5 before" in r.json()["detail"]
    r = client.post("/v1/ingest/batches", json={"batch_id": "end-5", "run_ends": [
        {"run_id": "ended", **end, "status": "timeout"}]})
    assert r.status_code == 409 and r.json()["field"] == "body.run_ends[0].status", r.text
    assert client.get("/v1/runs/ended").json()["status"] == "completed"
    _start(client, "resumed")
    for bid, status in (("res-1", "interrupted"), ("res-2", "completed")):
        r = client.post("/v1/ingest/runs/resumed/end",
                        json={"batch_id": bid, **end, "status": status})
        assert r.status_code == 200, r.text
    assert client.get("/v1/runs/resumed").json()["status"] == "completed"


def test_an_empty_arrow_stream_for_a_run_never_started_is_a_404(
        client: httpx.Client, service: tuple[str, Path, str]) -> None:
    empty = pa.Table.from_pylist(step_rows("x", 0, 1)).slice(0, 0)
    r = client.post("/v1/ingest/runs/never-started-0/steps", params={"batch_id": "empty-0"},
                    content=arrow_body(empty), headers={"Content-Type": ARROW})
    assert r.status_code == 404 and r.json()["field"] == "path.run_id", r.text
    assert not is_committed(service[1], "empty-0")


def test_a_bad_batch_id_in_the_query_is_named_there(client: httpx.Client) -> None:
    _start(client, "query-id")
    body = arrow_body(pa.Table.from_pylist(step_rows("query-id", 0, 2)))
    r = client.post("/v1/ingest/runs/query-id/steps", params={"batch_id": "a\0b"},
                    content=body, headers={"Content-Type": ARROW})
    assert r.status_code == 422 and r.json()["field"] == "query.batch_id", r.text


def test_ends_that_contradict_each_other_in_one_batch_are_a_409(client: httpx.Client) -> None:
    """`completed` then `failed` in one batch was taken, and the run read `failed`; two
    `completed` ends of other step counts left the run saying 2 steps and a later retry of
    that end refused for "step 1". Nothing of the refused batch is written."""
    run = {**RUN, "run_id": "twice"}
    end = {"run_id": "twice", "status": "completed", "steps": 3, "wall_time_s": 1.0}
    for bid, second in (("both-1", {**end, "status": "failed"}),
                        ("both-2", {**end, "steps": 4})):
        r = client.post("/v1/ingest/batches", json={"batch_id": bid, "runs": [run],
                                                    "run_ends": [end, second]})
        assert r.status_code == 409 and r.json()["field"] == "body.run_ends[1].status", r.text
        assert "ended completed at step 3 before" in r.json()["detail"]
    r = client.post("/v1/ingest/batches", json={"batch_id": "both-3", "runs": [run],
                                                "run_ends": [end, end]})
    assert r.status_code == 200, r.text
    got = client.get("/v1/runs/twice").json()
    assert (got["status"], got["steps_taken"]) == ("completed", 3)
    interrupted = {**end, "status": "interrupted", "steps": 1}
    _start(client, "goes-on")
    r = client.post("/v1/ingest/batches", json={"batch_id": "goes-on-ends", "run_ends": [
        {**interrupted, "run_id": "goes-on"}, {**end, "run_id": "goes-on"}]})
    assert r.status_code == 200, r.text


def test_the_end_route_takes_no_resumed_row(client: httpx.Client) -> None:
    """It wrote the row under no server lease, and the run, going on, read `abandoned`."""
    _start(client, "res-route")
    r = client.post("/v1/ingest/runs/res-route/end", json={
        "batch_id": "res-route-end", "status": "resumed", "steps": 3, "wall_time_s": 1.0})
    assert r.status_code == 422 and r.json()["field"] == "body.status", r.text
    assert "'resumed' is no end status" in r.json()["detail"]
    assert client.get("/v1/runs/res-route").json()["status"] == "running"


@pytest.mark.parametrize("value, says", [
    ("not json", "text that is not JSON"), ("[1, 2]", "JSON text of no object"),
    ([1, 2], "not a JSON object")])
def test_a_json_field_that_holds_no_object_is_a_422(
        client: httpx.Client, value: Any, says: str) -> None:
    """An event whose `metrics_before` was the text "not json" was stored, and the
    `rewrite_effects` report failed on it with a 503 from then on."""
    run_id = f"metrics-{len(str(value))}-{type(value).__name__}"
    _start(client, run_id)
    event = {"run_id": run_id, "step": 0, "kind": "rewrite", "name": "widen",
             "metrics_before": value}
    r = client.post("/v1/ingest/batches", json={"batch_id": f"ev-{run_id}",
                                                "events": [event]})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "body.events[0].metrics_before" and says in r.json()["detail"]
    ok = {**event, "metrics_before": json.dumps({"loss": 0.5}),
          "metrics_after": {"loss": 0.4}}
    r = client.post("/v1/ingest/batches", json={"batch_id": f"ok-{run_id}", "events": [ok]})
    assert r.status_code == 200, r.text
    r = client.get("/v1/reports/rewrite_effects")
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("batch, field, says", [
    ({"problems": [{"problem_id": "p-neg", "name": "neg", "source": "file", "task":
                    "classification", "n_rows": -3, "n_features": 2, "n_classes": 2,
                    "target": "y"}]}, "body.problems[0].n_rows", "negative"),
    ({"run_ends": [{"run_id": "inf-wall", "status": "completed", "steps": 1,
                    "wall_time_s": float("inf")}]}, "body.run_ends[0].wall_time_s",
     "infinite"),
])
def test_counts_and_times_that_no_reader_could_use_are_a_422(
        client: httpx.Client, batch: dict[str, Any], field: str, says: str) -> None:
    _start(client, "inf-wall") if "run_ends" in batch else None
    body = json.dumps({"batch_id": f"bad-{field}", **batch})  # Python's json sends Infinity
    r = client.post("/v1/ingest/batches", content=body,
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    assert says in r.json()["detail"]


def test_a_run_started_again_through_its_route_is_named_as_the_route_names_it(
        client: httpx.Client) -> None:
    _start(client, "again")
    r = client.post("/v1/ingest/runs", json={"batch_id": "again-2",
                                             "run": {**RUN, "run_id": "again"}})
    assert r.status_code == 409 and r.json()["field"] == "body.run.run_id", r.text
    assert r.json()["detail"].startswith("run.run_id: run 'again' was started before")


def test_a_body_of_no_arrow_stream_says_so_without_a_field_prefix(
        client: httpx.Client) -> None:
    _start(client, "not-arrow")
    r = client.post("/v1/ingest/runs/not-arrow/steps", params={"batch_id": "not-arrow-0"},
                    content=b"no arrow here", headers={"Content-Type": ARROW})
    assert r.status_code == 422 and r.json()["field"] == "body", r.text
    assert r.json()["detail"].startswith("not an Arrow IPC stream")


def test_a_compressed_stream_past_the_limit_once_read_is_a_413_and_writes_nothing(
        tmp_path: Path) -> None:
    """11 kB of zstd held 320 MB of steps: the body's byte limit let a client ask the
    server for terabytes. Its batches' size once read is checked from the headers first."""
    from api.app import create_app
    from api.settings import Settings
    from tests.api.conftest import serve_in_thread
    from warehouse.keys import create_key

    settings = Settings(warehouse=tmp_path / "wh", max_ingest_bytes=1 << 20)
    key = create_key(settings.key_path(), "write")
    table = pa.Table.from_pylist(step_rows("bomb", 0, 40_000))  # ~3 MB once read
    body = _zstd(table)
    assert len(body) < settings.max_ingest_bytes
    with serve_in_thread(create_app(settings)) as c:
        c.headers["Authorization"] = f"Bearer {key}"
        _start(c, "bomb")
        r = c.post("/v1/ingest/runs/bomb/steps", params={"batch_id": "bomb-0"},
                   content=body, headers={"Content-Type": ARROW})
        assert r.status_code == 413 and r.json()["field"] == "body", r.text
        assert "bytes once read, more than the 1,048,576" in r.json()["detail"]
        assert not is_committed(settings.warehouse, "bomb-0")
        r = c.post("/v1/ingest/runs/bomb/steps", params={"batch_id": "bomb-1"},
                   content=_zstd(table.slice(0, 1000)),  # compressed, within the limit
                   headers={"Content-Type": ARROW})
        assert r.status_code == 200 and r.json()["rows"] == {"steps": 1000}, r.text
    assert count_steps(settings.warehouse, "bomb") == 1000


def _zstd(t: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema,
                           options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_table(t)
    return bytes(sink.getvalue().to_pybytes())
