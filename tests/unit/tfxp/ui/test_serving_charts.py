"""The Serving page's charts over time and their data links, with a sampler fed real
`tfxp serve` metrics pages (serving/metrics.py) and a request log before it started."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from pathlib import Path

import ui_store
from serving_log_files import served_records, write_log
from starlette.testclient import TestClient

from metadata.store import location_from
from serving.metrics import Metrics
from tfxp.monitor.sampler import Sampler
from tfxp.ui.app import create_app
from tfxp.ui.browse import StoreBrowser


def _sampled(m: Metrics, start: float) -> Sampler:
    """Three samples 10 s apart: 20 then 30 requests on version 7; champion moves to 8."""
    clock = iter([start, start + 10, start + 20])
    sampler = Sampler(
        "http://127.0.0.1:1", fetch=lambda url: m.render().decode(), clock=lambda: next(clock)
    )
    m.version_served.labels("taxi", "7").set(1)
    m.label_version.labels("taxi", "champion").set(7)
    sampler.sample_once()
    for _ in range(20):
        m.answered("taxi", "7", "champion", "predict", 200, 0.004)
    sampler.sample_once()
    for _ in range(30):
        m.answered("taxi", "7", "champion", "predict", 200, 0.004)
    m.version_served.labels("taxi", "8").set(1)
    m.label_version.labels("taxi", "champion").set(8)
    m.last_swap.labels("taxi").set(start + 15)
    sampler.sample_once()
    return sampler


def test_the_serving_page_charts_both_sources_and_links_their_numbers(tmp_path: Path):
    ui_store.write_runs(tmp_path / "metadata.sqlite", 1)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    logged_at = now - dt.timedelta(minutes=30)
    folder = tmp_path / "data" / "serving-log"
    write_log(
        folder, served_records([{"trip_miles": 1.0}] * 5, start=logged_at, version=7), logged_at
    )
    sampler = _sampled(Metrics(8), now.timestamp() - 60)
    browser = StoreBrowser(location_from(run_dir=str(tmp_path)))
    c = TestClient(create_app(browser, sampler=sampler), base_url="http://127.0.0.1")

    page = c.get("/serving").text
    specs = re.findall(
        r'data-kind="(\w+)"></div><script type="application/json" class="chart-spec">(.*?)</script>',
        page,
    )
    assert [k for k, _ in specs] == ["requests", "latency", "errors"]
    figures = {k: json.loads(v) for k, v in specs}
    requests = {t["name"]: t for t in figures["requests"]["data"]}
    assert set(requests) == {"version 7 (sampled metrics)", "version 7 (request log)"}
    assert requests["version 7 (sampled metrics)"]["customdata"] == [20, 30]
    assert requests["version 7 (sampled metrics)"]["y"] == [2.0, 3.0]
    assert sum(requests["version 7 (request log)"]["customdata"]) == 5
    # The log has no latency: the latency chart is the sampler's alone.
    assert {t["meta"]["source"] for t in figures["latency"]["data"]} == {"sampled metrics"}
    # One numbered line for the two swaps at one time; what changed in its hover text
    # and in the list under the charts.
    (note,) = figures["errors"]["layout"]["annotations"]
    assert note["text"] == "1"
    assert note["hovertext"] == "version 8 served<br>label champion: version 7 -&gt; 8"
    assert len(figures["errors"]["layout"]["shapes"]) == 1
    swaps = re.findall(r'<ol class="swaps" data-model="taxi"><li>(.*?)</li></ol>', page)
    assert swaps and swaps[0].endswith(": version 8 served; label champion: version 7 -&gt; 8")
    assert (
        "sampled every 5 s at <code>http://127.0.0.1:1/monitoring/prometheus/metrics</code>" in page
    )
    assert page.count('href="/serving/series.csv?model=taxi"') == 3

    rows = list(csv.DictReader(io.StringIO(c.get("/serving/series.csv?model=taxi").text)))
    assert [(r["source"], r["requests"]) for r in rows] == [
        ("request log", "5.0"),
        ("sampled metrics", "20.0"),
        ("sampled metrics", "30.0"),
    ]
    assert rows[1]["p50"] and rows[0]["p50"] == ""
    data = c.get("/serving/series.json").json()
    assert data["sampler"]["interval_seconds"] == 5.0
    assert [s["what"] for s in data["models"]["taxi"]["swaps"]] == [
        "version 8 served",
        "label champion: version 7 -> 8",
    ]
    assert c.get("/serving/series.json?model=other").json()["models"] == {}
    assert c.get("/serving/series.xml").status_code == 404


def test_without_a_sampler_the_page_says_how_to_start_one(tmp_path: Path):
    ui_store.write_runs(tmp_path / "metadata.sqlite", 1)
    browser = StoreBrowser(location_from(run_dir=str(tmp_path)))
    page = TestClient(create_app(browser), base_url="http://127.0.0.1").get("/serving").text
    assert 'id="series-none"' in page and "--serving-url" in page
    assert "plotly.min.js" not in page


def test_tfxp_ui_takes_a_server_to_sample():
    from tfxp.cli import build_parser
    from tfxp.monitor.sampler import DEFAULT_INTERVAL, DEFAULT_KEEP

    args = build_parser().parse_args(["ui", "--run-dir", "x"])
    assert args.serving_url is None
    assert (args.sample_every, args.keep_samples) == (DEFAULT_INTERVAL, DEFAULT_KEEP)
    args = build_parser().parse_args(
        [
            "ui",
            "--serving-url",
            "http://127.0.0.1:8501",
            "--sample-every",
            "2",
            "--keep-samples",
            "9",
        ]
    )
    assert (args.serving_url, args.sample_every, args.keep_samples) == (
        "http://127.0.0.1:8501",
        2.0,
        9,
    )
