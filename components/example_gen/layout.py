"""What the CSV ExampleGen promises about its examples, and the fast decoder that uses it.

TFDV and tf.Transform read tf.Examples through tfx_bsl's `ExamplesToRecordBatchDecoder`,
which parses each example into a C++ proto on one thread: about 15 us per taxi
example, most of StatisticsGen's time at 1M rows. The Arrow CSV ingest writes
examples of one fixed shape: every example has every column of the dataset file,
typed as declared, holding one value or (a missing cell) none; a column without
any value in its split is untyped in every example (TFX's `Feature()`), which
tfx_bsl decodes as nulls. The ingest records that shape on the Examples artifact
(`EXAMPLE_LAYOUT`), and `RecordBatchDecoder` decodes such examples with
`tf.io.parse_example` in TensorFlow's threads into the very record batch tfx_bsl's
schema-less decoder makes (the same columns in the same order, types, offsets and
values; tests/unit/components/example_gen/test_example_layout.py checks `RecordBatch.equals` on the ingest's
own output).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
import tensorflow as tf
from tfx import types

from components.base.custom_properties import custom_str

# JSON {"columns": {name: "INT" | "FLOAT" | "BYTES"}, "untyped": [name, ...]} on an
# Examples artifact: "untyped" are the columns without a value in the split.
EXAMPLE_LAYOUT = "example_layout"

_TF_TYPES = {"INT": tf.int64, "FLOAT": tf.float32, "BYTES": tf.string}
# tfx_bsl's decoder: large lists of int64, float32 or large_binary.
ARROW_TYPES = {"INT": pa.int64(), "FLOAT": pa.float32(), "BYTES": pa.large_binary()}


@dataclass(frozen=True)
class Layout:
    """Every example has exactly `columns` (one value or none each), `untyped` ones untyped."""

    columns: dict[str, str]
    untyped: frozenset[str] = frozenset()


def set_layout(
    artifact: types.Artifact, columns: Mapping[str, str], untyped: Collection[str] = ()
) -> None:
    """Records the layout of every example of `artifact`."""
    unknown = {t for t in columns.values() if t not in _TF_TYPES}
    if unknown:
        raise ValueError(f"column types {sorted(unknown)} are not INT, FLOAT or BYTES")
    if not set(untyped) <= set(columns):
        raise ValueError(f"untyped columns {sorted(set(untyped) - set(columns))} are not columns")
    layout = {"columns": dict(sorted(columns.items())), "untyped": sorted(untyped)}
    artifact.set_string_custom_property(EXAMPLE_LAYOUT, json.dumps(layout))


def layout_of(artifact: types.Artifact) -> Layout | None:
    """What `artifact`'s examples are known to look like, or None when nothing is promised."""
    text = custom_str(artifact, EXAMPLE_LAYOUT)
    if not text:
        return None
    recorded = json.loads(text)
    columns = recorded.get("columns")
    if not columns or any(t not in _TF_TYPES for t in columns.values()):
        return None
    return Layout(dict(columns), frozenset(recorded.get("untyped") or ()))


def sequential_records(files: list[str], compression: str) -> tf.data.Dataset:
    """The files' serialized records, one file after another.

    On two cores TFRecordDataset's parallel reads (`num_parallel_reads`) run
    several times slower than this sequential read."""
    return tf.data.TFRecordDataset(files, compression_type=compression, buffer_size=1 << 22)


class RecordBatchDecoder:
    """Serialized examples of a known layout -> tfx_bsl's schema-less record batch
    (`names`: only these columns, in this order)."""

    def __init__(self, layout: Layout, names: list[str] | None = None) -> None:
        # tfx_bsl orders columns as the examples' deterministic serialization orders
        # the map: by name.
        self._names = sorted(layout.columns) if names is None else list(names)
        self._types = [layout.columns[n] for n in self._names]
        self._untyped = layout.untyped
        # Untyped columns are not parsed: tfx_bsl decodes them as nulls.
        self.spec = {
            n: tf.io.RaggedFeature(_TF_TYPES[t], row_splits_dtype=tf.int64)
            for n, t in zip(self._names, self._types, strict=True)
            if n not in self._untyped
        }

    def parse(self, serialized: tf.Tensor) -> dict[str, tf.RaggedTensor]:
        """A batch of serialized examples parsed (a tf.data map function)."""
        return tf.io.parse_example(serialized, self.spec)

    def record_batch(self, parsed: Mapping[str, tf.RaggedTensor], rows: int) -> pa.RecordBatch:
        arrays = []
        for name, kind in zip(self._names, self._types, strict=True):
            if name in self._untyped:
                arrays.append(pa.nulls(rows))
                continue
            ragged = parsed[name]
            values = pa.array(ragged.values.numpy(), type=ARROW_TYPES[kind])
            arrays.append(
                pa.LargeListArray.from_arrays(pa.array(ragged.row_splits.numpy()), values)
            )
        return pa.RecordBatch.from_arrays(arrays, self._names)

    def batches(
        self,
        files: list[str],
        compression: str,
        batch_size: int,
        shard: tuple[int, int] = (0, 1),
    ) -> Iterator[pa.RecordBatch]:
        """The files' examples in order, as record batches of up to `batch_size`
        (`shard=(i, n)`: only batches i, i + n, ...; the records are read, not parsed)."""
        records = sequential_records(files, compression).batch(batch_size)
        index, count = shard
        if count > 1:
            records = records.shard(count, index)
        dataset = records.map(
            lambda s: (self.parse(s), tf.shape(s)[0]), num_parallel_calls=2, deterministic=True
        )
        for parsed, rows in dataset.prefetch(2):
            yield self.record_batch(parsed, int(rows))
