"""The whole pipeline on a small sample: complete, blessed, pushed, then cached."""

from __future__ import annotations

import csv
import glob
import gzip
import os

import pytest
from e2e_support import EMBEDDED_CSV
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from pipeline import node_ids

# The first test of a module also pays for its module fixture's whole runs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

WORK_NODES = [
    node_ids.EXAMPLE_GEN,
    node_ids.SCHEMA_IMPORTER,
    node_ids.STATISTICS_GEN,
    node_ids.EXAMPLE_VALIDATOR,
    node_ids.TRANSFORM,
    node_ids.TRAINER,
    node_ids.EVALUATOR,
    node_ids.SERVING_CHECK,
    node_ids.PUSHER,
    node_ids.MODEL_CARD,
]


def _store(config) -> metadata_store.MetadataStore:
    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = config.metadata_path
    return metadata_store.MetadataStore(cfg)


def _states(summary) -> dict[str, str]:
    return {c.node_id: c.state for c in summary.components}


def test_first_run_completes_every_component(taxi_runs):
    states = _states(taxi_runs.first)
    for node in WORK_NODES:
        assert states.get(node) == "COMPLETE", (node, states)


def test_first_run_blesses_and_pushes(taxi_runs):
    s = taxi_runs.first
    assert s.blessed is True
    assert s.pushed is True
    assert s.pushed_model and os.path.isfile(os.path.join(s.pushed_model, "saved_model.pb"))
    assert s.metrics["binary_accuracy"] > taxi_runs.config.thresholds.lower_bound
    assert s.metrics["example_count"] > 0


def test_mlmd_records_every_execution_complete(taxi_runs):
    store = _store(taxi_runs.config)
    ctx = store.get_context_by_type_and_name("pipeline_run", taxi_runs.first.run_id)
    executions = store.get_executions_by_context(ctx.id)
    assert len(executions) >= len(WORK_NODES)
    assert {e.last_known_state for e in executions} == {metadata_store_pb2.Execution.COMPLETE}
    examples = store.get_artifacts_by_type("Examples")
    assert examples and all(a.state == metadata_store_pb2.Artifact.LIVE for a in examples)


def test_examples_are_gzip_tfrecord_splits(taxi_runs):
    store = _store(taxi_runs.config)
    uri = store.get_artifacts_by_type("Examples")[0].uri
    counts = {}
    for split in ("train", "eval"):
        shards = glob.glob(os.path.join(uri, f"Split-{split}", "*.gz"))
        assert shards, split
        with gzip.open(shards[0], "rb") as f:
            assert f.read(8)  # a real GZIP stream with TFRecord bytes inside
        import tensorflow as tf

        counts[split] = sum(1 for _ in tf.data.TFRecordDataset(shards, compression_type="GZIP"))
    total = counts["train"] + counts["eval"]
    assert total == 3000
    assert 0.55 < counts["train"] / total < 0.78  # 2:1 hash split


def test_second_run_is_fully_cached(taxi_runs):
    s = taxi_runs.cached
    states = _states(s)
    for node in WORK_NODES:
        assert states.get(node) == "CACHED", (node, states)
    assert s.executed == []
    # The cached run still reports the pushed model of the run it reused.
    assert s.blessed is True


def test_trainer_code_change_reruns_only_trainer_and_downstream(taxi_runs):
    states = _states(taxi_runs.trainer_code_changed)
    for node in (
        node_ids.EXAMPLE_GEN,
        node_ids.SCHEMA_IMPORTER,
        node_ids.STATISTICS_GEN,
        node_ids.TRANSFORM,
    ):
        assert states[node] == "CACHED", (node, states)
    for node in (node_ids.TRAINER, node_ids.EVALUATOR, node_ids.PUSHER):
        assert states[node] == "COMPLETE", (node, states)


def test_second_model_is_compared_against_the_blessed_baseline(taxi_runs):
    metrics = taxi_runs.trainer_code_changed.metrics
    # TFMA reports *_diff metrics only when the change threshold had a baseline.
    assert "binary_accuracy_diff" in metrics


def test_predict_scores_rows_without_label(taxi_runs, tmp_path):
    from tfxp.models.predict import predict_csv

    serving = tmp_path / "serving.csv"
    with EMBEDDED_CSV.open() as src, serving.open("w", newline="") as dst:
        reader = csv.DictReader(src)
        fields = [f for f in reader.fieldnames if f != "tips"]
        writer = csv.DictWriter(dst, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for i, row in enumerate(reader):
            if i == 50:
                break
            writer.writerow(row)
    out = tmp_path / "pred.csv"
    result = predict_csv(taxi_runs.config, str(serving), output=str(out))
    assert len(result.probabilities) == 50
    assert all(0.0 <= p <= 1.0 for p in result.probabilities)
    assert len(set(round(p, 4) for p in result.probabilities)) > 1  # not a constant model
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 50 and {"probability", "prediction"} <= set(rows[0])
