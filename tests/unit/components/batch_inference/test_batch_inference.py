"""Batch inference without a pipeline run: a stand-in SavedModel scores generated spans.

The stand-in's serving_default parses trip_miles (required: a row without it
is rejected by the signature, as a real model rejects a missing required
feature) and returns NaN above 1000 miles, so every way a row can be skipped
is exercised: wrong field count, a cell not of its schema type, a row the
signature rejects, an output that is not a number.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from components.batch_inference import output, scoring, serving
from components.validation.schema_importer import load_schema, schema_column_types
from pipeline.config import PROJECT_ROOT

SCHEMA = PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt"
EMBEDDED_CSV = PROJECT_ROOT / "data" / "taxi" / "span-1" / "data.csv"


class _Model(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
        spec = {"trip_miles": tf.io.FixedLenFeature([1], tf.float32)}
        miles = tf.io.parse_example(examples, spec)["trip_miles"]
        nan = tf.constant(np.nan, tf.float32)
        return {"output_0": tf.where(miles > 1000.0, nan, tf.sigmoid(miles / 10.0))}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("model") / "1")
    model = _Model()
    tf.saved_model.save(model, path, signatures={"serving_default": model.serve})
    return path


@pytest.fixture(scope="module")
def serve(model_dir):
    return serving.load_serving_signature(model_dir)


def _spec(**changes) -> scoring.RowSpec:
    types = schema_column_types(load_schema(str(SCHEMA)))
    return scoring.RowSpec(types=types, label_key="tips", **changes)


def _embedded_rows(n: int) -> list[list[str]]:
    with EMBEDDED_CSV.open(newline="") as f:
        reader = csv.reader(f)
        return [next(reader) for _ in range(n + 1)]


def _write(path: Path, rows) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return str(path)


class _ListSink:
    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.skips: list[scoring.SkippedRow] = []

    def write(self, path, line, keys, cells) -> None:
        self.rows.append((os.path.basename(path), line, tuple(keys), tuple(cells)))

    def skipped(self, row) -> None:
        self.skips.append(row)


def test_every_row_is_scored_once_in_order_across_batches_and_files(tmp_path, serve):
    rows = _embedded_rows(25)
    a = _write(tmp_path / "a.csv", rows[:13])
    b = _write(tmp_path / "b.csv", [rows[0], *rows[13:]])
    sink = _ListSink()
    report = scoring.score_files(serve, [a, b], _spec(), sink, batch_size=4)
    assert (report.rows_read, report.rows_scored, report.rows_skipped) == (25, 25, 0)
    assert [(f, line) for f, line, _, _ in sink.rows] == [("a.csv", n) for n in range(2, 14)] + [
        ("b.csv", n) for n in range(2, 15)
    ]
    miles = rows[0].index("trip_miles")
    for (_, _, _, cells), row in zip(sink.rows, rows[1:], strict=True):
        expected = 1 / (1 + np.exp(-float(row[miles]) / 10))
        assert float(cells[0]) == pytest.approx(expected, abs=1e-6)
        assert cells[1] == str(int(expected >= 0.5))


def test_batch_size_does_not_change_a_prediction(tmp_path, serve):
    path = _write(tmp_path / "a.csv", _embedded_rows(40))
    one, many = _ListSink(), _ListSink()
    scoring.score_files(serve, [path], _spec(), one, batch_size=1)
    scoring.score_files(serve, [path], _spec(), many, batch_size=1024)
    assert one.rows == many.rows


def test_bad_rows_are_named_by_line_skipped_and_counted(tmp_path, serve):
    rows = _embedded_rows(12)
    header = rows[0]
    miles = header.index("trip_miles")
    fare = header.index("fare")
    rows[2] = rows[2][:-1]  # line 3: a field short
    rows[4][fare] = "twelve"  # line 5: not a number
    rows[6][miles] = ""  # line 7: the signature needs trip_miles
    rows[8][miles] = "5000"  # line 9: the model answers NaN
    path = _write(tmp_path / "span" / "data.csv", rows)
    sink = _ListSink()
    report = scoring.score_files(serve, [path], _spec(), sink, batch_size=8)
    assert (report.rows_read, report.rows_scored, report.rows_skipped) == (12, 8, 4)
    reasons = {s.line: s.reason for s in sink.skips}
    assert sorted(reasons) == [3, 5, 7, 9]
    assert "has 17 fields, the header has 18" in reasons[3]
    assert "column 'fare'" in reasons[5] and "'twelve'" in reasons[5]
    assert "the model rejected the row" in reasons[7]
    assert "not a number" in reasons[9]
    assert [s.line for s in report.skipped] == [3, 5, 7, 9]
    assert {line for _, line, _, _ in sink.rows}.isdisjoint(reasons)


def test_invalid_text_is_a_skipped_row_not_a_failed_span(tmp_path, serve):
    rows = _embedded_rows(5)
    path = tmp_path / "data.csv"
    _write(path, rows)
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b"Credit Card", b"Credit \xff Card", 1).replace(b"Cash", b"C\xffsh")
    path.write_bytes(b"\n".join(lines))
    sink = _ListSink()
    report = scoring.score_files(serve, [str(path)], _spec(), sink)
    assert report.rows_skipped == 1 and sink.skips[0].line == 4
    assert "not valid utf-8 text" in sink.skips[0].reason


def test_a_missing_model_column_fails_the_span_naming_file_and_column(tmp_path, serve):
    rows = [[c for i, c in enumerate(r) if i != 1] for r in _embedded_rows(3)]  # no fare
    path = _write(tmp_path / "data.csv", rows)
    with pytest.raises(scoring.ScoringError, match=r"data\.csv: the header lacks .*fare"):
        scoring.score_files(serve, [path], _spec(), _ListSink())


def test_key_columns_go_out_beside_the_prediction(tmp_path, serve):
    rows = _embedded_rows(3)
    rows[0].append("trip_id")
    for i, r in enumerate(rows[1:]):
        r.append(f"t{i}")
    path = _write(tmp_path / "data.csv", rows)
    sink = _ListSink()
    scoring.score_files(serve, [path], _spec(key_columns=("trip_id", "company")), sink)
    assert [keys[0] for _, _, keys, _ in sink.rows] == ["t0", "t1", "t2"]
    with pytest.raises(scoring.ScoringError, match="key column.*order_id"):
        scoring.score_files(serve, [path], _spec(key_columns=("order_id",)), _ListSink())


def test_writer_publishes_csv_tfrecords_and_summary_at_once(tmp_path, serve):
    rows = _embedded_rows(6)
    rows[3][rows[0].index("trip_miles")] = ""
    path = _write(tmp_path / "span-1" / "data.csv", rows)
    destination = tmp_path / "out" / "predictions"
    with output.PredictionsWriter(
        str(destination), ("company",), serving.prediction_columns(None), base=str(tmp_path)
    ) as writer:
        report = scoring.score_files(serve, [path], _spec(key_columns=("company",)), writer)
        assert not destination.exists()  # nothing visible while writing
        writer.publish({"span": 1})
    assert sorted(os.listdir(tmp_path / "out")) == ["predictions"]  # no temp folder left
    with (destination / output.PREDICTIONS_CSV).open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == report.rows_scored == 5
    assert list(table[0]) == ["file", "line", "company", "probability", "prediction"]
    assert table[0]["file"] == os.path.join("span-1", "data.csv") and table[2]["line"] == "5"
    records = list(tf.data.TFRecordDataset(str(destination / output.PREDICTIONS_TFRECORD), "GZIP"))
    assert len(records) == 5
    example = tf.train.Example.FromString(records[2].numpy())
    assert example.features.feature["line"].int64_list.value == [5]
    assert example.features.feature["probability"].float_list.value[0] == pytest.approx(
        float(table[2]["probability"]), abs=1e-6
    )
    with (destination / output.SKIPPED_CSV).open() as f:
        assert [r["line"] for r in csv.DictReader(f)] == ["4"]
    assert json.loads((destination / output.SUMMARY_JSON).read_text()) == {"span": 1}
    with gzip.open(destination / output.PREDICTIONS_TFRECORD) as f:
        assert f.read(1)  # really GZIP


def test_a_failure_publishes_nothing(tmp_path, serve):
    rows = _embedded_rows(3)
    good = _write(tmp_path / "a.csv", rows)
    bad = _write(tmp_path / "b.csv", [[c for c in r if c != r[1]] for r in rows])
    destination = tmp_path / "out" / "predictions"
    columns = ("probability", "prediction")
    with (
        pytest.raises(scoring.ScoringError),
        output.PredictionsWriter(str(destination), (), columns) as w,
    ):
        scoring.score_files(serve, [good, bad], _spec(), w)
        w.publish({})
    assert os.listdir(tmp_path / "out") == []


def test_memory_does_not_grow_with_the_span(tmp_path, serve):
    """The scorer holds one batch: peak traced Python memory at 20x the rows stays flat."""
    import tracemalloc

    rows = _embedded_rows(200)

    def peak(copies: int) -> int:
        path = tmp_path / f"x{copies}.csv"
        _write(path, [rows[0], *(rows[1:] * copies)])
        sink = output.PredictionsWriter(
            str(tmp_path / f"out{copies}"), (), serving.prediction_columns(None)
        )
        tracemalloc.start()
        scoring.score_files(serve, [str(path)], _spec(), sink, batch_size=256)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        sink.discard()
        return top

    small, large = peak(1), peak(20)  # 200 rows, 4000 rows
    assert large < 2 * small + 2**20


def _reference_example(header, row, types) -> tf.train.Example:
    """What raw_example encodes, built with TensorFlow's own message classes."""
    feature = {}
    for name, value in zip(header, row, strict=True):
        kind, value = types.get(name), value.strip()
        if kind is None or value == "":
            continue
        if kind == "INT":
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
        elif kind == "FLOAT":
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
        else:
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def test_raw_example_is_the_example_tensorflow_builds():
    types = _spec().types
    rows = _embedded_rows(300)
    header = rows[0]
    extreme = list(rows[1])
    extreme[header.index("trip_start_timestamp")] = "-9223372036854775808"
    extreme[header.index("fare")] = "3.4e39"  # beyond float32
    extreme[header.index("company")] = "Taxi Ünïcode ☂"
    for row in [*rows[1:], extreme]:
        ours = tf.train.Example.FromString(serving.raw_example(header, row, types))
        assert ours == _reference_example(header, row, types)
    assert (
        tf.train.Example.FromString(serving.raw_example(["fare"], [""], types))
        == tf.train.Example()
    )


@pytest.mark.parametrize(
    ("column", "cell"),
    [
        ("trip_start_month", "3.5"),
        ("trip_start_month", "  "),
        ("trip_start_timestamp", "9223372036854775808"),
        ("fare", "inf"),
        ("fare", "twelve"),
    ],
)
def test_the_encoder_refuses_what_the_csv_checks_refuse(column, cell):
    from components.example_gen import csv_checks

    types = _spec().types
    header = _embedded_rows(1)[0]
    row = list(_embedded_rows(1)[1])
    row[header.index(column)] = cell
    assert csv_checks.cell_problem(cell, types[column]) is not None
    with pytest.raises(ValueError):
        serving.RowEncoder(header, types)(row)


def test_nan_is_refused_only_where_the_schema_says_so():
    types = _spec().types
    header, row = _embedded_rows(1)
    row = list(row)
    row[header.index("fare")] = "nan"
    assert serving.RowEncoder(header, types)(row)
    with pytest.raises(ValueError):
        serving.RowEncoder(header, types, finite={"fare"})(row)


@pytest.mark.parametrize(
    ("task", "classes", "cells", "kinds"),
    [
        ("multiclass", ("a", "b", "c"), ["0.1", "0.7", "0.2", "b"], ["float"] * 3 + ["bytes"]),
        ("binary", ("no", "yes"), ["0.9", "yes"], ["float", "bytes"]),
        ("regression", (), ["12.5"], ["float"]),
    ],
)
def test_tabular_predictions_keep_their_types_in_the_tfrecords(
    tmp_path, task, classes, cells, kinds
):
    import types as pytypes

    options = pytypes.SimpleNamespace(task=task, classes=classes)
    columns = serving.prediction_columns(options)
    destination = tmp_path / "out"
    with output.PredictionsWriter(str(destination), ("id",), columns, options) as writer:
        writer.write(str(tmp_path / "rows.csv"), 2, ["k1"], cells)
        writer.publish({})
    with (destination / output.PREDICTIONS_CSV).open() as f:
        [row] = list(csv.DictReader(f))
    assert list(row) == ["file", "line", "id", *columns] and list(row.values())[3:] == cells
    [record] = list(tf.data.TFRecordDataset(str(destination / output.PREDICTIONS_TFRECORD), "GZIP"))
    feature = tf.train.Example.FromString(record.numpy()).features.feature
    for column, kind, cell in zip(columns, kinds, cells, strict=True):
        if kind == "float":
            assert feature[column].float_list.value[0] == pytest.approx(float(cell))
        else:
            assert feature[column].bytes_list.value == [cell.encode()]
    assert feature["id"].bytes_list.value == [b"k1"] and feature["line"].int64_list.value == [2]


def _executor_run(tmp_path, model_dir: str, blessed: int, files: list[str], root: str):
    import shutil

    from tfx.types import standard_artifacts

    from components.batch_inference import component
    from components.io.content_fingerprint import files_sha256

    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "model")
    shutil.copytree(model_dir, tmp_path / "model" / component.SERVING_MODEL_DIR)
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", blessed)
    result = standard_artifacts.InferenceResult()
    result.uri = str(tmp_path / "result")
    (tmp_path / "result").mkdir()
    properties = {
        "data_root": root,
        "span": 1,
        "files": json.dumps([os.path.relpath(f, root) for f in files]),
        "content_sha256": files_sha256(files, root)[0],
        "columns": json.dumps(_spec().types),
        "label_key": "tips",
        "key_columns": "[]",
        "nan_free": "[]",
        "encoding": "utf-8",
        "tabular": "",
        "batch_size": 4,
    }
    component.BatchInferenceExecutor().Do(
        {"model": [model], "model_blessing": [blessing]}, {"predictions": [result]}, properties
    )
    return result


def test_pipeline_step_scores_only_a_blessed_model(tmp_path, model_dir):
    rows = _embedded_rows(9)
    rows[3][rows[0].index("fare")] = "x"
    path = _write(tmp_path / "data" / "span-1" / "rows.csv", rows)
    root = str(tmp_path / "data")
    refused = _executor_run(tmp_path / "a", model_dir, 0, [path], root)
    assert refused.get_int_custom_property("scored") == 0
    assert os.listdir(refused.uri) == []
    scored = _executor_run(tmp_path / "b", model_dir, 1, [path], root)
    assert scored.get_int_custom_property("scored") == 1
    assert scored.get_int_custom_property("rows_scored") == 8
    assert scored.get_int_custom_property("rows_skipped") == 1
    assert sorted(os.listdir(scored.uri)) == sorted(
        [
            output.PREDICTIONS_CSV,
            output.PREDICTIONS_TFRECORD,
            output.SKIPPED_CSV,
            output.SUMMARY_JSON,
        ]
    )
