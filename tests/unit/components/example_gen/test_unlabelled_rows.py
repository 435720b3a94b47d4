"""ExampleGen drops rows without a usable label (components/example_gen/labels.py): the
Arrow ingest and TFX's reader path write the same examples and count the same rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from components.example_gen import arrow_csv, csv_ingest, labels
from components.example_gen.csv_checks import BYTES, FLOAT, INT, check_csv_files

COLUMNS = {"x": INT, "colour": BYTES, "y": FLOAT}
CELLS = ["", " ", "1", " 2.5 ", "-3e2", ".5", "n/a", "nan", "inf", "-Infinity", "1e", "0x10", "1_0"]


@pytest.mark.parametrize("kind", [INT, FLOAT, BYTES])
def test_the_row_rule_and_the_batch_rule_agree(kind):
    column = pa.array([None if c == "" else c for c in CELLS], pa.string())
    mask = labels.usable_mask(column, kind).to_pylist()
    assert mask == [labels.usable_label(c, kind) for c in CELLS]


def test_blank_and_text_labels_are_dropped_and_the_label_typed():
    batch = pa.RecordBatch.from_pydict(
        {"x": [1, 2, 3, 4], "y": ["1.5", None, "n/a", " 7 "]},
        schema=pa.schema([("x", pa.int64()), ("y", pa.string())]),
    )
    kept, dropped = labels.drop_unlabelled(batch, "y", FLOAT)
    assert dropped == 2
    assert kept.column("y").type == pa.float64() and kept.column("y").to_pylist() == [1.5, 7.0]
    assert kept.column("x").to_pylist() == [1, 4]


def _write_csv(tmp_path: Path) -> str:
    rows = []
    for i in range(60):
        y = "" if i % 10 == 0 else ("n/a" if i % 17 == 0 else f"{i / 4}")
        rows.append(f"{i},{'' if i % 7 == 0 else 'red'},{y}")
    path = tmp_path / "data.csv"
    path.write_text("x,colour,y\n" + "\n".join(rows) + "\n")
    return str(path)


def _arrow(path: str, tmp_path: Path) -> tuple[list[bytes], int]:
    import apache_beam as beam
    import tensorflow as tf

    header = arrow_csv.read_header(path)
    start = arrow_csv.data_start(path)
    out = tmp_path / "arrow"
    spec = csv_ingest.IngestSpec(
        header=tuple(header),
        columns=COLUMNS,
        data_starts={path: start},
        empty_columns=(frozenset(),),
        boundaries=(),
        split_uris=(str(out),),
        shards=1,
        drop_unlabelled="y",
    )
    plan = [[csv_ingest.Piece(path, start, Path(path).stat().st_size, 0)]]
    counts = csv_ingest.run(beam.Pipeline(), plan, spec)
    files = [str(f) for f in out.iterdir()]
    records = tf.data.TFRecordDataset(files, compression_type="GZIP")
    return sorted(r.numpy() for r in records), counts.unlabelled


def _tfx(path: str) -> list[bytes]:
    import apache_beam as beam
    import tensorflow as tf
    from google.protobuf import json_format

    from components.example_gen import csv_example_gen, driver

    config = driver.packed_custom_config({"columns": COLUMNS, "drop_unlabelled": "y"})
    props = {
        "input_base": str(Path(path).parent),
        "custom_config": json_format.MessageToJson(config),
    }
    out = f"{path}.examples.tfrecord"
    with beam.Pipeline() as p:
        _ = (
            p
            | csv_example_gen._CheckedCsvToExample(props, Path(path).name)
            | beam.Map(lambda e: e.SerializeToString(deterministic=True))
            | beam.io.WriteToTFRecord(out, shard_name_template="")
        )
    return sorted(r.numpy() for r in tf.data.TFRecordDataset([out]))


def test_both_readers_drop_the_same_rows(tmp_path):
    path = _write_csv(tmp_path)
    # The checks take the label as text (its bad cells are dropped rows, not errors).
    assert check_csv_files([path], labels.label_as_text(COLUMNS, "y")) == 60
    arrow, dropped = _arrow(path, tmp_path)
    expected = sum(1 for i in range(60) if i % 10 == 0 or i % 17 == 0)
    assert dropped == labels.count_unlabelled([path], "y", FLOAT) == expected
    assert len(arrow) == 60 - expected
    assert arrow == _tfx(path)
