"""The serving side of the skew check: what the gate compares training data with.

The latest window of the request log `tfxp serve` writes (components/validation/serving_log.py)
when the log folder holds one, else the static serving CSV files (no label
column). Used by the gate and by `tfxp watch --skew-every` (tfxp/monitor/skew.py): one
way to read serving data, one skew check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2
from tfx.dsl.io import fileio

from components.io.log_policy import NO_POLICY, Applier
from components.io.native_stderr import native_stderr_to_log
from components.validation.findings import SERVING
from components.validation.hashed_columns import log_schema
from components.validation.serving_log import (
    Window,
    WindowOptions,
    as_record_batch,
    files_key,
    published_files,
    served_window,
    window_files,
)


def serving_files(pattern: str) -> list[str]:
    return sorted(fileio.glob(pattern)) if pattern else []


def serving_data_sha256(pattern: str) -> str:
    """Content hash of the serving files (a cache key: new requests re-run the gate)."""
    from components.io.content_fingerprint import files_sha256

    try:
        files = serving_files(pattern)
    except Exception:  # noqa: BLE001 - a remote pattern that cannot be listed at build time
        return ""
    return files_sha256(files)[0] if files else ""


def as_lists(column: pa.Array, kind: str) -> pa.Array:
    """One-value lists, and an empty list for a missing cell: what TFDV sees for a
    CsvExampleGen example, so serving and training statistics are comparable."""
    from components.example_gen.csv_checks import BYTES, FLOAT

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


def serving_statistics(
    paths: list[str], schema: schema_pb2.Schema
) -> tuple[statistics_pb2.DatasetFeatureStatisticsList, int]:
    """TFDV statistics of serving CSV files (no label column), and their row count.

    The files get the same checks as training drops (clear errors naming the
    file, row and column); columns are typed by the schema and read with
    Arrow, and statistics are computed in memory: serving logs for a check
    are small, and a Beam pipeline would cost more than the work.
    """
    from tensorflow_data_validation.statistics import stats_impl, stats_options

    from components.example_gen.arrow_csv import read_batches, read_header
    from components.example_gen.csv_checks import check_csv_files

    columns = {f.name: schema_pb2.FeatureType.Name(f.type) for f in schema.feature}
    serving_columns = [f.name for f in schema.feature if SERVING not in f.not_in_environment]
    header = read_header(paths[0])
    extra = [c for c in header if c not in columns]
    if extra:
        raise ValueError(f"{paths[0]}: serving data has columns not in the schema: {extra}")
    check_csv_files(
        paths,
        {c: columns[c] for c in header},
        required=[c for c in serving_columns if c in columns],
    )
    tables = [pa.Table.from_batches(list(read_batches(p, columns, header))) for p in paths]
    table = pa.concat_tables(tables).combine_chunks()
    arrays = [as_lists(table.column(n).combine_chunks(), columns[n]) for n in table.column_names]
    batch = pa.RecordBatch.from_arrays(arrays, table.column_names)
    options = stats_options.StatsOptions(schema=schema)
    return stats_impl.generate_statistics_in_memory(batch, options), table.num_rows


@dataclass(frozen=True)
class ServingData:
    """What the skew check compares training data with: the latest serving-log
    window when the log folder has one, else the static serving CSV files."""

    statistics: statistics_pb2.DatasetFeatureStatisticsList | None
    rows: int | None
    source: str  # names the window or the CSV pattern, for findings and notes
    missing: str  # why there are none (statistics None)
    window: Window | None = None


def serving_cache_key(pattern: str, log_dir: str, window: WindowOptions) -> str:
    """The gate's cache key for its serving data: a newly published log file (or a
    changed CSV) changes it, so the gate runs again on the new window."""
    try:
        files = window_files(published_files(log_dir), window) if log_dir else []
    except Exception:  # noqa: BLE001 - a remote folder that cannot be listed at build time
        files = []
    if files:
        return "serving-log:" + files_key(files)
    return serving_data_sha256(pattern)


def log_statistics(
    table: pa.Table, schema: schema_pb2.Schema
) -> statistics_pb2.DatasetFeatureStatisticsList:
    """TFDV statistics of logged examples (features only), typed as decoded."""
    from tensorflow_data_validation.statistics import stats_impl, stats_options

    options = stats_options.StatsOptions(schema=schema)
    return stats_impl.generate_statistics_in_memory(as_record_batch(table), options)


def load_serving_data(
    schema: schema_pb2.Schema,
    pattern: str,
    log_dir: str,
    window: WindowOptions,
    policy: Applier | None = None,
) -> ServingData:
    """The serving side of the skew check (the gate's and `tfxp watch --skew-every`'s).

    `policy`: the dataset's request_log: policy with its key; log files written
    under another are refused, and logged records are typed as the policy wrote them.
    """
    expected = policy.fingerprint if policy is not None else NO_POLICY
    # A sequence model's requests are SequenceExamples (its schema has feature lists).
    sequence = any(f.type == schema_pb2.STRUCT for f in schema.feature)
    found = served_window(log_dir, window, expected, sequence) if log_dir else None
    too_few = ""
    if found is not None and found[1].examples >= window.needed:
        table, described = found
        logged = log_schema(schema, policy) if policy is not None else schema
        with native_stderr_to_log("TFDV"):
            stats = log_statistics(table, logged)
        return ServingData(stats, described.examples, described.describe(), "", described)
    if found is not None:
        too_few = (
            f"serving log {log_dir} holds {found[1].examples} served request(s) in its window, "
            f"fewer than the {window.needed} a comparison needs (serving_log.min_examples): "
        )
    files = serving_files(pattern)
    # TFDV's C++ warnings (a GetByPath() line per feature absent from one
    # side) go to the run's log file, not the terminal.
    with native_stderr_to_log("TFDV"):
        serving, rows = serving_statistics(files, schema) if files else (None, None)
    # Said in the notes either way: a dataset without serving data (config
    # serving_data="") is not the same as requests missing from where they should be.
    missing = (
        f"no serving data found at {pattern}" if pattern else "no serving data for this dataset"
    )
    return ServingData(serving, rows, f"{too_few}serving data {pattern}", too_few + missing)
