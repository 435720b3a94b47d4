"""The skew check on a request log written under a `request_log:` policy.

The log holds a hashed column as `h:<hmac>` categories and lacks a dropped
one (components/io/log_policy.py). Training statistics hold the raw values.
To compare like with like, the skew check sees training data the way the log
does: each top value and histogram label of a hashed text column is hashed
with the same key, dropped columns leave both sides, and in the schema the
check uses a hashed column is text without a domain (its values are hashes).
A hashed numeric column has no exact values in training statistics to hash
(only histograms), so it leaves the comparison too, and the notes say so.

Schema and drift checks keep the curated schema and the raw statistics.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TypeAlias

from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from components.io.log_policy import Applier

Stats: TypeAlias = statistics_pb2.DatasetFeatureStatisticsList


def _name(feature: statistics_pb2.FeatureNameStatistics) -> str:
    return feature.path.step[0] if feature.path.step else feature.name


def log_schema(schema: schema_pb2.Schema, applier: Applier) -> schema_pb2.Schema:
    """The schema of logged records: dropped columns absent, hashed ones plain text."""
    out = copy.deepcopy(schema)
    kept = []
    for feature in out.feature:
        action = applier.policy.action(feature.name) if applier.policy else "keep"
        if action == "drop":
            continue
        if action == "hash":
            numeric = feature.type != schema_pb2.BYTES
            feature.type = schema_pb2.BYTES
            feature.ClearField("domain_info")
            if numeric:  # no comparable training values (see the module's docstring)
                feature.ClearField("skew_comparator")
        kept.append(feature)
    del out.feature[:]
    out.feature.extend(kept)
    return out


def hashed_training(stats: Stats, applier: Applier) -> tuple[Stats, list[str]]:
    """Training statistics as the log would show them; and the hashed columns left out."""
    out = copy.deepcopy(stats)
    left_out: list[str] = []
    for dataset in out.datasets:
        kept = []
        for feature in dataset.features:
            name = _name(feature)
            action = applier.policy.action(name) if applier.policy else "keep"
            if action == "drop":
                continue
            if action == "hash":
                if not feature.HasField("string_stats"):
                    left_out.append(name)
                    continue
                strings = feature.string_stats
                for top in strings.top_values:
                    top.value = applier.hashed([top.value.encode()])[0].decode()
                for bucket in strings.rank_histogram.buckets:
                    bucket.label = applier.hashed([bucket.label.encode()])[0].decode()
            kept.append(feature)
        del dataset.features[:]
        dataset.features.extend(kept)
    return out, sorted(set(left_out))


def skew_view(
    applier: Applier, notes: list[str]
) -> Callable[[Stats, schema_pb2.Schema], tuple[Stats, schema_pb2.Schema]]:
    """What checks.evaluate compares serving statistics with, under `applier`'s policy."""

    def view(compared: Stats, schema: schema_pb2.Schema) -> tuple[Stats, schema_pb2.Schema]:
        hashed, left_out = hashed_training(compared, applier)
        policy = applier.policy
        if policy is not None and policy.hash:
            notes.append(
                f"skew: hashed columns {sorted(policy.hash)} compared as categories of their "
                f"HMACs (request-log policy {applier.fingerprint})"
                + (f"; numeric hashed columns not compared: {left_out}" if left_out else "")
            )
        return hashed, log_schema(schema, applier)

    return view
