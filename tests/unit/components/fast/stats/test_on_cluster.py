"""StatisticsGen's fast path as a Beam pipeline (components/fast/stats/on_cluster.py):
on beam_spark under local[2] it gives the in-process pass's statistics on the same rows
(every field, bit for bit),
and the executor runs it, not TFX's pipeline, under the Spark runner."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
import tensorflow as tf
import tensorflow_data_validation as tfdv
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from google.protobuf import json_format
from spark_local import SPARK_ARGS, local_spark, taxi_examples
from tfx.components.statistics_gen import executor as tfx_statistics
from tfx.dsl.components.base import base_beam_executor
from tfx.types import standard_artifacts

from beam_spark.runner import SparkRunner
from components.example_gen.layout import Layout
from components.fast.stats import executor, on_cluster
from components.fast.stats.batches import Inexact, decode_piece
from components.io import pieces as file_pieces
from components.io.pieces import Piece, example_files, pieces

ROWS = {"train": 400, "eval": 150}


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local[2] SparkContext the runner reuses (the one running in this process, if any)."""
    with local_spark("fast-stats") as context:
        yield context


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> tuple[Any, Layout]:
    """The ingest's examples of the embedded taxi sample: two GZIP splits, layout recorded."""
    return taxi_examples(
        tmp_path_factory.mktemp("examples"), {split: [rows] for split, rows in ROWS.items()}
    )


def _assert_equal(ours: Any, theirs: Any) -> None:
    """Bit for bit: both forms merge the same pieces' accumulators in the same order."""
    assert theirs.datasets[0].features, "no features: nothing compared"
    assert json_format.MessageToDict(ours) == json_format.MessageToDict(theirs)


def test_pieces_cut_files_by_size(tmp_path):
    small = tmp_path / "small.gz"
    small.write_bytes(b"x" * 100)
    big = tmp_path / "big.gz"
    big.write_bytes(b"x" * (file_pieces.PIECE_BYTES * 3 + 1))
    huge = tmp_path / "huge.gz"
    huge.write_bytes(b"x" * (file_pieces.PIECE_BYTES * (file_pieces.MAX_PIECES_PER_FILE + 2)))
    found = pieces([str(small), str(big), str(huge)], "GZIP", 64)
    assert [(Path(p.files[0]).name, p.index, p.count) for p in found] == [
        ("small.gz", 0, 1),
        *(("big.gz", i, 4) for i in range(4)),
        *(("huge.gz", i, file_pieces.MAX_PIECES_PER_FILE) for i in range(8)),
    ]
    assert {p.batch_size for p in found} == {64}


@pytest.fixture()
def small_pieces(monkeypatch):
    """Pieces of 2 KB: the test's files (about 10 KB each) are cut into several."""
    monkeypatch.setattr(file_pieces, "PIECE_BYTES", 2048)


def test_pieces_decode_every_row_once(examples, small_pieces):
    artifact, layout = examples
    files, compression = example_files([os.path.join(artifact.uri, "Split-train")], Inexact)
    cut = pieces(files, compression, batch_size=32)
    assert len(cut) > 2
    rows = [b.num_rows for piece in cut for b in decode_piece(piece, layout)]
    assert sum(rows) == ROWS["train"] and max(rows) == 32


@pytest.mark.timeout(300)
def test_beam_form_on_spark_equals_the_in_process_pass(spark, examples, tmp_path, small_pieces):
    """Small batches and pieces: every piece accumulates several batches, in Spark tasks
    of their own, and the pieces' accumulators merge."""
    artifact, layout = examples
    uris = {split: os.path.join(artifact.uri, f"Split-{split}") for split in ROWS}
    options = tfdv.StatsOptions()
    found = on_cluster.split_statistics(
        beam.Pipeline(runner=SparkRunner(spark_context=spark)),
        uris,
        options,
        layout,
        str(tmp_path / "staging"),
        batch_size=32,
    )
    for split, uri in uris.items():
        expected = executor.split_statistics(uri, options, layout, batch_size=32)
        assert expected.datasets[0].num_examples == ROWS[split]
        _assert_equal(found[split], expected)


def _run(tmp_path: Path, artifact: Any, args: list[str]) -> Any:
    statistics = standard_artifacts.ExampleStatistics()
    statistics.uri = str(tmp_path / "statistics")
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=args, tmp_dir=str(tmp_path / "tmp"), unique_id="1"
    )
    executor.Executor(context).Do(
        {"examples": [artifact]}, {"statistics": [statistics]}, {"exclude_splits": "[]"}
    )
    return statistics


@pytest.mark.timeout(300)
def test_executor_runs_the_beam_form_under_the_spark_runner(
    spark, examples, tmp_path, caplog, monkeypatch
):
    artifact, _ = examples

    def tfx_path(*args: Any) -> None:
        raise AssertionError("TFX's executor ran")

    # Not absl's which-path line: other tests' steps can leave absl's INFO uncaptured.
    monkeypatch.setattr(tfx_statistics.Executor, "Do", tfx_path)
    with caplog.at_level(logging.INFO, logger="beam_spark.runner"):
        on_spark = _run(tmp_path / "spark", artifact, SPARK_ARGS)
    assert "Spark jobs" in caplog.text  # the runner ran the fast path's pipeline
    in_process = _run(tmp_path / "local", artifact, [])
    assert on_spark.split_names == in_process.split_names == '["train", "eval"]'
    for split in ROWS:
        found, expected = (
            tfdv.load_stats_binary(os.path.join(a.uri, f"Split-{split}", "FeatureStats.pb"))
            for a in (on_spark, in_process)
        )
        _assert_equal(found, expected)


def test_an_example_off_the_layout_is_counted_not_failed(examples, tmp_path):
    """The driver learns it from the run's counters and gives the split to TFX's path."""
    artifact, layout = examples
    bad = tmp_path / "Split-train"
    bad.mkdir()
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    with tf.io.TFRecordWriter(str(bad / "data.gz"), options) as writer:
        example = tf.train.Example()
        example.features.feature["fare"].bytes_list.value.append(b"not a float")
        writer.write(example.SerializeToString())
    with pytest.raises(Inexact, match="off the ingest's layout"):
        list(decode_piece(Piece((str(bad / "data.gz"),), "GZIP"), layout))
    with pytest.raises(Inexact, match="off the ingest's layout"):
        on_cluster.split_statistics(
            beam.Pipeline(runner=FnApiRunner()),
            {"train": str(bad)},
            tfdv.StatsOptions(),
            layout,
            str(tmp_path / "staging"),
        )
