"""Regenerate the README's screenshots of the dashboard (docs/img/run_page.png and
docs/img/correlations.png): a warehouse of real runs built as the dashboard tests build it
(tests/dashboard_warehouse.py: an adaptive run with rewrites and a rollback, a tiny corpus,
`induce fit`), `aicf-induct serve` on it, headless chromium (`make browser` installs it).

    PYTHONPATH=. .venv/bin/python docs/screenshots.py [--warehouse DIR --run RUN_ID]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "docs" / "img"
WIDTH = 1280
FIRST = "document.querySelector('.js-plotly-plot')"  # the page's first chart


def shoot(url: str, shots: dict[str, str]) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    opts = Options()
    opts.binary_location = shutil.which("chromium") or ""  # Debian's, not a download
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                f"--window-size={WIDTH},900", "--hide-scrollbars"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts, service=Service(shutil.which("chromedriver")))
    try:
        for name, path in shots.items():
            driver.get(url + path)
            WebDriverWait(driver, 20).until(lambda d: d.execute_script(
                f"const g = {FIRST}; return g !== null && g._fullLayout !== undefined"))
            # the page down to the end of its first chart (as laid out), not the tables below
            height = driver.execute_script(
                f"const g = {FIRST}; return g.getBoundingClientRect().top + window.scrollY"
                " + g._fullLayout.height + 16")
            driver.set_window_size(WIDTH, int(height))
            chrome = int(height) - driver.execute_script("return window.innerHeight")
            driver.set_window_size(WIDTH, int(height) + chrome)  # the window's own bars
            driver.save_screenshot(str(OUT / f"{name}.png"))
            print(f"wrote {OUT / name}.png")
    finally:
        driver.quit()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", type=Path, help="serve this warehouse (default: build one)")
    ap.add_argument("--run", help="the run page to show (default: the built adaptive run)")
    args = ap.parse_args()
    from tests.api.conftest import serve
    from tests.dashboard_warehouse import build

    with tempfile.TemporaryDirectory() as tmp:
        if args.warehouse is None:
            built = build(Path(tmp))
            root, run_id = built.root, args.run or built.adapt["run_id"]
        else:
            root, run_id = args.warehouse, args.run
            if run_id is None:
                ap.error("--warehouse needs --run RUN_ID")
        with serve(root) as url:
            shoot(url, {"run_page": f"/runs/{run_id}", "correlations": "/correlations"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
