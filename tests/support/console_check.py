"""One check of the console (`tfxp ui`) over a real store, for the tests that already
ran a pipeline (taxi, digits, a `tfxp init` dataset, Airflow, MariaDB): every run
listed with its status, every run page with its graph, every execution and artifact
page it links to, each model's lineage, the datasets page; no error page."""

from __future__ import annotations

import re

from starlette.testclient import TestClient


def _links(html: str, prefix: str) -> list[str]:
    found = re.findall(r'href="(' + re.escape(prefix) + r'[^"]*)"', html)
    return sorted({h.replace("&amp;", "&") for h in found})


def check_console(location, datasets: dict[str, str] | None = None) -> dict[str, str]:
    """Walks the console over `location` (a StoreLocation); returns run id -> the status
    the runs page shows (complete, failed, blocked, running). `datasets`: pipeline ->
    dataset name, for a dataset the console cannot find by itself."""
    from tfxp.ui.app import create_app
    from tfxp.ui.browse import StoreBrowser

    browser = StoreBrowser(location)
    browser.datasets.update(datasets or {})
    client = TestClient(create_app(browser), base_url="http://127.0.0.1")
    seen: dict[str, str] = {}

    def get(url: str) -> str:
        if url in seen:
            return seen[url]
        answer = client.get(url)
        assert answer.status_code == 200, (url, answer.status_code, answer.text[-2000:])
        assert "Traceback" not in answer.text, url
        seen[url] = answer.text
        return answer.text

    runs = get("/")
    shown = {
        run: status
        for status, run in re.findall(r'class="run-row status-(\w+)" data-run="([^"]+)"', runs)
    }
    for url in _links(runs, "/run?"):
        page = get(url)
        assert "<svg" in page and "state-" in page, url
        for link in _links(page, "/execution/") + _links(page, "/artifact/"):
            get(link)  # pages, and the gate's report (an artifact's file or a blocked run's)
        for link in _links(page, "/lineage/"):
            get(link)
    datasets_page = get("/datasets")
    for pipeline in browser.pipelines():
        assert f'data-pipeline="{pipeline}"' in datasets_page
    return shown
