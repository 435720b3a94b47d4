"""The analysis' Beam source for examples of a known layout: decoded by TensorFlow.

TFX's TFXIO reads the analysis split record by record in Python (Beam's TFRecord
source), batches the records and decodes each batch with tfx_bsl's decoder: about
two thirds of the analysis' CPU time at 1M rows. When the ingest recorded the
examples' layout (components/example_gen/layout.py), `LayoutTFExampleRecord` instead
hands each worker whole files (in this machine's processes) or pieces of files (on a
cluster: components/io/pieces.py, a large file's batches interleaved over up to 8
pieces, so that one GZIP file's decoding spreads over tasks), read by TensorFlow's C++
reader and decoded by
`tf.io.parse_example` into the record batches tfx_bsl's decoder makes with the
same schema: the schema's columns in its order and types, every example holding
every column (nulls for a column the split has no value of). Batch boundaries differ (tf.Transform's analyzers do not depend on
them); everything else about the TFXIO (schema, tensor representations,
projection) is TFX's.
"""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam
import pyarrow as pa
import tensorflow as tf
from tfx_bsl.tfxio import tf_example_record

from compat import tfx_bsl as tfx_bsl_internals
from components.example_gen.layout import ARROW_TYPES, Layout, RecordBatchDecoder
from components.io.pieces import Piece, pieces

# The size tfx_bsl's batching grows TFX's analysis batches to (`_BATCH_SIZE_CAP`).
# tf.Transform reduces each batch in float32 before combining, so a mean or a
# variance moves in its last bits with the batch size: the same size keeps the
# analysis' constants closest to TFX's.
BATCH_SIZE = 1000


def arrow_schema(columns: dict[str, str], names: list[str]) -> pa.Schema:
    """The record batches' schema when the layout decodes `names` (in that order)."""
    return pa.schema([(n, pa.large_list(ARROW_TYPES[columns[n]])) for n in names])


class LayoutTFExampleRecord(tf_example_record.TFExampleRecord):
    """TFX's TFXIO for tf.Examples in TFRecords, with the layout's whole-file source."""

    def __init__(
        self, file_pattern, schema, layout: Layout, telemetry_descriptors=None, by_pieces=False
    ):
        super().__init__(
            file_pattern=file_pattern, schema=schema, telemetry_descriptors=telemetry_descriptors
        )
        self._layout = layout
        # True on a cluster: a large file is cut into pieces, each a task of its own.
        self._by_pieces = by_pieces

    @classmethod
    def covers(cls, schema, layout: Layout) -> str | None:
        """Why examples of `layout` cannot be read for `schema` this way, or None."""
        probe = tf_example_record.TFExampleRecord(file_pattern=["unused"], schema=schema)
        names = probe.ArrowSchema().names
        missing = [n for n in names if n not in layout.columns]
        if missing:
            return f"schema features the examples do not have: {missing[:5]}"
        if not probe.ArrowSchema().equals(arrow_schema(layout.columns, names)):
            return "schema types that differ from the examples'"
        return None

    def _ProjectImpl(self, tensor_names):  # TFXIO's name
        projected = super()._ProjectImpl(tensor_names)
        return LayoutTFExampleRecord(
            self._file_pattern,
            tfx_bsl_internals.schema_of(projected),  # the projection TFX computed
            self._layout,
            self.telemetry_descriptors,
            self._by_pieces,
        )

    def BeamSource(self, batch_size=None) -> beam.PTransform:  # TFXIO's name
        del batch_size  # None from TFX: Beam's adaptive batches, up to BATCH_SIZE
        schema = self.ArrowSchema()
        patterns = list(self._file_pattern)
        by_pieces = self._by_pieces

        @beam.typehints.with_output_types(pa.RecordBatch)
        def read(pipeline):
            files = sorted(f for p in patterns for f in tf.io.gfile.glob(p))
            if not files:
                raise ValueError(f"no example files match {patterns}")
            return (
                pipeline
                | "Files" >> beam.Create(_units(files, by_pieces))
                # Spread the pieces over the workers (Create hands them all to one).
                | "Spread" >> beam.Reshuffle()
                | "Decode" >> beam.ParDo(_DecodePieces(self._layout, schema))
            )

        return beam.ptransform_fn(read)()


def _units(files: list[str], by_pieces: bool) -> list[Piece]:
    """What the workers read: each file whole, or cut into pieces (`by_pieces`)."""
    out: list[Piece] = []
    for path in files:
        compression = "GZIP" if path.endswith(".gz") else ""
        if by_pieces:
            out += pieces([path], compression, BATCH_SIZE)
        else:
            out.append(Piece((path,), compression, batch_size=BATCH_SIZE))
    return out


class _DecodePieces(beam.DoFn):
    """A piece of a TFRecord file -> its examples as record batches of `schema` (the
    TFXIO's)."""

    def __init__(self, layout: Layout, schema: pa.Schema) -> None:
        self._layout = layout
        self._schema = schema

    def process(self, piece: Piece) -> Iterator[pa.RecordBatch]:
        decoder = RecordBatchDecoder(self._layout, self._schema.names)
        shard = (piece.index, piece.count)
        for batch in decoder.batches(list(piece.files), piece.compression, piece.batch_size, shard):
            # Untyped columns: with a schema tfx_bsl types their nulls as the schema says.
            arrays = [
                pa.nulls(batch.num_rows, field.type) if field.name in self._layout.untyped else c
                for field, c in zip(self._schema, batch.columns, strict=True)
            ]
            yield pa.RecordBatch.from_arrays(arrays, schema=self._schema)
