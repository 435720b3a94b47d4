"""components.example_gen.csv_checks: raw CSV checked against the schema's columns and types."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from components.example_gen.csv_checks import (
    BYTES,
    FLOAT,
    INT,
    CsvInputError,
    CsvProblem,
    check_csv_files,
    check_csv_text,
)

ROOT = Path(__file__).resolve().parents[4]
COLUMNS = {"trip_start_hour": INT, "fare": FLOAT, "company": BYTES}
HEADER = "trip_start_hour,fare,company\n"


def check(text: str, columns=COLUMNS, **kwargs) -> tuple[int, list[CsvProblem]]:
    return check_csv_text("drop.csv", io.StringIO(text), columns, **kwargs)


def test_good_file_passes_and_counts_rows():
    rows, problems = check(HEADER + "19,12.45,Flash Cab\n5,0,\n,3.5,Some Co\n")
    assert problems == []
    assert rows == 3


def test_lines_without_line_endings_and_reordered_columns():
    lines = ["company,fare,trip_start_hour", "A,1.5,3", "B,2,4"]
    assert check_csv_text("x.csv", lines, COLUMNS) == (2, [])


def test_quoted_fields_and_nan_are_accepted():
    text = HEADER + '1,"2.5","Cab, Inc."\n2,nan,"multi\nline"\n3, 4.0 ,x\n'
    assert check(text) == (3, [])


def test_too_few_fields_reports_its_line():
    rows, problems = check(HEADER + "1,2.0,a\n2,3.0\n3,4.0,c\n")
    assert rows == 3
    assert len(problems) == 1
    p = problems[0]
    assert (p.path, p.line, p.column) == ("drop.csv", 3, None)
    assert "2 fields" in p.message and "header has 3" in p.message
    assert str(p).startswith("drop.csv:3: ")


def test_too_many_fields_is_reported():
    _, problems = check(HEADER + "1,2.0,a,extra\n")
    assert [(p.line, p.column) for p in problems] == [(2, None)]
    assert "4 fields" in problems[0].message


def test_text_in_float_column_names_line_and_column():
    _, problems = check(HEADER + "1,2.0,a\n2,3.0,b\n3,twelve,c\n")
    assert [(p.line, p.column) for p in problems] == [(4, "fare")]
    assert "'twelve'" in problems[0].message
    assert "FLOAT" in problems[0].message
    assert str(problems[0]) == (
        "drop.csv:4 column 'fare': 'twelve' is not a number (schema type FLOAT)"
    )


def test_text_in_int_column_names_line_and_column():
    _, problems = check(HEADER + "noon,2.0,a\n")
    assert [(p.line, p.column) for p in problems] == [(2, "trip_start_hour")]
    assert "'noon'" in problems[0].message and "INT" in problems[0].message


def test_float_in_int_column_is_reported():
    _, problems = check(HEADER + "3.5,2.0,a\n4,2.0,a\n3.0,1,b\n")
    assert [(p.line, p.column) for p in problems] == [
        (2, "trip_start_hour"),
        (4, "trip_start_hour"),
    ]
    assert "'3.5' is not an integer" in problems[0].message


def test_non_finite_float_is_reported():
    _, problems = check(HEADER + "1,inf,a\n2,-Infinity,b\n3,NaN,c\n")
    assert [(p.line, p.column) for p in problems] == [(2, "fare"), (3, "fare")]
    assert "not a finite number" in problems[0].message


def test_bytes_columns_are_not_type_checked():
    assert check(HEADER + "1,2.0,12345\n2,3.0,3.5\n") == (2, [])


def test_several_problems_in_one_file_are_all_reported():
    _, problems = check(HEADER + "x,y,a\n1,2.0\n")
    assert [(p.line, p.column) for p in problems] == [
        (2, "trip_start_hour"),
        (2, "fare"),
        (3, None),
    ]


def test_max_problems_caps_the_report():
    text = HEADER + "x,1.0,a\n" * 50
    _, problems = check(text, max_problems=5)
    assert len(problems) == 5
    assert [p.line for p in problems] == [2, 3, 4, 5, 6]


def test_missing_required_column_names_the_column():
    rows, problems = check("trip_start_hour,company\n1,a\n")
    assert rows == 0
    assert [(p.line, p.column) for p in problems] == [(1, "fare")]
    assert "missing from the header" in problems[0].message
    assert "'fare'" in str(problems[0])


def test_required_subset_allows_optional_columns_to_be_absent():
    rows, problems = check("trip_start_hour,company\n1,a\n", required=["trip_start_hour"])
    assert (rows, problems) == (1, [])


def test_duplicate_header_column_is_reported():
    _, problems = check("trip_start_hour,fare,company,fare\n1,2,a,3\n")
    assert [(p.line, p.column) for p in problems] == [(1, "fare")]
    assert "more than once" in problems[0].message


def test_empty_file():
    rows, problems = check("")
    assert rows == 0
    assert [(p.line, p.column) for p in problems] == [(None, None)]
    assert "empty" in problems[0].message
    assert str(problems[0]).startswith("drop.csv: ")


def test_header_only_file():
    rows, problems = check(HEADER)
    assert rows == 0
    assert len(problems) == 1
    assert problems[0].line is None
    assert "no data rows" in problems[0].message


def test_header_and_blank_lines_only_has_no_data_rows():
    rows, problems = check(HEADER + "\n\n")
    assert rows == 0
    assert "no data rows" in problems[0].message


def test_unbalanced_quote_is_reported_as_malformed():
    rows, problems = check(HEADER + '1,2.0,a\n2,3.0,"Flash Cab\n3,4.0,c\n')
    assert rows == 1  # rows before the broken one were read
    assert len(problems) == 1
    assert problems[0].line == 3  # where the unterminated field starts
    assert "malformed CSV" in problems[0].message


def test_text_after_closing_quote_is_malformed():
    _, problems = check(HEADER + '1,2.0,"Flash" Cab\n')
    assert [p.line for p in problems] == [2]
    assert "malformed CSV" in problems[0].message


def test_blank_lines_are_skipped_and_line_numbers_stay_physical():
    rows, problems = check(HEADER + "1,2.0,a\n\n\n2,oops,b\n")
    assert rows == 2
    assert [(p.line, p.column) for p in problems] == [(5, "fare")]


def test_line_numbers_count_lines_inside_quoted_fields():
    text = HEADER + '1,2.0,"two\nline"\n2,3.0,"three\nline\nfield"\n3,bad,c\n'
    rows, problems = check(text)
    assert rows == 3
    assert [(p.line, p.column) for p in problems] == [(7, "fare")]


def test_crlf_line_endings():
    text = HEADER.replace("\n", "\r\n") + "1,2.0,a\r\n\r\n2,x,b\r\n"
    assert [(p.line, p.column) for p in check(text)[1]] == [(4, "fare")]


def test_integer_outside_int64_is_reported():
    _, problems = check(HEADER + "99999999999999999999,2.0,a\n")
    assert [(p.line, p.column) for p in problems] == [(2, "trip_start_hour")]


def test_whitespace_only_numeric_cell_is_reported():
    _, problems = check(HEADER + "1,2.0,a\n ,3.0,b\n")
    assert [(p.line, p.column) for p in problems] == [(3, "trip_start_hour")]


# check_csv_files ----------------------------------------------------------------------


def test_check_csv_files_sums_rows(tmp_path):
    a = tmp_path / "a.csv"
    b = tmp_path / "b.csv"
    a.write_text(HEADER + "1,2.0,x\n2,3.0,y\n")
    b.write_text(HEADER + "3,4.0,z\n")
    assert check_csv_files([str(a), str(b)], COLUMNS) == 3


def test_check_csv_files_reports_every_broken_file(tmp_path):
    good = tmp_path / "good.csv"
    short = tmp_path / "short.csv"
    texty = tmp_path / "texty.csv"
    empty = tmp_path / "empty.csv"
    good.write_text(HEADER + "1,2.0,x\n")
    short.write_text(HEADER + "1,2.0,x\n1,2.0\n")
    texty.write_text(HEADER + "1,abc,x\n")
    empty.write_text("")
    with pytest.raises(CsvInputError) as info:
        check_csv_files([str(p) for p in (good, short, texty, empty)], COLUMNS)
    message = str(info.value)
    assert message.startswith("3 problem(s)")
    assert f"{short}:3: has 2 fields" in message
    assert f"{texty}:2 column 'fare'" in message
    assert f"{empty}: file is empty" in message
    assert str(good) not in message
    assert isinstance(info.value, ValueError)


def test_check_csv_files_truncates_a_long_report(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "x,1.0,a\n" * 15)
    with pytest.raises(CsvInputError) as info:
        check_csv_files([str(bad), str(bad)], COLUMNS)
    message = str(info.value)
    assert message.startswith("30 problem(s)")
    assert "... and 10 more" in message


def test_check_csv_files_rejects_non_utf8(tmp_path):
    latin = tmp_path / "latin1.csv"
    latin.write_bytes((HEADER + "1,2.0,Caf\xe9\n").encode("latin-1"))
    with pytest.raises(CsvInputError, match="not valid UTF-8") as info:
        check_csv_files([str(latin)], COLUMNS)
    offset = len(HEADER) + len("1,2.0,Caf")
    assert f"{latin}:2 column 'company'" in str(info.value)
    assert f"byte e9 at byte offset {offset} of the file" in str(info.value)
    # Declared as Latin-1, the same file is fine.
    assert check_csv_files([str(latin)], COLUMNS, encoding="latin-1") == 1


def test_check_csv_files_needs_files():
    with pytest.raises(CsvInputError, match="no CSV files"):
        check_csv_files([], COLUMNS)


def test_real_data_drop_passes_with_the_curated_schema():
    # Parsed here without importing TFX (pipeline.definition.schema_columns does the same).
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = text_format.Parse(
        (ROOT / "schema" / "taxi" / "schema.pbtxt").read_text(), schema_pb2.Schema()
    )
    columns = {feat.name: schema_pb2.FeatureType.Name(feat.type) for feat in schema.feature}
    files = sorted(str(p) for p in (ROOT / "data" / "taxi").glob("span-*/*.csv"))
    assert files
    assert check_csv_files(files, columns) > 0
