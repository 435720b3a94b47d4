"""StatisticsGen's fast path as a Beam pipeline, for runners that hand work to a cluster.

The in-process pass (components/fast/stats/executor.py) is a per-batch function plus
a merge, so it is a Beam CombineFn: each split's files are cut into pieces
(`pieces`), each piece is decoded into record batches (`batches.decode_piece`) and
accumulated by TFDV's in-memory generators (`batches.StatisticsCombineFn`) in its own
task, and Beam merges the pieces' accumulators into the split's statistics. Under
beam_spark that is one Spark task per piece, a lifted combine (partial accumulators
shuffled, not record batches), and one task writing each split's statistics with
TFDV's own sink into a staging folder. The executor reads them back, checks the
sketches were exact for every split and only then writes the artifact.

An example off the ingest's recorded layout is counted (`OFF_LAYOUT`), not failed on:
the executor then gives the component to TFX's executor, as the in-process pass does.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping

import apache_beam as beam
import pyarrow as pa
import tensorflow as tf
import tensorflow_data_validation as tfdv
from apache_beam.metrics.metric import Metrics, MetricsFilter
from tensorflow_metadata.proto.v0 import statistics_pb2

from components.example_gen.layout import Layout
from components.fast.stats.batches import (
    BATCH_SIZE,
    Inexact,
    Piece,
    StatisticsCombineFn,
    decode_piece,
    split_files,
)

# A piece per this many compressed bytes of a file: small enough that a split spreads
# over every executor, large enough that a task's fixed cost stays small beside its work.
PIECE_BYTES = 16 << 20
# Pieces of every split at least: a 100k-row split is one shard of a few MB, and a
# cluster of a few executors should still share it.
MIN_PIECES = 4
# Every piece of a file reads all of it (a GZIP stream cannot be entered in the middle):
# more pieces per file would read it more often than they save in decoding.
MAX_PIECES_PER_FILE = 8
METRICS_NAMESPACE = "fast_statistics"
OFF_LAYOUT = "examples_off_layout"
STATISTICS_FILE = "FeatureStats.pb"


def pieces(files: list[str], compression: str, batch_size: int = BATCH_SIZE) -> list[Piece]:
    """The pieces a split's files are decoded in, each one task's work."""
    per_file = math.ceil(MIN_PIECES / len(files))
    out = []
    for path in files:
        by_size = math.ceil(tf.io.gfile.stat(path).length / PIECE_BYTES)
        count = min(MAX_PIECES_PER_FILE, max(per_file, by_size, 1))
        out += [Piece((path,), compression, index, count, batch_size) for index in range(count)]
    return out


def _decoded(piece: Piece, layout: Layout | None) -> Iterator[pa.RecordBatch]:
    try:
        yield from decode_piece(piece, layout)
    except Inexact:
        # Failing the task would make Spark retry it, then fail the run with a Java
        # trace: the driver reads the counter and gives the split to TFX's executor.
        Metrics.counter(METRICS_NAMESPACE, OFF_LAYOUT).inc()


def add_statistics(
    pipeline: beam.Pipeline,
    split: str,
    split_uri: str,
    options: tfdv.StatsOptions,
    layout: Layout | None,
    output_path: str,
    batch_size: int = BATCH_SIZE,
) -> None:
    """Adds to `pipeline` the steps that write `split`'s statistics to `output_path`."""
    files, compression = split_files(split_uri)
    _ = (
        pipeline
        # Create's reshuffle spreads the pieces over the workers.
        | f"Pieces[{split}]" >> beam.Create(pieces(files, compression, batch_size))
        | f"Decode[{split}]" >> beam.FlatMap(_decoded, layout)
        | f"Statistics[{split}]" >> beam.CombineGlobally(StatisticsCombineFn(options))
        | f"Write[{split}]" >> tfdv.WriteStatisticsToBinaryFile(output_path)
    )


def split_statistics(
    pipeline: beam.Pipeline,
    split_uris: Mapping[str, str],
    options: tfdv.StatsOptions,
    layout: Layout | None,
    staging: str,
    batch_size: int = BATCH_SIZE,
) -> dict[str, statistics_pb2.DatasetFeatureStatisticsList]:
    """Every split's statistics, computed by one run of `pipeline` (staged under `staging`)."""
    paths = {split: os.path.join(staging, split, STATISTICS_FILE) for split in split_uris}
    for split, uri in split_uris.items():
        add_statistics(pipeline, split, uri, options, layout, paths[split], batch_size)
    result = pipeline.run()
    result.wait_until_finish()
    counters = result.metrics().query(
        MetricsFilter().with_namespace(METRICS_NAMESPACE).with_name(OFF_LAYOUT)
    )["counters"]
    if sum(c.attempted if c.committed is None else c.committed for c in counters):
        raise Inexact("examples off the ingest's layout")
    return {split: tfdv.load_stats_binary(path) for split, path in paths.items()}
