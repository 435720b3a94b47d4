"""The statistics fast path's per-batch work, shared by its two forms.

Both the in-process pass (components/fast/stats/executor.py) and the Beam form
(components/fast/stats/on_cluster.py) are the same steps:

* `pieces` (components/io/pieces.py): a split's TFRecord files cut into pieces,
  interleaved batches of a file (a GZIP stream cannot be entered in the middle, so a
  piece reads its file whole and decodes only its own batches);
* `decode_piece`: a piece -> Arrow record batches (the ingest's layout decoder, or
  tfx_bsl's without a schema, as StatisticsGen's TFXIO reads them);
* `StatisticsCombineFn`: TFDV's in-memory generators as one CombineFn, one accumulator
  per generator, a record batch at a time; each piece's accumulator is compacted, and
  the pieces' accumulators are merged in piece order (`merged_statistics`);
* `check_exact`: the sketches' result is StatisticsGen's only below their exact limit.

The Beam form accumulates each piece in a task of its own; the in-process pass reads
each file once and hands batch i to piece i mod count. Both merge the same piece
accumulators in the same order, so they give the same statistics, bit for bit: TFDV's
quantile sketches (the histograms) depend on how the examples were merged, not only on
which examples there are. A file under PIECE_BYTES is one piece: one stream, as before
pieces existed and as TFX's pipeline reads one file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import pyarrow as pa
import tensorflow as tf
import tensorflow_data_validation as tfdv
from tensorflow_data_validation.statistics import stats_impl
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx_bsl.coders import example_coder

from compat import tfdv as tfdv_internals
from components.example_gen.layout import Layout, RecordBatchDecoder, sequential_records
from components.io.pieces import Piece

EXACT_DISTINCT_LIMIT = tfdv_internals.DEFAULT_MG_SKETCH_SIZE


class Inexact(Exception):
    """The fast path cannot promise StatisticsGen's result: use TFX's executor."""


def decode_piece(piece: Piece, layout: Layout | None) -> Iterator[pa.RecordBatch]:
    """The piece's examples as record batches of up to `piece.batch_size` rows."""
    try:
        if layout is not None:
            decoder = RecordBatchDecoder(layout)
            yield from decoder.batches(
                list(piece.files),
                piece.compression,
                piece.batch_size,
                shard=(piece.index, piece.count),
            )
            return
        records = sequential_records(list(piece.files), piece.compression).batch(piece.batch_size)
        if piece.count > 1:
            records = records.shard(piece.count, piece.index)
        tfx_bsl_decoder = example_coder.ExamplesToRecordBatchDecoder()
        for serialized in records.prefetch(1):
            yield tfx_bsl_decoder.DecodeBatch(serialized.numpy().tolist())
    except tf.errors.InvalidArgumentError as error:
        # An example off its recorded layout: tfx_bsl's decoder (TFX's path) judges it.
        raise Inexact(f"an example off the ingest's layout ({error.message[:200]})") from error


class StatisticsCombineFn(beam.CombineFn):
    """TFDV's in-memory statistics generators (`get_generators(options, in_memory=True)`:
    top-k and unique counts from sketches) as one CombineFn over record batches."""

    def __init__(self, options: tfdv.StatsOptions) -> None:
        self._options = options
        self._generators: list[Any] | None = None

    @property
    def generators(self) -> list[Any]:
        if self._generators is None:
            self._generators = stats_impl.get_generators(self._options, in_memory=True)
        return self._generators

    def __getstate__(self) -> dict[str, Any]:
        # The generators are rebuilt where the fn runs: only the options travel.
        return {"_options": self._options, "_generators": None}

    def setup(self) -> None:
        for generator in self.generators:
            generator.setup()

    def create_accumulator(self) -> list[Any]:
        return [g.create_accumulator() for g in self.generators]

    def add_input(self, accumulator: list[Any], batch: pa.RecordBatch) -> list[Any]:
        return [g.add_input(a, batch) for g, a in zip(self.generators, accumulator, strict=True)]

    def merge_accumulators(self, accumulators: Any) -> list[Any]:
        merged: list[Any] | None = None
        for accumulator in accumulators:
            merged = (
                accumulator
                if merged is None
                else [
                    g.merge_accumulators([a, b])
                    for g, a, b in zip(self.generators, merged, accumulator, strict=True)
                ]
            )
        return self.create_accumulator() if merged is None else merged

    def compact(self, accumulator: list[Any]) -> list[Any]:
        return [g.compact(a) for g, a in zip(self.generators, accumulator, strict=True)]

    def extract_output(self, accumulator: list[Any]) -> statistics_pb2.DatasetFeatureStatisticsList:
        return stats_impl.extract_statistics_output(accumulator, self.generators)


def check_exact(statistics: statistics_pb2.DatasetFeatureStatisticsList) -> None:
    """Raises Inexact where a feature's distinct values reach the sketches' exact limit."""
    for dataset in statistics.datasets:
        for feature in dataset.features:
            if feature.HasField("string_stats") and (
                feature.string_stats.unique >= EXACT_DISTINCT_LIMIT
            ):
                name = ".".join(feature.path.step) or feature.name
                raise Inexact(
                    f"feature {name!r} has {feature.string_stats.unique} distinct values "
                    f"(sketches are exact below {EXACT_DISTINCT_LIMIT})"
                )


def piece_accumulator(combine: StatisticsCombineFn, piece: Piece, layout: Layout | None) -> Any:
    """One piece's compacted accumulator (the Beam form's work in one task)."""
    accumulator = combine.create_accumulator()
    for batch in decode_piece(piece, layout):
        accumulator = combine.add_input(accumulator, batch)
    return combine.compact(accumulator)


def file_accumulators(
    combine: StatisticsCombineFn, file_pieces: list[Piece], layout: Layout | None
) -> list[Any]:
    """The accumulators of all pieces of one file from one read of it (the in-process
    pass): batch i goes to piece i mod count, as `decode_piece` shards them."""
    first = file_pieces[0]
    count = first.count
    accumulators = [combine.create_accumulator() for _ in range(count)]
    whole = Piece(first.files, first.compression, 0, 1, first.batch_size)
    for i, batch in enumerate(decode_piece(whole, layout)):
        accumulators[i % count] = combine.add_input(accumulators[i % count], batch)
    return [combine.compact(a) for a in accumulators]


def merged_statistics(
    combine: StatisticsCombineFn, accumulators: Iterable[Any]
) -> statistics_pb2.DatasetFeatureStatisticsList:
    """The split's statistics from its pieces' accumulators, given in piece order."""
    return combine.extract_output(combine.merge_accumulators(accumulators))
