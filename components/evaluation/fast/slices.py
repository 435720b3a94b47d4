"""TFMA's slice keys of the evaluated examples, from decoded feature columns.

TFMA decodes each batch of serialized examples without a schema (tfx_bsl's
`ExamplesToRecordBatchDecoder`, as TFX's Evaluator reads the split), splits it
into one feature dict per example, and its slicer gives each example, for each
slicing spec, one slice key per combination of the distinct values of the spec's
features (`SliceAccessor.get` is `np.unique` of the values; bytes become text): a
feature with no value puts the example in no slice of that spec, and a feature
with several values puts it in several. The project's extractors
(components/evaluation/extractors.py) add `<name>_bucket` before that, from the first value of
`<name>` ("missing" without one). Here the same keys come from the decoded columns:
(example, value) pairs per feature, joined per spec, grouped with numpy. The Evaluator
takes them a batch at a time (`SliceFeatures.batch_slices`: the batch's rows of each
slice, nothing kept); `SliceFeatures.add` then `slices` gives those of every example.

What the fast path does not cover raises Unsupported (TFMA then runs): value
matches, SQL slicing, cross slicing, a slicing feature that is also a transformed
feature (TFMA would read the transformed value), NaN slice values, a bucketed
feature that is not numeric.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_model_analysis.proto import config_pb2
from tfx_bsl.coders import example_coder

from components.evaluation.fast.columns import Unsupported
from components.evaluation.slice_buckets import BUCKET_SUFFIX, bucket_label
from components.example_gen.layout import Layout, RecordBatchDecoder

OVERALL: tuple = ()
# The schema-less decoder's value types, as a schema names them.
_SCHEMA_TYPES: dict[Any, Any] = {
    "int64": schema_pb2.INT,
    "float": schema_pb2.FLOAT,
    "large_binary": schema_pb2.BYTES,
    "binary": schema_pb2.BYTES,
}


def slicing_refusal(eval_config: Any, buckets: dict[str, tuple[float, ...]]) -> str | None:
    """Why these slicing specs cannot be computed here, or None."""
    if eval_config.cross_slicing_specs:
        return "cross slicing specs"
    for spec in eval_config.slicing_specs:
        if spec.feature_values:
            return "slicing specs with feature values"
        if spec.slice_keys_sql:
            return "slicing specs in SQL (slice_keys_sql)"
        if len(set(spec.feature_keys)) != len(spec.feature_keys):
            return "a slicing spec naming a feature twice"
        for name in spec.feature_keys:
            if name.endswith(BUCKET_SUFFIX) and name.removesuffix(BUCKET_SUFFIX) not in buckets:
                return f"slicing feature {name!r} (a bucket feature without buckets)"
    return None


def slicing_columns(eval_config: Any) -> list[tuple[str, ...]]:
    """Each distinct slicing spec's features, in the config's order (() is the whole split)."""
    specs = list(eval_config.slicing_specs) or [config_pb2.SlicingSpec()]
    found: list[tuple[str, ...]] = []
    for spec in specs:
        columns = tuple(sorted(spec.feature_keys))
        if columns not in found:
            found.append(columns)
    return found


@dataclass
class Pairs:
    """A feature's distinct (example, value) pairs: rows ascending, codes into `values`."""

    rows: np.ndarray
    codes: np.ndarray
    values: list


class SliceFeatures:
    """The slicing features of examples batch by batch: each batch's slices
    (`batch_slices`), or every batch's features kept (`add`), then all slices (`slices`)."""

    def __init__(
        self, eval_config: Any, buckets: dict[str, tuple[float, ...]], layout: Layout | None = None
    ):
        self.specs = slicing_columns(eval_config)
        names = {name for spec in self.specs for name in spec}
        self.buckets = {
            name: tuple(buckets[name.removesuffix(BUCKET_SUFFIX)])
            for name in names
            if name.endswith(BUCKET_SUFFIX) and name.removesuffix(BUCKET_SUFFIX) in buckets
        }
        self.raw = sorted(
            {n for n in names if n not in self.buckets}
            | {n.removesuffix(BUCKET_SUFFIX) for n in self.buckets}
        )
        # Schema-less until every slicing feature's type is known, then only those
        # features (the same columns, without decoding the others).
        self._decoder: Any = example_coder.ExamplesToRecordBatchDecoder() if self.raw else None
        self._narrow = False
        # Examples of a layout the ingest recorded: TensorFlow parses just these
        # features into the same columns (untyped ones have no values to slice by).
        self._layout_decoder = None
        if self.raw and layout is not None and set(self.raw) <= set(layout.columns):
            typed = [n for n in self.raw if n not in layout.untyped]
            self._layout_decoder = RecordBatchDecoder(layout, typed)
        # Per feature and batch: the examples of its values (a (start, count) range when
        # each example has exactly one, as most do) and the values themselves, bytes as
        # int32 codes into `_tables`: a few bytes per example held, not a Python object,
        # so that memory stays small at millions of evaluated examples.
        self._rows: dict[str, list[np.ndarray | tuple[int, int]]] = {n: [] for n in self.raw}
        self._values: dict[str, list[np.ndarray]] = {name: [] for name in self.raw}
        self._tables: dict[str, dict[Any, int]] = {}
        self._types: dict[str, set] = {name: set() for name in self.raw}
        self.examples = 0

    @property
    def names(self) -> set[str]:
        """The features the slicing specs name (bucket features by their own name)."""
        return {name for spec in self.specs for name in spec}

    def add(self, serialized: Any) -> None:
        """One batch of serialized examples (a string tensor), kept for `slices`."""
        count, found = self._batch_values(serialized)
        for name, (rows, values) in found.items():
            self._rows[name].append(_batch_rows(rows, self.examples, count))
            self._values[name].append(values)
        self.examples += count

    def batch_slices(self, serialized: Any) -> dict[tuple, np.ndarray]:
        """One batch's slices, nothing kept: slice key -> the batch's rows in that slice
        (the keys and rows `slices` gives for these examples alone)."""
        count, found = self._batch_values(serialized)
        empty = (np.zeros(0, np.int64), np.zeros(0))
        pairs = {}
        for name in self.names:
            rows, values = found.get(self._raw(name), empty)
            pairs[name] = self._pairs(name, rows.astype(np.int64), values, count)
        self.examples += count
        sliced: dict[tuple, np.ndarray] = {}
        for spec in self.specs:
            sliced.update(spec_slices(spec, [pairs[name] for name in spec], count))
        return sliced

    def ordered(self, keys: Any) -> list[tuple]:
        """Slice keys in the order `slices` gives them: the specs' order, then within a
        spec by value (a bucket feature's slices in bucket order, "missing" last)."""
        spec_index = {spec: i for i, spec in enumerate(self.specs)}
        ranks = {name: _bucket_ranks(bounds) for name, bounds in self.buckets.items()}

        def place(key: tuple) -> tuple:
            names = tuple(name for name, _ in key)
            values = tuple(ranks[n][v] if n in ranks else v for n, v in key)
            return spec_index[names], values

        return sorted(keys, key=place)

    def _batch_values(self, serialized: Any) -> tuple[int, dict[str, tuple[np.ndarray, Any]]]:
        """A batch's count of examples and, per slicing feature with values in it, the
        batch's examples of its values (parent indices) and the values."""
        count = int(serialized.shape[0])
        found: dict[str, tuple[np.ndarray, Any]] = {}
        if self._decoder is None:
            return count, found
        batch = self._decode(serialized, count)
        for name in self.raw:
            index = batch.schema.get_field_index(name)
            kind = batch.column(index).type if index >= 0 else pa.null()
            # Absent, or untyped (`Feature()`, null type) in every example of the batch.
            if pa.types.is_null(kind) or pa.types.is_null(kind.value_type):
                continue
            column = batch.column(index)
            self._types[name].add(str(column.type.value_type))
            if len(self._types[name]) > 1:
                raise Unsupported(f"slicing feature {name!r} has values of several types")
            parents = pc.list_parent_indices(column).to_numpy(zero_copy_only=False)
            found[name] = (parents, self._encode(name, column.flatten()))
        self._narrow_decoder()
        return count, found

    def _encode(self, name: str, values: pa.Array) -> np.ndarray:
        """Numbers as they are; bytes as codes into the feature's table of distinct values."""
        kind = values.type
        if not any(
            is_(kind)
            for is_ in (
                pa.types.is_binary,
                pa.types.is_large_binary,
                pa.types.is_string,
                pa.types.is_large_string,
            )
        ):
            return values.to_numpy(zero_copy_only=False)
        table = self._tables.setdefault(name, {})
        encoded = pc.dictionary_encode(values)
        remap = np.array(
            [table.setdefault(v, len(table)) for v in encoded.dictionary.to_pylist()], np.int32
        )
        return remap[encoded.indices.to_numpy(zero_copy_only=False)]

    def _decode(self, serialized: Any, count: int) -> pa.RecordBatch:
        if self._layout_decoder is not None:
            try:
                parsed = self._layout_decoder.parse(serialized)
            except tf.errors.InvalidArgumentError as error:
                raise Unsupported(f"an example off the ingest's layout: {error.message}") from error
            return self._layout_decoder.record_batch(parsed, count)
        try:
            return self._decoder.DecodeBatch(list(serialized.numpy()))
        except RuntimeError as error:  # a feature of another type than seen before
            raise Unsupported(f"slicing features of several types: {error}") from error

    def _narrow_decoder(self) -> None:
        """Once every slicing feature's type is known, decode only those features."""
        if self._narrow or self._layout_decoder is not None:
            return  # narrowed already, or the layout's parser reads only these features
        if not all(self._types[name] for name in self.raw):
            return
        schema = schema_pb2.Schema()
        for name in self.raw:
            (arrow_type,) = self._types[name] if len(self._types[name]) == 1 else (None,)
            kind = _SCHEMA_TYPES.get(arrow_type)
            if kind is None:
                return  # several types (refused later), or one the schema cannot say
            schema.feature.add(name=name, type=kind)
        self._decoder = example_coder.ExamplesToRecordBatchDecoder(schema.SerializeToString())
        self._narrow = True

    def _flat(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if len(self._types[name]) > 1:
            raise Unsupported(f"slicing feature {name!r} has values of several types")
        if not self._rows[name]:
            return np.zeros(0, np.int64), np.zeros(0)
        rows = [
            np.arange(r[0], r[0] + r[1], dtype=np.int64) if isinstance(r, tuple) else r
            for r in self._rows[name]
        ]
        return np.concatenate(rows), np.concatenate(self._values[name])

    def pairs(self, name: str) -> Pairs:
        """A slicing feature's pairs over every added example (a bucket feature: one
        pair for every example)."""
        return self._pairs(name, *self._flat(self._raw(name)), self.examples)

    def _raw(self, name: str) -> str:
        """The decoded feature a slicing feature comes from (a bucket feature's number)."""
        return name.removesuffix(BUCKET_SUFFIX) if name in self.buckets else name

    def _pairs(self, name: str, rows: np.ndarray, values: np.ndarray, examples: int) -> Pairs:
        """`name`'s pairs from the (example, value) pairs of its raw feature."""
        if name in self.buckets:
            raw = name.removesuffix(BUCKET_SUFFIX)
            if raw in self._tables:
                raise Unsupported(f"bucketed feature {raw!r} of bytes (not numeric)")
            return bucket_pairs(rows, values, examples, self.buckets[name])
        table = self._tables.get(name)
        decoded = list(table) if table is not None else None  # code -> value (insertion order)
        return feature_pairs(rows, values, name, decoded)

    def slices(self) -> dict[tuple, np.ndarray]:
        """Slice key (TFMA's tuple) -> the rows of the examples in that slice."""
        pairs = {name: self.pairs(name) for name in self.names}
        found: dict[tuple, np.ndarray] = {}
        for spec in self.specs:
            found.update(spec_slices(spec, [pairs[name] for name in spec], self.examples))
        return found


def _bucket_ranks(bounds: tuple[float, ...]) -> dict[str, int]:
    """Each bucket label's place in bucket order ("missing" last): the order in which
    `bucket_pairs` codes a bucket feature's values."""
    # One value in each bucket: below the first bound, then at each bound.
    inside = [bounds[0] - 1.0, *bounds]
    labels = [bucket_label(v, bounds) for v in inside] + [bucket_label(None, bounds)]
    return {label: i for i, label in enumerate(labels)}


def _as_slice_value(value: Any, name: str) -> Any:
    """A value as TFMA's slicer keys it: bytes as text, numbers as Python numbers."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as error:
            raise Unsupported(f"slicing feature {name!r} has a non-UTF-8 value") from error
    if isinstance(value, float) and np.isnan(value):
        raise Unsupported(f"slicing feature {name!r} has NaN values")
    return value


def _batch_rows(parents: np.ndarray, start: int, count: int) -> np.ndarray | tuple[int, int]:
    """The examples of a batch's values: (start, count) when each has exactly one value."""
    if parents.size == count and (count == 0 or np.array_equal(parents, np.arange(count))):
        return (start, count)
    return parents.astype(np.int64) + start


def feature_pairs(
    rows: np.ndarray, values: np.ndarray, name: str, decoded: list | None = None
) -> Pairs:
    """An example's distinct values of a feature (TFMA: `np.unique(values).tolist()`).

    `decoded`: the values when `values` are codes into it; the distinct values are then
    put in their own sorted order, the order `np.unique` of the values themselves gives.
    """
    if not rows.size:
        return Pairs(rows, np.zeros(0, np.int64), [])
    distinct, codes = np.unique(values, return_inverse=True)
    codes = codes.reshape(-1).astype(np.int64)
    if decoded is not None:
        found = [decoded[c] for c in distinct.tolist()]
        order = sorted(range(len(found)), key=found.__getitem__)
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        codes = rank[codes]
        distinct = np.array([found[i] for i in order], dtype=object)
    combined = np.unique(rows * len(distinct) + codes)
    return Pairs(
        combined // len(distinct),
        combined % len(distinct),
        [_as_slice_value(v, name) for v in distinct.tolist()],
    )


def bucket_pairs(
    rows: np.ndarray, values: np.ndarray, examples: int, bounds: tuple[float, ...]
) -> Pairs:
    """`<name>_bucket` of every example: the bucket of its first value of `<name>`
    (components/evaluation/extractors.py's add_buckets), "missing" when it has none."""
    if values.dtype.kind not in "iuf":
        raise Unsupported(f"bucketed feature of type {values.dtype} (not numeric)")
    first_rows, first = np.unique(rows, return_index=True)
    value = np.full(examples, np.nan)
    value[first_rows] = values[first].astype(np.float64)
    # 0 below the first bound, i in [bound i-1, bound i), len(bounds) at or above the
    # last; missing (no value, or NaN) last of all.
    index = np.searchsorted(np.asarray(bounds, np.float64), value, side="right")
    index[np.isnan(value)] = len(bounds) + 1
    present = np.unique(index)
    labels = {}
    for i in present.tolist():
        example = int(np.flatnonzero(index == i)[0])
        labels[i] = bucket_label(None if i > len(bounds) else float(value[example]), bounds)
    codes = np.searchsorted(present, index)
    return Pairs(np.arange(examples, dtype=np.int64), codes, [labels[i] for i in present.tolist()])


def spec_slices(columns: tuple[str, ...], pairs: list[Pairs], examples: int) -> dict:
    """One spec's slices: the cartesian product of each example's values of its features."""
    if not columns:
        return {OVERALL: np.arange(examples, dtype=np.int64)}
    rows = np.arange(examples, dtype=np.int64)
    # Each (example, combination) as one int64 in mixed radix: its features' codes in
    # order, so sorting the keys sorts the combinations as the codes' columns would.
    key = np.zeros(examples, np.int64)
    radix, every = 1, np.arange(examples)
    dense = True  # rows is still every example once
    for feature in pairs:
        size = max(len(feature.values), 1)
        radix *= size
        if radix >= 2**62:
            raise Unsupported(f"slicing spec {columns}: too many value combinations")
        if dense and np.array_equal(feature.rows, every):
            # Exactly one value per example (most features): nothing repeats or drops.
            key = key * size + feature.codes
            continue
        dense = False
        counts = np.bincount(feature.rows, minlength=examples)
        starts = np.cumsum(counts) - counts
        repeat = counts[rows]
        combo = np.repeat(np.arange(rows.size), repeat)
        within = np.arange(combo.size) - np.repeat(np.cumsum(repeat) - repeat, repeat)
        picked = starts[rows[combo]] + within
        rows = rows[combo]
        key = key[combo] * size + feature.codes[picked]
    if not rows.size:
        return {}
    groups, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    split = np.split(rows[order], np.cumsum(np.bincount(inverse))[:-1])
    found = {}
    for group, members in zip(groups.tolist(), split, strict=True):
        codes = []
        for feature in reversed(pairs):
            group, code = divmod(group, max(len(feature.values), 1))
            codes.append(code)
        key_values = (
            (name, feature.values[code])
            for name, feature, code in zip(columns, pairs, reversed(codes), strict=True)
        )
        found[tuple(sorted(key_values))] = np.sort(members)
    return found
