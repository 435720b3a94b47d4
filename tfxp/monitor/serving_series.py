"""Serving over time, per model version: requests/s, p50 and p99 latency, error rate,
and the hot swaps, computed from samples of `tfxp serve`'s Prometheus metrics.

A sample is the server's counters at one moment (serving/metrics.py): requests and
errors per version, the latency histogram's cumulative buckets, the version each
label serves, the versions loaded, and the time of the last swap. Between two
samples, rates are counter deltas over the elapsed time, as Prometheus' `rate()`
computes them: a counter that went down was reset (the server restarted), so its
delta is its new value. Quantiles come from the histogram's bucket deltas as
Prometheus' `histogram_quantile()` does: linear interpolation inside the bucket
the rank falls into, the lowest bucket starting at 0, and a rank in the +Inf
bucket answered with the highest finite bound.

History from before the console started comes from the request log instead
(tfxp/monitor/traffic.py, `logged_history`): it has requests, not latency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

SAMPLED = "sampled metrics"
LOGGED = "request log"

REQUESTS = "tfxp_serving_requests_total"
ERRORS = "tfxp_serving_errors_total"
LATENCY_BUCKET = "tfxp_serving_request_latency_seconds_bucket"
LABEL_VERSION = "tfxp_serving_label_version"
VERSION_SERVED = "tfxp_serving_version_served"
LAST_SWAP = "tfxp_serving_last_swap_timestamp_seconds"


@dataclass(frozen=True)
class Sample:
    """One model's counters at `at` (Unix seconds), summed over labels, APIs and codes."""

    at: float
    model: str
    requests: Mapping[str, float]  # version -> requests answered
    errors: Mapping[str, float]  # version -> requests answered with an error
    buckets: Mapping[str, Mapping[float, float]]  # version -> upper bound -> cumulative count
    labels: Mapping[str, int] = field(default_factory=dict)  # label -> version
    served: frozenset[str] = frozenset()  # versions loaded
    last_swap: float | None = None  # the server's clock, Unix seconds


@dataclass(frozen=True)
class Point:
    """One version's traffic over (start, at]."""

    at: float
    start: float
    model: str
    version: str
    requests: float  # answered in the interval
    rate: float  # requests per second
    p50: float | None  # seconds; None: no request, or a source without latency
    p99: float | None
    error_rate: float | None  # share of the interval's requests answered with an error
    source: str  # SAMPLED or LOGGED


@dataclass(frozen=True)
class Swap:
    at: float
    model: str
    what: str  # "version 3 served", "label champion: version 2 -> 3"
    source: str


def parse_samples(text: str, at: float) -> list[Sample]:
    """A Prometheus text page of `tfxp serve` as one Sample per model it names."""
    from prometheus_client.parser import text_string_to_metric_families

    by_model: dict[str, dict] = {}

    def of(model: str) -> dict:
        return by_model.setdefault(
            model,
            {
                "requests": {},
                "errors": {},
                "buckets": {},
                "labels": {},
                "served": set(),
                "swap": None,
            },
        )

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            model, version = s.labels.get("model", ""), s.labels.get("version", "")
            if s.name in (REQUESTS, ERRORS):
                into = of(model)["requests" if s.name == REQUESTS else "errors"]
                into[version] = into.get(version, 0.0) + s.value
            elif s.name == LATENCY_BUCKET:
                bound = math.inf if s.labels["le"] == "+Inf" else float(s.labels["le"])
                buckets = of(model)["buckets"].setdefault(version, {})
                buckets[bound] = buckets.get(bound, 0.0) + s.value
            elif s.name == LABEL_VERSION:
                of(model)["labels"][s.labels["label"]] = int(s.value)
            elif s.name == VERSION_SERVED and s.value > 0:
                of(model)["served"].add(version)
            elif s.name == LAST_SWAP and s.value > 0:
                of(model)["swap"] = s.value
    return [
        Sample(
            at,
            model,
            v["requests"],
            v["errors"],
            v["buckets"],
            v["labels"],
            frozenset(v["served"]),
            v["swap"],
        )
        for model, v in sorted(by_model.items())
    ]


def counter_delta(before: float | None, after: float) -> float:
    """A counter's increase; a counter that went down was reset and counts from 0."""
    if before is None or after < before:
        return after
    return after - before


def bucket_deltas(
    before: Mapping[float, float] | None, after: Mapping[float, float]
) -> dict[float, float]:
    """The histogram's increase per bucket; any bucket going down means a reset."""
    before = before or {}
    if any(after.get(le, 0.0) < count for le, count in before.items()):
        return dict(after)
    return {le: count - before.get(le, 0.0) for le, count in after.items()}


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """The q-quantile of cumulative `buckets` (upper bound -> count) as Prometheus'
    histogram_quantile: None without observations."""
    ordered = sorted(buckets.items())
    if not ordered or ordered[-1][0] != math.inf:
        return None
    total = ordered[-1][1]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for i, (upper, count) in enumerate(ordered):
        if count >= rank:
            if upper == math.inf:
                # Past the highest finite bound: Prometheus answers with that bound.
                return ordered[i - 1][0] if i > 0 else None
            if count == below:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return ordered[-2][0] if len(ordered) > 1 else None


def sampled_points(samples: Sequence[Sample]) -> list[Point]:
    """A point per version between each two consecutive samples of a model."""
    points = []
    for a, b in _pairs(samples):
        elapsed = b.at - a.at
        if elapsed <= 0:
            continue
        for version, total in sorted(b.requests.items()):
            n = counter_delta(a.requests.get(version), total)
            errors = counter_delta(a.errors.get(version), b.errors.get(version, 0.0))
            deltas = bucket_deltas(a.buckets.get(version), b.buckets.get(version, {}))
            points.append(
                Point(
                    b.at,
                    a.at,
                    b.model,
                    version,
                    n,
                    n / elapsed,
                    histogram_quantile(0.5, deltas) if n else None,
                    histogram_quantile(0.99, deltas) if n else None,
                    min(errors / n, 1.0) if n else None,
                    SAMPLED,
                )
            )
    return points


def sampled_swaps(samples: Sequence[Sample]) -> list[Swap]:
    """The hot swaps two consecutive samples of a model differ by: a version newly
    served, a label moved. Timed by the server's last-swap clock when it moved in
    between (several swaps within one interval show as one time)."""
    swaps = []
    for a, b in _pairs(samples):
        at = b.at
        if b.last_swap is not None and b.last_swap != a.last_swap:
            at = b.last_swap
        for version in sorted(b.served - a.served, key=_version_order):
            swaps.append(Swap(at, b.model, f"version {version} served", SAMPLED))
        for label, now in sorted(b.labels.items()):
            if a.labels.get(label) != now:
                was = a.labels.get(label)
                moved = f"version {was} -> {now}" if was is not None else f"version {now}"
                swaps.append(Swap(at, b.model, f"label {label}: {moved}", SAMPLED))
    return swaps


def _pairs(samples: Sequence[Sample]) -> list[tuple[Sample, Sample]]:
    last: dict[str, Sample] = {}
    pairs = []
    for s in sorted(samples, key=lambda s: s.at):
        if s.model in last:
            pairs.append((last[s.model], s))
        last[s.model] = s
    return pairs


def _version_order(version: str) -> tuple[int, str]:
    return (int(version), "") if version.isdigit() else (0, version)
