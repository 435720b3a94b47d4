"""components.io.csv_text, and both CSV readers on files as spreadsheets write them.

Each class of file (a UTF-8 byte-order mark, another encoding, bytes that are
not valid text, compressed bytes, non-finite numbers, an absurdly long cell) is
checked on the CSV checks (which run before TFX's reader), on the Arrow ingest
(`csv_reader="arrow"`) and on TFX's reader path (`csv_reader="tfx"`).
"""

from __future__ import annotations

import bz2
import gzip
import itertools
from pathlib import Path

import pytest

from components.example_gen import arrow_csv, csv_ingest
from components.example_gen.csv_checks import BYTES, FLOAT, INT, CsvInputError, check_csv_files
from components.io import csv_text
from pipeline.config import PROJECT_ROOT

EMBEDDED_CSV = PROJECT_ROOT / "data" / "taxi" / "span-1" / "data.csv"
COLUMNS = {"trip_start_hour": INT, "fare": FLOAT, "company": BYTES}
HEADER = "trip_start_hour,fare,company\n"
BOM = b"\xef\xbb\xbf"


def _write(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _sample(rows: int = 200) -> bytes:
    with EMBEDDED_CSV.open("rb") as f:
        return b"".join(itertools.islice(f, rows + 1))


@pytest.fixture(scope="module")
def taxi_columns() -> dict[str, str]:
    from components.validation.schema_importer import load_schema, schema_column_types

    return schema_column_types(load_schema(str(PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt")))


# --- the two readers, as ExampleGen runs them ------------------------------------


def _arrow_examples(path: str, columns, encoding="utf-8", finite=frozenset()) -> list[bytes]:
    """The Arrow ingest's path: header, byte ranges after it, blocks, encoding."""
    header = arrow_csv.read_header(path, encoding)
    start = arrow_csv.data_start(path)
    size = Path(path).stat().st_size
    piece = csv_ingest.Piece(path, start, size, 0)
    out: list[bytes] = []
    for block in csv_ingest.read_blocks(piece, start, 1024):
        batch = arrow_csv.parse_block(
            block, header, columns, path, encoding=encoding, finite=finite
        )
        out += arrow_csv.encode_batch(batch, columns)
    return sorted(out)


def _tfx_examples(path: str, encoding="utf-8") -> list[bytes]:
    """TFX's reader path (the executor's _CheckedCsvToExample) in a Beam pipeline."""
    import apache_beam as beam
    import tensorflow as tf
    from google.protobuf import json_format

    from components.example_gen import csv_example_gen, driver

    config = driver.packed_custom_config({"columns": {}, "encoding": encoding})
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


READERS = ["arrow", "tfx"]


def _examples(reader: str, path: str, columns, encoding="utf-8") -> list[bytes]:
    if reader == "arrow":
        return _arrow_examples(path, columns, encoding)
    return _tfx_examples(path, encoding)


# --- byte-order mark ------------------------------------------------------------------


def test_bom_is_not_part_of_the_header(tmp_path):
    path = _write(tmp_path, "bom.csv", BOM + HEADER.encode() + b"1,2.0,a\n")
    assert csv_text.read_header(path) == ["trip_start_hour", "fare", "company"]
    assert csv_text.sniff(path) == 3
    assert check_csv_files([path], COLUMNS) == 1


@pytest.mark.parametrize("reader", READERS)
def test_bom_file_gives_the_plain_files_examples(tmp_path, taxi_columns, reader):
    data = _sample()
    (tmp_path / "plain").mkdir()
    (tmp_path / "bom").mkdir()
    plain = _write(tmp_path / "plain", "data.csv", data)
    bom = _write(tmp_path / "bom", "data.csv", BOM + data)
    assert check_csv_files([bom], taxi_columns) == 200
    ours = _examples(reader, bom, taxi_columns)
    assert len(ours) == 200
    assert ours == _examples(reader, plain, taxi_columns)


def test_bom_in_a_latin1_dataset_is_an_error(tmp_path):
    path = _write(tmp_path, "bom.csv", BOM + HEADER.encode() + b"1,2.0,a\n")
    with pytest.raises(CsvInputError, match="byte-order mark.*latin-1"):
        check_csv_files([path], COLUMNS, encoding="latin-1")


# --- encodings and invalid bytes ------------------------------------------------------


@pytest.mark.parametrize("reader", READERS)
def test_latin1_dataset_reads_to_utf8_examples(tmp_path, reader):
    (tmp_path / "latin").mkdir()
    (tmp_path / "utf8").mkdir()
    text = HEADER + "1,2.5,Caf\xe9 Cab\n2,3.0,Na\xefve\n"
    latin = _write(tmp_path / "latin", "data.csv", text.encode("latin-1"))
    utf8 = _write(tmp_path / "utf8", "data.csv", text.encode("utf-8"))
    assert check_csv_files([latin], COLUMNS, encoding="latin-1") == 2
    ours = _examples(reader, latin, COLUMNS, "latin-1")
    assert ours == _examples(reader, utf8, COLUMNS)
    assert any("Café Cab".encode() in e for e in ours)


def test_invalid_utf8_names_line_column_and_byte_offset(tmp_path):
    head = HEADER + "1,2.0,a\n"
    path = _write(tmp_path, "bad.csv", (head + "2,3.0,").encode() + b"Caf\xe9\n3,4.0,c\n")
    with pytest.raises(CsvInputError) as info:
        check_csv_files([path], COLUMNS)
    offset = len(head) + len("2,3.0,Caf")
    assert (
        f"{path}:3 column 'company': not valid UTF-8 text: byte e9 at byte offset {offset} "
        "of the file"
    ) in str(info.value)


def test_invalid_bytes_in_the_header_and_in_a_quoted_multiline_cell(tmp_path):
    header = _write(tmp_path, "header.csv", b"trip_start_hour,fare,comp\xffany\n1,2,a\n")
    with pytest.raises(CsvInputError, match=r"header.csv:1: field 3: not valid UTF-8"):
        check_csv_files([header], COLUMNS)
    multi = _write(tmp_path, "multi.csv", HEADER.encode() + b'1,2,"two\nlines \xe9"\n')
    with pytest.raises(CsvInputError, match=r"multi.csv:3 column 'company'"):
        check_csv_files([multi], COLUMNS)


@pytest.mark.parametrize("reader", READERS)
def test_readers_refuse_invalid_bytes(tmp_path, reader):
    """Neither reader stores what the file did not say (the checks, run first, name the byte)."""
    path = _write(tmp_path, "data.csv", HEADER.encode() + b"1,2.0,Caf\xe9\n")
    # Arrow declines (the executor then runs the checks); TFX's path raises the
    # decode error with file, line and offset (Beam wraps it in its own error).
    expected = "invalid UTF8" if reader == "arrow" else r"data.csv:2 .*not valid UTF-8"
    with pytest.raises(Exception, match=expected):
        _examples(reader, path, COLUMNS)


def test_encodings_that_cut_lines_differently_are_refused():
    assert csv_text.check_encoding("latin-1") == "iso8859-1"
    assert csv_text.check_encoding("UTF8") == "utf-8"
    with pytest.raises(csv_text.CsvTextError, match="convert the files to UTF-8"):
        csv_text.check_encoding("utf-16")
    with pytest.raises(csv_text.CsvTextError, match="unknown text encoding"):
        csv_text.check_encoding("klingon")


# --- compressed bytes ---------------------------------------------------------------


@pytest.mark.parametrize(
    "compress,name,command",
    [
        (gzip.compress, "gzip", "gunzip -c data.csv.gz > data.csv"),
        (bz2.compress, "bzip2", "bunzip2"),
    ],
)
def test_compressed_file_is_refused_naming_it_and_what_to_do(tmp_path, compress, name, command):
    disguised = _write(tmp_path, "data.csv", compress(HEADER.encode() + b"1,2.0,a\n"))
    with pytest.raises(CsvInputError) as info:
        check_csv_files([disguised], COLUMNS)
    message = str(info.value)
    assert f"{disguised}: the file is {name}-compressed" in message
    assert "codec" not in message, "no raw Python exception text"
    named = _write(tmp_path, "data.csv.gz", compress(HEADER.encode() + b"1,2.0,a\n"))
    with pytest.raises(csv_text.CsvTextError) as info:
        csv_text.read_header(named)
    assert name in str(info.value) and command.split()[0] in str(info.value)
    if name == "gzip":
        assert command in str(info.value)


@pytest.mark.parametrize("reader", READERS)
def test_readers_refuse_compressed_bytes(tmp_path, reader):
    path = _write(tmp_path, "data.csv", gzip.compress(HEADER.encode() + b"1,2.0,a\n"))
    with pytest.raises(Exception, match="gzip-compressed"):
        _examples(reader, path, COLUMNS)


# --- non-finite numbers --------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "NaN", "-nan"])
def test_nan_is_refused_where_the_schema_says_finite(tmp_path, value):
    path = _write(tmp_path, "data.csv", (HEADER + f"1,{value},a\n").encode())
    assert check_csv_files([path], COLUMNS) == 1  # NaN allowed by default
    with pytest.raises(CsvInputError, match=r"data.csv:2 column 'fare'.*disallow_nan"):
        check_csv_files([path], COLUMNS, finite={"fare"})


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity"])
def test_infinity_is_refused_in_any_float_column(tmp_path, value):
    path = _write(tmp_path, "data.csv", (HEADER + f"1,{value},a\n").encode())
    with pytest.raises(CsvInputError, match=r"data.csv:2 column 'fare'.*not a finite number"):
        check_csv_files([path], COLUMNS)


def test_arrow_reader_refuses_nan_in_finite_columns_only(tmp_path):
    path = _write(tmp_path, "data.csv", (HEADER + "1,nan,a\n").encode())
    assert len(_arrow_examples(path, COLUMNS)) == 1
    with pytest.raises(arrow_csv.ArrowCsvError, match="'fare' holds NaN"):
        _arrow_examples(path, COLUMNS, finite=frozenset({"fare"}))
    inf = _write(tmp_path, "inf.csv", (HEADER + "1,-inf,a\n").encode())
    with pytest.raises(arrow_csv.ArrowCsvError, match="infinite"):
        _arrow_examples(inf, COLUMNS)


def test_taxi_schema_keeps_money_and_distance_finite():
    from components.validation.schema_importer import load_schema, schema_nan_free_columns

    schema = load_schema(str(PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt"))
    assert schema_nan_free_columns(schema) == ["fare", "tips", "trip_miles"]
    for f in schema.feature:
        if f.name in ("fare", "tips", "trip_miles"):
            assert f.float_domain.disallow_inf


# --- absurd cells --------------------------------------------------------------------


def test_longest_cells_are_measured_and_warned_about(tmp_path):
    from components.validation.checks import LONG_CELL, long_cell_findings
    from components.validation.findings import WARN

    path = _write(tmp_path, "data.csv", (HEADER + "1,2.0,a\n2,3.0," + "x" * 70000 + "\n").encode())
    longest: dict[str, int] = {}
    check_csv_files([path], COLUMNS, cell_chars=longest)
    assert longest == {"company": 70000}
    [finding] = long_cell_findings(longest, "span 1")
    assert (finding.feature, finding.anomaly, finding.severity) == ("company", LONG_CELL, WARN)
    assert long_cell_findings({"company": 100}, "span 1") == []


def test_a_header_that_merely_starts_like_bzip2_is_text(tmp_path):
    path = _write(tmp_path, "data.csv", b"BZhours,fare\n1,2.0\n")
    assert csv_text.read_header(path) == ["BZhours", "fare"]
