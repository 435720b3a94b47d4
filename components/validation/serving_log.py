"""The request log `tfxp serve` writes: which files make the latest window, and reading them.

The format (docs/serving-logs.md): GZIP TFRecord files
`requests-<UTC %Y%m%dT%H%M%S>-<pid>-<seq:06d>.tfrecord.gz` in `<data root>/serving-log/`,
each written under a hidden name and renamed when complete, so every name this
module lists is a whole file. A record is one raw `tf.train.Example` as scored,
plus metadata features named `__*` (request id, time, model, version, label,
role, output).

The window the skew check reads: the newest files whose names (the time a file
was opened) lie within `hours` of the newest one, read newest first until
`max_examples` served records (of the file that reaches it, its newest). A window is anchored on the newest file, not on
the clock: a model without traffic for a day still has its last window checked,
and the finding says when it was logged.

Records are decoded by tfx_bsl's schema-less decoder (the one StatisticsGen's
reader uses), so statistics of logged examples and of training examples come
from the same Arrow columns.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: pipeline.config imports this module at start-up
    import pyarrow as pa

FOLDER = "serving-log"
META_PREFIX = "__"
REQUEST_ID = "__request_id"
LOGGED_AT = "__logged_at"
MODEL = "__model"
VERSION = "__version"
LABEL = "__label"
ROLE = "__role"
OUTPUT = "__output"
POLICY = "__policy"  # the request_log: policy's fingerprint (components/io/log_policy.py)
SERVED, SHADOW = "served", "shadow"
_NAME = re.compile(r"^requests-(\d{8}T\d{6})-(\d+)-(\d{6})\.tfrecord\.gz$")
_STAMP = "%Y%m%dT%H%M%S"
# tfx_bsl's column of a SequenceExample's feature lists (what StatisticsGen reads).
SEQUENCE_STRUCT = "##SEQUENCE##"


class ServingLogError(ValueError):
    """A log folder or file that cannot be read; the message names it."""


@dataclass(frozen=True)
class LogFile:
    path: str
    opened: dt.datetime  # UTC, from the name
    pid: int
    seq: int
    size: int

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass(frozen=True)
class WindowOptions:
    """How much of the log the skew check reads: `hours` of files back from the
    newest one, at most `max_examples` served records. A window of fewer than
    `min_examples` is not compared (a handful of requests differs from any training
    distribution): the check then reads the static serving CSV, and says why."""

    hours: float = 24.0
    max_examples: int = 100_000
    min_examples: int = 200

    def __post_init__(self) -> None:
        if not self.hours > 0:
            raise ValueError(f"serving-log window: hours must be > 0, not {self.hours!r}")
        if self.max_examples < 1:
            raise ValueError(
                f"serving-log window: max_examples must be >= 1, not {self.max_examples!r}"
            )
        if self.min_examples < 1:
            raise ValueError(
                f"serving-log window: min_examples must be >= 1, not {self.min_examples!r}"
            )

    @property
    def needed(self) -> int:
        """Served requests a window must hold to be compared (never above the cap)."""
        return min(self.min_examples, self.max_examples)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WindowOptions:
        return cls(**json.loads(text)) if text else cls()


def _fileio():
    from tfx.dsl.io import fileio

    return fileio


def published_files(folder: str) -> list[LogFile]:
    """The complete log files in `folder`, newest first ([] when the folder does not exist).

    Hidden names (files still being written) and names off the pattern are ignored."""
    fileio = _fileio()
    if not folder or not fileio.exists(folder):
        return []
    found = []
    for name in fileio.listdir(folder):
        name = name.rstrip("/")
        match = _NAME.match(name)
        if match is None:
            continue
        path = os.path.join(folder, name)
        opened = dt.datetime.strptime(match[1], _STAMP).replace(tzinfo=dt.UTC)
        size = fileio.stat(path).length
        found.append(LogFile(path, opened, int(match[2]), int(match[3]), size))
    return sorted(found, key=lambda f: (f.opened, f.pid, f.seq), reverse=True)


def window_files(files: list[LogFile], options: WindowOptions) -> list[LogFile]:
    """The files (newest first) opened within `options.hours` of the newest one."""
    if not files:
        return []
    since = files[0].opened - dt.timedelta(hours=options.hours)
    return [f for f in files if f.opened >= since]


def files_key(files: list[LogFile]) -> str:
    """A cache key of a window: published files never change, so names and sizes suffice."""
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.name):
        h.update(f"{f.name}\0{f.size}\0".encode())
    return h.hexdigest()


def read_batches(
    files: list[LogFile], batch_size: int = 8192, sequence: bool = False
) -> Iterator[pa.RecordBatch]:
    """Every record of `files`, in the given order, as tfx_bsl's schema-less record batches
    (`sequence`: the records are SequenceExamples, decoded as StatisticsGen reads them:
    context features as columns, feature lists under `##SEQUENCE##`)."""
    import tensorflow as tf
    from tfx_bsl.coders import example_coder, sequence_example_coder

    from components.example_gen.layout import sequential_records

    decoder = (
        sequence_example_coder.SequenceExamplesToRecordBatchDecoder(SEQUENCE_STRUCT)
        if sequence
        else example_coder.ExamplesToRecordBatchDecoder()
    )
    for f in files:
        try:
            for serialized in sequential_records([f.path], "GZIP").batch(batch_size):
                yield decoder.DecodeBatch(serialized.numpy().tolist())
        except (tf.errors.OpError, RuntimeError, ValueError) as e:
            message = getattr(e, "message", None) or str(e)
            raise ServingLogError(
                f"{f.path}: not a readable serving-log file (GZIP TFRecord of tf.Examples): "
                f"{message[:300]}"
            ) from e


def read_table(files: list[LogFile], sequence: bool = False) -> pa.Table:
    """All records of `files` as one table (columns: features and `__*` metadata)."""
    import pyarrow as pa

    batches = [b for b in read_batches(files, sequence=sequence) if b.num_rows]
    if not batches:
        return pa.table({})
    tables = [pa.Table.from_batches([b]) for b in batches]
    return pa.concat_tables(tables, promote=True).combine_chunks()


# The metadata features and how they are typed (serving-logs.md).
METADATA = {
    REQUEST_ID: "BYTES",
    LOGGED_AT: "INT",
    MODEL: "BYTES",
    VERSION: "INT",
    LABEL: "BYTES",
    ROLE: "BYTES",
    OUTPUT: "FLOAT",
}


def read_metadata(files: list[LogFile], batch_size: int = 8192) -> pa.Table:
    """Only the `__*` metadata of every record of `files` (in order): parsed by
    `tf.io.parse_example` without decoding the request features (the console's
    traffic counts and `tfxp models compare` need nothing else)."""
    import pyarrow as pa
    import tensorflow as tf

    from components.example_gen.layout import Layout, RecordBatchDecoder

    decoder = RecordBatchDecoder(Layout(dict(METADATA)))
    batches = []
    for f in files:
        try:
            batches += [b for b in decoder.batches([f.path], "GZIP", batch_size) if b.num_rows]
        except (tf.errors.OpError, ValueError) as e:
            message = getattr(e, "message", None) or str(e)
            raise ServingLogError(
                f"{f.path}: not a readable serving-log file (GZIP TFRecord of tf.Examples): "
                f"{message[:300]}"
            ) from e
    if not batches:
        return pa.table({n: pa.array([], pa.null()) for n in METADATA})
    return pa.Table.from_batches(batches)


def first_values(table: pa.Table, column: str) -> list:
    """The first value of each row's list in `column` (None for an absent or empty one)."""
    if column not in table.column_names:
        return [None] * table.num_rows
    values = table.column(column).to_pylist()
    return [(v[0].decode() if isinstance(v[0], bytes) else v[0]) if v else None for v in values]


def features_only(table: pa.Table) -> pa.Table:
    """`table` without the `__*` metadata columns (what statistics are computed on)."""
    return table.select([n for n in table.column_names if not n.startswith(META_PREFIX)])


@dataclass(frozen=True)
class Window:
    """The served records the skew check read, and where they came from."""

    folder: str
    files: tuple[str, ...]  # names, newest first
    examples: int
    first_logged: dt.datetime | None
    last_logged: dt.datetime | None

    def describe(self) -> str:
        names = self.files[-1] + (f" .. {self.files[0]}" if len(self.files) > 1 else "")
        when = ""
        if self.first_logged and self.last_logged:
            fmt = "%Y-%m-%d %H:%M:%S"
            when = (
                f", logged {self.first_logged.strftime(fmt)} to "
                f"{self.last_logged.strftime(fmt)} UTC"
            )
        return (
            f"serving log {self.folder} ({len(self.files)} file(s) {names}: "
            f"{self.examples} served requests{when})"
        )

    def to_dict(self) -> dict:
        return {
            "folder": self.folder,
            "files": list(self.files),
            "examples": self.examples,
            "first_logged": self.first_logged.isoformat() if self.first_logged else None,
            "last_logged": self.last_logged.isoformat() if self.last_logged else None,
        }


def _micros(value: int | None) -> dt.datetime | None:
    if value is None:
        return None
    return dt.datetime.fromtimestamp(value / 1e6, tz=dt.UTC)


def check_policy(path: str, table: pa.Table, expected: str) -> None:
    """Refuses a log file written under another request-log policy (or key)."""
    found = {v or "none" for v in first_values(table, POLICY)} or {"none"}
    if found != {expected}:
        got = ", ".join(sorted(found))
        raise ServingLogError(
            f"{path} was written under request-log policy {got}, but the dataset's "
            f"request_log: policy (with its key) is {expected}: its columns were dropped, "
            "hashed or kept differently, so it cannot be compared with training data. "
            "Move the files written before the policy (or key) changed out of "
            f"{os.path.dirname(path)}, or restore the policy they were written under"
        )


def served_window(
    folder: str, options: WindowOptions, policy: str | None = None, sequence: bool = False
) -> tuple[pa.Table, Window] | None:
    """The latest window's served records (features only) and its description, or None
    when the folder holds no published file with a served record. With `policy` (a
    fingerprint), a file written under another one is a ServingLogError (`sequence`:
    the model takes SequenceExamples; the metadata is in their context)."""
    import pyarrow as pa

    files = window_files(published_files(folder), options)
    used: list[str] = []
    parts: list[pa.Table] = []
    times: list[int] = []
    count = 0
    for f in files:
        table = read_table([f], sequence)
        if not table.num_rows:
            continue
        if policy is not None:
            check_policy(f.path, table, policy)
        served = pa.array([r == SERVED for r in first_values(table, ROLE)], pa.bool_())
        table = table.filter(served)
        # A file's records are in the order they were logged: keep its newest.
        table = table.slice(max(0, table.num_rows - (options.max_examples - count)))
        if not table.num_rows:
            continue
        used.append(f.name)
        times += [t for t in first_values(table, LOGGED_AT) if t is not None]
        parts.append(features_only(table))
        count += table.num_rows
        if count >= options.max_examples:
            break
    if not count:
        return None
    features = pa.concat_tables(parts, promote=True).combine_chunks()
    window = Window(
        folder,
        tuple(used),
        count,
        _micros(min(times) if times else None),
        _micros(max(times) if times else None),
    )
    return features, window


def as_record_batch(table: pa.Table) -> pa.RecordBatch:
    """One record batch of `table` (an all-null column, absent from every record, dropped)."""
    import pyarrow as pa

    keep = [n for n in table.column_names if not pa.types.is_null(table.column(n).type)]
    table = table.select(keep).combine_chunks()
    batches = table.to_batches()
    if len(batches) == 1:
        return batches[0]
    return pa.RecordBatch.from_arrays([c.combine_chunks() for c in table.columns], keep)
