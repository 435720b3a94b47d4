"""CSV -> GZIP TFRecord splits at the speed of the CSV parser: the Arrow ingest's Beam stage.

TFX's ExampleGen turns every row into a Beam element, partitions element by
element and writes through Beam's TFRecord sink: per-row Python overhead is
most of its time. Here a Beam element is a *task*: a set of byte ranges of the
input files, read in blocks of whole lines. Per block, everything is columnar
or one tight loop:

- pyarrow parses the block (types from the curated schema, threads),
- `arrow_csv.example_parts` builds the serialized tf.Examples (numpy),
- one loop hashes each record (SHA-256, TFX's own split rule) and takes its
  CRC32C for the TFRecord framing,
- Arrow kernels frame the records and cut the block by output split
  (two blocks at a time, in threads),
- a writer thread per output shard compresses the block into one GZIP stream
  (zlib releases the GIL, so compression runs on the other core).

Task t writes shard t of every output split, so on a distributed runner each
task (its byte ranges) runs on its own worker, and there is no shuffle.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import zlib
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import apache_beam as beam
import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.metrics.metric import MetricsFilter
from tfx.dsl.io import fileio

from components.example_gen import arrow_csv, labels
from components.io import object_storage

# CSV bytes per block: ~30k taxi rows, ~16 MB of framed examples. Larger blocks
# cost more CPU (16 MB: +25%, measured): their buffers are mapped fresh each time.
BLOCK_BYTES = 4 * 1024 * 1024
# zlib level of the GZIP shards. Beam's sink (and so CsvExampleGen) uses 6;
# level 3 takes under half its CPU for shards ~6% larger (1M taxi rows: 53 MB
# vs CsvExampleGen's 50 MB).
GZIP_LEVEL = 3
# CSV bytes read before the run to guess which columns have no value at all.
GUESS_BYTES = 4 * 1024 * 1024
SHARD_NAME = "data_tfrecord-{shard:05d}-of-{shards:05d}.gz"  # as Beam's WriteToTFRecord names them
_DIGEST_BYTES = 32  # SHA-256


@dataclass(frozen=True)
class Piece:
    """The lines of `path` that start in [start, end), belonging to input split `input_index`."""

    path: str
    start: int
    end: int
    input_index: int


def plan_tasks(files: Sequence[tuple[str, int, int, int]], tasks: int) -> list[list[Piece]]:
    """Cuts the data bytes of `files` ((path, data start, size, input index)) into `tasks`
    contiguous, nearly equal sets of byte ranges; line boundaries are found by the reader."""
    total = sum(size - start for _, start, size, _ in files)
    out: list[list[Piece]] = [[] for _ in range(tasks)]
    before = 0
    for path, start, size, index in files:
        length = size - start
        for t in range(tasks):
            lo, hi = total * t // tasks, total * (t + 1) // tasks
            a, b = max(lo, before), min(hi, before + length)
            if a < b:
                out[t].append(Piece(path, start + a - before, start + b - before, index))
        before += length
    return out


def _line_start_at_or_after(f, position: int, data_start: int, size: int) -> int:
    """The first line start >= `position` (a line starts after a newline), or `size`."""
    if position <= data_start:
        return data_start
    if position >= size:
        return size
    f.seek(position - 1)
    at = position - 1
    while True:
        chunk = f.read(1 << 16)
        if not chunk:
            return at
        i = chunk.find(b"\n")
        if i >= 0:
            return at + i + 1
        at += len(chunk)


def read_blocks(piece: Piece, data_start: int, block_bytes: int = 0) -> Iterator[bytes]:
    """Whole lines of `piece`, about `block_bytes` (default BLOCK_BYTES) at a time.

    Local, s3:// and gs:// files alike (components/io/object_storage.py): no read
    is larger than `block_bytes`, so memory stays bounded whatever the file's size.
    """
    block_bytes = block_bytes or BLOCK_BYTES
    try:
        opened = object_storage.open_ranges(piece.path)
    except object_storage.RangeReadError as e:
        raise arrow_csv.ArrowCsvError(str(e)) from e
    with opened as f:
        size = f.size()
        begin = _line_start_at_or_after(f, piece.start, data_start, size)
        stop = _line_start_at_or_after(f, piece.end, data_start, size)
        f.seek(begin)
        remaining, carry = stop - begin, b""
        while remaining > 0:
            data = f.read(min(block_bytes, remaining))
            if not data:
                break
            remaining -= len(data)
            block = carry + data if carry else data
            if remaining > 0:
                cut = block.rfind(b"\n") + 1
                block, carry = block[:cut], block[cut:]
            else:
                carry = b""
            if block:
                yield block
        if carry:
            yield carry


def read_ahead(blocks: Iterator[bytes], reader: ThreadPoolExecutor) -> Iterator[bytes]:
    """`blocks`, the next one read on `reader` while the caller handles the current one:
    a ranged GET from a bucket then overlaps the encoding instead of waiting for it."""
    ahead = reader.submit(next, blocks, None)
    while (block := ahead.result()) is not None:
        ahead = reader.submit(next, blocks, None)
        yield block


def empty_in_first_block(
    path: str,
    data_start: int,
    header: Sequence[str],
    columns: dict[str, str],
    *,
    encoding: str = "utf-8",
    finite: frozenset[str] = frozenset(),
) -> frozenset[str]:
    """Columns without a value in the first block of `path`: the guess, before the
    run, of which columns have no value at all (checked against the run's counts)."""
    piece = Piece(path, data_start, data_start + GUESS_BYTES, 0)
    first = next(read_blocks(piece, data_start, GUESS_BYTES), b"")
    batch = arrow_csv.parse_block(first, header, columns, path, encoding=encoding, finite=finite)
    return frozenset(c for c in header if batch.column(c).null_count == batch.num_rows)


# --- TFX's split rule, vectorised -----------------------------------------


def buckets_of(digests: bytes, modulus: int) -> np.ndarray:
    """int(sha256 hexdigest, 16) % modulus for each 32-byte digest.

    The digest is a base-256 number, so it is the dot product of its bytes with
    256**k % modulus, taken modulo `modulus` (exact in int64 below 2**50).
    """
    modulus = int(modulus)
    if not 0 < modulus < 1 << 50:
        raise ValueError(f"hash bucket total {modulus} out of range")
    d = np.frombuffer(digests, dtype=np.uint8).reshape(-1, _DIGEST_BYTES)
    weights = np.array(
        [pow(256, _DIGEST_BYTES - 1 - j, modulus) for j in range(_DIGEST_BYTES)], dtype=np.int64
    )
    return (d.astype(np.int64) @ weights) % modulus


def split_of(buckets: np.ndarray, boundaries: Sequence[int]) -> np.ndarray:
    """bisect.bisect(boundaries, bucket), as TFX's _PartitionFn."""
    return np.searchsorted(np.asarray(boundaries, dtype=np.int64), buckets, side="right")


# --- TFRecord framing ------------------------------------------------------

_CRC32C_TABLE = np.zeros(256, dtype=np.uint32)
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE[_i] = _c


def _crc32c_rows(matrix: np.ndarray) -> np.ndarray:
    """CRC32C of each row of a small uint8 matrix (used for the 8-byte length headers)."""
    crc = np.full(len(matrix), 0xFFFFFFFF, dtype=np.uint32)
    for j in range(matrix.shape[1]):
        crc = _CRC32C_TABLE[(crc ^ matrix[:, j]) & 0xFF] ^ (crc >> 8)
    return crc ^ np.uint32(0xFFFFFFFF)


def _masked(crc: np.ndarray) -> np.ndarray:
    crc = crc.astype(np.uint32)
    return (((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(0xA282EAD8)).astype(
        np.uint32
    )


def _fixed_width(matrix: np.ndarray) -> pa.Array:
    n, w = matrix.shape
    offsets = np.arange(0, (n + 1) * w, w, dtype=np.int64)
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(matrix.reshape(-1))]
    )


def framed_examples(
    batch: pa.RecordBatch,
    columns: dict[str, str],
    empty_columns: frozenset[str],
    digests: bool,
) -> tuple[pa.LargeBinaryArray, bytes]:
    """The TFRecord-framed serialized examples of `batch` (uint64 length, masked CRC32C
    of it, the example, masked CRC32C of the example), and their SHA-256 digests
    concatenated (when asked: TFX's split key)."""
    n = batch.num_rows
    parts, sizes = arrow_csv.example_parts(batch, columns, empty_columns)
    head = _length_headers(np.broadcast_to(sizes, (n,)))
    tail = np.zeros((n, 4), dtype=np.uint8)  # the example's CRC, filled in below
    sep = pa.scalar(b"", pa.large_binary())
    framed = pc.binary_join_element_wise(_fixed_width(head), *parts, _fixed_width(tail), sep)
    offsets = np.frombuffer(framed.buffers()[1], dtype=np.int64)[: n + 1]
    buffer = framed.buffers()[2]
    data = buffer.to_pybytes()
    bounds = offsets.tolist()
    # The one per-record Python loop: CRC32C (and SHA-256) of each example.
    examples = [data[a + 12 : b - 4] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    crcs = np.fromiter(map(google_crc32c.value, examples), dtype=np.uint32, count=n)
    sha = hashlib.sha256
    keys = b"".join([sha(e).digest() for e in examples]) if digests else b""
    writable = np.ndarray((buffer.size,), dtype=np.uint8, buffer=buffer)
    at = offsets[1:, None] - 4 + np.arange(4)[None, :]
    writable[at] = _masked(crcs).astype("<u4").view(np.uint8).reshape(n, 4)
    return framed, keys


def framed_buffer(batch: pa.RecordBatch, columns: dict[str, str]) -> pa.Buffer:
    """The examples of a batch of one-value-or-missing columns, TFRecord-framed into one
    buffer (what GzipShardWriter takes)."""
    framed, _ = framed_examples(batch, columns, frozenset(), digests=False)
    return _contiguous(framed)


def _length_headers(sizes: np.ndarray) -> np.ndarray:
    """Each record's 12-byte TFRecord header: uint64 length, masked CRC32C of the length."""
    n = len(sizes)
    head = np.empty((n, 12), dtype=np.uint8)
    head[:, :8] = sizes.astype("<u8").view(np.uint8).reshape(n, 8)
    head[:, 8:] = _masked(_crc32c_rows(head[:, :8])).astype("<u4").view(np.uint8).reshape(n, 4)
    return head


def frame_records(records: Sequence[bytes]) -> pa.Buffer:
    """Serialized records TFRecord-framed into one buffer (what GzipShardWriter takes)."""
    n = len(records)
    if n == 0:
        return pa.py_buffer(b"")
    head = _length_headers(np.fromiter(map(len, records), dtype=np.uint64, count=n))
    crcs = np.fromiter(map(google_crc32c.value, records), dtype=np.uint32, count=n)
    tail = _masked(crcs).astype("<u4").view(np.uint8).reshape(n, 4)
    framed = pc.binary_join_element_wise(
        _fixed_width(head),
        pa.array(records, pa.large_binary()),
        _fixed_width(tail),
        pa.scalar(b"", pa.large_binary()),
    )
    return _contiguous(framed)


def _contiguous(framed: pa.LargeBinaryArray) -> pa.Buffer:
    n = len(framed)
    offsets = np.frombuffer(framed.buffers()[1], dtype=np.int64)[
        framed.offset : framed.offset + n + 1
    ]
    return framed.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


# --- GZIP shard writer ---------------------------------------------------------


class GzipShardWriter:
    """One GZIP stream (header, deflate, CRC-32 and size trailer; no flush points) per shard.

    Written to `<path>.incomplete` and renamed when complete, so a shard is
    either whole or absent. Compression runs in a thread: zlib releases the GIL.
    """

    MAX_PENDING = 2

    def __init__(self, path: str, level: int = GZIP_LEVEL) -> None:
        self.path = path
        self.records = 0
        self._tmp = path + ".incomplete"
        self._file = fileio.open(self._tmp, "wb")
        self._zip = zlib.compressobj(level, zlib.DEFLATED, 31)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gzip-shard")
        self._pending: list[Future] = []

    def _write(self, data) -> None:
        out = self._zip.compress(data)
        if out:
            self._file.write(out)

    def write(self, data: pa.Buffer, records: int) -> None:
        self.records += records
        while len(self._pending) >= self.MAX_PENDING:
            self._pending.pop(0).result()
        self._pending.append(self._pool.submit(self._write, data))

    def close(self) -> None:
        for f in self._pending:
            f.result()
        self._pool.shutdown()
        self._file.write(self._zip.flush(zlib.Z_FINISH))
        self._file.close()
        fileio.rename(self._tmp, self.path, overwrite=True)

    def abort(self) -> None:
        self._pool.shutdown(cancel_futures=True)
        self._file.close()
        # The file is created lazily: an abort before the first write finds none.
        if fileio.exists(self._tmp):
            fileio.remove(self._tmp)


@dataclass(frozen=True)
class IngestSpec:
    """Everything a task needs, picklable for Beam."""

    header: tuple[str, ...]
    columns: dict[str, str]
    data_starts: dict[str, int]  # file -> offset of its first data line
    empty_columns: tuple[frozenset[str], ...]  # per input split
    boundaries: tuple[int, ...]  # cumulative hash buckets; empty: output split = input split
    split_uris: tuple[str, ...]
    shards: int
    gzip_level: int = GZIP_LEVEL
    encoding: str = "utf-8"  # of the CSV text; blocks are transcoded to UTF-8
    finite: frozenset[str] = frozenset()  # FLOAT columns where NaN is refused
    # Rows whose label cell (this column) is blank or unparseable are dropped and counted.
    drop_unlabelled: str = ""

    @property
    def read_columns(self) -> dict[str, str]:
        """The column types blocks are parsed with: a label to check is read as text."""
        if not self.drop_unlabelled:
            return self.columns
        return labels.label_as_text(self.columns, self.drop_unlabelled)


# Beam counters a task reports: rows per file, values per (input split, column).
METRICS_NAMESPACE = "csv_ingest"


def rows_counter(path: str) -> str:
    return f"rows:{path}"


def values_counter(input_index: int, column: str) -> str:
    return f"values:{input_index}:{column}"


# Rows dropped for a blank or unparseable label (spec.drop_unlabelled).
UNLABELLED_COUNTER = "unlabelled"


def longest_distribution(column: str) -> str:
    """The longest cell (characters) of a BYTES column, for the gate's absurd-cell warning."""
    return f"longest:{column}"


@dataclass
class _Encoded:
    """One block, encoded: its rows, values per column and framed records per output split."""

    piece: Piece
    rows: int
    values: dict[str, int]
    splits: list[tuple[int, pa.Buffer, int]]
    longest: dict[str, int] = dataclasses.field(default_factory=dict)
    unlabelled: int = 0


# Blocks encoded at once, and held at most (CSV, examples and their split copies).
ENCODE_THREADS = 2
BLOCKS_IN_FLIGHT = 3


class IngestTask(beam.DoFn):
    """(task index, pieces) -> shard `task` of every output split."""

    def __init__(self, spec: IngestSpec) -> None:
        self._spec = spec

    def process(self, element):
        task, pieces = element
        spec = self._spec
        writers: list[GzipShardWriter] = []
        # Blocks are encoded two at a time (Arrow and numpy release the GIL) and
        # written in order; at most BLOCKS_IN_FLIGHT blocks, and the next one being
        # read ahead, are held in memory.
        pool = ThreadPoolExecutor(max_workers=ENCODE_THREADS, thread_name_prefix="encode")
        reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="read-ahead")
        try:
            for uri in spec.split_uris:
                fileio.makedirs(uri)
                name = SHARD_NAME.format(shard=task, shards=spec.shards)
                writers.append(GzipShardWriter(os.path.join(uri, name), spec.gzip_level))
            pending: deque[Future] = deque()
            for piece in pieces:
                blocks = read_blocks(piece, spec.data_starts[piece.path])
                for block in read_ahead(blocks, reader):
                    pending.append(pool.submit(self._encode, piece, block))
                    if len(pending) >= BLOCKS_IN_FLIGHT:
                        self._emit(pending.popleft().result(), writers)
            while pending:
                self._emit(pending.popleft().result(), writers)
            for w in writers:
                w.close()
        except BaseException:
            pool.shutdown(cancel_futures=True)
            reader.shutdown(cancel_futures=True)
            for w in writers:
                w.abort()
            raise
        pool.shutdown()
        reader.shutdown()
        yield task

    def _encode(self, piece: Piece, block: bytes) -> _Encoded:
        spec = self._spec
        batch = arrow_csv.parse_block(
            block,
            spec.header,
            spec.read_columns,
            piece.path,
            encoding=spec.encoding,
            finite=spec.finite,
        )
        unlabelled = 0
        if spec.drop_unlabelled:
            label = spec.drop_unlabelled
            batch, unlabelled = labels.drop_unlabelled(batch, label, spec.columns[label])
        out = _Encoded(piece, batch.num_rows, {}, [], unlabelled=unlabelled)
        if batch.num_rows == 0:
            return out
        for name in spec.header:
            column = batch.column(name)
            out.values[name] = len(column) - column.null_count
            if spec.columns[name] == arrow_csv.BYTES and out.values[name]:
                out.longest[name] = pc.max(pc.utf8_length(column)).as_py() or 0
        empty = spec.empty_columns[piece.input_index]
        framed, keys = framed_examples(batch, spec.columns, empty, bool(spec.boundaries))
        if not spec.boundaries:
            out.splits.append((piece.input_index, _contiguous(framed), len(framed)))
            return out
        splits = split_of(buckets_of(keys, spec.boundaries[-1]), spec.boundaries)
        for split in range(len(spec.split_uris)):
            mask = splits == split
            count = int(mask.sum())
            if count:
                chosen = framed if count == len(framed) else framed.filter(pa.array(mask))
                out.splits.append((split, _contiguous(chosen), count))
        return out

    @staticmethod
    def _emit(encoded: _Encoded, writers: list[GzipShardWriter]) -> None:
        # Beam's counters are per thread: counted here, in the DoFn's own thread.
        counter = beam.metrics.Metrics.counter
        counter(METRICS_NAMESPACE, rows_counter(encoded.piece.path)).inc(encoded.rows)
        if encoded.unlabelled:
            counter(METRICS_NAMESPACE, UNLABELLED_COUNTER).inc(encoded.unlabelled)
        for name, values in encoded.values.items():
            key = values_counter(encoded.piece.input_index, name)
            counter(METRICS_NAMESPACE, key).inc(values)
        for name, longest in encoded.longest.items():
            beam.metrics.Metrics.distribution(METRICS_NAMESPACE, longest_distribution(name)).update(
                longest
            )
        for split, data, count in encoded.splits:
            writers[split].write(data, count)


@dataclass
class IngestCounts:
    rows: dict[str, int]  # per file
    values: dict[tuple[int, str], int]  # per (input split, column)
    longest: dict[str, int] = dataclasses.field(default_factory=dict)  # BYTES column -> chars
    unlabelled: int = 0  # rows dropped for a blank or unparseable label

    def empty_columns(self, input_splits: int, header: Sequence[str]) -> list[frozenset[str]]:
        return [
            frozenset(c for c in header if self.values.get((i, c), 0) == 0)
            for i in range(input_splits)
        ]


def remove_outputs(split_uris: Sequence[str]) -> None:
    for uri in split_uris:
        if fileio.exists(uri):
            fileio.rmtree(uri)


def run(pipeline: beam.Pipeline, plan: list[list[Piece]], spec: IngestSpec) -> IngestCounts:
    """Runs the tasks on `pipeline`; returns what they counted.

    Raises arrow_csv.ArrowCsvError, with no shard left behind, if any task fails.
    """
    _ = (
        pipeline
        | "Tasks" >> beam.Create(list(enumerate(plan)))
        | "Distribute" >> beam.Reshuffle()
        | "ReadEncodeSplitWrite" >> beam.ParDo(IngestTask(spec))
    )
    try:
        result = pipeline.run()
        result.wait_until_finish()
    except Exception as e:  # noqa: BLE001 - any failure sends the input to the CSV checks
        remove_outputs(spec.split_uris)
        raise arrow_csv.ArrowCsvError(f"Arrow ingest failed: {e}") from e
    found = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    counts = IngestCounts({}, {})
    for metric in found["counters"]:
        value = metric.committed if metric.committed is not None else metric.attempted
        name = metric.key.metric.name
        if name.startswith("rows:"):
            path = name.removeprefix("rows:")
            counts.rows[path] = counts.rows.get(path, 0) + value
        elif name == UNLABELLED_COUNTER:
            counts.unlabelled += value
        elif name.startswith("values:"):
            _, index, column = name.split(":", 2)
            key = (int(index), column)
            counts.values[key] = counts.values.get(key, 0) + value
    for metric in found["distributions"]:
        value = metric.committed if metric.committed is not None else metric.attempted
        name = metric.key.metric.name
        if name.startswith("longest:") and value is not None and value.count:
            column = name.removeprefix("longest:")
            counts.longest[column] = max(counts.longest.get(column, 0), int(value.max))
    return counts
