"""The console's Serving page in headless Chromium, against a real `tfxp serve` on
loopback under a few hundred requests with a hot swap in between (the console
sampling its metrics). `make screenshots` saves the page as docs/images/ui-serving.png.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from browser import console_errors, new_driver
from test_ui_browser import _open, _screenshot, _wait, serving

SENT_PER_PHASE = 150  # one-example :predict requests before and after the swap


def _own_serving_run(serving_run, tmp_path: Path):
    """The shared serving run's folder and store, copied: the swap here moves an alias."""
    config = serving_run.config.replace(run_dir=str(tmp_path / "run"))
    shutil.copytree(serving_run.config.serving_dir, config.serving_dir, symlinks=True)
    shutil.copy(serving_run.config.metadata_path, config.metadata_path)
    return config


def _wait_until(condition, what: str, tries: int = 1200) -> None:
    for _ in range(tries):  # a hang guard, not a time limit
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def _predictions_around_a_swap(config, server, example: str, old: str) -> list:
    """SENT_PER_PHASE :predict requests, champion moved back to version `old` (the
    registry's own promote), as many again; the answers."""
    import httpx

    from metadata.lineage import Lineage
    from metadata.store import location_from, open_store
    from tfxp.models import registry

    repository = server.server.repository
    body = {"instances": [example]}
    answered = []
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for _ in range(SENT_PER_PHASE):
            answered.append(client.post("/v1/models/taxi:predict", json=body))
        lineage = Lineage(
            open_store(location_from(run_dir=config.local_dir), writable=True),
            config.pipeline_name,
        )
        registry.promote(config, lineage, old, why="the console's swap line")
        _wait_until(lambda: repository.state.labels.get("champion") == int(old), "the swap")
        for _ in range(SENT_PER_PHASE):
            answered.append(client.post("/v1/models/taxi:predict", json=body))
    return answered


def _serving_page_drawn(base: str) -> tuple[list, str, str]:
    """The Serving page in Chromium: what each chart drew (kind, SVGs, traces' meta,
    customdata and y, shapes, annotations' hover texts), the sources note, the swap list."""
    driver = new_driver()
    try:
        _open(driver, base + "/serving")
        _wait(driver, ".serving-charts .chart svg.main-svg")
        drawn = driver.execute_script(
            """return Array.from(document.querySelectorAll('.serving-charts .chart'))
              .map(function (gd) { return {
                kind: gd.dataset.kind, svg: gd.querySelectorAll('svg.main-svg').length,
                data: (gd.data || []).map(function (t) { return {
                  meta: t.meta, customdata: t.customdata, y: t.y}; }),
                shapes: ((gd.layout || {}).shapes || []).length,
                notes: ((gd.layout || {}).annotations || []).map(function (a) {
                  return a.hovertext; }) }; });"""
        )
        assert not console_errors(driver)
        source_note = driver.find_element("id", "series-sources").text
        swap_list = driver.find_element("css selector", "ol.swaps").get_attribute("innerHTML")
        _screenshot(driver, "serving")  # `make screenshots` only
    finally:
        driver.quit()
    return drawn, source_note, swap_list


@pytest.mark.slow  # a real browser and a real server
@pytest.mark.timeout(600)  # the shared serving run (two pipeline runs) may be built here
def test_serving_page_charts_traffic_and_a_hot_swap(serving_run, tmp_path: Path):
    """`tfxp serve` on loopback under a few hundred requests with a hot swap in between,
    the console sampling its metrics: the Serving page draws requests/s, latency and
    error rate, the swap as a vertical line, no console error, and the requests its
    chart plots add up to what was sent."""
    from serving_support import Running, b64, raw_rows

    from tfxp.monitor.sampler import Sampler

    config = _own_serving_run(serving_run, tmp_path)
    old, new = serving_run.old, serving_run.new
    examples, _ = raw_rows(config, serving_run.csv_path)
    server = Running(config, poll_seconds=0.2, log_fraction=0, grpc_port=None)
    sampler = Sampler(server.url, interval=0.3, keep=2000).start()
    try:
        _wait_until(lambda: len(sampler.samples()) >= 1, "a first sample")
        answered = _predictions_around_a_swap(config, server, b64(examples[0]), old)
        done = time.time()
        assert [r.status_code for r in answered] == [200] * (2 * SENT_PER_PHASE)
        sent = Counter(r.headers["x-model-version"] for r in answered)
        _wait_until(lambda: sampler.samples()[-1].at > done, "a sample after the load")
        with serving(Path(config.run_dir), sampler=sampler) as base:
            drawn, source_note, swap_list = _serving_page_drawn(base)
    finally:
        sampler.stop()
        server.close()
    charts = {c["kind"]: c for c in drawn}
    assert set(charts) == {"requests", "latency", "errors"}, drawn
    assert all(c["svg"] >= 1 and c["data"] for c in drawn), drawn
    sampled = [t for t in charts["requests"]["data"] if t["meta"]["source"] == "sampled metrics"]
    # Every request sent is in the chart once, on the version that answered it.
    plotted: Counter = Counter()
    for t in sampled:
        plotted[t["meta"]["version"]] += int(sum(t["customdata"]))
    assert +plotted == sent and set(sent) == {old, new}, (plotted, sent)
    latency = [y for t in charts["latency"]["data"] for y in t["y"]]
    assert latency and all(y > 0 for y in latency)
    assert all(y == 0 for t in charts["errors"]["data"] for y in t["y"])
    # The swap: a vertical line on every chart, saying what moved.
    moved = f"label champion: version {new} -&gt; {old}"
    for c in drawn:
        assert c["shapes"] >= 1
        assert any(moved in (note or "") for note in c["notes"]), c["notes"]
    assert moved in swap_list
    assert "sampled every 0.3 s" in source_note


def _store_reads(config, data_root: str) -> None:
    """The copied store's ExampleGens read `data_root`: the console then finds this
    test's request log there alone (the shared run's data root holds other tests')."""
    from metadata.store import location_from, open_store

    store = open_store(location_from(run_dir=config.local_dir), writable=True)
    moved = []
    for execution in store.get_executions():
        for props in (execution.properties, execution.custom_properties):
            if "input_base" in props:
                props["input_base"].string_value = data_root
                moved.append(execution)
    assert moved
    store.put_executions(moved)


@pytest.mark.slow  # a real browser and a real server
@pytest.mark.timeout(600)  # the shared serving run (two pipeline runs) may be built here
def test_serving_page_draws_the_request_log_of_traffic_before_the_console(
    serving_run, tmp_path: Path
):
    """`tfxp serve` logging every request, a hot swap in between, and the console started
    afterwards (no sampler): the Serving page draws the request log's requests per
    version, adding up to what was sent, and the swap the log shows."""
    from serving_support import Running, b64, raw_rows

    config = _own_serving_run(serving_run, tmp_path).replace(data_root=str(tmp_path / "data"))
    _store_reads(config, config.data_root)
    old, new = serving_run.old, serving_run.new
    examples, _ = raw_rows(config, serving_run.csv_path)
    server = Running(config, poll_seconds=0.2, log_fraction=1.0, grpc_port=None)
    try:
        answered = _predictions_around_a_swap(config, server, b64(examples[0]), old)
    finally:
        server.close()  # the request log is published as the server stops
    assert [r.status_code for r in answered] == [200] * (2 * SENT_PER_PHASE)
    sent = Counter(r.headers["x-model-version"] for r in answered)
    with serving(Path(config.run_dir)) as base:
        drawn, source_note, swap_list = _serving_page_drawn(base)
    charts = {c["kind"]: c for c in drawn}
    sources = {t["meta"]["source"] for c in drawn for t in c["data"]}
    assert sources == {"request log"}, drawn
    plotted: Counter = Counter()
    for t in charts["requests"]["data"]:
        plotted[t["meta"]["version"]] += int(sum(t["customdata"]))
    assert +plotted == sent and set(sent) == {old, new}, (plotted, sent)
    # The log has no latency or errors: those charts draw nothing from it.
    assert not charts["latency"]["data"] and not charts["errors"]["data"], drawn
    # The swap, as the log shows it: the old version served again, the label moved.
    for c in drawn:
        assert c["shapes"] >= 1, c
    assert f"version {old} served" in swap_list
    assert f"label champion: version {new} -&gt; {old}" in swap_list
    assert "none here" in source_note and "from the request log" in source_note
