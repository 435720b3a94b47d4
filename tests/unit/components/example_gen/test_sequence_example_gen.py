"""SequenceExampleGen's executor on small event tables: one SequenceExample per key over
files, splits by key, and bad input named by file and line with nothing left behind; on
beam_spark under local[2] the same sequences, counts and errors as in-process."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf
from google.protobuf import any_pb2, struct_pb2
from spark_local import SPARK_ARGS, local_spark
from tfx.dsl.components.base import base_beam_executor
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import proto_utils

from beam_spark.runner import SparkRunner
from components.example_gen import sequence_example_gen as seg
from components.example_gen.csv_checks import CsvInputError
from components.example_gen.sequence_records import SequenceInputError

HEADER = ["k", "t", "y", "c", "x"]
SEQUENCE = {
    "key": "k", "order_by": "t", "label": "y", "task": "binary", "classes": ["no", "yes"],
    "context": {"c": "zscore"}, "features": {"x": "zscore"}, "max_length": 4,
}  # fmt: skip
COLUMNS = {"k": "BYTES", "t": "FLOAT", "y": "BYTES", "c": "FLOAT", "x": "FLOAT"}


def _drop(root: Path, files: list[list[list]]) -> None:
    span = root / "span-1"
    span.mkdir(parents=True)
    for i, rows in enumerate(files):
        with (span / f"e{i}.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(HEADER)
            writer.writerows(rows)


def _run(root: Path, out: Path, beam_args: list[str] | None = None) -> standard_artifacts.Examples:
    struct = struct_pb2.Struct()
    struct.update({"sequence": SEQUENCE, "columns": COLUMNS, "num_shards": 0})
    packed = any_pb2.Any()
    packed.Pack(struct)
    examples = standard_artifacts.Examples()
    examples.uri = str(out)
    split = example_gen_pb2.SplitConfig.Split
    props = {
        standard_component_specs.INPUT_BASE_KEY: str(root),
        standard_component_specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(
            example_gen_pb2.Input(
                splits=[example_gen_pb2.Input.Split(name="single_split", pattern="span-1/*")]
            )
        ),
        standard_component_specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(
            example_gen_pb2.Output(
                split_config=example_gen_pb2.SplitConfig(
                    splits=[split(name="train", hash_buckets=2), split(name="eval", hash_buckets=1)]
                )
            )
        ),
        standard_component_specs.CUSTOM_CONFIG_KEY: proto_utils.proto_to_json(
            example_gen_pb2.CustomConfig(custom_config=packed)
        ),
    }
    context = base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=beam_args or [])
    seg.Executor(context).Do({}, {standard_component_specs.EXAMPLES_KEY: [examples]}, props)
    return examples


def _examples(out: Path) -> dict[str, dict[str, tf.train.SequenceExample]]:
    found = {}
    for split in ("train", "eval"):
        files = sorted(str(p) for p in (out / f"Split-{split}").glob("*.gz"))
        records = tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator()
        found[split] = {}
        for record in records:
            example = tf.train.SequenceExample.FromString(record)
            found[split][example.context.feature["k"].bytes_list.value[0].decode()] = example
    return found


def _spread_rows() -> list[list[list]]:
    """200 events of 40 keys over two files, each key in both, one file reversed."""
    rows = [[f"s{i % 40}", i, "yes" if i % 40 < 20 else "no", i % 40, float(i)] for i in range(200)]
    return [rows[1::2], rows[::2][::-1]]


def test_rows_of_a_key_over_files_become_one_ordered_example_in_one_split(tmp_path):
    _drop(tmp_path / "data", _spread_rows())
    artifact = _run(tmp_path / "data", tmp_path / "out")
    found = _examples(tmp_path / "out")
    assert not set(found["train"]) & set(found["eval"])
    every = {**found["train"], **found["eval"]}
    assert len(every) == 40
    steps = every["s3"].feature_lists.feature_list["x"].feature
    assert [f.float_list.value[0] for f in steps] == [43.0, 83.0, 123.0, 163.0]  # last 4 of 5
    assert artifact.get_int_custom_property(seg.SEQUENCE_COUNT) == 40
    assert artifact.get_int_custom_property(seg.TRUNCATED_SEQUENCES) == 40
    assert artifact.get_string_custom_property("payload_format") == "FORMAT_TF_SEQUENCE_EXAMPLE"


def test_a_label_varying_within_a_key_stops_the_ingest_naming_rows_and_writes_nothing(tmp_path):
    rows = [[f"s{i % 5}", i, "no", 1.0, float(i)] for i in range(20)]
    rows[7][2] = "yes"
    _drop(tmp_path / "data", [rows])
    with pytest.raises(SequenceInputError, match=r"key 's2'.*label column 'y' varies.*e0\.csv:9"):
        _run(tmp_path / "data", tmp_path / "out")
    assert not list((tmp_path / "out").glob("Split-*/*"))


def test_the_tables_csv_checks_name_file_line_and_column(tmp_path):
    rows = [[f"s{i % 5}", i, "no", 1.0, float(i)] for i in range(20)]
    rows[4][4] = "lots"
    _drop(tmp_path / "data", [rows])
    with pytest.raises(CsvInputError, match=r"e0\.csv:6 column 'x': 'lots' is not a number"):
        _run(tmp_path / "data", tmp_path / "out")


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local[2] SparkContext the runner reuses (the one running in this process, if any)."""
    with local_spark("sequence-example-gen") as context:
        yield context


@pytest.mark.timeout(300)
def test_on_spark_the_sequences_and_counts_equal_the_in_process_run(tmp_path, spark, monkeypatch):
    """The GroupByKey through Spark's shuffle, the split by key and the sharded write give
    each split the same SequenceExamples, and the counters the same counts."""
    _drop(tmp_path / "data", _spread_rows())
    here = _run(tmp_path / "data", tmp_path / "here")
    ran: list[str] = []
    stock = SparkRunner.run_pipeline

    def counted(self, pipeline, options):
        ran.append(type(self).__name__)
        return stock(self, pipeline, options)

    monkeypatch.setattr(SparkRunner, "run_pipeline", counted)
    there = _run(tmp_path / "data", tmp_path / "there", SPARK_ARGS)
    assert len(ran) == 1  # the executor's pipeline ran on beam_spark
    assert _examples(tmp_path / "there") == _examples(tmp_path / "here")
    for name in (seg.SEQUENCE_COUNT, seg.TRUNCATED_SEQUENCES):
        assert there.get_int_custom_property(name) == here.get_int_custom_property(name) > 0
    per_split = seg.SEQUENCES_PER_SPLIT
    assert there.get_string_custom_property(per_split) == here.get_string_custom_property(per_split)


@pytest.mark.timeout(300)
def test_on_spark_a_bad_key_is_named_by_file_and_line_and_nothing_is_written(tmp_path, spark):
    """A key whose label varies fails inside a Spark task; the run names key, column, file
    and line as in-process, not a Py4J trace, and leaves no split folder behind."""
    rows = [[f"s{i % 5}", i, "no", 1.0, float(i)] for i in range(20)]
    rows[7][2] = "yes"
    _drop(tmp_path / "data", [rows])
    with pytest.raises(SequenceInputError, match=r"key 's2'.*label column 'y' varies.*e0\.csv:9"):
        _run(tmp_path / "data", tmp_path / "out", SPARK_ARGS)
    assert not list((tmp_path / "out").glob("Split-*/*"))
