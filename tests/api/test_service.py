"""Every route of the real server (uvicorn in a subprocess), over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

import warehouse
from tests.api.conftest import Server, cli, serve

PROBLEM = "application/problem+json"


def problem(r: httpx.Response, status: int, field: str | None = None) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM
    body = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    assert "Traceback" not in r.text
    if field is not None:
        assert body["field"] == field, body
    return body


def test_health_counts_the_warehouse(server: Server) -> None:
    body = server.client().get("/v1/health").json()
    assert body["status"] == "ok" and body["version"]
    assert body["warehouse"]["readable"] is True
    assert body["warehouse"]["runs"] == 3 and body["warehouse"]["problems"] == 2
    assert body["warehouse"]["steps"] == sum(r["steps"] for r in server.runs.values())


def test_openapi_and_docs_page(server: Server) -> None:
    with server.client() as c:
        paths = c.get("/openapi.json").json()["paths"]
        assert {"/v1/health", "/v1/runs", "/v1/runs/{run_id}", "/v1/runs/{run_id}/steps",
                "/v1/reports", "/v1/sql"} <= set(paths)
        assert {f"/v1/reports/{n}" for n in warehouse.reports()} <= set(paths)
        assert "security" not in paths["/v1/runs"]["get"]  # reads are open on this server
        docs = c.get("/docs")
        assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_runs_filter_and_paginate(server: Server) -> None:
    with server.client() as c:
        page = c.get("/v1/runs").json()
        assert page["total"] == 3 and page["next_offset"] is None
        assert {r["run_id"] for r in page["items"]} == set(server.runs)
        starts = [r["started_at"] for r in page["items"]]
        assert starts == sorted(starts, reverse=True)  # newest first
        iris = c.get("/v1/runs", params={"problem": "iris"}).json()
        assert iris["total"] == 2 and {r["problem_name"] for r in iris["items"]} == {"iris"}
        assert c.get("/v1/runs", params={"origin": "cli"}).json()["total"] == 3
        assert c.get("/v1/runs", params={"origin": "sweep"}).json()["total"] == 0
        assert c.get("/v1/runs", params={"status": "completed"}).json()["total"] == 3
        seen, offset = [], 0
        while offset is not None:
            p = c.get("/v1/runs", params={"limit": 1, "offset": offset}).json()
            seen += [r["run_id"] for r in p["items"]]
            offset = p["next_offset"]
        assert seen == [r["run_id"] for r in page["items"]]
        problem(c.get("/v1/runs", params={"limit": 0}), 422, "query.limit")
        problem(c.get("/v1/runs", params={"offset": -1}), 422, "query.offset")
        problem(c.get("/v1/runs", params={"status": "bogus"}), 422, "query.status")
        assert c.get("/v1/runs", params={"status": "abandoned"}).json()["total"] == 0
        # an unknown parameter (a typo, a sort it does not have) is named, as on reports
        problem(c.get("/v1/runs", params={"sort": "seed"}), 422, "query.sort")
        problem(c.get("/v1/runs", params={"limt": 1}), 422, "query.limt")
        # an empty filter is no filter, as on the dashboard and the reports routes
        blank = c.get("/v1/runs", params={"problem": "", "origin": "", "status": ""})
        assert blank.json()["total"] == 3, blank.text


def test_run_status_is_documented_with_every_value(server: Server) -> None:
    from aicf_induct.records import RUN_STATUSES

    with server.client() as c:
        doc = c.get("/openapi.json").json()
    said = doc["components"]["schemas"]["RunPublic"]["properties"]["status"]["description"]
    assert all(f"`{s}`" in said for s in RUN_STATUSES), said


def test_one_run_and_its_steps(server: Server) -> None:
    run_id, trained = next(iter(server.runs.items()))
    with server.client() as c:
        run = c.get(f"/v1/runs/{run_id}").json()
        assert run["status"] == trained["status"] == "completed"
        assert run["steps_taken"] == run["logged_steps"] == run["live_steps"] == \
            trained["steps"]
        assert run["config"]["model"] == "mlp:depth=1,width=8"
        assert run["problem_name"] == trained["dataset"] and run["origin"] == "cli"
        full = c.get(f"/v1/runs/{run_id}/steps").json()
        assert full["total"] == trained["steps"] and full["next_offset"] is None
        assert [s["step"] for s in full["items"]] == list(range(trained["steps"]))
        paged, offset = [], 0
        while offset is not None:
            p = c.get(f"/v1/runs/{run_id}/steps", params={"limit": 5, "offset": offset}).json()
            paged += p["items"]
            offset = p["next_offset"]
        assert paged == full["items"]
        problem(c.get("/v1/runs/no-such-run"), 404, "path.run_id")
        problem(c.get("/v1/runs/no-such-run/steps"), 404, "path.run_id")
        # an unknown parameter is named, as on /v1/runs (it was the default page)
        problem(c.get(f"/v1/runs/{run_id}/steps", params={"sort": "x"}), 422, "query.sort")
        problem(c.get(f"/v1/runs/{run_id}/steps", params={"limit": 0}), 422, "query.limit")
    conn = warehouse.connect(server.root)
    losses = [r[0] for r in conn.execute(
        "SELECT loss FROM steps WHERE run_id = ? ORDER BY step", [run_id]).fetchall()]
    assert [s["loss"] for s in full["items"]] == losses


def build_branches(base: Path) -> tuple[Path, str, list[str]]:
    """A warehouse of an `aicf-induct adapt` run of 60 steps with checkpoints, and two
    branches `adapt --fork` started from its final state, to 90 and to 75 steps: (root,
    the parent's run id, the children's, in the order started)."""
    root, ckpt = base / "wh", base / "ckpt"
    adapt = ["adapt", "--dataset", "iris", "--json", "--warehouse", str(root)]
    parent = json.loads(cli(*adapt, "--lr", "0.01", "--steps", "60", "--checkpoint-dir",
                            str(ckpt)))["run_id"]
    children = [json.loads(cli(*adapt, "--fork", str(ckpt), "--steps", steps))["run_id"]
                for steps in ("90", "75")]
    return root, parent, children


def test_a_run_lists_its_branches(tmp_path: Path) -> None:
    """The run detail lists the runs branched from it (origin, status, the step each
    branched at: the parent's last), oldest first, the schema says what each field is; a
    branch names its parent and has none of its own."""
    root, parent, children = build_branches(tmp_path)
    with serve(root) as url, httpx.Client(base_url=url, timeout=30) as c:
        run = c.get(f"/v1/runs/{parent}").json()
        assert run["children"] == [{"run_id": child, "origin": "fork", "status": "completed",
                                    "from_step": 60} for child in children]
        kid = c.get(f"/v1/runs/{children[0]}").json()
        assert kid["parent_run_id"] == parent and kid["children"] == []
        schemas = c.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["RunDetail"]["properties"]["children"]["items"] == \
        {"$ref": "#/components/schemas/ChildRun"}
    assert set(schemas["ChildRun"]["properties"]) == {"run_id", "origin", "status",
                                                      "from_step"}


def test_reports_listed_and_run(server: Server) -> None:
    with server.client() as c:
        listed = {r["name"]: r for r in c.get("/v1/reports").json()}
        assert set(listed) == set(warehouse.reports())
        assert listed["leaderboard"]["params"] == [
            {"name": "problem", "type": "string", "default": None},
            {"name": "top", "type": "integer", "default": 5}]
        for name, info in listed.items():
            r = c.get(info["path"])
            assert r.status_code == 200, (name, r.text)
            assert r.json()["report"] == name
        board = c.get("/v1/reports/leaderboard", params={"problem": "iris", "top": 1}).json()
        assert board["params"] == {"problem": "iris", "top": 1}
        cols = [col["name"] for col in board["columns"]]
        assert len(board["rows"]) == 1 and board["rows"][0][cols.index("problem_name")] == "iris"
        summary = c.get("/v1/reports/run_summary", params={"limit": 2}).json()
        direct = warehouse.with_retry(server.root, lambda conn: warehouse.run_report(
            conn, "run_summary", {"limit": 2}))
        assert [r[0] for r in summary["rows"]] == list(direct["run_id"])
        problem(c.get("/v1/reports/leaderboard", params={"top": -1}), 422, "query.top")
        problem(c.get("/v1/reports/leaderboard", params={"top": "x"}), 422, "query.top")
        problem(c.get("/v1/reports/leaderboard", params={"bogus": 1}), 422, "query.bogus")
        # an empty filter is no filter (as the dashboard and /v1/runs take it)
        blank = c.get("/v1/reports/leaderboard", params={"problem": ""}).json()
        assert blank == c.get("/v1/reports/leaderboard").json() and blank["rows"]
        assert blank["params"]["problem"] is None
        # a report's rows are bounded as other limits are
        problem(c.get("/v1/reports/run_summary", params={"limit": 10**9}), 422, "query.limit")
        problem(c.get("/v1/reports/run_summary", params={"limit": 0}), 422, "query.limit")
        assert c.get("/v1/reports/run_summary", params={"limit": 10_000}).status_code == 200
        body = problem(c.get("/v1/reports/nope"), 404, "path.name")
        assert "leaderboard" in body["detail"]


def test_sql_answers_and_rejects_bad_bodies(server: Server) -> None:
    with server.client() as c:
        r = c.post("/v1/sql", json={"sql": "SELECT count(*) AS n, max(step) AS top FROM steps"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert [col["name"] for col in body["columns"]] == ["n", "top"]
        assert body["rows"][0][0] == sum(x["steps"] for x in server.runs.values())
        assert body["row_count"] == 1
        ts = c.post("/v1/sql", json={"sql": "SELECT started_at FROM runs LIMIT 1"}).json()
        assert ts["rows"][0][0].endswith("+00:00")  # ISO 8601, UTC
        nan = c.post("/v1/sql", json={"sql": "SELECT 'nan'::DOUBLE AS x, 'inf'::DOUBLE"})
        assert nan.json()["rows"] == [[None, None]]
        problem(c.post("/v1/sql", json={}), 422, "body.sql")
        problem(c.post("/v1/sql", json={"sql": ""}), 422, "body.sql")
        problem(c.post("/v1/sql", json={"sql": "SELECT 1", "x": 1}), 422, "body.x")
        # not JSON: a 400 naming the body, as on the routes that read their own bodies
        bad = problem(c.post("/v1/sql", content=b"{not json", headers={
            "content-type": "application/json"}), 400, "body")
        assert bad["type"].endswith(":invalid-body") and "not JSON" in bad["detail"]
        problem(c.post("/v1/sql", json={"sql": "SELECT nope FROM steps"}), 422, "body.sql")
        # `curl -d` without -H labels JSON form-urlencoded: read as JSON all the same
        form = {"content-type": "application/x-www-form-urlencoded"}
        curl = c.post("/v1/sql", content=b'{"sql": "SELECT 1 AS one"}', headers=form)
        assert curl.status_code == 200 and curl.json()["rows"] == [[1]], curl.text
        problem(c.post("/v1/sql", content=b"sql=SELECT+1", headers=form), 400, "body")
        problem(c.post("/v1/sql", content=b'{"sql": 1}', headers={"content-type": "text/plain"}),
                422, "body.sql")


def test_body_limit_is_counted_not_declared(server: Server) -> None:
    big = b'{"sql": "SELECT 1 -- ' + b"x" * 70_000 + b'"}'

    def chunks():  # no Content-Length: the server must count
        for i in range(0, len(big), 4096):
            yield big[i:i + 4096]

    with server.client() as c:
        body = problem(c.post("/v1/sql", content=chunks(),
                              headers={"content-type": "application/json"}), 413)
        assert body["type"].endswith("body-too-large")
        problem(c.post("/v1/sql", content=big, headers={"content-type": "application/json"}),
                413)
        small = b'{"sql": "SELECT 1 -- ' + b"x" * 1000 + b'"}'
        ok = c.post("/v1/sql", content=iter([small[:10], small[10:]]),
                    headers={"content-type": "application/json"})
        assert ok.status_code == 200, ok.text


def test_unknown_paths_and_methods_are_problems(server: Server) -> None:
    with server.client() as c:
        problem(c.get("/v1/nothing-here"), 404)
        problem(c.delete("/v1/runs"), 405)


@pytest.mark.parametrize("sql", ["SELECT * FROM read_text('{root}/_service_keys.json')",
                                 "SELECT * FROM glob('{root}/*')"])
def test_sql_cannot_see_the_key_file(server: Server, sql: str) -> None:
    r = server.client().post("/v1/sql", json={"sql": sql.format(root=server.root.resolve())})
    if r.status_code == 200:  # glob may answer: but never with the key file
        assert "_service_keys" not in r.text
    else:
        problem(r, 422, "body.sql")
