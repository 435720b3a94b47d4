"""Merging the metrics of many bundles (Spark partitions) into one result per stage.

Beam's `consolidate` sums counters and merges distributions but passes string sets and
gauges through one per bundle: a runner of one bundle per stage never needs more. Here a
stage has as many bundles as partitions, so string sets are united and a gauge keeps its
latest value, as a user reading the result expects.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from apache_beam import coders
from apache_beam.metrics import monitoring_infos as mi
from apache_beam.portability.api import metrics_pb2


def merge(infos: Iterable[metrics_pb2.MonitoringInfo]) -> list[metrics_pb2.MonitoringInfo]:
    grouped: dict[frozenset, list[metrics_pb2.MonitoringInfo]] = defaultdict(list)
    passed: list[metrics_pb2.MonitoringInfo] = []
    for info in mi.consolidate(infos):
        if mi.is_string_set(info) or mi.is_gauge(info):
            grouped[mi.to_key(info)].append(info)
        else:
            passed.append(info)
    for same in grouped.values():
        first = same[0]
        if len(same) == 1:
            passed.append(first)
        elif mi.is_string_set(first):
            united = set().union(*(mi.extract_string_set_value(i) for i in same))
            payload = coders.IterableCoder(coders.StrUtf8Coder()).encode(sorted(united))
            passed.append(
                metrics_pb2.MonitoringInfo(
                    urn=first.urn, type=first.type, labels=first.labels, payload=payload
                )
            )
        else:
            passed.append(max(same, key=lambda i: mi.extract_gauge_value(i)[0]))
    return passed
