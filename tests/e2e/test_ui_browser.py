"""The console in headless Chromium, served by uvicorn on a loopback port.

A user's path over the shared taxi runs (tests/e2e/conftest.py: a fresh run,
a cached rerun, a trainer-code change, a --no-cache retrain): the runs page, a
run with its graph and a cached node, the evaluation, lineage from the pushed
model to its span, two runs compared; no JavaScript error on any page. And a
category value that is markup shows as text. On every run page walked, the graph
draws exactly the pipeline's nodes (pipeline/definition.py's).

`make screenshots` (UPDATE_SCREENSHOTS=1) runs the same walk over four runs of
`make run`'s own pipeline (the embedded taxi data, the default config, under
runs/screenshots/) and saves each main page to docs/images/ui-<page>.png; and the
Serving page's test (test_serving_page_browser.py) saves ui-serving.png.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ui_store
from browser import console_errors, new_driver
from e2e_support import TaxiRuns, four_runs

from pipeline.config import PROJECT_ROOT
from pipeline.plan import plan_run

SCREENSHOTS = os.environ.get("UPDATE_SCREENSHOTS") == "1"


@contextlib.contextmanager
def serving(run_dir: Path, sampler=None) -> Iterator[str]:
    """uvicorn serving the console over `run_dir` on a free loopback port: its address.
    `sampler`: a `tfxp serve` metrics sampler for the Serving page's charts."""
    import uvicorn

    from metadata.store import location_from
    from tfxp.ui.app import create_app
    from tfxp.ui.browse import StoreBrowser

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(StoreBrowser(location_from(run_dir=str(run_dir))), sampler=sampler)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _screenshot(driver, page: str) -> None:
    if SCREENSHOTS:
        folder = PROJECT_ROOT / "docs" / "images"
        folder.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(folder / f"ui-{page}.png"))


def _open(driver, url: str) -> None:
    driver.get(url)
    errors = console_errors(driver)
    assert not errors, (url, errors)


def _wait(driver, css: str, timeout: float = 30.0):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: d.find_elements(By.CSS_SELECTOR, css))


@pytest.mark.slow  # a real browser
@pytest.mark.timeout(300)
def test_markup_in_data_shows_as_text(tmp_path: Path):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    from serving_log_files import live_traffic, skew_record

    ui_store.write_runs(tmp_path / "metadata.sqlite", 2, category=ui_store.XSS)
    # The serving page: logged requests whose label is markup, and a skew check.
    live_traffic(tmp_path / "data", label=ui_store.XSS)
    skew_record(tmp_path)
    statistics = ui_store.open_sqlite(tmp_path / "metadata.sqlite").get_artifacts_by_type(
        "ExampleStatistics"
    )[0]
    with serving(tmp_path) as base:
        driver = new_driver()
        try:
            for url in (
                f"/artifact/{statistics.id}",
                "/",
                "/datasets",
                "/run?pipeline=taxi&id=run-00000",
                "/serving",
            ):
                _open(driver, base + url)
                if "artifact" in url:
                    _wait(driver, ".chart svg.main-svg")  # plotly drew the category chart
                    assert ui_store.XSS in driver.find_element(By.ID, "statistics").text
                if url == "/serving":
                    assert driver.find_element(By.ID, "skew-state").text == "skew"
                    rows = driver.find_elements(By.CSS_SELECTOR, "tr.traffic-row")
                    assert len(rows) == 2
                    assert rows[0].text.startswith("8 challenger shadow 2 2 2")
                    assert rows[1].text.startswith(f"7 {ui_store.XSS} served 3 4 4")
                with pytest.raises(NoAlertPresentException):
                    driver.switch_to.alert.text  # noqa: B018 - raises when no alert is open
                injected = driver.execute_script(
                    "return document.querySelectorAll('img[src=\"x\"], img[onerror]').length"
                )
                assert injected == 0, url
                assert not driver.execute_script("return window.__xss === true"), url
            assert not console_errors(driver)
        finally:
            driver.quit()


@pytest.mark.slow  # a real browser
@pytest.mark.timeout(300)
def test_datasets_page_shows_a_spans_dvc_origin(tmp_path: Path):
    from selenium.webdriver.common.by import By

    writer = ui_store.write_runs(tmp_path / "metadata.sqlite", 2)
    ui_store.record_dvc_origin(writer.store, tmp_path, 1)
    with serving(tmp_path) as base:
        driver = new_driver()
        try:
            _open(driver, base + "/datasets")
            # Both runs ingested span 1's bytes: each ingestion shows where they came from.
            origins = driver.find_elements(By.CSS_SELECTOR, ".origin-dvc")
            assert len(origins) == 2 and all(o.is_displayed() for o in origins)
            assert {o.text for o in origins} == {
                "dvc /srv/trips-repo data/trips.csv@v1 (commit 0123456789ab, "
                "dvc md5 d9136e783f77f2c82d1fba0987993d9b)"
            }
            header = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "th")]
            assert "origin" in header
            assert not console_errors(driver)
        finally:
            driver.quit()


@pytest.mark.slow  # a real browser
@pytest.mark.timeout(300)
def test_a_regression_evaluation_overlays_candidate_and_baseline(tmp_path: Path):
    """A regression evaluation's plots.json (candidate and baseline): predicted against
    actual with y = x and the residual histogram drew both models' numbers."""
    import json

    from regression_pictures import REGRESSION_PICTURES

    evaluation = tmp_path / "evaluation"
    evaluation.mkdir()
    (evaluation / "plots.json").write_text(json.dumps(REGRESSION_PICTURES))
    store = ui_store.write_runs(tmp_path / "metadata.sqlite", 1, metrics_uri=str(evaluation))
    (art,) = store.store.get_artifacts_by_type("ModelEvaluation")
    models = REGRESSION_PICTURES["slices"]["overall"]["models"]
    with serving(tmp_path) as base:
        driver = new_driver()
        try:
            _open(driver, f"{base}/artifact/{art.id}")
            diagonal, *lines = _drawn(driver, "chart-predicted-actual")
            assert diagonal["x"] == diagonal["y"]
            assert sorted(line["name"] for line in lines) == ["baseline", "candidate"]
            for line in lines:
                assert line["x"] == models[line["name"]]["predicted_actual"]["predicted"]
                assert line["y"] == models[line["name"]]["predicted_actual"]["actual"]
            bars = _drawn(driver, "chart-residuals")
            assert {b["name"]: b["y"] for b in bars} == {
                m: p["residuals"]["count"] for m, p in models.items()
            }
            assert not console_errors(driver)
        finally:
            driver.quit()


@pytest.mark.slow  # four whole pipeline runs (shared) and a real browser
@pytest.mark.timeout(1500)
def test_a_users_path_through_the_console(taxi_runs):
    walk(taxi_runs)


@pytest.mark.slow  # four whole runs of the full taxi pipeline and a real browser
@pytest.mark.timeout(1800)
@pytest.mark.skipif(not SCREENSHOTS, reason="`make screenshots` runs it (UPDATE_SCREENSHOTS=1)")
def test_screenshots_of_make_runs_pipeline():
    """The docs' screenshots: `make run`'s pipeline (default config, embedded taxi data),
    run four times into runs/screenshots/ (made afresh, so only these runs show)."""
    from pipeline.overrides import pipeline_config

    run_dir = PROJECT_ROOT / "runs" / "screenshots"
    shutil.rmtree(run_dir, ignore_errors=True)
    walk(four_runs(pipeline_config("taxi", run_dir=str(run_dir))))


def pipeline_nodes(config) -> set[str]:
    """The node ids pipeline/definition.py builds for `config`."""
    from pipeline.definition import create_pipeline

    return {c.id for c in create_pipeline(plan_run(config)).components}


def graph_nodes(driver) -> set[str]:
    """The node ids a run page's graph draws (each box's first line)."""
    return set(
        driver.execute_script(
            "return Array.from(document.querySelectorAll('svg.graph g.node'))"
            ".map(g => g.querySelector('text.node-title').textContent.trim())"
        )
    )


def _drawn(driver, chart_id: str) -> list[dict]:
    """The traces plotly drew in `chart_id` (its div's `data`), once its SVG is there."""
    _wait(driver, f"#{chart_id} svg.main-svg")
    traces = driver.execute_script(
        "return document.getElementById(arguments[0]).data"
        ".map(t => ({name: t.name, x: t.x, y: t.y, z: t.z, type: t.type}))",
        chart_id,
    )
    assert traces, chart_id
    return traces


def check_evaluation_charts(driver, baseline: bool) -> None:
    """Every chart of the evaluation page drew, with the numbers of the artifact's
    plots.json and slices.json, and each data link serves that file."""
    import json

    from selenium.webdriver.common.by import By

    uri = Path(driver.find_element(By.ID, "uri").text)
    plots = json.loads((uri / "plots.json").read_text())["slices"]["overall"]["models"]
    models = ["candidate", "baseline"] if baseline else [""]
    assert sorted(plots) == sorted(models)
    for chart, xs, ys in (("roc", "fpr", "tpr"), ("pr", "recall", "precision")):
        traces = {t["name"].split(" (")[0]: t for t in _drawn(driver, f"chart-{chart}")}
        for model in models:
            drawn = traces[model or "model"]
            assert "AUC" in drawn["name"]  # the legend's
            assert drawn["x"] == plots[model][chart][xs] and drawn["y"] == plots[model][chart][ys]
    calibration = _drawn(driver, "chart-calibration")
    assert calibration[0]["x"] == [0, 1] and calibration[0]["y"] == [0, 1]  # the diagonal
    for model, trace in zip(models, calibration[1:], strict=True):
        assert trace["x"] == plots[model]["calibration"]["predicted"]
        assert trace["y"] == plots[model]["calibration"]["observed"]
    slices = json.loads((uri / "slices.json").read_text())
    bars = _drawn(driver, "chart-slices")
    metric = slices["rules"]["metric"]
    expected = {
        name: (m.get("candidate") or m.get("") or {}).get(metric)
        for name, m in slices["metrics"].items()
    }
    drawn = {x.rsplit(" (", 1)[0]: y for x, y in zip(bars[0]["x"], bars[0]["y"], strict=True)}
    assert drawn == expected
    assert (len(bars) == 2) == baseline
    for link in driver.find_elements(By.CSS_SELECTOR, "a.data-link"):
        name = link.get_attribute("href").rsplit("/", 1)[1]
        text = driver.execute_script(
            "const r = new XMLHttpRequest(); r.open('GET', arguments[0], false); r.send(null);"
            "return r.responseText;",
            link.get_attribute("href"),
        )
        assert json.loads(text) == json.loads((uri / name).read_text())
    assert not console_errors(driver)


def check_training_curves(driver) -> None:
    """The model page's curves drew, one per TensorBoard tag, train and validation."""
    from selenium.webdriver.common.by import By

    charts = driver.find_elements(By.CSS_SELECTOR, "#training-curves .chart")
    ids = {c.get_attribute("id") for c in charts}
    assert {"chart-curve-loss", "chart-curve-learning_rate"} <= ids, ids
    loss = {t["name"]: t for t in _drawn(driver, "chart-curve-loss")}
    assert set(loss) == {"train", "validation"}
    assert len(loss["train"]["y"]) >= 1 and all(v > 0 for v in loss["train"]["y"])
    # Its data link: the scalars read from the event files, the numbers drawn.
    import json

    from browser import fetched

    href = driver.find_element(By.ID, "data-curve-loss").get_attribute("href")
    scalars = json.loads(fetched(driver, href))
    for run, trace in loss.items():
        assert [v for _, v in scalars[run]["epoch_loss"]] == trace["y"]
    assert not console_errors(driver)


def walk(t: TaxiRuns) -> None:
    """The user's path over four taxi runs on one store."""
    with serving(Path(t.config.run_dir)) as base:
        _walk(base, pipeline_nodes(t.config), *t.run_ids)


def _walk(
    base: str, nodes: set[str], first: str, cached: str, code_changed: str, retrained: str
) -> None:
    driver = new_driver()
    try:
        _walk_runs_and_evaluations(driver, base, nodes, (first, cached, code_changed, retrained))
        _walk_lineage_and_compare(driver, base, nodes, first, cached, code_changed)
    finally:
        driver.quit()


def _open_evaluation(driver) -> None:
    """From a run's page: the graph's Evaluator box, then its ModelEvaluation."""
    from selenium.webdriver.common.by import By

    driver.find_element(
        By.XPATH, "//*[local-name()='a'][.//*[local-name()='text' and text()='Evaluator']]"
    ).click()
    _wait(driver, "#artifacts")
    driver.find_element(By.XPATH, "//tr[td[text()='ModelEvaluation']]//a").click()
    _wait(driver, "#evaluation")


def _walk_runs_and_evaluations(driver, base: str, nodes: set[str], runs_made: tuple) -> None:
    """The runs list, a cached run's graph and evaluation, the retrained run's evaluation
    with its baseline, and its model's training curves."""
    from selenium.webdriver.common.by import By

    first, cached, code_changed, retrained = runs_made
    _open(driver, base + "/")
    runs = [
        r.get_attribute("data-run") for r in driver.find_elements(By.CSS_SELECTOR, "tr.run-row")
    ]
    assert runs == [retrained, code_changed, cached, first], runs
    _screenshot(driver, "runs")

    # A run whose components were all cached: its graph shows them so.
    row = driver.find_element(By.CSS_SELECTOR, f'tr[data-run="{cached}"]')
    row.find_element(By.CSS_SELECTOR, "a.run-link").click()
    _wait(driver, "svg.graph")
    assert not console_errors(driver)
    assert driver.find_elements(By.CSS_SELECTOR, "svg.graph g.state-cached"), "no cached node"
    assert driver.find_element(By.ID, "gate-decision").text in ("PASS", "WARN")
    # The graph is the pipeline's: no node missing, none extra.
    assert graph_nodes(driver) == nodes
    _screenshot(driver, "run")

    _open_evaluation(driver)
    assert "blessed" in driver.find_element(By.ID, "blessing").text.lower()
    assert driver.find_elements(By.CSS_SELECTOR, "#metrics td.num")
    assert not console_errors(driver)
    check_evaluation_charts(driver, baseline=False)

    # The retrained run's evaluation has a baseline: both overlaid on every curve.
    _open(driver, base + f"/run?pipeline=taxi&id={retrained}")
    _wait(driver, "svg.graph")
    _open_evaluation(driver)
    check_evaluation_charts(driver, baseline=True)
    driver.execute_script("document.getElementById('evaluation-charts').scrollIntoView()")
    _screenshot(driver, "evaluation")

    # Its model's page: the training curves from the Trainer's TensorBoard logs.
    driver.find_element(By.ID, "evaluated-model").click()
    _wait(driver, "#model")
    check_training_curves(driver)
    driver.execute_script("document.getElementById('training-curves').scrollIntoView()")
    _screenshot(driver, "model")


def _walk_lineage_and_compare(
    driver, base: str, nodes: set[str], first: str, cached: str, code_changed: str
) -> None:
    """From the pushed model back to its span; two runs compared; the datasets page."""
    from selenium.webdriver.common.by import By

    _open(driver, base + f"/run?pipeline=taxi&id={first}")
    _wait(driver, "svg.graph")
    assert graph_nodes(driver) == nodes
    driver.find_element(By.ID, "model-link").click()
    pushed = driver.find_element(
        By.XPATH, "//section[@id='model']//a[starts-with(text(), 'version')]"
    )
    pushed.click()
    _wait(driver, "#pushed")
    driver.find_element(By.ID, "model-lineage-link").click()
    _wait(driver, "svg.graph g.highlight")
    assert not console_errors(driver)
    _screenshot(driver, "lineage")
    driver.find_element(By.CSS_SELECTOR, "a.span-link").click()
    _wait(driver, "#span-models a")
    assert not console_errors(driver)

    # Compare: the trainer-code change shows as a changed code fingerprint.
    _open(driver, base + f"/compare?pipeline=taxi&a={cached}&b={code_changed}")
    rows = driver.find_elements(By.CSS_SELECTOR, "#diff tr.changed")
    changed = {r.get_attribute("data-section") for r in rows}
    assert "code" in changed and "data" not in changed, changed
    _wait(driver, ".chart svg.main-svg")  # the metrics-over-runs chart drew
    assert not console_errors(driver)
    _screenshot(driver, "compare")

    _open(driver, base + "/datasets")
    assert driver.find_elements(By.CSS_SELECTOR, "section.dataset a[href^='/lineage/model/']")
    _screenshot(driver, "datasets")
