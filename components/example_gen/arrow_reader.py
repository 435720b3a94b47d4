"""The CSV ExampleGen's Arrow reader: one execution planned, run through csv_ingest, and recorded.

The executor (csv_example_gen.py) tries this reader first. It converts only
input and configs it can convert exactly as TFX's reader would; for anything
else it raises arrow_csv.ArrowCsvError with nothing left in the output, and
the executor falls back to the CSV checks and TFX's reader.
"""

from __future__ import annotations

import dataclasses
import logging
import os

from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_gen import write_split
from tfx.components.util import examples_utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs

from compat import tfx as tfx_internals
from components.example_gen import arrow_csv, csv_ingest, labels
from components.example_gen import layout as example_layout
from components.example_gen.csv_options import (
    CSV_READER,
    columns_of,
    set_longest_cells,
    shards_for,
    text_options,
    unlabelled_option,
)
from components.example_gen.driver import (
    RAW_BYTES,
    ROW_COUNT,
    TFRECORD_SHARDS,
    custom_struct,
    split_configs,
)
from components.io import object_storage


class ArrowIngest:
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
        columns = columns_of(props)
        self._check_config(input_config, output_config, columns)
        split_names = example_gen_utils.generate_output_split_names(input_config, output_config)
        inputs, files = _input_files(props[standard_component_specs.INPUT_BASE_KEY], input_config)
        # Headers only, before Beam starts; rows are checked as they are read, and
        # any doubt there fails the Beam run, which sends the input to the checks.
        encoding, nan_free = text_options(props)
        header, sizes, starts = _check_headers(files, columns, encoding)
        label, _ = unlabelled_option(props)
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
        set_longest_cells(self.examples, counts.longest)
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
    inputs: list[tuple[str, int]] = []  # (file, input split index)
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
        if len(input_config.splits) != 1:  # TFX refuses this too; here it would misbucket
            raise ValueError(f"output splits need one input split, got {len(input_config.splits)}")
        for s in output_config.split_config.splits:
            buckets.append((buckets[-1] if buckets else 0) + s.hash_buckets)
        fractions = [s.hash_buckets / buckets[-1] for s in output_config.split_config.splits]
    else:
        fractions = [1.0 / len(split_names)] * len(split_names)
    return buckets, fractions
