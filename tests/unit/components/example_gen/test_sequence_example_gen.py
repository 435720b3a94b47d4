"""SequenceExampleGen's executor on small event tables: one SequenceExample per key over
files, splits by key, and bad input named by file and line with nothing left behind."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import tensorflow as tf
from google.protobuf import any_pb2, struct_pb2
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import proto_utils

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


def _run(root: Path, out: Path) -> standard_artifacts.Examples:
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
    seg.Executor().Do({}, {standard_component_specs.EXAMPLES_KEY: [examples]}, props)
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


def test_rows_of_a_key_over_files_become_one_ordered_example_in_one_split(tmp_path):
    rows = [[f"s{i % 40}", i, "yes" if i % 40 < 20 else "no", i % 40, float(i)] for i in range(200)]
    _drop(tmp_path / "data", [rows[1::2], rows[::2][::-1]])  # each key over both files, reversed
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
