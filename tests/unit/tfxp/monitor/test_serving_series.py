"""Serving over time from `tfxp serve`'s own metrics pages (serving/metrics.py): rates
from counter deltas, quantiles as Prometheus' histogram_quantile, a restart's counter
reset, swaps; the request log's history; the background sampler's bounds."""

from __future__ import annotations

import datetime as dt
import math
import time

import pytest
from serving_log_files import T0, served_records, write_log

from serving.metrics import Metrics
from tfxp.monitor import traffic
from tfxp.monitor.sampler import Sampler, metrics_url
from tfxp.monitor.serving_series import (
    LOGGED,
    SAMPLED,
    bucket_deltas,
    counter_delta,
    histogram_quantile,
    parse_samples,
    sampled_points,
    sampled_swaps,
)

INF = math.inf


def _answer(m: Metrics, version: str, seconds: list[float], code: int = 200) -> None:
    for s in seconds:
        m.answered("taxi", version, "champion", "rest", code, s)


def _sample(m: Metrics, at: float):
    (s,) = parse_samples(m.render().decode(), at)
    return s


def test_histogram_quantile_as_prometheus_computes_it():
    buckets = {0.001: 0.0, 0.002: 10.0, 0.005: 20.0, INF: 20.0}
    # rank 10 falls at the top of (0.001, 0.002]; rank 19.8 inside (0.002, 0.005].
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.002)
    assert histogram_quantile(0.99, buckets) == pytest.approx(0.002 + 0.003 * 9.8 / 10)
    # The lowest bucket starts at 0.
    assert histogram_quantile(0.5, {0.01: 4.0, INF: 4.0}) == pytest.approx(0.005)
    # A rank in the +Inf bucket: the highest finite bound.
    assert histogram_quantile(0.99, {0.1: 5.0, 1.0: 5.0, INF: 10.0}) == 1.0
    assert histogram_quantile(0.5, {0.1: 0.0, INF: 0.0}) is None
    assert histogram_quantile(0.5, {0.1: 3.0}) is None  # no +Inf bucket: not a histogram


def test_rates_and_quantiles_from_two_samples_of_a_real_metrics_page():
    m = Metrics(8)
    _answer(m, "1", [0.003] * 3)
    first = _sample(m, 100.0)
    # Between the samples: 8 fast, 2 slow answers, 2 of them errors, over 2 s.
    _answer(m, "1", [0.0015] * 8 + [0.3, 0.3])
    _answer(m, "1", [0.001, 0.001], code=500)
    second = _sample(m, 102.0)
    (p,) = sampled_points([first, second])
    assert (p.version, p.requests, p.rate, p.source) == ("1", 12.0, 6.0, SAMPLED)
    assert p.error_rate == pytest.approx(2 / 12)
    # The interval's own buckets (the 3 earlier answers left out), `le` inclusive: 2 in
    # (0.0005, 0.001], 8 in (0.001, 0.002], 2 in (0.2, 0.5]. rank 6 -> 0.001 + 0.001 *
    # (6 - 2)/8; rank 11.88 -> 0.2 + 0.3 * (11.88 - 10)/2.
    assert p.p50 == pytest.approx(0.0015)
    assert p.p99 == pytest.approx(0.2 + 0.3 * 1.88 / 2)


def test_a_restart_resets_the_counters_and_counts_from_zero():
    before = Metrics(8)
    _answer(before, "2", [0.004] * 50)
    a = _sample(before, 10.0)
    restarted = Metrics(8)  # a new process: every counter from 0
    _answer(restarted, "2", [0.004] * 7)
    b = _sample(restarted, 15.0)
    (p,) = sampled_points([a, b])
    assert p.requests == 7 and p.rate == pytest.approx(7 / 5)
    assert p.p50 == pytest.approx(0.002 + 0.003 * 3.5 / 7)
    assert counter_delta(50.0, 7.0) == 7.0 and counter_delta(50.0, 57.0) == 7.0
    assert counter_delta(None, 3.0) == 3.0
    assert bucket_deltas({0.1: 5.0, INF: 9.0}, {0.1: 1.0, INF: 2.0}) == {0.1: 1.0, INF: 2.0}


def test_a_version_new_to_a_sample_counts_all_its_requests():
    m = Metrics(8)
    _answer(m, "1", [0.003] * 4)
    a = _sample(m, 0.0)
    _answer(m, "2", [0.003] * 6)
    b = _sample(m, 3.0)
    by_version = {p.version: p for p in sampled_points([a, b])}
    assert by_version["1"].requests == 0 and by_version["1"].p50 is None
    assert by_version["2"].requests == 6 and by_version["2"].rate == 2.0


def test_swaps_are_read_from_the_servers_swap_gauges():
    m = Metrics(8)
    m.version_served.labels("taxi", "1").set(1)
    m.label_version.labels("taxi", "champion").set(1)
    m.last_swap.labels("taxi").set(1000.0)
    a = _sample(m, 1001.0)
    # A push (version 2 served, champion moved to it) between the samples.
    m.version_served.labels("taxi", "2").set(1)
    m.label_version.labels("taxi", "champion").set(2)
    m.last_swap.labels("taxi").set(1003.5)
    b = _sample(m, 1006.0)
    c = _sample(m, 1011.0)  # nothing changed
    swaps = sampled_swaps([a, b, c])
    assert [(s.at, s.what) for s in swaps] == [
        (1003.5, "version 2 served"),
        (1003.5, "label champion: version 1 -> 2"),
    ]
    assert a.served == frozenset({"1"}) and b.labels == {"champion": 2}


def test_request_log_history_counts_requests_and_finds_label_moves(tmp_path):
    rows = [{"trip_miles": 1.0}] * 120
    # 120 records one second apart, version 1; then 60 of version 2 under the same
    # label; one request of two examples counted once.
    ids = [f"a{i}" for i in range(119)] + ["a118"]
    write_log(tmp_path, served_records(rows, start=T0, version=1, ids=ids), T0, seq=1)
    later = T0 + dt.timedelta(seconds=120)
    write_log(tmp_path, served_records(rows[:60], start=later, version=2), later, seq=2)
    shadow = served_records(rows[:30], start=later, version=1, role="shadow", label="")
    write_log(tmp_path, shadow, later, seq=3)
    points, swaps = traffic.logged_history(str(tmp_path), since=T0.timestamp())
    assert {p.source for p in points} == {LOGGED}
    per_version: dict[str, float] = {}
    for p in points:
        per_version[p.version] = per_version.get(p.version, 0) + p.requests
        assert p.p50 is None and p.error_rate is None  # the log has no latency or errors
        assert p.rate == pytest.approx(p.requests / (p.at - p.start))
    assert per_version == {"1": 119, "2": 60}  # shadow answers are not served traffic
    assert [(s.at, s.what) for s in swaps] == [
        (later.timestamp(), "version 2 served"),
        (later.timestamp(), "label champion: version 1 -> 2"),
    ]
    # Only what came before the console's first sample.
    early, _ = traffic.logged_history(str(tmp_path), until=later.timestamp())
    assert sum(p.requests for p in early) == 119 and {p.version for p in early} == {"1"}
    # By default the last day only: files older than that are not even read.
    assert traffic.logged_history(str(tmp_path), until=T0.timestamp() + 2 * 86400) == ([], [])


def test_the_sampler_keeps_a_bounded_ring_and_survives_a_failed_fetch():
    m = Metrics(8)
    pages = iter(range(100))
    clock = iter(float(t) for t in range(100))

    def fetch(url: str) -> str:
        n = next(pages)
        if n == 2:
            raise ConnectionRefusedError("server restarting")
        _answer(m, "1", [0.003] * 5)
        return m.render().decode()

    sampler = Sampler("http://127.0.0.1:1/", keep=3, fetch=fetch, clock=lambda: next(clock))
    assert sampler.url == "http://127.0.0.1:1/monitoring/prometheus/metrics"
    assert metrics_url(sampler.url) == sampler.url
    for _ in range(2):
        assert len(sampler.sample_once()) == 1
    assert sampler.sample_once() == [] and "server restarting" in (sampler.last_error or "")
    for _ in range(3):
        sampler.sample_once()
    assert sampler.last_error is None
    kept = sampler.samples()
    assert [s.at for s in kept] == [3.0, 4.0, 5.0]  # the 3 newest; the failed tick left none
    assert sampler.started_at == 0.0
    assert [p.requests for p in sampled_points(kept)] == [5.0, 5.0]
    with pytest.raises(ValueError, match="positive"):
        Sampler("http://x", interval=0)
    with pytest.raises(ValueError, match="at least 2"):
        Sampler("http://x", keep=1)


def test_the_sampler_thread_samples_until_stopped():
    m = Metrics(8)
    seen = []

    def fetch(url: str) -> str:
        seen.append(url)
        return m.render().decode()

    sampler = Sampler("http://127.0.0.1:1", interval=0.01, fetch=fetch).start()
    try:
        for _ in range(1000):  # a hang guard, not a time limit
            if len(seen) >= 3:
                break
            time.sleep(0.01)
    finally:
        sampler.stop()
    assert len(seen) >= 3 and sampler._thread is not None and not sampler._thread.is_alive()


def test_the_sampler_fetches_over_http_with_the_servers_token():
    """One sample from a loopback HTTP server that, as `tfxp serve` off loopback, answers
    its metrics page only with the token."""
    import http.server
    import threading

    m = Metrics(8)
    _answer(m, "3", [0.01] * 4)
    page = m.render()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the stdlib handler's name
            ok = self.headers.get("Authorization") == "Bearer s3cret"
            self.send_response(200 if ok and self.path.endswith("/metrics") else 401)
            self.end_headers()
            self.wfile.write(page if ok else b"401")

        def log_message(self, *args) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        (s,) = Sampler(url, token="s3cret").sample_once()
        assert s.model == "taxi" and s.requests == {"3": 4.0}
        refused = Sampler(url)
        assert refused.sample_once() == [] and "401" in (refused.last_error or "")
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_serving_url_that_is_no_server_address_is_refused():
    assert (
        metrics_url("http://127.0.0.1:8501/")
        == "http://127.0.0.1:8501/monitoring/prometheus/metrics"
    )
    for bad in ("notaurl", "127.0.0.1:8501", "ftp://host/x", "http://"):
        with pytest.raises(ValueError, match="is not a server address"):
            metrics_url(bad)
