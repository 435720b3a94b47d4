"""Prometheus metrics of `tfxp serve` (at /monitoring/prometheus/metrics).

Per model, version and label (the label a request came through: champion,
challenger, or empty when it named a version): requests by API and status
code, errors, latency histograms, and the batch sizes the dynamic batcher
formed per signature. The hot swaps: the version each label serves, the
versions served, a count of swaps and the time of the last one. Each server has its own registry, so two servers in one
process (tests) never share counts.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# No `*_created` series: a timestamp per label set doubles the page for nothing scrapers use.
disable_created_metrics()

LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self, max_batch_size: int) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        common = ("model", "version", "label", "api")
        self.requests = Counter(
            "tfxp_serving_requests", "Requests answered", (*common, "code"), registry=r
        )
        self.errors = Counter(
            "tfxp_serving_errors", "Requests answered with an error", (*common, "code"), registry=r
        )
        self.latency = Histogram(
            "tfxp_serving_request_latency_seconds",
            "Time from the request's arrival to its answer",
            common,
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        buckets = sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, max_batch_size})
        self.batch_size = Histogram(
            "tfxp_serving_batch_size",
            "Examples per model call formed by the dynamic batcher",
            ("model", "version", "signature"),
            buckets=[b for b in buckets if b <= max_batch_size],
            registry=r,
        )
        self.examples = Counter(
            "tfxp_serving_examples", "Examples scored", ("model", "version", "label"), registry=r
        )
        self.label_version = Gauge(
            "tfxp_serving_label_version",
            "The version each label serves",
            ("model", "label"),
            registry=r,
        )
        self.loaded = Gauge(
            "tfxp_serving_loaded_versions", "Versions loaded and available", ("model",), registry=r
        )
        # The hot swaps, for whoever samples this page over time (the console's
        # Serving page): which versions are served, and when the last swap was.
        self.version_served = Gauge(
            "tfxp_serving_version_served",
            "1 while the version is loaded and served, 0 after it was swapped out",
            ("model", "version"),
            registry=r,
        )
        self.swaps = Counter(
            "tfxp_serving_swaps",
            "Hot swaps: served versions or labels changed",
            ("model",),
            registry=r,
        )
        self.last_swap = Gauge(
            "tfxp_serving_last_swap_timestamp_seconds",
            "When the served versions or labels last changed (Unix time)",
            ("model",),
            registry=r,
        )
        self.logged = Counter(
            "tfxp_serving_logged_examples",
            "Examples written to the request log",
            ("model",),
            registry=r,
        )
        self.log_dropped = Counter(
            "tfxp_serving_log_dropped_examples",
            "Examples not logged because the log writer fell behind",
            ("model",),
            registry=r,
        )

    def answered(
        self, model: str, version: str, label: str, api: str, code: int, seconds: float
    ) -> None:
        self.requests.labels(model, version, label, api, str(code)).inc()
        if code >= 400:
            self.errors.labels(model, version, label, api, str(code)).inc()
        self.latency.labels(model, version, label, api).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
