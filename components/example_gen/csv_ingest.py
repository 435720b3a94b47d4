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

The split rule, the framing and the shard writer are tfrecord_shards.py's.
Task t writes shard t of every output split, so on a distributed runner each
task (its byte ranges) runs on its own worker, and there is no shuffle.
"""

from __future__ import annotations

import dataclasses
import os
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.metrics.metric import MetricsFilter
from tfx.dsl.io import fileio

from components.example_gen import arrow_csv, csv_checks, labels
from components.example_gen.tfrecord_shards import (
    GZIP_LEVEL,
    GzipShardWriter,
    buckets_of,
    contiguous,
    framed_examples,
    split_of,
)
from components.io import object_storage

# CSV bytes per block: ~30k taxi rows, ~16 MB of framed examples. Larger blocks
# cost more CPU (16 MB: +25%, measured): their buffers are mapped fresh each time.
BLOCK_BYTES = 4 * 1024 * 1024
# CSV bytes read before the run to guess which columns have no value at all.
GUESS_BYTES = 4 * 1024 * 1024
SHARD_NAME = "data_tfrecord-{shard:05d}-of-{shards:05d}.gz"  # as Beam's WriteToTFRecord names them


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
            if spec.columns[name] == csv_checks.BYTES and out.values[name]:
                out.longest[name] = pc.max(pc.utf8_length(column)).as_py() or 0
        empty = spec.empty_columns[piece.input_index]
        framed, keys = framed_examples(batch, spec.columns, empty, bool(spec.boundaries))
        if not spec.boundaries:
            out.splits.append((piece.input_index, contiguous(framed), len(framed)))
            return out
        splits = split_of(buckets_of(keys, spec.boundaries[-1]), spec.boundaries)
        for split in range(len(spec.split_uris)):
            mask = splits == split
            count = int(mask.sum())
            if count:
                chosen = framed if count == len(framed) else framed.filter(pa.array(mask))
                out.splits.append((split, contiguous(chosen), count))
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
    except Exception as e:  # any failure sends the input to the CSV checks
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
