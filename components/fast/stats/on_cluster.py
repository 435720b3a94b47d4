"""StatisticsGen's fast path as a Beam pipeline, for runners that hand work to a cluster.

The in-process pass (components/fast/stats/executor.py) is a per-batch function plus a
merge, so it runs as Beam steps over the same pieces (components/fast/stats/batches.py):
each piece of a split's files is decoded into record batches and accumulated by TFDV's
in-memory generators in a task of its own, the pieces' compacted accumulators (not
record batches) go to one task through a GroupByKey, and that task merges them in piece
order and writes the split's statistics into a staging folder. The order is the
in-process pass's, so both give the same statistics bit for bit. The executor reads them
back, checks the sketches were exact for every split and only then writes the artifact.

An example off the ingest's recorded layout is counted (`OFF_LAYOUT`), not failed on:
the executor then gives the component to TFX's executor, as the in-process pass does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import apache_beam as beam
import tensorflow as tf
import tensorflow_data_validation as tfdv
from apache_beam.metrics.metric import Metrics, MetricsFilter
from tensorflow_metadata.proto.v0 import statistics_pb2

from components.example_gen.layout import Layout
from components.fast.stats.batches import (
    Inexact,
    StatisticsCombineFn,
    merged_statistics,
    piece_accumulator,
)
from components.io.pieces import BATCH_SIZE, Piece, example_files, pieces, write_whole

METRICS_NAMESPACE = "fast_statistics"
OFF_LAYOUT = "examples_off_layout"
STATISTICS_FILE = "FeatureStats.pb"


class _Accumulate(beam.DoFn):
    """(n, piece) -> (None, (n, the piece's accumulator))."""

    def __init__(self, options: tfdv.StatsOptions, layout: Layout | None) -> None:
        self._combine = StatisticsCombineFn(options)
        self._layout = layout

    def setup(self) -> None:
        self._combine.setup()

    def process(self, numbered: tuple[int, Piece]) -> Iterator[tuple[None, tuple[int, Any]]]:
        number, piece = numbered
        try:
            yield None, (number, piece_accumulator(self._combine, piece, self._layout))
        except Inexact:
            # Failing the task would make Spark retry it, then fail the run with a Java
            # trace: the driver reads the counter and gives the split to TFX's executor.
            Metrics.counter(METRICS_NAMESPACE, OFF_LAYOUT).inc()


class _MergeAndWrite(beam.DoFn):
    """All pieces' accumulators -> the split's statistics, merged in piece order, written
    whole to `path` and renamed into place (a retried task rewrites the same bytes;
    Beam's file sinks would commit through side inputs, each ending a Spark job)."""

    def __init__(self, options: tfdv.StatsOptions, path: str) -> None:
        self._combine = StatisticsCombineFn(options)
        self._path = path

    def setup(self) -> None:
        self._combine.setup()

    def process(self, keyed: tuple[None, Iterable[tuple[int, Any]]]) -> None:
        ordered = [accumulator for _, accumulator in sorted(keyed[1], key=lambda n: n[0])]
        statistics = merged_statistics(self._combine, ordered)
        write_whole(self._path, statistics.SerializeToString())


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
    files, compression = example_files([split_uri], Inexact)
    _ = (
        pipeline
        # Create's reshuffle spreads the pieces over the workers.
        | f"Pieces[{split}]" >> beam.Create(list(enumerate(pieces(files, compression, batch_size))))
        | f"Accumulate[{split}]" >> beam.ParDo(_Accumulate(options, layout))
        | f"Gather[{split}]" >> beam.GroupByKey()
        | f"MergeAndWrite[{split}]" >> beam.ParDo(_MergeAndWrite(options, output_path))
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
    missing = [split for split, path in paths.items() if not tf.io.gfile.exists(path)]
    if missing:
        raise Inexact(f"no examples in split(s) {', '.join(missing)}")
    return {split: tfdv.load_stats_binary(path) for split, path in paths.items()}
