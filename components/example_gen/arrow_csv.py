"""Columnar CSV reading and vectorised tf.Example encoding for ExampleGen.

`pyarrow.csv` reads CSV in record batches with the column types of the
curated schema (INT -> int64, FLOAT -> float64 then float32 as FloatList
stores, BYTES -> UTF-8-checked string then binary). `example_parts` /
`encode_records` then write the protobuf wire format of whole batches with
numpy and Arrow kernels, no per-row Python: the bytes are exactly TFX's
`Example.SerializeToString(deterministic=True)` of what CsvExampleGen builds
for the same row (features sorted by name, an empty cell as an empty list of
the column's type, a column without any value as an untyped Feature), so TFX's
hash partitioning puts every row in the same split as CsvExampleGen does.
(tfx_bsl's C++ encoder was measured at ~9 s per million taxi rows, builds a
Python bytes object per row and writes features in hash-map order; this
encoder takes ~1.3 s of CPU.)

Anything this reader does not accept the way Python's int()/float() do (or
that the CSV checks reject) raises `ArrowCsvError`; the executor then runs the
CSV checks for a precise message, or falls back to TFX's reader.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from components.example_gen.csv_checks import BYTES, FLOAT, INT
from components.io import csv_text, object_storage

# Bytes of CSV pyarrow parses at once (read_batches; parse_block takes whole blocks).
BLOCK_SIZE = 16 * 1024 * 1024

_ARROW_TYPES = {INT: pa.int64(), FLOAT: pa.float64(), BYTES: pa.string()}


class ArrowCsvError(ValueError):
    """The Arrow reader cannot read a file exactly as CsvExampleGen would."""


def read_header(path: str, encoding: str = csv_text.DEFAULT_ENCODING) -> list[str]:
    """The column names of `path`'s header line (a UTF-8 byte-order mark is not part of them)."""
    try:
        header = csv_text.read_header(path, encoding)
    except csv_text.CsvTextError as e:
        raise ArrowCsvError(str(e)) from e
    if not header or not "".join(header).strip():
        raise ArrowCsvError(f"{path}: no header line")
    return [h.rstrip("\r\n") for h in header]


def data_start(path: str) -> int:
    """Byte offset of the first line after the header (local, s3:// or gs://)."""
    try:
        opened = object_storage.open_ranges(path)
    except object_storage.RangeReadError as e:
        raise ArrowCsvError(str(e)) from e
    with opened as stream:
        at = 0
        while chunk := stream.read(1 << 16):
            i = chunk.find(b"\n")
            if i >= 0:
                return at + i + 1
            at += len(chunk)
    return at


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
    path: str,
    columns: Mapping[str, str],
    header: Sequence[str] | None = None,
    *,
    encoding: str = csv_text.DEFAULT_ENCODING,
    finite: Collection[str] = (),
) -> Iterator[pa.RecordBatch]:
    """Record batches of `path`, typed by `columns` (name -> INT/FLOAT/BYTES).

    Raises ArrowCsvError for anything CsvExampleGen (with our CSV checks) would
    not read to the same values. pyarrow skips a UTF-8 byte-order mark itself;
    text of another `encoding` is transcoded to UTF-8.
    """
    header = list(header) if header is not None else read_header(path, encoding)
    read, parse, convert = _options(header, columns)
    if not csv_text.is_utf8(encoding):
        read.encoding = encoding
    try:
        reader = pacsv.open_csv(
            path, read_options=read, parse_options=parse, convert_options=convert
        )
        if reader.schema.names != header:
            raise ArrowCsvError(f"{path}: header {reader.schema.names} != {header}")
        for batch in reader:
            _check_finite(batch, columns, path, finite)
            yield batch
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
        raise ArrowCsvError(f"{path}: {e}") from e


def parse_block(
    block: bytes,
    header: Sequence[str],
    columns: Mapping[str, str],
    where: str,
    *,
    encoding: str = csv_text.DEFAULT_ENCODING,
    finite: Collection[str] = (),
) -> pa.RecordBatch:
    """The rows of `block` (whole CSV lines, no header line) as one typed record batch.

    Used to read byte ranges of a file. Raises ArrowCsvError naming `where`.
    Text of another `encoding` is transcoded to UTF-8 first; `finite`: FLOAT
    columns in which NaN is refused (infinities are refused in all).
    """
    _, parse, convert = _options(header, columns)
    try:
        block = csv_text.transcode(block, encoding)
    except UnicodeDecodeError as e:
        raise ArrowCsvError(f"{where}: not valid {encoding} text") from e
    read = pacsv.ReadOptions(column_names=list(header), use_threads=True, block_size=BLOCK_SIZE)
    try:
        table = pacsv.read_csv(
            pa.BufferReader(block), read_options=read, parse_options=parse, convert_options=convert
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise ArrowCsvError(f"{where}: {e}") from e
    batches = table.combine_chunks().to_batches()
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=table.schema)
    _check_finite(batches[0], columns, where, finite)
    return batches[0]


def _check_finite(
    batch: pa.RecordBatch, columns: Mapping[str, str], where: str, finite: Collection[str] = ()
) -> None:
    # CsvExampleGen would store inf (and NaN); the CSV checks reject them, with the line.
    for name in batch.schema.names:
        if columns[name] == FLOAT:
            column = batch.column(name)
            if column.null_count == len(column):
                continue
            if pc.any(pc.is_inf(column)).as_py():
                raise ArrowCsvError(f"{where}: column {name!r} holds an infinite value")
            if name in finite and pc.any(pc.is_nan(column)).as_py():
                raise ArrowCsvError(f"{where}: column {name!r} holds NaN (the schema disallows it)")


# --- tf.Example wire format, built column-wise with numpy -------------------
#
# A tf.Example is `0x0a varint(len) Features`; Features is one map entry per
# feature, `0x0a varint(len) (0x0a varint(len) key) (0x12 varint(len) Feature)`,
# in key order when serialized deterministically. A Feature is
# `bytes_list` (0x0a) / `float_list` (0x12) / `int64_list` (0x1a), then
# varint(len) and the list: packed varints (int64), packed little-endian
# float32, or `0x0a varint(len) bytes` per value. A missing cell is the empty
# list of the column's type. Every per-row byte except string values goes into
# a byte matrix with a keep-mask (varints are written at their widest and
# masked), compacted in one pass; strings are joined in by Arrow.


def _varint_widths(values: np.ndarray) -> np.ndarray | int:
    """Bytes of each value's varint (uint64 `values`); the int 1 when all are below 128."""
    top = int(values.max()) if len(values) else 0
    if top < 128:
        return 1
    widths = np.ones(len(values), dtype=np.int64)
    for i in range(1, 10):
        if top < 1 << (7 * i):
            break
        widths += values >= np.uint64(1 << (7 * i))
    return widths


# Rows per pass of _Segment.build: its byte matrix then stays in the CPU cache.
_ROWS_PER_PASS = 16384


class _Segment:
    """Per-row byte strings of fixed-position parts, some of them masked out per row.

    A part is a (rows or 1, width) byte matrix, plus which of its bytes a row
    keeps: varints are written at their widest and cut to each row's width,
    and parts of a present-only kind are dropped for missing cells.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        # (matrix, per-row kept width or None, per-row present or None)
        self.parts: list[tuple[np.ndarray, np.ndarray | None, np.ndarray | None]] = []

    def const(self, data: bytes, present: np.ndarray | None = None) -> None:
        self.parts.append((np.frombuffer(data, dtype=np.uint8)[None, :], None, present))

    def varint(self, values: np.ndarray, present: np.ndarray | None = None) -> None:
        """Protobuf varints of uint64 or int64 values (negative int64 as two's complement)."""
        v = values.view(np.uint64) if values.dtype == np.int64 else values.astype(np.uint64)
        widths = _varint_widths(v)
        if isinstance(widths, int):
            self.parts.append((v.astype(np.uint8)[:, None], None, present))
            return
        width = int(widths.max())
        matrix = np.empty((self.n, width), dtype=np.uint8)
        for i in range(width):
            byte = ((v >> np.uint64(7 * i)) & np.uint64(0x7F)).astype(np.uint8)
            matrix[:, i] = byte | ((widths > i + 1).astype(np.uint8) << 7)
        self.parts.append((matrix, widths, present))

    def raw(self, matrix: np.ndarray, present: np.ndarray | None = None) -> None:
        self.parts.append((matrix, None, present))

    def build(self) -> pa.Array:
        width = sum(m.shape[1] for m, _, _ in self.parts)
        template = np.empty((1, width), dtype=np.uint8)
        variable, at = [], 0
        for matrix, _, _ in self.parts:
            w = matrix.shape[1]
            if matrix.shape[0] == 1:
                template[0, at : at + w] = matrix[0]
            else:
                variable.append((at, w, matrix))
            at += w
        masked = [
            (at, matrix.shape[1], widths, present)
            for (matrix, widths, present), at in zip(
                self.parts, np.cumsum([0] + [m.shape[1] for m, _, _ in self.parts]), strict=False
            )
            if widths is not None or present is not None
        ]
        # Each row's length, without summing the keep-mask: width minus what masked parts drop.
        lengths = np.full(self.n, width, dtype=np.int64)
        for _, w, widths, present in masked:
            kept = np.full(self.n, w, dtype=np.int64) if widths is None else widths.copy()
            if present is not None:
                kept *= present
            lengths -= w - kept
        rows = min(self.n, _ROWS_PER_PASS)
        buf = np.empty((rows, width), dtype=np.uint8)
        keep = np.empty((rows, width), dtype=bool)
        steps = np.arange(width)
        out = []
        for lo in range(0, self.n, rows):
            hi = min(self.n, lo + rows)
            b = buf[: hi - lo]
            b[:] = template
            for at, w, matrix in variable:
                b[:, at : at + w] = matrix[lo:hi]
            if not masked:
                out.append(b.reshape(-1).copy())
                continue
            k = keep[: hi - lo]
            k[:] = True
            for at, w, widths, present in masked:
                if widths is not None:
                    part = steps[None, :w] < widths[lo:hi, None]
                    if present is not None:
                        part &= present[lo:hi, None]
                    k[:, at : at + w] = part
                elif present is not None:  # a masked part has widths, presence or both
                    k[:, at : at + w] = present[lo:hi, None]
            out.append(b[k])
        offsets = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = np.concatenate(out) if len(out) > 1 else out[0]
        return pa.LargeBinaryArray.from_buffers(
            pa.large_binary(), self.n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        )


def _vlen(values: np.ndarray) -> np.ndarray | int:
    return _varint_widths(values.astype(np.uint64, copy=False))


def encode_records(
    batch: pa.RecordBatch, columns: Mapping[str, str], empty_columns: Collection[str] = ()
) -> pa.LargeBinaryArray:
    """Serialized tf.Examples of `batch`, byte-identical to TFX's deterministic serialization.

    `empty_columns`: columns without a single value in the whole input split,
    which CsvExampleGen's type inference leaves untyped (`Feature()`).
    """
    if batch.num_rows == 0:
        return pa.array([], pa.large_binary())
    arrays, _ = example_parts(batch, columns, empty_columns)
    if len(arrays) == 1:
        return arrays[0]
    return pc.binary_join_element_wise(*arrays, pa.scalar(b"", pa.large_binary()))


def example_parts(
    batch: pa.RecordBatch, columns: Mapping[str, str], empty_columns: Collection[str] = ()
) -> tuple[list[pa.Array], np.ndarray]:
    """`encode_records` before the final join: per row, the concatenation of the
    returned large_binary arrays is the serialized example; and each example's size."""
    n = batch.num_rows
    # First pass: every length field, per column and row, and what the row's bytes are.
    plan: list[tuple] = []
    total = np.zeros(n, dtype=np.int64)
    for name in sorted(batch.schema.names):
        key = name.encode()
        head = b"\x0a" + _varint_bytes(len(key)) + key + b"\x12"
        if name in empty_columns:
            entry = head + b"\x00"
            piece = b"\x0a" + _varint_bytes(len(entry)) + entry
            plan.append(("const", piece))
            total += len(piece)
            continue
        item = _column_plan(batch.column(name), columns[name], head, n)
        entry_len = item[-1]
        total += 1 + _vlen(entry_len) + entry_len
        plan.append(item)
    if (total >= 1 << 31).any():
        raise ArrowCsvError("an example is larger than 2 GB")
    # Second pass: the bytes, in the order the lengths were planned.
    return _encode_plan(plan, total, n), 1 + _vlen(total) + total


def _column_plan(column: pa.Array, kind: str, head: bytes, n: int) -> tuple:
    """One column's values and length fields, each a whole-column numpy operation:
    (kind, head, tag, present, values, m, list_len, feature_len, entry_len)."""
    present = None if column.null_count == 0 else column.is_valid().to_numpy(zero_copy_only=False)
    p = np.ones(n, dtype=bool) if present is None else present
    if kind == INT:
        values = column.fill_null(0).to_numpy().astype(np.int64, copy=False)
        m = np.broadcast_to(_vlen(values.view(np.uint64)), (n,))
        list_len = np.where(p, 2 + m, 0)  # 0x0a varint(m) varints
        tag = b"\x1a"
    elif kind == FLOAT:
        values = column.cast(pa.float32(), safe=False).fill_null(0).to_numpy()
        list_len = np.where(p, 6, 0)  # 0x0a 0x04 float32
        tag = b"\x12"
    else:
        values = column.cast(pa.large_binary()).fill_null(b"")
        offsets = np.frombuffer(values.buffers()[1], dtype=np.int64)[
            values.offset : values.offset + n + 1
        ]
        m = np.diff(offsets)
        list_len = np.where(p, 1 + _vlen(m) + m, 0)  # 0x0a varint(len) value
        tag = b"\x0a"
    feature_len = 1 + _vlen(list_len) + list_len
    entry_len = len(head) + _vlen(feature_len) + feature_len
    return (
        kind,
        head,
        tag,
        present,
        values,
        m if kind != FLOAT else None,
        list_len,
        feature_len,
        entry_len,
    )


def _encode_plan(plan: list[tuple], total: np.ndarray, n: int) -> list[pa.Array]:
    """The large_binary arrays whose row-wise concatenation is each serialized example."""
    arrays: list[pa.Array] = []
    segment = _Segment(n)
    segment.const(b"\x0a")
    segment.varint(total)
    for item in plan:
        if item[0] == "const":
            segment.const(item[1])
            continue
        kind, head, tag, present, values, m, list_len, feature_len, entry_len = item
        segment.const(b"\x0a")
        segment.varint(entry_len)
        segment.const(head)
        segment.varint(feature_len)
        segment.const(tag)
        segment.varint(list_len)
        segment.const(b"\x0a", present)
        if kind == INT:
            segment.varint(m, present)
            segment.varint(values, present)
        elif kind == FLOAT:
            segment.const(b"\x04", present)
            segment.raw(values.astype("<f4", copy=False).view(np.uint8).reshape(n, 4), present)
        else:
            # BYTES values are an Arrow array already: the segment so far ends
            # before them, and a new one starts after.
            segment.varint(m, present)
            arrays.append(segment.build())
            arrays.append(values)
            segment = _Segment(n)
    if segment.parts:
        arrays.append(segment.build())
    return arrays


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_batch(
    batch: pa.RecordBatch, columns: Mapping[str, str], empty_columns: Collection[str] = ()
) -> list[bytes]:
    """`encode_records` as a list of bytes (for tests and small inputs)."""
    return encode_records(batch, columns, empty_columns).to_pylist()
