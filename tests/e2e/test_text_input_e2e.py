"""CSV files as spreadsheets and other tools write them, through whole runs.

A byte-order mark ingests to the very same examples as the plain file (both
readers); bytes that are not valid UTF-8, a gzip file named `.csv`, and a NaN
in a column the schema keeps finite stop the run naming the file and the line,
with no Examples artifact live in ML Metadata; a megabyte cell in a
categorical column is a warning in the gate's report.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from e2e_support import live_examples, small_config, split_examples, write_sample

from tfxp.local.runner import PipelineRunError, run_local

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROWS = 300


def _ingest(tmp: Path, **changes):
    config = small_config(tmp, **changes)
    run_local(config, to_nodes=["CsvExampleGen"], printer=lambda _: None)
    [artifact] = live_examples(config.metadata_path)
    # The reader asked for wrote them (the Arrow ingest did not fall back to TFX's).
    assert artifact.custom_properties["csv_reader"].string_value == config.csv_reader
    return split_examples(config.pipeline_root)


def _fails(tmp: Path, **changes) -> str:
    config = small_config(tmp, **changes)
    with pytest.raises(PipelineRunError) as info:
        run_local(config, to_nodes=["CsvExampleGen"], printer=lambda _: None)
    assert live_examples(config.metadata_path) == [], "a failed ingest must publish nothing"
    return str(info.value)


def _edit_cell(path: Path, line: int, column: str, value: bytes) -> int:
    """Sets `column` of physical line `line` to `value`; returns the cell's byte offset."""
    lines = path.read_bytes().splitlines(keepends=True)
    index = lines[0].rstrip(b"\r\n").split(b",").index(column.encode())
    fields = lines[line - 1].rstrip(b"\n").split(b",")
    offset = sum(len(x) for x in lines[: line - 1]) + sum(len(f) + 1 for f in fields[:index])
    fields[index] = value
    lines[line - 1] = b",".join(fields) + b"\n"
    path.write_bytes(b"".join(lines))
    return offset


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("plain")
    write_sample(tmp / "data", rows=ROWS)
    return _ingest(tmp)


@pytest.mark.parametrize("reader", ["arrow", "tfx"])
def test_byte_order_mark_gives_the_plain_files_examples(tmp_path, plain, reader):
    path = write_sample(tmp_path / "data", rows=ROWS)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    ours = _ingest(tmp_path, csv_reader=reader)
    assert sorted(ours) == ["Split-eval", "Split-train"]
    assert sum(sum(c.values()) for c in ours.values()) == ROWS
    assert ours == plain, "the examples of a file with a BOM must equal the plain file's"
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_invalid_utf8_names_file_line_column_and_offset(tmp_path):
    path = write_sample(tmp_path / "data", rows=ROWS)
    offset = _edit_cell(path, 42, "company", b"Caf\xe9 Cab")
    message = _fails(tmp_path)
    assert f"{path}:42 column 'company'" in message, message
    expected = f"not valid UTF-8 text: byte e9 at byte offset {offset + 3} of the file"
    assert expected in message, message


def test_gzip_named_csv_is_refused_naming_the_file(tmp_path):
    path = write_sample(tmp_path / "data", rows=ROWS)
    path.write_bytes(gzip.compress(path.read_bytes()))
    message = _fails(tmp_path)
    assert str(path) in message and "gzip-compressed" in message and "gunzip" in message
    assert "codec can't decode" not in message, "no raw Python exception text"


@pytest.mark.parametrize("value", [b"nan", b"inf"])
def test_non_finite_fare_names_file_line_and_column(tmp_path, value):
    path = write_sample(tmp_path / "data", rows=ROWS)
    _edit_cell(path, 17, "fare", value)
    message = _fails(tmp_path)
    assert f"{path}:17 column 'fare'" in message, message


def test_megabyte_cell_is_a_warning_in_the_gate_report(tmp_path):
    path = write_sample(tmp_path / "data", rows=ROWS)
    _edit_cell(path, 9, "company", b"x" * (2 * 1024 * 1024))
    config = small_config(tmp_path)
    summary = run_local(config, to_nodes=["ValidationGate"], printer=lambda _: None)
    findings = json.loads((Path(config.report_dir) / f"{summary.run_id}.json").read_text())
    long_cells = [f for f in findings["findings"] if f["anomaly"] == "STRING_CELL_TOO_LONG"]
    assert [(f["feature"], f["severity"]) for f in long_cells] == [("company", "WARN")]
    assert findings["decision"] == "WARN"
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_latin1_dataset_ingests_to_the_utf8_files_examples(tmp_path):
    utf8 = write_sample(tmp_path / "utf8" / "data", rows=ROWS)
    _edit_cell(utf8, 5, "company", "Café Cab".encode())
    latin = tmp_path / "latin" / "data" / "span-1" / "data.csv"
    latin.parent.mkdir(parents=True)
    latin.write_bytes(utf8.read_text(encoding="utf-8").encode("latin-1"))
    message = _fails(tmp_path / "latin")  # undeclared, the é is an invalid UTF-8 byte
    assert f"{latin}:5 column 'company': not valid UTF-8" in message, message
    shutil.rmtree(tmp_path / "latin" / "run")
    ours = _ingest(tmp_path / "latin", csv_encoding="latin-1")
    assert ours == _ingest(tmp_path / "utf8")
    assert any("Café Cab".encode() in e for split in ours.values() for e in split)
