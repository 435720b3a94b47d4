"""SequenceExampleGen: event tables (one CSV row per event) to one `tf.train.SequenceExample`
per key, in GZIP TFRecord splits.

The component is TFX's FileBasedExampleGen with the project's content-fingerprint
driver, so spans, versions, patterns, range configs and the cache behave as for
tables. The executor is one Beam pipeline:

  files -> rows (file:line kept) -> (key, event) -> GroupByKey -> one SequenceExample
  per key (sequence_records.build: sorted by the order column, checked, cut to
  max_length) -> split by a hash of the key -> GZIP shards cut by bytes

- Grouping is Beam's GroupByKey: no step holds the span, only one key's events, so
  the Spark runner (or any runner) scales it; rows of a key may be spread over
  files and in any order.
- The split is decided by a hash of the key, so a sequence never straddles train
  and eval, whichever files its rows came in.
- Before Beam starts, the files go through the tables' CSV checks (file, line,
  column); inside, a key whose label or context column varies, or whose order
  values repeat, stops the run naming the rows, and nothing is published.
- The artifact's payload format is FORMAT_TF_SEQUENCE_EXAMPLE: TFX's StatisticsGen,
  Transform and Evaluator read it through TFXIO as SequenceExamples.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

import apache_beam as beam
from absl import logging
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_gen import write_split
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.components.util import examples_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs

from components.example_gen import csv_checks
from components.example_gen.csv_options import shards_for
from components.example_gen.driver import (
    EXPECTED_SHA256,
    RAW_BYTES,
    ROW_COUNT,
    TFRECORD_SHARDS,
    ContentFingerprintDriver,
    custom_struct,
    example_gen_node,
    resolved_files,
    split_configs,
)
from components.example_gen.sequence_records import Layout, SequenceInputError, build, read_events
from components.io import csv_text

COMPONENT_ID = "SequenceExampleGen"
METRICS_NAMESPACE = "SequenceExampleGen"
# Custom properties of the Examples artifact.
SEQUENCE_COUNT = "sequence_count"
SEQUENCES_PER_SPLIT = "sequences_per_split"  # JSON {split: sequences}
TRUNCATED_SEQUENCES = "truncated_sequences"
EVENTS_PER_SECOND = "events_per_second"
INGEST_SECONDS = "ingest_seconds"


def bucket_of(key: str, buckets: int) -> int:
    """The hash bucket of a key: the same key, the same split, in every run and process."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % buckets


def split_of(key: str, cumulative: list[int]) -> int:
    bucket = bucket_of(key, cumulative[-1])
    return next(i for i, edge in enumerate(cumulative) if bucket < edge)


class _ReadEvents(beam.DoFn):
    def __init__(self, layout: Layout, encoding: str) -> None:
        self._layout = layout
        self._encoding = encoding

    def process(self, path: str):
        for key, event in read_events(path, self._layout, self._encoding):
            beam.metrics.Metrics.counter(METRICS_NAMESPACE, "events").inc()
            yield key, event


class _Build(beam.DoFn):
    """One key's events -> (split index, serialized SequenceExample)."""

    def __init__(self, layout: Layout, cumulative: list[int]) -> None:
        self._layout = layout
        self._cumulative = cumulative

    def process(self, element):
        key, events = element
        example, cut = build(key, list(events), self._layout)
        split = split_of(key, self._cumulative)
        beam.metrics.Metrics.counter(METRICS_NAMESPACE, f"sequences_{split}").inc()
        if cut:
            beam.metrics.Metrics.counter(METRICS_NAMESPACE, "truncated").inc()
        yield split, example.SerializeToString()


def _options(exec_properties) -> tuple[Layout, str, int]:
    options = custom_struct(exec_properties)
    if "sequence" not in options or "columns" not in options:
        raise ValueError("SequenceExampleGen needs `sequence` options and the `columns` types")
    layout = Layout.of(options["sequence"], options["columns"])
    encoding = str(options.get("encoding") or csv_text.DEFAULT_ENCODING)
    return layout, encoding, int(options.get("num_shards") or 0)


def _counter(result, name: str) -> int:
    query = result.metrics().query(
        beam.metrics.MetricsFilter().with_namespace(METRICS_NAMESPACE).with_name(name)
    )
    return sum(c.committed or c.attempted or 0 for c in query["counters"])


class Executor(base_beam_executor.BaseBeamExecutor):
    """Event CSVs -> split, sharded GZIP TFRecords of SequenceExamples, in one Beam pipeline."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        layout, encoding, configured = _options(exec_properties)
        input_config, output_config = split_configs(exec_properties)
        if len(input_config.splits) != 1 or not output_config.split_config.splits:
            raise ValueError("SequenceExampleGen takes one input split and splits it by hash")
        examples = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.EXAMPLES_KEY]
        )
        split_names = example_gen_utils.generate_output_split_names(input_config, output_config)
        examples.split_names = artifact_utils.encode_split_names(split_names)
        files = resolved_files(exec_properties)
        base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        if not files:
            raise csv_checks.CsvInputError(
                f"no CSV files match {input_config.splits[0].pattern} under {base}"
            )
        # The tables' checks first: bad input fails in seconds, naming file, line and column.
        rows = csv_checks.check_csv_files(files, dict(layout.kinds), encoding=encoding)
        buckets = [s.hash_buckets for s in output_config.split_config.splits]
        cumulative = [sum(buckets[: i + 1]) for i in range(len(buckets))]
        raw_bytes = exec_properties.get(RAW_BYTES) or sum(fileio.stat(f).length for f in files)
        shards = [shards_for(raw_bytes, b / sum(buckets), configured) for b in buckets]
        uris = [artifact_utils.get_split_uri([examples], name) for name in split_names]
        started = time.perf_counter()
        try:
            result = self._run_pipeline(files, layout, encoding, cumulative, uris, shards)
        except Exception as e:
            for uri in uris:  # nothing half-written stays behind
                if fileio.exists(uri):
                    fileio.rmtree(uri)
            raise _input_error(e) from e
        seconds = time.perf_counter() - started
        per_split = {n: _counter(result, f"sequences_{i}") for i, n in enumerate(split_names)}
        events = _counter(result, "events")
        _record(examples, per_split, events, _counter(result, "truncated"), seconds)
        examples.set_int_custom_property(ROW_COUNT, rows)
        examples.set_int_custom_property(TFRECORD_SHARDS, sum(shards))
        examples_utils.set_payload_format(
            examples, example_gen_pb2.PayloadFormat.FORMAT_TF_SEQUENCE_EXAMPLE
        )
        examples_utils.set_file_format(
            examples,
            write_split.to_file_format_str(example_gen_pb2.FileFormat.FORMAT_TFRECORDS_GZIP),
        )
        logging.info(
            "SequenceExampleGen: %d events -> %s sequences in %.1fs (%.0f events/s)",
            events, per_split, seconds, events / max(seconds, 1e-9),
        )  # fmt: skip

    def _run_pipeline(self, files, layout, encoding, cumulative, uris, shards):
        pipeline = self._make_beam_pipeline()
        built = (
            pipeline
            | "Files" >> beam.Create(files)
            | "Spread" >> beam.Reshuffle()
            | "ReadEvents" >> beam.ParDo(_ReadEvents(layout, encoding))
            | "GroupByKey" >> beam.GroupByKey()
            | "Build" >> beam.ParDo(_Build(layout, cumulative))
        )
        parts = built | "Split" >> beam.Partition(lambda e, n: e[0], len(uris))
        for i, (part, uri) in enumerate(zip(parts, uris, strict=True)):
            _ = (
                part
                | f"Values[{i}]" >> beam.Values()
                | f"Write[{i}]"
                >> beam.io.WriteToTFRecord(
                    os.path.join(uri, write_split.DEFAULT_FILE_NAME),
                    file_name_suffix=".gz",
                    num_shards=shards[i],
                )
            )
        result = pipeline.run()
        result.wait_until_finish()
        return result


def _input_error(error: Exception) -> Exception:
    """The SequenceInputError inside a Beam failure, so the run names file and line plainly."""
    seen: Exception | None = error
    while seen is not None:
        if isinstance(seen, SequenceInputError):
            return seen
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
    text = str(error)
    marker = "SequenceInputError: "
    if marker in text:
        return SequenceInputError(text.split(marker, 1)[1].split("\n", 1)[0].split(" [while", 1)[0])
    return error


def _record(examples, per_split: dict[str, int], events: int, truncated: int, seconds: float):
    import json

    total = sum(per_split.values())
    if total == 0:
        raise SequenceInputError("no sequences: the files hold no data rows")
    examples.set_int_custom_property(SEQUENCE_COUNT, total)
    examples.set_string_custom_property(SEQUENCES_PER_SPLIT, json.dumps(per_split))
    examples.set_int_custom_property(TRUNCATED_SEQUENCES, truncated)
    examples.set_float_custom_property(INGEST_SECONDS, round(seconds, 3))
    examples.set_float_custom_property(EVENTS_PER_SECOND, round(events / max(seconds, 1e-9), 1))


class SequenceExampleGen(FileBasedExampleGen):
    DRIVER_CLASS = ContentFingerprintDriver


def sequence_example_gen(
    input_base: str,
    sequence: dict[str, Any],
    columns: dict[str, str],
    input_config: example_gen_pb2.Input | None = None,
    output_config: example_gen_pb2.Output | None = None,
    range_config: Any = None,
    *,
    version: int | None = None,
    expected_sha256: str | None = None,
    num_shards: int = 0,
    encoding: str = csv_text.DEFAULT_ENCODING,
) -> FileBasedExampleGen:
    """An ExampleGen over event CSVs under `input_base/span-<N>/`.

    Args:
      sequence: SequenceOptions.to_dict() (pipeline/dataset_sequence.py).
      columns: every column the sequences read -> INT, FLOAT or BYTES (from the schema).
      num_shards: TFRecord files per split; 0 cuts them by bytes.
    """
    missing = [c for c in Layout.of(sequence, columns).columns() if c not in columns]
    if missing:
        raise ValueError(f"no type for column(s) {missing}: the schema must name them")
    options: dict[str, Any] = {
        "sequence": dict(sequence),
        "columns": dict(columns),
        "num_shards": num_shards,
        "encoding": csv_text.check_encoding(encoding),
    }
    if version is not None:
        options["version"] = version
    if expected_sha256:
        options[EXPECTED_SHA256] = expected_sha256
    return example_gen_node(
        SequenceExampleGen,
        Executor,
        COMPONENT_ID,
        options,
        input_base=input_base,
        input_config=input_config,
        output_config=output_config,
        range_config=range_config,
    )
