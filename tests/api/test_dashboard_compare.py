"""The compare page (`/compare?run=...`) over HTTP, on a real uvicorn with the warehouse of real
runs (tests/dashboard_warehouse.py) and a run `adapt --fork` branched twice: its charts hold
each run's numbers as the warehouse's views hold them, its table each run's facts; what it
answers to bad input; the runs list's form and the run page's links that lead to it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

import warehouse
from api.app import create_app
from api.pages.compare import compare_url
from api.settings import Settings
from tests.api.conftest import serve_in_thread


@pytest.fixture(scope="module")
def client(dashboard_warehouse) -> Iterator[httpx.Client]:
    with serve_in_thread(create_app(Settings(warehouse=dashboard_warehouse.root))) as c:
        yield c


@pytest.fixture(scope="module")
def conn(dashboard_warehouse) -> duckdb.DuckDBPyConnection:
    return warehouse.connect(dashboard_warehouse.root)


@pytest.fixture(scope="module")
def branches(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """A run `adapt --fork` branched twice: (root, the parent's id, its children's)."""
    from tests.api.test_service import build_branches

    return build_branches(tmp_path_factory.mktemp("branches"))


def _ids(conn: duckdb.DuckDBPyConnection, problem: str, n: int) -> list[str]:
    rows = conn.execute("SELECT run_id FROM runs WHERE problem_name = ? AND origin = 'sweep' "
                        "ORDER BY run_id LIMIT ?", [problem, n]).fetchall()
    return [r for r, in rows]


def _query(run_ids: list[str]) -> list[tuple[str, str]]:
    return [("run", r) for r in run_ids]


def figure(html: str, div_id: str) -> dict[str, Any]:
    """The figure (data and layout) the page hands plotly.js for the chart `div_id`."""
    m = re.search(r'Plotly\.newPlot\(\s*"' + re.escape(div_id) + r'",\s*', html)
    assert m, f"no chart {div_id}"
    decoder = json.JSONDecoder()
    data, end = decoder.raw_decode(html, m.end())
    layout, _ = decoder.raw_decode(html, html.index("{", end))
    return {"data": data, "layout": layout}


def _series(conn: duckdb.DuckDBPyConnection, sql: str, run_id: str) -> tuple[list, list]:
    rows = conn.execute(sql, [run_id]).fetchall()
    return [int(s) for s, _ in rows], [v for _, v in rows]


def _steps(conn: duckdb.DuckDBPyConnection, run_id: str) -> tuple[list, list]:
    """The training loss on the path the run took (the `live_steps` view), in step order."""
    return _series(conn, "SELECT step, loss FROM live_steps WHERE run_id = ? ORDER BY step",
                   run_id)


def _evals(conn: duckdb.DuckDBPyConnection, run_id: str, metric: str) -> tuple[list, list]:
    """The run's validation `metric` per evaluation on its path (`live_results`)."""
    return _series(conn, "SELECT step, value FROM live_results WHERE run_id = ? AND NOT final "
                         f"AND split = 'val' AND metric = '{metric}' ORDER BY step", run_id)


def table(html: str) -> tuple[list[str], list[list[str]]]:
    """The compare table's header and rows, each cell's text (tags stripped)."""
    m = re.search(r'<table id="compare-runs">(.*?)</table>', html, re.S)
    assert m, html[-3000:]
    rows = [[unescape(re.sub(r"<[^>]+>", "", c)).replace("■", "").strip()
             for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", tr, re.S)]
            for tr in re.findall(r"<tr>(.*?)</tr>", m.group(1), re.S)]
    return rows[0], rows[1:]


def test_the_loss_chart_overlays_each_run_s_path_and_evaluations(
        client: httpx.Client, conn: duckdb.DuckDBPyConnection, dashboard_warehouse) -> None:
    """The adaptive run (rolled back twice: its path, not the dropped branches) and two sweep
    runs of iris: each run's training loss per step and validation loss per evaluation, as
    the warehouse's `live_steps` and `live_results` hold them, one colour per run (the
    table's swatch), validation dashed; log scale; the accuracy they share below."""
    ids = [dashboard_warehouse.adapt["run_id"], *_ids(conn, "iris", 2)]
    r = client.get("/compare", params=_query(ids))
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    assert 'id="problems-note"' not in r.text and 'id="score-note"' not in r.text
    losses = figure(r.text, "chart-losses")
    traces = {t["name"]: t for t in losses["data"]}
    assert len(traces) == len(losses["data"]) == 2 * len(ids)
    assert losses["layout"]["yaxis"]["type"] == "log"
    assert losses["layout"]["xaxis"]["title"]["text"] == "step"
    swatches = re.findall(r'<span style="color: (#[0-9a-f]{6})">■</span>', r.text)
    assert len(set(swatches)) == len(ids)
    for run_id, colour in zip(ids, swatches, strict=True):
        train, val = traces[f"{run_id[:12]} train loss"], traces[f"{run_id[:12]} val loss"]
        steps, loss = _steps(conn, run_id)
        assert len(steps) <= 2000  # under the downsampling threshold: every step once
        assert (train["x"], train["y"]) == (steps, pytest.approx(loss))
        x, y = _evals(conn, run_id, "loss")
        assert (val["x"], val["y"]) == (x, pytest.approx(y))
        assert len(val["x"]) > 1
        assert train["line"]["color"] == val["line"]["color"] == colour
        assert val["line"]["dash"] == "dash" and "dash" not in train["line"]
    adapt = dashboard_warehouse.adapt["run_id"]
    assert len(traces[f"{adapt[:12]} train loss"]["x"]) == 320  # not the 40 dropped rows
    score = {t["name"]: t for t in figure(r.text, "chart-score")["data"]}
    assert len(score) == len(ids)
    for run_id, colour in zip(ids, swatches, strict=True):
        trace = score[f"{run_id[:12]} val accuracy"]
        x, y = _evals(conn, run_id, "accuracy")
        assert (trace["x"], trace["y"]) == (x, pytest.approx(y)) and len(x) > 1
        assert trace["line"]["color"] == colour


def test_the_table_holds_each_run_s_facts(client: httpx.Client, conn: duckdb.DuckDBPyConnection,
                                          dashboard_warehouse) -> None:
    """Per run: its id linked, problem, origin, status, parent, steps on the path taken, wall
    time, rewrites and rollbacks counted from its events, each final val and test metric."""
    adapt = dashboard_warehouse.adapt
    ids = [adapt["run_id"], *_ids(conn, "iris", 1)]
    html = client.get("/compare", params=_query(ids)).text
    header, rows = table(html)
    finals = ["val accuracy", "val loss", "test accuracy", "test loss"]
    assert header == ["run", "problem", "origin", "status", "parent", "steps on the path",
                      "wall time", "rewrites", "rollbacks", *finals]
    for run_id, row in zip(ids, rows, strict=True):
        assert f'<a href="/runs/{run_id}"><code>{run_id[:12]}</code></a>' in html
        problem, origin, status, parent, wall = conn.execute(
            "SELECT problem_name, origin, status, parent_run_id, wall_time_s FROM runs "
            "WHERE run_id = ?", [run_id]).fetchone()
        live, rewrites, rollbacks = conn.execute(
            "SELECT (SELECT count(*) FROM live_steps WHERE run_id = $r), "
            "(SELECT count(*) FROM events WHERE run_id = $r AND kind = 'rewrite'), "
            "(SELECT count(*) FROM events WHERE run_id = $r AND kind = 'rollback' "
            "AND name <> 'give_up')", {"r": run_id}).fetchone()
        final = dict(conn.execute("SELECT split || ' ' || metric, value FROM results WHERE "
                                  "run_id = ? AND final", [run_id]).fetchall())
        assert parent is None
        assert row == [run_id[:12], problem, origin, status, "–", str(live), f"{wall:.3g} s",
                       str(rewrites), str(rollbacks), *(f"{final[c]:.4g}" for c in finals)]
    # the adaptive run: its rewrites and rollbacks, as `adapt` counted them
    assert rows[0][7:9] == [str(adapt["rewrites"]), str(adapt["rollbacks"])] == ["5", "2"]
    assert rows[0][5] == "320" and rows[1][7:9] == ["0", "0"]


def test_runs_of_different_problems_are_compared_with_a_note(
        client: httpx.Client, conn: duckdb.DuckDBPyConnection) -> None:
    """iris (accuracy) beside diabetes (r2): the page says their losses are not comparable,
    draws no score chart and says why, and leaves blank the final metrics a run lacks."""
    ids = [*_ids(conn, "iris", 1), *_ids(conn, "diabetes", 1)]
    r = client.get("/compare", params=_query(ids))
    assert r.status_code == 200
    note = re.search(r'<p class="muted" id="problems-note">(.*?)</p>', r.text)
    assert note and unescape(note.group(1)) == (
        "These runs are of different problems (diabetes, iris): losses of different problems "
        "are not comparable.")
    assert r.text.index('id="problems-note"') < r.text.index('id="chart-losses"')
    assert 'id="chart-score"' not in r.text
    why = re.search(r'<p class="muted" id="score-note">(.*?)</p>', r.text)
    assert why and why.group(1) == ("No score chart: the runs share no validation score "
                                    f"metric ({ids[0][:12]}: accuracy, {ids[1][:12]}: r2).")
    assert len(figure(r.text, "chart-losses")["data"]) == 4
    header, rows = table(r.text)
    cols = header[9:]
    assert cols == ["val accuracy", "val loss", "val r2", "test accuracy", "test loss",
                    "test r2"]
    iris, diabetes = (dict(zip(cols, row[9:], strict=True)) for row in rows)
    assert iris["val r2"] == iris["test r2"] == "–" != iris["val accuracy"]
    assert diabetes["val accuracy"] == diabetes["test accuracy"] == "–" != diabetes["val r2"]


@pytest.mark.parametrize("runs, status, message", [
    ([], 422, "run: compare 2 to 8 runs (0 given)"),
    (["R0"], 422, "run: compare 2 to 8 runs (1 given)"),
    ([f"R{i}" for i in range(9)], 422, "run: compare 2 to 8 runs (9 given)"),
    (["R0", "R1", "R0"], 422, "run: 'R0' given more than once"),
    (["R0", "no-such-run"], 404, "no run 'no-such-run'"),
    (["nope", "R0", "nor-this"], 404, "no run 'nope', 'nor-this'"),
])
def test_bad_run_lists_answer_a_page_naming_what_is_wrong(
        client: httpx.Client, conn: duckdb.DuckDBPyConnection, runs: list[str], status: int,
        message: str) -> None:
    real = _ids(conn, "iris", 9)
    named = {f"R{i}": r for i, r in enumerate(real)}
    r = client.get("/compare", params=_query([named.get(x, x) for x in runs]))
    assert r.status_code == status and "text/html" in r.headers["content-type"]
    shown = re.search(r'<div class="box error">(.*?)</div>', r.text)
    expected = message
    for k, v in named.items():
        expected = expected.replace(f"'{k}'", f"'{v}'")
    assert shown and unescape(shown.group(1)) == expected


def test_the_runs_list_s_checkboxes_lead_to_the_compare_page(
        client: httpx.Client, conn: duckdb.DuckDBPyConnection) -> None:
    """Each row has a checkbox `run` (its run id) in the GET form to /compare, outside the
    filter form (forms cannot nest: `form="compare"`), which still filters; the form's
    query, two boxes ticked, is the page of those two runs."""
    html = client.get("/", params={"per_page": 10}).text
    form = re.search(r'<form id="compare" method="get" action="(/compare)">(.*?)</form>', html,
                     re.S)
    assert form and "compare selected" in form.group(2)
    boxes = re.findall(r'<input type="checkbox" name="run" value="([0-9a-f]+)" '
                       r'form="compare"', html)
    listed = re.findall(r'<a href="/runs/([0-9a-f]+)"><code>', html)
    assert boxes == listed and len(boxes) == 10
    filters = re.search(r'<form class="filters".*?</form>', html, re.S)
    assert filters and 'name="run"' not in filters.group(0)
    assert client.get("/", params={"origin": "adapt"}).text.count('type="checkbox"') == 1
    r = client.get(form.group(1), params=_query(boxes[:2]))
    assert r.status_code == 200 and [row[0] for row in table(r.text)[1]] == [
        b[:12] for b in boxes[:2]]


def _link(html: str, link_id: str) -> str | None:
    m = re.search(rf'<a id="{link_id}" href="([^"]+)">', html)
    return unescape(m.group(1)) if m else None


def test_the_run_page_links_its_parent_and_branches_to_compare(
        branches: tuple[Path, str, list[str]], client: httpx.Client,
        dashboard_warehouse) -> None:
    """A forked run's page: "compare with branches" (it and its branches, up to 7); a
    branch's: "compare with parent"; each leads to the page of those runs, whose table links
    each branch's parent. A run with neither has no such links."""
    root, parent, children = branches
    with serve_in_thread(create_app(Settings(warehouse=root))) as c:
        parent_page, kid_page = (c.get(f"/runs/{r}").text for r in (parent, children[0]))
        with_branches = _link(parent_page, "compare-branches")
        with_parent = _link(kid_page, "compare-parent")
        assert with_branches == compare_url([parent, *children])
        assert with_parent == compare_url([parent, children[0]])
        assert _link(parent_page, "compare-parent") is None
        assert _link(kid_page, "compare-branches") is None
        for url, ids in ((with_branches, [parent, *children]),
                         (with_parent, [parent, children[0]])):
            r = c.get(url)
            assert r.status_code == 200
            rows = table(r.text)[1]
            assert [row[0] for row in rows] == [i[:12] for i in ids]
            assert [row[4] for row in rows] == ["–"] + [parent[:12]] * (len(ids) - 1)
            assert r.text.count(f'<a href="/runs/{parent}"><code>') == len(ids)
    plain = client.get(f"/runs/{dashboard_warehouse.adapt['run_id']}").text
    assert 'id="compare-links"' not in plain
    # more branches than a page compares: the run and its first 7
    many = [f"c{i}" for i in range(10)]
    assert compare_url(["p", *many]) == "/compare?" + "&".join(
        f"run={r}" for r in ["p", *many[:7]])
