"""Opens an HTML report in headless Chromium (Debian's chromium + chromium-driver) and reads it back.

Installed by `scripts/chromium.sh install` (CI runs it from .ci/run; the test
runs it itself when Chromium is missing and it runs as root). The
browser gets no network at all (every host resolves to nothing), so a page
that needed the internet would show it as a console error here.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import system_packages

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")


@dataclass
class RenderedPage:
    errors: list[str]  # console errors and uncaught script errors
    decision: str
    chart_svgs: int  # plotly charts that drew their SVG
    anomaly_rows: list[list[str]]  # visible cells of the anomalies table


def require_chromium() -> None:
    installed = all(shutil.which(p) for p in (CHROMIUM, CHROMEDRIVER))
    system_packages.ensure_installed(
        installed, "chromium.sh", "headless Chromium (chromium, chromium-driver)"
    )


def new_driver(timeout: float = 60.0):
    """Headless Chromium with its console log kept; offline (only 127.0.0.1 answers)."""
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # tests run as root in CI
        "--disable-gpu",
        "--disable-dev-shm-usage",
        # Offline: no host resolves but 127.0.0.1, where the console's tests serve it.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(timeout)
    return driver


def console_errors(driver) -> list[str]:
    """Console errors and uncaught script errors since the last call."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if entry.get("level") in ("SEVERE", "ERROR")
    ]


def fetched(driver, href: str) -> str:
    """The text the page's own origin gets for `href` (a chart's data link), as the
    user's click would: requested from inside the browser."""
    return driver.execute_script(
        "const r = new XMLHttpRequest(); r.open('GET', arguments[0], false);"
        "r.send(null); return r.responseText;",
        href,
    )


def open_report(path: Path, timeout: float = 60.0) -> RenderedPage:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = new_driver(timeout)
    try:
        driver.get(path.resolve().as_uri())
        expected = len(driver.find_elements(By.CSS_SELECTOR, "#charts .chart"))
        WebDriverWait(driver, timeout).until(
            lambda drv: (
                len(drv.find_elements(By.CSS_SELECTOR, "#charts .chart svg.main-svg")) >= expected
            )
        )
        charts = driver.find_elements(By.CSS_SELECTOR, "#charts .chart")
        drawn = sum(
            1
            for c in charts
            if c.find_elements(By.CSS_SELECTOR, "svg.main-svg") and c.is_displayed()
        )
        rows = [
            [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
            for row in driver.find_elements(By.CSS_SELECTOR, "#anomalies tr.anomaly-row")
            if row.is_displayed()
        ]
        decision = driver.find_element(By.ID, "decision").text
        return RenderedPage(console_errors(driver), decision, drawn, rows)
    finally:
        driver.quit()


@dataclass
class RenderedCard:
    errors: list[str]
    verdict: str
    chart_svgs: int  # the card's SVG pictures shown
    slice_rows: dict[str, list[str]]  # slice name -> visible cells of its metrics row
    headers: list[str]  # the per-slice table's column names
    serving_check: str  # the serving check table's text ("" when none)


def open_model_card(path: Path, timeout: float = 60.0) -> RenderedCard:
    """A model card (components/release/model_card/card.py) as the browser shows it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = new_driver(timeout)
    try:
        driver.get(path.resolve().as_uri())
        WebDriverWait(driver, timeout).until(
            lambda drv: drv.find_elements(By.CSS_SELECTOR, "#slice-chart svg.card-chart")
        )
        # The card's pictures are static SVG (no script): each one that is shown.
        drawn = sum(
            1
            for c in driver.find_elements(By.CSS_SELECTOR, ".chart")
            if c.find_elements(By.CSS_SELECTOR, "svg.card-chart") and c.is_displayed()
        )
        table = driver.find_element(By.ID, "slice-metrics")
        headers = [th.text for th in table.find_elements(By.TAG_NAME, "th")]
        rows = {}
        for row in table.find_elements(By.CSS_SELECTOR, "tr.slice-row"):
            if row.is_displayed():
                cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
                rows[cells[0]] = cells
        return RenderedCard(
            errors=console_errors(driver),
            verdict=driver.find_element(By.ID, "verdict").text,
            chart_svgs=drawn,
            slice_rows=rows,
            headers=headers,
            serving_check=" ".join(
                t.text for t in driver.find_elements(By.ID, "serving-check") if t.is_displayed()
            ),
        )
    finally:
        driver.quit()
