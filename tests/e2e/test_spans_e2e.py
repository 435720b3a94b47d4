"""Data versions end to end: spans ingested by runs, pinning, content fingerprints, a window."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import small_config, write_span
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.io.content_fingerprint import files_sha256
from metadata.summary import RunSummary
from pipeline import node_ids
from pipeline.config import PipelineConfig

# The first test of a module also pays for its module fixture's whole runs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
ROWS = 2000


@dataclass
class SpanRuns:
    config: PipelineConfig
    span2_file: Path
    first: RunSummary  # latest span (2)
    pinned: RunSummary  # --span 1
    again: RunSummary  # unchanged: cached
    touched: RunSummary  # new mtime, same bytes: cached
    edited: RunSummary  # same size and mtime, different bytes: re-ingested
    window: RunSummary  # whole pipeline on spans 1 and 2
    sizes: tuple[int, int]
    mtimes: tuple[int, int]


def _store(config) -> metadata_store.MetadataStore:
    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = config.metadata_path
    return metadata_store.MetadataStore(cfg)


def _outputs(store, run_id: str, node: str, type_name: str = "Examples"):
    ctx = store.get_context_by_type_and_name("pipeline_run", run_id)
    found = []
    for ex in store.get_executions_by_context(ctx.id):
        names = {c.name for c in store.get_contexts_by_execution(ex.id)}
        if f"taxi.{node}" not in names:
            continue
        events = store.get_events_by_execution_ids([ex.id])
        ids = [e.artifact_id for e in events if e.type == metadata_store_pb2.Event.OUTPUT]
        for a in store.get_artifacts_by_id(ids):
            if store.get_artifact_types_by_id([a.type_id])[0].name == type_name:
                found.append(a)
    return found


def _prop(a, key):
    v = a.custom_properties[key]
    return getattr(v, v.WhichOneof("value"))


def _state(summary: RunSummary, node: str) -> str:
    return {c.node_id: c.state for c in summary.components}[node]


@pytest.fixture(scope="module")
def span_runs(tmp_path_factory) -> SpanRuns:
    from tfxp.local.runner import run_local
    from tfxp.local.window import ingest_older_spans

    tmp = tmp_path_factory.mktemp("spans")
    write_span(tmp / "data", 1, start=0, rows=ROWS)
    span2 = write_span(tmp / "data", 2, start=ROWS, rows=ROWS)
    config = small_config(tmp, train_steps=20)
    quiet = {"printer": lambda _: None}
    ingest = {"to_nodes": [node_ids.EXAMPLE_GEN], **quiet}
    first = run_local(config, **ingest)
    pinned = run_local(config.replace(span=1), **ingest)
    again = run_local(config, **ingest)
    st = span2.stat()
    os.utime(span2, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    touched = run_local(config, **ingest)
    # Same size, same mtime, one digit different.
    st = span2.stat()
    lines = span2.read_text().splitlines(keepends=True)
    fields = lines[1].split(",")
    fare = fields[1]
    digit = next(i for i, ch in enumerate(fare) if ch.isdigit())
    fields[1] = fare[:digit] + str((int(fare[digit]) + 1) % 10) + fare[digit + 1 :]
    lines[1] = ",".join(fields)
    span2.write_text("".join(lines))
    os.utime(span2, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = span2.stat()
    edited = run_local(config, **ingest)
    from pipeline.plan import plan_run

    windowed = plan_run(config.replace(window=2))
    ingest_older_spans(windowed, **quiet)
    window = run_local(windowed, **quiet)
    return SpanRuns(
        config,
        span2,
        first,
        pinned,
        again,
        touched,
        edited,
        window,
        (st.st_size, after.st_size),
        (st.st_mtime_ns, after.st_mtime_ns),
    )


def test_latest_span_then_pinned_older_span_are_ingested(span_runs):
    store = _store(span_runs.config)
    (latest,) = _outputs(store, span_runs.first.run_id, node_ids.EXAMPLE_GEN)
    (older,) = _outputs(store, span_runs.pinned.run_id, node_ids.EXAMPLE_GEN)
    assert _state(span_runs.first, node_ids.EXAMPLE_GEN) == "COMPLETE"
    assert _state(span_runs.pinned, node_ids.EXAMPLE_GEN) == "COMPLETE"
    assert (_prop(latest, "span"), _prop(older, "span")) == (2, 1)
    assert _prop(latest, "row_count") == ROWS and _prop(older, "row_count") == ROWS
    span1 = Path(span_runs.config.data_root) / "span-1" / "data.csv"
    digest, nbytes = files_sha256([str(span1)], span_runs.config.data_root)
    assert _prop(older, "content_sha256") == digest and _prop(older, "raw_bytes") == nbytes
    assert _prop(older, "input_fingerprint").startswith(f"sha256:{digest} ")
    assert _prop(older, "tfrecord_shards") == 2  # one per split at this size


def test_identical_data_is_cached_even_when_touched(span_runs):
    store = _store(span_runs.config)
    (latest,) = _outputs(store, span_runs.first.run_id, node_ids.EXAMPLE_GEN)
    for summary in (span_runs.again, span_runs.touched):
        assert _state(summary, node_ids.EXAMPLE_GEN) == "CACHED"
        (same,) = _outputs(store, summary.run_id, node_ids.EXAMPLE_GEN)
        assert same.id == latest.id


def test_changed_bytes_with_same_size_and_mtime_are_reingested(span_runs):
    assert span_runs.sizes[0] == span_runs.sizes[1]
    assert span_runs.mtimes[0] == span_runs.mtimes[1]
    store = _store(span_runs.config)
    (old,) = _outputs(store, span_runs.first.run_id, node_ids.EXAMPLE_GEN)
    (new,) = _outputs(store, span_runs.edited.run_id, node_ids.EXAMPLE_GEN)
    assert _state(span_runs.edited, node_ids.EXAMPLE_GEN) == "COMPLETE"
    assert new.id != old.id and _prop(new, "span") == 2
    assert _prop(new, "content_sha256") != _prop(old, "content_sha256")
    assert _prop(new, "raw_bytes") == _prop(old, "raw_bytes")


def test_window_trains_on_both_spans(span_runs):
    s = span_runs.window
    states = {c.node_id: c.state for c in s.components}
    assert states[node_ids.EXAMPLE_GEN] == "CACHED"  # span 2 (edited) was ingested already
    assert states[node_ids.SPAN_WINDOW_RESOLVER] == "RESOLVED"
    for node in (node_ids.SPAN_WINDOW_EXAMPLES, node_ids.TRANSFORM, node_ids.TRAINER):
        assert states[node] == "COMPLETE", (node, states)
    store = _store(span_runs.config)
    (window,) = _outputs(store, s.run_id, node_ids.SPAN_WINDOW_EXAMPLES)
    assert _prop(window, "window_spans") == "1,2"
    assert _prop(window, "row_count") == 2 * ROWS
    (edited,) = _outputs(store, span_runs.edited.run_id, node_ids.EXAMPLE_GEN)
    # The window took span 2's newest (edited) ingestion.
    events = store.get_events_by_artifact_ids([edited.id])
    assert any(e.type == metadata_store_pb2.Event.INPUT for e in events)
    shards = list(Path(window.uri, "Split-train").iterdir())
    assert sorted(p.name.split("-data")[0] for p in shards) == ["span-1", "span-2"]


def test_data_list_traces_spans_to_runs_and_models(span_runs):
    from tfxp.datasets.listing import describe_dataset, render

    rows = describe_dataset(span_runs.config)
    assert [r.span for r in rows] == [1, 2]
    span1, span2 = rows
    assert len(span1.ingestions) == 1 and len(span2.ingestions) == 2  # span 2 was edited
    assert span1.ingestions[0].rows == ROWS
    model_ids = {m.model_id for m in span1.ingestions[0].models}
    assert model_ids and model_ids == {m.model_id for m in span2.ingestions[-1].models}
    assert span2.ingestions[0].models == []  # the pre-edit content trained nothing
    assert span_runs.window.run_id in span1.ingestions[0].runs
    model = span1.ingestions[0].models[0]
    assert span_runs.window.run_id in model.trained_in
    assert model.pushed is span_runs.window.pushed
    text = render("taxi", span_runs.config, rows)
    assert "(earlier content)" in text and f"#{model.model_id}" in text
