"""The Arrow CSV reader encodes exactly what CsvExampleGen builds, byte for byte."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import pytest
import tensorflow as tf

from components.example_gen import arrow_csv
from components.example_gen.csv_checks import FLOAT, INT
from components.validation.schema_importer import load_schema, schema_column_types
from pipeline.config import PROJECT_ROOT

EMBEDDED_CSV = PROJECT_ROOT / "data" / "taxi" / "span-1" / "data.csv"


@pytest.fixture(scope="module")
def columns() -> dict[str, str]:
    return schema_column_types(load_schema(str(PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt")))


def _tfx_examples(path: Path, columns: dict[str, str]) -> list[bytes]:
    """What TFX's CsvExampleGen builds per row (its _int/_float/_bytes handlers), serialized
    deterministically as TFX's partitioning does."""
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    header, out = rows[0], []
    for row in rows[1:]:
        if not row:
            continue
        feature = {}
        for name, cell in zip(header, row, strict=True):
            if columns[name] == INT:
                value = tf.train.Int64List(value=[int(cell)] if cell else [])
                feature[name] = tf.train.Feature(int64_list=value)
            elif columns[name] == FLOAT:
                value = tf.train.FloatList(value=[float(cell)] if cell else [])
                feature[name] = tf.train.Feature(float_list=value)
            else:
                value = tf.train.BytesList(value=[cell.encode()] if cell else [])
                feature[name] = tf.train.Feature(bytes_list=value)
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        out.append(example.SerializeToString(deterministic=True))
    return out


def _arrow_examples(path: Path, columns: dict[str, str]) -> list[bytes]:
    return [
        record
        for batch in arrow_csv.read_batches(str(path), columns)
        for record in arrow_csv.encode_batch(batch, columns)
    ]


def _sample(tmp_path: Path, rows: int, edit=None) -> Path:
    with EMBEDDED_CSV.open() as src:
        lines = list(itertools.islice(src, rows + 1))
    if edit:
        lines = edit(lines)
    path = tmp_path / "data.csv"
    path.write_text("".join(lines))
    return path


def test_embedded_sample_is_byte_identical(tmp_path, columns):
    path = _sample(tmp_path, 3000)
    ours, theirs = _arrow_examples(path, columns), _tfx_examples(path, columns)
    assert len(ours) == 3000
    assert ours == theirs


def test_small_batches_missing_values_long_strings_and_blank_lines(tmp_path, columns, monkeypatch):
    def edit(lines):
        header = lines[0].rstrip("\n").split(",")
        out = [lines[0]]
        for i, line in enumerate(lines[1:]):
            fields = line.rstrip("\n").split(",")
            fields[i % len(header)] = ""  # a missing value in every column in turn
            if i % 7 == 0:
                fields[header.index("company")] = "x" * (100 + 60 * (i % 50))  # 2-byte varints
            if i % 11 == 0:
                fields[header.index("fare")] = "1e-3"
            out.append(",".join(fields) + "\n")
            if i % 50 == 0:
                out.append("\n")
        return out

    path = _sample(tmp_path, 600, edit)
    monkeypatch.setattr(arrow_csv, "BLOCK_SIZE", 1 << 14)  # many record batches
    assert _arrow_examples(path, columns) == _tfx_examples(path, columns)


@pytest.mark.parametrize(
    "column,value",
    [
        ("fare", "twelve"),
        ("fare", "inf"),
        ("trip_seconds", "3.5"),
        ("trip_seconds", "99999999999999999999"),
    ],
)
def test_declines_what_it_cannot_read_exactly(tmp_path, columns, column, value):
    def edit(lines):
        header = lines[0].rstrip("\n").split(",")
        fields = lines[5].rstrip("\n").split(",")
        fields[header.index(column)] = value
        lines[5] = ",".join(fields) + "\n"
        return lines

    path = _sample(tmp_path, 20, edit)
    with pytest.raises(arrow_csv.ArrowCsvError):
        _arrow_examples(path, columns)


def test_declines_short_rows_unknown_columns_and_empty_files(tmp_path, columns):
    short = _sample(tmp_path, 20, lambda lines: lines[:3] + [lines[3].rsplit(",", 2)[0] + "\n"])
    with pytest.raises(arrow_csv.ArrowCsvError):
        _arrow_examples(short, columns)
    extra = tmp_path / "extra.csv"
    extra.write_text("a,b\n1,2\n")
    with pytest.raises(arrow_csv.ArrowCsvError):
        _arrow_examples(extra, {"a": INT})
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(arrow_csv.ArrowCsvError):
        _arrow_examples(empty, columns)


def test_edge_values_are_byte_identical(tmp_path, columns):
    """Negative and 64-bit integers (10-byte varints), long and non-ASCII strings
    (2- and 3-byte length varints), NaN, and a column with no value at all."""
    header = ["i", "f", "s", "none"]
    kinds = {"i": INT, "f": FLOAT, "s": "BYTES", "none": INT}
    ints = ["-1", "0", "127", "128", "-9223372036854775808", "9223372036854775807", "", "300"]
    floats = ["1.5", "-0.0", "nan", "", "3.4e38", "1e-45", "2", "0.1"]
    strings = ["a", "", "é" * 70, "x" * 20000, "comma free", "", "z", "\u4e2d"]
    lines = [",".join(header)] + [
        ",".join([i, f, s, ""]) for i, f, s in zip(ints, floats, strings, strict=True)
    ]
    path = tmp_path / "edge.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    batch = next(arrow_csv.read_batches(str(path), kinds))
    ours = arrow_csv.encode_batch(batch, kinds, empty_columns={"none"})

    expected = []
    for i, f, s in zip(ints, floats, strings, strict=True):
        feature = {
            "i": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(i)] if i else [])),
            "f": tf.train.Feature(float_list=tf.train.FloatList(value=[float(f)] if f else [])),
            "s": tf.train.Feature(bytes_list=tf.train.BytesList(value=[s.encode()] if s else [])),
            "none": tf.train.Feature(),  # CsvExampleGen: a column with no value has no type
        }
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        expected.append(example.SerializeToString(deterministic=True))
    assert ours == expected
