"""Queries about Examples artifacts: what was ingested from where, what a run read.

`tfxp data list`, `tfxp watch` and the data versions (tfxp/datasets/versions.py)
ask which spans our ExampleGen ingested; `tfxp verify` and the local run (naming
the corrupt shard behind a failed component) ask which Examples to check and how
many records StatisticsGen counted in them.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from ml_metadata.proto import metadata_store_pb2 as pb

from metadata.properties import prop

EXAMPLE_TYPES = ("Examples",)


def _root(data_root: str) -> str:
    return data_root.rstrip("/") if "://" in data_root else os.path.abspath(data_root)


def examples_ingested_from(store: Any, input_base: str) -> list[pb.Artifact]:
    """LIVE single-span Examples our ExampleGen wrote from `input_base` (artifacts written
    before ExampleGen recorded its input base: from any base)."""
    found = []
    for a in store.get_artifacts_by_type("Examples"):
        if prop(a, "span") is None or prop(a, "window_spans") is not None:
            continue
        base = prop(a, "input_base")
        if base is not None and os.path.abspath(base) != os.path.abspath(input_base):
            continue
        if a.state != pb.Artifact.LIVE:
            continue
        found.append(a)
    return found


def span_ingestions(store: Any, data_root: str, span: int | None) -> list[pb.Artifact]:
    """LIVE fingerprinted single-span Examples our ExampleGen wrote for `span` (None: any)
    of `data_root` (a local folder or an s3:// / gs:// root)."""
    root = _root(data_root)
    return [
        a
        for a in store.get_artifacts_by_type("Examples")
        if (span is None or prop(a, "span") == span)
        and prop(a, "window_spans") is None
        and prop(a, "content_sha256") is not None
        and _root(prop(a, "input_base") or "") == root
        and a.state == pb.Artifact.LIVE
    ]


def newest_ingested_span(store: Any) -> int | None:
    """The newest span any run's ExampleGen ingested (Examples' `span`), or None."""
    spans = [prop(a, "span") for a in store.get_artifacts_by_type("Examples")]
    spans = [s for s in spans if s is not None]
    return max(spans) if spans else None


def examples_artifacts(store: Any, ids: list[int] | None = None) -> list[pb.Artifact]:
    """The Examples artifacts `ids` (ValueError naming the unknown ones), or all of them."""
    arts = [a for t in EXAMPLE_TYPES for a in store.get_artifacts_by_type(t)]
    if ids:
        known = {a.id: a for a in arts}
        missing = [i for i in ids if i not in known]
        if missing:
            raise ValueError(
                f"no Examples artifact with id {missing} in this store; "
                f"known ids: {sorted(known) or 'none'}"
            )
        return [known[i] for i in ids]
    return arts


def recorded_counts(store: Any, artifact_id: int) -> dict[str, int]:
    """num_examples per split from the StatisticsGen run that consumed this artifact."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    events = store.get_events_by_artifact_ids([artifact_id])
    consumers = {e.execution_id for e in events if e.type == pb.Event.INPUT}
    counts: dict[str, int] = {}
    for ex_events in [store.get_events_by_execution_ids([x]) for x in consumers]:
        outs = [e.artifact_id for e in ex_events if e.type == pb.Event.OUTPUT]
        for art in store.get_artifacts_by_id(outs):
            if store.get_artifact_types_by_id([art.type_id])[0].name != "ExampleStatistics":
                continue
            for stats_file in glob.glob(os.path.join(art.uri, "Split-*", "FeatureStats.pb")):
                split = os.path.basename(os.path.dirname(stats_file)).removeprefix("Split-")
                stats = statistics_pb2.DatasetFeatureStatisticsList()
                with open(stats_file, "rb") as f:
                    stats.ParseFromString(f.read())
                if stats.datasets:
                    counts[split] = int(stats.datasets[0].num_examples)
            if counts:
                return counts
    return counts


def failed_execution_examples(store: Any, run_id: str) -> list[pb.Artifact]:
    """The Examples inputs of the last failed execution of run `run_id` (none: [])."""
    ctx = store.get_context_by_type_and_name("pipeline_run", run_id)
    executions = store.get_executions_by_context(ctx.id) if ctx else []
    failed = [e for e in executions if e.last_known_state == e.FAILED]
    if not failed:
        return []
    events = store.get_events_by_execution_ids([failed[-1].id])
    inputs = [e.artifact_id for e in events if e.type == pb.Event.INPUT]
    return [
        art
        for art in store.get_artifacts_by_id(inputs)
        if store.get_artifact_types_by_id([art.type_id])[0].name in EXAMPLE_TYPES
    ]
