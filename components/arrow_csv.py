"""Columnar CSV reading and native tf.Example encoding for ExampleGen.

`pyarrow.csv` reads a file in record batches with the column types of the
curated schema (INT -> int64, FLOAT -> float64 then float32 as FloatList
stores, BYTES -> UTF-8-checked string then binary); tfx_bsl encodes the
batches to tf.Example in C++. The bytes produced are exactly TFX's
`Example.SerializeToString(deterministic=True)` of what CsvExampleGen builds
for the same row (features sorted by name, an empty cell as an empty list of
the column's type), so TFX's hash partitioning puts every row in the same
split as CsvExampleGen does.

tfx_bsl's encoder writes an example's features in hash-map order, which is
not deterministic, so each column is encoded on its own (one feature per
example) and the features are stitched together in name order with Arrow
kernels: no per-row Python.

Anything this reader does not accept the way Python's int()/float() do (or
that the CSV checks reject) raises `ArrowCsvError`; the executor then runs the
CSV checks for a precise message, or falls back to TFX's reader.
"""

from __future__ import annotations

import csv
from collections.abc import Collection, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from tfx_bsl.coders import example_coder

from components.csv_checks import BYTES, FLOAT, INT

# Bytes of CSV per record batch: ~100k taxi rows, ~30 MB of serialized examples.
BLOCK_SIZE = 16 * 1024 * 1024

_ARROW_TYPES = {INT: pa.int64(), FLOAT: pa.float64(), BYTES: pa.string()}


class ArrowCsvError(ValueError):
    """The Arrow reader cannot read a file exactly as CsvExampleGen would."""


def read_header(path: str) -> list[str]:
    """The column names of `path`'s header line."""
    with pa.input_stream(path) as stream:
        first = stream.read(1 << 16).split(b"\n", 1)[0]
    if not first.strip():
        raise ArrowCsvError(f"{path}: no header line")
    try:
        return next(csv.reader([first.decode("utf-8").rstrip("\r")]))
    except (UnicodeDecodeError, csv.Error) as e:
        raise ArrowCsvError(f"{path}: unreadable header: {e}") from e


def _options(
    header: Sequence[str], columns: Mapping[str, str]
) -> tuple[pacsv.ReadOptions, pacsv.ParseOptions, pacsv.ConvertOptions]:
    unknown = [c for c in header if c not in columns]
    if unknown:
        raise ArrowCsvError(f"columns without a schema type: {unknown}")
    if len(set(header)) != len(header):
        raise ArrowCsvError("duplicate column names")
    read = pacsv.ReadOptions(block_size=BLOCK_SIZE, use_threads=True)
    parse = pacsv.ParseOptions(delimiter=",", newlines_in_values=False, ignore_empty_lines=True)
    convert = pacsv.ConvertOptions(
        column_types={c: _ARROW_TYPES[columns[c]] for c in header},
        null_values=[""],
        true_values=[],
        false_values=[],
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
        check_utf8=True,
    )
    return read, parse, convert


def read_batches(
    path: str, columns: Mapping[str, str], header: Sequence[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """Record batches of `path`, typed by `columns` (name -> INT/FLOAT/BYTES).

    Raises ArrowCsvError for anything CsvExampleGen (with our CSV checks) would
    not read to the same values.
    """
    header = list(header) if header is not None else read_header(path)
    read, parse, convert = _options(header, columns)
    try:
        reader = pacsv.open_csv(
            path, read_options=read, parse_options=parse, convert_options=convert
        )
        if reader.schema.names != header:
            raise ArrowCsvError(f"{path}: header {reader.schema.names} != {header}")
        for batch in reader:
            for name in header:
                if columns[name] == FLOAT:
                    column = batch.column(name)
                    if column.null_count < len(column) and pc.any(pc.is_inf(column)).as_py():
                        raise ArrowCsvError(f"{path}: column {name!r} holds an infinite value")
            yield batch
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
        raise ArrowCsvError(f"{path}: {e}") from e


def _as_lists(column: pa.Array, kind: str) -> pa.Array:
    """One-value lists, and an empty list for a missing cell (as CsvExampleGen)."""
    if kind == FLOAT:
        column = column.cast(pa.float32(), safe=False)
    elif kind == BYTES:
        column = column.cast(pa.binary())
    n = len(column)
    if column.null_count == 0:
        offsets = np.arange(n + 1, dtype=np.int32)
        values = column
    else:
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(valid, out=offsets[1:])
        values = column.drop_null()
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)


def _varint_matrix(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varint encodings of non-negative `values` (< 2**28) as (n, 4) bytes and lengths."""
    v = values.astype(np.uint32)
    lengths = 1 + (v >= 1 << 7) + (v >= 1 << 14) + (v >= 1 << 21)
    out = np.zeros((len(v), 4), dtype=np.uint8)
    for i in range(4):
        byte = (v >> (7 * i)) & 0x7F
        more = lengths > i + 1
        out[:, i] = byte | (more.astype(np.uint32) << 7)
    return out, lengths.astype(np.int64)


def _binary_from(data: np.ndarray, lengths: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _feature_entries(name: str, values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Per row, the bytes of one `Features.feature` map entry (tag included), and lengths."""
    encoded = pa.array(
        example_coder.RecordBatchToExamples(pa.RecordBatch.from_arrays([values], [name])),
        pa.large_binary(),
    )
    _, offsets_buf, data_buf = encoded.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[
        encoded.offset : encoded.offset + len(encoded) + 1
    ]
    data = np.frombuffer(data_buf, dtype=np.uint8)
    # Each is Example{features: <0x0a varint(len) F>}; F is the entry with its tag.
    # Strip the outer tag and varint: 1 + varint size of (total - header).
    totals = np.diff(offsets)
    header = np.where(totals <= 129, 2, np.where(totals <= 16386, 3, 4))
    if (totals > 2_097_000).any():
        raise ArrowCsvError(f"a value of column {name!r} is too long")
    starts = offsets[:-1]
    keep = np.ones(int(offsets[-1]), dtype=bool)
    keep[starts] = False
    keep[starts + 1] = False
    keep[starts[header >= 3] + 2] = False
    keep[starts[header >= 4] + 3] = False
    if offsets[0] != 0:
        keep[: offsets[0]] = False
    stripped = data[: len(keep)][keep]
    lengths = totals - header
    return _binary_from(stripped, lengths), lengths


def _kindless_entries(name: str, n: int) -> tuple[pa.Array, np.ndarray]:
    """`Feature()` with no value list, as CsvExampleGen writes for a column with no values."""
    key = name.encode()
    entry = b"\x0a" + bytes([len(key)]) + key + b"\x12\x00"
    if len(entry) >= 128:
        raise ArrowCsvError(f"column name {name!r} is too long")
    piece = b"\x0a" + bytes([len(entry)]) + entry
    return pa.array([piece] * n, pa.large_binary()), np.full(n, len(piece), dtype=np.int64)


def encode_batch(
    batch: pa.RecordBatch, columns: Mapping[str, str], empty_columns: Collection[str] = ()
) -> list[bytes]:
    """Serialized tf.Examples of `batch`, byte-identical to deterministic serialization.

    `empty_columns`: columns without a single value in the whole input split,
    which CsvExampleGen's type inference leaves untyped (`Feature()`).
    """
    names = sorted(batch.schema.names)
    entries, total = [], np.zeros(batch.num_rows, dtype=np.int64)
    for name in names:
        if name in empty_columns:
            piece, lengths = _kindless_entries(name, batch.num_rows)
        else:
            values = _as_lists(batch.column(name), columns[name])
            piece, lengths = _feature_entries(name, values)
        entries.append(piece)
        total += lengths
    if (total >= 1 << 28).any():
        raise ArrowCsvError("an example is too large")
    varint, vlen = _varint_matrix(total)
    head = np.concatenate([np.full((len(total), 1), 0x0A, dtype=np.uint8), varint], axis=1)
    keep = np.arange(5)[None, :] < (vlen + 1)[:, None]
    headers = _binary_from(head[keep], vlen + 1)
    joined = pc.binary_join_element_wise(headers, *entries, pa.scalar(b"", pa.large_binary()))
    return joined.to_pylist()
