"""The dashboard in a real headless browser: Debian's chromium driven by selenium, against
`aicf-induct serve` (a live uvicorn) on a warehouse of real runs (tests/dashboard_warehouse.py).
Each page loads without console errors and draws its charts with data points; the proposal
form round-trips an uploaded CSV; each page's screenshot is saved under the test's tmp_path.

`make test` installs chromium and chromedriver (see the Makefile)."""

from __future__ import annotations

import csv
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import serve

CHROMEDRIVER, CHROMIUM = shutil.which("chromedriver"), shutil.which("chromium")
WAIT_S = 15


@pytest.fixture(scope="module")
def site(dashboard_warehouse, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cache = tmp_path_factory.mktemp("cache")  # the fitted proposer's cache, not ~/.cache
    with serve(dashboard_warehouse.root, env={"AICF_SERVICE_PACK": str(dashboard_warehouse.pack),
                                              "AICF_CACHE_DIR": str(cache)}) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    if CHROMEDRIVER is None or CHROMIUM is None:
        pytest.fail("chromium or chromedriver not found: `make test` installs them (apt-get "
                    "install chromium chromium-driver)")
    opts = Options()
    opts.binary_location = CHROMIUM  # Debian's, not a download
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # chromium keeps its profile and, with /dev/shm off, its shared memory in TMPDIR, and
    # leaves empty org.chromium.* folders there: the test's own folder, not the machine's /tmp
    scratch = tmp_path_factory.mktemp("chromium")
    opts.add_argument(f"--user-data-dir={scratch / 'profile'}")
    env = {**os.environ, "TMPDIR": str(scratch)}
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER, env=env))
    try:
        yield driver
    finally:
        driver.quit()


# the points of each drawn chart's traces (x, or z for a heatmap), by chart id
POINTS_JS = """
return Array.from(document.querySelectorAll('.js-plotly-plot')).map(g => [g.id,
    g.data.map(t => Array.from(t.x || t.z || []).filter(v => v !== null).length)]);"""


def load(driver: Any, url: str, charts: int, shot: Path) -> dict[str, list[int]]:
    """Open `url` and `check` it."""
    driver.get_log("browser")  # drop what an earlier page left
    driver.get(url)
    return check(driver, charts, shot)


def check(driver: Any, charts: int, shot: Path) -> dict[str, list[int]]:
    """Wait for `charts` drawn charts on the page shown, check the console, save a
    screenshot; the points per trace of each chart."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, WAIT_S).until(
        lambda d: len(d.execute_script(POINTS_JS)) >= charts)
    drawn = dict(driver.execute_script(POINTS_JS))
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert not errors, errors
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1400, min(max(1000, height), 6000))
    driver.save_screenshot(str(shot))
    driver.set_window_size(1400, 1000)
    assert shot.stat().st_size > 10_000
    assert len(drawn) == charts, drawn
    return drawn


def test_runs_list_filters_sorts_and_pages(site: str, browser: Any, tmp_path: Path,
                                           dashboard_warehouse) -> None:
    from selenium.webdriver.common.by import By

    load(browser, site + "/", 0, tmp_path / "runs.png")
    assert "33 runs" in browser.find_element(By.ID, "runs-count").text
    load(browser, site + "/?origin=adapt", 0, tmp_path / "runs_adapt.png")
    rows = browser.find_elements(By.CSS_SELECTOR, "#runs tr td:first-child a")
    assert [r.get_attribute("href").rsplit("/", 1)[1] for r in rows] == [
        dashboard_warehouse.adapt["run_id"]]
    load(browser, site + "/?sort=seed&order=asc&per_page=10&page=4", 0, tmp_path / "p4.png")
    assert "page 4 of 4" in browser.find_element(By.ID, "runs-count").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#runs tr")) == 1 + 3
    browser.find_element(By.ID, "prev").click()
    assert "page 3 of 4" in browser.find_element(By.ID, "runs-count").text
    seeds = [int(td.text) for td in browser.find_elements(By.CSS_SELECTOR,
                                                          "#runs tr td:nth-child(5)")]
    assert seeds == sorted(seeds)


def test_runs_list_compares_the_runs_ticked(site: str, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    load(browser, site + "/?problem=iris", 0, tmp_path / "pick.png")
    boxes = browser.find_elements(By.CSS_SELECTOR, "#runs input[name=run]")[:2]
    ids = [b.get_attribute("value") for b in boxes]
    for box in boxes:
        box.click()
    browser.find_element(By.CSS_SELECTOR, "#compare button").click()
    drawn = check(browser, 2, tmp_path / "compare.png")  # losses and the shared accuracy
    assert browser.current_url == f"{site}/compare?run={ids[0]}&run={ids[1]}"
    assert len(drawn["chart-losses"]) == 4 and all(drawn["chart-losses"]), drawn
    assert len(drawn["chart-score"]) == 2 and all(drawn["chart-score"]), drawn


def test_run_page_draws_curves_markers_and_the_ir(site: str, browser: Any, tmp_path: Path,
                                                 dashboard_warehouse) -> None:
    adapt = dashboard_warehouse.adapt
    drawn = load(browser, f"{site}/runs/{adapt['run_id']}", 3, tmp_path / "run.png")
    assert set(drawn) == {"chart-curves", "chart-dynamics", "chart-ir"}
    # the path the run took, each of its 320 steps once: not the 40 rows of the branches
    # the rollbacks dropped (no downsampling this short)
    assert drawn["chart-curves"][0] == 320
    dropped = browser.execute_script(
        "return document.getElementById('chart-curves').data.filter(t => t.name === "
        "'dropped branch (step)').map(t => t.x.filter(v => v !== null).length)")
    assert dropped == [40]  # the 2 × 20 steps the rollbacks dropped, drawn apart
    traces = browser.execute_script(
        "return document.getElementById('chart-curves').data.map(t => "
        "[t.name, Array.from(t.x || []), t.hovertext || null])")
    marks = {name: (x, hover) for name, x, hover in traces if hover}
    assert {"rewrite", "rollback"} <= set(marks)
    assert len(marks["rollback"][0]) == adapt["rollbacks"]
    # the hover says what was decided and on which evidence
    assert any("reason:" in h and "val_loss:" in h and "→" in h for h in marks["rewrite"][1])
    ir = browser.execute_script(
        "const g = document.getElementById('chart-ir'); return [g.data.length, "
        "g.layout.updatemenus[0].buttons.length]")
    assert ir[1] >= 1 + adapt["rewrites"] and ir[0] == 2 * ir[1]


@pytest.mark.parametrize("path, charts", [
    ("/leaderboard?problem=iris", 1), ("/patterns?pattern=depth", 1), ("/correlations", 1),
    ("/rules", 1)])
def test_report_pages_draw_their_charts(site: str, browser: Any, tmp_path: Path, path: str,
                                        charts: int) -> None:
    drawn = load(browser, site + path, charts, tmp_path / "page.png")
    assert all(sum(points) > 0 for points in drawn.values()), drawn


def test_proposal_form_round_trips_an_uploaded_csv(site: str, browser: Any,
                                                   tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    data = tmp_path / "my_table.csv"
    with data.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["a", "b", "label"])
        for i in range(90):
            w.writerow([i % 7, (i * 13) % 11, "yes" if (i % 7) > 3 else "no"])
    load(browser, site + "/propose", 0, tmp_path / "form.png")
    browser.find_element(By.NAME, "file").send_keys(str(data))
    browser.find_element(By.NAME, "target").send_keys("label")
    top_k = browser.find_element(By.NAME, "top_k")
    top_k.clear()
    top_k.send_keys("3")
    browser.find_element(By.CSS_SELECTOR, "#propose button").click()
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.ID, "candidates"))
    drawn = check(browser, 1, tmp_path / "proposal.png")
    assert drawn["chart-proposal"] == [3]
    title = browser.find_element(By.ID, "result-title").text
    assert title.startswith("my_table.csv (uploaded): classification, 90 rows")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#candidates tr")) == 1 + 3
    assert browser.find_elements(By.CSS_SELECTOR, "#neighbors tr td")


def test_pages_fetch_nothing_from_elsewhere(site: str, browser: Any, tmp_path: Path,
                                            dashboard_warehouse) -> None:
    """Offline: every script, style and image comes from this server; plotly.js is the
    installed plotly package's own file."""
    import hashlib

    import httpx

    from api.pages.render import plotly_js_path

    load(browser, f"{site}/runs/{dashboard_warehouse.adapt['run_id']}", 3,
         tmp_path / "run.png")
    sources = browser.execute_script(
        "return Array.from(document.querySelectorAll('script[src], link[href], img[src]'))"
        ".map(e => e.getAttribute('src') || e.getAttribute('href'))")
    assert sources and all(s.startswith(("/", "data:")) for s in sources), sources
    # and none leads off the machine: plotly.js draws a "share to Plotly Cloud" button on
    # every chart's toolbar unless told not to, and no link of the page goes elsewhere
    browser.execute_script("document.querySelectorAll('.js-plotly-plot').forEach("
                           "g => g.dispatchEvent(new MouseEvent('mouseover')))")
    buttons = browser.execute_script(
        "return Array.from(document.querySelectorAll('.modebar-btn'))"
        ".map(b => b.getAttribute('data-title'))")
    assert "Zoom" in buttons and "Share chart..." not in buttons, buttons
    links = browser.execute_script(
        "return Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    assert all(a.startswith(site) for a in links), [a for a in links if not a.startswith(site)]
    served = httpx.get(site + "/assets/plotly.min.js", timeout=30)
    assert served.headers["content-type"].startswith("text/javascript")
    assert hashlib.sha256(served.content).digest() == hashlib.sha256(
        plotly_js_path().read_bytes()).digest()


def test_a_long_problem_name_does_not_widen_the_runs_list(browser: Any, tmp_path: Path
                                                          ) -> None:
    """A run of a problem with a 218-character name (a `file:` CSV) stretched the page to
    2,745 px at 1,400: its cell and the problem menu now cut it with an ellipsis."""
    from selenium.webdriver.common.by import By

    from aicf_induct.records import ProblemRecord, RunEndRecord, RunStartRecord, StepRecord
    from api.app import create_app
    from api.settings import Settings
    from tests.api.conftest import serve_in_thread
    from tests.api.test_dashboard_pages import LONG_NAME
    from warehouse import WarehouseRecorder

    root = tmp_path / "wh"
    rec = WarehouseRecorder(root)
    p = ProblemRecord("p-long", LONG_NAME, "file", "classification", 100, 4, 2, "y", {})
    rec.problem(p)
    rec.run_start(RunStartRecord("r", p.problem_id, p.name, p.task, {}, 0, "cpu", {}, "test"))
    rec.step(StepRecord("r", 0, 0, 0.7, 0.5, 0.01, 0.1, 1e-3, 16))
    rec.run_end(RunEndRecord("r", "completed", 1, 0.1))
    rec.close()
    with serve_in_thread(create_app(Settings(warehouse=root))) as c:
        load(browser, f"{c.base_url}/", 0, tmp_path / "long_name.png")
        width = browser.execute_script("return document.documentElement.scrollWidth")
        assert width <= 1400, width
        menu = browser.find_element(By.NAME, "problem")
        assert menu.size["width"] < 600, menu.size
        cell = browser.find_element(By.CSS_SELECTOR, "#runs .clip")
        assert cell.get_attribute("title") == LONG_NAME and cell.size["width"] < 600
