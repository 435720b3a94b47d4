"""CsvExampleGen with input checks and content fingerprints.

The component is TFX's FileBasedExampleGen, so spans, versions, input/output
configs and splits behave exactly as in CsvExampleGen. What differs:

- The driver keys a span by the *bytes* of its files. TFX's own
  `input_fingerprint` is file count, size and mtime, so a file rewritten with
  the same size within the same second is served from cache. Ours replaces it
  with a SHA-256 of every file's relative path and content
  (`components.io.content_fingerprint`), which the launcher's cache key covers (it
  hashes exec properties and the output artifact's properties): changed bytes
  re-ingest, identical bytes (even touched) stay cached.
- The driver can pin a version (TFX only ever takes a span's latest).
- The executor checks the files against the curated schema's columns and types
  before Beam starts, records span, version, content hash, row count and bytes
  as custom properties of the Examples artifact, and writes a configurable
  number of TFRecord shards per split (TFX leaves it to the runner).
- By default it reads CSV with the Arrow ingest (components/example_gen/csv_ingest.py):
  the same examples in the same splits as TFX's reader, several times faster
  (benchmarks/csv_ingest.py), from local disk or s3:// / gs:// buckets
  (components/io/object_storage.py); `csv_reader="tfx"` selects TFX's reader.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Collection
from typing import Any

import apache_beam as beam
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_gen import write_split
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.components.example_gen.csv_example_gen import executor as csv_executor
from tfx.components.util import examples_utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx_bsl.coders import csv_decoder

from compat import tfx as tfx_internals
from components.example_gen import arrow_csv, csv_checks, csv_ingest, labels
from components.example_gen import layout as example_layout
from components.example_gen.driver import (  # noqa: F401 - the artifact's properties, by name
    CONTENT_SHA256,
    EXPECTED_SHA256,
    INPUT_BASE,
    RAW_BYTES,
    RAW_FILES,
    ROW_COUNT,
    TFRECORD_SHARDS,
    ContentFingerprintDriver,
    custom_struct,
    example_gen_node,
    packed_custom_config,
    resolved_files,
    split_configs,
)
from components.io import csv_text, object_storage

COMPONENT_ID = "CsvExampleGen"

CSV_READER = "csv_reader"  # which reader wrote the examples: "arrow" or "tfx"
# JSON {BYTES column: characters of its longest cell}, for the gate's absurd-cell warning.
LONGEST_CELLS = "longest_cells"

# Default shard sizing: one shard per this much raw CSV per split. GZIP'd
# tf.Examples come out at ~0.3-0.4x the CSV's size (measured on taxi data), so
# this is ~100 MB per shard: large enough that per-file overhead vanishes,
# small enough that readers interleave several shards in parallel.
RAW_BYTES_PER_SHARD = 256 * 1024 * 1024


def _columns_from_custom_config(exec_properties: dict[str, Any]) -> dict[str, str]:
    columns = custom_struct(exec_properties).get("columns") or {}
    return {k: str(v) for k, v in columns.items()}


def _text_options(exec_properties: dict[str, Any]) -> tuple[str, frozenset[str]]:
    """(the CSV text encoding, FLOAT columns where NaN is refused) from the custom config."""
    struct = custom_struct(exec_properties)
    encoding = str(struct.get("encoding") or csv_text.DEFAULT_ENCODING)
    return encoding, frozenset(str(c) for c in struct.get("nan_free") or ())


def _unlabelled_option(exec_properties: dict[str, Any]) -> tuple[str, str]:
    """(the label column whose blank or unparseable rows are dropped, its type), or ("", "")."""
    label = str(custom_struct(exec_properties).get("drop_unlabelled") or "")
    columns = _columns_from_custom_config(exec_properties)
    return (label, columns.get(label, csv_checks.BYTES)) if label else ("", "")


def _set_longest_cells(examples, longest: dict[str, int]) -> None:
    examples.set_string_custom_property(LONGEST_CELLS, json.dumps(longest, sort_keys=True))


class _ReadCsvRecords(beam.DoFn):
    """TFX's _ReadCsvRecordsFromTextFile, opening files through csv_text: a UTF-8
    byte-order mark is skipped with the header line, and lines are decoded in the
    dataset's encoding (the CSV checks have already named any invalid byte)."""

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding

    def process(self, path: str):
        lines = iter(csv_text.TextLines(path, self._encoding, strict=True))
        next(lines, None)  # the header
        buffer = tfx_internals.CsvLineBuffer()  # TFX's multi-line record buffer
        for line in lines:
            buffer.write(line)
            if buffer.is_complete_line():
                yield buffer.read()
        if not buffer.is_empty():
            raise csv_checks.CsvInputError(f"{path}: a quoted field is not closed")


@beam.ptransform_fn
def _CheckedCsvToExample(  # noqa: N802 - Beam PTransform naming
    pipeline: beam.Pipeline, exec_properties: dict[str, Any], split_pattern: str
) -> beam.PCollection:
    """TFX's _CsvToExample (same type inference and examples), reading text through csv_text."""
    pattern = os.path.join(exec_properties[standard_component_specs.INPUT_BASE_KEY], split_pattern)
    files = fileio.glob(pattern)
    if not files:
        raise csv_checks.CsvInputError(f"no CSV files match {pattern}")
    encoding, _ = _text_options(exec_properties)
    # Parsed as the CSV checks parse it (TFX splits the raw line at commas, with
    # a byte-order mark glued to the first name); the checks made sure all files share it.
    column_names = [c.rstrip("\r\n") for c in csv_text.read_header(files[0], encoding)]
    parsed = (
        pipeline
        | "CreateFilenames" >> beam.Create(files)
        | "ReadFromText" >> beam.ParDo(_ReadCsvRecords(encoding))
        | "ParseCSVLine" >> beam.ParDo(csv_decoder.ParseCSVLine(delimiter=","))
        | "ExtractParsedCSVLines" >> beam.Keys()
    )
    label, kind = _unlabelled_option(exec_properties)
    if label in column_names:
        at = [c.strip() for c in column_names].index(label)
        parsed = parsed | "DropUnlabelled" >> beam.Filter(labels.has_label, at, kind)
    column_infos = beam.pvalue.AsSingleton(
        parsed
        | "InferColumnTypes"
        >> beam.CombineGlobally(csv_decoder.ColumnTypeInferrer(column_names, skip_blank_lines=True))
    )
    return parsed | "ToTFExample" >> beam.ParDo(
        tfx_internals.ParsedCsvToTfExample(),  # TFX's own row encoder
        column_infos,
    )


def shards_for(raw_bytes: int, fraction: float, configured: int = 0) -> int:
    """TFRecord shards for a split holding `fraction` of `raw_bytes` of CSV."""
    if configured > 0:
        return configured
    return max(1, math.ceil(raw_bytes * fraction / RAW_BYTES_PER_SHARD))


@beam.ptransform_fn
def _WriteSplit(  # noqa: N802 - Beam PTransform naming
    examples: beam.PCollection, output_split_path: str, num_shards: int
) -> beam.pvalue.PDone:
    # TFX's write_split.WriteSplit, with the shard count fixed instead of left
    # to the runner (the in-process runner writes one file however big).
    return (
        examples
        | "MaybeSerialize" >> beam.ParDo(write_split.MaybeSerialize())
        | "Shuffle" >> beam.transforms.Reshuffle()
        | "Write"
        >> beam.io.WriteToTFRecord(
            os.path.join(output_split_path, write_split.DEFAULT_FILE_NAME),
            file_name_suffix=".gz",
            num_shards=num_shards,
        )
    )


class Executor(csv_executor.Executor):
    """TFX's CSV ExampleGen executor with schema checks first and sized shards."""

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802 - TFX API
        return _CheckedCsvToExample

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX API
        self._log_startup(input_dict, output_dict, exec_properties)
        reader = str(custom_struct(exec_properties).get("csv_reader") or DEFAULT_CSV_READER)
        if reader == "arrow":
            try:
                _ArrowIngest(self, output_dict, exec_properties).run()
                return
            except arrow_csv.ArrowCsvError as e:
                # The CSV checks below name the file, line and column of a real
                # problem; input they accept is converted by TFX's reader.
                logging.warning("Arrow CSV reader declined (%s); using TFX's CSV reader", e)
        elif reader != "tfx":
            raise ValueError(f"csv_reader must be 'arrow' or 'tfx', not {reader!r}")
        input_config, output_config = split_configs(exec_properties)
        examples = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.EXAMPLES_KEY]
        )
        split_names = example_gen_utils.generate_output_split_names(input_config, output_config)
        examples.split_names = artifact_utils.encode_split_names(split_names)

        # Checks run before Beam starts, so bad input fails in seconds with file and line.
        files = resolved_files(exec_properties)
        if not files:
            patterns = ", ".join(s.pattern for s in input_config.splits)
            raise csv_checks.CsvInputError(
                f"no CSV files match {patterns} under "
                f"{exec_properties[standard_component_specs.INPUT_BASE_KEY]}"
            )
        columns = _columns_from_custom_config(exec_properties)
        label, kind = _unlabelled_option(exec_properties)
        if columns:
            encoding, nan_free = _text_options(exec_properties)
            longest: dict[str, int] = {}
            # A label to drop rows by is checked as text: its bad cells drop rows, not the run.
            checked = labels.label_as_text(columns, label) if label else columns
            rows = csv_checks.check_csv_files(
                files, checked, encoding=encoding, finite=nan_free, cell_chars=longest
            )
            dropped = labels.count_unlabelled(files, label, kind, encoding) if label else 0
            examples.set_int_custom_property(ROW_COUNT, rows - dropped)
            examples.set_int_custom_property(labels.UNLABELLED_DROPPED, dropped)
            _set_longest_cells(examples, longest)
        raw_bytes = exec_properties.get(RAW_BYTES) or sum(fileio.stat(f).length for f in files)
        configured = int(custom_struct(exec_properties).get("num_shards") or 0)
        if output_config.split_config.splits:
            total = sum(s.hash_buckets for s in output_config.split_config.splits)
            fractions = [s.hash_buckets / total for s in output_config.split_config.splits]
        else:
            fractions = [1.0 / len(split_names)] * len(split_names)
        shards = {
            name: shards_for(raw_bytes, f, configured)
            for name, f in zip(split_names, fractions, strict=True)
        }
        with self._make_beam_pipeline() as pipeline:
            example_splits = self.GenerateExamplesByBeam(pipeline, exec_properties)
            for name, split in example_splits.items():
                _ = split | f"WriteSplit[{name}]" >> _WriteSplit(
                    artifact_utils.get_split_uri([examples], name), shards[name]
                )
        examples.set_int_custom_property(TFRECORD_SHARDS, sum(shards.values()))
        examples.set_string_custom_property(CSV_READER, "tfx")
        # As TFX's base executor: record payload and file format for readers.
        payload = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
        if payload:
            examples_utils.set_payload_format(examples, payload)
        file_format = exec_properties.get(standard_component_specs.OUTPUT_FILE_FORMAT_KEY)
        if file_format:
            examples_utils.set_file_format(examples, write_split.to_file_format_str(file_format))


# The CSV reader when the component's custom config names none: the Arrow
# ingest (components/example_gen/csv_ingest.py), which writes the same examples in the same
# splits as TFX's reader, each shard one GZIP stream with its trailer.
DEFAULT_CSV_READER = "arrow"
CSV_READERS = ("arrow", "tfx")


class _ArrowIngest:
    """CSV -> tf.Example splits with the Arrow ingest (components/example_gen/csv_ingest.py).

    Raises arrow_csv.ArrowCsvError, with nothing left in the output, for any
    input or config it cannot convert exactly as TFX would: before Beam starts
    (config, headers, empty files, the first block) or when a task fails. The
    executor then runs the CSV checks, which name the file and line of a real
    problem, and converts input they accept with TFX's reader.
    """

    def __init__(self, executor, output_dict, exec_properties):
        self.executor = executor
        self.exec_properties = exec_properties
        self.examples = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.EXAMPLES_KEY]
        )

    def _check_config(self, input_config, output_config, columns):
        props = self.exec_properties
        payload = props.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
        if payload and payload != example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE:
            raise arrow_csv.ArrowCsvError(f"payload format {payload} is not tf.Example")
        file_format = props.get(standard_component_specs.OUTPUT_FILE_FORMAT_KEY)
        if file_format and file_format != example_gen_pb2.FileFormat.FORMAT_TFRECORDS_GZIP:
            raise arrow_csv.ArrowCsvError(f"file format {file_format} is not GZIP TFRecord")
        if output_config.split_config.HasField("partition_feature_name"):
            raise arrow_csv.ArrowCsvError("partitioning by a feature")
        if not columns:
            raise arrow_csv.ArrowCsvError("no column types in the custom config")

    def run(self) -> None:
        props = self.exec_properties
        input_config, output_config = split_configs(props)
        columns = _columns_from_custom_config(props)
        self._check_config(input_config, output_config, columns)
        split_names = example_gen_utils.generate_output_split_names(input_config, output_config)
        inputs, files = _input_files(props[standard_component_specs.INPUT_BASE_KEY], input_config)
        # Headers only, before Beam starts; rows are checked as they are read, and
        # any doubt there fails the Beam run, which sends the input to the checks.
        encoding, nan_free = _text_options(props)
        header, sizes, starts = _check_headers(files, columns, encoding)
        label, _ = _unlabelled_option(props)
        read_columns = labels.label_as_text(columns, label) if label else columns
        first_files = _first_file_of_each_split(inputs, len(input_config.splits))
        raw_bytes = props.get(RAW_BYTES) or sum(sizes.values())
        configured = int(custom_struct(props).get("num_shards") or 0)
        buckets, fractions = _hash_buckets(input_config, output_config, split_names)
        # Task t writes shard t of every split (no shuffle), so every split gets
        # as many shards as the largest one needs (num_shards, when set, exactly).
        tasks = max(shards_for(raw_bytes, f, configured) for f in fractions)
        self.examples.split_names = artifact_utils.encode_split_names(split_names)
        uris = [artifact_utils.get_split_uri([self.examples], name) for name in split_names]
        spec = csv_ingest.IngestSpec(
            header=tuple(header),
            columns=columns,
            data_starts=starts,
            empty_columns=tuple(
                csv_ingest.empty_in_first_block(
                    f, starts[f], header, read_columns, encoding=encoding, finite=nan_free
                )
                for f in first_files
            ),
            boundaries=tuple(buckets),
            split_uris=tuple(uris),
            shards=tasks,
            encoding=encoding,
            finite=nan_free,
            drop_unlabelled=label,
        )
        plan = csv_ingest.plan_tasks([(f, starts[f], sizes[f], i) for f, i in inputs], tasks)
        counts, spec = self._write(plan, spec, files, len(input_config.splits))
        self._record(counts, tasks * len(split_names), spec)

    def _write(self, plan, spec: csv_ingest.IngestSpec, files: list[str], input_splits: int):
        """Runs the Beam ingest (twice if the first block guessed the empty columns wrong)."""
        make_pipeline = tfx_internals.make_beam_pipeline(self.executor)
        counts = csv_ingest.run(make_pipeline(), plan, spec)
        empty_rows = [f for f in files if counts.rows.get(f, 0) == 0]
        if empty_rows:
            csv_ingest.remove_outputs(spec.split_uris)
            raise arrow_csv.ArrowCsvError(f"no data rows in {empty_rows}")
        # A column without a single value in an input split is untyped in
        # CsvExampleGen's examples (`Feature()`), which changes the bytes and so
        # the split. The guess from the first block is checked against the
        # counts of the whole input; if wrong (rare), the examples are written again.
        empty = counts.empty_columns(input_splits, spec.header)
        if tuple(empty) != spec.empty_columns:
            logging.info(
                "columns without values %s, not %s: writing again", empty, spec.empty_columns
            )
            spec = dataclasses.replace(spec, empty_columns=tuple(empty))
            counts = csv_ingest.run(make_pipeline(), plan, spec)
        return counts, spec

    def _record(self, counts, shards: int, spec: csv_ingest.IngestSpec) -> None:
        """The examples artifact's properties, as TFX's reader would set them plus ours."""
        # Every example holds every column (a missing cell is an empty list); columns
        # empty in a whole input split are untyped. Output splits cut from different
        # input splits with different empty columns get no layout.
        if len(set(spec.empty_columns)) == 1:
            example_layout.set_layout(
                self.examples, {c: spec.columns[c] for c in spec.header}, spec.empty_columns[0]
            )
        self.examples.set_int_custom_property(ROW_COUNT, sum(counts.rows.values()))
        if spec.drop_unlabelled:
            self.examples.set_int_custom_property(labels.UNLABELLED_DROPPED, counts.unlabelled)
        _set_longest_cells(self.examples, counts.longest)
        self.examples.set_int_custom_property(TFRECORD_SHARDS, shards)
        self.examples.set_string_custom_property(CSV_READER, "arrow")
        examples_utils.set_payload_format(
            self.examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE
        )
        examples_utils.set_file_format(
            self.examples,
            write_split.to_file_format_str(example_gen_pb2.FileFormat.FORMAT_TFRECORDS_GZIP),
        )


def _input_files(base: str, input_config) -> tuple[list[tuple[str, int]], list[str]]:
    """((file, input split index) pairs, the sorted distinct files): plain CSV, local or
    in s3:// / gs:// (read in byte ranges through components/io/object_storage.py)."""
    inputs = []  # (file, input split index)
    for index, split in enumerate(input_config.splits):
        inputs.extend((f, index) for f in sorted(fileio.glob(os.path.join(base, split.pattern))))
    files = sorted({f for f, _ in inputs})
    if not files:
        raise arrow_csv.ArrowCsvError("no files")  # the checks path reports it
    other = [
        f for f in files if object_storage.scheme_of(f) not in ("", *object_storage.RANGE_SCHEMES)
    ]
    if other:  # the byte ranges are read through Arrow's filesystems, which know no others
        raise arrow_csv.ArrowCsvError(
            f"files in {object_storage.scheme_of(other[0])}:// (the Arrow ingest reads local "
            f"paths, s3:// and gs://): {other[:3]}"
        )
    compressed = [f for f in files if f.endswith((".gz", ".bz2", ".zst", ".zip", ".deflate"))]
    if compressed:  # TFX's reader decompresses by file name; the byte ranges would not
        raise arrow_csv.ArrowCsvError(f"compressed CSV: {compressed[:3]}")
    return inputs, files


def _check_headers(
    files: list[str], columns, encoding: str
) -> tuple[list[str], dict[str, int], dict[str, int]]:
    """(header, file -> size, file -> offset of its first data row); every file the same header."""
    header = arrow_csv.read_header(files[0], encoding)
    missing = [c for c in columns if c not in header]
    if missing:
        raise arrow_csv.ArrowCsvError(f"columns missing from the header: {missing}")
    sizes = {f: fileio.stat(f).length for f in files}
    starts = {f: arrow_csv.data_start(f) for f in files}
    for path in files:
        if arrow_csv.read_header(path, encoding) != header:
            raise arrow_csv.ArrowCsvError(f"{path}: header differs")
        if starts[path] >= sizes[path]:
            raise arrow_csv.ArrowCsvError(f"{path}: no data rows")
    return header, sizes, starts


def _first_file_of_each_split(inputs: list[tuple[str, int]], input_splits: int) -> list[str]:
    """The file whose first block guesses each input split's empty columns."""
    first_files = []
    for index in range(input_splits):
        split_files = [f for f, i in inputs if i == index]
        if not split_files:
            raise arrow_csv.ArrowCsvError(f"no files for input split {index}")
        first_files.append(split_files[0])
    return first_files


def _hash_buckets(input_config, output_config, split_names) -> tuple[list[int], list[float]]:
    """(cumulative hash-bucket boundaries of the output splits, each split's share of rows)."""
    buckets: list[int] = []
    if output_config.split_config.splits:
        assert len(input_config.splits) == 1, "one input split when output splits are set"
        for s in output_config.split_config.splits:
            buckets.append((buckets[-1] if buckets else 0) + s.hash_buckets)
        fractions = [s.hash_buckets / buckets[-1] for s in output_config.split_config.splits]
    else:
        fractions = [1.0 / len(split_names)] * len(split_names)
    return buckets, fractions


class CheckedCsvExampleGen(FileBasedExampleGen):
    DRIVER_CLASS = ContentFingerprintDriver


def checked_csv_example_gen(
    input_base: str,
    columns: dict[str, str],
    input_config: example_gen_pb2.Input | None = None,
    output_config: example_gen_pb2.Output | None = None,
    range_config: Any = None,
    *,
    version: int | None = None,
    expected_sha256: str | None = None,
    num_shards: int = 0,
    csv_reader: str = DEFAULT_CSV_READER,
    encoding: str = csv_text.DEFAULT_ENCODING,
    nan_free: Collection[str] = (),
    drop_unlabelled: str = "",
) -> FileBasedExampleGen:
    """A CSV ExampleGen whose input is checked against `columns` (name -> schema type).

    Args:
      version: ingest this version of the span (default: the span's latest).
      expected_sha256: refuse input whose content SHA-256 is another (a named data version).
      num_shards: TFRecord files per output split; 0 sizes them for the data.
      csv_reader: "arrow" (pyarrow.csv + native tf.Example encoding, same examples
        and splits as TFX's) or "tfx" (TFX's CsvExampleGen reader).
      encoding: of the CSV text (components/io/csv_text.py); examples hold UTF-8.
      nan_free: FLOAT columns in which NaN stops the ingest (the schema's
        float_domain { disallow_nan: true }); infinities stop it in any column.
      drop_unlabelled: the label column: rows where it is blank or does not parse as
        its type are left out of every split and counted (components/example_gen/labels.py).
    """
    if csv_reader not in CSV_READERS:
        raise ValueError(f"csv_reader must be one of {CSV_READERS}, not {csv_reader!r}")
    encoding = csv_text.check_encoding(encoding)
    options: dict[str, Any] = {"columns": columns, "num_shards": num_shards}
    if encoding != csv_text.DEFAULT_ENCODING:
        options["encoding"] = encoding
    if nan_free:
        options["nan_free"] = sorted(nan_free)
    if version is not None:
        options["version"] = version
    if expected_sha256:
        options[EXPECTED_SHA256] = expected_sha256
    if drop_unlabelled:
        options["drop_unlabelled"] = drop_unlabelled
    if csv_reader != DEFAULT_CSV_READER:
        # Only when not the default, so default pipelines compile as before.
        options["csv_reader"] = csv_reader
    return example_gen_node(
        CheckedCsvExampleGen,
        Executor,
        COMPONENT_ID,
        options,
        input_base=input_base,
        input_config=input_config,
        output_config=output_config,
        range_config=range_config,
    )
